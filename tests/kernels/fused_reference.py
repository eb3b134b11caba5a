"""float64 numpy references of the library's fused operations, forward and backward
(the analytic gradients written independently of zynml/kernels/src), shared by the CPU
and GPU tests."""
import numpy as np

from philox_reference import rand

K = np.sqrt(2 / np.pi)


def f64(*arrays):
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def sigmoid(x):
    return np.exp(-np.logaddexp(0, -x))  # 1 / (1 + e^-x), with no overflow for x << 0


def swiglu(gate, up):
    gate, up = f64(gate, up)
    return gate * sigmoid(gate) * up


def swiglu_backward(gate, up, grad):
    gate, up, grad = f64(gate, up, grad)
    s = sigmoid(gate)
    return grad * up * (s + gate * s * (1 - s)), grad * gate * s


def gelu_tanh(x):
    # 0.5 (1 + tanh(u)) written as sigmoid(2u): float64's 1 + tanh(u) cancels to 0 for
    # u < -19 (x < -7.3), where the kernel's value (about 1e-17) is still right
    return x * sigmoid(2 * K * (x + 0.044715 * x ** 3))


def geglu(gate, up):
    gate, up = f64(gate, up)
    return gelu_tanh(gate) * up


def geglu_backward(gate, up, grad):
    gate, up, grad = f64(gate, up, grad)
    u = K * (gate + 0.044715 * gate ** 3)
    # with t = tanh(u): 0.5 (1 + t) = sigmoid(2u) and 1 - t^2 = 4 sigmoid(2u) sigmoid(-2u),
    # neither cancelling where |u| is large (as in gelu_tanh)
    s, s_minus = sigmoid(2 * u), sigmoid(-2 * u)
    slope = s + 2 * gate * s * s_minus * K * (1 + 3 * 0.044715 * gate ** 2)
    return grad * up * slope, grad * gelu_tanh(gate)


def rms_norm_rope(x, weight, cos, sin, eps, style="interleaved"):
    """x [tokens, heads, head_dim]; cos, sin [tokens, head_dim / 2]."""
    x, weight, cos, sin = f64(x, weight, cos, sin)
    n = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * weight
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty_like(n)
    if style == "interleaved":
        a, b = n[..., 0::2], n[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
    else:
        half = n.shape[-1] // 2
        a, b = n[..., :half], n[..., half:]
        out[..., :half], out[..., half:] = a * c - b * s, b * c + a * s
    return out


def layer_norm(x, weight, bias, eps):
    x, weight, bias = f64(x, weight, bias)
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps) * weight + bias


def residual_layer_norm(x, residual, weight, bias, eps):
    summed = np.asarray(x, np.float64) + np.asarray(residual, np.float64)
    return layer_norm(summed, weight, bias, eps), summed


def residual_layer_norm_backward(summed, weight, grad_normed, grad_summed, eps):
    s, weight, dy, ds = f64(summed, weight, grad_normed, grad_summed)
    n = s.shape[-1]
    rstd = 1 / np.sqrt(s.var(-1, keepdims=True) + eps)
    s_hat = (s - s.mean(-1, keepdims=True)) * rstd
    g = dy * weight
    # d/ds of LayerNorm written as the Jacobian-vector product (1/n)(n g - sum g - s_hat sum g s_hat)
    d_input = rstd / n * (n * g - g.sum(-1, keepdims=True)
                          - s_hat * (g * s_hat).sum(-1, keepdims=True)) + ds
    return d_input, (dy * s_hat).sum(0), dy.sum(0)


def layer_norm_linear(x, ln_weight, ln_bias, w, b, eps):
    w, b = f64(w, b)
    return layer_norm(x, ln_weight, ln_bias, eps) @ w + b


def dropout_keep(seed, p, rows, cols):
    """Which elements softmax_dropout keeps: rand(seed, r * cols + c) >= p (f32 compare)."""
    counters = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
    return rand(seed, counters) >= np.float32(p)


def softmax(x):
    (x,) = f64(x)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def softmax_dropout(x, p, seed):
    keep = dropout_keep(seed, p, *np.shape(x))
    return np.where(keep, softmax(x) / (1 - p), 0.0)


def softmax_dropout_backward(x, grad, p, seed):
    s = softmax(x)
    keep = dropout_keep(seed, p, *np.shape(x))
    (grad,) = f64(grad)
    g = np.where(keep, grad / (1 - p), 0.0)
    return s * (g - (g * s).sum(-1, keepdims=True))
