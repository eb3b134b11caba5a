"""Self-attention over a fused projection's token-major rows, forward and backward: what
a transformer block does between its qkv projection and its output projection.

    out = merge_heads(flash_attention(*split_heads(qkv, batch, heads), causal=causal))

qkv [batch * seq, 3 * heads * d] holds q, k and v side by side (split_heads(parts=3)'s
layout); out is [batch * seq, heads * d]. Where the CUDA attention ukernels run (an
NVIDIA GPU; f16 or bf16, head dims up to 64) the forward ukernel reads q, k and v where
qkv holds them and writes out token-major, keeping the rows' log-sum-exp, and the
backward ukernel reads the gradient token-major and writes d qkv: no heads are split or
merged (4 copies of a block's activations and gradients, 1.7 ms of GPT-2 small's step
on an H200) and the backward skips its log-sum-exp sweep. Elsewhere the four library
calls above run, and their backward."""
from __future__ import annotations

from typing import Any, NamedTuple

from .attention import AttentionError, flash_attention_backward, flash_attention_with_lse
from .attention_backward import backward_tokens, forward_tokens
from .basic import reshaped
from .heads import merge_heads, merge_qkv, split_heads
from .library import device_of

__all__ = ["fused_qkv_attention", "fused_qkv_attention_backward", "QkvAttention"]


class QkvAttention(NamedTuple):
    """What fused_qkv_attention_backward takes of its forward."""
    qkv: Any
    out: Any            # the forward ukernel's [batch, seq, heads, d]; None off it
    lse: Any            # that kernel's rows' log-sum-exp (base 2); None off it
    sizes: tuple        # (batch, heads, heads, seq, seq, d)
    causal: bool
    scale: float | None
    split: tuple | None  # where the heads were split: q, k, v, o [batch, heads, seq, d]
                         # and flash_attention_with_lse's lse (or None)


def fused_qkv_attention(qkv, batch: int, heads: int, *, causal: bool = True,
                        scale: float | None = None, device: str | None = None):
    """(out, saved): attention over qkv's rows (module docstring), and what
    fused_qkv_attention_backward takes."""
    device = device or device_of([qkv])
    sizes = _sizes(qkv, batch, heads)
    rows, width = batch * sizes[3], heads * sizes[5]
    out, lse = forward_tokens(qkv, sizes, causal, scale, device) or (None, None)
    if out is not None:
        return reshaped(out, (rows, width)), QkvAttention(qkv, out, lse, sizes, causal,
                                                          scale, None)
    on_ukernel = lse is not None  # compile-only: built, not run; the backward's too
    q, k, v = split_heads(qkv, batch, heads, device=device)
    o, lse_heads = flash_attention_with_lse(q, k, v, causal=causal, scale=scale,
                                            device=device)
    saved = QkvAttention(qkv, o if on_ukernel else None, lse, sizes, causal, scale,
                         (q, k, v, o, lse_heads))
    return merge_heads(o, device=device), saved


def fused_qkv_attention_backward(grad_out, saved: QkvAttention, *,
                                 device: str | None = None):
    """d qkv [batch * seq, 3 * heads * d] of fused_qkv_attention for the gradient of its
    output, grad_out [batch * seq, heads * d]."""
    device = device or device_of([grad_out])
    batch, heads, _, seq, _, d = saved.sizes
    if tuple(int(n) for n in grad_out.shape) != (batch * seq, heads * d):
        raise AttentionError(f"fused_qkv_attention_backward: grad_out "
                             f"{tuple(grad_out.shape)} must be the output's shape "
                             f"{(batch * seq, heads * d)}")
    if saved.out is not None:
        made = backward_tokens(grad_out, saved.qkv, saved.out, saved.lse, saved.sizes,
                               saved.causal, saved.scale, device)
        if made is not None:
            return made
    q, k, v, o, lse = saved.split
    (do,) = split_heads(grad_out, batch, heads, parts=1, device=device)
    dq, dk, dv = flash_attention_backward(do, q, k, v, causal=saved.causal,
                                          scale=saved.scale, out=o, lse=lse, device=device)
    return merge_qkv(dq, dk, dv, device=device)


def _sizes(qkv, batch: int, heads: int) -> tuple:
    shape = tuple(int(n) for n in qkv.shape)
    if len(shape) != 2 or batch < 1 or heads < 1 or shape[0] % batch or \
            shape[1] % (3 * heads):
        raise AttentionError(f"fused_qkv_attention: qkv {shape} must be [batch * seq, "
                             f"3 * heads * d] for batch {batch} and {heads} heads")
    seq, d = shape[0] // batch, shape[1] // (3 * heads)
    return batch, heads, heads, seq, seq, d
