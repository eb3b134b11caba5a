"""Attention with run-time sizes on the CUDA backend: f16 / bf16 attention whose batch,
heads, queries and keys are run-time sizes (head dims 64 or 128 static) is one
attention_wgmma kernel for every size: it reads the sizes off its buffers (memref.dim),
the plan computes its grid from them, and partial row and key tiles are masked as in the
static kernel. Causal (with a run-time offset too), masked, and grouped-query attention
with static heads likewise. Here: the
plans (no GPU needed), and the numbers against float64 on an H100 / H200 (GPU tests:
tools/gpu_tests.sh)."""
import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.plan_at_sizes import plan_at_sizes

from conftest import (assert_close, causal, conditioned_attention, decode_attention,
                      dynamic_on_gpu, grouped_reference, online_attention)

BF16 = ml_dtypes.bfloat16
RUN_TIME = ["batch", "heads", "seq_len", "keys"]  # head_dim stays static (64 or 128)
CAUSAL = conditioned_attention("j <= i")
OFFSET = decode_attention("1").replace("h / 1", "h")  # j <= i + cache_start
MASKED = conditioned_attention("mask[i, j]", "Q, K, V, mask")


def example(d=64, dtype=np.float16, **extra):
    """Inputs that fix the dtypes (and the static head dim) of a dynamic compile."""
    q, kv = np.ones((1, 2, 3, d), dtype), np.ones((1, 2, 5, d), dtype)
    return dict(Q=q, K=kv, V=kv, **extra)


def plan_of(source, dynamic=RUN_TIME, target=None, **inputs):
    prog = zynml.compile(source, device="cuda", require_device=False, dynamic=dynamic,
                         target=target)
    return prog.artifact(**inputs).plan


def kernels(plan, shapes, **sizes):
    """(kernel, grid x) of the launches a call at `shapes` makes."""
    fixed = plan_at_sizes(plan, shapes, sizes)
    assert fixed is not None
    return [(s["kernel"].split("_", 1)[1], s["grid"][0]) for s in launches(fixed["body"])]


def launches_of(steps) -> list:
    return list(launches(steps))


@pytest.mark.parametrize("source,extra", [(CAUSAL, {}), (OFFSET, dict(cache_start=np.int64(2)))],
                         ids=["causal", "run-time offset"])
def test_one_wgmma_kernel_for_every_size(source, extra):
    """Two versions of the kernel under the plan's test of the keys: whole key tiles (no
    per-key bound check), or a partial last tile; one launch at any size."""
    plan = plan_of(source, **example(**extra))
    [branch] = [s for s in plan["body"] if s["op"] == "if"]
    assert [s["strategy"] for s in launches(branch["then"])] == ["attention_wgmma"]
    assert [s["strategy"] for s in launches(branch["else"])] == ["attention_wgmma"]
    for batch, heads, rows, keys in ((1, 1, 1, 1), (2, 3, 129, 300), (1, 16, 4096, 4096),
                                     (3, 2, 7, 256)):
        shapes = [(batch, heads, rows, 64), (batch, heads, keys, 64), (batch, heads, keys, 64)]
        shapes += [()] if extra else []
        # one block per 128 query rows of each (batch, head); persistent blocks are
        # capped per multiprocessor at launch
        kernel = "attention_wgmma" if keys % 128 == 0 else "attention_wgmma_partial"
        assert kernels(plan, shapes) == [(kernel, -(-rows // 128) * batch * heads)]


@pytest.mark.parametrize("group", [2, 4])
def test_grouped_heads_static_run_time_rest(group):
    plan = plan_of(online_attention(str(group)), ["batch", "sq", "sk"],
                   Q=np.ones((1, 8, 3, 128), BF16), K=np.ones((1, 8 // group, 5, 128), BF16),
                   V=np.ones((1, 8 // group, 5, 128), BF16))
    assert {s["strategy"] for s in launches(plan["body"])} == {"attention_wgmma"}


def test_a_masked_attention_of_run_time_sizes_is_one_wgmma_kernel():
    """Whole key tiles: the mask staged in shared memory by the copying warpgroup, as at
    static sizes; a partial last tile: the mask read from global memory."""
    plan = plan_of(MASKED, **example(mask=np.ones((3, 5), bool)))
    [branch] = [s for s in plan["body"] if s["op"] == "if"]
    assert [s["strategy"] for s in launches_of(branch["then"]) + launches_of(branch["else"])] \
        == ["attention_wgmma"] * 2


def test_run_time_head_dims_pick_a_kernel_per_head_dim():
    """Everything run-time (`dynamic=True`), head dims and the scale 1 / sqrt(head_dim)
    included: kernels for head dims 64 and 128 (each for whole key tiles or not) under
    the plan's tests, the generics for any other head dim."""
    plan = plan_of(CAUSAL, True, **example())
    for d, kernel in ((64, "attention_wgmma_d64"), (128, "attention_wgmma_d128_partial"),
                      (32, None)):
        keys = 256 if d == 64 else 300
        shapes = [(2, 3, 129, d), (2, 3, keys, d), (2, 3, keys, d)]
        ran = [name for name, _ in kernels(plan, shapes)]
        if kernel is None:
            assert not any("attention_wgmma" in name for name in ran), ran
        else:
            assert ran == [kernel]


@pytest.mark.parametrize("source,extra", [(CAUSAL, {}),
                                           (MASKED, dict(mask=np.ones((3, 5), bool)))],
                         ids=["causal", "masked"])
def test_sm80_f16_runs_on_tensor_cores_at_run_time_sizes(source, extra):
    """sm_80 (no wgmma): f16 attention of run-time sizes on attention_tensor_core (mma.sync),
    one kernel for every batch, heads and length (head dim static); everything run-time:
    a kernel for head dims 64 and 128 under the plan's tests, the generics for others."""
    plan = plan_of(source, RUN_TIME, "sm_80", **example(**extra))
    for batch, heads, rows, keys in ((1, 1, 1, 1), (2, 3, 129, 300), (1, 2, 77, 256)):
        mask = [(rows, keys)] if extra else []
        shapes = [(batch, heads, rows, 64), (batch, heads, keys, 64),
                  (batch, heads, keys, 64)] + mask
        assert [name for name, _ in kernels(plan, shapes)] == ["attention_tensor_core"]
    plan = plan_of(source, True, "sm_80", **example(**extra))
    for d, kernel in ((64, "attention_tensor_core_d64"), (128, "attention_tensor_core_d128"),
                      (32, None)):
        shapes = [(2, 3, 129, d), (2, 3, 300, d), (2, 3, 300, d)] + \
            ([(129, 300)] if extra else [])
        ran = [name for name, _ in kernels(plan, shapes)]
        assert ran == [kernel] if kernel else not any("tensor_core" in n for n in ran), ran


@pytest.mark.parametrize("dtype,strategy", [(np.float32, "attention_simt_tiled"),
                                            (np.float64, "attention")])
def test_f32_and_f64_take_a_simt_kernel_per_head_dim(dtype, strategy):
    """Not f16 / bf16: the SIMT flash kernels (f32 the tiled one, f64 `attention`), a
    kernel for head dims 64 and 128 where the head dim is a run-time size, the generics
    for any other."""
    plan = plan_of(MASKED, True, **example(dtype=dtype, mask=np.ones((3, 5), bool)))
    for d, kernel in ((64, f"{strategy}_d64"), (128, f"{strategy}_d128"), (48, None)):
        shapes = [(2, 3, 129, d), (2, 3, 300, d), (2, 3, 300, d), (129, 300)]
        ran = [name for name, _ in kernels(plan, shapes)]
        if kernel is None:
            assert not any(name.startswith("attention") for name in ran), ran
        else:
            assert ran == [kernel]


SIZES = [(1, 1, 1, 1), (2, 3, 17, 23), (1, 2, 129, 300), (2, 4, 1000, 1000), (2, 2, 77, 256)]


def qkv(rng, batch, heads, rows, keys, d, dtype, kv_heads=None):
    kv_heads = kv_heads or heads
    return [rng.standard_normal(shape).astype(dtype) for shape in
            ((batch, heads, rows, d), (batch, kv_heads, keys, d), (batch, kv_heads, keys, d))]


def wide(*arrays):
    return [a.astype(np.float64) for a in arrays]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,d", [(np.float16, 64), (BF16, 128)])
def test_cuda_dynamic_causal_attention_matches_float64(rng, dtype, d):
    prog = dynamic_on_gpu(CAUSAL, dynamic=RUN_TIME, **example(d, dtype))
    for batch, heads, rows, keys in SIZES:
        q, k, v = qkv(rng, batch, heads, rows, keys, d, dtype)
        want = grouped_reference(*wide(q, k, v), causal(rows, keys), scale=1 / np.sqrt(d))
        out = np.asarray(prog(Q=q, K=k, V=v)["attn"]).astype(np.float64)
        assert_close(out, want, rtol=1e-2)
    assert prog.stats().specializations == 1


@pytest.mark.gpu
def test_cuda_dynamic_run_time_offset_matches_float64(rng):
    prog = dynamic_on_gpu(OFFSET, dynamic=RUN_TIME, **example(cache_start=np.int64(2)))
    for batch, heads, rows, keys in SIZES:
        q, k, v = qkv(rng, batch, heads, rows, keys, 64, np.float16)
        for offset in (0, 7, keys):
            want = grouped_reference(*wide(q, k, v), causal(rows, keys, offset))
            out = prog(Q=q, K=k, V=v, cache_start=np.int64(offset))["attn"]
            assert_close(np.asarray(out).astype(np.float64), want, rtol=1e-2)
    assert prog.stats().specializations == 1


@pytest.mark.gpu
def test_cuda_dynamic_grouped_attention_matches_float64(rng):
    prog = dynamic_on_gpu(online_attention("4"), dynamic=["batch", "sq", "sk"],
                          Q=np.ones((1, 8, 3, 128), BF16), K=np.ones((1, 2, 5, 128), BF16),
                          V=np.ones((1, 2, 5, 128), BF16))
    for batch, _, rows, keys in SIZES:
        q, k, v = qkv(rng, batch, 8, rows, keys, 128, BF16, kv_heads=2)
        out = np.asarray(prog(Q=q, K=k, V=v)["attn"]).astype(np.float64)
        assert_close(out, grouped_reference(*wide(q, k, v)), rtol=1e-2)
    assert prog.stats().specializations == 1


@pytest.mark.gpu
def test_cuda_dynamic_masked_attention_matches_float64(rng):
    prog = dynamic_on_gpu(MASKED, dynamic=RUN_TIME, **example(mask=np.ones((3, 5), bool)))
    for batch, heads, rows, keys in SIZES:
        q, k, v = qkv(rng, batch, heads, rows, keys, 64, np.float16)
        mask = rng.random((rows, keys)) < 0.7
        mask[0] = False  # a row with no allowed key gives zeros
        want = grouped_reference(*wide(q, k, v), mask, scale=1 / 8)
        out = np.asarray(prog(Q=q, K=k, V=v, mask=mask)["attn"]).astype(np.float64)
        assert_close(out, want, rtol=1e-2)
    assert prog.stats().specializations == 1


@pytest.mark.gpu
@pytest.mark.parametrize("target,dynamic,dims", [
    (None, True, (64, 128, 64, 128, 32)),        # wgmma, a head dim of 32: the generics
    ("sm_80", RUN_TIME, (64,) * 5),              # mma.sync (an H100 / H200 runs sm_80 code)
    ("sm_80", True, (64, 128, 64, 128, 64)),
], ids=["sm_90a all", "sm_80 head dim static", "sm_80 all"])
def test_cuda_causal_attention_of_run_time_sizes_matches_float64(rng, target, dynamic, dims):
    """Causal f16 at the sizes of SIZES; all run-time (dynamic=True): the head dim and
    the scale 1 / sqrt(d) computed from it at run time too."""
    prog = dynamic_on_gpu(CAUSAL, dynamic=dynamic, target=target, **example())
    for (batch, heads, rows, keys), d in zip(SIZES, dims):
        q, k, v = qkv(rng, batch, heads, rows, keys, d, np.float16)
        want = grouped_reference(*wide(q, k, v), causal(rows, keys), scale=1 / np.sqrt(d))
        out = np.asarray(prog(Q=q, K=k, V=v)["attn"]).astype(np.float64)
        assert_close(out, want, rtol=1e-2)
    assert prog.stats().specializations == 1


@pytest.mark.gpu
@pytest.mark.parametrize("dynamic", [RUN_TIME, True], ids=["head dim static", "all"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cuda_dynamic_simt_attention_matches_float64(rng, dynamic, dtype):
    prog = dynamic_on_gpu(MASKED, dynamic=dynamic,
                          **example(dtype=dtype, mask=np.ones((3, 5), bool)))
    for batch, heads, rows, keys in SIZES:
        q, k, v = qkv(rng, batch, heads, rows, keys, 64, dtype)
        mask = rng.random((rows, keys)) < 0.7
        want = grouped_reference(*wide(q, k, v), mask, scale=1 / 8)
        assert_close(prog(Q=q, K=k, V=v, mask=mask)["attn"], want, rtol=1e-4)
    assert prog.stats().specializations == 1
