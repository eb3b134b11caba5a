"""A Llama-style decoder for generation, written with the device API (zynml.Device) and
the kernel library (zynml/kernels), one decode step replayed as a graph.

The model: a token embedding, pre-RMSNorm blocks of grouped-query attention (rotary
embeddings in the rotate_half form, a KV cache) and a SwiGLU MLP, a final RMSNorm and
an untied output head; no biases. Weights are stored [in, out] (q, k and v fused into
one [hidden, (heads + 2 * kv_heads) * head_dim] matrix; on the device gate's and up's
side by side, [hidden, 2 * ffn]) in the config's dtype, random from a seed.
zynml/models/llama_torch.py is the same model in PyTorch.

A decode step (`Llama.step`) takes one token per sequence (`tokens`, [batch]) at one
position (`pos`, a 0-d array) and gives the logits [batch, vocab] and the greedy next
token; it writes its keys and values into the caches at `pos`. Both `tokens` and `pos`
are arrays of the device that the step's kernels read, so `generate` captures the step
once (zynml.capture) and then, for every token, writes the new token and position into
them in place and replays the graph: one graph launch per token on CUDA, the same calls
in order elsewhere. The prompt goes in token by token through the same graph.

The KV cache write puts k and v at the step's position in place (zynml/kernels/decode.py,
a write at a run-time position); `reset()` zeroes the caches before each sequence.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import kernels as K
from ..device_api import Device
from ..errors import ZynMLError
from .decoding import CachedDecoder
from .flat import numpy_dtype

__all__ = ["LlamaConfig", "CONFIGS", "Llama", "Generation", "parameter_shapes",
           "init_parameters", "rope_tables"]

DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class LlamaConfig:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    context: int
    dtype: str = "float32"
    rope_theta: float = 10000.0
    eps: float = 1e-5

    def __post_init__(self):
        if self.heads % self.kv_heads:
            raise ZynMLError(f"{self.heads} query heads are not a multiple of "
                             f"{self.kv_heads} KV heads")
        if self.head_dim % 2:
            raise ZynMLError(f"the head dim {self.head_dim} must be even (RoPE)")
        if self.dtype not in DTYPES:
            raise ZynMLError(f"dtype '{self.dtype}' is not one of {', '.join(DTYPES)}")

    @property
    def qkv_width(self) -> int:
        return (self.heads + 2 * self.kv_heads) * self.head_dim

    def with_dtype(self, dtype: str) -> "LlamaConfig":
        from dataclasses import replace
        return replace(self, dtype=dtype)


CONFIGS = {
    # odd sizes for the tests: a prime vocabulary, 4 query heads per KV head (IREE
    # 3.13 fails to tile GQA of 3 heads per KV head at batch 3), head dim 6
    "tiny": LlamaConfig(layers=2, hidden=40, heads=8, kv_heads=2, head_dim=6, ffn=56,
                        vocab=67, context=32),
    # issue 20's model (Llama 3.2 1B's shape with a 32000 vocabulary): about 1.1 B
    # parameters, 2.2 GB of bf16 weights
    "1b": LlamaConfig(layers=16, hidden=2048, heads=32, kv_heads=8, head_dim=64,
                      ffn=8192, vocab=32000, context=4096, dtype="bfloat16",
                      rope_theta=500000.0),
}


def parameter_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    c = config
    shapes: dict[str, tuple[int, ...]] = {"embed": (c.vocab, c.hidden)}
    for layer in range(c.layers):
        p = f"layers.{layer}."
        shapes.update({p + "attn_norm": (c.hidden,), p + "qkv": (c.hidden, c.qkv_width),
                       p + "o": (c.heads * c.head_dim, c.hidden),
                       p + "mlp_norm": (c.hidden,), p + "gate": (c.hidden, c.ffn),
                       p + "up": (c.hidden, c.ffn), p + "down": (c.ffn, c.hidden)})
    shapes.update({"norm": (c.hidden,), "lm_head": (c.hidden, c.vocab)})
    return shapes


def init_parameters(config: LlamaConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights: normal(0, 0.02) matrices and embedding, norm weights near 1
    (1 + normal(0, 0.1), so that they matter), in the config's dtype (numpy)."""
    rng = np.random.default_rng(seed)
    dtype = numpy_dtype(config.dtype)
    params = {}
    for name, shape in parameter_shapes(config).items():
        if len(shape) == 1:
            value = 1.0 + 0.1 * rng.standard_normal(shape, np.float32)
        else:
            value = 0.02 * rng.standard_normal(shape, np.float32)
        params[name] = value.astype(dtype)
    return params


def _step_parameters(config: LlamaConfig, params: dict):
    """(name, array) of the parameters as the step reads them: each layer's gate and up
    side by side as one [hidden, 2 * ffn] matrix `gate_up`, so the MLP's two projections
    are one matrix-vector product (one kernel reading both weights), the others as they
    are. A generator: one joined matrix at a time exists on the host."""
    for name in parameter_shapes(config):
        layer, _, field = name.rpartition(".")
        if field == "gate":
            yield f"{layer}.gate_up", np.concatenate([params[name], params[f"{layer}.up"]],
                                                     axis=1)
        elif field != "up":
            yield name, params[name]


def rope_tables(config: LlamaConfig, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [positions, head_dim] of rotate_half RoPE, each pair's angle in columns
    e and e + head_dim / 2 (Hugging Face's tables), computed in f64."""
    d = config.head_dim
    inv_freq = 1.0 / config.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.outer(np.arange(positions, dtype=np.float64), inv_freq)
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles), np.sin(angles)


@dataclass
class Generation:
    """What `generate` gives: the greedy tokens [batch, steps] after the prompt, and the
    logits [batch, vocab] of every step from the prompt's last token on (f32 numpy)."""
    tokens: np.ndarray
    logits: list[np.ndarray]


class Llama(CachedDecoder):
    """The decoder on `device` for `batch` sequences of up to `context` positions (the
    config's by default): its weights, KV caches, RoPE tables and the step's inputs."""

    def __init__(self, config: LlamaConfig, params: dict[str, np.ndarray],
                 device: str | Device = "cpu", batch: int = 1, context: int | None = None):
        context = context or config.context
        if batch < 1 or context < 1:
            raise ZynMLError(f"batch {batch} and context {context} must be positive")
        self.config = config
        dtype = numpy_dtype(config.dtype)
        missing = set(parameter_shapes(config)) - set(params)
        if missing:
            raise ZynMLError(f"parameters missing: {', '.join(sorted(missing))}")
        self._setup(device, batch, context, config.vocab,
                    (batch, config.kv_heads, context, config.head_dim), config.layers, dtype)
        self.params = {name: self.dev.upload(value, dtype)
                       for name, value in _step_parameters(config, params)}
        cos, sin = rope_tables(config, context)
        self.cos, self.sin = self.dev.upload(cos, dtype), self.dev.upload(sin, dtype)
        # bf16: RMSNorm computes in f32 and is written into this bf16 buffer
        self._normed = None if config.dtype == "float32" else \
            self.dev.alloc((batch, config.hidden), dtype)
        # the residual stream: the projections add into it in place (matmul_accumulate),
        # so it is a buffer of the model's own (the CPU's results are read-only arrays)
        self._residual = self.dev.alloc((batch, config.hidden), dtype)

    # ------------------------------------------------------------------ the step

    def step(self) -> dict:
        """One decode step at `pos` for `tokens`: {"logits": [batch, vocab], "next": i64
        [batch]} (arrays of the device); writes the caches at `pos`."""
        cfg, p, dev = self.config, self.params, self.dev
        x = K.convert_into(self._residual, dev.embedding(p["embed"], self.tokens))
        for layer in range(cfg.layers):
            w = lambda name: p[f"layers.{layer}.{name}"]
            qkv = dev.matmul(self._norm(x, w("attn_norm")), w("qkv"))
            q = K.rope_kv_cache(qkv, self.cos, self.sin, self.pos, self.k_caches[layer],
                                self.v_caches[layer], heads=cfg.heads)
            o = K.kv_attention(q, self.k_caches[layer], self.v_caches[layer], self.pos)
            # the residual adds into x in the products' kernels
            K.matmul_accumulate(x, K.merge_heads(o), w("o"))
            h = self._norm(x, w("mlp_norm"))
            act = K.swiglu_packed(dev.matmul(h, w("gate_up")))
            K.matmul_accumulate(x, act, w("down"))
        logits = dev.matmul(self._norm(x, p["norm"]), p["lm_head"])
        return {"logits": logits, "next": K.argmax_rows(logits)}

    def _norm(self, x, weight):
        if self._normed is None:
            return self.dev.rms_norm(x, weight, eps=self.config.eps)
        return K.rms_norm_into(self._normed, x, weight, self.config.eps)

    # set_inputs, reset and capture: decoding.CachedDecoder's

    def replay(self) -> dict:
        """One step as one graph replay: {"logits", "next"} as `step` gives them (the
        first captures the step, zeroing the caches)."""
        self.capture()
        return self._replay_outputs()

    # ------------------------------------------------------------------ generating

    def generate(self, prompt, steps: int, use_graph: bool = True) -> Generation:
        """Greedy generation: the prompt [batch, n] token by token, then `steps` tokens,
        each step a graph replay (`use_graph`) or the step's calls one by one."""
        prompt = np.asarray(prompt)
        if prompt.ndim != 2 or prompt.shape[0] != self.batch or prompt.shape[1] < 1:
            raise ZynMLError(f"the prompt must be [batch {self.batch}, tokens >= 1], got "
                             f"shape {list(prompt.shape)}")
        if steps < 1 or prompt.shape[1] + steps - 1 > self.context:
            raise ZynMLError(f"{prompt.shape[1]} prompt tokens and {steps} new ones do not "
                             f"fit the context of {self.context} (steps >= 1)")
        run = self.replay if use_graph else self.step
        if use_graph:
            self.set_inputs(prompt[:, 0], 0)
            self.capture()
        self.reset()
        tokens, logits, token = [], [], prompt[:, 0]
        for t in range(prompt.shape[1] + steps - 1):
            token = prompt[:, t] if t < prompt.shape[1] else token
            self.set_inputs(token, t)
            out = run()
            if t >= prompt.shape[1] - 1:
                token = self.dev.download(out["next"])
                tokens.append(token)
                logits.append(self.dev.download(out["logits"]).astype(np.float32))
        return Generation(np.stack(tokens, axis=1), logits)

    def bytes_per_step(self, positions: int) -> int:
        """What a step must read at least: every weight but the embedding (one row per
        token) and the caches' keys and values of `positions` positions."""
        cfg = self.config
        size = np.dtype(numpy_dtype(cfg.dtype)).itemsize
        weights = sum(math.prod(s) for n, s in parameter_shapes(cfg).items() if n != "embed")
        kv = 2 * cfg.layers * self.batch * cfg.kv_heads * positions * cfg.head_dim
        return (weights + kv + self.batch * cfg.hidden) * size

