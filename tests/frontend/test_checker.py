"""Every user mistake of the main job gets a located error: FILE:LINE:COL, the source
line and a caret. The line:col expectations are the exact positions of the culprit."""
import numpy as np
import pytest

import zynml
from conftest import assert_close


def _kernel(body: str, kind: str = "elementwise", inputs: str = "x") -> str:
    return f"let y = compute({inputs}) {{\n    @kernel {kind}\n{body}}}\n"


CASES = {
    "unknown name": (_kernel("    for i in 0..len:\n        out[i] = relu(z[i])\n"),
                     "4:23", "unknown name 'z'"),
    "unknown function": (_kernel("    for i in 0..len:\n        out[i] = foo(x[i])\n"),
                         "4:18", "unknown function 'foo'"),
    "unknown reduce op": (_kernel("    for i in 0..len:\n        yield x[i]\n", "reduce(avg)"),
                          "2:20", "unknown reduction operator 'avg'"),
    "unknown kernel parameter": (_kernel("    for i in 0..len:\n        yield x[i]\n",
                                         "reduce(+, axs=1)"),
                                 "2:23", "unknown parameter 'axs'"),
    "yield outside a reduction": (_kernel("    for i in 0..len:\n        yield x[i]\n"),
                                  "4:9", "'yield' outside a reduction"),
    "write to an input": (_kernel("    for i in 0..len:\n        x[i] = 1.0\n"),
                          "4:9", "cannot write to input 'x'"),
    "float used as an index": (_kernel("    for i in 0..len:\n        let s = x[i]\n"
                                       "        out[i] = x[s]\n"),
                               "5:20", "index must be an integer, got f32"),
    "float literal used as an index": (_kernel("    for i in 0..len:\n        let s = 1.5\n"
                                               "        out[i] = x[s]\n"),
                                       "5:20", "index must be an integer, got f32"),
    "rank mismatch": (_kernel("    for i in 0..len:\n        out[i] = x[i] + x[i, 0]\n"),
                      "4:25", "rank mismatch: 'x' has rank 1"),
    "out read before written": (_kernel("    for i in 0..len:\n        out[i] += x[i]\n"),
                                "4:9", "'out' is read before it is written"),
    "broadcast of a non-input": ("let y = compute(m, v) {\n    @kernel elementwise\n"
                                 "    @broadcast(q, axis=1)\n"
                                 "    for i in 0..rows, j in 0..cols:\n"
                                 "        out[i, j] = m[i, j] * v[j]\n}\n",
                                 "3:16", "@broadcast names 'q', which is not an input"),
    "assignment to a let": (_kernel("    for i in 0..len:\n        let a = x[i]\n"
                                    "        a = 2.0\n        out[i] = a\n"),
                            "5:9", "cannot assign to 'a'"),
    "assignment to a whole shared array": (
        _kernel("    for i in 0..len:\n        shared var up[4]\n        up = x[i]\n"
                "        out[i] = x[i]\n"),
        "5:9", "cannot assign to 'up': it is a shared array (write one element"),
    "assignment to a whole-tensor let": (
        _kernel("    let t = x - 1.0\n    t = x - 2.0\n    out = t\n"),
        "4:5", "cannot assign to 't': it is a whole-tensor 'let'"),
    "a var declared with a tensor type": (
        _kernel("    for i in 0..len:\n        var a: tensor = x[i]\n        out[i] = a\n"),
        "4:16", "'tensor' is not a scalar type: a var takes one of f16, bf16, f32"),
    "a var declared with an unknown type": (
        _kernel("    for i in 0..len:\n        var a: float32 = x[i]\n        out[i] = a\n"),
        "4:16", "'float32' is not a scalar type"),
    "a var's type left out after the colon": (
        _kernel("    for i in 0..len:\n        var a: = x[i]\n        out[i] = a\n"),
        "4:16", "expected a scalar type after 'var a:' (f32, bf16, i64, ...), found '='"),
    "syntax: missing colon": (_kernel("    for i in 0..len\n        out[i] = x[i]\n"),
                              "3:20", "expected ':'"),
    "tensor not passed to compute": ("let a = compute(x) {\n    @kernel elementwise\n"
                                     "    for i in 0..n:\n        out[i] = x[i]\n}\n"
                                     "let b = compute(x) {\n    @kernel elementwise\n"
                                     "    for i in 0..n:\n        out[i] = a[i]\n}\n",
                                     "9:18", "'a' is not an input of this compute"),
    "axis out of range": (_kernel("    for i in 0..len:\n        yield x[i]\n", "reduce(+, axis=1)"),
                          "2:5", "axis 1 is out of range"),
    "argmax needs a pair": (_kernel("    for i in 0..len:\n        yield x[i]\n", "reduce(argmax)"),
                            "4:9", "yields a pair"),
}


# Mistakes that depend on an input's dtype surface when the program is called.
NEEDS_DTYPES = {"float used as an index"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_located_error(name):
    source, where, message = CASES[name]
    with pytest.raises(zynml.ZynMLError) as info:
        if name in NEEDS_DTYPES:
            zynml.run(source, x=np.ones(3, np.float32))
        else:
            zynml.compile(source)
    text = str(info.value)
    assert text.startswith(f"<string>:{where}: error: "), text
    assert message in text
    line = int(where.split(":")[0])
    col = int(where.split(":")[1])
    source_line, caret = text.splitlines()[1:3]
    assert source_line == source.splitlines()[line - 1]
    assert caret == " " * (col - 1) + "^"


def test_path_appears_in_errors(tmp_path):
    path = tmp_path / "bad.zyn"
    path.write_text(CASES["unknown name"][0])
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.compile(path)
    assert str(info.value).startswith(f"{path}:4:23: error: unknown name 'z'")


ZIP = """let z = compute(x, y) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * y[i]
}
"""


def test_size_conflict_names_the_size_and_both_places():
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(ZIP, x=np.ones(3, np.float32), y=np.ones(4, np.float32))
    text = str(info.value)
    assert text.startswith("<string>:4:27: error: size 'len' is bound two ways: 4 from "
                           "dimension 0 of 'y' here, but 3 from dimension 0 of 'x' at 4:20")
    assert "<string>:4:20: note: 'len' is first bound here" in text


@pytest.mark.parametrize("inputs,where,message", [
    (dict(x=np.ones(3, np.float32)), "1:20", "missing input 'y'"),
    (dict(x=np.ones(3, np.float32), y=np.ones(3, np.float32), w=1.0), "1:1",
     "unknown input 'w'"),
    (dict(x=np.ones(3, np.complex64), y=np.ones(3, np.float32)), "1:17",
     "dtype complex64, which ZynML does not support"),
    (dict(x=np.ones((3, 2), np.float32), y=np.ones(3, np.float32)), "1:17",
     "input 'x' has rank 2"),
])
def test_bad_inputs_at_call_time(inputs, where, message):
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(ZIP, **inputs)
    assert str(info.value).startswith(f"<string>:{where}: error: ")
    assert message in str(info.value)


def test_bool_reduction_rejects_float_values():
    source = _kernel("    for i in 0..len:\n        yield x[i]\n", "reduce(and)")
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(source, x=np.ones(5, np.float32))
    assert str(info.value).startswith("<string>:4:15: error: 'reduce(and)' needs bool values")


# `n` sizes `a` (nothing binds it there); `c` reads `b[i]` for i in 0..n, a result made
# after `a`: that binding comes too late for `a`, so n is an input, checked against b.
LATE_BINDING = """let a = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[0] * 2.0
}
let b = compute(x) {
    @kernel elementwise
    for i in 0..m:
        out[i] = x[i] - 1.0
}
let c = compute(b) {
    @kernel elementwise
    for i in 0..n:
        out[i] = b[i] + 1.0
}
"""


def test_a_size_bound_only_by_a_later_result_is_an_input(rng):
    x = rng.standard_normal(5).astype(np.float32)
    prog = zynml.compile(LATE_BINDING, device="interpreter")
    assert prog.inputs == ["x", "n"]
    out = prog(x=x, n=5)
    np.testing.assert_allclose(out["a"], np.full(5, x[0] * 2.0), rtol=1e-6)
    # c = (x - 1) + 1 in f32 is good to f32's rounding at 1, not relative to a small x
    assert_close(out["c"], x.astype(np.float64), floor=1.0)
    with pytest.raises(zynml.ZynMLError) as info:
        prog(x=x, n=4)
    assert str(info.value).startswith("<string>:14:20: error: size 'n' is bound two ways: "
                                      "5 from dimension 0 of 'b' here, but 4 from input 'n'")


def test_a_whole_tensor_result_has_its_inputs_rank(rng):
    source = ("let y = compute(x) {\n    @kernel fused\n    out = x * 2.0\n}\n"
              "let z = compute(y) {\n    @kernel elementwise\n    for i in 0..n:\n"
              "        out[i] = y[i] + 1.0\n}\n")
    x = rng.standard_normal(7).astype(np.float32)
    np.testing.assert_allclose(zynml.run(source, x=x)["z"], x * 2.0 + 1.0, rtol=1e-6)
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(source, x=np.ones((2, 3), np.float32))
    assert str(info.value).startswith("<string>:8:18: error: rank mismatch: 'y' has rank 2")


def test_a_let_of_an_element_and_an_input_of_unknown_rank_is_a_scalar(rng):
    """`let scaled = x[r, c] * scale` in a script, `scale` untyped: a scalar once the call
    gives it (it was a whole tensor, and using it: "'scaled' is a tensor")."""
    source = ("let total = compute(x, scale) {\n    @kernel fused\n    for r in 0..rows:\n"
              "        var s = 0.0\n        for c in 0..cols:\n"
              "            let scaled = x[r, c] * scale\n            s += scaled * scaled\n"
              "        out[r] = s\n}\n")
    x = rng.standard_normal((3, 7)).astype(np.float32)
    got = zynml.run(source, device="interpreter", x=x, scale=np.float32(1.5))["total"]
    assert_close(got, ((x.astype(np.float64) * 1.5) ** 2).sum(axis=1))
    got = zynml.run(source, x=x, scale=np.float32(1.5))["total"]  # the default device
    assert_close(got, ((x.astype(np.float64) * 1.5) ** 2).sum(axis=1))


@pytest.mark.parametrize("extent,at,message", [
    ("n * 4611686018427387904", "i", "local array 'acc' would have 36893488147419103232 elements "
                                "along this dimension, more than a 64-bit extent holds"),
    ("n, 4611686018427387904", "i, 0", "local array 'acc' would have 36893488147419103232 elements, "
                               "more than a 64-bit size holds"),
])
def test_a_local_array_too_large_for_64_bits_is_a_located_error(extent, at, message):
    source = ("let y = compute(x) {\n    @kernel fused\n    for b in 0..1:\n"
              f"        shared var acc[{extent}]\n        for i in 0..n:\n"
              f"            acc[{at}] = x[i]\n        for i in 0..n:\n"
              f"            out[i] = acc[{at}]\n}}\n")
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(source, x=np.ones(8, np.float32))
    assert str(info.value).splitlines()[0].endswith(f"error: {message}")
    assert info.value.loc is not None and info.value.loc.line == 4


def test_a_float_value_in_a_var_declared_integer_is_a_located_error():
    source = _kernel("    for i in 0..len:\n        var a: i32 = x[i]\n        out[i] = x[i]\n")
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(source, x=np.ones(3, np.float32))
    assert "<string>:4:22: error: cannot assign a f32 value to an integer variable" in \
        str(info.value)


def test_inputs_given_to_a_program_of_pipelines_name_its_pipelines():
    source = ("pipeline twice(x: tensor[n]) -> tensor[n]:\n"
              "    let y = compute(x) {\n        @kernel elementwise\n"
              "        for i in 0..n:\n            out[i] = 2.0 * x[i]\n    }\n"
              "    return y\n")
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(source, x=np.ones(3, np.float32))
    assert str(info.value).startswith(
        "<string>:1:1: error: unknown input 'x'; the program's inputs are: (none) (its "
        "pipelines take them: zynml.compile(source).twice(...))")
