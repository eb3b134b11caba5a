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
from .decoding import CachedDecoder
from .gpt import GPTConfig, parameter_shapes

__all__ = ["GPTDecoder"]


class GPTDecoder(CachedDecoder):
    """The decode step of a GPT for `batch` sequences on `device`."""

    def __init__(self, config: GPTConfig, params: dict, device: str | Device = "cpu",
                 batch: int = 1):
        if batch < 1:
            raise ZynMLError(f"batch {batch} must be positive")
        self.config = config
        self._setup(device, batch, config.context, config.vocab,
                    (batch, config.heads, config.context, config.hidden // config.heads),
                    config.layers)
        self.params = {name: self.dev.upload(np.asarray(params[name], np.float32))
                       for name in parameter_shapes(config)}

    def step(self) -> dict:
        """{"logits": the next-token logits [batch, vocab] (an array of the device)} at
        `pos` for `tokens`; writes the caches at `pos`."""
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
        return {"logits": K.head_logits(h, p["wte"], device=dev)}

    # set_inputs, reset and capture: decoding.CachedDecoder's

    def replay(self):
        """One step as one graph replay: the logits as `step` gives them."""
        if self.graph is None:
            raise ZynMLError("replay() needs capture() first (it zeroes the caches)")
        return self._replay_outputs()["logits"]

    def logits_of(self, tokens, start: int = 0, use_graph: bool = True) -> list[np.ndarray]:
        """Feed tokens [batch, n] at positions start.. start + n (the caches hold the
        positions before); the logits after each, float32 [batch, vocab] per token."""
        run = self.replay if use_graph else lambda: self.step()["logits"]
        out = []
        for t in range(tokens.shape[1]):
            self.set_inputs(tokens[:, t], start + t)
            out.append(np.asarray(self.dev.download(run()), np.float32))
        return out
