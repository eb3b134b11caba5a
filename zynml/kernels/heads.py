"""Attention heads moved between a transformer's token-major rows [batch * seq, heads * d]
and attention's [batch, heads, seq, d] (source: attention_heads.zyn). One compile serves
every sequence length and head count: the kernels take those from the arrays, dynamic."""
from __future__ import annotations

from typing import Any

from .library import call

__all__ = ["split_heads", "merge_heads", "merge_qkv"]


def split_heads(qkv: Any, batch: int, heads: int, parts: int = 3, *,
                device: str | None = None):
    """The `parts` arrays [batch, heads, seq, head_dim] side by side in the rows of qkv
    [batch * seq, parts * heads * head_dim]: q, k, v of a fused projection (3), or one
    gradient of merge_heads (1)."""
    head_dim = qkv.shape[1] // (parts * heads)
    return tuple(call("attention_heads", "split_heads",
                      {"x": qkv, "batch": batch, "parts": parts, "part": part,
                       "d": head_dim}, device) for part in range(parts))


def merge_heads(o: Any, *, device: str | None = None):
    """[batch, heads, seq, head_dim] -> [batch * seq, heads * head_dim]."""
    return call("attention_heads", "merge_heads", {"o": o}, device)


def merge_qkv(dq: Any, dk: Any, dv: Any, *, device: str | None = None):
    """The gradient of split_heads: [batch * seq, 3 * heads * head_dim]."""
    return call("attention_heads", "merge_qkv", {"dq": dq, "dk": dk, "dv": dv}, device)
