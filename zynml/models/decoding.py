"""What the decoders share (llama.py's Llama, gpt_decode.py's GPTDecoder): the step's
tokens [batch] and position (a 0-d array) written in place, KV caches zeroed when a
sequence starts, and the step captured once as a graph (zynml.capture) and replayed.

A subclass calls `_setup` and defines `step() -> {name: array of the device}`.
"""
from __future__ import annotations

import numpy as np

from ..device_api import Device
from ..errors import ZynMLError
from ..graphs import capture
from .gpt import assign

__all__ = ["CachedDecoder"]


class CachedDecoder:
    """The state and graph of a decoder of `batch` sequences of `context` positions."""

    def _setup(self, device: str | Device, batch: int, context: int, vocab: int,
               cache: tuple[int, ...], layers: int, dtype=np.float32) -> None:
        """The device, `layers` K and V caches of shape `cache`, the inputs."""
        self.dev = device if isinstance(device, Device) else Device(device)
        self.device = self.dev.name
        self.batch, self.context, self.vocab = batch, context, vocab
        self.k_caches = [self.dev.alloc(cache, dtype) for _ in range(layers)]
        self.v_caches = [self.dev.alloc(cache, dtype) for _ in range(layers)]
        self.tokens = self.dev.upload(np.zeros(batch, np.int64), np.int64)
        self.pos = self.dev.upload(np.array(0), np.int64)
        self.graph = None
        self._outputs: dict[str, tuple[int, str]] = {}

    def step(self) -> dict:
        raise NotImplementedError

    def set_inputs(self, tokens, pos: int) -> None:
        """Write the next step's tokens [batch] and position in place (what a replay
        reads)."""
        tokens = np.asarray(tokens)
        if tokens.shape != (self.batch,) or tokens.dtype.kind not in "iu" or \
                tokens.min() < 0 or tokens.max() >= self.vocab:
            raise ZynMLError(f"tokens must be {self.batch} ids in 0..{self.vocab - 1},"
                             f" got {tokens.dtype}{list(tokens.shape)}")
        if not 0 <= pos < self.context:
            raise ZynMLError(f"position {pos} is outside the context of {self.context}")
        assign(self.tokens, tokens.astype(np.int64))
        assign(self.pos, np.array(pos, np.int64))

    def reset(self) -> None:
        """Zero the KV caches: a new sequence starts (the cache write adds into zeros)."""
        for cache in self.k_caches + self.v_caches:
            self.dev.zero_buffer(cache)

    def capture(self):
        """Record one step as a graph (once). The step runs once before (it compiles and
        loads every kernel, which a CUDA capture must not), and on the CPU again while it
        is recorded: the caches are zeroed afterwards, so capture before a sequence."""
        if self.graph is None:
            self.step()
            with capture(device=self.device) as graph:
                out = self.step()
            self._outputs = {key: _locate(graph, value) for key, value in out.items()}
            self.graph = graph
            self.reset()
        return self.graph

    def _replay_outputs(self) -> dict:
        """One replay of the captured graph: the step's outputs by name."""
        outputs = self.graph.replay()
        return {key: outputs[index][name] for key, (index, name) in self._outputs.items()}


def _locate(graph, value) -> tuple[int, str]:
    """(call index, output name) of a value a captured call returned."""
    for index, outputs in enumerate(graph.outputs):
        for name, output in outputs.items():
            if output is value:
                return index, name
    raise ZynMLError("internal: a step's result is not an output of its graph")
