"""Reads at data-dependent indices (gathers) and integer division by zero, on the CPU.

A gather outside its input is undefined (docs/language.md §3) but never leaves the input:
each index is clamped into its dimension, so the process never crashes. An integer
divisor known to be 0 before running is a located error."""
import subprocess
import sys

import numpy as np
import pytest

import zynml
from conftest import assert_compile_error

GATHER = """let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]]
}
"""


def test_gathers_in_range_read_the_element(rng):
    x = rng.standard_normal(300).astype(np.float32)
    for dtype in (np.int64, np.int32, np.uint8):  # a u8 index of 200 is 200, not -56
        idx = np.array([200, 0, 7, 255], dtype)
        np.testing.assert_array_equal(zynml.run(GATHER, x=x, idx=idx)["y"], x[idx])


@pytest.mark.parametrize("idx,expected", [
    ([1, 5, 2], [1, 3, 2]),           # past the end: the last element
    ([-1, 0, 3], [0, 0, 3]),          # negative: the first
    ([2 ** 31, 0, 1], [3, 0, 1]),     # used to crash the process
    ([2 ** 63 - 1, -2 ** 63, 2], [3, 0, 2]),
])
def test_gathers_out_of_range_are_clamped_into_the_input(idx, expected):
    x = np.arange(4, dtype=np.float32)
    out = zynml.run(GATHER, x=x, idx=np.array(idx, np.int64))["y"]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


def test_a_gather_from_an_empty_input_reads_zero():
    out = zynml.run(GATHER, x=np.zeros(0, np.float32), idx=np.array([0, 3], np.int64))["y"]
    np.testing.assert_array_equal(out, [0, 0])


def test_gathers_of_a_local_array_and_under_an_if_are_clamped():
    src = """let y = compute(x, idx) {
    @kernel fused
    for b in 0..rows:
        shared var h[4]
        for f in 0..4:
            h[f] = x[b, f]
        barrier()
        for o in 0..n:
            var v = 0.0
            if idx[o] != 1:
                v = h[idx[o]]
            else:
                v = x[b, idx[o] * 100]
            out[b, o] = v
}
"""
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = zynml.run(src, x=x, idx=np.array([-7, 1, 9], np.int64))["y"]
    np.testing.assert_array_equal(out, [[0, 3, 3], [4, 7, 7]])


def test_an_out_of_range_gather_does_not_crash_the_cli(tmp_path):
    prog = tmp_path / "gather.zyn"
    prog.write_text(GATHER)
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    np.save(tmp_path / "idx.npy", np.array([2 ** 31, -2 ** 40, 1], np.int64))
    result = subprocess.run(
        [sys.executable, "-m", "zynml.cli.main", "run", str(prog), "--device", "cpu",
         "--input", f"x={tmp_path / 'x.npy'}", "--input", f"idx={tmp_path / 'idx.npy'}",
         "--output-dir", str(tmp_path / "out")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), [3, 0, 1])


# name -> (source, where, message)
DIVISION_BY_ZERO = {
    "remainder in an index": (
        "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
        "        out[i] = x[i % 0]\n}\n", "4:24", "integer remainder by zero: the divisor is 0"),
    "division in a loop bound": (
        "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n/0:\n"
        "        out[i] = x[i]\n}\n", "3:19", "integer division by zero: the divisor is 0"),
    "a constant divisor": (
        "let z = 0\nlet y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
        "        out[i] = x[i] + i / z\n}\n", "5:29", "integer division by zero: 'z' is 0"),
    "a divisor computed from literals": (
        "let y = compute(x) {\n    @kernel reduce(+)\n    for i in 0..n:\n"
        "        yield x[i] + 7 % (2 - 2)\n}\n", "4:27",
        "integer remainder by zero: the divisor is 0"),
}


@pytest.mark.parametrize("name", sorted(DIVISION_BY_ZERO))
def test_integer_division_by_a_constant_zero_is_a_located_error(name):
    source, where, message = DIVISION_BY_ZERO[name]
    assert_compile_error(source, where, message + "\n")


def test_a_size_divisor_that_is_zero_at_the_call_is_a_located_error():
    prog = zynml.compile("let y = compute(x) {\n    @kernel reduce(+)\n"
                         "    for i in 0..n / m:\n        yield x[0]\n}\n")
    with pytest.raises(zynml.ZynMLError) as info:
        prog(x=np.ones(3, np.float32), n=4, m=0)
    assert str(info.value).startswith("<string>:3:21: error: integer division by zero: "
                                      "'m' is 0\n    for i in 0..n / m:\n"
                                      "                    ^")
    assert prog(x=np.ones(3, np.float32), n=4, m=2)["y"] == 2.0


def test_float_division_by_zero_is_ieee():
    out = zynml.run("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
                    "        out[i] = x[i] / 0\n}\n", x=np.array([1, -1], np.float32))["y"]
    np.testing.assert_array_equal(out, [np.inf, -np.inf])


def test_reads_from_a_constant_offset(rng):
    """`x[o + k]` with k from 2, `x[2 * d + 1]`: the input is read from the offset on
    (upstream's convolution analysis in iree-compile crashed on a map's constant term;
    found by test_mutation_fuzz.py)."""
    x, w = rng.standard_normal(9).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    conv = ("let y = compute(x, w) {\n    @kernel conv1d\n    for o in 0..out_len:\n"
            "        var s = 0.0\n        for k in 2..taps:\n            s += x[o + k] * w[k]\n"
            "        out[o] = s\n}\n")
    out = zynml.run(conv, x=x, w=w, out_len=5, taps=4)["y"]
    expected = [sum(x[o + k] * w[k] for k in range(2, 4)) for o in range(5)]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    m = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    kernel = rng.standard_normal((3, 3, 3)).astype(np.float32)
    depthwise = ("let y = compute(m, kernel) {\n    @kernel conv2d_depthwise\n"
                 "    for b in 0..batch, c in 0..channels:\n"
                 "        for oh in 0..out_h, ow in 0..out_w:\n            var s = 0.0\n"
                 "            for kh in 0..kernel_h, kw in 2..kernel_w:\n"
                 "                s += m[b, c, oh + kh, ow + kw] * kernel[c, kh, kw]\n"
                 "            out[b, c, oh, ow] = s\n}\n")
    out = zynml.run(depthwise, m=m, kernel=kernel, out_h=3, out_w=3, kernel_w=3)["y"]
    expected = np.zeros((2, 3, 3, 3))
    for oh in range(3):
        for ow in range(3):
            for kh in range(3):
                expected[:, :, oh, ow] += m[:, :, oh + kh, ow + 2] * kernel[None, :, kh, 2]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    odd = zynml.run("let y = compute(x) {\n    @kernel elementwise\n    for d in 0..4:\n"
                    "        out[d] = x[2 * d + 1] + x[d * d % 3]\n}\n", x=x)["y"]
    np.testing.assert_allclose(odd, x[2 * np.arange(4) + 1] + x[np.arange(4) ** 2 % 3])
