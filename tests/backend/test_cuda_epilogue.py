"""matmul_wgmma's epilogues (zynml/backend/cuda/strategies/epilogue.py): elementwise
work after a product, in the same block or the next, done by the product's kernel as it
stores. Which kernels a plan gets (compile-only, in CI), and the numbers on an H100
against float64 (GPU tests: tools/gpu_tests.sh)."""
import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

from conftest import COMPILE_ONLY, assert_close

BF16 = ml_dtypes.bfloat16

# out: the pipeline's one output; each body as a user writes it
CASES = {
    # a projection with its bias, in the product's block
    "bias": ("""
pipeline f(x: tensor[rows, k], w: tensor[k, n], b: tensor[n]) -> tensor[rows, n]:
    let y = compute(x, w, b) {
        @kernel matmul
        for i in 0..rows, j in 0..n:
            var acc = 0.0
            for c in 0..k:
                acc += x[i, c] * w[c, j]
            out[i, j] = acc + b[j]
    }
    return y
""", lambda x, w, b, r: x @ w + b),
    # bias and GELU (tanh form) in the next block: the product is never stored
    "bias_gelu_next_block": ("""
pipeline f(x: tensor[rows, k], w: tensor[k, n], b: tensor[n]) -> tensor[rows, n]:
    let h = compute(x, w) {
        @kernel matmul
        for i in 0..rows, j in 0..n:
            var acc = 0.0
            for c in 0..k:
                acc += x[i, c] * w[c, j]
            out[i, j] = acc
    }
    let y = compute(h, b) {
        @kernel elementwise
        for i in 0..rows, j in 0..n:
            let v = h[i, j] + b[j]
            out[i, j] = 0.5 * v * (1.0 + tanh(0.7978845608 * (v + 0.044715 * v * v * v)))
    }
    return y
""", lambda x, w, b, r: _gelu(x @ w + b)),
    # a residual added, f32 accumulators kept in f32
    "residual_f32": ("""
pipeline f(x: tensor[rows, k], w: tensor[k, n], r: tensor[rows, n]) -> tensor[rows, n]:
    let y = compute(x, w, r) {
        @kernel matmul
        for i in 0..rows, j in 0..n:
            var acc: f32 = 0.0
            for c in 0..k:
                acc += cast(x[i, c], f32) * w[c, j]
            out[i, j] = acc + r[i, j]
    }
    return y
""", lambda x, w, b, r: x @ w + r),
}


def _gelu(v):
    return 0.5 * v * (1.0 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))


def _inputs(rng, rows, k, n, dtype=BF16):
    x = (rng.standard_normal((rows, k)) * 0.5).astype(dtype)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    r = rng.standard_normal((rows, n)).astype(np.float32)
    return x, w, b, r


def _arguments(case, x, w, b, r):
    return {"x": x, "w": w, **({"r": r} if case == "residual_f32" else {"b": b})}


def _plan(source, **arguments):
    prog = zynml.compile(source, device="cuda", require_device=False, dynamic=False)
    return prog.pipeline("f").artifact(**arguments).plan


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_epilogue_is_in_the_product_kernel(rng, case):
    x, w, b, r = _inputs(rng, 256, 192, 512)
    plan = _plan(CASES[case][0], **_arguments(case, x, w, b, r))
    steps = list(launches(plan["body"]))
    assert [s["strategy"] for s in steps] == ["matmul_wgmma"], steps
    extra = "%in2"  # the bias or the residual: a kernel argument
    assert extra in steps[0]["args"]
    allocs = [s for s in plan["body"] if s["op"] == "alloc"]
    assert len(allocs) == 1  # the output only: the next block's h is never stored
    assert plan["outputs"][0]["value"] == allocs[0]["result"]


STORED_TWICE = """
pipeline f(x: tensor[rows, k], w: tensor[k, n], b: tensor[n]) -> tensor[rows, n]:
    let h = compute(x, w) {
        @kernel matmul
        for i in 0..rows, j in 0..n:
            var acc = 0.0
            for c in 0..k:
                acc += x[i, c] * w[c, j]
            out[i, j] = acc
    }
    let y = compute(h, b) {
        @kernel elementwise
        for i in 0..rows, j in 0..n:
            out[i, j] = h[i, j] * 2.0 + b[j]
    }
    return (h, y)
"""

TRANSPOSED_READ = """
pipeline f(x: tensor[n, n], w: tensor[n, n]) -> tensor[n, n]:
    let h = compute(x, w) {
        @kernel matmul
        for i in 0..n, j in 0..n:
            var acc = 0.0
            for c in 0..n:
                acc += x[i, c] * w[c, j]
            out[i, j] = acc
    }
    let y = compute(h) {
        @kernel elementwise
        for i in 0..n, j in 0..n:
            out[i, j] = h[j, i] + 1.0
    }
    return y
"""


def test_a_product_read_later_is_stored_and_its_epilogue_kept_apart(rng):
    """h is an output too: the product stores it and the next block is a kernel of its
    own (an epilogue that skipped the store would lose h)."""
    x, w, b, _ = _inputs(rng, 256, 192, 512)
    plan = _plan(STORED_TWICE, x=x, w=w, b=b)
    assert [s["strategy"] for s in launches(plan["body"])] == ["matmul_wgmma", "pointwise"]


def test_a_read_of_another_point_of_the_product_is_not_an_epilogue(rng):
    x, w, _, _ = _inputs(rng, 256, 256, 256)
    plan = _plan(TRANSPOSED_READ, x=x, w=w)
    strategies = [s["strategy"] for s in launches(plan["body"])]
    assert strategies[0] == "matmul_wgmma" and len(strategies) == 2, strategies


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("rows, k, n", [(128, 64, 256), (384, 320, 768), (1280, 448, 2304)])
def test_cuda_epilogues_match_float64(rng, case, rows, k, n):
    x, w, b, r = _inputs(rng, rows, k, n)
    arguments = _arguments(case, x, w, b, r)
    prog = zynml.compile(CASES[case][0], device="cuda" if COMPILE_ONLY else "cuda:0",
                         require_device=not COMPILE_ONLY, dynamic=False)
    if COMPILE_ONLY:
        prog.pipeline("f").artifact(**arguments)
        pytest.skip("compile-only: the artifact is in the cache")
    out = np.asarray(prog.f(**arguments), np.float64)
    wide = [v.astype(np.float64) for v in (x, w, b, r)]
    assert_close(out, CASES[case][1](*wide), rtol=1e-2)


@pytest.mark.gpu
def test_cuda_product_stored_and_kept_apart_matches_float64(rng):
    x, w, b, _ = _inputs(rng, 384, 192, 512)
    if COMPILE_ONLY:
        _plan(STORED_TWICE, x=x, w=w, b=b)
        pytest.skip("compile-only: the artifact is in the cache")
    prog = zynml.compile(STORED_TWICE, device="cuda:0", dynamic=False)
    h, y = prog.f(x=x, w=w, b=b)
    expected = x.astype(np.float64) @ w.astype(np.float64)
    assert_close(np.asarray(h, np.float64), expected, rtol=1e-2)
    assert_close(np.asarray(y, np.float64), 2 * np.asarray(h, np.float64) + b.astype(np.float64),
                 rtol=1e-2)
