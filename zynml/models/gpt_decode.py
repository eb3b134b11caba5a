"""Generating from a GPT (zynml/models/gpt.py) one token per step, with KV caches and
the step replayed as one graph (zynml.capture; a CUDA graph on a GPU).

A step reads the tokens [batch] and the position (a 0-d array) in place, so a replay
serves every position: the input rows (decode_embedding), per block LayerNorm, the
fused q/k/v projection, the cache write (kv_cache_write), attention over the cache
(kv_attention), the output projection, LayerNorm and the GELU MLP with their residual
adds, then the final LayerNorm and the tied head: the next-token logits [batch, vocab].
The weights are the model's at construction (float32 copies on the decoder's device).

GPT-2's positions are learned, so a sequence fits the context: zynml/models/sample.py
slides a window (it starts again from the last half of the context when the caches are
full).
"""
from __future__ import annotations

import numpy as np

from .. import kernels as K
from ..device_api import Device
from ..errors import ZynMLError
from ..graphs import capture
from .gpt import GPTConfig, assign, parameter_shapes

__all__ = ["GPTDecoder"]


class GPTDecoder:
    """The decode step of a GPT for `batch` sequences on `device`."""

    def __init__(self, config: GPTConfig, params: dict, device: str | Device = "cpu",
                 batch: int = 1):
        if batch < 1:
            raise ZynMLError(f"batch {batch} must be positive")
        self.config, self.batch = config, batch
        self.dev = device if isinstance(device, Device) else Device(device)
        self.params = {name: self.dev.upload(np.asarray(params[name], np.float32))
                       for name in parameter_shapes(config)}
        cache = (batch, config.heads, config.context, config.hidden // config.heads)
        self.k_caches = [self.dev.alloc(cache) for _ in range(config.layers)]
        self.v_caches = [self.dev.alloc(cache) for _ in range(config.layers)]
        self.tokens = self.dev.upload(np.zeros(batch, np.int64), np.int64)
        self.pos = self.dev.upload(np.array(0), np.int64)
        self.graph = None
        self._logits: tuple[int, str] | None = None

    def step(self):
        """The next-token logits [batch, vocab] (an array of the device) at `pos` for
        `tokens`; writes the caches at `pos`."""
        cfg, p, dev = self.config, self.params, self.dev.name
        x = K.decode_embedding(p["wte"], p["wpe"], self.tokens, self.pos, device=dev)
        for layer in range(cfg.layers):
            w = lambda name: p[f"h{layer}.{name}"]
            h = K.layer_norm(x, w("ln_1.weight"), w("ln_1.bias"), device=dev)
            qkv = K.linear(h, w("attn.c_attn.weight"), w("attn.c_attn.bias"), device=dev)
            q = K.kv_cache_write(qkv, self.pos, self.k_caches[layer], self.v_caches[layer],
                                 device=dev)
            o = K.kv_attention(q, self.k_caches[layer], self.v_caches[layer], self.pos,
                               device=dev)
            y = K.linear(K.merge_heads(o, device=dev), w("attn.c_proj.weight"),
                         w("attn.c_proj.bias"), device=dev)
            x = K.residual_add(x, y, device=dev)
            h = K.layer_norm(x, w("ln_2.weight"), w("ln_2.bias"), device=dev)
            fc = K.gelu(K.linear(h, w("mlp.c_fc.weight"), w("mlp.c_fc.bias"), device=dev),
                        device=dev)
            m = K.linear(fc, w("mlp.c_proj.weight"), w("mlp.c_proj.bias"), device=dev)
            x = K.residual_add(x, m, device=dev)
        h = K.layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], device=dev)
        return K.head_logits(h, p["wte"], device=dev)

    def set_inputs(self, tokens, pos: int) -> None:
        """Write the next step's tokens [batch] and position in place."""
        tokens = np.asarray(tokens)
        if tokens.shape != (self.batch,) or tokens.dtype.kind not in "iu" or \
                tokens.min() < 0 or tokens.max() >= self.config.vocab:
            raise ZynMLError(f"tokens must be {self.batch} ids in 0..{self.config.vocab - 1},"
                             f" got {tokens.dtype}{list(tokens.shape)}")
        if not 0 <= pos < self.config.context:
            raise ZynMLError(f"position {pos} is outside the context of {self.config.context}")
        assign(self.tokens, tokens.astype(np.int64))
        assign(self.pos, np.array(pos, np.int64))

    def reset(self) -> None:
        """Zero the caches: a new sequence starts (the cache write adds into zeros)."""
        for cache in self.k_caches + self.v_caches:
            self.dev.zero_buffer(cache)

    def capture(self):
        """Record one step as a graph (once). The step runs once before (it compiles and
        loads every kernel, which a CUDA capture must not), and on the CPU again while it
        is recorded: the caches are zeroed afterwards, so capture before a sequence."""
        if self.graph is None:
            self.step()
            with capture(device=self.dev.name) as graph:
                logits = self.step()
            self._logits = next((i, name) for i, outputs in enumerate(graph.outputs)
                                for name, value in outputs.items() if value is logits)
            self.graph = graph
            self.reset()
        return self.graph

    def replay(self):
        """One step as one graph replay: the logits as `step` gives them."""
        if self.graph is None:
            raise ZynMLError("replay() needs capture() first (it zeroes the caches)")
        index, name = self._logits
        return self.graph.replay()[index][name]

    def logits_of(self, tokens, start: int = 0, use_graph: bool = True) -> list[np.ndarray]:
        """Feed tokens [batch, n] at positions start.. start + n (the caches hold the
        positions before); the logits after each, float32 [batch, vocab] per token."""
        run = self.replay if use_graph else self.step
        out = []
        for t in range(tokens.shape[1]):
            self.set_inputs(tokens[:, t], start + t)
            out.append(np.asarray(self.dev.download(run()), np.float32))
        return out
