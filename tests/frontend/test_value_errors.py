"""Values a program gets wrong (numbers beyond 64 bits, deep expressions, loops that run no
iteration, triangular loops, empty inputs): a located ZynMLError at the exact LINE:COL, or
the right result; they used to end in internal errors (exit 2) or iree-compile crashes."""
import numpy as np
import pytest

import zynml
from zynml.limits import MAX_EXPRESSION_DEPTH, MAX_VALUE_DEPTH
from conftest import assert_compile_error


def _elementwise(line: str, head: str = "", loop: str = "for i in 0..n:") -> str:
    return (f"let y = compute(x) {{\n    @kernel elementwise\n{head}    {loop}\n"
            f"        {line}\n}}\n")


BIG = "99999999999999999999"
OUT_OF_RANGE = (f"integer literal {BIG} is out of range: integers have 64 bits "
                "(at most 9223372036854775807)")
# name -> (source, where, message): errors zynml.compile reports
COMPILE_ERRORS = {
    "a loop bound beyond 64 bits": (
        "let y = compute(x) {\n    @kernel reduce(+)\n"
        f"    for i in 0..{BIG}:\n        yield x[0]\n}}\n", "3:17", OUT_OF_RANGE),
    "@workgroup beyond 64 bits": (
        _elementwise("out[i] = x[i]", f"    @workgroup({BIG})\n"), "3:16", OUT_OF_RANGE),
    "@shared beyond 64 bits": (
        _elementwise("out[i] = x[i]", f"    @shared({BIG})\n"), "3:13", OUT_OF_RANGE),
    "@broadcast's axis beyond 64 bits": (
        _elementwise("out[i] = x[i]", "    @broadcast(x, axis=18446744073709551616)\n"),
        "3:24", "integer literal 18446744073709551616 is out of range"),
    "@shared folding beyond 64 bits": (
        _elementwise("out[i] = x[i]", "    @shared(4 * 3037000500 * 3037000500)\n"),
        "3:13", "this constant is 36893488148001000000, which does not fit in 64 bits"),
    "a triangular loop writing out": (
        "let y = compute(x) {\n    @kernel elementwise\n    for b in 0..n:\n"
        "        for i in 0..b:\n            out[b, i] = x[i]\n}\n", "5:20",
        "cannot infer the output shape: the loop that gives this dimension of the result "
        "runs to 'b', a loop variable"),
    "an index of out offset by a loop variable": (
        "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n, j in 0..m:\n"
        "        out[i + j] = x[i, j]\n}\n", "4:13",
        "cannot infer the output shape: index 'out' with a*i + c, i a loop variable "
        "running from 0 in steps of 1 and c a constant or sizes"),
    "a loop of step 0": (
        "let y = compute(x) {\n    @kernel reduce(+)\n    for i in 0..n step 0:\n"
        "        yield x[0]\n}\n", "3:24", "a loop's step must be positive, got 0"),
    "an expression too deep": (
        _elementwise("out[i] = " + " + ".join(["x[i]"] * (MAX_EXPRESSION_DEPTH + 5))),
        f"4:{23 + 7 * (MAX_EXPRESSION_DEPTH - 2)}",  # the '+' past the limit
        f"expression too deep: more than {MAX_EXPRESSION_DEPTH} operations nested in one "
        "expression; split it with 'let'"),
}


@pytest.mark.parametrize("name", sorted(COMPILE_ERRORS))
def test_located_compile_error(name):
    source, where, message = COMPILE_ERRORS[name]
    assert_compile_error(source, where, message)


ARGMAX = ("let a = compute(data) {\n    @kernel reduce(argmax)\n    for i in 0..len:\n"
          "        yield (data[i], i)\n}\n")
ARGMAX_ROWS = ("let a = compute(m) {\n    @kernel reduce(argmax, axis=1)\n"
               "    for i in 0..rows, j in 0..cols:\n        yield (m[i, j], j)\n}\n")
# name -> (source, inputs, where, message): errors at the call
CALL_ERRORS = {
    "argmax of an empty array": (ARGMAX, dict(data=np.zeros(0, np.float32)), "3:9",
                                 "argmax of no values: the loop over 'i' runs no iteration "
                                 "(0..0)"),
    "argmax of empty rows": (ARGMAX_ROWS, dict(m=np.zeros((3, 0), np.float32)), "3:23",
                             "argmax of no values: the loop over 'j' runs no iteration"),
    "a loop that would need a huge extent tensor": (
        "let y = compute(x) {\n    @kernel reduce(+)\n    for i in -999999999999..3:\n"
        "        yield x[0]\n}\n", dict(x=np.ones(3, np.float32)), "3:5",
        "cannot lower this 'reduce' body to linalg: this loop runs 1000000000002 times and "
        "no input is read along it"),
    "a triangular loop run in order": (
        "let y = compute(x) {\n    @kernel elementwise\n    for b in 0..n:\n"
        "        var e = 0.0\n        for i in 0..b:\n            e = 0.5 * e + x[i]\n"
        "        out[b] = e\n}\n", dict(x=np.ones(4, np.float32), n=4), "5:9",
        "cannot lower this 'elementwise' body to linalg: a loop run in order"),
    "a loop run in order whose step is a size of -2": (
        "let y = compute(x) {\n    @kernel elementwise\n    for r in 0..rows:\n"
        "        var e = 0.0\n        for c in 0..cols step s:\n            e = 0.5 * e + x[r, c]\n"
        "        out[r] = e\n}\n", dict(x=np.ones((2, 4), np.float32), cols=4, s=-2), "5:31",
        "a loop's step must be positive, got -2"),
    "a result extent beyond 64 bits": (
        _elementwise("out[4611686018427387904 * i] = x[i]"), dict(x=np.ones(3, np.float32)),
        "4:13", "dimension 0 of the result would have 9223372036854775809 elements"),
    "a chain of values too long": (
        "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
        "        var v = x[i]\n" + "        v = v * 0.5 + x[i]\n" * (MAX_VALUE_DEPTH // 2 + 2)
        + "        out[i] = v\n}\n", dict(x=np.ones(3, np.float32)),
        f"{4 + MAX_VALUE_DEPTH // 2}:9",  # each line adds two operations
        f"a value here is built by a chain of more than {MAX_VALUE_DEPTH} operations"),
}


@pytest.mark.parametrize("name", sorted(CALL_ERRORS))
def test_located_error_at_the_call(name):
    source, inputs, where, message = CALL_ERRORS[name]
    prog = zynml.compile(source)
    with pytest.raises(zynml.ZynMLError) as info:
        prog(**inputs)
    assert str(info.value).startswith(f"<string>:{where}: error: {message}")


def test_a_sum_of_a_thousand_terms_compiles(rng):
    x = rng.standard_normal(5).astype(np.float32)
    terms = [f"x[i] * {k}.0" for k in range(1000)]
    out = zynml.run(_elementwise("out[i] = " + " + ".join(terms)), x=x)["y"]
    np.testing.assert_allclose(out, x * sum(range(1000)), rtol=1e-4)
    total = zynml.run("let s = compute(x) {\n    @kernel reduce(+)\n    for i in 0..n:\n"
                      "        yield " + " + ".join(["x[i]"] * 400) + "\n}\n", x=x)["s"]
    # against float64, within f32 rounding of the terms' magnitude (x's sum may cancel)
    np.testing.assert_allclose(total, 400 * x.astype(np.float64).sum(), rtol=0,
                               atol=1e-5 * 400 * np.abs(x).sum())


def test_loops_that_run_no_iteration():
    """`0..-3` runs no iteration, as Python's range(0, -3): a sum is 0, a result empty."""
    x = np.ones(3, np.float32)
    assert zynml.run("let y = compute(x) {\n    @kernel reduce(+)\n    for i in 0..-3:\n"
                     "        yield x[0]\n}\n", x=x)["y"] == 0
    conv = ("let y = compute(x, w) {\n    @kernel conv1d\n    for o in 0..out_len:\n"
            "        var s = 0.0\n        for k in 0..taps:\n            s += x[o + k] * w[k]\n"
            "        out[o] = s\n}\n")
    out = zynml.run(conv, x=np.ones(5, np.float32), w=np.ones(2, np.float32), out_len=-1)["y"]
    assert out.shape == (0,) and out.dtype == np.float32


def test_empty_inputs_give_numpys_results():
    a, b = np.ones((2, 0), np.float32), np.ones((0, 3), np.float32)
    matmul = ("let C = compute(A, B) {\n    @kernel matmul\n    for i in 0..M, j in 0..N:\n"
              "        var sum = 0.0\n        for k in 0..K:\n            sum += A[i, k] * B[k, j]\n"
              "        out[i, j] = sum\n}\n")
    np.testing.assert_array_equal(zynml.run(matmul, A=a, B=b)["C"], np.zeros((2, 3)))
    assert zynml.run(matmul, A=b.T, B=a.T)["C"].shape == (3, 2)
    out = zynml.run(ARGMAX_ROWS, m=np.ones((0, 3), np.float32))["a"]
    assert out.shape == (0,)
    sums = zynml.run("let s = compute(x) {\n    @kernel reduce(+)\n    for i in 0..n:\n"
                     "        yield x[i]\n}\n", x=np.zeros(0, np.float32))["s"]
    assert sums == 0


def test_triangular_reductions(rng):
    """`for i in 0..b` inside `for b`: run to b's largest value, the rest masked."""
    x = rng.standard_normal(6).astype(np.float32)
    prefix = ("let y = compute(x) {\n    @kernel elementwise\n    for b in 0..n:\n"
              "        var s = 0.0\n        for i in 0..b:\n            s += x[i]\n"
              "        out[b] = s\n}\n")
    np.testing.assert_allclose(zynml.run(prefix, x=x, n=6)["y"], np.cumsum(x) - x,
                               rtol=1e-5, atol=1e-6)
    pairs = ("let y = compute(x) {\n    @kernel reduce(+)\n    for b in 0..n:\n"
             "        for i in 0..b + 1:\n            yield x[i] * x[b]\n}\n")
    expected = sum(x[i] * x[b] for b in range(6) for i in range(b + 1))
    np.testing.assert_allclose(zynml.run(pairs, x=x)["y"], expected, rtol=1e-4)


def test_a_gather_in_a_reduction():
    """`yield x[idx[i]]` is no plain load: not a linalg.reduce (an AffineMap compared with
    None used to escape as a TypeError)."""
    out = zynml.run("let y = compute(x, idx) {\n    @kernel reduce(+)\n    for i in 0..n:\n"
                    "        yield x[idx[i]]\n}\n", x=np.arange(4, dtype=np.float32),
                    idx=np.array([3, 3, 1], np.int64))["y"]
    assert out == 7


def test_running_out_of_memory_is_a_zynml_error():
    prog = zynml.compile(_elementwise("out[i] = x[0]"))
    with pytest.raises(zynml.ZynMLError, match="output .y. .shape 35184372088832, float32. needs 128.0 TiB, more than this machine.s memory"):
        prog(x=np.ones(3, np.float32), n=2 ** 45)


def test_the_ast_of_a_deep_expression_dumps(tmp_path):
    """`zynml compile --emit ast` walks expressions as deep as the checker takes."""
    import subprocess
    import sys
    prog = tmp_path / "deep.zyn"
    prog.write_text(_elementwise("out[i] = " + " + ".join(["x[i]"] * 1200)))
    result = subprocess.run([sys.executable, "-m", "zynml.cli.main", "compile", str(prog),
                             "--emit", "ast", "-o", str(tmp_path / "deep.ast")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "deep.ast").read_text().count("Binary @4:") == 1199


def test_a_result_too_large_for_a_64_bit_size():
    """Its extents fit in 64 bits, its byte size does not (IREE raised an IndexError at
    the call; found by test_mutation_fuzz.py)."""
    prog = zynml.compile("let y = compute(x) {\n    @kernel elementwise\n"
                         "    for i in 0..n, j in 0..3:\n"
                         "        out[i, 2305843009213693952 * j] = x[i]\n}\n")
    with pytest.raises(zynml.ZynMLError) as info:
        prog(x=np.ones(2, np.float32))
    assert str(info.value).startswith("<string>:1:9: error: the result would have "
                                      "9223372036854775810 elements")


def test_an_index_of_out_offset_by_sizes_gives_its_extent(rng):
    """`out[r, p + d / 2]` with `p in 0..d / 2`: the second half of a row of d (with the
    first half, out is [rows, d]; alone, the first half is 0)."""
    source = ("let y = compute(x) {\n    @kernel elementwise\n"
              "    for r in 0..rows, p in 0..d / 2:\n"
              "        out[r, p + d / 2] = x[r, p] * 2.0\n}\n")
    x = rng.standard_normal((3, 5)).astype(np.float32)
    out = zynml.run(source, x=x, d=10, device="cpu")["y"]
    want = np.zeros((3, 10), np.float32)
    want[:, 5:] = x * 2
    np.testing.assert_array_equal(out, want)
