"""The pieces of a decode step that the other modules lack: RoPE with the KV-cache write
at a run-time position (rope_kv_cache.zyn), the same write without RoPE
(kv_cache_write.zyn) and GPT-2's input rows at a run-time position
(decode_embedding.zyn), RMSNorm written into a given array of any float dtype
(rms_norm_into.zyn: a bf16 model's normed rows in bf16), and the greedy choice of each
row (argmax_rows.zyn). zynml/models/llama.py and gpt_decode.py build decoders from them
and the rest of the library.

A run-time position is a number or a 0-d integer array of the inputs' device: a
captured graph (zynml.capture) reads the array at every replay, so the host writes the
next position into it in place and nothing is captured again.
"""
from __future__ import annotations

from typing import Any

from ..errors import ZynMLError
from .library import device_of, program

__all__ = ["rope_kv_cache", "kv_cache_write", "decode_embedding", "rms_norm_into",
           "argmax_rows"]


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(n) for n in x.shape)


def rope_kv_cache(qkv: Any, cos: Any, sin: Any, pos: Any, k_cache: Any, v_cache: Any, *,
                  heads: int, device: str | None = None):
    """Rotate q and k of a fused projection qkv [batch, (heads + 2 * kv_heads) * d] at
    position `pos` (rotate_half RoPE, cos and sin [positions, d]); write the rotated k
    and v into the caches [batch, kv_heads, positions, d] at `pos`, in place; return q
    [batch, heads, 1, d]."""
    fn = "rope_kv_cache"
    if len(_shape(k_cache)) != 4 or _shape(v_cache) != _shape(k_cache):
        raise ZynMLError(f"{fn}: k_cache and v_cache must be one shape [batch, kv_heads, "
                         f"positions, head_dim], got {_shape(k_cache)} and {_shape(v_cache)}")
    batch, kv_heads, positions, d = _shape(k_cache)
    if d % 2:
        raise ZynMLError(f"{fn}: the head dim {d} must be even (RoPE rotates pairs)")
    if _shape(qkv) != (batch, (heads + 2 * kv_heads) * d):
        raise ZynMLError(f"{fn}: qkv {_shape(qkv)} is not [batch, (heads + 2 * kv_heads) "
                         f"* head_dim] = [{batch}, {(heads + 2 * kv_heads) * d}]")
    for name, table in (("cos", cos), ("sin", sin)):
        if _shape(table) != (positions, d):
            raise ZynMLError(f"{fn}: {name} {_shape(table)} is not [positions, head_dim] "
                             f"= [{positions}, {d}]")
    _check_position(fn, pos, positions)
    out = program("rope_kv_cache", device or device_of([qkv, k_cache]))(
        qkv=qkv, cos=cos, sin=sin, pos=pos, k_cache=k_cache, v_cache=v_cache, heads=heads)
    return out["q"]


def kv_cache_write(qkv: Any, pos: Any, k_cache: Any, v_cache: Any, *,
                   device: str | None = None):
    """Write k and v of a fused projection qkv [batch, 3 * heads * d] into the caches
    [batch, heads, positions, d] at position `pos`, in place; return q [batch, heads,
    1, d]."""
    fn = "kv_cache_write"
    if len(_shape(k_cache)) != 4 or _shape(v_cache) != _shape(k_cache):
        raise ZynMLError(f"{fn}: k_cache and v_cache must be one shape [batch, heads, "
                         f"positions, head_dim], got {_shape(k_cache)} and {_shape(v_cache)}")
    batch, heads, positions, d = _shape(k_cache)
    if _shape(qkv) != (batch, 3 * heads * d):
        raise ZynMLError(f"{fn}: qkv {_shape(qkv)} is not [batch, 3 * heads * head_dim] "
                         f"= [{batch}, {3 * heads * d}]")
    _check_position(fn, pos, positions)
    out = program("kv_cache_write", device or device_of([qkv, k_cache]))(
        qkv=qkv, pos=pos, k_cache=k_cache, v_cache=v_cache)
    return out["q"]


def decode_embedding(wte: Any, wpe: Any, tokens: Any, pos: Any, *,
                     device: str | None = None):
    """GPT-2's input rows of one decode step, [batch, c]: wte[tokens] + wpe[pos]."""
    fn = "decode_embedding"
    if len(_shape(wte)) != 2 or len(_shape(wpe)) != 2 or _shape(wpe)[1] != _shape(wte)[1] \
            or len(_shape(tokens)) != 1:
        raise ZynMLError(f"{fn}: wte [vocab, c], wpe [positions, c] and tokens [batch] "
                         f"expected, got {_shape(wte)}, {_shape(wpe)} and {_shape(tokens)}")
    _check_position(fn, pos, _shape(wpe)[0])
    return program("decode_embedding", device or device_of([wte, tokens]))(
        wte=wte, wpe=wpe, tokens=tokens, pos=pos)["x"]


def rms_norm_into(y: Any, x: Any, weight: Any, eps: float = 1e-5, *,
                  device: str | None = None):
    """y[r] = x[r] * weight / sqrt(mean(x[r]^2) + eps) for x [rows, dim], computed in f32
    and written into y [rows, dim] (any float dtype), in place; returns y."""
    if _shape(y) != _shape(x) or len(_shape(x)) != 2 or _shape(weight) != _shape(x)[1:]:
        raise ZynMLError(f"rms_norm_into: y {_shape(y)}, x {_shape(x)} and weight "
                         f"{_shape(weight)} must be [rows, dim], [rows, dim] and [dim]")
    program("rms_norm_into", device or device_of([y, x]))(y=y, x=x, w=weight,
                                                          eps=float(eps))
    return y


def argmax_rows(x: Any, *, device: str | None = None):
    """The index of each row's largest value, x [rows, cols] -> i64 [rows] (the first
    of ties, as numpy's argmax)."""
    if len(_shape(x)) != 2 or 0 in _shape(x):
        raise ZynMLError(f"argmax_rows: x must be [rows, cols] with cols > 0, got "
                         f"{_shape(x)}")
    return program("argmax_rows", device or device_of([x]))(x=x)["best"]


def _check_position(fn: str, pos: Any, positions: int) -> None:
    """A number is checked here; a 0-d array of the host too; one on a GPU is not read
    (that would wait for the GPU): a position past the cache is the caller's error."""
    import numpy as np
    if isinstance(pos, bool):
        raise ZynMLError(f"{fn}: pos must be an integer or a 0-d integer array, not bool")
    if isinstance(pos, (int, np.integer)) or isinstance(pos, np.ndarray):
        value = np.asarray(pos)
        if value.shape != () or value.dtype.kind not in "iu":
            raise ZynMLError(f"{fn}: pos must be an integer or a 0-d integer array, got "
                             f"{value.dtype}{list(value.shape)}")
        if not 0 <= int(value) < positions:
            raise ZynMLError(f"{fn}: position {int(value)} is outside the cache's "
                             f"{positions} positions")
        return
    if _shape(pos) != () or "int" not in str(pos.dtype):
        raise ZynMLError(f"{fn}: pos must be an integer or a 0-d integer array, got "
                         f"{pos.dtype}{list(_shape(pos))}")
