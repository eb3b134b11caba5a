"""Fused operations of kernel-library.md, forward and backward, each a pipeline of a
ZynML source in zynml/kernels/src (its header states the formulas): SwiGLU and GeGLU
(swiglu.zyn, swiglu_packed.zyn, geglu.zyn), RMSNorm + RoPE (rms_norm_rope.zyn),
Residual + LayerNorm (residual_layer_norm.zyn), LayerNorm + Linear
(layer_norm_linear.zyn) and Softmax + Dropout (softmax_dropout.zyn). docs/kernels.md
describes them.

Each function runs on the device its inputs live on (a GPU array: that GPU; numpy: the
default device) or on `device=`; the shapes are checked here, so a mistake names the
operation and the argument. Backward functions return a tuple of gradients.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ZynMLError
from .library import call

__all__ = ["swiglu_backward", "swiglu_packed", "geglu", "geglu_backward", "rms_norm_rope",
           "residual_layer_norm", "residual_layer_norm_backward", "layer_norm_linear",
           "softmax_dropout", "softmax_dropout_backward"]

ROPE_STYLES = {"interleaved": "rms_norm_rope", "half": "rms_norm_rope_half"}


def swiglu_backward(gate: Any, up: Any, grad: Any, *, device: str | None = None):
    """Gradients (d_gate, d_up) of y = silu(gate) * up given grad = dL/dy, all [rows, d]:
    d_gate = grad * up * sigmoid(gate) * (1 + gate * (1 - sigmoid(gate))),
    d_up = grad * silu(gate)."""
    _same_shapes("swiglu_backward", 2, gate=gate, up=up, grad=grad)
    return call("swiglu", "swiglu_backward", {"gate": gate, "up": up, "grad": grad}, device)


def swiglu_packed(gate_up: Any, *, device: str | None = None):
    """silu(gate) * up [rows, d] of gate_up [rows, 2 * d], which holds gate's columns,
    then up's: one projection through both weights side by side (a decode step's one
    matrix-vector product instead of two)."""
    from .basic import reshaped
    rows, width = _shape_of("swiglu_packed", "gate_up", gate_up, 2)
    if width % 2:
        raise ZynMLError(f"swiglu_packed: gate_up's {width} columns are not gate's and "
                         f"up's side by side (an even count)")
    return call("swiglu_packed", "swiglu_packed",
                {"gate_up": reshaped(gate_up, (rows, 2, width // 2))}, device)


def geglu(gate: Any, up: Any, *, device: str | None = None):
    """gelu(gate) * up over [rows, d], GELU's tanh approximation (PyTorch's
    `gelu(approximate="tanh")`): 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))."""
    _same_shapes("geglu", 2, gate=gate, up=up)
    return call("geglu", "geglu", {"gate": gate, "up": up}, device)


def geglu_backward(gate: Any, up: Any, grad: Any, *, device: str | None = None):
    """Gradients (d_gate, d_up) of geglu given grad = dL/dy: d_gate = grad * up *
    gelu'(gate) (the derivative of the tanh form), d_up = grad * gelu(gate)."""
    _same_shapes("geglu_backward", 2, gate=gate, up=up, grad=grad)
    return call("geglu", "geglu_backward", {"gate": gate, "up": up, "grad": grad}, device)


def rms_norm_rope(x: Any, weight: Any, cos: Any, sin: Any, eps: float = 1e-6, *,
                  style: str = "interleaved", device: str | None = None):
    """RMSNorm over the head dimension (times `weight`), then rotary embedding.

    x is [tokens, heads, head_dim] (head_dim even), weight [head_dim], cos and sin
    [tokens, head_dim / 2] (the angle of pair p at token t). `style` pairs the rotated
    elements: "interleaved" (2p, 2p + 1), as GPT-J and Meta's Llama code; "half"
    (p, p + head_dim / 2), as GPT-NeoX and Hugging Face's rotate_half."""
    if style not in ROPE_STYLES:
        raise ZynMLError(f"rms_norm_rope: style must be one of {', '.join(ROPE_STYLES)}, "
                         f"got {style!r}")
    tokens, _, head_dim = _shape_of("rms_norm_rope", "x", x, 3)
    if head_dim % 2:
        raise ZynMLError(f"rms_norm_rope: x's head dimension must be even, got {head_dim}")
    _expect("rms_norm_rope", "weight", weight, (head_dim,))
    for name, value in (("cos", cos), ("sin", sin)):
        _expect("rms_norm_rope", name, value, (tokens, head_dim // 2))
    return call("rms_norm_rope", ROPE_STYLES[style],
                {"x": x, "weight": weight, "cos": cos, "sin": sin, "eps": float(eps)}, device)


def residual_layer_norm(x: Any, residual: Any, weight: Any, bias: Any, eps: float = 1e-5,
                        *, device: str | None = None):
    """(normed, summed): summed = x + residual, normed = LayerNorm(summed) * weight + bias
    over the last axis. x and residual are [rows, hidden], weight and bias [hidden]."""
    _, hidden = _same_shapes("residual_layer_norm", 2, x=x, residual=residual)
    _vectors("residual_layer_norm", hidden, weight=weight, bias=bias)
    return call("residual_layer_norm", "residual_layer_norm",
                {"x": x, "residual": residual, "weight": weight, "bias": bias,
                 "eps": float(eps)}, device)


def residual_layer_norm_backward(summed: Any, weight: Any, grad_normed: Any,
                                 grad_summed: Any, eps: float = 1e-5, *,
                                 device: str | None = None):
    """(d_input, d_weight, d_bias) of residual_layer_norm, from its `summed` output and
    the gradients of both outputs; d_input is the gradient of x and of residual alike."""
    _, hidden = _same_shapes("residual_layer_norm_backward", 2, summed=summed,
                             grad_normed=grad_normed, grad_summed=grad_summed)
    _vectors("residual_layer_norm_backward", hidden, weight=weight)
    return call("residual_layer_norm", "residual_layer_norm_backward",
                {"summed": summed, "weight": weight, "grad_normed": grad_normed,
                 "grad_summed": grad_summed, "eps": float(eps)}, device)


def layer_norm_linear(x: Any, ln_weight: Any, ln_bias: Any, w: Any, b: Any,
                      eps: float = 1e-5, *, device: str | None = None):
    """LayerNorm(x) * ln_weight + ln_bias over the last axis, then @ w + b: x is
    [rows, hidden], w [hidden, outs], b [outs]."""
    _, hidden = _shape_of("layer_norm_linear", "x", x, 2)
    _vectors("layer_norm_linear", hidden, ln_weight=ln_weight, ln_bias=ln_bias)
    k, outs = _shape_of("layer_norm_linear", "w", w, 2)
    if k != hidden:
        raise ZynMLError(f"layer_norm_linear: w must have {hidden} rows (x's last "
                         f"dimension), got shape {list(_shape(w))}")
    _vectors("layer_norm_linear", outs, b=b)
    # Static sizes on every backend: IREE 3.13 fails on this product of run-time sizes
    # ('affine.delinearize_index' op no basis element may be statically non-positive).
    return call("layer_norm_linear", "layer_norm_linear",
                {"x": x, "ln_weight": ln_weight, "ln_bias": ln_bias, "w": w, "b": b,
                 "eps": float(eps)}, device, dynamic=False)


def softmax_dropout(x: Any, p: float, seed: int, *, device: str | None = None):
    """Softmax over the last axis of x [rows, cols], then dropout: element (r, c) is
    kept when rand(seed, r * cols + c) >= p and scaled by 1 / (1 - p), else 0."""
    _shape_of("softmax_dropout", "x", x, 2)
    return call("softmax_dropout", "softmax_dropout",
                {"x": x, "p": _probability("softmax_dropout", p),
                 "seed": _seed("softmax_dropout", seed)}, device)


def softmax_dropout_backward(x: Any, grad: Any, p: float, seed: int, *,
                             device: str | None = None):
    """dL/dx of softmax_dropout(x, p, seed) given grad = dL/dout: the softmax and the mask
    are recomputed from x and the same seed (nothing is stored between the passes)."""
    _same_shapes("softmax_dropout_backward", 2, x=x, grad=grad)
    return call("softmax_dropout", "softmax_dropout_backward",
                {"x": x, "grad": grad, "p": _probability("softmax_dropout_backward", p),
                 "seed": _seed("softmax_dropout_backward", seed)}, device)


# ---------------------------------------------------------------------- argument checks

def _shape(value: Any) -> tuple:
    shape = getattr(value, "shape", None)
    return tuple(int(n) for n in (shape if shape is not None else np.shape(value)))


def _shape_of(op: str, name: str, value: Any, rank: int) -> tuple:
    shape = _shape(value)
    if len(shape) != rank:
        raise ZynMLError(f"{op}: {name} must have {rank} dimensions, got shape {list(shape)}")
    return shape


def _expect(op: str, name: str, value: Any, shape: tuple) -> None:
    got = _shape(value)
    if got != tuple(shape):
        raise ZynMLError(f"{op}: {name} must have shape {list(shape)}, got {list(got)}")


def _same_shapes(op: str, rank: int, **arrays: Any) -> tuple:
    (first, value), *rest = arrays.items()
    shape = _shape_of(op, first, value, rank)
    for name, other in rest:
        _expect(op, name, other, shape)
    return shape


def _vectors(op: str, length: int, **arrays: Any) -> None:
    for name, value in arrays.items():
        _expect(op, name, value, (length,))


def _probability(op: str, p: Any) -> float:
    if not isinstance(p, (int, float, np.floating, np.integer)) or not 0 <= p < 1:
        raise ZynMLError(f"{op}: p must be a number from 0 up to (not including) 1, got {p!r}")
    return float(p)


def _seed(op: str, seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ZynMLError(f"{op}: seed must be an integer, got {seed!r}")
    return int(seed)
