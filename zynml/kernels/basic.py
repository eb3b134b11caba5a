"""The plain operations the device API runs: matmul, softmax, norms, embedding, AdamW."""
from __future__ import annotations

__all__: list[str] = []
