"""A GPT-2-style transformer trained with ZynML's kernel library (zynml/kernels).

Token + position embedding, pre-LayerNorm blocks (causal multi-head attention, a GELU
MLP of 4x the width), a final LayerNorm and an output head tied to the token embedding.
Every step of the forward and backward passes is a library kernel; this module only
orders them and keeps what the backward pass reads. Parameters are float32 arrays of
the device (numpy on the CPU, DeviceArrays on CUDA), named as GPT-2's checkpoints name
them, with linear weights stored [in, out].
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import kernels as K
from ..errors import ZynMLError
from .flat import copy_into


# Rows of the loss's chunks: 4096 rows of GPT-2's 50304 logits are 0.8 GB of f32, and
# give the chunk's products enough tiles to fill an H100 (1024 rows left the hidden
# states' gradient, 1024 x 768, on 24 of its 132 multiprocessors).
LOSS_CHUNK = 4096


@dataclass(frozen=True)
class GPTConfig:
    layers: int
    hidden: int
    heads: int
    context: int
    vocab: int

    def __post_init__(self):
        if self.hidden % self.heads:
            raise ZynMLError(f"hidden size {self.hidden} is not a multiple of {self.heads} "
                             "heads")


CONFIGS = {
    "toy": GPTConfig(layers=2, hidden=64, heads=4, context=64, vocab=256),
    "small": GPTConfig(layers=6, hidden=384, heads=6, context=256, vocab=4096),
    "gpt2": GPTConfig(layers=12, hidden=768, heads=12, context=1024, vocab=50304),
}


def parameter_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    c = config.hidden
    shapes = {"wte": (config.vocab, c), "wpe": (config.context, c)}
    for layer in range(config.layers):
        p = f"h{layer}."
        shapes.update({p + "ln_1.weight": (c,), p + "ln_1.bias": (c,),
                       p + "attn.c_attn.weight": (c, 3 * c), p + "attn.c_attn.bias": (3 * c,),
                       p + "attn.c_proj.weight": (c, c), p + "attn.c_proj.bias": (c,),
                       p + "ln_2.weight": (c,), p + "ln_2.bias": (c,),
                       p + "mlp.c_fc.weight": (c, 4 * c), p + "mlp.c_fc.bias": (4 * c,),
                       p + "mlp.c_proj.weight": (4 * c, c), p + "mlp.c_proj.bias": (c,)})
    shapes.update({"ln_f.weight": (c,), "ln_f.bias": (c,)})
    return shapes


def init_parameters(config: GPTConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """GPT-2's initialisation: normal(0, 0.02) weights, residual projections scaled by
    1/sqrt(2 * layers), zero biases, unit LayerNorm weights (float32, numpy)."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in parameter_shapes(config).items():
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            value = np.ones(shape)
        elif name.endswith(".bias"):
            value = np.zeros(shape)
        else:
            std = 0.02 / math.sqrt(2 * config.layers) if name.endswith("c_proj.weight") \
                else 0.02
            value = rng.normal(0.0, std, shape)
        params[name] = value.astype(np.float32)
    return params


def on_device(params: dict[str, np.ndarray], device: str) -> dict:
    """The parameters as arrays of `device`: numpy on the CPU, DeviceArrays on CUDA."""
    if not device.startswith("cuda"):
        return params
    from ..runtime.cuda.device_array import DeviceArray
    from ..runtime.cuda.driver import get_device
    ordinal = int(device.partition(":")[2] or 0)
    return {name: DeviceArray.from_numpy(p, get_device(ordinal)) for name, p in params.items()}


def assign(array, values: np.ndarray) -> None:
    """Overwrite a parameter (numpy or DeviceArray) with host values of its shape."""
    if hasattr(array, "copy_from"):
        array.copy_from(values)
    else:
        array[...] = values


def writable(array):
    """`array`, or a copy where it is read-only: on the CPU a result is a read-only view
    of the run time's buffer, and the in-place kernels (`mut`) need to write."""
    if isinstance(array, np.ndarray) and not array.flags.writeable:
        return array.copy()
    return array


def decays(name: str, config: GPTConfig) -> bool:
    """Weight decay applies to matrices and embeddings, not to biases or norms."""
    return len(parameter_shapes(config)[name]) == 2


class GPT:
    """Forward and backward of one batch on `device`: `loss = model.forward(ids,
    targets)` then `grads = model.backward()` (same names as the parameters)."""

    def __init__(self, config: GPTConfig, params: dict, device: str = "cpu"):
        self.config, self.params, self.device = config, params, device
        self._saved: dict | None = None

    # ------------------------------------------------------------------ forward

    def forward(self, ids, targets):
        """The mean cross-entropy of predicting `targets` [batch, seq] from `ids`
        [batch, seq]; keeps the activations the backward pass reads. The loss and its
        gradients come from one chunked kernel that never holds all the logits."""
        ids, targets = self._on_device(ids), self._on_device(targets)
        saved = self._hidden(ids, for_backward=True)
        loss, saved["d_h_final"], saved["d_wte_head"] = K.fused_linear_cross_entropy(
            saved["h_final"], self.params["wte"], targets.reshape(-1),
            chunk_size=LOSS_CHUNK, device=self.device)
        self._saved = saved
        return loss

    def _on_device(self, tokens):
        """Token ids (host memory) on the model's GPU, uploaded once per step: the
        kernels that read them (the embedding, the loss' chunks, the embedding's
        backward in its chunks) then take views of one array, on the per-call fast path,
        instead of an upload each. Unchanged on the CPU, and where the parameters are
        not DeviceArrays."""
        if not self.device.startswith("cuda") or not isinstance(tokens, np.ndarray):
            return tokens
        from ..runtime.cuda.device_array import DeviceArray
        weights = self.params["wte"]
        if not isinstance(weights, DeviceArray):  # compile-only: numpy parameters
            return tokens
        return DeviceArray.from_numpy(np.ascontiguousarray(tokens), weights.device)

    def logits(self, ids):
        """The next-token logits [batch, vocab] (numpy) after each sequence of ids
        [batch, seq]. It recomputes the whole context: sampling without a KV cache."""
        saved = self._hidden(ids)
        batch, seq = ids.shape
        logits = K.head_logits(saved["h_final"], self.params["wte"], device=self.device)
        return np.asarray(logits).reshape(batch, seq, -1)[:, -1]

    def _hidden(self, ids, for_backward: bool = False) -> dict:
        cfg, p, dev = self.config, self.params, self.device
        batch, seq = ids.shape
        if seq > cfg.context:
            raise ZynMLError(f"a sequence of {seq} tokens is longer than the context "
                             f"({cfg.context})")
        saved = {"ids": ids, "batch": batch, "layers": []}
        x = K.embed(p["wte"], p["wpe"], ids, device=dev)
        for layer in range(cfg.layers):
            x, acts = self._block_forward(layer, x, batch, for_backward)
            saved["layers"].append(acts)
        saved["x_final"] = x
        saved["h_final"] = K.layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], device=dev)
        return saved

    def _block_forward(self, layer: int, x, batch: int, for_backward: bool):
        p, dev, heads = self.params, self.device, self.config.heads
        w = lambda name: p[f"h{layer}.{name}"]
        a = {"x": x}
        a["h1"] = K.layer_norm(x, w("ln_1.weight"), w("ln_1.bias"), device=dev)
        qkv = K.linear(a["h1"], w("attn.c_attn.weight"), w("attn.c_attn.bias"), device=dev)
        if for_backward:  # q, k, v read in qkv's rows on a GPU, kept for the backward
            a["attn"], a["attention"] = K.fused_qkv_attention(qkv, batch, heads, device=dev)
        else:
            q, k, v = K.split_heads(qkv, batch, heads, device=dev)
            o = K.flash_attention(q, k, v, causal=True, device=dev)
            a["attn"] = K.merge_heads(o, device=dev)
        y = K.linear(a["attn"], w("attn.c_proj.weight"), w("attn.c_proj.bias"), device=dev)
        a["h2"], a["x2"] = K.residual_layer_norm(y, x, w("ln_2.weight"), w("ln_2.bias"),
                                                 device=dev)
        a["fc"] = K.linear(a["h2"], w("mlp.c_fc.weight"), w("mlp.c_fc.bias"), device=dev)
        a["gelu"] = K.gelu(a["fc"], device=dev)
        return K.linear_residual(a["gelu"], w("mlp.c_proj.weight"), w("mlp.c_proj.bias"),
                                 a["x2"], device=dev), a

    # ------------------------------------------------------------------ backward

    def backward(self, into: dict | None = None, finished=None) -> dict:
        """The gradients of the last forward's loss, by parameter name: new arrays, or,
        with `into` (an array per parameter, such as the views of a flat buffer that
        train.Trainer holds), written into those arrays as each is made (its own array
        goes at once), and `into` returned. `finished(names)`, if given, is called as
        each block's gradients (and the final LayerNorm's, with the last block's) are
        complete: the Trainer starts their all-reduce then. It is called as the next
        block's attention backward is queued (the first block's: before the embeddings'
        backward), so that NCCL's kernels run beside that one, whose blocks the GPU
        places as SMs come free, rather than beside a persistent matmul, whose fixed
        schedule waits for the SMs they hold (two H200s: 1.89-1.91x one GPU, queued
        1.91-1.92x, against 1.87-1.89x / 1.88x with each sum started as its block's
        kernels were queued)."""
        if self._saved is None:
            raise ZynMLError("backward() needs a forward() first")
        s, p, dev = self._saved, self.params, self.device
        grads = _Gradients(into)
        dx, grads["ln_f.weight"], grads["ln_f.bias"] = K.layer_norm_backward(
            s["x_final"], p["ln_f.weight"], s["d_h_final"], device=dev)
        # the block just done, not reported yet; the final LayerNorm's with the last block
        complete, final_norm = [], ["ln_f.weight", "ln_f.bias"]
        for layer in reversed(range(self.config.layers)):
            report = None if finished is None or not complete else \
                (lambda names=complete: finished(names))
            dx = self._block_backward(layer, s["layers"][layer], dx, grads,
                                      before_attention=report)
            complete = final_norm + [n for n in self.params if n.startswith(f"h{layer}.")]
            final_norm = []
        if finished is not None:
            finished(complete)
        seq = s["ids"].shape[1]
        # the tied head's gradient, then the token embedding's scattered into it
        dwte = writable(s["d_wte_head"]) if into is None else \
            copy_into(into["wte"], s["d_wte_head"])
        K.embed_backward_tokens(dwte, s["ids"], dx, device=dev)
        if into is None:
            grads["wte"] = dwte
        grads["wpe"] = K.embed_backward_positions(p["wpe"], dx, s["batch"], seq, device=dev)
        self._saved = None  # the activations go; so does a second backward()
        if into is not None:
            return into
        return {name: writable(g) for name, g in grads.items()}  # the optimizer scales them

    def _block_backward(self, layer: int, a: dict, dout, grads: dict,
                        before_attention=None):
        dev = self.device
        name = lambda n: f"h{layer}.{n}"
        # x3 = x2 + mlp(ln_2(x2)): the residual passes dout to x2 as it is
        dg = self._linear_backward(name("mlp.c_proj"), a["gelu"], dout, grads)
        dfc = K.gelu_backward(a["fc"], dg, device=dev)
        dh2 = self._linear_backward(name("mlp.c_fc"), a["h2"], dfc, grads)
        dx2 = self._layer_norm_backward(name("ln_2"), a["x2"], dh2, dout, grads)
        # x2 = x + proj(attention(ln_1(x)))
        dattn = self._linear_backward(name("attn.c_proj"), a["attn"], dx2, grads)
        if before_attention is not None:
            before_attention()
        dqkv = K.fused_qkv_attention_backward(dattn, a["attention"], device=dev)
        dh1 = self._linear_backward(name("attn.c_attn"), a["h1"], dqkv, grads)
        dx = self._layer_norm_backward(name("ln_1"), a["x"], dh1, dx2, grads)
        return dx

    def _linear_backward(self, layer: str, x, grad, grads: "_Gradients"):
        """d x of the projection `layer` (its x and output gradient given); its weight's
        and bias's gradients go into `grads` (written into their `into` arrays at once)."""
        names = (f"{layer}.weight", f"{layer}.bias")
        dx, grads[names[0]], grads[names[1]] = K.linear_backward(
            x, self.params[names[0]], grad, device=self.device,
            **grads.targets(names, ("dw", "db")))
        return dx

    def _layer_norm_backward(self, layer: str, x, grad, grad_residual, grads: "_Gradients"):
        """d x of the LayerNorm `layer` plus `grad_residual`; its weight's and bias's
        gradients go into `grads` as _linear_backward's do."""
        names = (f"{layer}.weight", f"{layer}.bias")
        dx, grads[names[0]], grads[names[1]] = K.layer_norm_backward(
            x, self.params[names[0]], grad, grad_residual=grad_residual, device=self.device,
            **grads.targets(names, ("dweight", "dbias")))
        return dx


class _Gradients(dict):
    """The gradients backward() makes, by name: kept, or with `into` copied into
    `into[name]` as each is set (the new array is dropped at once)."""

    def __init__(self, into: dict | None):
        super().__init__()
        self._into = into

    def targets(self, names: tuple, keywords: tuple) -> dict:
        """A library backward's arguments `keywords` (its weight's and bias's gradient
        arrays) for the parameters `names`: their `into` arrays, which it writes where
        they are (none without `into`)."""
        return {} if self._into is None else \
            {key: self._into[name] for key, name in zip(keywords, names)}

    def __setitem__(self, name: str, value) -> None:
        if self._into is None:
            super().__setitem__(name, value)
        elif value is not self._into[name]:  # (not written there already)
            copy_into(self._into[name], value)
