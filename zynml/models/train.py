"""Training a GPT with ZynML: AdamW on every parameter (in place, f32 master weights and
moments), gradient clipping by the global norm, a cosine learning rate with linear
warm-up, gradient accumulation, and checkpoints written atomically.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import kernels as K
from ..errors import ZynMLError
from .gpt import GPT, GPTConfig, assign, decays, on_device


@dataclass(frozen=True)
class Schedule:
    max_lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 10
    steps: int = 100

    def lr(self, step: int) -> float:
        """The learning rate of step `step` (0-based): linear warm-up, then a cosine
        decay from max_lr to min_lr at the last step."""
        if step < self.warmup:
            return self.max_lr * (step + 1) / self.warmup
        span = max(1, self.steps - self.warmup)
        progress = min(1.0, (step - self.warmup) / span)
        return self.min_lr + 0.5 * (self.max_lr - self.min_lr) * (1 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class AdamW:
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    clip: float = 1.0  # the global gradient norm's ceiling; 0: no clipping


class Trainer:
    """One optimizer step per `step(batches)`: `accumulation` micro-batches, their mean
    gradient, clipped, then AdamW. Arrays live on `device` (numpy on the CPU)."""

    def __init__(self, model: GPT, schedule: Schedule, optimizer: AdamW = AdamW(),
                 accumulation: int = 1, all_reduce=None):
        if accumulation < 1:
            raise ZynMLError(f"gradient accumulation takes at least 1 micro-batch, "
                             f"got {accumulation}")
        self.model, self.schedule, self.optimizer = model, schedule, optimizer
        self.accumulation = accumulation
        # data-parallel training: a GradientAllReduce (distributed.py) that averages the
        # gradients and the loss over the processes, so that every one steps alike
        self.all_reduce = all_reduce
        self.step_count = 0
        zeros = lambda p: on_device({"z": np.zeros(p.shape, np.float32)}, model.device)["z"]
        self.moments = {name: (zeros(p), zeros(p)) for name, p in model.params.items()}
        # the step's global sum of squares of the gradients, on the device
        self._sum_squares = on_device({"s": np.zeros(1, np.float32)}, model.device)["s"]

    def step(self, batches) -> float:
        """One optimizer step; returns the mean loss of its micro-batches. Clipping and
        the mean over micro-batches are applied on the device, inside AdamW's kernel: the
        step reads nothing back but the loss."""
        dev, total, grads = self.model.device, 0.0, None
        for _ in range(self.accumulation):
            ids, targets = batches.next()
            total += float(self.model.forward(ids, targets))
            micro = self.model.backward()
            grads = micro if grads is None else {
                name: K.add_assign(grads[name], g, device=dev) for name, g in micro.items()}
        loss = total / self.accumulation
        if self.all_reduce is not None:  # before clipping: the norm is the global batch's
            self.all_reduce.gradients(grads)
            loss = self.all_reduce.mean(loss)
        scale = self._clip_scale(grads)
        lr = self.schedule.lr(self.step_count)
        self.step_count += 1
        opt = self.optimizer
        for name, param in self.model.params.items():
            m, v = self.moments[name]
            K.adamw_step(param.reshape(-1), grads[name].reshape(-1), m.reshape(-1),
                         v.reshape(-1), lr=lr, beta1=opt.beta1, beta2=opt.beta2, eps=opt.eps,
                         weight_decay=opt.weight_decay if decays(name, self.model.config)
                         else 0.0, step=self.step_count, grad_scale=scale, device=dev)
        return loss

    def _clip_scale(self, grads: dict):
        """The factor (a one-element device array) that turns the summed gradients into
        their clipped mean: the global sum of squares is added up on the device."""
        dev = self.model.device
        K.zero_buffer(self._sum_squares, device=dev)
        for g in grads.values():
            K.add_sum_squares(self._sum_squares, g.reshape(-1), device=dev)
        return K.clip_scale(self._sum_squares, 1.0 / self.accumulation,
                            self.optimizer.clip or math.inf, device=dev)

    @property
    def grad_norm(self) -> float:
        """The last step's global gradient norm, before clipping (reading it waits for
        the device)."""
        return math.sqrt(float(np.asarray(self._sum_squares).reshape(-1)[0])) \
            / self.accumulation

    # ------------------------------------------------------------------ checkpoints

    def save(self, path: os.PathLike, batches=None) -> None:
        """Parameters, moments, step and the batch stream's state, to `path` atomically
        (a temporary file in the same folder, then a rename)."""
        path = Path(path)
        arrays = {f"param/{n}": np.asarray(p) for n, p in self.model.params.items()}
        for name, (m, v) in self.moments.items():
            arrays[f"m/{name}"], arrays[f"v/{name}"] = np.asarray(m), np.asarray(v)
        meta = {"step": self.step_count, "config": asdict(self.model.config),
                "batches": batches.state() if batches is not None else None}
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load(self, path: os.PathLike, batches=None) -> None:
        """Restore what `save` wrote: the same next loss as an uninterrupted run."""
        try:
            with np.load(path) as data:
                meta = json.loads(bytes(data["meta"]).decode())
                if GPTConfig(**meta["config"]) != self.model.config:
                    raise ZynMLError(f"checkpoint '{path}' is of another model "
                                     f"({meta['config']})")
                for name, param in self.model.params.items():
                    assign(param, data[f"param/{name}"])
                    m, v = self.moments[name]
                    assign(m, data[f"m/{name}"])
                    assign(v, data[f"v/{name}"])
        except (OSError, KeyError, ValueError) as err:
            raise ZynMLError(f"cannot read checkpoint '{path}': {err}") from None
        self.step_count = meta["step"]
        if batches is not None and meta["batches"] is not None:
            batches.restore(meta["batches"])
