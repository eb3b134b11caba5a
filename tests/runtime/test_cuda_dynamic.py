"""Native CUDA kernels with run-time sizes on a GPU (marked `gpu`: CI skips these; they
run on the device machine): one compile serves every size (1, primes, non-multiples of 4,
16 and the block, multiples of 4 and 16, 4099, about a million), against float64 numpy on fresh
random inputs with poisoned allocations. Each test compiles its artifact before its
first launch (compile-only runs fill the cache and stop there)."""
from pathlib import Path

import numpy as np
import pytest

import conftest
import zynml
from conftest import assert_close
from zynml.runtime.cuda.artifact import launches

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
# with multiples of 4 and 16 (the 16-byte chunk path) and the rest (points)
SIZES = [1, 2, 3, 4, 7, 16, 31, 97, 257, 1021, 4096, 4099, 1 << 20, 1 << 20 | 7]
# (rows, cols): one row, one column, primes, a row longer than a block, many rows
SHAPES = [(1, 1), (1, 4099), (7, 1), (31, 97), (257, 3), (97, 1021), (4099, 33),
          (1021, 1031)]

CHAIN = """
let y = compute(x, z) {
    @kernel elementwise
    for i in 0..n:
        out[i] = tanh(x[i] * z[i] + 1.5) - x[i]
}
"""
ROW_SUM = """
let s = compute(m) {
    @kernel reduce(+, axis=1)
    for i in 0..rows, j in 0..cols:
        yield m[i, j]
}
"""


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def one_compile(prog):
    stats = prog.stats()
    assert stats.specializations == 1 and stats.compiles + stats.disk_hits == 1, stats


def test_an_elementwise_chain_compiles_once_for_every_size(rng):
    prog = zynml.compile(CHAIN, device="cuda:0", dynamic=["n"])
    prog.artifact(x=f32(rng, 5), z=f32(rng, 5))  # compile-only runs stop here
    for n in SIZES:
        x, z = f32(rng, n), f32(rng, n)
        x64 = x.astype(np.float64)
        assert_close(prog(x=x, z=z)["y"], np.tanh(x64 * z + 1.5) - x64)
    one_compile(prog)
    assert prog.stats().dynamic == ("n",)


def test_a_row_sum_compiles_once_for_every_shape(rng):
    prog = zynml.compile(ROW_SUM, device="cuda:0", dynamic=True)
    prog.artifact(m=f32(rng, 3, 5))
    for rows, cols in SHAPES:
        m = f32(rng, rows, cols)
        assert_close(prog(m=m)["s"], m.astype(np.float64).sum(axis=1), rtol=1e-4)
    one_compile(prog)


def test_softmax_compiles_once_for_every_shape(rng):
    prog = zynml.compile(ROOT / "examples" / "softmax.zyn", device="cuda:0", dynamic=True)
    prog.artifact(x=f32(rng, 3, 5))
    for rows, cols in SHAPES:
        x = f32(rng, rows, cols).astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        assert_close(prog(x=x.astype(np.float32))["probs"], e / e.sum(axis=1, keepdims=True))
    one_compile(prog)


def test_layer_norm_compiles_once_for_every_shape(rng):
    path = ROOT / "tests" / "programs" / "examples" / "layer_norm.zyn"
    prog = zynml.compile(path, device="cuda:0", dynamic=True)
    prog.artifact(x=f32(rng, 3, 5), gamma=f32(rng, 5), beta=f32(rng, 5), eps=1e-5)
    for rows, cols in SHAPES:
        x, gamma, beta = f32(rng, rows, cols), f32(rng, cols), f32(rng, cols)
        x64 = x.astype(np.float64)
        mean = x64.mean(axis=1, keepdims=True)
        var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
        expected = (x64 - mean) / np.sqrt(var + 1e-5) * gamma + beta
        got = prog(x=x, gamma=gamma, beta=beta, eps=1e-5)["normalized"]
        assert_close(got, expected, rtol=1e-4)
    one_compile(prog)


def test_a_shape_less_artifact_runs_at_any_size(rng, tmp_path):
    """`zynml compile --device cuda --emit artifact` without shapes, then zynml.load."""
    prog = zynml.compile(CHAIN, device="cuda:0")
    path = tmp_path / "chain.zynart"
    path.write_bytes(prog.emit("artifact"))  # compile-only runs stop at zynml.load
    loaded = zynml.load(path)
    for n in (1, 97, 4099):
        x, z = f32(rng, n), f32(rng, n)
        x64 = x.astype(np.float64)
        assert_close(loaded(x=x, z=z)["y"], np.tanh(x64 * z + 1.5) - x64)
    with pytest.raises(ValueError, match="the inputs' sizes disagree"):
        loaded(x=f32(rng, 9), z=f32(rng, 8))


# (batch, input channels, output channels, window) of conv2d.zyn (stride 1, padding 1) at
# 13 x 13 outputs, the image 13 + window - 3 (out_h and out_w, integer inputs that size
# the output, are specialized by value; everything else is a run-time size): channels
# that BK divides and not (k's stages run along them, the last of each run partial), one
# channel, none, windows of 1 to 5, 130 output channels (a partial third tile), 64
# channels
CONVOLUTIONS = [(1, 3, 5, 3), (2, 16, 24, 3), (1, 20, 33, 5), (3, 64, 64, 3), (1, 7, 130, 5),
                (2, 1, 1, 1), (1, 33, 8, 3), (2, 0, 5, 3)]  # no channels: out = bias


def test_a_convolution_compiles_once_for_every_shape(rng):
    path = ROOT / "tests" / "programs" / "examples" / "conv2d.zyn"
    prog = zynml.compile(path, device="cuda:0", dynamic=True)

    def inputs(batch, in_ch, out_ch, k):
        size = 13 + k - 3
        return dict(input=f32(rng, batch, in_ch, size, size),
                    kernel=f32(rng, out_ch, in_ch, k, k), bias=f32(rng, out_ch),
                    in_h=size, in_w=size, out_h=13, out_w=13)

    kernels = launches(prog.artifact(**inputs(*CONVOLUTIONS[0])).plan["body"])
    assert [s["kernel"].split("_", 1)[1] for s in kernels] == \
        ["pointwise", "implicit_gemm", "implicit_gemm_partial"]
    for shape in CONVOLUTIONS:
        given = inputs(*shape)
        expected = conftest.conv2d_reference(given["input"], given["kernel"], given["bias"],
                                             1, 1)
        assert_close(prog(**given)["output"], expected)
    one_compile(prog)


def test_a_convolution_window_of_run_time_size_compiles_once(rng):
    """16 input channels (static: k's stages run along them, whole) and a run-time
    window, batch and output channels: one kernel for all of them (the image, a static
    size here, and out_h fix the window at 3)."""
    path = ROOT / "tests" / "programs" / "examples" / "conv2d.zyn"
    prog = zynml.compile(path, device="cuda:0",
                         dynamic=["kernel_h", "kernel_w", "batch", "out_channels"])
    for batch, out_ch in ((2, 7), (1, 65), (3, 1)):
        x, kernel, bias = f32(rng, batch, 16, 13, 13), f32(rng, out_ch, 16, 3, 3), \
            f32(rng, out_ch)
        given = dict(input=x, kernel=kernel, bias=bias, in_h=13, in_w=13, out_h=13, out_w=13)
        if out_ch == 7:
            kernels = launches(prog.artifact(**given).plan["body"])
            assert [s["kernel"].split("_", 1)[1] for s in kernels] == \
                ["pointwise", "implicit_gemm"]
        assert_close(prog(**given)["output"], conftest.conv2d_reference(x, kernel, bias, 1, 1))
    one_compile(prog)
