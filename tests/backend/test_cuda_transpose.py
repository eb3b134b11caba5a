"""The `transpose` strategy (out[.., r, c] = f(in[.., c, r]) through shared-memory
tiles): which generics it takes (here, compile-only), and exact results on a GPU
(tools/gpu_tests.sh) at tile edges, batched, with a conversion in the body, and at
run-time sizes (one compile for every shape)."""
import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.plan_at_sizes import plan_at_sizes

from conftest import COMPILE_ONLY, dynamic_on_gpu

TRANSPOSES = """
let t = compute(x) {
    @kernel elementwise
    for b in 0..batch, c in 0..cols, r in 0..rows:
        out[b, c, r] = x[b, r, c]
}
let half = compute(x) {
    @kernel elementwise
    for b in 0..batch, c in 0..cols, r in 0..rows:
        out[b, c, r] = cast(x[b, r, c] * 2.0, bf16)
}
let same = compute(x) {
    @kernel elementwise
    for b in 0..batch, r in 0..rows, c in 0..cols:
        out[b, r, c] = x[b, r, c] + 1.0
}
"""


def _artifact(x):
    return zynml.compile(TRANSPOSES, device="cuda", require_device=False).artifact(x=x)


@pytest.mark.parametrize("shape, dtype", [((3, 37, 50), np.float32),
                                          ((2, 64, 1031), ml_dtypes.bfloat16)])
def test_transposes_take_tiles_and_copies_do_not(shape, dtype):
    x = np.ones(shape, dtype)
    steps = list(launches(_artifact(x).plan["body"]))
    assert [s["strategy"] for s in steps] == ["transpose", "transpose", "pointwise"]
    batch, rows, cols = shape
    tiles = batch * -(-cols // 32) * -(-rows // 32)  # the output's [cols, rows] in 32s
    assert [s["grid"] for s in steps[:2]] == [[tiles, 1, 1]] * 2
    assert steps[0]["block"] == [32, 8, 1]


def test_a_narrow_transpose_stays_pointwise():
    steps = list(launches(_artifact(np.ones((2, 5, 300), np.float32)).plan["body"]))
    assert steps[0]["strategy"] == "pointwise"


@pytest.mark.gpu
@pytest.mark.parametrize("shape, dtype", [((3, 37, 50), np.float32), ((1, 16, 16), np.float32),
                                          ((2, 64, 1031), ml_dtypes.bfloat16),
                                          ((5, 100, 33), np.float16)])
def test_cuda_transposes_are_exact(rng, shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    if COMPILE_ONLY:
        _artifact(x)
        pytest.skip("compile-only: the artifact is in the cache")
    out = zynml.compile(TRANSPOSES, device="cuda:0")(x=x)
    np.testing.assert_array_equal(np.asarray(out["t"]), x.transpose(0, 2, 1))
    np.testing.assert_array_equal(
        np.asarray(out["half"]),
        (x.astype(np.float32) * 2).astype(ml_dtypes.bfloat16).transpose(0, 2, 1))
    np.testing.assert_array_equal(np.asarray(out["same"]), x + dtype(1))


def test_run_time_sizes_take_tiles_the_grid_sized_at_the_call():
    prog = zynml.compile(TRANSPOSES, device="cuda", require_device=False, dynamic=True)
    plan = prog.artifact(x=np.ones((2, 40, 48), np.float32)).plan
    for batch, rows, cols in ((3, 37, 50), (1, 1, 7), (2, 1031, 64)):
        steps = list(launches(plan_at_sizes(plan, [(batch, rows, cols)], {})["body"]))
        assert [s["strategy"] for s in steps] == ["transpose", "transpose", "pointwise"]
        tiles = batch * -(-cols // 32) * -(-rows // 32)
        assert [s["grid"] for s in steps[:2]] == [[tiles, 1, 1]] * 2


@pytest.mark.gpu
def test_cuda_run_time_size_transposes_are_exact(rng):
    prog = dynamic_on_gpu(TRANSPOSES, x=np.ones((2, 40, 48), np.float32))
    for shape in ((3, 37, 50), (1, 1, 7), (2, 1031, 64), (1, 16, 16), (4, 33, 97)):
        x = rng.standard_normal(shape).astype(np.float32)
        out = prog(x=x)
        np.testing.assert_array_equal(np.asarray(out["t"]), x.transpose(0, 2, 1))
        np.testing.assert_array_equal(
            np.asarray(out["half"]),
            (x * 2).astype(ml_dtypes.bfloat16).transpose(0, 2, 1))
    assert prog.stats().specializations == 1
