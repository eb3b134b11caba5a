"""The row_argreduce strategy (zynml/backend/cuda/strategies/row_argreduce.py): argmax
and argmin by rows, a block per row. Without a GPU: which reductions it takes (from the
launch plan). On a GPU (marked `gpu`): numpy's answers, ties and NaN included (the
lowest index wins; the first NaN is the argmax and the argmin)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

from conftest import COMPILE_ONLY

ROWS = """
let best = compute(m) {{
    @kernel reduce({op}, axis=1)
    for r in 0..rows, c in 0..cols:
        yield (m[r, c], c)
}}
"""
NUMPY = {"argmax": np.argmax, "argmin": np.argmin}


def _program(op: str, require_device: bool = False):
    return zynml.compile(ROWS.format(op=op), device="cuda:0", require_device=require_device)


def _strategies(op: str, m: np.ndarray) -> list[str]:
    return [step["strategy"] for step in launches(_program(op).artifact(m=m).plan["body"])]


@pytest.mark.parametrize("op", sorted(NUMPY))
@pytest.mark.parametrize("shape, dtype", [((1, 32000), ml_dtypes.bfloat16),
                                          ((16, 32000), np.float32), ((5, 1000), np.int32)])
def test_long_rows_take_a_block_each(op, shape, dtype):
    assert "row_argreduce" in _strategies(op, np.zeros(shape, dtype))


@pytest.mark.parametrize("shape, dtype", [((7, 31), np.float32), ((3, 100), np.float64)])
def test_short_rows_and_f64_stay_pointwise(shape, dtype):
    assert "row_argreduce" not in _strategies("argmax", np.zeros(shape, dtype))


def _cases(rng):
    ties = rng.integers(-3, 3, (3, 33)).astype(np.float32)  # many equal values a row
    nans = rng.standard_normal((16, 32000)).astype(np.float32)
    nans[2, [5, 900, 31000]] = np.nan
    nans[7, 31999] = np.nan
    nans[9, :] = np.nan
    nans[11, :] = -np.inf
    return [("ties", ties), ("nans", nans),
            ("one row bf16", rng.standard_normal((1, 32000)).astype(ml_dtypes.bfloat16)),
            ("i32", rng.integers(-1000, 1000, (5, 1001)).astype(np.int32)),
            ("a prime row", rng.standard_normal((2, 4099)).astype(np.float16))]


@pytest.mark.gpu
@pytest.mark.parametrize("op", sorted(NUMPY))
def test_argreduce_rows_are_numpys(op, rng):
    cases = _cases(rng)
    if COMPILE_ONLY:
        for _, m in cases:
            _program(op).artifact(m=m)
        pytest.skip("compile-only: the artifacts are in the cache")
    program = _program(op, require_device=True)
    for name, m in cases:
        got = np.asarray(program(m=m)["best"])
        want = NUMPY[op](m.astype(np.float64), axis=1)
        np.testing.assert_array_equal(got, want, err_msg=name)
