"""Flash attention forward and backward, KV-cache attention."""
from __future__ import annotations

__all__: list[str] = []
