"""The `cir` reference interpreter (zynml/interpreter): device="interpreter", its results
and their types against the CPU's, located errors for out-of-range indices and division
by zero, `print`, and the programs under tests/programs. (test_spec_examples.py runs every
example on it too, against float64 references.)"""
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.cli.main import main as cli
from zynml.difftest.compare import differences
from zynml.interpreter import python_source

PROGRAMS = Path(__file__).resolve().parent / "programs"


def both(src, **inputs):
    """(interpreter's outputs, CPU's outputs)."""
    return (zynml.run(src, device="interpreter", **inputs), zynml.run(src, device="cpu", **inputs))


def test_the_interpreter_is_a_device():
    prog = zynml.compile("let y = compute(x) { @kernel elementwise for i in 0..n: "
                         "out[i] = x[i] }", device="interpreter")
    assert (prog.device, prog.backend) == ("interpreter", "interpreter")
    with pytest.raises(zynml.ZynMLError, match="takes no device number"):
        zynml.compile("let y = compute(x) { @kernel e for i in 0..n: out[i] = x[i] }",
                      device="interpreter:1")


OUTPUT_TYPES = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
let total = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i]
}
let positive = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] > 0.0
}
let any_big = compute(x) {
    @kernel reduce(or)
    for i in 0..n:
        yield x[i] > 1.0
}
let first = compute(x) {
    @kernel reduce(argmax)
    for i in 0..n:
        yield (x[i], i)
}
let biggest = compute(u) {
    @kernel reduce(max)
    for i in 0..m:
        yield u[i]
}
let doubled = compute(u) {
    @kernel elementwise
    for i in 0..m:
        out[i] = u[i] * 2
}
let steps = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = i
}
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_outputs_have_the_cpus_values_and_types(dtype):
    x = np.array([1.5, 0.25, 3.0, 0.5, 2.0], dtype)
    u = np.array([3, 250, 7], np.uint8)  # unsigned: 250 is the largest, not -6
    interpreted, compiled = both(OUTPUT_TYPES, x=x, u=u)
    assert not differences(compiled, interpreted)
    for name in compiled:
        assert type(interpreted[name]) is type(compiled[name]), name
    assert interpreted["biggest"] == 250 and interpreted["doubled"].dtype == np.uint8
    assert interpreted["doubled"][1] == 244  # wraps as u8 does


def test_a_pipe_on_a_scalar_result():
    src = "let t = compute(x) { @kernel reduce(+) for i in 0..n: yield x[i] } |> sqrt()"
    interpreted, compiled = both(src, x=np.array([1.5, 0.25, 3.0], np.float32))
    assert interpreted["t"] == compiled["t"] == np.sqrt(np.float32(4.75))


def test_integer_semantics_floor_division_and_the_sign_of_remainders():
    src = """
let q = compute(a, b) {
    @kernel elementwise
    for i in 0..n:
        out[i] = a[i] / b[i] + a[i] % b[i] * 100
}"""
    a = np.array([-5, 5, -7, 7, 0], np.int32)
    b = np.array([2, -2, 3, 3, 5], np.int32)
    interpreted, compiled = both(src, a=a, b=b)
    np.testing.assert_array_equal(interpreted["q"], compiled["q"])
    np.testing.assert_array_equal(interpreted["q"], a // b + (a % b) * 100)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.int8, np.int64])
def test_integer_types_as_the_cpu_computes_them(dtype):
    src = """
let y = compute(a, b) {
    @kernel elementwise
    for i in 0..n:
        out[i] = a[i] / b[i] + a[i] % b[i] + max(a[i], b[i]) * 3
}
let bigger = compute(a, b) {
    @kernel elementwise
    for i in 0..n:
        out[i] = a[i] > b[i]
}
let f = compute(a) {
    @kernel elementwise
    for i in 0..n:
        out[i] = a[i] * 0.5 + abs(a[i])
}
let low = compute(a) {
    @kernel reduce(min)
    for i in 0..n:
        yield a[i]
}"""
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, 7, 100, info.max // 3 + 1], dtype)
    b = np.array([3, 5, info.max, 9, 2], dtype)
    interpreted, compiled = both(src, a=a, b=b)
    assert not differences(compiled, interpreted)


def test_a_read_out_of_range_is_a_located_error():
    src = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] + x[i + 1]
}"""
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(src, device="interpreter", x=np.ones(4, np.float32))
    assert str(info.value) == (
        "<string>:4:25: error: 'x' is read out of bounds: index 4 of dimension 0, but that "
        "dimension of 'x' has size 4\n"
        "        out[i] = x[i] + x[i + 1]\n"
        "                        ^")


def test_a_write_out_of_range_names_the_array_and_the_indices():
    src = """let y = compute(x) {
    @kernel fused
    for b in 0..rows:
        shared var row[cols]
        for c in 0..cols:
            row[c + 1] = x[b, c]
        for c in 0..cols:
            out[b, c] = row[c]
}"""
    with pytest.raises(zynml.ZynMLError,
                       match=r"<string>:6:13: error: 'row' is written out of bounds: index 3 "
                             r"of dimension 0, but that dimension of 'row' has size 3"):
        zynml.run(src, device="interpreter", x=np.ones((2, 3), np.float32))


def test_a_gather_through_an_index_tensor_is_checked():
    src = """let y = compute(x, idx) {
    @kernel gather
    for i in 0..n:
        out[i] = x[idx[i], 0]
}"""
    x = np.ones((3, 2), np.float32)
    with pytest.raises(zynml.ZynMLError, match=r"4:18: error: 'x' is read out of bounds: "
                                               r"index -1 of dimension 0, but that "
                                               r"dimension of 'x' has size 3"):
        zynml.run(src, device="interpreter", x=x, idx=np.array([0, -1], np.int32))


def test_an_integer_division_by_zero_is_a_located_error():
    src = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i % k]
}"""
    with pytest.raises(zynml.ZynMLError, match=r"<string>:4:22: error: integer remainder by "
                                               r"zero: the divisor is 0 \(in 0 % 0\)"):
        zynml.run(src, device="interpreter", x=np.ones(3, np.float32), k=0, n=3)


def test_float_division_by_zero_is_ieee():
    src = "let y = compute(x) { @kernel e for i in 0..n: out[i] = 1.0 / x[i] }"
    out = zynml.run(src, device="interpreter", x=np.array([0.0, -0.0, 2.0], np.float32))["y"]
    np.testing.assert_array_equal(out, [np.inf, -np.inf, 0.5])


PRINTS = """let y = compute(x, k) {
    @kernel elementwise
    for i in 0..n:
        print("i =", i, x[i], k[i], x[i] > 0.0, "{}")
        out[i] = x[i] * 2.0
}"""


def test_print_shows_values_with_the_source_location(capsys):
    out = zynml.run(PRINTS, device="interpreter", x=np.array([-1.5, 2.0], np.float32),
                    k=np.array([7, 200], np.uint8))
    np.testing.assert_array_equal(out["y"], [-3.0, 4.0])
    assert capsys.readouterr().out == ("<string>:4:9: i = 0 -1.5 7 false {}\n"
                                       "<string>:4:9: i = 1 2.0 200 true {}\n")


def test_print_is_an_error_on_the_compiled_backends():
    message = (r"<string>:4:9: error: 'print' runs only with device=\"interpreter\"")
    with pytest.raises(zynml.ZynMLError, match=message):
        zynml.run(PRINTS, device="cpu", x=np.ones(2, np.float32), k=np.ones(2, np.uint8))
    prog = zynml.compile(PRINTS, device="cuda", require_device=False)
    with pytest.raises(zynml.ZynMLError, match=message):
        prog.artifact(x=np.ones(2, np.float32), k=np.ones(2, np.uint8))


def test_print_takes_scalars_and_strings_only():
    src = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        print(x)
        out[i] = x[i]
}"""
    with pytest.raises(zynml.ZynMLError, match="4:15: error: 'x' is a tensor; index it"):
        zynml.compile(src)
    with pytest.raises(zynml.ZynMLError, match="'print' takes no keyword arguments"):
        zynml.compile(src.replace("print(x)", "print(x[i], end=1)"))


def test_print_inside_a_reduction_runs_in_order(capsys):
    src = """let s = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        print(i)
        yield x[i]
}"""
    assert zynml.run(src, device="interpreter", x=np.ones(3, np.float32))["s"] == 3.0
    assert capsys.readouterr().out.split() == ["<string>:4:9:", "0", "<string>:4:9:", "1",
                                               "<string>:4:9:", "2"]


def test_python_source_shows_the_translation():
    prog = zynml.compile(PRINTS)
    module = prog.stage_module({"x": np.ones(2, np.float32), "k": np.ones(2, np.uint8)}, "cir")
    text = python_source(module)
    assert "def f_main(" in text and "for v" in text and "_sites.out_of_range(" in text


def test_cli_runs_on_the_interpreter(tmp_path, capsys):
    program = tmp_path / "p.zyn"
    program.write_text(PRINTS)
    assert cli(["run", str(program), "--device", "interpreter", "--random", "x=3",
                "--random", "k=3:i32"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"{program}:4:9: i = ") == 3 and "y: float32[3]" in out


def _random(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name,inputs", [
    ("bias_gelu.zyn", {"x": _random((2, 3, 5)), "bias": _random(5, 1)}),
    ("bias_residual_layernorm.zyn", {"x": _random((2, 3, 7)), "bias": _random(7, 1),
                                     "residual": _random((2, 3, 7), 2),
                                     "ln_weight": _random(7, 3), "ln_bias": _random(7, 4)}),
    ("attention_no_mask.zyn", {"Q": _random((1, 2, 5, 3)), "K": _random((1, 2, 5, 3), 1),
                               "V": _random((1, 2, 5, 3), 2)}),
])
def test_programs_agree_with_the_cpu(name, inputs):
    interpreted, compiled = both(PROGRAMS / name, **inputs)
    assert not differences(compiled, interpreted)


def test_pipelines_agree_with_the_cpu():
    x = _random((3, 5))
    for device in ("interpreter", "cpu"):
        prog = zynml.compile(PROGRAMS / "softmax_pipeline.zyn", device=device)
        np.testing.assert_allclose(prog.softmax(x), np.exp(x) / np.exp(x).sum(1, keepdims=True),
                                   rtol=1e-5)


def test_the_transformer_block_agrees_with_the_cpu():
    w = lambda seed, *s: _random(s, seed) * 0.3  # noqa: E731
    layer = dict(qkv_proj=w(1, 8, 24), out_proj=w(2, 8, 8), ln1_weight=w(3, 8),
                 ln1_bias=w(4, 8), ffn_up=w(5, 8, 16), ffn_down=w(6, 16, 8), ln2_weight=w(7, 8),
                 ln2_bias=w(8, 8))
    results = []
    for device in ("interpreter", "cpu"):
        prog = zynml.compile(PROGRAMS / "transformer" / "transformer_block.zyn", device=device)
        results.append(prog.transformer_block(_random((2, 3, 8)), 0, model={"layers": [layer]},
                                              num_heads=2, head_dim=4))
    assert not differences({"y": results[1]}, {"y": results[0]})


def test_blocks_on_other_devices_all_run_on_the_interpreter(capsys):
    src = """let a = compute(x) @device("cpu") {
    @kernel elementwise
    for i in 0..n:
        print(i)
        out[i] = x[i] + 1.0
}"""
    assert zynml.run(src, device="interpreter", x=np.zeros(2, np.float32))["a"].tolist() == [1, 1]
    assert capsys.readouterr().out.count("<string>:4:9:") == 2


def test_a_reshape_with_run_time_sizes(rng):
    """cirgen's collapse and expand for sizes known at the call (test_cuda_plan_views.py
    has the CUDA plan), on the interpreter and the CPU, at two shapes of one compile."""
    for device in ("interpreter", "cpu"):
        prog = zynml.compile(PROGRAMS / "rows_to_heads.zyn", device=device)
        for batch, seq, heads, d in [(1, 1, 1, 1), (3, 7, 5, 2), (2, 13, 3, 3)]:
            x = rng.standard_normal((batch * seq, heads * d))
            want = x.reshape(batch, seq, heads, d).transpose(0, 2, 1, 3) + 1.0
            np.testing.assert_allclose(prog.rows_to_heads(x=x, batch=batch, d=d), want)
