"""The Llama decoder of zynml/models/llama.py in PyTorch, from the same parameters: the
reference the tests compare ZynML's logits with, and the peer benchmarks/decode.py
times (eager and torch.compile). Also the same weights as a Hugging Face
`LlamaForCausalLM`, where transformers is installed. Imports torch (the optional
`torch` extra); nothing else in ZynML imports this module.

The step has static shapes, as a CUDA graph needs: the caches [batch, kv_heads,
context, head_dim] are written at `pos` (a 0-d tensor) with index_copy_, and attention
reads every position under a mask j <= pos (what Hugging Face's static cache does).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .llama import LlamaConfig, parameter_shapes, rope_tables

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _tensor(array: np.ndarray, dtype: torch.dtype, device: str) -> torch.Tensor:
    return torch.tensor(np.asarray(array, dtype=np.float32), dtype=dtype, device=device)


class TorchLlama(torch.nn.Module):
    def __init__(self, config: LlamaConfig, params: dict[str, np.ndarray], batch: int = 1,
                 context: int | None = None, device: str = "cpu"):
        super().__init__()
        self.config, self.batch = config, batch
        self.context = context or config.context
        dtype = TORCH_DTYPES[config.dtype]
        self.w = {name: _tensor(params[name], dtype, device) for name in parameter_shapes(config)}
        cos, sin = rope_tables(config, self.context)
        self.cos, self.sin = _tensor(cos, dtype, device), _tensor(sin, dtype, device)
        shape = (batch, config.kv_heads, self.context, config.head_dim)
        self.k_caches = [torch.zeros(shape, dtype=dtype, device=device)
                         for _ in range(config.layers)]
        self.v_caches = [torch.zeros(shape, dtype=dtype, device=device)
                         for _ in range(config.layers)]
        self.positions = torch.arange(self.context, device=device)

    def static_tensors(self) -> list[torch.Tensor]:
        """Every tensor the step reads or writes in place: torch.compile's CUDA graphs
        keep their addresses (torch._dynamo.mark_static_address)."""
        return [*self.w.values(), self.cos, self.sin, *self.k_caches, *self.v_caches,
                self.positions]

    def reset(self) -> None:
        for cache in self.k_caches + self.v_caches:
            cache.zero_()

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """Llama's RMSNorm: f32 math, cast back to the model's dtype."""
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.config.eps)
        return y.to(x.dtype) * weight if x.dtype == torch.float32 else \
            (y * weight.float()).to(x.dtype)

    @staticmethod
    def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def step(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Logits [batch, vocab] of one token per sequence at position `pos` (a 0-d
        long tensor); writes the caches there."""
        cfg, w = self.config, self.w
        b, nh, nkv, d = self.batch, cfg.heads, cfg.kv_heads, cfg.head_dim
        cos, sin = self.cos[pos], self.sin[pos]
        seen = (self.positions <= pos).view(1, 1, 1, -1)
        x = w["embed"][tokens]
        for layer in range(cfg.layers):
            p = lambda name: w[f"layers.{layer}.{name}"]
            qkv = self._norm(x, p("attn_norm")) @ p("qkv")
            q, k, v = qkv.split([nh * d, nkv * d, nkv * d], dim=-1)
            q = self._rope(q.view(b, nh, 1, d), cos, sin)
            k = self._rope(k.view(b, nkv, 1, d), cos, sin)
            index = pos.view(1)
            self.k_caches[layer].index_copy_(2, index, k)
            self.v_caches[layer].index_copy_(2, index, v.view(b, nkv, 1, d))
            o = F.scaled_dot_product_attention(q, self.k_caches[layer], self.v_caches[layer],
                                               attn_mask=seen, enable_gqa=nh != nkv)
            x = x + o.reshape(b, nh * d) @ p("o")
            h = self._norm(x, p("mlp_norm"))
            x = x + (F.silu(h @ p("gate")) * (h @ p("up"))) @ p("down")
        return self._norm(x, w["norm"]) @ w["lm_head"]

    def generate(self, prompt: np.ndarray, steps: int, step=None, forced=None):
        """Greedy generation as Llama.generate does: (tokens [batch, steps], the logits
        of each step from the prompt's last token on, f32 numpy). `step`: the function
        to run (self.step, or a compiled one); `forced` [batch, steps]: the tokens fed
        back instead of the greedy ones (the logits of another run's sequence)."""
        step = step or self.step
        device = self.w["embed"].device
        prompt = torch.as_tensor(np.asarray(prompt), dtype=torch.long, device=device)
        self.reset()
        tokens, logits, token = [], [], prompt[:, 0]
        for t in range(prompt.shape[1] + steps - 1):
            token = prompt[:, t] if t < prompt.shape[1] else token
            out = step(token, torch.tensor(t, device=device))
            if t >= prompt.shape[1] - 1:
                token = out.argmax(-1) if forced is None else torch.as_tensor(
                    np.asarray(forced)[:, len(tokens)], dtype=torch.long, device=device)
                tokens.append(token.cpu().numpy())
                logits.append(out.float().cpu().numpy())
        return np.stack(tokens, axis=1), logits


def hugging_face_model(config: LlamaConfig, params: dict[str, np.ndarray]):
    """transformers' LlamaForCausalLM (f32, eager attention) holding the same weights
    (its linear weights are [out, in]: ours transposed)."""
    import transformers
    hf_config = transformers.LlamaConfig(
        vocab_size=config.vocab, hidden_size=config.hidden, intermediate_size=config.ffn,
        num_hidden_layers=config.layers, num_attention_heads=config.heads,
        num_key_value_heads=config.kv_heads, head_dim=config.head_dim,
        max_position_embeddings=config.context, rms_norm_eps=config.eps,
        rope_theta=config.rope_theta, tie_word_embeddings=False, attention_bias=False,
        mlp_bias=False, attn_implementation="eager")
    model = transformers.LlamaForCausalLM(hf_config).eval()
    t = lambda a: torch.tensor(np.asarray(a, dtype=np.float32))
    nq, nkv = config.heads * config.head_dim, config.kv_heads * config.head_dim
    state = {"model.embed_tokens.weight": t(params["embed"]),
             "model.norm.weight": t(params["norm"]), "lm_head.weight": t(params["lm_head"]).T}
    for layer in range(config.layers):
        p, hf = f"layers.{layer}.", f"model.layers.{layer}."
        qkv = t(params[p + "qkv"]).T
        state.update({
            hf + "input_layernorm.weight": t(params[p + "attn_norm"]),
            hf + "post_attention_layernorm.weight": t(params[p + "mlp_norm"]),
            hf + "self_attn.q_proj.weight": qkv[:nq], hf + "self_attn.k_proj.weight":
            qkv[nq:nq + nkv], hf + "self_attn.v_proj.weight": qkv[nq + nkv:],
            hf + "self_attn.o_proj.weight": t(params[p + "o"]).T,
            hf + "mlp.gate_proj.weight": t(params[p + "gate"]).T,
            hf + "mlp.up_proj.weight": t(params[p + "up"]).T,
            hf + "mlp.down_proj.weight": t(params[p + "down"]).T})
    model.load_state_dict({k: v.contiguous() for k, v in state.items()}, strict=False)
    return model
