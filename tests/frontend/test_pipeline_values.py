"""Pipelines of several values: `return (a, b)`, bound by `let (a, b) = f(x)` in a
program and returned as a tuple to Python; their misuses are located errors."""
import numpy as np
import pytest

import zynml
from conftest import assert_compile_error

BOTH = """pipeline both(x: tensor[n, d]) -> tensor[n, d]:
    let a = compute(x) {
        @kernel elementwise
        for i in 0..n, j in 0..d:
            out[i, j] = x[i, j] * 2.0
    }
    let b = compute(x) {
        @kernel elementwise
        for i in 0..n, j in 0..d:
            out[i, j] = x[i, j] + 1.0
    }
    return (a, b)
"""
USER = BOTH + """pipeline user(x: tensor[n, d]) -> tensor[n, d]:
    let (p, q) = both(x)
    let r = compute(p, q) {
        @kernel elementwise
        for i in 0..n, j in 0..d:
            out[i, j] = p[i, j] * q[i, j]
    }
    return r
"""


@pytest.fixture
def x(rng):
    return rng.standard_normal((7, 13)).astype(np.float32)


def test_a_pipeline_of_two_values_returns_a_tuple(x):
    a, b = zynml.compile(BOTH, device="cpu").both(x)
    np.testing.assert_allclose(a, x * 2, rtol=1e-6)
    np.testing.assert_allclose(b, x + 1, rtol=1e-6)


def test_a_call_binds_both_values_in_a_pipeline(x):
    r = zynml.compile(USER, device="cpu").user(x)
    np.testing.assert_allclose(r, (x.astype(np.float64) * 2) * (x + 1), rtol=1e-5)


def test_a_script_binds_both_values(x):
    out = zynml.run(BOTH + "let (p, q) = both(x)\n", x=x, device="cpu")
    assert list(out) == ["p", "q"]
    np.testing.assert_allclose(out["q"], x + 1, rtol=1e-6)


def test_the_order_of_the_return_is_the_order_of_the_values(x):
    source = BOTH.replace("return (a, b)", "return (b, a)")
    b, a = zynml.compile(source, device="cpu").both(x)
    np.testing.assert_allclose(b, x + 1, rtol=1e-6)
    np.testing.assert_allclose(a, x * 2, rtol=1e-6)


ERRORS = {
    "two values bound to one name": (BOTH + "let y = both(x)\n", "13:1",
                                     "pipeline 'both' returns 2 values, bound to 1 name: "
                                     "write let (a, b) = both(...)"),
    "two values bound to three names": (BOTH + "let (p, q, r) = both(x)\n", "13:1",
                                        "pipeline 'both' returns 2 values, bound to 3 names"),
    "one value bound to two names": (
        BOTH.replace("return (a, b)", "return a") + "let (p, q) = both(x)\n", "13:1",
        "pipeline 'both' returns one value, bound to 2 names"),
    "a name bound twice": (BOTH + "let (p, p) = both(x)\n", "13:9", "'p' is bound twice"),
    "a value returned twice": (BOTH.replace("return (a, b)", "return (a, a)"), "12:16",
                               "'a' is returned twice"),
    "a parameter returned": (BOTH.replace("return (a, b)", "return (a, x)"), "12:16",
                             "'return' takes the name of a value computed in the pipeline"),
    "an expression returned": (BOTH.replace("return (a, b)", "return (a, b[0])"), "12:17",
                               "'return' takes the name of a value computed in the pipeline"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_misuse_is_a_located_error(name):
    source, where, message = ERRORS[name]
    assert_compile_error(source, where, message)
