"""pointwise's split reductions (zynml/backend/cuda/strategies/pointwise_split.py): few
outputs of long sums take a block of warps per 32 outputs, the warps splitting the
points. Without a GPU: which reductions split (the launch plan). On a GPU (marked
`gpu`): sums, maxima and a two-output reduction (a layer norm's parameter gradients'
second step) against float64 numpy at odd sizes."""
from __future__ import annotations

import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

from conftest import COMPILE_ONLY, assert_close

COLUMNS = """
let total = compute(x) {{
    @kernel reduce({op}, axis=0)
    for r in 0..rows, c in 0..cols:
        yield x[r, c]
}}
"""
TWO = """
let (a, b) = compute(x, y) {
    @kernel fused
    for c in 0..cols:
        var sa = 0.0
        var sb = 0.0
        for r in 0..rows:
            sa += x[r, c] * y[r, c]
            sb += y[r, c]
        out.a[c] = sa
        out.b[c] = sb
}
"""


def _program(source: str, require_device: bool = False):
    return zynml.compile(source, device="cuda:0", require_device=require_device)


def _launch(source: str, **inputs) -> dict:
    [step] = [s for s in launches(_program(source).artifact(**inputs).plan["body"])
              if s["strategy"] == "pointwise" and "fill" not in s["kernel"]][-1:]
    return step


@pytest.mark.parametrize("rows, cols, split", [
    (257, 97, True), (64, 16384, True), (1000, 1, True),
    (63, 97, False),       # short sums
    (64, 16385, False),    # many outputs
])
def test_few_outputs_of_long_sums_split(rows, cols, split):
    step = _launch(COLUMNS.format(op="+"), x=np.ones((rows, cols), np.float32))
    assert (step["block"][0] == 512) == split, step
    if split:
        assert step["grid"][0] == -(-cols // 32)


@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols", [(1, 1), (257, 97), (1000, 1), (64, 3001)])
@pytest.mark.parametrize("op", ["+", "max"])
def test_cuda_split_sums_and_maxima_match_float64(rng, rows, cols, op):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    source = COLUMNS.format(op=op)
    if COMPILE_ONLY:
        _program(source).artifact(x=x)
        pytest.skip("compile-only: the artifact is in the cache")
    got = np.asarray(_program(source, require_device=True)(x=x)["total"])
    wide = x.astype(np.float64)
    want = wide.sum(axis=0) if op == "+" else wide.max(axis=0)
    assert_close(got, want, rtol=1e-5, floor=np.abs(wide).sum(axis=0).max() * 1e-6)


@pytest.mark.gpu
def test_cuda_two_outputs_split_match_float64(rng):
    x, y = (rng.standard_normal((256, 769)).astype(np.float32) for _ in range(2))
    if COMPILE_ONLY:
        _program(TWO).artifact(x=x, y=y)
        pytest.skip("compile-only: the artifact is in the cache")
    out = _program(TWO, require_device=True)(x=x, y=y)
    wide_x, wide_y = x.astype(np.float64), y.astype(np.float64)
    assert_close(out["a"], (wide_x * wide_y).sum(axis=0), rtol=1e-5, floor=1e-3)
    assert_close(out["b"], wide_y.sum(axis=0), rtol=1e-5, floor=1e-3)
