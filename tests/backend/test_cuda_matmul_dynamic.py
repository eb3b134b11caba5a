"""Matrix products of run-time sizes (a dynamic compile): one artifact for every M, N, K.
f16 / bf16 `C = A @ B`: where K and N are multiples of 8 (TMA's 16-byte rows) and K > 0
the plan launches matmul_wgmma's kernel, partial tiles included; elsewhere its "if" step
runs the fill on pointwise and the product on `matmul`'s SIMT tiles, which take every
other product of run-time sizes (f32 included). Here: the plan at fixed sizes and the
interpreter on the fake driver (no GPU needed), and the numbers against float64 on an
H100 (GPU tests: tools/gpu_tests.sh)."""
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.plan_at_sizes import plan_at_sizes

from conftest import COMPILE_ONLY, assert_close, dynamic_on_gpu
from runtime.test_cuda_executor import executor_for, fake, upload  # noqa: F401

BF16 = ml_dtypes.bfloat16
PRODUCTS = """
let c = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += A[i, k] * B[k, j]
        out[i, j] = acc
}
"""
# the bias in the product's epilogue; a bf16 product into f32 (a weight's gradient)
LINEAR = (Path(__file__).parents[1] / "programs" / "matmul_bias.zyn").read_text() + """
let wide = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc: f32 = 0.0
        for k in 0..K:
            acc += cast(A[i, k], f32) * B[k, j]
        out[i, j] = acc
}
"""
# a weight's gradient, x^T @ grad: TMA reads x as A^T, the transposed copy never made
WEIGHT_GRADIENT = """
pipeline weight_gradient(x: tensor[rows, width], grad: tensor[rows, n]) -> tensor[width, n]:
    let xt = compute(x) {
        @kernel elementwise
        for c in 0..width, i in 0..rows:
            out[c, i] = x[i, c]
    }
    let dw = compute(xt, grad) {
        @kernel matmul
        for c in 0..width, j in 0..n:
            var acc: f32 = 0.0
            for i in 0..rows:
                acc += cast(xt[c, i], f32) * grad[i, j]
            out[c, j] = acc
    }
    return dw
"""


def _plan(source, dtype=BF16, **extra):
    prog = zynml.compile(source, device="cuda", require_device=False, dynamic=True)
    example = dict(A=np.ones((3, 8), dtype), B=np.ones((8, 5), dtype), **extra)
    return prog.artifact(**example).plan


def _strategies(plan, m, k, n, **extra):
    fixed = plan_at_sizes(plan, [(m, k), (k, n)] + list(extra.values()), {})
    assert fixed is not None
    return [(s["strategy"], s["grid"][0]) for s in launches(fixed["body"])]


def test_the_plan_tests_the_rows_and_launches_one_kernel_or_the_fallback():
    plan = _plan(PRODUCTS)
    [branch] = [s for s in plan["body"] if s["op"] == "if"]
    assert [s["strategy"] for s in launches(branch["then"])] == ["matmul_wgmma"]
    # the fill, and the SIMT product under its own test (K > 0; else pointwise)
    assert [s["strategy"] for s in launches(branch["else"])] == \
        ["pointwise", "matmul", "pointwise"]
    # 128 x 256 tiles over any M and N, partial ones included
    assert _strategies(plan, 1, 8, 8) == [("matmul_wgmma", 1)]
    assert _strategies(plan, 131, 72, 264) == [("matmul_wgmma", 2 * 2)]
    assert _strategies(plan, 2048, 1000, 3072) == [("matmul_wgmma", 16 * 12)]
    # rows TMA cannot copy (K or N not a multiple of 8): the fill, then the product on
    # SIMT tiles of 128 x 128; no k at all (K = 0): C is the fill, by pointwise
    for m, k, n in ((37, 13, 40), (5, 16, 7)):
        assert _strategies(plan, m, k, n) == [("pointwise", _strategies(plan, m, k, n)[0][1]),
                                              ("matmul", 1)], (m, k, n)
    assert [s for s, _ in _strategies(plan, 300, 0, 24)] == ["pointwise"] * 2


def test_an_epilogue_and_an_f32_product_take_wgmma_at_run_time_sizes():
    plan = _plan(LINEAR, bias=np.ones(5, BF16))
    fixed = plan_at_sizes(plan, [(100, 24), (24, 40), (40,)], {})
    steps = list(launches(fixed["body"]))
    assert [s["strategy"] for s in steps] == ["matmul_wgmma"] * 2  # bias fused, f32 C
    maps = [s for s in fixed["body"] if s["op"] == "tensor_map"]
    assert [m["box"] for m in maps[2::3]] == [[64, 64], [64, 32]]  # C: bf16, then f32


def test_a_transposed_operand_is_read_in_place_where_its_rows_allow():
    prog = zynml.compile(WEIGHT_GRADIENT, device="cuda", require_device=False, dynamic=True)
    plan = prog.weight_gradient._program.artifact(x=np.ones((8, 3), BF16),
                                                  grad=np.ones((8, 5), BF16)).plan
    [branch] = [s for s in plan["body"] if s["op"] == "if"]
    # the copy's buffer is allocated where the copy runs, not on the fused path
    assert not any(s["op"] == "alloc" and s["dtype"] == "bfloat16" for s in plan["body"])
    assert any(s["op"] == "alloc" and s["dtype"] == "bfloat16" for s in branch["else"])
    def taken(rows, width, n):
        fixed = plan_at_sizes(plan, [(rows, width), (rows, n)], {})
        return [s["strategy"] for s in launches(fixed["body"])]
    assert taken(1000, 24, 40) == ["matmul_wgmma"]  # one kernel: no copy, no fill
    # x's rows (M = width) must be 16-byte multiples too, as K (rows) and N
    assert "matmul_wgmma" not in taken(1000, 20, 40)
    assert "matmul_wgmma" not in taken(1001, 24, 40)


def test_f32_products_of_run_time_sizes_take_simt_tiles():
    """Any K > 0, C's zero fill taken with the tiles (K = 0: the fill, and pointwise);
    the kernel reads 16 bytes at a time where it finds K (A's rows) and N (B's)
    multiples of 4 and the buffers aligned, else one element at a time: two versions of
    the k loop under one uniform branch."""
    plan = _plan(PRODUCTS, np.float32)
    fixed = plan_at_sizes(plan, [(300, 77), (77, 130)], {})
    steps = list(launches(fixed["body"]))
    assert [s["strategy"] for s in steps] == ["matmul"]  # no fill kernel
    assert steps[0]["grid"] == [2, 3, 1]  # ceil(130 / 128) x ceil(300 / 128)
    fixed = plan_at_sizes(plan, [(300, 0), (0, 130)], {})
    assert [s["strategy"] for s in launches(fixed["body"])] == ["pointwise"] * 2
    prog = zynml.compile(PRODUCTS, device="cuda", require_device=False, dynamic=True)
    ptx = prog.artifact(A=np.ones((3, 8), np.float32), B=np.ones((8, 5), np.float32)).ptx
    matmul = ptx[re.search(r"\.entry k\d+_matmul\(", ptx).start():]
    matmul = matmul[:matmul.index("\n}\n")]
    assert re.search(r"ld\.global(\.nc)?\.v4\.(f|b)32", matmul)  # the 16-byte branch
    assert re.search(r"ld\.global(\.nc)?\.(f|b)32", matmul)      # and the other


def test_the_interpreter_takes_the_branch_the_sizes_choose(fake):
    plan = _plan(PRODUCTS)
    executor = executor_for(fake, plan)
    for (m, k, n), kernel in (((9, 16, 24), "matmul_wgmma"), ((9, 15, 24), "pointwise")):
        mark = fake.mark()
        out = executor.run_plan([upload(np.ones((m, k), BF16)), upload(np.ones((k, n), BF16))])
        ran = [launch.kernel.split("_", 1)[1] for launch in fake.since(mark).launches]
        assert ran == ([kernel] if kernel == "matmul_wgmma" else ["pointwise", "matmul"])
        assert out[0].shape == (m, n)


SIZES = [(1, 8, 8), (131, 72, 264), (257, 1000, 520), (128, 64, 256), (2048, 512, 3072),
         (37, 13, 40), (5, 16, 7)]  # the last two: SIMT tiles (K, N not multiples of 8)


def _operands(rng, m, k, n, dtype):
    return ((rng.standard_normal((m, k)) * 0.5).astype(dtype),
            rng.standard_normal((k, n)).astype(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [BF16, np.float16])
def test_cuda_one_dynamic_compile_serves_every_size(rng, dtype):
    prog = dynamic_on_gpu(PRODUCTS, A=np.ones((3, 8), dtype), B=np.ones((8, 5), dtype))
    for m, k, n in SIZES:
        a, b = _operands(rng, m, k, n, dtype)
        out = np.asarray(prog(A=a, B=b)["c"]).astype(np.float64)
        assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2)
    assert prog.stats().specializations == 1  # one compile (or disk hit) for all


@pytest.mark.gpu
def test_cuda_dynamic_epilogue_and_f32_product_match_float64(rng):
    prog = dynamic_on_gpu(LINEAR, A=np.ones((3, 8), BF16), B=np.ones((8, 5), BF16),
                   bias=np.ones(5, BF16))
    for m, k, n in SIZES:
        a, b = _operands(rng, m, k, n, BF16)
        bias = rng.standard_normal(n).astype(BF16)
        out = prog(A=a, B=b, bias=bias)
        want = a.astype(np.float64) @ b.astype(np.float64)
        assert np.asarray(out["wide"]).dtype == np.float32
        assert_close(out["wide"], want, rtol=1e-5)  # exact products, f32 sums
        assert_close(np.asarray(out["y"]).astype(np.float64), want + bias, rtol=1e-2)
    assert prog.stats().specializations == 1  # one compile (or disk hit) for all


@pytest.mark.gpu
def test_cuda_dynamic_weight_gradient_matches_float64(rng):
    prog = dynamic_on_gpu(WEIGHT_GRADIENT, "weight_gradient", x=np.ones((8, 3), BF16),
                   grad=np.ones((8, 5), BF16))
    for rows, width, n in ((1000, 24, 40), (8, 8, 8), (4096, 136, 264), (37, 20, 40)):
        x = (rng.standard_normal((rows, width)) * 0.5).astype(BF16)
        grad = rng.standard_normal((rows, n)).astype(BF16)
        out = prog.weight_gradient(x=x, grad=grad)
        assert_close(out, x.astype(np.float64).T @ grad.astype(np.float64), rtol=1e-5)
    assert prog.pipeline("weight_gradient").stats().specializations == 1


@pytest.mark.gpu
def test_cuda_dynamic_f32_products_match_float64(rng):
    prog = dynamic_on_gpu(PRODUCTS, A=np.ones((3, 8), np.float32), B=np.ones((8, 5), np.float32))
    for m, k, n in ((1, 1, 1), (131, 77, 263), (300, 1000, 129), (513, 64, 256)):
        a, b = _operands(rng, m, k, n, np.float32)
        out = prog(A=a, B=b)["c"]
        assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5)
    assert prog.stats().specializations == 1  # one compile (or disk hit) for all


@pytest.mark.gpu
def test_cuda_static_sizes_take_the_same_partial_tiles(rng):
    """Static sizes that are multiples of 8 but not of the tiles: matmul_wgmma's partial
    tiles as above, with the bias in the epilogue read at clamped columns."""
    for m, k, n in ((200, 48, 320), (136, 1000, 264)):
        a, b = _operands(rng, m, k, n, BF16)
        bias = rng.standard_normal(n).astype(BF16)
        prog = zynml.compile(LINEAR, device="cuda" if COMPILE_ONLY else "cuda:0",
                             require_device=not COMPILE_ONLY)
        if COMPILE_ONLY:
            prog.artifact(A=a, B=b, bias=bias)
            continue
        want = a.astype(np.float64) @ b.astype(np.float64)
        out = prog(A=a, B=b, bias=bias)
        assert_close(out["wide"], want, rtol=1e-5)
        assert_close(np.asarray(out["y"]).astype(np.float64), want + bias, rtol=1e-2)
    if COMPILE_ONLY:
        pytest.skip("compile-only: the artifacts are in the cache")
