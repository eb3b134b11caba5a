"""zynml.kernels' fused_qkv_attention (attention over a fused projection's token-major
rows) on the CPU, forward and backward, against float64 numpy at odd sizes, and its
argument errors. On a GPU (token-major ukernels): test_attention_backward_cuda.py."""
import numpy as np
import pytest

import zynml
from zynml import kernels
from conftest import assert_close

from .references import allowed, attention, attention_backward


def _heads_first(x, batch, seq, parts, heads, d):
    """[b * s, parts * h * d] -> parts x [b, h, s, d] (float64)."""
    x = np.asarray(x, np.float64).reshape(batch, seq, parts, heads, d)
    return [x[:, :, n].transpose(0, 2, 1, 3) for n in range(parts)]


@pytest.mark.parametrize("batch, heads, seq, d, causal", [
    (1, 1, 1, 8, True), (2, 3, 13, 8, True), (3, 2, 7, 16, False)])
def test_forward_and_backward_match_float64(rng, batch, heads, seq, d, causal):
    qkv = rng.standard_normal((batch * seq, 3 * heads * d)).astype(np.float32)
    grad = rng.standard_normal((batch * seq, heads * d)).astype(np.float32)
    out, saved = kernels.fused_qkv_attention(qkv, batch, heads, causal=causal,
                                             device="cpu")
    dqkv = kernels.fused_qkv_attention_backward(grad, saved, device="cpu")
    q, k, v = _heads_first(qkv, batch, seq, 3, heads, d)
    keep = allowed(seq, seq, causal)
    want = attention(q, k, v, keep).transpose(0, 2, 1, 3).reshape(batch * seq, -1)
    assert np.asarray(out).shape == want.shape
    assert_close(out, want, rtol=1e-5, floor=1.0)
    grads = attention_backward(_heads_first(grad, batch, seq, 1, heads, d)[0], q, k, v,
                               keep)
    assert np.asarray(dqkv).shape == qkv.shape
    for name, g, w in zip(("dq", "dk", "dv"), _heads_first(dqkv, batch, seq, 3, heads, d),
                          grads):
        assert_close(g, w, rtol=1e-5, floor=1.0)


@pytest.mark.parametrize("shape, batch, heads, message", [
    ((10, 48), 3, 2, "[batch * seq, 3 * heads * d] for batch 3"),
    ((12, 40), 2, 2, "for batch 2 and 2 heads"),
    ((12,), 2, 2, "must be [batch * seq"),
])
def test_a_qkv_that_does_not_split_is_named(shape, batch, heads, message):
    with pytest.raises(zynml.ZynMLError, match="fused_qkv_attention") as info:
        kernels.fused_qkv_attention(np.ones(shape, np.float32), batch, heads, device="cpu")
    assert message in str(info.value)


def test_a_gradient_of_another_shape_is_named(rng):
    qkv = rng.standard_normal((12, 48)).astype(np.float32)
    _, saved = kernels.fused_qkv_attention(qkv, 2, 2, device="cpu")
    with pytest.raises(zynml.ZynMLError, match=r"grad_out \(12, 8\) must be the "
                                               r"output's shape \(12, 16\)"):
        kernels.fused_qkv_attention_backward(np.ones((12, 8), np.float32), saved,
                                             device="cpu")
