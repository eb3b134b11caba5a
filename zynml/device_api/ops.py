"""The device API's forward operations (compute-device-api.md's "hand-optimized
operations"), each one library kernel of zynml.kernels.basic after its arguments are
checked. Mixed into `Device`, whose `_arg` / `_matrix` check buffers."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import basic
from .checks import check_size, fail


class ForwardOps:
    name: str

    def matmul(self, a: Any, b: Any, m: int | None = None, k: int | None = None,
               n: int | None = None) -> Any:
        """C[m, n] = A[m, k] @ B[k, n], row-major."""
        A = self._matrix("matmul", "a", a, m, k, "m", "k").floating()
        B = self._matrix("matmul", "b", b, k, n, "k", "n").floating().same_dtype(A)
        B.dim(0, A.shape[1], "the columns of 'a'")
        return basic.matmul(A.value, B.value, device=self.name)

    def softmax(self, data: Any, n_rows: int | None = None,
                row_len: int | None = None) -> Any:
        """Softmax of each row of data [n_rows, row_len]."""
        x = self._matrix("softmax", "data", data, n_rows, row_len, "n_rows",
                         "row_len").floating()
        return basic.softmax(x.value, device=self.name)

    def rms_norm(self, data: Any, weight: Any, n_groups: int | None = None,
                 dim: int | None = None, eps: float = 1e-5) -> Any:
        """data * weight / sqrt(mean(data^2) + eps) for each row of data [n_groups, dim]."""
        x = self._matrix("rms_norm", "data", data, n_groups, dim, "n_groups",
                         "dim").floating()
        w = self._arg("rms_norm", "weight", weight).rank(1).floating().same_dtype(x)
        w.dim(0, x.shape[1], "the row length of 'data'")
        return basic.rms_norm(x.value, w.value, _eps("rms_norm", eps), device=self.name)

    def embedding(self, weight: Any, ids: Any, seq_len: int | None = None,
                  dim: int | None = None) -> Any:
        """weight[ids[i]] for each id: [seq_len, dim] from weight [vocab, dim]."""
        w = self._arg("embedding", "weight", weight).rank(2).floating()
        t = self._arg("embedding", "ids", ids).rank(1).integer()
        check_size("embedding", "seq_len", seq_len, t.shape[0])
        check_size("embedding", "dim", dim, w.shape[1])
        return basic.embedding(w.value, t.value, device=self.name)

    def reduce_sum(self, data: Any, axis: int, shape: Any = None) -> Any:
        """The sum of data along `axis`; `shape` (the spec's) views a flat buffer."""
        x = self._arg("reduce_sum", "data", data)
        if shape is not None:
            shape = tuple(int(s) for s in shape)
            if int(np.prod(shape, dtype=np.int64)) != x.size:
                raise x.error(f"has {x.size} elements, but shape {shape} needs "
                              f"{int(np.prod(shape, dtype=np.int64))}")
            value = basic.reshaped(x.value, shape)
        else:
            value, shape = x.value, x.shape
        if x.dtype_name not in ("float16", "bfloat16", "float32", "float64") and \
                x.dtype.kind not in "iu":
            raise x.error(f"must hold numbers, got {x.dtype_name}")
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or \
                not -len(shape) <= axis < len(shape):
            raise fail("reduce_sum", "axis", f"must be an axis of shape {shape}, not {axis!r}")
        return basic.reduce_sum(value, int(axis), device=self.name)

    def transpose_2d(self, buf: Any, rows: int | None = None,
                     cols: int | None = None) -> Any:
        """buf [rows, cols] as [cols, rows]."""
        x = self._matrix("transpose_2d", "buf", buf, rows, cols, "rows", "cols")
        return basic.transpose_2d(x.value, device=self.name)

    def bias_add(self, matrix: Any, bias: Any, numel: int | None = None,
                 dim: int | None = None) -> Any:
        """matrix + bias along matrix's last axis (out[i] = matrix[i] + bias[i % dim])."""
        x = self._arg("bias_add", "matrix", matrix).floating()
        b = self._arg("bias_add", "bias", bias).rank(1).floating().same_dtype(x)
        check_size("bias_add", "numel", numel, x.size)
        check_size("bias_add", "dim", dim, b.shape[0])
        value = x.value
        if len(x.shape) == 1 and x.size != b.shape[0]:  # the spec's flat matrix
            if b.shape[0] == 0 or x.size % b.shape[0]:
                raise x.error(f"has {x.size} elements, not a multiple of the bias's "
                              f"{b.shape[0]}")
            value = basic.reshaped(value, (x.size // b.shape[0], b.shape[0]))
        elif not x.shape or x.shape[-1] != b.shape[0]:
            raise b.error(f"has {b.shape[0]} elements, but the last axis of 'matrix' "
                          f"{x.shape} does not")
        return basic.reshaped(basic.bias_add(value, b.value, device=self.name), x.shape)


def _eps(op: str, eps: Any) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)):
        raise fail(op, "eps", f"must be a number, not {type(eps).__name__}")
    return float(eps)
