"""NaN in min, max, argmin and argmax (docs/language.md §2): min and max propagate NaN;
argmin and argmax give the index of the first NaN when there is one, as numpy does.
Checked against numpy on the CPU here; test_nan_on_the_gpu checks the native CUDA path."""
import numpy as np
import pytest

import zynml

ARG = """let arg = compute(data) {{
    @kernel reduce({op})
    for i in 0..len:
        yield (data[i], i)
}}
"""
ROWS = """let by_row = compute(m) {{
    @kernel reduce({op}, axis=1)
    for i in 0..rows, j in 0..cols:
        yield (m[i, j], j)
}}
let by_col = compute(m) {{
    @kernel reduce({op}, axis=0)
    for i in 0..rows, j in 0..cols:
        yield (m[i, j], i)
}}
"""
EXTREMES = """let reduced = compute(x) {
    @kernel reduce(max)
    for i in 0..n:
        yield x[i]
}
let smallest = compute(x) {
    @kernel reduce(min)
    for i in 0..n:
        yield x[i]
}
let running = compute(x) {
    @kernel elementwise
    for r in 0..1:
        var m = -inf
        var s = inf
        for i in 0..n:
            m = max(m, x[i])
            s = min(s, x[i])
        out[r] = m - s
}
let whole = compute(x) {
    @kernel fused
    let top = reduce(max, x)
    out = x * 0.0 + top
}
let clamped = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = clamp(x[i], -1.0, 1.0) + relu(x[i])
}
"""
NUMPY = {"argmax": np.argmax, "argmin": np.argmin}


def _with_nans(rng, shape, count):
    data = rng.standard_normal(shape).astype(np.float32)
    flat = data.reshape(-1)
    flat[rng.choice(flat.size, count, replace=False)] = np.nan
    return data


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("data", [[1, np.nan, 5], [np.nan, 1, np.nan], [1, 2, np.nan],
                                  [np.nan], [1, np.nan, np.nan, 7], [3, 1, 3, 1]])
def test_arg_of_small_arrays_is_numpys(op, data):
    data = np.array(data, np.float32)
    assert zynml.run(ARG.format(op=op), data=data)["arg"] == NUMPY[op](data)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_of_long_arrays_finds_the_first_nan(op, rng):
    """Long enough to be reduced in parallel chunks: the first NaN wins whatever the
    order partial results meet in."""
    for count in (0, 1, 2, 40):
        data = _with_nans(rng, 10007, count)
        data[rng.integers(10007)] = 50.0 if op == "argmax" else -50.0
        assert zynml.run(ARG.format(op=op), data=data)["arg"] == NUMPY[op](data)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_along_an_axis_is_numpys(op, rng):
    m = _with_nans(rng, (37, 53), 30)
    out = zynml.run(ROWS.format(op=op), m=m)
    np.testing.assert_array_equal(out["by_row"], NUMPY[op](m, axis=1))
    np.testing.assert_array_equal(out["by_col"], NUMPY[op](m, axis=0))


def test_min_and_max_propagate_nan(rng):
    x = rng.standard_normal(1001).astype(np.float32)
    out = zynml.run(EXTREMES, x=x)
    assert out["reduced"] == x.max() and out["smallest"] == x.min()
    x[617] = np.nan
    out = zynml.run(EXTREMES, x=x)
    for name in ("reduced", "smallest", "running", "whole"):
        assert np.isnan(out[name]).all(), name
    clamped = out["clamped"]
    assert np.isnan(clamped[617]) and not np.isnan(np.delete(clamped, 617)).any()


def test_integer_argmax_is_unaffected(rng):
    data = rng.integers(-5, 5, 1000).astype(np.int32)
    assert zynml.run(ARG.format(op="argmax"), data=data)["arg"] == np.argmax(data)
    assert zynml.run(ARG.format(op="argmin"), data=data)["arg"] == np.argmin(data)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [5, 100003])
def test_nan_on_the_gpu(n, rng):
    """The native CUDA path follows the same rule (argmax/argmin are lowered by the shared
    cir-to-linalg; max by the strategies' reductions)."""
    data = _with_nans(rng, n, 3 if n > 5 else 1)
    m = _with_nans(rng, (64, max(n // 64, 3)), 20)
    args = {op: zynml.compile(ARG.format(op=op), device="cuda:0") for op in NUMPY}
    rows = zynml.compile(ROWS.format(op="argmax"), device="cuda:0")
    extremes = zynml.compile(EXTREMES, device="cuda:0")
    for prog in args.values():  # every artifact first: compile-only runs stop at a call
        prog.artifact(data=data)
    rows.artifact(m=m)
    extremes.artifact(x=data)
    for op, prog in args.items():
        assert int(np.asarray(prog(data=data)["arg"])) == NUMPY[op](data), op
    out = rows(m=m)
    np.testing.assert_array_equal(np.asarray(out["by_row"]), np.argmax(m, axis=1))
    np.testing.assert_array_equal(np.asarray(out["by_col"]), np.argmax(m, axis=0))
    out = extremes(x=data)
    for name in ("reduced", "smallest", "running", "whole"):
        assert np.isnan(np.asarray(out[name])).all(), name
