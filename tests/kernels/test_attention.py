"""zynml.kernels' attention: flash_attention (plain, causal, bool mask, GQA, scale),
kv_attention (a run-time cache_start: one compile), the packed layout and the backward,
each against float64 numpy on fresh random inputs of odd sizes on the CPU; and, compiled
for CUDA without a GPU, the plans they get (one flash-attention kernel)."""
import numpy as np
import pytest

import zynml
from zynml import kernels
from zynml.kernels import variants
from zynml.runtime.cuda.artifact import launches
from conftest import assert_close

from .references import allowed, attention, attention_backward

# (batch, heads, kv_heads, seq_q, seq_k, d)
SIZES = [(1, 3, 1, 7, 13, 8), (2, 3, 3, 1, 1, 8), (1, 3, 3, 13, 13, 64), (1, 3, 1, 13, 7, 8)]


def inputs(rng, batch, heads, kv_heads, seq_q, seq_k, d, dtype=np.float32):
    q = rng.standard_normal((batch, heads, seq_q, d)).astype(dtype)
    k = rng.standard_normal((batch, kv_heads, seq_k, d)).astype(dtype)
    v = rng.standard_normal((batch, kv_heads, seq_k, d)).astype(dtype)
    return q, k, v


def random_mask(rng, seq_q, seq_k):
    mask = rng.random((seq_q, seq_k)) < 0.6
    rows = np.arange(seq_q)
    mask[rows, np.minimum(rows + seq_k - seq_q, seq_k - 1)] = True  # each row sees a key,
    return mask  # under causal too


@pytest.mark.parametrize("sizes", SIZES)
def test_flash_attention_matches_numpy(rng, sizes):
    q, k, v = inputs(rng, *sizes)
    seq_q, seq_k = sizes[3:5]
    assert_close(kernels.flash_attention(q, k, v, device="cpu"),
                 attention(q, k, v, allowed(seq_q, seq_k)))


@pytest.mark.parametrize("sizes", [s for s in SIZES if s[3] <= s[4]])
def test_causal_attention_is_aligned_bottom_right(rng, sizes):
    q, k, v = inputs(rng, *sizes)
    out = kernels.flash_attention(q, k, v, causal=True, scale=0.3, device="cpu")
    assert_close(out, attention(q, k, v, allowed(*sizes[3:5], causal=True), scale=0.3))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sizes", [(1, 3, 1, 7, 13, 8), (2, 3, 3, 13, 13, 8)])
def test_a_bool_mask_hides_keys(rng, sizes, causal):
    q, k, v = inputs(rng, *sizes)
    mask = random_mask(rng, *sizes[3:5])
    out = kernels.flash_attention(q, k, v, mask=mask, causal=causal, device="cpu")
    assert_close(out, attention(q, k, v, allowed(*sizes[3:5], causal, mask)))


def test_a_mask_broadcasts_from_leading_ones(rng):
    q, k, v = inputs(rng, 1, 3, 3, 7, 13, 8)
    mask = random_mask(rng, 1, 13)  # one row for every query
    out = kernels.flash_attention(q, k, v, mask=mask[None, None], device="cpu")
    assert_close(out, attention(q, k, v, np.broadcast_to(mask, (7, 13))))


def test_kv_attention_reads_cache_start_at_run_time(rng):
    q, k_cache, v_cache = inputs(rng, 1, 3, 1, 2, 11, 8)
    program = lambda: variants.variant("attention", (("h / 1", "h / 3"),), "cpu") \
        .causal_attention._program
    before = program().stats()  # the Program is the process's: other tests use it too
    for start in (0, 4, 9):
        keep = allowed(2, 11) & (np.arange(11)[None] <= np.arange(2)[:, None] + start)
        assert_close(kernels.kv_attention(q, k_cache, v_cache, start, device="cpu"),
                     attention(q, k_cache, v_cache, keep))
    # the Program behind the pipeline: at most one new specialization, compiled (or
    # read) once, for the three cache starts
    after = program().stats()
    assert after.specializations - before.specializations <= 1
    assert (after.compiles + after.disk_hits) - (before.compiles + before.disk_hits) <= 1


def test_packed_layout_is_the_device_apis_causal_attention(rng):
    seq, heads, kv_heads, d = 7, 3, 1, 8
    q = rng.standard_normal((seq, heads * d)).astype(np.float32)
    k = rng.standard_normal((seq, kv_heads * d)).astype(np.float32)
    v = rng.standard_normal((seq, kv_heads * d)).astype(np.float32)
    out = kernels.causal_attention_packed(q, k, v, heads=heads, kv_heads=kv_heads,
                                          device="cpu")

    def split(x, h):
        return x.reshape(seq, h, d).transpose(1, 0, 2)[None]
    want = attention(split(q, heads), split(k, kv_heads), split(v, kv_heads),
                     allowed(seq, seq, causal=True))
    assert_close(out, want[0].transpose(1, 0, 2).reshape(seq, heads * d))


@pytest.mark.parametrize("causal,masked", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("sizes", [(1, 3, 1, 7, 13, 8), (2, 3, 3, 1, 1, 8)])
def test_backward_matches_the_analytic_gradient(rng, sizes, causal, masked):
    q, k, v = inputs(rng, *sizes)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    mask = random_mask(rng, *sizes[3:5]) if masked else None
    got = kernels.flash_attention_backward(dout, q, k, v, causal=causal, mask=mask,
                                           scale=0.4, device="cpu")
    want = attention_backward(dout, q, k, v, allowed(*sizes[3:5], causal, mask), 0.4)
    out = kernels.flash_attention(q, k, v, causal=causal, mask=mask, scale=0.4, device="cpu")
    given = kernels.flash_attention_backward(dout, q, k, v, causal=causal, mask=mask,
                                             scale=0.4, out=out, device="cpu")
    for g, h in zip(got, given):  # the forward's output given: the same gradients
        np.testing.assert_array_equal(g, h)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert g.shape == w.shape, name
        # floor: with one key dq and dk are 0 up to rounding (softmax of one score is 1)
        assert_close(g, w, rtol=1e-5, floor=1.0)


def test_flash_attention_with_lse_off_the_gpu_is_flash_attention_and_no_lse(rng):
    """Only the CUDA ukernels make lse (tests/kernels/test_attention_backward_cuda.py);
    elsewhere the backward makes what it needs, and the output is flash_attention's."""
    q, k, v = inputs(rng, 1, 3, 1, 7, 13, 8)
    out, lse = kernels.flash_attention_with_lse(q, k, v, causal=True, device="cpu")
    assert lse is None
    np.testing.assert_array_equal(out, kernels.flash_attention(q, k, v, causal=True,
                                                               device="cpu"))
    assert_close(out, attention(q, k, v, allowed(7, 13, causal=True)), rtol=1e-5)


def test_backward_agrees_with_torch_autograd(rng):
    torch = pytest.importorskip("torch")
    q, k, v = inputs(rng, 1, 3, 1, 7, 13, 8)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    got = kernels.flash_attention_backward(dout, q, k, v, causal=True, device="cpu")
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    keep = torch.tensor(allowed(7, 13, causal=True))
    out = torch.nn.functional.scaled_dot_product_attention(
        tq, tk.repeat_interleave(3, 1), tv.repeat_interleave(3, 1), attn_mask=keep)
    out.backward(torch.tensor(dout, dtype=torch.float64))
    for g, t in zip(got, (tq, tk, tv)):
        assert_close(g, t.grad.numpy())


@pytest.mark.parametrize("call,message", [
    (lambda q, k, v: kernels.flash_attention(q, k[:, :, :, :4], v[:, :, :, :4]), "does not match q"),
    (lambda q, k, v: kernels.flash_attention(q, np.repeat(k, 2, 1), np.repeat(v, 2, 1)),
     "not a multiple"),
    (lambda q, k, v: kernels.flash_attention(q, k, v[:, :, :3]), "v's shape"),
    (lambda q, k, v: kernels.flash_attention(q[0], k, v), "must be [batch, heads, seq, d]"),
    (lambda q, k, v: kernels.flash_attention(q, k, v, mask=np.ones((2, 7, 13), bool)),
     "does not broadcast"),
    (lambda q, k, v: kernels.flash_attention(q, k, v, mask=np.ones((7, 13))), "must be bool"),
    (lambda q, k, v: kernels.flash_attention(q, k, v.astype(np.float16)), "one dtype"),
    (lambda q, k, v: kernels.kv_attention(q, k, v, 7), "exceeds the cache's 13"),
    (lambda q, k, v: kernels.flash_attention_backward(q[:, :, :2], q, k, v),
     "grad_out"),
    (lambda q, k, v: kernels.flash_attention_backward(q, q, k, v, out=q[:, :, :2]),
     "out (1, 3, 2, 8) must have q's shape"),
    (lambda q, k, v: kernels.flash_attention_backward(q, q, k, v, lse=q[..., 0]),
     "lse comes with its forward's `out`"),
    (lambda q, k, v: kernels.flash_attention_backward(q, q, k, v, out=q, lse=q[..., :2, 0]),
     "shaped (1, 3, 7)"),
])
def test_mismatched_arguments_are_named(rng, call, message):
    q, k, v = inputs(rng, 1, 3, 1, 7, 13, 8)
    with pytest.raises(zynml.ZynMLError, match="attention") as info:
        call(q, k, v)
    assert message in str(info.value)


# ------------------------------------------------------- CUDA plans (compiled, no GPU)

def cuda_launches(kernel, replacements, pipeline, target=None, params="", **inputs):
    prog = zynml.compile(variants.variant_source(kernel, replacements), device="cuda",
                         target=target, params=params, require_device=False, dynamic=False)
    part = getattr(prog, pipeline)._program if pipeline else prog
    return [(launch["strategy"], launch["shared_bytes"])
            for launch in launches(part.artifact(**inputs).plan["body"])]


def half(*shape):
    return np.ones(shape, np.float16)


GQA = (("h / 1", "h / 4"),)
QKV = dict(q=half(1, 16, 128, 128), k=half(1, 4, 128, 128), v=half(1, 4, 128, 128))


def test_f16_d128_attention_is_one_wgmma_kernel():
    assert cuda_launches("attention", GQA, "attention", **QKV) == \
        [("attention_wgmma", 230400)]


def test_causal_and_kv_attention_are_one_wgmma_kernel():
    """The run-time offset is the kernel's argument, by value (no launch to store it)."""
    plan = cuda_launches("attention", GQA, "causal_attention", cache_start=0, **QKV)
    assert plan == [("attention_wgmma", 230400)]


def test_masked_attention_is_one_wgmma_kernel():
    plan = cuda_launches("attention_masked", GQA, None, mask=np.ones((128, 128), bool),
                         cache_start=128, **QKV)
    assert [s for s, _ in plan] == ["attention_wgmma"]


def test_a_config_sets_the_flash_kernels_tiles():
    """attention_params: the ampere config (64-wide key tiles x 2 warpgroups... as its
    block sizes say) changes the wgmma kernel's shared memory; the hopper config's
    256-key tiles do not fit it at head dim 128, and the plain kernel runs instead."""
    ampere = kernels.attention_params(kernels.TUNED_CONFIGS["ampere"])
    assert ampere == ("attention_wgmma.warpgroups=2;attention_wgmma.block_n=128;"
                      "attention_tensor_core.block_n=128")
    fallback = kernels.attention_params(kernels.TUNED_CONFIGS["fallback"])
    assert cuda_launches("attention", GQA, "attention", params=fallback, **QKV) == \
        [("attention_wgmma", 1024 + 64 * 128 * 2 + 3 * 32 * 256 * 2)]
    hopper = kernels.attention_params(kernels.TUNED_CONFIGS["hopper"])
    assert [s for s, _ in cuda_launches("attention", GQA, "attention", params=hopper,
                                        **QKV)] == ["attention"]


# ------------------------------------------------------------- tuned configurations

def test_the_per_architecture_table():
    table = {name: (c.block_q, c.block_kv, c.head_dim, c.use_half)
             for name, c in kernels.TUNED_CONFIGS.items()}
    assert table == {"ampere": (128, 128, 64, True), "hopper": (128, 256, 128, True),
                     "rdna3": (64, 64, 64, True), "apple": (64, 64, 64, True),
                     "fallback": (32, 32, 64, False)}
    assert kernels.config_for("cuda", "9.0").name == "hopper"
    assert kernels.config_for("cuda", "8.0").name == "ampere"
    assert kernels.config_for("cuda", "7.0").name == "fallback"
    assert kernels.config_for("rocm").name == "rdna3"
    assert kernels.config_for("metal").name == "apple"
    assert kernels.config_for("cpu").name == "fallback"


def test_validate_config_names_config_need_and_limit():
    hopper = kernels.TUNED_CONFIGS["hopper"]
    need = kernels.required_shared_memory(hopper)
    assert need == (128 + 2 * 256) * 128 * 2
    kernels.validate_config(hopper, need)  # exactly enough
    with pytest.raises(kernels.ConfigError) as info:
        kernels.validate_config(hopper, 101376)  # sm_86 / sm_89 / sm_120
    assert isinstance(info.value, zynml.ZynMLError)
    assert "'hopper'" in str(info.value) and f"needs {need} bytes" in str(info.value) \
        and "allows 101376" in str(info.value)


def test_a_config_that_does_not_fit_falls_down_the_table():
    """Ada (8.9) files with hopper, whose tiles need 160 KB: its 99 KB take ampere's."""
    assert kernels.config_for("cuda", "8.9", 101376).name == "ampere"
    assert kernels.config_for("cuda", "8.9", 40000).name == "fallback"


def test_attention_config_of_the_cpu_is_the_fallback():
    assert kernels.attention_config("cpu") == kernels.TUNED_CONFIGS["fallback"]


@pytest.mark.parametrize("dtype, gemm", [(np.float16, "matmul_wgmma"), (np.float32, "matmul")])
def test_cuda_backward_products_are_plain_gemms(dtype, gemm):
    """GPT small's attention backward (8 x 6 heads, 256 tokens, head dim 64) in the
    grouped layout: its five products take a GEMM strategy (batched wgmma for f16), no
    product runs as a pointwise loop, and no read of the scores is a guarded gather (the
    row kernels stream them). Compiles for sm_90a; no GPU needed."""
    import json
    prog = zynml.compile(variants.variant_source("attention_backward", ()), device="cuda",
                         require_device=False, dynamic=False).pipeline("attention_backward")
    x, keys = np.ones((48, 256, 64), dtype), np.ones((48, 256, 64), dtype)
    plan = json.loads(prog.emit("plan", dict(q=x, k=keys, v=keys, dout=x, o=x,
                                             allowed=np.ones((256, 256), bool),
                                             scale=np.float32(0.125))))
    kernels_ = list(launches(plan["body"]))
    products = [l for l in kernels_ if l["strategy"] == gemm]
    assert len(products) == 5, kernels_  # S, dP, dQ, dK, dV
    assert "implicit_gemm" not in [l["strategy"] for l in kernels_]
    linalg = prog.emit("linalg", dict(q=x, k=keys, v=keys, dout=x, o=x,
                                      allowed=np.ones((256, 256), bool),
                                      scale=np.float32(0.125)))
    assert "tensor.extract" not in linalg



def test_the_causal_condition_is_made_once_per_shape():
    """flash_attention_backward without a mask takes its `allowed` input from a cache
    (on a GPU an upload would wait for the queued work at every call)."""
    from zynml.kernels.attention_backward import allowed_keys, causal_allowed
    first = causal_allowed("cpu", 5, 7, True, 3)
    assert causal_allowed("cpu", 5, 7, True, 3) is first and not first.flags.writeable
    np.testing.assert_array_equal(first, np.tile(allowed_keys(5, 7, True, None), (3, 1)))
    assert causal_allowed("cpu", 5, 7, False, 3).all()
    assert causal_allowed("cpu", 7, 7, True, 1).shape == (7, 7)
