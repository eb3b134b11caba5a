"""Min/max scatters, `x[ids[i], d] = min(x[ids[i], d], v)` (docs/language.md §2), against
numpy's `np.minimum.at`/`np.maximum.at`, and deterministic mode: on the CPU (IREE) and
the interpreter; native CUDA compiled here (integer atomics, a compare-and-swap loop for
floats, sorted segments for deterministic float sums), run by the `gpu` tests."""
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.backend.iree.scatter import expand_scatters
from zynml.cli import main as cli
from zynml.runtime.cuda.artifact import launches

EMBEDDING = Path(__file__).parent / "programs" / "training" / "embedding_backward.zyn"
DEVICES = ["cpu", "interpreter"]

MIN = """compute(mut table, ids, v) {
    @kernel scatter
    for t in 0..tokens, d in 0..dim:
        table[ids[t], d] = min(table[ids[t], d], v[t, d])
}
"""
TWO_INDICES = """compute(mut table, rows, cols, v) {
    @kernel scatter
    for b in 0..batch, s in 0..seq, e in 0..dim:
        table[rows[b, s], cols[b, s], e] += v[b, s, e] * 2.0
}
"""
# max, the contribution first, two batch loops
MAX = """compute(mut table, ids, v) {
    @kernel scatter
    for b in 0..batch, s in 0..seq, d in 0..dim:
        table[ids[b, s], d] = max(v[b, s, d] * 2, table[ids[b, s], d])
}
"""


def min_case(rng, dtype, vocab=7, tokens=29, dim=5):
    ids = rng.integers(0, vocab, tokens)
    ids[: tokens // 2] = ids[0]  # many repeats of one id
    scale = 1000 if np.dtype(dtype).kind in "iu" else 1
    table = (rng.standard_normal((vocab, dim)) * scale).astype(dtype)
    v = (rng.standard_normal((tokens, dim)) * scale).astype(dtype)
    expected = table.astype(np.float64)
    np.minimum.at(expected, ids, v.astype(np.float64))
    return table, ids, v, expected


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_min_scatter_against_numpy(rng, device, dtype):
    table, ids, v, expected = min_case(rng, dtype)  # u8: unsigned order (200 > 100)
    out = zynml.run(MIN, device=device, table=table, ids=ids, v=v)
    assert out["table"] is table
    np.testing.assert_array_equal(table, expected.astype(dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_max_scatter_two_batch_loops(rng, device, dtype):
    table = (rng.standard_normal((11, 3)) * 100).astype(dtype)
    ids = rng.integers(0, 11, (5, 13))
    v = (rng.standard_normal((5, 13, 3)) * 100).astype(dtype)
    expected = table.astype(np.float64)
    np.maximum.at(expected, ids, 2 * v.astype(np.float64))
    zynml.run(MAX, device=device, table=table, ids=ids, v=v)
    np.testing.assert_array_equal(table, expected.astype(dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_min_scatter_propagates_nan_like_reduce_min(device):
    table = np.array([[1.0, np.nan], [0.0, 5.0], [3.0, 4.0]], np.float32)
    ids = np.array([0, 1, 1, 2, 0])
    v = np.array([[2.0, 7.0], [-0.0, 6.0], [1.0, np.nan], [2.5, 9.0], [0.5, 1.0]],
                 np.float32)
    zynml.run(MIN, device=device, table=table, ids=ids, v=v)
    assert table[0, 0] == 0.5 and np.isnan(table[0, 1])  # a NaN of x stays
    assert table[1, 0] == 0 and np.signbit(table[1, 0])  # -0.0 is below +0.0
    assert np.isnan(table[1, 1])  # a contribution's NaN wins
    np.testing.assert_array_equal(table[2], [2.5, 4.0])


@pytest.mark.parametrize("kind,element,combiner", [
    ("min", "f32", "arith.minimumf"), ("max", "bf16", "arith.maximumf"),
    ("min", "i32", "arith.minsi"), ("umax", "i8", "arith.maxui"), ("add", "i64", "arith.addi")])
def test_iree_scatter_region_per_kind(kind, element, combiner):
    callee = f"__zynml_scatter_{kind}_d1_0"
    types = f"(tensor<3x2x{element}>, tensor<3x1xi64>, tensor<5x2x{element}>)"
    text = (f"    %0 = call @{callee}(%a, %b, %c) : {types} -> tensor<5x2x{element}>\n"
            f"  func.func private @{callee}{types} -> tensor<5x2x{element}> "
            "attributes {zynml.scatter}\n")
    expanded = expand_scatters(text)
    assert f"= {combiner} %zynml_scatter0_b, %zynml_scatter0_a : {element}" in expanded
    assert "func.func private" not in expanded and "call @" not in expanded


def _spread_case(rng, vocab=5, tokens=4099, dim=7):
    """Float sums whose order shows: values across 16 decades, ids repeated 800 times."""
    ids = rng.integers(0, vocab, tokens)
    grad_out = (rng.standard_normal((tokens, dim)) *
                10.0 ** rng.integers(-8, 8, (tokens, dim))).astype(np.float32)
    grad_w = rng.standard_normal((vocab, dim)).astype(np.float32)
    return grad_w, ids, grad_out


@pytest.mark.parametrize("deterministic", [False, True])
def test_the_cpu_backend_sums_scatters_in_loop_order(rng, deterministic):
    """IREE's CPU scatter adds contributions in loop order: the interpreter's bits, every
    run (zynml/backend/iree/scatter.py), with or without deterministic mode."""
    grad_w, ids, grad_out = _spread_case(rng)
    interpreted = grad_w.copy()
    zynml.run(EMBEDDING, device="interpreter", grad_w=interpreted, ids=ids, grad_out=grad_out)
    np.testing.assert_array_equal(interpreted.view(np.uint32),
                                  _in_loop_order(grad_w, ids, grad_out).view(np.uint32))
    _five_runs_in_loop_order(zynml.compile(EMBEDDING, device="cpu",
                                           deterministic=deterministic), grad_w, ids, grad_out)


def _in_loop_order(grad_w, ids, grad_out):
    """The interpreter's sums (the test above checks it): numpy's `add.at` in f32 adds
    one contribution at a time, in order. The GPU machine has no MLIR to interpret with."""
    out = grad_w.copy()
    np.add.at(out, ids, grad_out)
    return out


def _five_runs_in_loop_order(prog, grad_w, ids, grad_out) -> None:
    reference = _in_loop_order(grad_w, ids, grad_out)
    for _ in range(5):
        got = grad_w.copy()
        prog(grad_w=got, ids=ids, grad_out=grad_out)
        np.testing.assert_array_equal(got.view(np.uint32), reference.view(np.uint32))


def test_deterministic_comes_from_the_knob(monkeypatch):
    monkeypatch.setenv("ZYNML_DETERMINISTIC", "1")
    prog = zynml.compile(EMBEDDING, device="cuda", require_device=False)
    assert prog.deterministic and prog.cuda_target.deterministic
    assert not zynml.compile(EMBEDDING, device="cuda", require_device=False,
                             deterministic=False).cuda_target.deterministic


def test_deterministic_option_must_be_a_bool():
    with pytest.raises(zynml.ZynMLError, match="deterministic= takes True or False"):
        zynml.compile(EMBEDDING, deterministic="yes")


# ---------------------------------------------------------------------------- CUDA

def _artifact(source, deterministic=False, **inputs):
    prog = zynml.compile(source, device="cuda", require_device=False,
                         deterministic=deterministic)
    artifact = prog.artifact(**inputs)
    if shutil.which("ptxas"):  # the PTX assembles for the chip
        assert artifact.cubin
    return artifact


@pytest.mark.parametrize("dtype,instruction", [
    (np.int32, r"atom\.global\.min\.s32"), (np.int64, r"atom\.global\.min\.s64"),
    (np.uint32, r"atom\.global\.min\.u32"),
    (np.float32, r"min\.NaN\.f32[\s\S]*atom\.[\w.]*cas\.b32"),
    # no min.NaN.f64 in PTX: min.f64 with the NaN and -0.0 rules around it
    (np.float64, r"min\.f64[\s\S]*atom\.[\w.]*cas\.b64"),
    (np.float16, r"atom\.[\w.]*cas\.b32"),  # the 16 bits swapped within their word
])
def test_min_scatter_is_one_cuda_kernel_of_atomics(rng, dtype, instruction):
    table, ids, v, _ = min_case(rng, dtype)
    artifact = _artifact(MIN, table=table, ids=ids, v=v)
    assert len(list(launches(artifact.plan["body"]))) == 2  # the ids clamped, the atomics
    assert re.search(instruction, artifact.ptx), artifact.ptx
    assert artifact.plan["outputs"][0]["updates"] == 0  # into the caller's table


def test_deterministic_sum_is_sorted_segments_without_atomics(rng):
    grad_w, ids, grad_out = _spread_case(rng, 7, 13, 5)
    plain = _artifact(EMBEDDING, grad_w=grad_w, ids=ids, grad_out=grad_out)
    sorted_ = _artifact(EMBEDDING, True, grad_w=grad_w, ids=ids, grad_out=grad_out)
    # after the kernel that clamps the ids into grad_w: atomics; ranks, order, sums
    assert len(list(launches(plain.plan["body"]))) == 2
    assert len(list(launches(sorted_.plan["body"]))) == 4
    assert re.search(r"\b(?:red|atom)\.", plain.ptx)
    assert not re.search(r"\b(?:red|atom)\.", sorted_.ptx)
    assert sorted_.plan["outputs"][0]["updates"] == 0
    # min/max and integer sums are exact in any order: atomics still
    table, ids, v, _ = min_case(rng, np.int32)
    assert re.search(r"atom\.global\.min\.s32", _artifact(MIN, True, table=table, ids=ids,
                                                         v=v).ptx)


@pytest.mark.gpu
def test_min_max_scatters_on_the_gpu(rng):
    cases = [(MIN, min_case(rng, dtype, 101, 4099, 67)) for dtype in
             (np.float32, np.int32, np.float64)]
    v = (rng.standard_normal((3, 1031, 5)) * 100).astype(np.float32)
    ids, table = rng.integers(0, 37, (3, 1031)), rng.standard_normal((37, 5)).astype(
        np.float32)
    for source, (t, i, x, _) in cases:  # every artifact first, then the launches
        _artifact(source, table=t, ids=i, v=x)
    _artifact(MAX, table=table, ids=ids, v=v)
    for source, (t, i, x, expected) in cases:
        zynml.run(source, device="cuda:0", table=t, ids=i, v=x)
        np.testing.assert_array_equal(t, expected.astype(t.dtype))
    expected = table.astype(np.float64)
    np.maximum.at(expected, ids, 2 * v.astype(np.float64))
    zynml.run(MAX, device="cuda:0", table=table, ids=ids, v=v)
    np.testing.assert_array_equal(table, expected.astype(np.float32))


@pytest.mark.gpu
def test_deterministic_mode_is_the_interpreters_bits_every_run(rng):
    grad_w, ids, grad_out = _spread_case(rng, 61, 4099, 67)
    even = _spread_case(rng, 16, 1024, 64)  # the pointwise kernels' vector paths
    table, v = _spread_case(rng, 3 * 4, 3 * 997, 5)[::2]  # two indices: rows, columns
    table, v = table.reshape(3, 4, 5), v.reshape(3, 997, 5)
    rows, cols = rng.integers(0, 3, (3, 997)), rng.integers(0, 4, (3, 997))
    for case in ((grad_w, ids, grad_out), even):
        _artifact(EMBEDDING, True, grad_w=case[0], ids=case[1], grad_out=case[2])
    _artifact(TWO_INDICES, True, table=table, rows=rows, cols=cols, v=v)
    for case in ((grad_w, ids, grad_out), even):
        _five_runs_in_loop_order(zynml.compile(EMBEDDING, device="cuda:0",
                                               deterministic=True), *case)
    prog = zynml.compile(TWO_INDICES, device="cuda:0", deterministic=True)
    reference = table.copy()
    np.add.at(reference, (rows, cols), v * np.float32(2))  # in (b, s) order, as the loops
    for _ in range(5):
        got = table.copy()
        prog(table=got, rows=rows, cols=cols, v=v)
        np.testing.assert_array_equal(got.view(np.uint32), reference.view(np.uint32))


# ---------------------------------------------------------------------------- errors

@pytest.mark.parametrize("body", [
    "table[ids[t], d] = min(table[ids[t], 0], v[t, d])",  # another element
    "table[ids[t], d] = min(v[t, d], 1.0)",  # x not read
    "table[ids[t], d] = min(table[ids[t], d], v[t, d]) + 1.0",
    "table[ids[t], d] -= v[t, d]",
])
def test_other_scatter_forms_are_located_errors(body):
    source = MIN.replace("table[ids[t], d] = min(table[ids[t], d], v[t, d])", body)
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(source)
    assert str(err.value).startswith(
        "<string>:4:9: error: a write at an index read from data is a scatter and must "
        "accumulate: write table[...] += value (repeated indices add up), or table[...] = "
        "min(table[...], value) (or max) with the same indices")


def test_two_combiners_on_one_input_are_an_error():
    source = MIN.replace("        table[ids[t], d] = min(", "        table[ids[t], d] += "
                         "v[t, d]\n        table[ids[t], d] = min(")
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(source)
    assert str(err.value).startswith(
        "<string>:5:9: error: 'table' is scattered into with '+=' and with 'min' in one "
        "block, whose order would matter: write them in two blocks")


def test_the_cli_flag_gives_sorted_segments(capsys):
    command = ["compile", str(EMBEDDING), "--device", "cuda", "--shape", "grad_w=7x5",
               "--shape", "ids=13:i64", "--shape", "grad_out=13x5", "--emit", "plan"]
    counts = []
    for extra in ([], ["--deterministic"]):
        assert cli.main(command + extra) == 0
        plan = capsys.readouterr().out
        counts.append(plan.count('"op": "launch"'))
    assert counts == [2, 4]  # the ids clamped, then atomics or ranks, order, sums


@pytest.mark.parametrize("device,checked", [("cpu", True), ("interpreter", False)])
@pytest.mark.parametrize("bad", [-1, 7])
def test_a_scatter_index_outside_its_input_is_a_located_error(rng, device, checked, bad):
    """Checked mode (and the interpreter, always) reports a scatter's index past its
    `mut` input at the write, by the input's name."""
    table, ids, v, _ = min_case(rng, np.float32)
    ids[11] = bad
    with pytest.raises(zynml.ZynMLError, match=(
            rf"<string>:4:9: error: 'table' is written out of bounds: index {bad} of "
            r"dimension 0, but that dimension of 'table' has size 7")):
        zynml.run(MIN, device=device, checked=checked, table=table, ids=ids, v=v)


def test_checked_mode_passes_scatters_in_range(rng):
    table, ids, v, expected = min_case(rng, np.float32)
    out = zynml.run(MIN, device="cpu", checked=True, table=table, ids=ids, v=v)["table"]
    np.testing.assert_array_equal(out, expected.astype(np.float32))


@pytest.mark.parametrize("bad,row", [(-1, 0), (-(2 ** 40), 0), (7, 6), (2 ** 40, 6)])
def test_an_unchecked_index_outside_its_input_stays_inside_it(rng, bad, row):
    """Undefined behaviour, but never a write outside the input (IREE's CPU scatter
    crashed the process on -1): the index is clamped into the table."""
    table, ids, v, _ = min_case(rng, np.float32)
    ids[11] = bad
    expected = table.astype(np.float64)
    np.minimum.at(expected, np.clip(ids, 0, 6), v.astype(np.float64))
    out = zynml.run(MIN, device="cpu", table=table, ids=ids, v=v)["table"]
    np.testing.assert_array_equal(out, expected.astype(np.float32))
    assert out[row].tolist() == expected[row].astype(np.float32).tolist()
