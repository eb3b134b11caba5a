"""zynml.kernels' attention and losses on an NVIDIA GPU (marked `gpu`: CI skips these;
tools/gpu_tests.sh compiles them here and runs them on the device machine), against
float64 numpy on fresh random inputs: f16/bf16 at head dims 64 and 128, GQA, causal and
masked, the decode step without recompiles, the backward, and the losses on device
arrays (the loss stays a 0-d device array).

Under ZYNML_GPU_COMPILE_ONLY a test stops at its first launch, so each test first builds
every artifact its calls will need (`precompile`), for the device machine's cache."""
import numpy as np
import pytest

import conftest
from zynml import kernels
from zynml.backend.cuda import ukernels
from zynml.backend.cuda.ukernels.attention_backward import Problem
from zynml.compile_only import cpu_values_cuda_artifacts
from zynml.kernels import library, losses, variants
from conftest import assert_close

from .references import allowed, attention, attention_backward, cross_entropy

pytestmark = pytest.mark.gpu
CUDA = "cuda:0"


def precompile(kernel, replacements=(), pipeline=None, params="", **inputs):
    prog = variants.variant(kernel, replacements, CUDA, params)
    (getattr(prog, pipeline)._program if pipeline else prog).artifact(**inputs)


def qkv(rng, batch, heads, kv_heads, seq_q, seq_k, d, dtype):
    def make(h, s):
        return rng.standard_normal((batch, h, s, d)).astype(dtype)
    return make(heads, seq_q), make(kv_heads, seq_k), make(kv_heads, seq_k)


def bf16():
    return pytest.importorskip("ml_dtypes").bfloat16


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_f16_flash_attention_with_gqa(rng, d, causal):
    q, k, v = qkv(rng, 2, 8, 2, 131, 131, d, np.float16)
    out = kernels.flash_attention(q, k, v, causal=causal, device=CUDA)
    assert np.asarray(out).dtype == np.float16
    assert_close(out, attention(q, k, v, allowed(131, 131, causal)), rtol=2e-3)


def test_bf16_masked_attention(rng):
    q, k, v = qkv(rng, 1, 4, 4, 77, 200, 128, bf16())
    mask = rng.random((77, 200)) < 0.7
    mask[:, 0] = True
    out = kernels.flash_attention(q, k, v, mask=mask, device=CUDA)
    assert_close(out, attention(q, k, v, mask), rtol=2e-2)


@pytest.mark.parametrize("m", [1, 3])
def test_decode_sized_bf16_products_sum_in_f32(rng, m):
    """A row or three of tokens take the pointwise strategy: its sums are f32, rounded
    once (a bf16 sum of 997 terms near 1 stalls at 256)."""
    a = rng.uniform(0.5, 1.5, (m, 997)).astype(bf16())
    b = rng.uniform(0.5, 1.5, (997, 5)).astype(bf16())
    out = kernels.matmul(a, b, device=CUDA)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=2.0 ** -8)


@pytest.mark.parametrize("m", [1, 16])
def test_bf16_matmul_accumulate_rounds_once(rng, m):
    """x += h @ W of a decode step (matvec, in place): the f32 sum of the products and
    x's values, rounded once to bf16."""
    c = rng.standard_normal((m, 136)).astype(bf16())
    a = rng.standard_normal((m, 1000)).astype(bf16())
    b = rng.standard_normal((1000, 136)).astype(bf16())
    want = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(c.astype(np.float64)) + np.abs(a.astype(np.float64)) @ np.abs(
        b.astype(np.float64))
    assert kernels.matmul_accumulate(c, a, b, device=CUDA) is c
    assert np.all(np.abs(c.astype(np.float64) - want) <= 2.0 ** -8 * np.abs(want)
                  + 2.0 ** -14 * scale)


def test_f32_attention_odd_sizes(rng):
    q, k, v = qkv(rng, 1, 3, 1, 7, 13, 64, np.float32)
    out = kernels.flash_attention(q, k, v, causal=True, scale=0.2, device=CUDA)
    assert_close(out, attention(q, k, v, allowed(7, 13, True), 0.2), rtol=1e-4)


def test_decode_steps_share_one_kernel(rng):
    """32 query heads, 8 KV heads, d 128, f16: one token per step over a cache of 257."""
    q, k_cache, v_cache = qkv(rng, 1, 32, 8, 1, 257, 128, np.float16)
    subs = (("h / 1", "h / 4"),)
    precompile("attention", subs, "causal_attention", q=q, k=k_cache, v=v_cache,
               cache_start=0)
    program = variants.variant("attention", subs, CUDA).causal_attention._program
    before = None
    for start in (0, 100, 256):
        out = kernels.kv_attention(q, k_cache, v_cache, start, device=CUDA)
        before = before or program.stats()  # after the first step's compile
        keep = np.arange(257)[None, :] <= start
        assert_close(out, attention(q, k_cache, v_cache, keep), rtol=2e-3)
    after = program.stats()
    assert (after.specializations, after.compiles, after.disk_hits) == \
        (before.specializations, before.compiles, before.disk_hits)


def test_f16_backward_with_gqa(rng):
    q, k, v = qkv(rng, 1, 4, 2, 67, 67, 64, np.float16)
    dout = rng.standard_normal(q.shape).astype(np.float16)
    keep = allowed(67, 67, True)
    precompile("attention", (("h / 1", "h / 2"),), "causal_attention", q=q, k=k, v=v,
               cache_start=0)
    # f16 without a mask: the FlashAttention-2 ukernel, not attention_backward.zyn
    ukernels.artifact("attention_backward", Problem(4, 2, 67, 67, 64, "f16", True, 0.125))
    got = kernels.flash_attention_backward(dout, q, k, v, causal=True, device=CUDA)
    for g, w in zip(got, attention_backward(dout, q, k, v, keep)):
        assert_close(g, w, rtol=5e-3)


# 40009 logits a row (a prime): past 32768, a row fits one block's registers only with
# the losses' ROW_PARAMS (64 values a thread)
@pytest.mark.parametrize("rows,vocab", [(61, 1031), (3, 40009)])
def test_losses_stay_on_the_device(rng, rows, vocab):
    from zynml.runtime.cuda.device_array import DeviceArray
    logits = (3 * rng.standard_normal((rows, vocab))).astype(np.float32)
    targets = rng.integers(0, vocab, rows)
    targets[-1] = 7  # a padded row
    precompile("cross_entropy", params=losses.ROW_PARAMS, logits=logits, targets=targets,
               pad_id=np.int64(7), logit_scale=np.float32(1))
    loss, grad = kernels.cross_entropy(DeviceArray.from_numpy(logits),
                                       DeviceArray.from_numpy(targets), pad_id=7)
    assert isinstance(loss, DeviceArray) and loss.shape == ()
    want_loss, want_grad = cross_entropy(logits, targets, 7)
    assert_close(loss.numpy(), want_loss)
    assert_close(grad.numpy(), want_grad)


@pytest.mark.parametrize("tokens,hidden,vocab,chunk", [
    (96, 64, 1031, 32),  # whole chunks, a prime vocabulary: grad_hidden unsplit
    (37, 40, 6144, 16),  # a short last chunk; grad_hidden summed in 4 parts of 1536
])
def test_fused_linear_cross_entropy_on_device_arrays(rng, tokens, hidden, vocab, chunk):
    """Chunk 1 adds to a loss given as a number, the next chunks to the 0-d device array
    of the one before: two signatures, both compiled in the compile-only half, which runs
    the whole chain (zynml.compile_only)."""
    from zynml.runtime.cuda.device_array import DeviceArray
    assert losses.vocab_splits(chunk, hidden, vocab) == (1 if vocab == 1031 else 4)
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    w = (rng.standard_normal((vocab, hidden)) / 8).astype(np.float32)
    targets = rng.integers(0, vocab, tokens)
    if conftest.COMPILE_ONLY:
        with cpu_values_cuda_artifacts():
            kernels.fused_linear_cross_entropy(x, w, targets, chunk_size=chunk, device=CUDA)
        pytest.skip("compile-only: the chunks' artifacts are in the cache")
    loss, grad_hidden, grad_weight = kernels.fused_linear_cross_entropy(
        DeviceArray.from_numpy(x), DeviceArray.from_numpy(w), DeviceArray.from_numpy(targets),
        chunk_size=chunk)
    assert isinstance(loss, DeviceArray) and loss.shape == ()
    want_loss, g = cross_entropy(x.astype(np.float64) @ w.T.astype(np.float64), targets)
    assert_close(loss.numpy(), want_loss, rtol=1e-4)
    assert_close(grad_hidden.numpy(), g @ w.astype(np.float64), rtol=1e-4)
    assert_close(grad_weight.numpy(), g.T @ x.astype(np.float64), rtol=1e-4)


def test_packed_causal_attention_on_device_arrays(rng):
    from zynml.runtime.cuda.device_array import DeviceArray
    seq, heads, kv_heads, d = 67, 8, 2, 64
    q = rng.standard_normal((seq, heads * d)).astype(np.float16)
    k = rng.standard_normal((seq, kv_heads * d)).astype(np.float16)
    v = rng.standard_normal((seq, kv_heads * d)).astype(np.float16)
    layout = library.program("attention_heads", CUDA)  # dynamic sizes: one artifact each
    layout.split_heads._program.artifact(x=q, batch=1, d=d)
    layout.merge_heads._program.artifact(o=np.ones((1, heads, seq, d), np.float16))
    precompile("attention", (("h / 1", "h / 4"),), "causal_attention",
               q=np.ones((1, heads, seq, d), np.float16), k=np.ones((1, 2, seq, d), np.float16),
               v=np.ones((1, 2, seq, d), np.float16), cache_start=0)
    out = kernels.causal_attention_packed(*(DeviceArray.from_numpy(x) for x in (q, k, v)),
                                          heads=heads, kv_heads=kv_heads)
    assert isinstance(out, DeviceArray) and out.shape == (seq, heads * d)

    def split(x, h):
        return x.reshape(seq, h, d).transpose(1, 0, 2)[None]
    want = attention(split(q, heads), split(k, kv_heads), split(v, kv_heads),
                     allowed(seq, seq, True))
    assert_close(out.numpy(), want[0].transpose(1, 0, 2).reshape(seq, heads * d), rtol=2e-3)
