"""matmul_wgmma reads the source of a transposed copy made only for it, MN-major
(zynml/backend/cuda/strategies/transposed_copies.py): x^T @ g with no copy of x. Which
kernels a plan gets (compile-only, in CI), and the numbers on an H100 against float64
(GPU tests: tools/gpu_tests.sh)."""
import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

from conftest import COMPILE_ONLY, assert_close

BF16 = ml_dtypes.bfloat16

WEIGHT_GRADIENT = """
pipeline f(x: tensor[rows, k], g: tensor[rows, n]) -> tensor[k, n]:
    let xt = compute(x) {
        @kernel elementwise
        for c in 0..k, i in 0..rows:
            out[c, i] = x[i, c]
    }
    let dw = compute(xt, g) {
        @kernel matmul
        for c in 0..k, j in 0..n:
            var acc: f32 = 0.0
            for i in 0..rows:
                acc += cast(xt[c, i], f32) * g[i, j]
            out[c, j] = acc
    }
    return dw
"""

# the same cut into `splits` parts of the rows: a batched product of [s, k, part] copies
SPLIT = """
pipeline f(x: tensor[rows, k], g: tensor[rows, n], splits: int, part: int) -> tensor[splits, k, n]:
    let xs = reshape(x, [splits, part, k])
    let gs = reshape(g, [splits, part, n])
    let xt = compute(xs) {
        @kernel elementwise
        for s in 0..splits, c in 0..k, i in 0..part:
            out[s, c, i] = xs[s, i, c]
    }
    let dw = compute(xt, gs) {
        @kernel batched_matmul
        for s in 0..splits, c in 0..k, j in 0..n:
            var acc: f32 = 0.0
            for i in 0..part:
                acc += cast(xt[s, c, i], f32) * gs[s, i, j]
            out[s, c, j] = acc
    }
    return dw
"""

# the copy is an output too: it must be made
COPY_KEPT = WEIGHT_GRADIENT.replace("-> tensor[k, n]:", "-> tensor[k, n]:").replace(
    "return dw", "return (dw, xt)")


def _operands(rng, rows, k, n):
    x = (rng.standard_normal((rows, k)) * 0.5).astype(BF16)
    return x, rng.standard_normal((rows, n)).astype(BF16)


def _plan(source, **arguments):
    prog = zynml.compile(source, device="cuda", require_device=False, dynamic=False)
    return prog.pipeline("f").artifact(**arguments).plan


def test_the_weight_gradient_reads_x_in_place(rng):
    x, g = _operands(rng, 384, 128, 256)
    plan = _plan(WEIGHT_GRADIENT, x=x, g=g)
    steps = list(launches(plan["body"]))
    assert [s["strategy"] for s in steps] == ["matmul_wgmma"], steps
    maps = [s for s in plan["body"] if s["op"] == "tensor_map"]
    # A: x itself, in 64 x 64 boxes as B's; C (f32, stored by TMA): 64 x 32 boxes
    assert [(m["source"], m["box"]) for m in maps][:2] == [("%in0", [64, 64]),
                                                          ("%in1", [64, 64])]
    assert [m["box"] for m in maps[2:]] == [[64, 32]]
    assert [s["op"] for s in plan["body"]].count("alloc") == 1  # dw only


def test_a_split_weight_gradient_reads_x_in_place(rng):
    x, g = _operands(rng, 3 * 128, 128, 256)
    plan = _plan(SPLIT, x=x, g=g, splits=3, part=128)
    assert [s["strategy"] for s in launches(plan["body"])] == ["matmul_wgmma"]
    assert [s["op"] for s in plan["body"]].count("alloc") == 1


def test_a_copy_that_is_also_returned_is_made(rng):
    x, g = _operands(rng, 384, 128, 256)
    plan = _plan(COPY_KEPT, x=x, g=g)
    assert [s["strategy"] for s in launches(plan["body"])] == ["transpose", "matmul_wgmma"]


@pytest.mark.gpu
@pytest.mark.parametrize("rows, k, n", [(64, 128, 64), (384, 256, 768), (1088, 384, 2304)])
def test_cuda_weight_gradient_matches_float64(rng, rows, k, n):
    x, g = _operands(rng, rows, k, n)
    if COMPILE_ONLY:
        _plan(WEIGHT_GRADIENT, x=x, g=g)
        pytest.skip("compile-only: the artifact is in the cache")
    out = zynml.compile(WEIGHT_GRADIENT, device="cuda:0", dynamic=False).f(x=x, g=g)
    expected = x.astype(np.float64).T @ g.astype(np.float64)
    assert_close(np.asarray(out, np.float64), expected, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("splits, part, k, n", [(1, 64, 128, 64), (3, 128, 256, 256),
                                                (5, 192, 128, 512)])
def test_cuda_split_weight_gradient_matches_float64(rng, splits, part, k, n):
    x, g = _operands(rng, splits * part, k, n)
    if COMPILE_ONLY:
        _plan(SPLIT, x=x, g=g, splits=splits, part=part)
        pytest.skip("compile-only: the artifact is in the cache")
    out = zynml.compile(SPLIT, device="cuda:0", dynamic=False).f(x=x, g=g, splits=splits,
                                                                  part=part)
    xs = x.astype(np.float64).reshape(splits, part, k)
    gs = g.astype(np.float64).reshape(splits, part, n)
    expected = np.einsum("sic,sij->scj", xs, gs)
    assert_close(np.asarray(out, np.float64), expected, rtol=1e-2)
