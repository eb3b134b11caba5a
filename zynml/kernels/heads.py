"""Attention heads moved between a transformer's token-major rows [batch * seq, heads * d]
and attention's [batch, heads, seq, d] (source: attention_heads.zyn). One compile serves
every sequence length and head count: the kernels take those from the arrays, dynamic."""
from __future__ import annotations

from typing import Any

from ..errors import ZynMLError
from .basic import reshaped
from .library import call

__all__ = ["split_heads", "merge_heads", "merge_qkv"]


def split_heads(qkv: Any, batch: int, heads: int, parts: int = 3, *,
                device: str | None = None):
    """The `parts` arrays [batch, heads, seq, head_dim] side by side in the rows of qkv
    [batch * seq, parts * heads * head_dim]: q, k, v of a fused projection (3, one
    kernel), or one array such as a gradient of merge_heads (1)."""
    if parts not in (1, 3):
        raise ZynMLError(f"split_heads takes 1 array (parts=1) or a fused projection's "
                         f"q, k and v (parts=3), not parts={parts}")
    head_dim = qkv.shape[1] // (parts * heads)
    pipeline = "split_qkv" if parts == 3 else "split_heads"
    result = call("attention_heads", pipeline, {"x": qkv, "batch": batch, "d": head_dim},
                  device)
    return tuple(result) if parts == 3 else (result,)


def merge_heads(o: Any, *, device: str | None = None):
    """[batch, heads, seq, head_dim] -> [batch * seq, heads * head_dim]. For one query
    row (a decode step) the two layouts are the same bytes: o itself, seen so."""
    shape = tuple(int(n) for n in o.shape)
    if len(shape) == 4 and shape[2] == 1:
        return reshaped(o, (shape[0], shape[1] * shape[3]))
    return call("attention_heads", "merge_heads", {"o": o}, device)


def merge_qkv(dq: Any, dk: Any, dv: Any, *, device: str | None = None):
    """The gradient of split_heads: [batch * seq, 3 * heads * head_dim]."""
    return call("attention_heads", "merge_qkv", {"dq": dq, "dk": dk, "dv": dv}, device)
