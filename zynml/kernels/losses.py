"""Cross-entropy, and fused linear + cross-entropy."""
from __future__ import annotations

__all__: list[str] = []
