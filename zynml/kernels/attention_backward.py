"""flash_attention_backward's kernels: attention_backward.zyn's reductions, given the
forward's output. Gradients come back in f32 (the kernel computes in
the widest float of its inputs, and the scale is given as f32)."""
from __future__ import annotations

import numpy as np

from .variants import variant


def allowed_keys(seq_q: int, seq_k: int, causal: bool, mask) -> np.ndarray:
    """The [seq_q, seq_k] bool matrix of the keys each query sees (mask and causal)."""
    allowed = np.ones((seq_q, seq_k), bool)
    if causal:
        allowed &= np.arange(seq_k)[None, :] <= np.arange(seq_q)[:, None] + seq_k - seq_q
    if mask is not None:
        allowed &= np.asarray(mask, bool)
    return allowed


def backward(grad_out, q, k, v, o, sizes, causal, mask, scale, device):
    """(dq, dk, dv), given the forward's output `o` and a [seq_q, seq_k] mask or None."""
    _, heads, kv_heads, seq_q, seq_k, d = sizes
    scale = np.float32(d ** -0.5 if scale is None else scale)
    # sizes pinned static: IREE takes minutes over this script with dynamic sizes
    out = variant("attention_backward", (), device)(
        q=q, k=k, v=v, dout=grad_out, o=o, allowed=allowed_keys(seq_q, seq_k, causal, mask),
        scale=scale, group=np.int64(heads // kv_heads), kv_heads=np.int64(kv_heads))
    return out["dq"], out["dk"], out["dv"]
