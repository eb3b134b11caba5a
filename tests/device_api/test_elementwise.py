"""Device.elementwise on the CPU: closures traced into one kernel, against float64 numpy:
constants, broadcasts, every math builtin, choices, and the compile cache."""
import math

import numpy as np
import pytest

import zynml
from conftest import assert_close
from zynml.device_api import device as device_module
from zynml.device_api.tracing import elementwise_source, trace


@pytest.fixture(scope="module")
def dev():
    return zynml.Device("cpu")


def up(dev, rng, *shape, low=-2.0, high=2.0):
    host = rng.uniform(low, high, shape).astype(np.float32)
    return host, dev.upload(host)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# builtin -> (float64 reference, input range where it is defined and well conditioned)
UNARY = {
    "relu": (lambda x: np.maximum(x, 0), (-2, 2)), "exp": (np.exp, (-2, 2)),
    "log": (np.log, (0.1, 3)), "sqrt": (np.sqrt, (0.1, 3)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 3)), "tanh": (np.tanh, (-2, 2)),
    "sin": (np.sin, (-2, 2)), "cos": (np.cos, (-2, 2)), "tan": (np.tan, (-1.2, 1.2)),
    "sinh": (np.sinh, (-2, 2)), "cosh": (np.cosh, (-2, 2)), "abs": (np.abs, (-2, 2)),
    "floor": (np.floor, (-3, 3)), "ceil": (np.ceil, (-3, 3)),
    "erf": (np.vectorize(math.erf), (-2, 2)), "log1p": (np.log1p, (-0.5, 2)),
    "expm1": (np.expm1, (-2, 2)), "sigmoid": (sigmoid, (-4, 4)),
    "silu": (lambda x: x * sigmoid(x), (-4, 4)),
    "gelu": (lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / np.sqrt(2))), (-3, 3)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_every_unary_builtin(dev, rng, name):
    reference, (low, high) = UNARY[name]
    x, X = up(dev, rng, 7, 37, low=low, high=high)
    f = getattr(zynml, name)
    assert_close(dev.elementwise([X], lambda x: f(x)), reference(x.astype(np.float64)))


def test_binary_and_ternary_builtins(dev, rng):
    x, X = up(dev, rng, 13, 7)
    y, Y = up(dev, rng, 13, 7, low=0.5, high=2.0)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    cases = [(lambda x, y: zynml.max(x, y), np.maximum(x64, y64)),
             (lambda x, y: zynml.min(x, y), np.minimum(x64, y64)),
             (lambda x, y: zynml.pow(y, x), y64 ** x64),
             (lambda x, y: zynml.clamp(x, -0.5, y), np.minimum(np.maximum(x64, -0.5), y64))]
    for f, want in cases:
        assert_close(dev.elementwise([X, Y], f), want)


def test_operators_and_python_constants(dev, rng):
    x, X = up(dev, rng, 31)
    y, Y = up(dev, rng, 31, low=0.5, high=2.0)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    out = dev.elementwise([X, Y], lambda x, y: (x + 1.5) * y - x / y + 2 ** y - (-x) ** 3
                          + y ** 0.5 - 1e-6 + abs(x) % 0.75)
    want = ((x64 + 1.5) * y64 - x64 / y64 + 2 ** y64 - (-x64) ** 3 + y64 ** 0.5 - 1e-6
            + np.abs(x64) % 0.75)
    assert_close(out, want)
    assert_close(dev.elementwise([X], lambda x: 3 - x * np.float32(0.25)), 3 - x64 * 0.25)
    assert_close(dev.elementwise([X], lambda x: np.float32(2) * x - np.int64(1)), 2 * x64 - 1)


def test_the_spec_example(dev, rng):
    x, X = up(dev, rng, 5, 11)
    y, Y = up(dev, rng, 5, 11)
    out = dev.elementwise([X, Y], lambda x, y: zynml.exp(x) * y + 1.0, numel=55)
    assert_close(out, np.exp(x.astype(np.float64)) * y + 1.0)


@pytest.mark.parametrize("shapes", [[(7, 13), (13,)], [(7, 13), (7, 1)], [(1, 13), (7, 1)],
                                    [(3, 1, 5), (4, 1)], [(7, 13), ()], [(1,), (11,)]])
def test_broadcasts(dev, rng, shapes):
    hosts = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out = dev.elementwise([dev.upload(h) for h in hosts], lambda a, b: a * 2.0 - b)
    want = hosts[0].astype(np.float64) * 2.0 - hosts[1]
    assert out.shape == want.shape
    assert_close(out, want)


def test_choices_comparisons_and_logic(dev, rng):
    x, X = up(dev, rng, 37)
    x64 = x.astype(np.float64)
    out = dev.elementwise([X], lambda x: zynml.where((x > 0.5) | (x < -1.0), x * 10.0, -x))
    assert_close(out, np.where((x64 > 0.5) | (x64 < -1.0), x64 * 10.0, -x64))
    mask = dev.elementwise([X], lambda x: (x >= 0.0) & ~(x == 1.0))
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(mask, (x >= 0) & (x != 1.0))


def test_integer_inputs_stay_integers(dev, rng):
    ids = rng.integers(-100, 100, 17).astype(np.int32)
    out = dev.elementwise([dev.upload(ids, dtype=np.int32)], lambda i: i * 3 + 1)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ids * 3 + 1)


def test_shared_subexpressions_are_emitted_once():
    source, shape = elementwise_source(trace(lambda x: (lambda e: e * e + e)(zynml.exp(x)), 1),
                                       [(4, 2)])
    assert source.count("exp(") == 1 and shape == (4, 2)


def test_one_compile_per_expression(dev, rng):
    f = lambda x: zynml.cosh(x) * 0.125 + 7.0  # noqa: E731
    for n in (1, 13, 130):
        x, X = up(dev, rng, n)
        assert_close(dev.elementwise([X], f), np.cosh(x.astype(np.float64)) * 0.125 + 7.0)
    source, _ = elementwise_source(trace(f, 1), [(5,)])
    assert device_module._traced[(source, "cpu")].stats().compiles == 1


def test_builtins_outside_a_closure_compute_numbers():
    assert zynml.exp(0.0) == 1.0 and zynml.max(2, 3.5) == 3.5 and zynml.where(True, 1, 2) == 1
    assert abs(zynml.gelu(1.0) - 0.8413447460685429) < 1e-12


def test_closure_mistakes_are_errors(dev, rng):
    _, X = up(dev, rng, 5)
    with pytest.raises(zynml.ZynMLError, match="no truth value while tracing: use "
                       "zynml.where"):
        dev.elementwise([X], lambda x: x if x > 0 else -x)
    with pytest.raises(zynml.ZynMLError, match="must return a value computed from its inputs"):
        dev.elementwise([X], lambda x: 1.0)
    with pytest.raises(zynml.ZynMLError, match="NaN constant"):
        dev.elementwise([X], lambda x: x + float("nan"))
    with pytest.raises(zynml.ZynMLError, match=r"shapes \(5,\), \(3,\) do not broadcast"):
        dev.elementwise([X, dev.upload(np.ones(3))], lambda x, y: x + y)
    with pytest.raises(zynml.ZynMLError, match="'numel' is 4, but the buffers give 5"):
        dev.elementwise([X], lambda x: x, numel=4)
