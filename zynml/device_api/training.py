"""The device API's training operations: backward passes, the in-place helpers and
AdamW, each a library kernel of zynml.kernels.basic. Mixed into `Device`."""
from __future__ import annotations

from typing import Any

from ..kernels import basic
from .checks import check_size, fail
from .ops import _eps


class TrainingOps:
    name: str

    def softmax_backward(self, softmax_out: Any, grad_output: Any,
                         n_rows: int | None = None, row_len: int | None = None) -> Any:
        """grad_input = y * (dy - sum(y * dy) per row), from softmax's output y."""
        y = self._matrix("softmax_backward", "softmax_out", softmax_out, n_rows, row_len,
                         "n_rows", "row_len").floating()
        dy = self._matrix("softmax_backward", "grad_output", grad_output, n_rows, row_len,
                          "n_rows", "row_len").floating().same_dtype(y)
        dy.shape_is(y.shape, "softmax_out")
        return basic.softmax_backward(y.value, dy.value, device=self.name)

    def rms_norm_backward(self, input: Any, weight: Any, grad_output: Any,
                          n_groups: int | None = None, dim: int | None = None,
                          eps: float = 1e-5) -> tuple[Any, Any]:
        """(grad_input [n_groups, dim], grad_weight [dim]) of rms_norm."""
        op = "rms_norm_backward"
        x = self._matrix(op, "input", input, n_groups, dim, "n_groups", "dim").floating()
        w = self._arg(op, "weight", weight).rank(1).floating().same_dtype(x)
        w.dim(0, x.shape[1], "the row length of 'input'")
        dy = self._matrix(op, "grad_output", grad_output, n_groups, dim, "n_groups",
                          "dim").floating().same_dtype(x)
        dy.shape_is(x.shape, "input")
        return basic.rms_norm_backward(x.value, w.value, dy.value, _eps(op, eps),
                                       device=self.name)

    def embedding_backward(self, grad_output: Any, ids: Any, vocab_size: int,
                           seq_len: int | None = None, dim: int | None = None) -> Any:
        """grad_weight [vocab_size, dim] with grad_weight[ids[i]] += grad_output[i]."""
        op = "embedding_backward"
        g = self._arg(op, "grad_output", grad_output).rank(2).floating()
        t = self._arg(op, "ids", ids).rank(1).integer()
        g.dim(0, t.shape[0], "the number of ids")
        check_size(op, "seq_len", seq_len, t.shape[0])
        check_size(op, "dim", dim, g.shape[1])
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise fail(op, "vocab_size", f"must be a positive integer, not {vocab_size!r}")
        grad_weight = self.alloc((vocab_size, g.shape[1]), g.dtype)
        return basic.embedding_backward(grad_weight, t.value, g.value, device=self.name)

    def add_assign(self, dst: Any, src: Any) -> None:
        """dst += src, in place."""
        d = self._arg("add_assign", "dst", dst)
        s = self._arg("add_assign", "src", src).same_dtype(d)
        s.shape_is(d.shape, "dst")
        self._distinct("add_assign", d, s)
        basic.add_assign(d.value, s.value, device=self.name)

    def zero_buffer(self, buf: Any) -> None:
        """Every element of buf set to 0, in place."""
        self._arg("zero_buffer", "buf", buf)
        basic.zero_buffer(buf, device=self.name)

    def adamw_step(self, param: Any, grad: Any, m: Any, v: Any, lr: float,
                   beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                   weight_decay: float = 0.01, step_t: int = 1) -> None:
        """One AdamW step (step_t counts from 1), in place on param, m and v: decoupled
        weight decay (param -= lr * weight_decay * param) before the bias-corrected Adam
        update. The scalars are run-time arguments: no compile per step."""
        op = "adamw_step"
        p = self._arg(op, "param", param).floating()
        args = [p] + [self._arg(op, name, value).floating().same_dtype(p)
                      for name, value in (("grad", grad), ("m", m), ("v", v))]
        for arg in args[1:]:
            arg.shape_is(p.shape, "param")
        self._distinct(op, *args)
        for name, value in (("lr", lr), ("beta1", beta1), ("beta2", beta2), ("eps", eps),
                            ("weight_decay", weight_decay)):
            _number(op, name, value)
        if isinstance(step_t, bool) or not isinstance(step_t, int) or step_t < 1:
            raise fail(op, "step_t", f"counts steps from 1, not {step_t!r}")
        basic.adamw_step(param, grad, m, v, lr=float(lr), step=step_t, beta1=float(beta1),
                         beta2=float(beta2), eps=float(eps),
                         weight_decay=float(weight_decay), device=self.name)


def _number(op: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) and \
            not hasattr(value, "__float__"):
        raise fail(op, name, f"must be a number, not {type(value).__name__}")
