"""The math builtins erf, log1p, expm1, sigmoid and silu (zynml/cirgen/scalar.py) on the
interpreter and the CPU against float64 references (scipy.special where it is installed):
f64, f32 and f16 inputs of odd sizes, values near 0 (where log(1 + x) and exp(x) - 1
lose every digit) and large magnitudes (where a naive sigmoid overflows); their
whole-tensor and tile forms; PTX for CUDA (tests/runtime/test_cuda_random_math.py runs
them on the GPU)."""
import math

import numpy as np
import pytest

import zynml

try:
    from scipy.special import erf as _erf, expit as _expit
except ImportError:  # scipy is optional: math.erf, vectorized; expit written out
    _erf = np.vectorize(math.erf, otypes=[np.float64])

    def _expit(x):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, 1 / (1 + e), e / (1 + e))

NAMES = ["erf", "log1p", "expm1", "sigmoid", "silu"]
REFERENCE = {
    "erf": _erf,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "sigmoid": _expit,
    "silu": lambda x: x * _expit(x),
}
DTYPES = [np.float64, np.float32, np.float16]
# the largest |x| each builtin takes without its result overflowing the type
LARGEST = {np.float64: 700.0, np.float32: 88.0, np.float16: 11.0}
# elementwise relative error allowed, a few units in the last place of each type
RTOL = {np.float64: 1e-13, np.float32: 4e-6, np.float16: 4e-3}


def elementwise(name: str, value: str = "") -> str:
    """y[i] = name(x[i]), or y[i] = value."""
    return (f"let y = compute(x) {{\n    @kernel elementwise\n    for i in 0..n:\n"
            f"        out[i] = {value or name + '(x[i])'}\n}}\n")


def inputs(rng, name: str, dtype, size: int) -> np.ndarray:
    """`size` values: near 0 (both signs, down to 1e-7), moderate, and large."""
    big = LARGEST[dtype] if name == "expm1" else float(np.finfo(dtype).max) / 4
    special = [1e-7, -1e-7, 3e-6, -2.5e-5, 1e-3, -0.5, 0.75, 2.0, -3.0, 9.0, -9.0,
               30.0, -30.0, 100.0, -100.0, 1e4, -1e4, big, -big]
    values = np.concatenate([special, rng.standard_normal(size) * 4,
                             rng.uniform(-1, 1, size) * 10.0 ** rng.integers(-7, 1, size)])
    if name == "log1p":  # defined above -1
        values = np.where(values < -0.99, -0.99 * np.tanh(-values), values)
        values = np.concatenate([[-0.99], values])
    values = rng.permutation(np.clip(values, -big, big).astype(dtype))
    return values[:size] if size < len(special) else values


def assert_elementwise_close(actual, x, name, dtype):
    expected = REFERENCE[name](x.astype(np.float64))
    expected_rounded = expected.astype(dtype).astype(np.float64)
    actual = actual.astype(np.float64)
    assert actual.dtype == np.float64 and np.isfinite(actual).all(), actual
    # relative to the exact value, with subnormal results good to the smallest normal
    tiny = float(np.finfo(dtype).tiny)
    err = np.abs(actual - expected) - RTOL[dtype] * np.abs(expected) - tiny
    rounding = np.abs(expected_rounded - expected)  # the result's own rounding
    bad = err > rounding
    assert not bad.any(), (f"{name} on {np.dtype(dtype)}: x={x[bad][:5]} got "
                           f"{actual[bad][:5]} expected {expected[bad][:5]}")


@pytest.mark.parametrize("device", ["interpreter", "cpu"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", NAMES)
def test_builtin_against_float64(rng, device, dtype, name):
    for size in (1, 37):
        x = inputs(rng, name, dtype, size + (device == "cpu") * 1000)
        y = zynml.run(elementwise(name), device=device, x=x)["y"]
        assert y.dtype == dtype and y.shape == x.shape
        assert_elementwise_close(y, x, name, dtype)


@pytest.mark.parametrize("device", ["interpreter", "cpu"])
def test_near_zero_is_not_log_of_one_plus_x(device):
    """log1p and expm1 keep the digits the naive forms lose: at 1e-7, f32's 1 + x is
    1.0000001192..., so log(1 + x) would be 19% off."""
    x = np.array([1e-7, -1e-7, 3e-8, 1e-10], np.float32)
    for name in ("log1p", "expm1"):
        y = zynml.run(elementwise(name), device=device, x=x)["y"]
        exact = REFERENCE[name](x.astype(np.float64))
        np.testing.assert_allclose(y, exact, rtol=4e-7)


@pytest.mark.parametrize("device", ["interpreter", "cpu"])
def test_sigmoid_and_silu_do_not_overflow(device):
    x = np.array([-1e4, -200.0, -100.0, -80.0, 88.0, 100.0, 3e38, -3e38], np.float32)
    for name in ("sigmoid", "silu"):
        y = zynml.run(elementwise(name), device=device, x=x)["y"]
        assert not np.isnan(y).any(), (name, y)
    s = zynml.run(elementwise("sigmoid"), device=device, x=x)["y"]
    np.testing.assert_array_equal(s[[0, 1, 7]], 0.0)
    np.testing.assert_array_equal(s[[4, 5, 6]], 1.0)
    # sigmoid(-100) = e^-100 (3.7e-44, an f32 subnormal; IREE's exp flushes it to 0)
    assert 0 <= s[2] <= np.finfo(np.float32).tiny
    np.testing.assert_allclose(s[3], math.exp(-80), rtol=1e-5)


def test_integer_inputs_give_the_kernel_float():
    x = np.array([-3, 0, 2, 7], np.int32)
    y = zynml.run(elementwise("sigmoid"), device="interpreter", x=x)["y"]
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, _expit(x.astype(np.float64)), rtol=1e-6)


WHOLE = """
let act = compute(x) {
    @kernel fused
    out = silu(x) + erf(x) * sigmoid(x) - expm1(x * 0.01) + log1p(x * x)
}
let tiles = compute(x) {
    @kernel fused
    for i in 0..rows step 3:
        let t = x[i:i+3]
        out[i:i+3] = sigmoid(t) * erf(t) + silu(t) - log1p(t * t) / expm1(1.0 + t * t)
}
"""


@pytest.mark.parametrize("device", ["interpreter", "cpu"])
def test_whole_tensor_and_tile_forms(rng, device):
    x = rng.standard_normal((9, 7)).astype(np.float32)
    out = zynml.run(WHOLE, device=device, x=x)
    x64 = x.astype(np.float64)
    s, e = _expit(x64), _erf(x64)
    np.testing.assert_allclose(out["act"], x64 * s + e * s - np.expm1(x64 * 0.01)
                               + np.log1p(x64 * x64), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(out["tiles"], s * e + x64 * s
                               - np.log1p(x64 * x64) / np.expm1(1 + x64 * x64),
                               rtol=2e-5, atol=1e-6)


def test_pipe_applies_a_new_builtin():
    src = ("let s = compute(x) {\n    @kernel reduce(+)\n    for i in 0..n:\n"
           "        yield x[i]\n} |> sigmoid()\n")
    x = np.array([0.5, -2.0, 0.25], np.float32)
    np.testing.assert_allclose(zynml.run(src, device="cpu", x=x)["s"], _expit(-1.25),
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_builtins_compile_to_ptx(rng, dtype):
    src = elementwise("", " + ".join(f"{n}(x[i])" for n in NAMES))
    artifact = zynml.compile(src, device="cuda", require_device=False).artifact(
        x=rng.standard_normal(33).astype(dtype))
    assert ".entry" in artifact.ptx and artifact.cubin is not None
    assert "__nv_" not in artifact.ptx  # libdevice inlined: no call left unresolved
