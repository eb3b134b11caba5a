"""FlashAttention-2's forward pass (arXiv:2307.08691, Algorithm 1) on tensor cores
(wgmma or mma.sync, tile_stage.py), for training: beside the output it writes the rows' log-sum-exp, which the
attention backward ukernel then takes (Problem.lse_given) instead of sweeping the keys
once more to make it. Batch and heads flattened into slices, as attention_backward.py:

    q [heads, rows, d], k, v [kv_heads, keys, d]    (query head h reads key head h // group)
    o = softmax(S * scale) V,  S = Q K^T            (causal: row i sees keys j <= i + keys - rows)
    lse2 = log2(sum_j exp2(S_ij * c)),  c = scale * log2(e)   (f32 [heads, rows])

A block takes 64 query rows (4 warps of 16): Q is kept, K and
V stream through two shared buffers (cp.async, tile j + 1 copied while tile j is
multiplied), the online softmax (flash_skeleton.OnlineSoftmax) keeps each row's max and
sum, P is rounded to the element type as the A operand of P V. Takes what the backward
ukernel takes (`supports`). zynml/kernels/src/attention.zyn stays the definition of the
forward and what flash_attention runs; this kernel is flash_attention_with_lse's.
"""
from __future__ import annotations

from .attention_backward import BLOCK, Problem, supports, token_shapes

__all__ = ["BLOCK", "Problem", "supports", "token_shapes"]
