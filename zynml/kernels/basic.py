"""The plain operations the device API runs: matmul, softmax, norms, embedding, sums,
transpose, the in-place helpers and AdamW (sources in zynml/kernels/src).

Each wrapper runs on the device its inputs live on (a GPU array's CUDA device, else
"auto"), or on `device=`. Which sizes compile dynamic depends on the device: the CPU
(IREE) compiles every size dynamic, once; native CUDA keeps the sizes static where its
fast strategies need them (matmul's tensor cores, fused row kernels holding a row in
registers) and dynamic where they do not (pointwise kernels, row sums, token counts).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ..devices import resolve
from ..errors import ZynMLError
from .library import device_of, program

__all__ = ["matmul", "matmul_accumulate", "softmax", "softmax_backward", "rms_norm",
           "rms_norm_backward", "embedding", "embedding_backward", "reduce_sum",
           "transpose_2d", "bias_add", "add_assign", "zero_buffer", "convert_into",
           "adamw_step", "rope", "copy_rows"]

# How a kernel's sizes compile on native CUDA: "declared" (the source's `?` sizes),
# "static" (every size, for the strategies that need it) or a tuple of dynamic sizes.
# AdamW stays static: with a run-time length its three updates lower to three kernels,
# static to one (a model has few distinct parameter sizes). Off CUDA every size is
# dynamic, except where IREE cannot take it (the scatter).
_CUDA_SIZES = {"matmul": "static", "matmul_accumulate": "static", "softmax": "static",
               "rms_norm": "static", "rms_norm_backward": "static", "transpose_2d": "static",
               "reduce_sum": "declared", "bias_add": "declared", "add_assign": ("n",),
               "zero_buffer": ("n",), "convert_into": ("n",), "adamw": "static",
               "adamw_clipped": "static",
               "embedding": ("tokens",), "embedding_backward": ("tokens",),
               "rope": "static", "copy_rows": "static"}
_HOST_STATIC = {"embedding_backward"}  # IREE's CPU scatter needs a static token count


@lru_cache(maxsize=None)
def _placement(device: str) -> tuple[str, str]:
    """(device name the Program takes, its kind): "auto" resolved once."""
    placement = resolve(device)
    return placement.device, placement.kind


def _program(kernel: str, device: str | None, values):
    name, kind = _placement(device or device_of(values))
    sizes = _CUDA_SIZES[kernel]
    if kind == "cuda":
        options = {} if sizes == "declared" else \
            {"dynamic": False} if sizes == "static" else {"dynamic": sizes}
    else:
        options = {"dynamic": kernel not in _HOST_STATIC}
    return program(kernel, name, **options)


def _pipeline(kernel: str, pipeline: str, args: dict[str, Any], device: str | None):
    return getattr(_program(kernel, device, args.values()), pipeline)(**args)


def _script(kernel: str, args: dict[str, Any], device: str | None) -> dict[str, Any]:
    return _program(kernel, device, args.values())(**args)


def matmul(a: Any, b: Any, *, device: str | None = None):
    """a @ b for a [m, k] and b [k, n]."""
    return _pipeline("matmul", "matmul", {"a": a, "b": b}, device)


def matmul_accumulate(c: Any, a: Any, b: Any, *, device: str | None = None):
    """c += a @ b in place for c [m, n], a [m, k] and b [k, n] (one kernel, one rounding
    of the f32 sum into c); returns c."""
    shapes = [tuple(int(n) for n in x.shape) for x in (c, a, b)]
    if any(len(shape) != 2 for shape in shapes) or shapes[1][1] != shapes[2][0] or \
            shapes[0] != (shapes[1][0], shapes[2][1]):
        raise ZynMLError(f"matmul_accumulate: c {shapes[0]} += a {shapes[1]} @ b "
                         f"{shapes[2]} needs c [m, n], a [m, k] and b [k, n]")
    if isinstance(c, np.ndarray) and not c.flags.c_contiguous:
        raise ZynMLError("'c' is updated in place and must be C-contiguous")
    _script("matmul_accumulate", {"c": c, "a": a, "b": b}, device)
    return c


def softmax(x: Any, *, device: str | None = None):
    """Softmax of each row of a [rows, cols] array."""
    return _pipeline("softmax", "softmax", {"x": x}, device)


def softmax_backward(y: Any, dy: Any, *, device: str | None = None):
    """The gradient of softmax's input from its output y and output gradient dy."""
    return _pipeline("softmax", "softmax_backward", {"y": y, "dy": dy}, device)


def rms_norm(x: Any, weight: Any, eps: float = 1e-5, *, device: str | None = None):
    """x * weight / sqrt(mean(x^2) + eps) per row of a [rows, dim] array."""
    return _pipeline("rms_norm", "rms_norm", {"x": x, "w": weight, "eps": float(eps)},
                     device)


def rope(x: Any, cos: Any, sin: Any, pos: Any, *, device: str | None = None):
    """Rotate-half RoPE of rows x [rows, d] at position `pos` (a number, or a 0-d integer
    array read when the kernel runs), with tables cos and sin [positions, d]."""
    shape, table = tuple(x.shape), tuple(cos.shape)
    if len(shape) != 2 or shape[1] % 2 or len(table) != 2 or table[1] != shape[1] or \
            tuple(sin.shape) != table:
        raise ZynMLError(f"rope: x must be [rows, d] with d even and cos, sin [positions, "
                         f"d]; got x {shape}, cos {table}, sin {tuple(sin.shape)}")
    return _script("rope", {"x": x, "cos": cos, "sin": sin, "pos": pos}, device)["rotated"]


def copy_rows(target: Any, source: Any, start: Any, *, device: str | None = None):
    """source [rows, cols] written into target [positions, cols] at rows start.. start +
    rows (`start` a number or a 0-d integer array, read when the kernel runs), in place:
    a KV cache's next rows. Returns target."""
    shape, rows = tuple(target.shape), tuple(source.shape)
    if len(shape) != 2 or len(rows) != 2 or rows[1] != shape[1] or rows[0] > shape[0]:
        raise ZynMLError(f"copy_rows: source [rows, cols] must fit target [positions, "
                         f"cols]; got source {rows}, target {shape}")
    _script("copy_rows", {"target": target, "source": source, "start": start}, device)
    return target


def rms_norm_backward(x: Any, weight: Any, grad_output: Any, eps: float = 1e-5, *,
                      device: str | None = None):
    """(grad_input [rows, dim], grad_weight [dim]) of rms_norm."""
    out = _script("rms_norm_backward", {"x": x, "w": weight, "grad_output": grad_output,
                                        "eps": float(eps)}, device)
    return out["grad_input"], _column_sum(out["weighted"], device)


def embedding(weight: Any, ids: Any, *, device: str | None = None):
    """weight[ids]: the rows of a [vocab, dim] table for 1-D integer ids."""
    return _script("embedding", {"weight": weight, "ids": ids}, device)["rows"]


# Tokens per embedding_backward call: IREE's CPU scatter keeps the tile's ids on the
# stack (8 bytes a token; its limit is 32 KB), so more go in chunks (on every device,
# so that a compile-only run makes the artifacts a GPU run asks for).
SCATTER_TOKENS = 2048


def embedding_backward(grad_weight: Any, ids: Any, grad_output: Any, *,
                       device: str | None = None):
    """grad_weight[ids[t]] += grad_output[t] for every t, in place; returns grad_weight."""
    tokens = int(ids.shape[0])
    for start in range(0, tokens, SCATTER_TOKENS):
        stop = min(tokens, start + SCATTER_TOKENS)
        chunk = (ids, grad_output) if tokens <= SCATTER_TOKENS else \
            (row_range(ids, start, stop), row_range(grad_output, start, stop))
        _script("embedding_backward", {"grad_weight": grad_weight, "ids": chunk[0],
                                       "grad_output": chunk[1]}, device)
    return grad_weight


def reduce_sum(x: Any, axis: int, *, device: str | None = None):
    """The sum of x along `axis` (x's shape without that axis)."""
    shape = tuple(x.shape)
    if not -len(shape) <= axis < len(shape):
        raise ZynMLError(f"reduce_sum: axis {axis} is out of range for shape {shape}")
    axis %= len(shape)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    kept = shape[:axis] + shape[axis + 1:]
    if inner == 1:
        total = _pipeline("reduce_sum", "sum_rows",
                          {"x": reshaped(x, (outer, shape[axis]))}, device)
    elif outer == 1:
        total = _column_sum(reshaped(x, (shape[axis], inner)), device)
    else:
        total = _pipeline("reduce_sum", "sum_middle",
                          {"x": reshaped(x, (outer, shape[axis], inner))}, device)
    return reshaped(total, kept)


# A column sum of at least this many rows goes in two steps: groups of CHUNK rows summed
# with a thread per (group, column), then the group sums with a thread per column.
CHUNK = 64


def _column_sum(x: Any, device: str | None):
    """The column sums of a [rows, cols] array."""
    rows, cols = (int(d) for d in x.shape)
    if rows < 4 * CHUNK:
        return _pipeline("reduce_sum", "sum_columns", {"x": x}, device)
    groups, rest = divmod(rows, CHUNK)
    head = reshaped(row_range(x, 0, groups * CHUNK), (groups, CHUNK, cols))
    partial = _pipeline("reduce_sum", "sum_middle", {"x": head}, device)
    total = _pipeline("reduce_sum", "sum_columns", {"x": partial}, device)
    if rest:  # the last rows: their sums added as a "bias" of the one row of totals
        tail = _pipeline("reduce_sum", "sum_columns",
                         {"x": row_range(x, groups * CHUNK, rows)}, device)
        total = reshaped(bias_add(reshaped(total, (1, cols)), tail, device=device), (cols,))
    return total


def transpose_2d(x: Any, *, device: str | None = None):
    """A [rows, cols] array as [cols, rows]."""
    return _pipeline("transpose_2d", "transpose_2d", {"x": x}, device)


def bias_add(x: Any, bias: Any, *, device: str | None = None):
    """x + bias along x's last axis (bias of that length); x of any rank >= 1."""
    if len(bias.shape) != 1 or len(x.shape) < 1 or x.shape[-1] != bias.shape[0]:
        raise ZynMLError(f"bias_add: bias of shape {tuple(bias.shape)} does not match the "
                         f"last axis of x, of shape {tuple(x.shape)}")
    dim = int(bias.shape[0])
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    flat = _pipeline("bias_add", "bias_add",
                     {"x": reshaped(x, (rows, dim)), "bias": bias}, device)
    return reshaped(flat, tuple(x.shape))


def add_assign(dst: Any, src: Any, *, device: str | None = None):
    """dst += src elementwise, in place (same shape); returns dst."""
    _script("add_assign", {"dst": flat_view(dst, "dst"), "src": reshaped(src, (-1,))},
            device)
    return dst


def convert_into(dst: Any, src: Any, *, device: str | None = None):
    """dst[...] = src converted to dst's dtype, in place (same number of elements);
    returns dst."""
    _script("convert_into", {"dst": flat_view(dst, "dst"), "src": reshaped(src, (-1,))},
            device)
    return dst


def zero_buffer(buf: Any, *, device: str | None = None):
    """Every element of buf set to 0, in place; returns buf."""
    _script("zero_buffer", {"buf": flat_view(buf, "buf")}, device)
    return buf


def adamw_step(param: Any, grad: Any, m: Any, v: Any, *, lr: float, step: int,
               beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
               weight_decay: float = 0.01, grad_scale: Any = None,
               device: str | None = None):
    """One AdamW step (step t counts from 1), in place on param, m and v; returns param.
    Every scalar is a run-time argument: a new step compiles nothing. `grad_scale`: a
    one-element array on param's device that the gradient is multiplied by first
    (gradient clipping's factor, training.clip_scale), read there, not on the host."""
    if int(step) < 1:
        raise ZynMLError(f"adamw_step: step counts from 1, got {step}")
    # the bias corrections in float64 here: 1 - beta2^t in f32 would lose digits at t = 1
    bc1, bc2 = 1.0 - float(beta1) ** int(step), 1.0 - float(beta2) ** int(step)
    arrays = {"param": flat_view(param, "param"), "grad": reshaped(grad, (-1,)),
              "m": flat_view(m, "m"), "v": flat_view(v, "v")}
    betas = {"beta1": float(beta1), "beta2": float(beta2), "eps": float(eps)}
    if grad_scale is None:
        _script("adamw", {**arrays, **betas, "lr": float(lr),
                          "weight_decay": float(weight_decay), "bc1": bc1, "bc2": bc2},
                device)
    else:  # torch.optim.AdamW's folded form: a compute block takes 16 inputs at most
        _script("adamw_clipped",
                {**arrays, **betas, "scale": reshaped(grad_scale, (1,)),
                 "decay": float(lr) * float(weight_decay), "step_size": float(lr) / bc1,
                 "bc2_sqrt": bc2 ** 0.5}, device)
    return param


# ---------------------------------------------------------------- views of buffers

def reshaped(value: Any, shape: tuple[int, ...]) -> Any:
    """`value` (numpy or a C-contiguous GPU array) seen with another shape, no copy."""
    from ..call_values import is_gpu_array
    if not is_gpu_array(value):
        return np.reshape(value, shape)
    from ..runtime.cuda.device_array import DeviceArray, from_cuda_array
    array = value if isinstance(value, DeviceArray) else \
        from_cuda_array(value, _cuda_device(value))
    return array if tuple(shape) == array.shape else array.reshape(shape)


def row_range(value: Any, start: int, stop: int) -> Any:
    """Rows start..stop (along the first axis) of a C-contiguous array, no copy."""
    from ..call_values import is_gpu_array
    if not is_gpu_array(value):
        return value[start:stop]
    from ..runtime.cuda.device_array import DeviceArray
    array = reshaped(value, tuple(value.shape))
    row_bytes = int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize
    return DeviceArray(array.device, array.ptr + start * row_bytes,
                       (stop - start, *array.shape[1:]), array._dtype_name, owner=array)


def flat_view(value: Any, name: str) -> Any:
    """A 1-D view of an array updated in place: a copy would lose the update."""
    if isinstance(value, np.ndarray) and not value.flags.c_contiguous:
        raise ZynMLError(f"'{name}' is updated in place and must be C-contiguous")
    return reshaped(value, (-1,))


def _cuda_device(value: Any):
    from ..devices import parse_device
    from ..runtime.cuda.driver import get_device
    return get_device(parse_device(device_of([value]))[1])
