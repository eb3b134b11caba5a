"""f32 products on TF32 tensor cores when a compilation asks (`tf32=True`, `--tf32`,
ZYNML_TF32), and matmul_wgmma's K-major B: B given as [N, K] (`x @ w^T` written with
w[j, k]), or a transposed copy of such a B read in place. wgmma multiplies TF32 only
K-major, so a [K, N] B is transposed by a kernel of its own first
(zynml/backend/cuda/tf32_operands.py). Which kernels a plan gets and what the PTX
multiplies (compile-only, in CI), and the numbers on an H100 against float64 (GPU
tests: tools/gpu_tests.sh)."""
import re
import shutil

import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.backend.cuda.target import CudaTarget
from zynml.errors import ZynMLError
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.plan_at_sizes import plan_at_sizes

from conftest import COMPILE_ONLY, assert_close, dynamic_on_gpu

BF16 = ml_dtypes.bfloat16
PRODUCT = """
let c = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += A[i, k] * B[k, j]
        out[i, j] = acc
}
"""
# B given K-major: a weight w [N, K] as a linear layer keeps it
K_MAJOR = PRODUCT.replace("B[k, j]", "B[j, k]")
BATCHED = """
let c = compute(A, B) {
    @kernel batched_matmul
    for b in 0..S, i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += A[b, i, k] * B[b, k, j]
        out[b, i, j] = acc
}
"""
# the library's dx = grad @ w^T, written with a transposed copy of w
TRANSPOSED_COPY = """
pipeline f(grad: tensor[rows, n], w: tensor[k, n]) -> tensor[rows, k]:
    let wt = compute(w) {
        @kernel elementwise
        for j in 0..n, c in 0..k:
            out[j, c] = w[c, j]
    }
    let dx = compute(grad, wt) {
        @kernel matmul
        for i in 0..rows, c in 0..k:
            var acc = 0.0
            for j in 0..n:
                acc += grad[i, j] * wt[j, c]
            out[i, c] = acc
    }
    return dx
"""
TF32_WGMMA = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k8\.f32\.tf32\.tf32")


def _artifact(source, tf32, pipeline=None, target=None, dynamic=False, **arguments):
    prog = zynml.compile(source, device="cuda", require_device=False, dynamic=dynamic,
                         tf32=tf32, target=target)
    made = (prog.pipeline(pipeline) if pipeline else prog).artifact(**arguments)
    if shutil.which("ptxas"):  # the PTX assembles for the chip
        assert made.cubin
    return made


def _strategies(plan) -> list:
    return [s["strategy"] for s in launches(plan["body"])]


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_f32_products_take_tf32_tensor_cores_only_when_asked(rng):
    a, b = _f32(rng, 256, 200), _f32(rng, 200, 384)
    plain = _artifact(PRODUCT, False, A=a, B=b)
    assert _strategies(plain.plan) == ["matmul"]  # f32 on the SIMT cores, as before
    assert "tf32" not in plain.ptx
    made = _artifact(PRODUCT, True, A=a, B=b)
    # B [K, N] transposed first: wgmma reads TF32 operands K-major only
    assert _strategies(made.plan) == ["transpose", "matmul_wgmma"]
    assert TF32_WGMMA.search(made.ptx)
    maps = [s for s in made.plan["body"] if s["op"] == "tensor_map"]
    # A's and B's boxes are rows of 32 f32 (128 bytes), B's tile_n rows of B^T
    assert [m["box"][1] for m in maps[:2]] == [32, 32]
    assert maps[1]["box"][0] in (64, 128, 192, 256)


def test_the_option_is_part_of_the_compilation():
    assert CudaTarget(tf32=True).cache_key() != CudaTarget().cache_key()
    assert "tf32=true" in CudaTarget(tf32=True).pass_options
    with pytest.raises(ValueError, match="tf32"):
        CudaTarget(tf32=1)
    with pytest.raises(ZynMLError, match="tf32"):
        zynml.compile(PRODUCT, device="cuda", require_device=False, tf32="yes")


def test_chips_without_wgmma_keep_f32_products(rng):
    a, b = _f32(rng, 256, 64), _f32(rng, 64, 256)
    made = _artifact(PRODUCT, True, target="sm_80", A=a, B=b)
    assert "tf32" not in made.ptx and "transpose" not in _strategies(made.plan)


def test_a_k_major_b_is_read_as_it_is(rng):
    a, w = _f32(rng, 256, 200), _f32(rng, 384, 200)
    made = _artifact(K_MAJOR, True, A=a, B=w)
    assert _strategies(made.plan) == ["matmul_wgmma"]  # no transposed copy
    assert TF32_WGMMA.search(made.ptx)
    half = _artifact(K_MAJOR, False, A=a.astype(BF16), B=w.astype(BF16))
    assert _strategies(half.plan) == ["matmul_wgmma"]  # was SIMT tiles
    # K-major B: wgmma's transpose-B mode off (the last immediate)
    assert re.search(r"m64n\d+k16\.f32\.bf16\.bf16 .*p, 1, 1, 0, 0;", half.ptx)


@pytest.mark.parametrize("dtype, tf32", [(BF16, False), (np.float32, True)])
def test_a_transposed_copy_of_b_is_never_made(rng, dtype, tf32):
    grad, w = _f32(rng, 384, 256).astype(dtype), _f32(rng, 512, 256).astype(dtype)
    made = _artifact(TRANSPOSED_COPY, tf32, "f", grad=grad, w=w)
    assert _strategies(made.plan) == ["matmul_wgmma"]
    maps = [s for s in made.plan["body"] if s["op"] == "tensor_map"]
    assert maps[1]["source"] == "%in1"  # w itself, K-major
    assert [s["op"] for s in made.plan["body"]].count("alloc") == 1  # dx only


def test_run_time_sizes_transpose_b_and_test_the_rows():
    ones = np.ones((8, 8), np.float32)
    plan = _artifact(PRODUCT, True, dynamic=True, A=ones, B=ones).plan
    # B^T made by the transpose strategy's tiles (pointwise would read across rows)
    fixed = plan_at_sizes(plan, [(300, 72), (72, 260)], {})
    assert _strategies(fixed) == ["transpose", "matmul_wgmma"]
    # rows TMA cannot copy (K not a multiple of 4 f32): the fill, and the SIMT product
    # reading B^T
    fixed = plan_at_sizes(plan, [(300, 71), (71, 260)], {})
    assert _strategies(fixed) == ["transpose", "pointwise", "matmul"]


def test_the_cpu_ignores_the_option(rng):
    """TF32 is a tensor-core rounding: the CPU multiplies in f32 whatever is asked."""
    a, b = _f32(rng, 37, 53), _f32(rng, 53, 29)
    out = zynml.compile(PRODUCT, device="cpu", tf32=True)(A=a, B=b)["c"]
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5)


# ------------------------------------------------------------------ on the GPU

# whole tiles, partial ones (sizes multiples of 4), and sizes that stay on SIMT tiles
SIZES = [(256, 200, 384), (132, 36, 260), (2048, 512, 3072), (37, 13, 40), (1, 64, 4096)]


def _tf32_close(out, expected, k):
    """TF32 keeps 10 of f32's 23 mantissa bits: each product is off by up to 2^-10
    relative, a sum of k of them by about sqrt(k) times that of a term."""
    assert_close(out, expected, rtol=4e-3 * max(1.0, np.sqrt(k) / 16))


@pytest.mark.gpu
@pytest.mark.parametrize("m, k, n", SIZES)
def test_cuda_tf32_products_match_float64(rng, m, k, n):
    a, b = _f32(rng, m, k), _f32(rng, k, n)
    if COMPILE_ONLY:
        _artifact(PRODUCT, True, A=a, B=b)
        pytest.skip("compile-only: the artifact is in the cache")
    out = zynml.compile(PRODUCT, device="cuda:0", dynamic=False, tf32=True)(A=a, B=b)["c"]
    _tf32_close(out, a.astype(np.float64) @ b.astype(np.float64), k)


@pytest.mark.gpu
def test_cuda_tf32_batched_and_k_major_products_match_float64(rng):
    a, b = _f32(rng, 3, 128, 96), _f32(rng, 3, 96, 256)
    w = _f32(rng, 320, 96)
    if COMPILE_ONLY:
        _artifact(BATCHED, True, A=a, B=b)
        _artifact(K_MAJOR, True, A=a[0], B=w)
        pytest.skip("compile-only: the artifact is in the cache")
    out = zynml.compile(BATCHED, device="cuda:0", dynamic=False, tf32=True)(A=a, B=b)["c"]
    _tf32_close(out, np.einsum("sik,skj->sij", a.astype(np.float64), b), 96)
    out = zynml.compile(K_MAJOR, device="cuda:0", dynamic=False, tf32=True)(A=a[0], B=w)["c"]
    _tf32_close(out, a[0].astype(np.float64) @ w.astype(np.float64).T, 96)


@pytest.mark.gpu
def test_cuda_one_dynamic_tf32_compile_serves_every_size(rng):
    ones = np.ones((8, 8), np.float32)
    if COMPILE_ONLY:
        _artifact(PRODUCT, True, dynamic=True, A=ones, B=ones)
        pytest.skip("compile-only: the artifact is in the cache")
    prog = zynml.compile(PRODUCT, device="cuda:0", dynamic=True, tf32=True)
    for m, k, n in SIZES:
        a, b = _f32(rng, m, k), _f32(rng, k, n)
        _tf32_close(prog(A=a, B=b)["c"], a.astype(np.float64) @ b.astype(np.float64), k)
    assert prog.stats().specializations == 1


@pytest.mark.gpu
@pytest.mark.parametrize("dynamic", [False, True])
def test_cuda_k_major_and_transposed_copy_products_match_float64(rng, dynamic):
    a, w = (_f32(rng, 300, 136) * 0.5).astype(BF16), _f32(rng, 264, 136).astype(BF16)
    grad, wk = _f32(rng, 384, 264).astype(BF16), _f32(rng, 136, 264).astype(BF16)
    if COMPILE_ONLY:
        _artifact(K_MAJOR, False, dynamic=dynamic, A=a, B=w)
        _artifact(TRANSPOSED_COPY, False, "f", dynamic=dynamic, grad=grad, w=wk)
        pytest.skip("compile-only: the artifact is in the cache")
    out = zynml.compile(K_MAJOR, device="cuda:0", dynamic=dynamic)(A=a, B=w)["c"]
    assert_close(np.asarray(out, np.float64),
                 a.astype(np.float64) @ w.astype(np.float64).T, rtol=1e-2)
    dx = zynml.compile(TRANSPOSED_COPY, device="cuda:0", dynamic=dynamic).f(grad=grad, w=wk)
    assert_close(np.asarray(dx, np.float64),
                 grad.astype(np.float64) @ wk.astype(np.float64).T, rtol=1e-2)
