"""zynml.kernels.basic on the CPU against float64 numpy, fresh random inputs of odd sizes
(1, primes, sizes that are no multiple of a tile); every size of one kernel runs on one
compile (the CPU compiles them dynamic)."""
import numpy as np
import pytest

import zynml
import numpy_references as ref
from conftest import assert_close
from zynml import kernels as K

SHAPES = [(1, 1), (1, 7), (13, 1), (7, 37), (31, 130), (300, 9)]  # 300: a tall column sum


def normal(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 13, 5), (33, 130, 17)])
def test_matmul(rng, m, k, n):
    a, b = normal(rng, m, k), normal(rng, k, n)
    assert_close(K.matmul(a, b, device="cpu"), a.astype(np.float64) @ b)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 130, 17), (16, 13, 5), (33, 7, 2)])
def test_matmul_accumulate_adds_the_product_in_place(rng, m, k, n):
    c, a, b = normal(rng, m, n), normal(rng, m, k), normal(rng, k, n)
    want = c.astype(np.float64) + a.astype(np.float64) @ b
    assert K.matmul_accumulate(c, a, b, device="cpu") is c
    assert_close(c, want, floor=(np.abs(a).astype(np.float64) @ np.abs(b)).max())


def test_matmul_accumulate_names_mismatched_shapes(rng):
    with pytest.raises(zynml.ZynMLError, match=r"c \(3, 4\) \+= a \(3, 5\) @ b \(6, 4\)"):
        K.matmul_accumulate(normal(rng, 3, 4), normal(rng, 3, 5), normal(rng, 6, 4),
                            device="cpu")


def test_matmul_f64_stays_f64(rng):
    a, b = normal(rng, 3, 5, dtype=np.float64), normal(rng, 5, 2, dtype=np.float64)
    out = K.matmul(a, b, device="cpu")
    assert out.dtype == np.float64
    assert_close(out, a @ b, rtol=1e-12)


def compiles(kernel: str, pipeline: str | None = None) -> int:
    """Compiles so far of a library kernel's CPU Program (shared by the whole process)."""
    program = K.program(kernel, "cpu", dynamic=True)
    return (program.pipeline(pipeline) if pipeline else program).stats().compiles


def test_softmax_and_backward(rng):
    before = compiles("softmax", "softmax")
    for shape in SHAPES:
        x, dy = normal(rng, *shape), normal(rng, *shape)
        y = K.softmax(x, device="cpu")
        assert_close(y, ref.softmax(x))
        assert_close(K.softmax_backward(y, dy, device="cpu"), ref.softmax_backward(y, dy))
    assert compiles("softmax", "softmax") - before <= 1  # every shape on one compile


def test_rms_norm_and_backward(rng):
    for shape in SHAPES:
        x, dy, w = normal(rng, *shape), normal(rng, *shape), normal(rng, shape[1])
        eps = float(rng.uniform(1e-6, 1e-2))
        assert_close(K.rms_norm(x, w, eps, device="cpu"), ref.rms_norm(x, w, eps))
        grad_input, grad_weight = K.rms_norm_backward(x, w, dy, eps, device="cpu")
        want_input, want_weight = ref.rms_norm_backward(x, w, dy, eps)
        assert_close(grad_input, want_input, rtol=1e-4,
                     floor=ref.rms_norm_backward_scale(x, w, dy, eps))
        assert_close(grad_weight, want_weight, rtol=1e-4)


def test_rms_norm_backward_matches_finite_differences(rng):
    # loss = sum(rms_norm(x, w) * dy): its central differences against the kernel in f64
    x, dy, w = (normal(rng, 3, 5, dtype=np.float64), normal(rng, 3, 5, dtype=np.float64),
                normal(rng, 5, dtype=np.float64))
    eps, h = 1e-3, 1e-6
    loss = lambda x, w: (ref.rms_norm(x, w, eps) * dy).sum()  # noqa: E731
    grad_input, grad_weight = K.rms_norm_backward(x, w, dy, eps, device="cpu")
    for value, grad, which in ((x, grad_input, 0), (w, grad_weight, 1)):
        numeric = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            up, down = value.copy(), value.copy()
            up[index] += h
            down[index] -= h
            args_up = (up, w) if which == 0 else (x, up)
            args_down = (down, w) if which == 0 else (x, down)
            numeric[index] = (loss(*args_up) - loss(*args_down)) / (2 * h)
        assert_close(grad, numeric, rtol=1e-6)


@pytest.mark.parametrize("id_dtype", [np.uint32, np.int32, np.int64])
def test_embedding_and_backward(rng, id_dtype):
    vocab, dim = 11, 7
    weight = normal(rng, vocab, dim)
    # 4099 tokens: three scatter calls (K.SCATTER_TOKENS at a time), the last of 3
    for tokens in (1, 13, 2 * K.basic.SCATTER_TOKENS + 3):
        ids = rng.integers(0, vocab, tokens).astype(id_dtype)
        ids[0] = ids[-1]  # a repeated id adds up in the backward
        np.testing.assert_array_equal(K.embedding(weight, ids, device="cpu"), weight[ids])
        grad_output = normal(rng, tokens, dim)
        grad_weight = normal(rng, vocab, dim)
        start = grad_weight.copy()
        out = K.embedding_backward(grad_weight, ids, grad_output, device="cpu")
        assert out is grad_weight  # accumulated in place
        assert_close(grad_weight, start + ref.embedding_backward(vocab, ids, grad_output))


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((1, 13), 1), ((13, 1), 0),
                                        ((7, 37), 0), ((7, 37), 1), ((5, 3, 7), 1),
                                        ((5, 3, 7), -1), ((2, 3, 5, 7), 2),
                                        ((257, 3), 0), ((512, 5), 0), ((1000, 1), 0)])
def test_reduce_sum(rng, shape, axis):
    x = normal(rng, *shape)
    out = K.reduce_sum(x, axis, device="cpu")
    assert out.shape == np.sum(x, axis=axis).shape
    # against the sum of magnitudes: a sum that cancels is only good to f32's error in it
    assert_close(out, x.astype(np.float64).sum(axis=axis),
                 floor=np.abs(x.astype(np.float64)).sum(axis=axis).max())


def test_reduce_sum_of_integers(rng):
    x = rng.integers(-50, 50, (7, 11)).astype(np.int32)
    np.testing.assert_array_equal(K.reduce_sum(x, 1, device="cpu"), x.sum(axis=1))


def test_reduce_sum_axis_out_of_range():
    with pytest.raises(zynml.ZynMLError, match="axis 2 is out of range"):
        K.reduce_sum(np.ones((2, 3), np.float32), 2, device="cpu")


@pytest.mark.parametrize("shape", SHAPES)
def test_transpose_2d(rng, shape):
    x = normal(rng, *shape)
    np.testing.assert_array_equal(K.transpose_2d(x, device="cpu"), x.T)


def test_bias_add(rng):
    for shape in [(1,), (7,), (13, 1), (7, 37), (2, 3, 5)]:
        x, bias = normal(rng, *shape), normal(rng, shape[-1])
        assert_close(K.bias_add(x, bias, device="cpu"), x.astype(np.float64) + bias)


def test_add_assign_and_zero_buffer_in_place(rng):
    for shape in [(1,), (37,), (7, 13)]:
        dst, src = normal(rng, *shape), normal(rng, *shape)
        want = dst.astype(np.float64) + src
        assert K.add_assign(dst, src, device="cpu") is dst
        assert_close(dst, want)
        assert K.zero_buffer(dst, device="cpu") is dst
        assert not dst.any()
    ints = rng.integers(1, 9, 5).astype(np.int32)
    K.zero_buffer(ints, device="cpu")
    assert not ints.any()


def test_in_place_needs_a_contiguous_array(rng):
    dst = normal(rng, 6, 4)[:, ::2]
    with pytest.raises(zynml.ZynMLError, match="'dst' is updated in place"):
        K.add_assign(dst, np.ones((6, 2), np.float32), device="cpu")


def test_adamw_step_against_numpy_over_steps(rng):
    n = 37
    before = compiles("adamw")
    param, m, v = normal(rng, n), np.zeros(n, np.float32), np.zeros(n, np.float32)
    want = [param.astype(np.float64), np.zeros(n), np.zeros(n)]
    hyper = dict(lr=0.01, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)
    for step in range(1, 6):
        grad = normal(rng, n)
        out = K.adamw_step(param, grad, m, v, step=step, device="cpu", **hyper)
        assert out is param
        want = list(ref.adamw(*want[:1], grad, *want[1:], step=step, **hyper))
        for got, expected in zip((param, m, v), want):
            assert_close(got, expected)
    # the scalars are run-time arguments: five steps, one compile
    assert compiles("adamw") - before <= 1


def test_adamw_step_counts_from_one(rng):
    p = normal(rng, 3)
    with pytest.raises(zynml.ZynMLError, match="step counts from 1"):
        K.adamw_step(p, p.copy(), p.copy(), p.copy(), lr=0.1, step=0, device="cpu")


def test_rope_and_copy_rows_shape_errors_name_the_arrays():
    table = np.ones((5, 4), np.float32)
    with pytest.raises(zynml.ZynMLError, match=r"rope: x must be \[rows, d\] with d even "
                                               r"and cos, sin \[positions, d\]; got x "
                                               r"\(3, 5\), cos \(5, 4\), sin \(5, 4\)"):
        K.rope(np.ones((3, 5), np.float32), table, table, 0, device="cpu")
    with pytest.raises(zynml.ZynMLError, match=r"copy_rows: source \[rows, cols\] must fit "
                                               r"target \[positions, cols\]; got source "
                                               r"\(6, 4\), target \(5, 4\)"):
        K.copy_rows(table, np.ones((6, 4), np.float32), 0, device="cpu")


@pytest.mark.parametrize("start", [0, 2, np.array(4)])
def test_copy_rows_overwrites_the_rows_at_start_and_keeps_the_rest(rng, start):
    target, source = normal(rng, 7, 5), normal(rng, 3, 5)
    want = target.astype(np.float64)
    want[int(start):int(start) + 3] = source
    assert K.copy_rows(target, source, start, device="cpu") is target
    np.testing.assert_array_equal(target, want)
