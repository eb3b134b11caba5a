"""Flash attention forward and backward, KV-cache attention, and the choice of a tuned
config for a device.

The forward kernels are zynml/kernels/src/attention.zyn and attention_masked.zyn,
attention written as the spec writes it; the compiler raises them to one flash-attention
kernel (cir-raise-attention). The GQA group and the scale are written into the source
as constants (variants.py), since the raise needs numbers there. The backward is
attention_backward.zyn (scores recomputed from Q and K, FlashAttention-2's equations).

Layout: q [batch, heads, seq_q, d], k and v [batch, kv_heads, seq_k, d], heads a
multiple of kv_heads (grouped-query attention: query head h reads key/value head
h // (heads // kv_heads)). `causal_attention_packed` takes the transformer layout
q [seq, heads * d], k and v [seq, kv_heads * d].
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ZynMLError
from .configs import FlashConfig, config_for, validate_config
from .heads import merge_heads, split_heads
from .library import device_of
from .variants import variant

__all__ = ["flash_attention", "flash_attention_with_lse", "flash_attention_backward",
           "kv_attention", "causal_attention_packed", "attention_config",
           "attention_params"]


class AttentionError(ZynMLError, ValueError):
    """Arguments of an attention call that do not go together."""


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(n) for n in x.shape)


def _sizes(fn: str, q, k, v) -> tuple[int, int, int, int, int, int]:
    """(batch, heads, kv_heads, seq_q, seq_k, d), checked."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if len(_shape(x)) != 4:
            raise AttentionError(f"{fn}: {name} must be [batch, heads, seq, d], "
                                 f"got shape {_shape(x)}")
    batch, heads, seq_q, d = _shape(q)
    kb, kv_heads, seq_k, kd = _shape(k)
    if _shape(v) != _shape(k):
        raise AttentionError(f"{fn}: v's shape {_shape(v)} differs from k's {_shape(k)}")
    if kb != batch or kd != d:
        raise AttentionError(f"{fn}: k {_shape(k)} does not match q {_shape(q)} "
                             "(batch and head dim must agree)")
    if not str(q.dtype) == str(k.dtype) == str(v.dtype):
        raise AttentionError(f"{fn}: q, k and v must have one dtype, got {q.dtype}, "
                             f"{k.dtype}, {v.dtype}")
    if kv_heads == 0 or heads % kv_heads:
        raise AttentionError(f"{fn}: q's {heads} heads are not a multiple of k's "
                             f"{kv_heads} heads (grouped-query attention)")
    return batch, heads, kv_heads, seq_q, seq_k, d


def _replacements(heads: int, kv_heads: int, d: int, scale: float | None) -> tuple:
    """The constants attention.zyn leaves for the caller: the group and the scale."""
    subs = []
    if heads != kv_heads:
        subs.append(("h / 1", f"h / {heads // kv_heads}"))
    if scale is not None and float(scale) != 1.0 / np.sqrt(d):
        subs.append(("/ sqrt(d)", f"* {float(scale)!r}"))
    return tuple(subs)


def _mask_2d(fn: str, mask, seq_q: int, seq_k: int):
    """A bool mask broadcastable to [seq_q, seq_k] as a [seq_q, seq_k] array."""
    shape = _shape(mask)
    if str(mask.dtype).replace("torch.", "") != "bool":
        raise AttentionError(f"{fn}: mask must be bool (True where a key is seen), got "
                             f"{mask.dtype}")
    if shape == (seq_q, seq_k):
        return mask
    if any(n != 1 for n in shape[:-2]) or len(shape) < 2 or \
            shape[-2] not in (1, seq_q) or shape[-1] not in (1, seq_k):
        raise AttentionError(f"{fn}: mask of shape {shape} does not broadcast to "
                             f"[seq_q, seq_k] = [{seq_q}, {seq_k}] (masks per batch or head "
                             "are not supported)")
    host = np.asarray(mask)  # a GPU mask of another shape comes back to broadcast it
    return np.ascontiguousarray(np.broadcast_to(host.reshape(shape[-2:]), (seq_q, seq_k)))


def _program(kernel: str, replacements: tuple, device: str, config: FlashConfig | None):
    params = attention_params(config) if config is not None and \
        device.startswith("cuda") else ""
    return variant(kernel, replacements, device, params)


def flash_attention(q, k, v, *, causal: bool = False, mask=None, scale: float | None = None,
                    config: FlashConfig | None = None, device: str | None = None):
    """softmax(q k^T * scale [masked]) v, as one flash-attention kernel.

    q [batch, heads, seq_q, d]; k, v [batch, kv_heads, seq_k, d] (GQA when kv_heads <
    heads). `causal`: query i sees keys j <= i + seq_k - seq_q (aligned at the bottom
    right, as FlashAttention-2 and a KV cache: the usual j <= i when seq_q == seq_k).
    `mask`: bool, broadcastable to [seq_q, seq_k], True where a key is seen (with
    `causal`, both must allow it). A row that sees no key has no defined value.
    `scale` defaults to 1 / sqrt(d). `config`: a FlashConfig whose tiles the CUDA flash
    kernel is built with (attention_params); None: the kernel's own tuned tiles.
    Returns [batch, heads, seq_q, d] in q's dtype, on q's device."""
    fn = "flash_attention"
    batch, heads, kv_heads, seq_q, seq_k, d = _sizes(fn, q, k, v)
    device = device or device_of([q, k, v])
    subs = _replacements(heads, kv_heads, d, scale)
    if mask is None and not causal:
        return _program("attention", subs, device, config).attention(q=q, k=k, v=v)
    if mask is None:
        return _program("attention", subs, device, config).causal_attention(
            q=q, k=k, v=v, cache_start=seq_k - seq_q)
    mask = _mask_2d(fn, mask, seq_q, seq_k)
    # without `causal`, an offset that allows every key
    start = seq_k - seq_q if causal else seq_k
    prog = _program("attention_masked", subs, device, config)
    return prog(q=q, k=k, v=v, mask=mask, cache_start=start)["o"]


def flash_attention_with_lse(q, k, v, *, causal: bool = False, scale: float | None = None,
                             device: str | None = None):
    """(out, lse): flash_attention(q, k, v, causal=, scale=)'s output and, for
    flash_attention_backward's `lse=`, its rows' log-sum-exp. Where the CUDA attention
    ukernels run (an NVIDIA GPU; f16 or bf16, head dims up to 64) one kernel makes both,
    lse f32 [batch, heads, seq_q] in base 2 (log2 of the sum of exp2(score * scale *
    log2 e)), and the backward then skips its sweep that makes it. Elsewhere out is
    flash_attention's and lse is None (the backward makes what it needs)."""
    from .attention_backward import forward_with_lse
    sizes = _sizes("flash_attention_with_lse", q, k, v)
    device = device or device_of([q, k, v])
    out, lse = forward_with_lse(q, k, v, sizes, causal, scale, device) or (None, None)
    if out is None:
        out = flash_attention(q, k, v, causal=causal, scale=scale, device=device)
    return out, lse


def kv_attention(q, k_cache, v_cache, cache_start: int, *, scale: float | None = None,
                 config: FlashConfig | None = None, device: str | None = None):
    """Attention of new queries over a KV cache: q [batch, heads, q_len, d] (q_len 1 for a
    decode step, more for a batched prefill), caches [batch, kv_heads, max_len, d] with
    the new tokens' keys and values already written at cache_start..cache_start + q_len.
    Query i attends to cache positions 0..cache_start + i. `cache_start` is read at run
    time: one compiled kernel serves every value (no recompile as the cache fills).
    It may be a 0-d integer array of the device, read by the kernel: a graph replay
    (zynml.capture) sees the value written into it in place (one on a GPU is not
    checked against the cache's length, which would wait for the GPU)."""
    fn = "kv_attention"
    _, heads, kv_heads, q_len, max_len, d = _sizes(fn, q, k_cache, v_cache)
    start = cache_start if _is_scalar_array(cache_start) else int(cache_start)
    if not hasattr(start, "__cuda_array_interface__"):
        if int(start) < 0 or int(start) + q_len > max_len:
            raise AttentionError(f"{fn}: cache_start {int(start)} + q_len {q_len} exceeds the "
                                 f"cache's {max_len} positions")
    device = device or device_of([q, k_cache, v_cache])
    prog = _program("attention", _replacements(heads, kv_heads, d, scale), device, config)
    return prog.causal_attention(q=q, k=k_cache, v=v_cache, cache_start=start)


def _is_scalar_array(value) -> bool:
    """Whether cache_start is a 0-d integer array, which the kernel reads (a numpy one
    on the CPU, read again by each replay there)."""
    if isinstance(value, (bool, int, np.integer)) or not hasattr(value, "shape"):
        return False
    if _shape(value) != () or "int" not in str(value.dtype):
        raise AttentionError(f"kv_attention: cache_start must be an integer or a 0-d "
                             f"integer array, got {value.dtype}{list(_shape(value))}")
    return True


def causal_attention_packed(q, k, v, *, heads: int, kv_heads: int | None = None,
                            scale: float | None = None, device: str | None = None):
    """The device API's layout: q [seq, heads * d], k and v [seq, kv_heads * d], causal;
    returns [seq, heads * d]. The heads are split out and merged back by
    heads.py's elementwise kernels around flash_attention, on the inputs' device."""
    kv_heads = kv_heads or heads
    fn = "causal_attention_packed"
    if len(_shape(q)) != 2 or _shape(q)[1] % heads:
        raise AttentionError(f"{fn}: q {_shape(q)} is not [seq, heads * d] with {heads} heads")
    seq, width = _shape(q)
    d = width // heads
    for name, x in (("k", k), ("v", v)):
        if _shape(x) != (seq, kv_heads * d):
            raise AttentionError(f"{fn}: {name} {_shape(x)} is not [seq, kv_heads * d] = "
                                 f"[{seq}, {kv_heads * d}]")
    device = device or device_of([q, k, v])
    (q4,), (k4,), (v4,) = (split_heads(x, 1, h, parts=1, device=device)
                           for x, h in ((q, heads), (k, kv_heads), (v, kv_heads)))
    out = flash_attention(q4, k4, v4, causal=True, scale=scale, device=device)
    return merge_heads(out, device=device)


def flash_attention_backward(grad_out, q, k, v, *, causal: bool = False, mask=None,
                             scale: float | None = None, out=None, lse=None,
                             device: str | None = None):
    """(dq, dk, dv) of flash_attention(q, k, v, causal=, mask=, scale=) for the output
    gradient `grad_out` [batch, heads, seq_q, d]; dk and dv [batch, kv_heads, seq_k, d]
    are summed over the query heads of each group. `out`: that forward's output, when
    the caller kept it (else the forward runs again here); `lse`: with it,
    flash_attention_with_lse's second result (None: made here)."""
    from .attention_backward import backward
    fn = "flash_attention_backward"
    sizes = _sizes(fn, q, k, v)
    if _shape(grad_out) != _shape(q):
        raise AttentionError(f"{fn}: grad_out {_shape(grad_out)} must have q's shape "
                             f"{_shape(q)}")
    if mask is not None:
        mask = _mask_2d(fn, mask, sizes[3], sizes[4])
    device = device or device_of([grad_out, q, k, v])
    if out is not None and _shape(out) != _shape(q):
        raise AttentionError(f"{fn}: out {_shape(out)} must have q's shape {_shape(q)}")
    if lse is not None and (out is None or _shape(lse) != _shape(q)[:3]):
        raise AttentionError(f"{fn}: lse comes with its forward's `out`, shaped "
                             f"{_shape(q)[:3]}")
    o = out if out is not None else \
        flash_attention(q, k, v, causal=causal, mask=mask, scale=scale, device=device)
    return backward(grad_out, q, k, v, o, sizes, causal, mask, scale, device, lse)


def attention_config(device: str = "auto") -> FlashConfig:
    """The spec's tuned config (TUNED_CONFIGS) for `device`, from its facts: the CUDA
    architecture and the largest shared memory a block may use; checked to fit."""
    from ..devices import resolve
    placement = resolve(device, None, True)
    if placement.kind != "cuda":
        return config_for(placement.kind)
    from ..backend.cuda.target import CHIPS
    from ..runtime.cuda.driver import get_device
    major, minor = get_device(placement.ordinal).info.compute_capability
    chip = next((c for c in CHIPS.values() if c.compute_capability == (major, minor)), None)
    limit = chip.max_shared_per_block if chip else 49152
    config = config_for("cuda", f"{major}.{minor}", limit)
    validate_config(config, limit)
    return config


def attention_params(config: FlashConfig) -> str:
    """The CUDA flash kernels' tile parameters (zynml.compile's `params=`) for `config`:
    the wgmma kernel takes block_q as 64-row warpgroups and block_kv as its key tile,
    the tensor-core kernel block_kv as its key tile. A tile the kernel cannot hold makes
    that strategy decline and another run (see docs/kernels.md, Attention)."""
    return (f"attention_wgmma.warpgroups={max(1, config.block_q // 64)};"
            f"attention_wgmma.block_n={config.block_kv};"
            f"attention_tensor_core.block_n={config.block_kv}")
