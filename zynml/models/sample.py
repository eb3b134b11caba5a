"""Sampling from a trained GPT: greedy, or top-k with a temperature."""
from __future__ import annotations

import numpy as np

from .gpt import GPT


def sample(model: GPT, prompt: np.ndarray, new_tokens: int, top_k: int = 0,
           temperature: float = 1.0, seed: int = 0) -> np.ndarray:
    """`prompt` followed by `new_tokens` drawn one at a time (top_k 0: greedy). The context
    is the last `model.config.context` tokens."""
    rng = np.random.default_rng(seed)
    tokens = [int(t) for t in prompt]
    for _ in range(new_tokens):
        context = np.asarray(tokens[-model.config.context:], dtype=np.int32)[None, :]
        logits = np.asarray(model.logits(context), dtype=np.float64)[0]
        tokens.append(_choose(logits, top_k, temperature, rng))
    return np.asarray(tokens, dtype=np.int32)


def _choose(logits: np.ndarray, top_k: int, temperature: float, rng) -> int:
    if top_k <= 0:
        return int(np.argmax(logits))
    top = np.argpartition(-logits, min(top_k, len(logits)) - 1)[:top_k]
    scaled = logits[top] / max(temperature, 1e-6)
    p = np.exp(scaled - scaled.max())
    return int(top[rng.choice(len(top), p=p / p.sum())])
