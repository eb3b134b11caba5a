"""flash_attention_backward's kernels: attention_backward.zyn's reductions, given the
forward's output. Gradients come back in the inputs' dtype; the scores, their
log-sum-exp and the row sums are f32 whatever it is."""
from __future__ import annotations

import numpy as np

from .basic import reshaped
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
    """(dq, dk, dv), given the forward's output `o` and a [seq_q, seq_k] mask or None.
    The kernel takes the grouped layout (attention_backward.zyn): free views here."""
    batch, heads, kv_heads, seq_q, seq_k, d = sizes
    group = heads // kv_heads
    scale = np.float32(d ** -0.5 if scale is None else scale)
    grouped = (batch * kv_heads, group * seq_q, d)
    keys = (batch * kv_heads, seq_k, d)
    allowed = np.tile(allowed_keys(seq_q, seq_k, causal, mask), (group, 1))
    # sizes pinned static: IREE takes minutes over this kernel with dynamic sizes
    dq, dk, dv = variant("attention_backward", (), device).attention_backward(
        q=reshaped(q, grouped), k=reshaped(k, keys), v=reshaped(v, keys),
        dout=reshaped(grad_out, grouped), o=reshaped(o, grouped), allowed=allowed,
        scale=scale)
    return (reshaped(dq, (batch, heads, seq_q, d)), reshaped(dk, (batch, kv_heads, seq_k, d)),
            reshaped(dv, (batch, kv_heads, seq_k, d)))
