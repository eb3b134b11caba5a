"""Sampling from a trained GPT, greedy or top-k with a temperature, one decode step per
token (zynml/models/gpt_decode.py: KV caches, the step replayed as one graph)."""
from __future__ import annotations

import numpy as np

from ..errors import ZynMLError
from .gpt import GPT
from .gpt_decode import GPTDecoder

__all__ = ["sample"]


def sample(model: GPT, prompt: np.ndarray, new_tokens: int, top_k: int = 0,
           temperature: float = 1.0, seed: int = 0, use_graph: bool = True) -> np.ndarray:
    """`prompt` followed by `new_tokens` drawn one at a time (top_k 0: greedy), each a
    decode step (a graph replay with `use_graph`). When the context is full, the caches
    start again from the last half of it."""
    prompt = np.asarray(prompt)
    if prompt.ndim != 1 or prompt.size < 1:
        raise ZynMLError(f"the prompt must be a 1-d array of at least one token, got shape "
                         f"{list(prompt.shape)}")
    context = model.config.context
    decoder = GPTDecoder(model.config, model.params, model.device)
    if use_graph:
        decoder.capture()
    rng = np.random.default_rng(seed)
    tokens = [int(t) for t in prompt[-context:]]
    decoder.reset()
    logits = decoder.logits_of(np.asarray([tokens]), 0, use_graph)[-1]
    cached = len(tokens)
    for _ in range(new_tokens):
        tokens.append(_choose(logits[0].astype(np.float64), top_k, temperature, rng))
        if cached == context:  # full: keep the last half (GPT-2's positions are learned)
            keep = tokens[-(context // 2 + 1):]
            decoder.reset()
            logits = decoder.logits_of(np.asarray([keep]), 0, use_graph)[-1]
            cached = len(keep)
        else:
            logits = decoder.logits_of(np.asarray([tokens[-1:]]), cached, use_graph)[-1]
            cached += 1
    return np.asarray([int(t) for t in prompt[:-context]] + tokens, dtype=np.int32)


def _choose(logits: np.ndarray, top_k: int, temperature: float, rng) -> int:
    if top_k <= 0:
        return int(np.argmax(logits))
    top = np.argpartition(-logits, min(top_k, len(logits)) - 1)[:top_k]
    scaled = logits[top] / max(temperature, 1e-6)
    p = np.exp(scaled - scaled.max())
    return int(top[rng.choice(len(top), p=p / p.sum())])
