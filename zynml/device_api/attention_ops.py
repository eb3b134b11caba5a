"""The device API's attention and loss operations in the specification's packed layout
(q [seq, n_heads * head_dim], k and v [seq, n_kv_heads * head_dim]), on the library's
flash attention (zynml.kernels.attention) and cross-entropy (zynml.kernels.losses).
Mixed into `Device`.

The heads are moved into attention's [1, heads, seq, head_dim] layout and back by
elementwise kernels around each call (zynml.kernels.heads): correct on every device, and a copy
of q, k and v per call, which a model that keeps [batch, heads, seq, head_dim] buffers
avoids by calling zynml.kernels.flash_attention / kv_attention itself.
"""
from __future__ import annotations

from typing import Any

from ..kernels import attention, losses, training
from .checks import check_size, fail


class AttentionOps:
    name: str

    def _heads(self, op: str, q, k, v, seq_len, n_heads, n_kv_heads, head_dim,
               kv_rows: int | None = None, kv_names=("k", "v")):
        """The checked arguments and the head dim of a packed call."""
        qa = self._arg(op, "q", q).rank(2).floating()
        ka = self._arg(op, kv_names[0], k).rank(2).floating().same_dtype(qa)
        va = self._arg(op, kv_names[1], v).rank(2).floating().same_dtype(qa)
        for name, value in (("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise fail(op, name, f"must be a positive integer, not {value!r}")
        if qa.shape[1] % n_heads:
            raise qa.error(f"has rows of {qa.shape[1]}, not a multiple of n_heads {n_heads}")
        if n_heads % n_kv_heads:
            raise fail(op, "n_kv_heads", f"{n_kv_heads} does not divide n_heads {n_heads}")
        d = qa.shape[1] // n_heads
        check_size(op, "head_dim", head_dim, d)
        check_size(op, "seq_len", seq_len, qa.shape[0])
        rows = kv_rows if kv_rows is not None else qa.shape[0]
        if ka.shape != (rows, n_kv_heads * d):
            raise ka.error(f"has shape {ka.shape}, but n_kv_heads {n_kv_heads} of head_dim "
                           f"{d} over {rows} positions make {(rows, n_kv_heads * d)}")
        va.shape_is(ka.shape, kv_names[0])
        return qa, ka, va, d

    def causal_attention(self, q: Any, k: Any, v: Any, seq_len: int | None = None,
                         n_heads: int = 1, n_kv_heads: int | None = None,
                         head_dim: int | None = None) -> Any:
        """Causal self-attention with GQA: [seq, n_heads * head_dim]."""
        n_kv_heads = n_kv_heads or n_heads
        qa, ka, va, _ = self._heads("causal_attention", q, k, v, seq_len, n_heads,
                                    n_kv_heads, head_dim)
        return attention.causal_attention_packed(qa.value, ka.value, va.value, heads=n_heads,
                                                 kv_heads=n_kv_heads, device=self.name)

    def kv_attention(self, q: Any, k_cache: Any, v_cache: Any, cache_start: int,
                     q_len: int | None = None, n_heads: int = 1, n_kv_heads: int | None = None,
                     head_dim: int | None = None) -> Any:
        """q_len new queries over a KV cache of cache_start + q_len (or more) positions:
        query i attends to positions 0..cache_start + i. [q_len, n_heads * head_dim]."""
        op, n_kv_heads = "kv_attention", n_kv_heads or n_heads
        if isinstance(cache_start, bool) or not isinstance(cache_start, int) or cache_start < 0:
            raise fail(op, "cache_start", f"must be a non-negative integer, not {cache_start!r}")
        cache_rows = self._arg(op, "k_cache", k_cache).rank(2).shape[0]
        qa, ka, va, _ = self._heads(op, q, k_cache, v_cache, q_len, n_heads, n_kv_heads,
                                    head_dim, cache_rows, ("k_cache", "v_cache"))
        if cache_rows < cache_start + qa.shape[0]:
            raise ka.error(f"holds {cache_rows} positions, fewer than cache_start + q_len = "
                           f"{cache_start + qa.shape[0]}")
        (q4,) = training.split_heads(qa.value, 1, n_heads, parts=1, device=self.name)
        (k4,) = training.split_heads(ka.value, 1, n_kv_heads, parts=1, device=self.name)
        (v4,) = training.split_heads(va.value, 1, n_kv_heads, parts=1, device=self.name)
        out = attention.kv_attention(q4, k4, v4, cache_start, device=self.name)
        return training.merge_heads(out, device=self.name)

    def causal_attention_backward(self, grad_output: Any, q: Any, k: Any, v: Any,
                                  seq_len: int | None = None, n_heads: int = 1,
                                  n_kv_heads: int | None = None,
                                  head_dim: int | None = None) -> tuple[Any, Any, Any]:
        """(grad_q, grad_k, grad_v) of causal_attention, scores recomputed."""
        op, n_kv_heads = "causal_attention_backward", n_kv_heads or n_heads
        qa, ka, va, _ = self._heads(op, q, k, v, seq_len, n_heads, n_kv_heads, head_dim)
        ga = self._arg(op, "grad_output", grad_output).same_dtype(qa)
        ga.shape_is(qa.shape, "q")
        split = lambda x, h: training.split_heads(x, 1, h, parts=1, device=self.name)[0]
        grads = attention.flash_attention_backward(
            split(ga.value, n_heads), split(qa.value, n_heads), split(ka.value, n_kv_heads),
            split(va.value, n_kv_heads), causal=True, device=self.name)
        return tuple(training.merge_heads(g, device=self.name) for g in grads)

    def cross_entropy_forward_backward(self, logits: Any, targets: Any,
                                       n_positions: int | None = None,
                                       vocab_size: int | None = None,
                                       pad_id: int | None = None) -> tuple[Any, Any]:
        """(loss, grad_logits): the mean cross-entropy over the positions whose target is
        not pad_id, and (softmax - one_hot) / count (zero rows at pad positions). The loss
        is a 0-d array of the device (float(loss) reads it, and waits)."""
        op = "cross_entropy_forward_backward"
        x = self._matrix(op, "logits", logits, n_positions, vocab_size, "n_positions",
                         "vocab_size").floating()
        t = self._arg(op, "targets", targets).rank(1).integer()
        t.dim(0, x.shape[0], "the rows of 'logits'")
        return losses.cross_entropy(x.value, t.value, pad_id=pad_id, device=self.name)
