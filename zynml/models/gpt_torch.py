"""The same GPT in PyTorch, from the same parameters: the reference the tests compare
ZynML's losses and gradients with, and the peer benchmarks/train_gpt.py times. Imports
torch (the optional `torch` extra); nothing else in ZynML imports this module."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .gpt import GPTConfig, decays


class TorchGPT(torch.nn.Module):
    def __init__(self, config: GPTConfig, params: dict[str, np.ndarray],
                 device: str = "cpu", dtype: torch.dtype = torch.float32):
        super().__init__()
        self.config = config
        self.names = list(params)
        self.weights = torch.nn.ParameterList(
            torch.nn.Parameter(torch.tensor(params[n], dtype=torch.float32, device=device))
            for n in self.names)
        self.compute_dtype = dtype

    def param(self, name: str) -> torch.Tensor:
        return self.weights[self.names.index(name)].to(self.compute_dtype)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.logits(ids)
        return F.cross_entropy(logits.float().reshape(-1, self.config.vocab),
                               targets.reshape(-1))

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        """The next-token logits [batch, seq, vocab] after each position of ids."""
        cfg, p = self.config, self.param
        batch, seq = ids.shape
        x = p("wte")[ids] + p("wpe")[:seq]
        for layer in range(cfg.layers):
            w = lambda n: p(f"h{layer}.{n}")
            h = F.layer_norm(x, (cfg.hidden,), w("ln_1.weight"), w("ln_1.bias"), 1e-5)
            q, k, v = (h @ w("attn.c_attn.weight") + w("attn.c_attn.bias")).split(cfg.hidden, -1)
            heads = lambda t: t.view(batch, seq, cfg.heads, -1).transpose(1, 2)
            o = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
            o = o.transpose(1, 2).reshape(batch, seq, cfg.hidden)
            x = x + o @ w("attn.c_proj.weight") + w("attn.c_proj.bias")
            h = F.layer_norm(x, (cfg.hidden,), w("ln_2.weight"), w("ln_2.bias"), 1e-5)
            h = F.gelu(h @ w("mlp.c_fc.weight") + w("mlp.c_fc.bias"), approximate="tanh")
            x = x + h @ w("mlp.c_proj.weight") + w("mlp.c_proj.bias")
        h = F.layer_norm(x, (cfg.hidden,), p("ln_f.weight"), p("ln_f.bias"), 1e-5)
        return h @ p("wte").T

    def optimizer(self, lr: float, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                  fused: bool = False) -> torch.optim.AdamW:
        decay = [w for n, w in zip(self.names, self.weights) if decays(n, self.config)]
        other = [w for n, w in zip(self.names, self.weights) if not decays(n, self.config)]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": other, "weight_decay": 0.0}],
                                 lr=lr, betas=betas, eps=eps, fused=fused or None)

    def gradients(self) -> dict[str, np.ndarray]:
        return {n: w.grad.detach().cpu().double().numpy()
                for n, w in zip(self.names, self.weights)}


def reference_losses(config: GPTConfig, params: dict[str, np.ndarray], schedule, batches,
                     steps: int, dtype: torch.dtype = torch.float32, device: str = "cpu",
                     clip: float = 1.0) -> list[float]:
    """The losses of `steps` optimizer steps of this model from `params`, as the Trainer
    takes them: `schedule`'s learning rate, clip_grad_norm_, AdamW; `batches` gives
    (ids, targets) numpy pairs (zynml.models.data.Batches)."""
    model = TorchGPT(config, params, device=device, dtype=dtype)
    opt = model.optimizer(lr=schedule.lr(0))
    losses = []
    for step in range(steps):
        ids, targets = (torch.tensor(a, dtype=torch.long, device=device)
                        for a in batches.next())
        for group in opt.param_groups:
            group["lr"] = schedule.lr(step)
        opt.zero_grad()
        loss = model(ids, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
    return losses
