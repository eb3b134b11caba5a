"""flash_attention_backward on an NVIDIA GPU through the FlashAttention-2 ukernel
(zynml/backend/cuda/ukernels/attention_backward.py), against float64 numpy on fresh
random inputs of odd sizes: a single row, partial tiles, grouped-query heads, causal
with more keys than queries, f16 and bf16; and against the library's .zyn form
(ZYNML_UKERNELS=0) on the same inputs. Marked `gpu`: CI skips it."""
import numpy as np
import pytest

from zynml import kernels
from zynml.backend.cuda import ukernels
from zynml.backend.cuda.ukernels.attention_backward import Problem
from zynml.kernels import attention_backward, variants
from conftest import assert_close

from .references import allowed, attention, attention_backward as reference, log_sum_exp2

pytestmark = pytest.mark.gpu
CUDA = "cuda:0"


def _inputs(rng, batch, heads, kv_heads, seq_q, seq_k, d, dtype, causal):
    q = rng.standard_normal((batch, heads, seq_q, d)).astype(dtype)
    k, v = (rng.standard_normal((batch, kv_heads, seq_k, d)).astype(dtype)
            for _ in range(2))
    dout = rng.standard_normal(q.shape).astype(dtype)
    keep = allowed(seq_q, seq_k, causal)
    out = attention(q, k, v, keep).astype(dtype)  # the forward's output, given
    return q, k, v, dout, out, keep


def _half(name):
    return np.float16 if name == "f16" else pytest.importorskip("ml_dtypes").bfloat16


@pytest.mark.parametrize("batch, heads, kv_heads, seq_q, seq_k, d, element, causal", [
    (1, 1, 1, 1, 1, 16, "f16", True),
    (1, 2, 1, 37, 37, 32, "bf16", True),
    (2, 4, 2, 129, 129, 64, "bf16", True),
    (1, 3, 3, 100, 131, 64, "f16", False),
    (1, 2, 2, 65, 200, 64, "bf16", True),     # causal, 135 earlier keys
    (1, 4, 1, 64, 64, 48, "f16", True),       # one key head for four query heads
    (1, 4, 2, 77, 130, 128, "bf16", True),    # head dim 128: kept tiles in shared memory
    (2, 2, 2, 65, 65, 128, "f16", False),
    (1, 3, 1, 100, 100, 80, "bf16", True),
    # 380 query and key heads of 3 tiles: blocks in groups of 352 heads, the last of 28
    # (tile_kernel.BlockOrder at 132 multiprocessors)
    (4, 95, 95, 150, 150, 64, "bf16", True),
])
def test_ukernel_matches_float64(rng, batch, heads, kv_heads, seq_q, seq_k, d, element,
                                 causal):
    q, k, v, dout, out, keep = _inputs(rng, batch, heads, kv_heads, seq_q, seq_k, d,
                                       _half(element), causal)
    got = kernels.flash_attention_backward(dout, q, k, v, causal=causal, out=out,
                                           device=CUDA)
    assert any(name == "attention_backward" and problem.element == element
               for name, problem, _ in attention_backward._UKERNEL_FUNCTIONS), \
        "the ukernel did not run"
    tolerance = 2e-2 if element == "bf16" else 4e-3
    want = reference(dout, q, k, v, keep)
    # against the gradients' scale: with one key dq is 0 exactly, and what it gets is
    # the rounding of the given `out` (delta = dO . O against dP = dO . V)
    scale = max(np.abs(w).max() for w in want)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert np.asarray(g).shape == w.shape, name
        assert_close(g, w, rtol=tolerance, floor=scale)


def test_ukernel_agrees_with_the_zyn_definition(rng, monkeypatch):
    q, k, v, dout, out, keep = _inputs(rng, 1, 4, 2, 77, 77, 64, _half("bf16"), True)
    grouped = lambda x: x.reshape(2, 2 * 77, 64)  # attention_backward.zyn's layout
    # compiled first: a compile-only run (tools/gpu_tests.sh) stops at the first launch
    variants.variant("attention_backward", (), CUDA).attention_backward._program.artifact(
        q=grouped(q), k=k[0], v=v[0], dout=grouped(dout), o=grouped(out),
        allowed=np.tile(keep, (2, 1)), scale=np.float32(0.125))
    fast = kernels.flash_attention_backward(dout, q, k, v, causal=True, out=out,
                                            device=CUDA)
    monkeypatch.setenv("ZYNML_UKERNELS", "0")
    defined = kernels.flash_attention_backward(dout, q, k, v, causal=True, out=out,
                                               device=CUDA)
    for name, a, b in zip(("dq", "dk", "dv"), fast, defined):
        assert_close(a, b, rtol=2e-2)


@pytest.mark.parametrize("batch, heads, kv_heads, seq_q, seq_k, d, element, causal", [
    (1, 1, 1, 1, 1, 16, "bf16", True),
    (2, 4, 2, 129, 129, 64, "bf16", True),
    (1, 3, 3, 100, 131, 32, "f16", False),
    (1, 2, 2, 65, 200, 64, "f16", True),      # causal, 135 earlier keys
    (1, 4, 1, 64, 64, 48, "bf16", True),      # one key head for four query heads
    (1, 4, 2, 129, 131, 128, "bf16", True),   # head dim 128: kept tiles in shared memory
    (4, 96, 24, 150, 150, 64, "f16", True),   # 384 query heads: groups of 352 and 32
])
def test_forward_with_lse_and_the_backward_that_takes_it(
        rng, batch, heads, kv_heads, seq_q, seq_k, d, element, causal):
    """flash_attention_with_lse's forward ukernel: out and lse against float64; the
    backward given that lse (its first sweep skipped) against float64 too."""
    q, k, v, dout, _, keep = _inputs(rng, batch, heads, kv_heads, seq_q, seq_k, d,
                                     _half(element), causal)
    # compiled first: a compile-only run (tools/gpu_tests.sh) stops at the first launch
    ukernels.artifact("attention_backward", Problem(
        batch * heads, batch * kv_heads, seq_q, seq_k, d, element, causal,
        float(np.float32(d ** -0.5)), lse_given=True))
    out, lse = kernels.flash_attention_with_lse(q, k, v, causal=causal, device=CUDA)
    assert lse is not None, "the forward ukernel did not run"
    tolerance = 2e-2 if element == "bf16" else 4e-3
    assert_close(out, attention(q, k, v, keep), rtol=tolerance, floor=1.0)
    # lse in base 2 from f32 sums: off by rounding, not by the element type
    assert_close(lse, log_sum_exp2(q, k, keep), rtol=1e-4, floor=1.0)
    got = kernels.flash_attention_backward(dout, q, k, v, causal=causal, out=out,
                                           lse=lse, device=CUDA)
    assert any(name == "attention_backward" and problem.lse_given
               for name, problem, _ in attention_backward._UKERNEL_FUNCTIONS)
    want = reference(dout, q, k, v, keep)
    scale = max(np.abs(w).max() for w in want)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert_close(g, w, rtol=tolerance, floor=scale)


@pytest.mark.parametrize("batch, heads, seq, d, element", [
    (1, 1, 1, 16, "bf16"),
    (2, 3, 129, 64, "bf16"),
    (3, 2, 67, 32, "f16"),
    (2, 2, 67, 128, "bf16"),
])
def test_fused_qkv_attention_reads_and_writes_token_major_rows(rng, batch, heads, seq, d,
                                                               element):
    """fused_qkv_attention on the token-major ukernels (no heads split or merged),
    forward and backward, against float64 at odd sizes."""
    dtype = _half(element)
    qkv = rng.standard_normal((batch * seq, 3 * heads * d)).astype(dtype)
    grad = rng.standard_normal((batch * seq, heads * d)).astype(dtype)
    # compiled first: a compile-only run (tools/gpu_tests.sh) stops at the first launch
    problem = Problem(batch * heads, batch * heads, seq, seq, d, element, True,
                      float(np.float32(d ** -0.5)), False, "tokens", batch)
    ukernels.artifact("attention_forward", problem)
    ukernels.artifact("attention_backward", Problem(**{**problem.__dict__,
                                                       "lse_given": True}))
    out, saved = kernels.fused_qkv_attention(qkv, batch, heads, device=CUDA)
    dqkv = kernels.fused_qkv_attention_backward(grad, saved, device=CUDA)
    ran = {(name, p.lse_given) for name, p, _ in attention_backward._UKERNEL_FUNCTIONS
           if p.layout == "tokens"}
    assert ran == {("attention_forward", False), ("attention_backward", True)}

    def heads_first(x, parts):  # [b * s, parts * h * d] -> parts x [b, h, s, d]
        x = np.asarray(x, np.float64).reshape(batch, seq, parts, heads, d)
        return [x[:, :, n].transpose(0, 2, 1, 3) for n in range(parts)]
    q, k, v = heads_first(qkv, 3)
    keep = allowed(seq, seq, True)
    tolerance = 2e-2 if element == "bf16" else 4e-3
    want_out = attention(q, k, v, keep).transpose(0, 2, 1, 3).reshape(batch * seq, -1)
    assert_close(out, want_out, rtol=tolerance, floor=1.0)
    want = reference(heads_first(grad, 1)[0], q, k, v, keep)
    scale = max(np.abs(w).max() for w in want)
    got = heads_first(dqkv, 3)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert_close(g, w, rtol=tolerance, floor=scale)
