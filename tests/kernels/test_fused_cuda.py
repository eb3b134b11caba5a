"""The library's fused operations on the native CUDA backend (marked `gpu`: CI skips
them; tools/gpu_tests.sh runs them on the GPU machine) against float64 numpy on fresh
random inputs, at odd sizes and at sizes whose rows take the fused row kernel. One
kernel call per test: the compile-only half of gpu_tests.sh stops at a test's first
launch, so a second call's artifact would be missing on the GPU machine."""
import numpy as np
import pytest

import zynml.kernels as K
from conftest import assert_close

from . import fused_reference as ref

pytestmark = pytest.mark.gpu
CUDA = "cuda:0"


def gated(rng, rows, cols, dtype=np.float32):
    gate = (rng.standard_normal((rows, cols)) * 3).astype(dtype)
    return [gate] + [rng.standard_normal((rows, cols)).astype(dtype) for _ in range(2)]


@pytest.mark.parametrize("shape", [(7, 13), (301, 1031)])
@pytest.mark.parametrize("op", ["swiglu", "geglu", "swiglu_backward", "geglu_backward"])
def test_cuda_gated_unit(rng, op, shape):
    gate, up, grad = gated(rng, *shape)
    args = (gate, up) if "backward" not in op else (gate, up, grad)
    got, want = getattr(K, op)(*args, device=CUDA), getattr(ref, op)(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert_close(g, w)


@pytest.mark.parametrize("shape", [(7, 13), (16, 8192)])
def test_cuda_swiglu_of_gate_and_up_side_by_side(rng, shape):
    gate, up, _ = gated(rng, *shape)
    got = K.swiglu_packed(np.concatenate([gate, up], axis=1), device=CUDA)
    assert_close(got, ref.swiglu(gate, up))


@pytest.mark.parametrize("op", ["swiglu", "geglu", "swiglu_backward", "geglu_backward"])
def test_cuda_gated_unit_in_f16(rng, op):
    gate, up, grad = gated(rng, 37, 129, np.float16)
    args = (gate, up) if "backward" not in op else (gate, up, grad)
    got, want = getattr(K, op)(*args, device=CUDA), getattr(ref, op)(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert_close(g, w, rtol=4e-3)


@pytest.mark.parametrize("shape", [(7, 3, 16), (67, 5, 128)])
@pytest.mark.parametrize("style", ["interleaved", "half"])
def test_cuda_rms_norm_rope(rng, shape, style):
    tokens, _, head_dim = shape
    x = rng.standard_normal(shape).astype(np.float32)
    weight = rng.standard_normal(head_dim).astype(np.float32)
    angles = rng.uniform(0, 2 * np.pi, (tokens, head_dim // 2))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    got = K.rms_norm_rope(x, weight, cos, sin, 1e-5, style=style, device=CUDA)
    assert_close(got, ref.rms_norm_rope(x, weight, cos, sin, 1e-5, style))


@pytest.mark.parametrize("shape", [(7, 13), (131, 1027)])
def test_cuda_residual_layer_norm(rng, shape):
    x, residual = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    weight, bias = (rng.standard_normal(shape[1]).astype(np.float32) for _ in range(2))
    normed, summed = K.residual_layer_norm(x, residual, weight, bias, 1e-5, device=CUDA)
    want_normed, want_summed = ref.residual_layer_norm(x, residual, weight, bias, 1e-5)
    assert_close(normed, want_normed, rtol=3e-5)
    assert_close(summed, want_summed)


@pytest.mark.parametrize("shape", [(7, 13), (131, 1027)])
def test_cuda_residual_layer_norm_backward(rng, shape):
    summed, dy, ds = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    weight = rng.standard_normal(shape[1]).astype(np.float32)
    got = K.residual_layer_norm_backward(summed, weight, dy, ds, 1e-5, device=CUDA)
    for g, w in zip(got, ref.residual_layer_norm_backward(summed, weight, dy, ds, 1e-5)):
        assert_close(g, w, rtol=3e-5)


@pytest.mark.parametrize("rows, hidden, outs", [(7, 13, 5), (131, 256, 97)])
def test_cuda_layer_norm_linear(rng, rows, hidden, outs):
    x = rng.standard_normal((rows, hidden)).astype(np.float32)
    ln_weight, ln_bias = (rng.standard_normal(hidden).astype(np.float32) for _ in range(2))
    w = (rng.standard_normal((hidden, outs)) / np.sqrt(hidden)).astype(np.float32)
    b = rng.standard_normal(outs).astype(np.float32)
    got = K.layer_norm_linear(x, ln_weight, ln_bias, w, b, 1e-5, device=CUDA)
    assert_close(got, ref.layer_norm_linear(x, ln_weight, ln_bias, w, b, 1e-5), rtol=3e-5)


@pytest.mark.parametrize("shape", [(7, 13), (257, 1031)])
@pytest.mark.parametrize("backward", [False, True])
def test_cuda_softmax_dropout(rng, shape, backward):
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    grad = rng.standard_normal(shape).astype(np.float32)
    seed = int(rng.integers(2 ** 40))
    if backward:
        assert_close(K.softmax_dropout_backward(x, grad, 0.2, seed, device=CUDA),
                     ref.softmax_dropout_backward(x, grad, 0.2, seed), rtol=3e-5)
    else:
        assert_close(K.softmax_dropout(x, 0.2, seed, device=CUDA),
                     ref.softmax_dropout(x, 0.2, seed))
