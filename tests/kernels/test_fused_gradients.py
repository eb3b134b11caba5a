"""The backward kernels against finite differences of their own forward kernels, both
run in float64 on the CPU: for a random direction v, the central difference of
L = sum(cotangent * forward) along v equals the backward's gradients dotted with v.
(test_fused.py checks both passes against float64 numpy's analytic formulas.)"""
import numpy as np
import pytest

import zynml.kernels as K

H = 1e-6  # central differences in f64: truncation ~H^2, rounding ~1e-16 / H


def loss(outputs, cotangents):
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return sum(float(np.sum(o * c)) for o, c in zip(outputs, cotangents))


def directional(forward, inputs: dict, directions: dict, cotangents) -> float:
    def at(t):
        moved = {k: v + t * directions[k] if k in directions else v for k, v in inputs.items()}
        return loss(forward(**moved), cotangents)
    return (at(H) - at(-H)) / (2 * H)


def check(forward, inputs, directions, cotangents, gradients: dict, rtol=1e-6):
    want = sum(float(np.sum(gradients[k] * v)) for k, v in directions.items())
    got = directional(forward, inputs, directions, cotangents)
    assert abs(got - want) <= rtol * max(1.0, abs(want)), (got, want)


@pytest.fixture
def normal(rng):
    return lambda *shape: rng.standard_normal(shape)


@pytest.mark.parametrize("op", ["swiglu", "geglu"])
@pytest.mark.parametrize("shape", [(1, 1), (7, 13)])
def test_gated_unit_backward(normal, op, shape):
    forward = getattr(K, op)
    backward = getattr(K, op + "_backward")
    inputs = {"gate": normal(*shape) * 2, "up": normal(*shape)}
    grad = normal(*shape)
    d_gate, d_up = backward(inputs["gate"], inputs["up"], grad, device="cpu")
    assert d_gate.dtype == np.float64
    check(lambda **a: forward(**a, device="cpu"), inputs,
          {"gate": normal(*shape), "up": normal(*shape)}, [grad],
          {"gate": d_gate, "up": d_up})


@pytest.mark.parametrize("shape", [(2, 1), (7, 13), (3, 37)])
def test_residual_layer_norm_backward(normal, shape):
    rows, hidden = shape
    inputs = {"x": normal(*shape), "residual": normal(*shape), "weight": normal(hidden),
              "bias": normal(hidden)}
    dy, ds = normal(*shape), normal(*shape)
    _, summed = K.residual_layer_norm(**inputs, eps=1e-5, device="cpu")
    d_input, d_weight, d_bias = K.residual_layer_norm_backward(
        summed, inputs["weight"], dy, ds, 1e-5, device="cpu")
    directions = {name: normal(*value.shape) for name, value in inputs.items()}
    check(lambda **a: K.residual_layer_norm(**a, eps=1e-5, device="cpu"), inputs,
          directions, [dy, ds],
          {"x": d_input, "residual": d_input, "weight": d_weight, "bias": d_bias})


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (3, 37)])
@pytest.mark.parametrize("p", [0.0, 0.4])
def test_softmax_dropout_backward(normal, rng, shape, p):
    x, grad, seed = normal(*shape), normal(*shape), int(rng.integers(2 ** 62))
    dx = K.softmax_dropout_backward(x, grad, p, seed, device="cpu")
    check(lambda **a: K.softmax_dropout(a["x"], p, seed, device="cpu"), {"x": x},
          {"x": normal(*shape)}, [grad], {"x": dx})
