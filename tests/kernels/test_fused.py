"""The library's fused operations on the CPU against float64 numpy (fused_reference.py)
on fresh random inputs of odd sizes; their argument checks; one compile for every row
count where a source declares `?rows`; `use kernels.NAME` from a user program."""
import re

import numpy as np
import pytest

import zynml
import zynml.kernels as K
from conftest import assert_close

from . import fused_reference as ref

ROWS_COLS = [(1, 1), (7, 13), (3, 129)]
F16_RTOL = 4e-3  # f16 arithmetic: 11 significant bits, a few roundings per element


def normal(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("shape", ROWS_COLS)
@pytest.mark.parametrize("op", ["swiglu", "geglu"])
def test_gated_units(rng, op, shape):
    gate, up = normal(rng, *shape) * 3, normal(rng, *shape)
    assert_close(getattr(K, op)(gate, up, device="cpu"), getattr(ref, op)(gate, up))


@pytest.mark.parametrize("shape", ROWS_COLS)
def test_swiglu_of_gate_and_up_side_by_side(rng, shape):
    """One product through [gate | up] weights: the first half of each row is gate's."""
    gate, up = normal(rng, *shape) * 3, normal(rng, *shape)
    got = K.swiglu_packed(np.concatenate([gate, up], axis=1), device="cpu")
    assert_close(got, ref.swiglu(gate, up))


@pytest.mark.parametrize("shape", ROWS_COLS)
@pytest.mark.parametrize("op", ["swiglu_backward", "geglu_backward"])
def test_gated_units_backward(rng, op, shape):
    gate, up, grad = normal(rng, *shape) * 3, normal(rng, *shape), normal(rng, *shape)
    d_gate, d_up = getattr(K, op)(gate, up, grad, device="cpu")
    want_gate, want_up = getattr(ref, op)(gate, up, grad)
    # d_gate is grad * up times the unit's derivative, which crosses 0 (GELU's near gate
    # = -0.75), and d_up grad times the unit; both cancel in f32 (1 + tanh(u) for u <<
    # 0): good to an absolute error at the scale of the products (one row of 1 x 1 failed
    # 5 draws in 3000 without the floors)
    wide = grad.astype(np.float64)
    assert_close(d_gate, want_gate, floor=np.abs(wide * up).max())
    assert_close(d_up, want_up, floor=np.abs(wide * gate).max())


@pytest.mark.parametrize("op", ["swiglu", "geglu"])
def test_gated_units_in_f16(rng, op):
    gate, up, grad = (normal(rng, 7, 13, dtype=np.float16) for _ in range(3))
    y = getattr(K, op)(gate, up, device="cpu")
    assert y.dtype == np.float16
    assert_close(y, getattr(ref, op)(gate, up), rtol=F16_RTOL)
    for got, want in zip(getattr(K, op + "_backward")(gate, up, grad, device="cpu"),
                         getattr(ref, op + "_backward")(gate, up, grad)):
        assert got.dtype == np.float16
        assert_close(got, want, rtol=F16_RTOL)


@pytest.mark.parametrize("shape", [(1, 1, 2), (7, 3, 16), (5, 2, 130)])
@pytest.mark.parametrize("style", ["interleaved", "half"])
def test_rms_norm_rope(rng, shape, style):
    tokens, _, head_dim = shape
    x, weight = normal(rng, *shape), normal(rng, head_dim)
    angles = rng.uniform(0, 2 * np.pi, (tokens, head_dim // 2))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    got = K.rms_norm_rope(x, weight, cos, sin, 1e-5, style=style, device="cpu")
    assert_close(got, ref.rms_norm_rope(x, weight, cos, sin, 1e-5, style))


def test_the_two_rope_styles_differ(rng):
    x, weight = normal(rng, 3, 2, 8), np.ones(8, np.float32)
    cos, sin = np.zeros((3, 4), np.float32), np.ones((3, 4), np.float32)
    a = K.rms_norm_rope(x, weight, cos, sin, device="cpu")
    b = K.rms_norm_rope(x, weight, cos, sin, style="half", device="cpu")
    assert not np.allclose(a, b)


@pytest.mark.parametrize("shape", ROWS_COLS[1:] + [(2, 1)])
def test_residual_layer_norm(rng, shape):
    x, residual = normal(rng, *shape), normal(rng, *shape)
    weight, bias = normal(rng, shape[1]), normal(rng, shape[1])
    normed, summed = K.residual_layer_norm(x, residual, weight, bias, 1e-5, device="cpu")
    want_normed, want_summed = ref.residual_layer_norm(x, residual, weight, bias, 1e-5)
    assert_close(normed, want_normed, rtol=2e-5)
    assert_close(summed, want_summed)


@pytest.mark.parametrize("shape", ROWS_COLS[1:])
def test_residual_layer_norm_backward(rng, shape):
    summed, dy, ds = (normal(rng, *shape) for _ in range(3))
    weight = normal(rng, shape[1])
    got = K.residual_layer_norm_backward(summed, weight, dy, ds, 1e-5, device="cpu")
    for g, w in zip(got, ref.residual_layer_norm_backward(summed, weight, dy, ds, 1e-5)):
        assert_close(g, w, rtol=2e-5)


@pytest.mark.parametrize("rows, hidden, outs", [(1, 3, 1), (7, 13, 5), (11, 67, 33)])
def test_layer_norm_linear(rng, rows, hidden, outs):
    x, ln_weight, ln_bias = normal(rng, rows, hidden), normal(rng, hidden), normal(rng, hidden)
    w, b = (normal(rng, hidden, outs) / np.sqrt(hidden)).astype(np.float32), normal(rng, outs)
    got = K.layer_norm_linear(x, ln_weight, ln_bias, w, b, 1e-5, device="cpu")
    assert got.dtype == np.float32
    assert_close(got, ref.layer_norm_linear(x, ln_weight, ln_bias, w, b, 1e-5), rtol=2e-5)


@pytest.mark.parametrize("shape", ROWS_COLS)
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_softmax_dropout(rng, shape, p):
    x, seed = normal(rng, *shape) * 2, int(rng.integers(-2 ** 40, 2 ** 40))
    got = K.softmax_dropout(x, p, seed, device="cpu")
    assert_close(got, ref.softmax_dropout(x, p, seed))
    grad = normal(rng, *shape)
    assert_close(K.softmax_dropout_backward(x, grad, p, seed, device="cpu"),
                 ref.softmax_dropout_backward(x, grad, p, seed), rtol=2e-5)


@pytest.mark.parametrize("shape", ROWS_COLS)
def test_softmax_dropout_backward(rng, shape):
    x, grad, seed = normal(rng, *shape) * 2, normal(rng, *shape), int(rng.integers(2 ** 31))
    got = K.softmax_dropout_backward(x, grad, 0.25, seed, device="cpu")
    assert_close(got, ref.softmax_dropout_backward(x, grad, 0.25, seed), rtol=2e-5)


def test_softmax_dropout_drops_about_p_and_a_new_seed_changes_the_mask(rng):
    x = normal(rng, 37, 129)
    first = K.softmax_dropout(x, 0.4, 1, device="cpu")
    dropped = np.mean(first == 0)
    assert 0.35 < dropped < 0.45  # 4773 Bernoulli(0.4) draws: 7 standard deviations
    assert not np.array_equal(first == 0, K.softmax_dropout(x, 0.4, 2, device="cpu") == 0)


ERRORS = [
    (lambda: K.swiglu_packed(np.ones((2, 5))),
     "swiglu_packed: gate_up's 5 columns are not gate's and up's side by side"),
    (lambda: K.swiglu_packed(np.ones(4)), "swiglu_packed: gate_up must have 2 dimensions"),
    (lambda: K.swiglu_backward(np.ones((2, 3)), np.ones((2, 3)), np.ones((3, 2))),
     "swiglu_backward: grad must have shape [2, 3], got [3, 2]"),
    (lambda: K.geglu(np.ones(3), np.ones(3)), "geglu: gate must have 2 dimensions"),
    (lambda: K.rms_norm_rope(np.ones((2, 1, 4)), np.ones(4), np.ones((2, 3)), np.ones((2, 2))),
     "rms_norm_rope: cos must have shape [2, 2], got [2, 3]"),
    (lambda: K.rms_norm_rope(np.ones((2, 1, 5)), np.ones(5), np.ones((2, 2)), np.ones((2, 2))),
     "rms_norm_rope: x's head dimension must be even, got 5"),
    (lambda: K.rms_norm_rope(np.ones((2, 1, 4)), np.ones(4), np.ones((2, 2)), np.ones((2, 2)),
                             style="neox"), "rms_norm_rope: style must be one of"),
    (lambda: K.residual_layer_norm(np.ones((2, 3)), np.ones((2, 3)), np.ones(4), np.ones(3)),
     "residual_layer_norm: weight must have shape [3], got [4]"),
    (lambda: K.layer_norm_linear(np.ones((2, 3)), np.ones(3), np.ones(3), np.ones((4, 5)),
                                 np.ones(5)), "layer_norm_linear: w must have 3 rows"),
    (lambda: K.softmax_dropout(np.ones((2, 3)), 1.0, 0),
     "softmax_dropout: p must be a number from 0 up to (not including) 1, got 1.0"),
    (lambda: K.softmax_dropout_backward(np.ones((2, 3)), np.ones((2, 3)), 0.1, 1.5),
     "softmax_dropout_backward: seed must be an integer, got 1.5"),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_a_wrong_argument_names_the_operation_and_the_argument(index):
    call, message = ERRORS[index]
    with pytest.raises(zynml.ZynMLError, match="^error: " + re.escape(message)):
        call()


@pytest.mark.parametrize("kernel, pipeline, names", [
    ("geglu", "geglu_backward", ("gate", "up", "grad")),
    ("swiglu", "swiglu_backward", ("gate", "up", "grad")),
])
def test_one_compile_serves_every_row_count(rng, kernel, pipeline, names):
    prog = zynml.compile(K.source_path(kernel), device="cpu").pipeline(pipeline)
    for rows in (1, 7, 130):
        inputs = {name: normal(rng, rows, 13) for name in names}
        got = prog(**inputs)
        assert_close(got[next(iter(got))], getattr(ref, pipeline)(*inputs.values())[0])
    stats = prog.stats()
    assert stats.specializations == 1 and stats.dynamic == ("rows",)


def test_a_program_uses_a_backward_kernel_of_the_library(rng):
    source = """use kernels.geglu

pipeline step(gate: tensor[rows, d], up: tensor[rows, d], grad: tensor[rows, d]) -> tensor[rows, d]:
    let (d_gate, d_up) = geglu_backward(gate, up, grad)
    let total = compute(d_gate, d_up) {
        @kernel elementwise
        for i in 0..rows, j in 0..d:
            out[i, j] = d_gate[i, j] + d_up[i, j]
    }
    return total
"""
    gate, up, grad = (normal(rng, 5, 11) for _ in range(3))
    got = zynml.compile(source, device="cpu").step(gate, up, grad)
    assert_close(got, sum(ref.geglu_backward(gate, up, grad)))
