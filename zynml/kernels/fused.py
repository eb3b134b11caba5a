"""Fused operations of kernel-library.md (owner: fused ops work)."""
from __future__ import annotations

__all__: list[str] = []
