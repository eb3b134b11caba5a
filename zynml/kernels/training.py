"""The pieces a GPT-2 training step needs besides attention and the loss: LayerNorm,
the linear projection and GELU, each with its gradients, heads moved in and out of
attention's layout (heads.py), residual adds and gradient clipping (sources: layer_norm.zyn,
linear.zyn, gelu.zyn, residual.zyn, grad_clip.zyn)."""
from __future__ import annotations

import math
from typing import Any

from ..backend.cuda import gemm_waves
from ..backend.cuda.target import CHIPS, DEFAULT_CHIP
from ..errors import ZynMLError
from .basic import _placement, convert_into, reshaped
from .heads import merge_heads, merge_qkv, split_heads
from .library import call, device_of

__all__ = ["layer_norm", "layer_norm_backward", "linear", "linear_residual",
           "linear_backward", "gelu", "gelu_backward", "column_sum", "split_heads",
           "merge_heads", "merge_qkv",
           "residual_add", "SUM_ROW", "sum_squares", "add_sum_squares", "clip_scale",
           "scale_in_place", "embed",
           "embed_backward_tokens", "embed_backward_positions",
           "head_logits"]


def layer_norm(x: Any, weight: Any, bias: Any, eps: float = 1e-5, *,
               device: str | None = None):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis of x [rows, d]."""
    return call("layer_norm", "layer_norm",
                {"x": x, "weight": weight, "bias": bias, "eps": float(eps)}, device)


# Rows summed per group in the one-call backward pipelines' two-step column sums
# (linear.zyn, layer_norm.zyn); other row counts take a call per gradient.
GROUP_ROWS = 64


def _groups(rows: int) -> int | None:
    return rows // GROUP_ROWS if rows % GROUP_ROWS == 0 else None


def layer_norm_backward(x: Any, weight: Any, grad: Any, eps: float = 1e-5, *,
                        grad_residual: Any = None, dweight: Any = None, dbias: Any = None,
                        device: str | None = None):
    """(d x, d weight, d bias) of layer_norm, given its input and the output's gradient;
    `grad_residual` (x's shape) is added to d x: the gradient reaching x past the norm.
    One call (one row kernel and the column sums) when the rows are a multiple of 64.
    Given `dweight` and `dbias` (f32 arrays [d]), they are written and returned (with
    `grad_residual`, on CUDA the last kernel writes them where they are)."""
    if (dweight is None) != (dbias is None):
        raise ZynMLError("layer_norm_backward: give both dweight and dbias, or neither")
    groups = _groups(int(x.shape[0]))
    args = {"x": x, "weight": weight, "grad": grad, "eps": float(eps)}
    if groups and grad_residual is not None and dweight is not None:
        return call("layer_norm", "layer_norm_backward_residual_into",
                    {**args, "grad_residual": grad_residual, "dweight": dweight,
                     "dbias": dbias, "groups": groups}, device)
    if groups and grad_residual is not None:
        grads = call("layer_norm", "layer_norm_backward_residual",
                     {**args, "grad_residual": grad_residual, "groups": groups}, device)
    elif groups:
        grads = call("layer_norm", "layer_norm_backward", {**args, "groups": groups}, device)
    else:
        dx = call("layer_norm", "layer_norm_backward_input", args, device)
        gx = call("layer_norm", "layer_norm_grad_xhat",
                  {"x": x, "grad": grad, "eps": float(eps)}, device)
        if grad_residual is not None:
            dx = residual_add(grad_residual, dx, device=device)
        grads = dx, column_sum(gx, device=device), column_sum(grad, device=device)
    return _written(grads, dweight, dbias, device)


def _written(grads: tuple, weight_grad: Any, bias_grad: Any, device: str | None) -> tuple:
    """(d x, d w, d b) as made, or with d w and d b written into the arrays given."""
    if weight_grad is None:
        return grads
    convert_into(weight_grad, grads[1], device=device)
    convert_into(bias_grad, grads[2], device=device)
    return grads[0], weight_grad, bias_grad


def linear(x: Any, w: Any, b: Any, *, device: str | None = None):
    """x @ w + b for x [rows, k], w [k, n], b [n]."""
    return call("linear", "linear", {"x": x, "w": w, "b": b}, device)


def linear_residual(x: Any, w: Any, b: Any, r: Any, *, device: str | None = None):
    """x @ w + b + r: a projection added to the residual stream r [rows, n] (the add in
    the product's epilogue)."""
    return call("linear", "linear_residual", {"x": x, "w": w, "b": b, "r": r}, device)


def linear_backward(x: Any, w: Any, grad: Any, *, dw: Any = None, db: Any = None,
                    device: str | None = None):
    """(d x, d w, d b) of linear: grad @ w^T, x^T @ grad, the column sums of grad (one
    call when the rows are a multiple of 64; on a GPU x^T @ grad split over the rows
    where its few output tiles would leave multiprocessors idle). Given `dw` and `db`
    (f32 arrays [k, n] and [n], such as views of a flat gradient buffer), d w and d b are
    written into them and they are returned: on CUDA the last kernels write them where
    they are, with no new array copied in."""
    if (dw is None) != (db is None):
        raise ZynMLError("linear_backward: give both dw and db, or neither")
    rows = int(x.shape[0])
    groups = _groups(rows)
    if groups:
        on_cuda = _placement(device or device_of([x]))[1] == "cuda"
        splits = weight_splits(rows, int(x.shape[1]), int(grad.shape[1]), on_cuda)
        args = {"x": x, "w": w, "grad": grad, "groups": groups, "splits": splits,
                "part": rows // splits}
        if dw is None:
            return call("linear", "linear_backward", args, device)
        return call("linear", "linear_backward_into", {**args, "dw": dw, "db": db}, device)
    dx = call("linear", "linear_backward_input", {"grad": grad, "w": w}, device)
    return _written((dx, call("linear", "linear_backward_weight", {"x": x, "grad": grad},
                              device), column_sum(grad, device=device)), dw, db, device)


# split-K of d w on CUDA, chosen by a cost model fitted to an H100 and an H200 (every
# split of GPT-2 small's four shapes timed, docs/performance.md Sessions 20 and 24): each
# part is a product of rows / splits rows, whose tiles run in rounds on the
# multiprocessors at the width matmul_wgmma picks by the same model (gemm_waves.py), and
# the parts' f32 sums cost SUM_US per element of a part (written, then read by the sum).
# Parts are a power of two, a multiple of 64 rows and at least SPLIT_MIN_ROWS. The model
# plans for sm_90a's multiprocessors on every GPU, not the device's count: a cache
# compiled where there is no GPU (tools/gpu_tests.sh compile) must hold the shapes the
# GPU asks.
SUM_US = 3.0e-6
SPLIT_MIN_ROWS, SPLIT_MAX = 512, 16
SPLIT_MULTIPROCESSORS = CHIPS[DEFAULT_CHIP].multiprocessors


def weight_splits(rows: int, k: int, n: int, on_gpu: bool) -> int:
    """How many parts of rows linear_backward sums d w = x^T @ grad in: 1 off a GPU;
    else the one the cost model above finds fastest: enough tiles to keep the
    multiprocessors busy, without more rounds or sums than pay."""
    if not on_gpu:
        return 1
    # matmul_wgmma's width; where none tiles d w, another strategy's tiles, as 256 wide
    width = lambda splits: gemm_waves.fastest_width(
        k, n, rows // splits, SPLIT_MULTIPROCESSORS, splits) or 256

    def cost(splits: int) -> float:
        product = gemm_waves.product_us(k, n, rows // splits, width(splits),
                                        SPLIT_MULTIPROCESSORS, splits)
        return product + (splits + 1) * k * n * SUM_US

    candidates = [1]
    while candidates[-1] < SPLIT_MAX and rows % (2 * candidates[-1] * GROUP_ROWS) == 0 \
            and rows // (2 * candidates[-1]) >= SPLIT_MIN_ROWS:
        candidates.append(2 * candidates[-1])
    return min(candidates, key=cost)


def head_logits(h: Any, wte: Any, *, device: str | None = None):
    """h @ wte^T: an output head tied to the token embedding wte [vocab, c]."""
    return call("linear", "linear_backward_input", {"grad": h, "w": wte}, device)


def column_sum(x: Any, *, device: str | None = None):
    """The sum over the rows of x [rows, n], in f32 whatever x's dtype: a bias's
    gradient (in two steps when the rows are a multiple of 64, so that it fills a GPU)."""
    groups = _groups(int(x.shape[0]))
    if groups:
        return call("linear", "column_sum_by_groups", {"grad": x, "groups": groups}, device)
    return call("linear", "column_sum", {"grad": x}, device)


def gelu(x: Any, *, device: str | None = None):
    """GELU, tanh approximation (GPT-2's), elementwise over x [rows, d]."""
    return call("gelu", "gelu", {"x": x}, device)


def gelu_backward(x: Any, grad: Any, *, device: str | None = None):
    """grad * gelu'(x)."""
    return call("gelu", "gelu_backward", {"x": x, "grad": grad}, device)


def residual_add(x: Any, y: Any, *, device: str | None = None):
    return call("residual", "residual_add", {"x": x, "y": y}, device)


# A flat gradient whose length is a multiple of this (models/flat.py pads to it) sums
# its squares as rows of this length: a block per row on a GPU instead of one block.
SUM_ROW = 4096


def sum_squares(g: Any, *, device: str | None = None):
    """The sum of squares of a flat gradient (0-d; it stays on a GPU)."""
    n = math.prod(g.shape)
    if n >= 4 * SUM_ROW and n % SUM_ROW == 0:
        return call("grad_clip", "sum_squares_by_rows",
                    {"g": reshaped(g, (n // SUM_ROW, SUM_ROW))}, device)
    return call("grad_clip", "sum_squares", {"g": g}, device)


def add_sum_squares(total: Any, g: Any, *, device: str | None = None):
    """total[0] += the sum of squares of a flat gradient, in place on the one-element
    array total (on a GPU it stays there: a global norm with no read back)."""
    return call("grad_clip", "add_sum_squares", {"total": total, "g": g}, device)


def clip_scale(total: Any, grad_scale: float, max_norm: float, *,
               device: str | None = None):
    """A one-element array on total's device: grad_scale * min(1, max_norm / (norm +
    1e-6)) with norm = sqrt(total[0]) * grad_scale (torch.nn.utils.clip_grad_norm_'s
    factor for the gradients times grad_scale); max_norm = inf does not clip."""
    return call("grad_clip", "clip_scale", {"total": total, "grad_scale": float(grad_scale),
                                            "max_norm": float(max_norm)}, device)


def scale_in_place(g: Any, factor: float, *, device: str | None = None):
    """g *= factor, in g's own memory (a flat array)."""
    return call("grad_clip", "scale_in_place", {"g": g, "factor": float(factor)}, device)


def embed(wte: Any, wpe: Any, ids: Any, *, device: str | None = None):
    """GPT-2's input rows [batch * seq, c]: wte[ids] + wpe[position]."""
    return call("gpt_embedding", "embed", {"wte": wte, "wpe": wpe, "ids": ids}, device)


def embed_backward_tokens(dwte: Any, ids: Any, grad: Any, *, device: str | None = None):
    """Adds the token embedding's gradient into dwte (in place) and returns it; ids
    [batch, seq] (or flat), grad [batch * seq, c] (f32 or narrower, widened first)."""
    from .basic import embedding_backward
    if str(grad.dtype).replace("torch.", "") != str(dwte.dtype).replace("torch.", ""):
        grad = call("gpt_embedding", "rows_f32", {"x": grad}, device)
    return embedding_backward(dwte, ids.reshape(-1), grad, device=device)


def embed_backward_positions(wpe: Any, grad: Any, batch: int, seq: int, *,
                             device: str | None = None):
    """The position embedding's gradient, shaped as wpe (zero past `seq`)."""
    return call("gpt_embedding", "embed_backward_positions",
                {"wpe": wpe, "grad": grad, "batch": batch, "seq": seq}, device)
