"""Training a GPT with ZynML: AdamW on every parameter (in place, f32 master weights and
moments, all in flat buffers), gradient clipping by the global norm, a cosine learning rate with linear
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
from .flat import FlatLayout, element_range, on_gpu_of, zeros_like
from .gpt import GPT, GPTConfig, assign, decays


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


# What the model computes with: "f32" end to end, or "bf16" mixed precision (bf16
# weights and activations, f32 sums inside the kernels, f32 gradients, master weights
# and moments; llm.c's and PyTorch autocast's split).
PRECISIONS = ("f32", "bf16")


class Trainer:
    """One optimizer step per `step(batches)`: `accumulation` micro-batches, their mean
    gradient, clipped, then AdamW. Arrays live on the model's device (numpy on the CPU).
    With `precision="bf16"` the model computes with a bf16 copy of the f32 master
    weights (`master`), refreshed by one conversion call after each step.

    The parameters, their gradients and AdamW's two moments each live in one flat buffer
    (flat.py; the model's parameters become views of it): the clip's global sum of
    squares is one call over the flat gradient, AdamW one call per weight-decay group,
    and a data-parallel all-reduce one collective per block, each started as the
    backward pass finishes the block (with `overlap=False` or several micro-batches,
    one after the pass). backward() writes each gradient into its view (a
    device-to-device copy, no library call)."""

    def __init__(self, model: GPT, schedule: Schedule, optimizer: AdamW = AdamW(),
                 accumulation: int = 1, all_reduce=None, precision: str = "f32",
                 overlap: bool = True):
        if accumulation < 1:
            raise ZynMLError(f"gradient accumulation takes at least 1 micro-batch, "
                             f"got {accumulation}")
        if precision not in PRECISIONS:
            raise ZynMLError(f"precision '{precision}' is not one of {', '.join(PRECISIONS)}")
        self.model, self.schedule, self.optimizer = model, schedule, optimizer
        self.accumulation = accumulation
        # data-parallel training: a GradientAllReduce (distributed.py) that sums the
        # gradients and the losses over the processes, so that every one steps alike
        self.all_reduce = all_reduce
        # True (with one micro-batch): start each block's sum during the backward pass
        # (GPT.backward says when); on two H200s 1.89-1.91x one GPU against 1.87-1.89x
        # with one sum after the pass (docs/performance.md, Session 39; Session 17's
        # placement, beside the persistent matmuls, made H100s slower)
        self.overlap = overlap
        self.step_count = 0
        params = model.params
        self.layout = layout = FlatLayout(
            {name: tuple(p.shape) for name, p in params.items()},
            {name: decays(name, model.config) for name in params})
        like = next(iter(params.values()))
        host = layout.pack(params)
        self._params = host if isinstance(like, np.ndarray) else on_gpu_of(host, like)
        self.master = layout.views(self._params)  # f32 master weights, by name
        self._compute = None  # bf16: the weights the model reads, refreshed each step
        if precision == "bf16":
            self._compute = zeros_like(layout.size, self._params, "bfloat16")
            self._refresh_compute_weights()
        params.update(self.master if self._compute is None else
                      layout.views(self._compute))  # the old arrays go
        self._grads, m, v = (zeros_like(layout.size, like) for _ in range(3))
        self._micro = None  # a second flat gradient, for micro-batches after the first
        # the last step's gradients (summed over micro-batches and processes), by name
        self.gradients = layout.views(self._grads)
        m_views, v_views = layout.views(m), layout.views(v)
        self.moments = {name: (m_views[name], v_views[name]) for name in params}
        # (weight decay?, parameters, gradients, m, v) of each group, as flat views
        self._groups = [(decay, *(layout.group(flat, decay) for flat in
                                  (self._params, self._grads, m, v)))
                        for decay in layout.groups]
        self._sum_squares = None  # the last step's, on the device
        self._unreduced: set[str] = set()  # gradients whose all-reduce is not started
        self._grad_scale = 1.0  # what turns the summed gradients into their mean

    def step(self, batches) -> float:
        """One optimizer step; returns the mean loss of its micro-batches, read back
        (which waits for the step's work): `queue_step`, then float()."""
        return float(self.queue_step(batches))

    def queue_step(self, batches) -> "QueuedLoss":
        """One optimizer step, queued on the device; returns its mean loss unread.
        Clipping and the mean over micro-batches (and processes) are applied on the
        device, inside AdamW's kernel, and the losses are summed over the processes
        there too: the host never waits for the device within a step, so it can queue
        ahead of it (the loop of examples/train_gpt.py reads a step's loss after
        queuing the next)."""
        dev = self.model.device
        # with `overlap` and one micro-batch, each block's gradients are summed over the
        # processes while the backward pass goes on (else all at once after it)
        overlap = self.overlap and self.all_reduce is not None and self.accumulation == 1
        self._unreduced = set(self.gradients)
        losses = []
        for micro in range(self.accumulation):
            ids, targets = batches.next()
            losses.append(self.model.forward(ids, targets))
            if micro == 0:
                self.model.backward(into=self.gradients,
                                    finished=self._start_sums if overlap else None)
            else:
                self.model.backward(into=self._micro_gradients())
                K.add_assign(self._grads, self._micro, device=dev)
        self._grad_scale = 1.0 / self.accumulation
        if self.all_reduce is not None:  # before clipping: the norm is the global batch's
            self._start_sums(self._unreduced)  # all, or what the backward pass left
            losses = [self.all_reduce.start_loss(loss) for loss in losses]
            self.all_reduce.finish()
            self._grad_scale /= self.all_reduce.world.size
        queued = QueuedLoss(losses, 1.0 / self._grad_scale)
        scale = self._clip_scale()
        lr = self.schedule.lr(self.step_count)
        self.step_count += 1
        opt = self.optimizer
        for decay, param, grad, m, v in self._groups:
            K.adamw_step(param, grad, m, v, lr=lr, beta1=opt.beta1, beta2=opt.beta2,
                         eps=opt.eps, weight_decay=opt.weight_decay if decay else 0.0,
                         step=self.step_count, grad_scale=scale, device=dev)
        self._refresh_compute_weights()
        return queued

    def _start_sums(self, names) -> None:
        """Start the all-reduce of the gradients `names` (those not started yet), in
        the fewest ranges of the flat gradient they fill."""
        names = [name for name in names if name in self._unreduced]
        self._unreduced.difference_update(names)
        for start, stop in self.layout.ranges(names):
            self.all_reduce.start(element_range(self._grads, start, stop))

    def _refresh_compute_weights(self) -> None:
        if self._compute is not None:
            K.convert_into(self._compute, self._params, device=self.model.device)

    def _micro_gradients(self) -> dict:
        if self._micro is None:
            self._micro = zeros_like(self.layout.size, self._grads)
            self._micro_views = self.layout.views(self._micro)
        return self._micro_views

    def _clip_scale(self):
        """The factor (a one-element device array) that turns the summed gradients into
        their clipped mean: the global sum of squares, one call over the flat gradient."""
        dev = self.model.device
        # a 0-d result seen as [1] (numpy and DeviceArray reshape alike), clip_scale's input
        self._sum_squares = K.sum_squares(self._grads, device=dev).reshape(1)
        return K.clip_scale(self._sum_squares, self._grad_scale,
                            self.optimizer.clip or math.inf, device=dev)

    @property
    def grad_norm(self) -> float:
        """The last step's global gradient norm, before clipping (reading it waits for
        the device)."""
        if self._sum_squares is None:
            raise ZynMLError("grad_norm is the last step's: take a step() first")
        return math.sqrt(float(np.asarray(self._sum_squares).reshape(-1)[0])) \
            * self._grad_scale

    # ------------------------------------------------------------------ checkpoints

    def save(self, path: os.PathLike, batches=None) -> None:
        """Parameters, moments, step and the batch stream's state, to `path` atomically
        (a temporary file in the same folder, then a rename)."""
        path = Path(path)
        arrays = {f"param/{n}": np.asarray(p) for n, p in self.master.items()}
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
                for name, param in self.master.items():
                    assign(param, data[f"param/{name}"])
                    m, v = self.moments[name]
                    assign(m, data[f"m/{name}"])
                    assign(v, data[f"v/{name}"])
        except (OSError, KeyError, ValueError) as err:
            raise ZynMLError(f"cannot read checkpoint '{path}': {err}") from None
        self._refresh_compute_weights()
        self.step_count = meta["step"]
        if batches is not None and meta["batches"] is not None:
            batches.restore(meta["batches"])


class QueuedLoss:
    """A queued step's mean loss: the loss of each micro-batch (summed over the
    processes), still on the device, and what their sum is divided by. float() reads
    it; on a GPU it waits only for the work queued up to the loss (an event recorded
    then), not for the steps queued since."""

    def __init__(self, parts: list, divisor: float):
        self._parts, self._divisor, self._value = parts, divisor, None
        self._done = _event_after(parts[0])

    def __float__(self) -> float:
        if self._value is None:
            total = sum(float(_read(part, self._done).reshape(-1)[0])
                        for part in self._parts)
            self._value, self._parts, self._done = total / self._divisor, [], None
        return self._value

    def __format__(self, spec: str) -> str:
        return format(float(self), spec)

    def __repr__(self) -> str:
        return f"QueuedLoss({float(self)!r})" if self._value is not None else \
            "QueuedLoss(<on the device>)"


def _event_after(array):
    """An event after the work queued so far on `array`'s GPU; None for anything but a
    DeviceArray (a host array; compile-only's CPU values)."""
    if isinstance(array, (np.ndarray, np.generic, float)):
        return None
    from ..runtime.cuda.device_array import DeviceArray
    if not isinstance(array, DeviceArray):
        return None
    from ..runtime.cuda.streams import Event, legacy_stream
    array.device.make_current()
    return Event(legacy_stream())


def _read(array, done) -> np.ndarray:
    if done is None:
        return np.asarray(array)
    from ..runtime.cuda.streams import read_after
    return read_after(array, done)
