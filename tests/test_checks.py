"""Checked mode on the CPU (zynml/checks.py, passes/cir_insert_checks.py): reads out of
range and integer division by zero found at run time are located errors; with valid
inputs a checked run gives the unchecked run's results, bit for bit."""
import numpy as np
import pytest

import zynml
from zynml import checks, compiler, knobs
from zynml.checks import Check

GATHER = """let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]]
}
"""

TWO_GATHERS = """let y = compute(x, a, b) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[a[i]] + x[b[i]]
}
"""

NESTED = """let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..rows:
        for j in 0..cols:
            out[i, j] = x[i, idx[j]]
}
"""

REDUCE = """let s = compute(x, idx) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[idx[i]]
}
"""

EMBED_MATMUL = """let y = compute(e, w, tok) {
    @kernel embedding_matmul
    for i in 0..t, j in 0..m:
        var s = 0.0
        for k in 0..d:
            s += e[tok[i], k] * w[k, j]
        out[i, j] = s
}
"""

GUARDED = """let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..n:
        var v = 0.0
        if idx[i] < 4:
            v = x[idx[i]]
        else:
            v = x[idx[i] - 4]
        out[i] = v
}
"""

MODULO = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i % m] + i / k
}
"""


def _error(source, **inputs) -> str:
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(source, device="cpu", checked=True, **inputs)
    return str(info.value)


def _read_error(where: str, line: str, caret: int, tensor: str, index: int, dim: int,
                size: int) -> str:
    return (f"<string>:{where}: error: '{tensor}' is read out of bounds: index {index} of "
            f"dimension {dim}, but that dimension of '{tensor}' has size {size}\n"
            f"{line}\n{' ' * (caret - 1)}^")


@pytest.mark.parametrize("bad", [4, 9, -1, -3, 2 ** 31])
def test_a_gather_out_of_range_is_a_located_error(bad):
    x = np.arange(4, dtype=np.float32)
    idx = np.array([0, 3, bad, 1, 2], np.int64)
    assert _error(GATHER, x=x, idx=idx) == _read_error(
        "4:18", "        out[i] = x[idx[i]]", 18, "x", bad, 0, 4)


def test_an_index_beyond_the_code_range_is_reported_as_at_least():
    x = np.arange(4, dtype=np.float32)
    message = _error(GATHER, x=x, idx=np.array([2 ** 62, 0], np.int64))
    assert "index >= 549755813887 of dimension 0" in message


def test_the_interpreter_says_the_same():
    x, idx = np.arange(4, dtype=np.float32), np.array([0, 7, 1], np.int32)
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(GATHER, device="interpreter", x=x, idx=idx)
    assert str(info.value) == _error(GATHER, x=x, idx=idx)


def test_nested_loops_name_the_dimension():
    x = np.ones((3, 5), np.float32)
    message = _error(NESTED, x=x, idx=np.array([4, 0, 5, 1], np.int64))
    assert message == _read_error("5:25", "            out[i, j] = x[i, idx[j]]", 25, "x", 5,
                                  1, 5)


def test_a_reduction_reports_its_read():
    message = _error(REDUCE, x=np.ones(6, np.float32), idx=np.array([1, 2, 6], np.int64))
    assert message.startswith("<string>:4:15: error: 'x' is read out of bounds: index 6 ")


def test_a_matmul_with_a_gathered_row():
    e, w = np.ones((5, 3), np.float32), np.ones((3, 7), np.float32)
    message = _error(EMBED_MATMUL, e=e, w=w, tok=np.array([0, 4, -2], np.int64))
    assert message == _read_error("6:18", "            s += e[tok[i], k] * w[k, j]", 18, "e",
                                  -2, 0, 5)


def test_the_first_failing_check_in_the_source_is_reported_every_time():
    x = np.arange(4, dtype=np.float32)
    both = dict(x=x, a=np.array([0, 8, 1], np.int64), b=np.array([9, 0, -1], np.int64))
    first = _error(TWO_GATHERS, **both)
    assert first.startswith("<string>:4:18: error: 'x' is read out of bounds: index 8 ")
    assert all(_error(TWO_GATHERS, **both) == first for _ in range(3))
    second = _error(TWO_GATHERS, x=x, a=np.array([0, 3, 1], np.int64),
                    b=np.array([1, 0, -1], np.int64))
    assert second.startswith("<string>:4:28: error: 'x' is read out of bounds: index -1 ")


def test_reads_under_an_if_are_checked_only_where_they_run():
    x = np.arange(4, dtype=np.float32)
    ok = zynml.run(GUARDED, device="cpu", checked=True, x=x,
                   idx=np.array([0, 7, 3, 4], np.int64))["y"]
    np.testing.assert_array_equal(ok, [0, 3, 3, 0])
    assert _error(GUARDED, x=x, idx=np.array([0, 9], np.int64)).startswith(
        "<string>:8:17: error: 'x' is read out of bounds: index 5 ")
    assert _error(GUARDED, x=x, idx=np.array([-2, 1], np.int64)).startswith(
        "<string>:6:17: error: 'x' is read out of bounds: index -2 ")


@pytest.mark.parametrize("m,k,where,message", [
    (0, 1, "4:22", "integer remainder by zero: the divisor is 0 (in 4 % 0)"),
    (3, 0, "4:31", "integer division by zero: the divisor is 0 (in 4 / 0)"),
])
def test_a_divisor_that_is_zero_at_run_time_is_a_located_error(m, k, where, message):
    line = "        out[i] = x[i % m] + i / k"
    col = int(where.split(":")[1])
    assert _error(MODULO, x=np.ones(5, np.float32), n=5, m=m, k=k) == \
        f"<string>:{where}: error: {message}\n{line}\n{' ' * (col - 1)}^"


@pytest.mark.parametrize("n", [1, 5])  # 1: scalar code, where x86's idiv raised SIGFPE
def test_unchecked_division_by_zero_does_not_crash(n):
    out = zynml.run(MODULO, device="cpu", x=np.ones(n, np.float32), n=n, m=0, k=0)["y"]
    assert out.shape == (n,)  # unspecified values, but a result


DIVIDE = """let q = compute(a, b) {
    @kernel elementwise
    for i in 0..n:
        out[i] = a[i] / b[i] + a[i] % b[i]
}
"""


@pytest.mark.parametrize("checked", [False, True])
@pytest.mark.parametrize("n", [1, 5])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_the_smallest_integer_over_minus_one_wraps_and_does_not_crash(dtype, n, checked):
    """i64_min / -1 overflows (SIGFPE on x86, passes/safe_integer_division.py): the
    quotient wraps to i64_min and the remainder is 0, as on the interpreter."""
    a = np.full(n, np.iinfo(dtype).min, dtype)
    b = np.full(n, -1, dtype)
    for device in ("cpu", "interpreter"):
        out = zynml.run(DIVIDE, device=device, checked=checked, a=a, b=b)["q"]
        np.testing.assert_array_equal(out, a)


CASES = {  # name -> (source, inputs from a generator)
    "gather": (GATHER, lambda r: dict(x=r.standard_normal(13).astype(np.float32),
                                      idx=r.integers(0, 13, 7))),
    "nested": (NESTED, lambda r: dict(x=r.standard_normal((3, 11)).astype(np.float32),
                                      idx=r.integers(0, 11, 5).astype(np.int32))),
    "reduce": (REDUCE, lambda r: dict(x=r.standard_normal(17).astype(np.float32),
                                      idx=r.integers(0, 17, 31))),
    "matmul": (EMBED_MATMUL, lambda r: dict(e=r.standard_normal((7, 5)).astype(np.float32),
                                            w=r.standard_normal((5, 3)).astype(np.float32),
                                            tok=r.integers(0, 7, 1))),
    "guarded": (GUARDED, lambda r: dict(x=r.standard_normal(4).astype(np.float32),
                                        idx=r.integers(0, 8, 13))),
    "modulo": (MODULO, lambda r: dict(x=r.standard_normal(11).astype(np.float32), n=11,
                                       m=7, k=3)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_valid_inputs_give_the_unchecked_results(name, rng):
    source, make = CASES[name]
    inputs = make(rng)
    checked = zynml.run(source, device="cpu", checked=True, **inputs)
    unchecked = zynml.run(source, device="cpu", **inputs)
    assert checked.keys() == unchecked.keys()  # the check result stays hidden
    for key in unchecked:
        np.testing.assert_array_equal(checked[key], unchecked[key])


def test_the_unchecked_build_has_no_checks():
    inputs = {"x": np.ones(4, np.float32), "idx": np.zeros(3, np.int64)}
    plain = str(zynml.compile(GATHER, device="cpu").stage_module(inputs))
    checked = str(zynml.compile(GATHER, device="cpu", checked=True).stage_module(inputs))
    assert "zynml.checks" not in plain and plain.count("linalg.generic") == 1
    assert '"zynml.checks"]' in checked and checked.count("linalg.generic") > 1
    assert compiler.CHECKED_PIPELINE.replace("cir-insert-checks,", "") == \
        compiler.CIR_TO_LINALG_PIPELINE


def test_checked_and_unchecked_artifacts_have_different_keys():
    program = zynml.compile(GATHER, device="cpu")
    backend = compiler.BACKENDS["iree"]
    keys = {compiler.artifact_key(backend, program.source, "", {"x": "f32"}, {},
                                  program.target, mode) for mode in (False, True)}
    assert len(keys) == 2
    x, idx = np.arange(4, dtype=np.float32), np.array([5], np.int64)
    zynml.run(GATHER, device="cpu", x=x, idx=idx)  # cached unchecked, then checked:
    assert "index 5" in _error(GATHER, x=x, idx=idx)


def test_the_check_table_comes_from_the_cache_without_the_compiler(monkeypatch):
    x, idx = np.arange(3, dtype=np.float32), np.array([1, 3], np.int64)
    expected = _error(GATHER, x=x, idx=idx)  # compiled and cached
    monkeypatch.setattr(compiler, "installed", lambda: False)
    assert _error(GATHER, x=x, idx=idx) == expected


def test_zynml_check_turns_checked_mode_on(monkeypatch):
    x, idx = np.arange(4, dtype=np.float32), np.array([6], np.int64)
    monkeypatch.setenv(knobs.CHECK.name, "1")
    with pytest.raises(zynml.ZynMLError, match="index 6 of dimension 0"):
        zynml.run(GATHER, device="cpu", x=x, idx=idx)
    assert zynml.run(GATHER, device="cpu", checked=False, x=x, idx=idx)["y"].shape == (1,)


def test_checked_takes_a_bool():
    with pytest.raises(zynml.ZynMLError, match="checked= takes True or False"):
        zynml.run(GATHER, device="cpu", checked="yes", x=np.ones(1, np.float32),
                  idx=np.zeros(1, np.int64))


def test_codes_decode_to_the_first_check_and_its_value():
    for k, value in [(0, 7), (3, -2), (12, 0)]:
        code = checks.priority(k) + min(max(value, -checks.INDEX_BIAS),
                                         checks.INDEX_BIAS - 1) + checks.INDEX_BIAS
        assert checks.decode(code) == (k, value, False)
    assert checks.priority(0) > checks.priority(1) + 2 ** checks.INDEX_BITS - 1
    assert checks.decode(-1) is None
    table = [Check("read", "f.zyn", 2, 3, "x", 1, 4)]
    assert checks.table_from_json(checks.table_to_json(table)) == table


LOG = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = log(x[i])
}
"""


def test_a_nan_made_from_inputs_without_nan_is_reported_at_its_block():
    x = np.array([1.5, 2.0, -1.0, 3.0, -2.0], np.float32)
    assert _error(LOG, x=x) == ("<string>:1:1: error: 'y' holds NaN at [2], but no input "
                                "holds NaN: this block produced it (0/0, inf - inf, 0 * inf, "
                                "log or sqrt of a negative number, ...)\n"
                                "let y = compute(x) {\n^")
    assert np.isnan(zynml.run(LOG, device="cpu", x=x)["y"][2])  # unchecked: as IEEE says


def test_nan_in_an_input_may_flow_to_the_outputs():
    x = np.array([1.0, np.nan, 4.0], np.float32)
    y = zynml.run(LOG, device="cpu", checked=True, x=x)["y"]
    np.testing.assert_array_equal(np.isnan(y), [False, True, False])
