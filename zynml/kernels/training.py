"""The pieces a GPT-2 training step needs besides attention and the loss: LayerNorm,
the linear projection and GELU, each with its gradients (sources: layer_norm.zyn,
linear.zyn, gelu.zyn)."""
from __future__ import annotations

from typing import Any

from .library import call

__all__ = ["layer_norm", "layer_norm_backward", "linear", "linear_backward", "gelu",
           "gelu_backward", "column_sum"]


def layer_norm(x: Any, weight: Any, bias: Any, eps: float = 1e-5, *,
               device: str | None = None):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis of x [rows, d]."""
    return call("layer_norm", "layer_norm",
                {"x": x, "weight": weight, "bias": bias, "eps": float(eps)}, device)


def layer_norm_backward(x: Any, weight: Any, grad: Any, eps: float = 1e-5, *,
                        device: str | None = None):
    """(d x, d weight, d bias) of layer_norm, given its input and the output's gradient."""
    dx = call("layer_norm", "layer_norm_backward_input",
              {"x": x, "weight": weight, "grad": grad, "eps": float(eps)}, device)
    dw = call("layer_norm", "layer_norm_backward_weight",
              {"x": x, "grad": grad, "eps": float(eps)}, device)
    return dx, dw, column_sum(grad, device=device)


def linear(x: Any, w: Any, b: Any, *, device: str | None = None):
    """x @ w + b for x [rows, k], w [k, n], b [n]."""
    return call("linear", "linear", {"x": x, "w": w, "b": b}, device)


def linear_backward(x: Any, w: Any, grad: Any, *, device: str | None = None):
    """(d x, d w, d b) of linear: grad @ w^T, x^T @ grad, the column sums of grad."""
    dx = call("linear", "linear_backward_input", {"grad": grad, "w": w}, device)
    dw = call("linear", "linear_backward_weight", {"x": x, "grad": grad}, device)
    return dx, dw, column_sum(grad, device=device)


def column_sum(x: Any, *, device: str | None = None):
    """The sum over the rows of x [rows, n]: a bias's gradient."""
    return call("linear", "column_sum", {"grad": x}, device)


def gelu(x: Any, *, device: str | None = None):
    """GELU, tanh approximation (GPT-2's), elementwise over x [rows, d]."""
    return call("gelu", "gelu", {"x": x}, device)


def gelu_backward(x: Any, grad: Any, *, device: str | None = None):
    """grad * gelu'(x)."""
    return call("gelu", "gelu_backward", {"x": x, "grad": grad}, device)
