"""Float64 numpy references of the library's basic kernels and the device API's
operations (tests/kernels, tests/device_api)."""
import numpy as np


def f64(*arrays):
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def softmax(x):
    (x,) = f64(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_backward(y, dy):
    y, dy = f64(y, dy)
    return y * (dy - (y * dy).sum(axis=1, keepdims=True))


def rms_norm(x, w, eps):
    x, w = f64(x, w)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w


def rms_norm_backward(x, w, dy, eps):
    """(grad_input, grad_weight), derived by hand: with s = (mean(x^2) + eps)^-1/2,
    dx = s * w * dy - x * s^3 * sum(dy * w * x) / dim, dw = sum_rows dy * x * s."""
    x, w, dy = f64(x, w, dy)
    s = 1 / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    inner = (dy * w * x).sum(axis=1, keepdims=True)
    grad_input = s * w * dy - x * s ** 3 * inner / x.shape[1]
    return grad_input, (dy * x * s).sum(axis=0)


def embedding_backward(vocab, ids, grad_output):
    (grad_output,) = f64(grad_output)
    grad = np.zeros((vocab, grad_output.shape[1]))
    np.add.at(grad, np.asarray(ids, dtype=np.int64), grad_output)
    return grad


def adamw(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    """One AdamW step in float64: decoupled weight decay, then the bias-corrected update."""
    param, grad, m, v = f64(param, grad, m, v)
    param = param - lr * weight_decay * param
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat, v_hat = m / (1 - beta1 ** step), v / (1 - beta2 ** step)
    return param - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def rms_norm_backward_scale(x, w, dy, eps):
    """The size of the two terms of grad_input, which cancel (to ~0 when dim is 1): f32's
    error is relative to them, not to their difference."""
    x, w, dy = f64(x, w, dy)
    s = 1 / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    return np.abs(s * w * dy).max()
