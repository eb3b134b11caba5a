"""Every operation of zynml.Device against float64 numpy, written once for any device:
test_device_cpu.py runs them on "cpu", test_device_cuda.py (marked gpu) on "cuda:0".
Buffers go up with `upload` and come back with `download`, so each case also checks
that results stay on the device (`download` refuses a buffer of another device)."""
import numpy as np

import numpy_references as ref
from conftest import assert_close

ODD = [(1, 1), (1, 7), (13, 1), (7, 37), (31, 130), (300, 9)]  # 300: a tall column sum


def normal(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def matmul(dev, rng):
    for m, k, n in [(1, 1, 1), (7, 13, 5), (33, 130, 17)]:
        a, b = normal(rng, m, k), normal(rng, k, n)
        out = dev.matmul(dev.upload(a), dev.upload(b))
        assert_close(dev.download(out), a.astype(np.float64) @ b)
    # the spec's flat buffers with explicit sizes
    a, b = normal(rng, 3, 5), normal(rng, 5, 2)
    out = dev.matmul(dev.upload(a.ravel()), dev.upload(b.ravel()), m=3, k=5, n=2)
    assert_close(dev.download(out), a.astype(np.float64) @ b)


def softmax(dev, rng):
    for shape in ODD:
        x, dy = normal(rng, *shape), normal(rng, *shape)
        y = dev.softmax(dev.upload(x), n_rows=shape[0], row_len=shape[1])
        assert_close(dev.download(y), ref.softmax(x))
        dx = dev.softmax_backward(y, dev.upload(dy))
        y64 = dev.download(y)
        assert_close(dev.download(dx), ref.softmax_backward(y64, dy))


def rms_norm(dev, rng):
    for shape in ODD:
        x, dy, w = normal(rng, *shape), normal(rng, *shape), normal(rng, shape[1])
        X, W = dev.upload(x), dev.upload(w)
        y = dev.rms_norm(X, W, n_groups=shape[0], dim=shape[1], eps=1e-5)
        assert_close(dev.download(y), ref.rms_norm(x, w, 1e-5))
        grad_input, grad_weight = dev.rms_norm_backward(X, W, dev.upload(dy), eps=1e-5)
        want_input, want_weight = ref.rms_norm_backward(x, w, dy, 1e-5)
        assert_close(dev.download(grad_input), want_input, rtol=1e-4,
                     floor=ref.rms_norm_backward_scale(x, w, dy, 1e-5))
        assert_close(dev.download(grad_weight), want_weight, rtol=1e-4)


def embedding(dev, rng):
    vocab, dim = 13, 7
    weight = normal(rng, vocab, dim)
    for tokens in (1, 11):
        ids = rng.integers(0, vocab, tokens)
        ids[-1] = ids[0]  # a repeated id: its gradients add up
        out = dev.embedding(dev.upload(weight), dev.upload_u32(ids), seq_len=tokens, dim=dim)
        np.testing.assert_array_equal(dev.download(out), weight[ids])
        grad_output = normal(rng, tokens, dim)
        grad = dev.embedding_backward(dev.upload(grad_output), dev.upload_u32(ids), vocab,
                                      seq_len=tokens, dim=dim)
        assert_close(dev.download(grad), ref.embedding_backward(vocab, ids, grad_output))


def reduce_sum(dev, rng):
    for shape, axis in [((7,), 0), ((13, 1), 0), ((7, 37), 0), ((7, 37), 1),
                        ((5, 3, 7), 1), ((5, 3, 7), 2), ((257, 33), 0), ((512, 7), 0)]:
        x = normal(rng, *shape)
        out = dev.download(dev.reduce_sum(dev.upload(x), axis))
        # against the sum of magnitudes: a sum that cancels keeps only f32's error in it
        assert_close(out, x.astype(np.float64).sum(axis=axis),
                     floor=np.abs(x).sum(axis=axis).max())
    x = normal(rng, 5, 3, 7)  # the spec's flat buffer and shape
    out = dev.download(dev.reduce_sum(dev.upload(x.ravel()), 1, shape=[5, 3, 7]))
    assert_close(out, x.astype(np.float64).sum(axis=1), floor=np.abs(x).sum(axis=1).max())


def transpose_2d(dev, rng):
    for shape in ODD:
        x = normal(rng, *shape)
        out = dev.transpose_2d(dev.upload(x), rows=shape[0], cols=shape[1])
        np.testing.assert_array_equal(dev.download(out), x.T)


def bias_add(dev, rng):
    for shape in [(1,), (7, 37), (2, 3, 5)]:
        x, bias = normal(rng, *shape), normal(rng, shape[-1])
        out = dev.download(dev.bias_add(dev.upload(x), dev.upload(bias)))
        assert_close(out, x.astype(np.float64) + bias)
    x, bias = normal(rng, 4, 3), normal(rng, 3)  # the spec's flat matrix
    out = dev.bias_add(dev.upload(x.ravel()), dev.upload(bias), numel=12, dim=3)
    assert_close(dev.download(out), (x.astype(np.float64) + bias).ravel())


def in_place_helpers(dev, rng):
    for shape in [(1,), (37,), (7, 13)]:
        dst, src = normal(rng, *shape), normal(rng, *shape)
        D = dev.upload(dst)
        dev.add_assign(D, dev.upload(src))
        assert_close(dev.download(D), dst.astype(np.float64) + src)
        copy = dev.copy_buffer(D)
        dev.zero_buffer(D)
        assert not dev.download(D).any()
        assert_close(dev.download(copy), dst.astype(np.float64) + src)  # a copy, not a view


def adamw_step(dev, rng):
    n = 37
    param = normal(rng, 7, n)  # any shape: updated elementwise
    P, M, V = dev.upload(param), dev.alloc((7, n)), dev.alloc((7, n))
    want = [param.astype(np.float64), np.zeros((7, n)), np.zeros((7, n))]
    hyper = dict(lr=0.01, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)
    for step in range(1, 5):
        grad = normal(rng, 7, n)
        assert dev.adamw_step(P, dev.upload(grad), M, V, step_t=step, **hyper) is None
        want = list(ref.adamw(want[0], grad, want[1], want[2], step=step, **hyper))
        for got, expected in zip((P, M, V), want):
            assert_close(dev.download(got), expected)


def buffers(dev, rng):
    x = normal(rng, 3, 5)
    up = dev.upload(x)
    np.testing.assert_array_equal(dev.download(up), x)
    f64 = dev.upload(x, dtype=np.float64)
    assert dev.download(f64).dtype == np.float64
    ids = dev.upload_u32([0, 7, 4294967295])
    np.testing.assert_array_equal(dev.download(ids), np.array([0, 7, 4294967295], np.uint32))
    zeros = dev.alloc(6)
    assert dev.download(zeros).shape == (6,) and not dev.download(zeros).any()
    assert dev.download(dev.alloc((2, 3), np.int32)).dtype == np.int32
    dev.sync()


ALL = [matmul, softmax, rms_norm, embedding, reduce_sum, transpose_2d, bias_add,
       in_place_helpers, adamw_step, buffers]
