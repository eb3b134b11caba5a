"""Data-parallel training: one process per device, gradients averaged over them.

    torchrun --standalone --nproc-per-node=4 examples/train_gpt.py --config gpt2 --device cuda

PyTorch's launcher (`torchrun`, torch.distributed.run) starts the processes and tells
each its place through RANK, WORLD_SIZE and LOCAL_RANK; `world_from_env()` reads them.
Process `rank` trains on `cuda:LOCAL_RANK` (or the CPU) with the same initial
parameters (the same seed) and its shard of each global batch (data.Batches). After the
backward pass, `GradientAllReduce` sums the gradients and the loss over the processes with
torch.distributed: NCCL over a zero-copy torch view of the DeviceArray (DLPack) on CUDA,
gloo over a view of the numpy array on the CPU. The gradients are one flat buffer
(train.Trainer's, models/flat.py), summed in place by one collective per block (one per
parameter would pay the latency ~150 times for GPT-2 small), each started as the backward
pass finishes the block, so that the sums overlap the blocks still to go, and all waited
for before clipping (`Trainer(overlap=False)`: one collective after the pass). Each process then clips and
steps the same summed gradients, divided by the number of processes inside the clip
factor, so the parameters stay equal everywhere, and the run equals one process training
on the whole global batch.
ZynML's kernels and PyTorch's run on the legacy default stream of the device's primary
context; NCCL's stream waits for that one's work when a sum starts, and that one for
NCCL's at `finish`, so no other wait is needed.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..errors import ZynMLError

__all__ = ["World", "DistributedError", "world_from_env", "device_for", "GradientAllReduce",
           "torch_view", "bind_to_device_cpus"]

LAUNCH = "torchrun --standalone --nproc-per-node=N examples/train_gpt.py ..."


class DistributedError(ZynMLError):
    """The processes of a data-parallel run are set up wrongly (the launcher's variables,
    the device, the batch)."""


@dataclass(frozen=True)
class World:
    rank: int        # this process, 0 .. size - 1
    size: int        # processes in all
    local_rank: int  # this process on its machine: its GPU's number

    @property
    def is_main(self) -> bool:
        """The process that logs, plots and writes checkpoints."""
        return self.rank == 0


def world_from_env(environ: Mapping[str, str] = os.environ) -> World | None:
    """The world torchrun describes, or None when WORLD_SIZE is unset (one process)."""
    if "WORLD_SIZE" not in environ:
        return None
    values = {}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        if not environ.get(name):
            raise DistributedError(f"WORLD_SIZE is set but {name} is not: start one process "
                                   f"per device with PyTorch's launcher, {LAUNCH}")
        values[name] = environ[name]
    try:
        size, rank, local = (int(values[n]) for n in ("WORLD_SIZE", "RANK", "LOCAL_RANK"))
    except ValueError:
        raise DistributedError("WORLD_SIZE, RANK and LOCAL_RANK must be integers; got "
                               + ", ".join(f"{n}={values[n]!r}" for n in
                                           ("WORLD_SIZE", "RANK", "LOCAL_RANK"))) from None
    if size < 1 or not 0 <= rank < size or local < 0:
        raise DistributedError(f"RANK={rank} is not a process of WORLD_SIZE={size} "
                               f"(LOCAL_RANK={local})")
    return World(rank, size, local)


def device_for(world: World | None, device: str) -> str:
    """The device of this process: `device` alone, or `cuda:LOCAL_RANK` for "cuda" when
    several processes share the machine's GPUs."""
    if world is None or world.size == 1:
        return device
    kind, _, number = device.partition(":")
    if kind == "cpu":
        return device
    if kind != "cuda":
        raise DistributedError(f"data-parallel training runs on 'cpu' or 'cuda', not "
                               f"'{device}'")
    if number:
        raise DistributedError(f"--device {device}: with {world.size} processes each takes "
                               "the GPU of its LOCAL_RANK; say --device cuda")
    from ..runtime.cuda.driver import device_count
    count = device_count()
    if world.local_rank >= count:
        raise DistributedError(f"LOCAL_RANK={world.local_rank} has no GPU: this machine has "
                               f"{count}; start at most {count} processes per machine")
    return f"cuda:{world.local_rank}"


def bind_to_device_cpus(local_rank: int, local_size: int = 1) -> list[int] | None:
    """Keep this process on CPUs of its GPU's NUMA node (Linux's local_cpulist of the
    GPU's PCI device, within the CPUs the process may use), a share of them of its own
    where `local_size` processes on this machine have GPUs on the same node: every
    `n`th CPU of the list for the `n` processes that share it (whole cores, where Linux
    numbers a core's second hyperthread half the list away and `n` divides that half).
    A step's host work (queuing about a thousand kernels) is then not moved between CPUs
    nor shares one with another process's. Returns the CPUs, or None where they are not
    known."""
    lists = [_near_cpus(rank) for rank in range(max(local_size, local_rank + 1))]
    mine = lists[local_rank]
    if mine is None:
        return None
    sharing = [rank for rank, near in enumerate(lists) if near == mine]
    cpus = sorted(mine & os.sched_getaffinity(0))[sharing.index(local_rank)::len(sharing)]
    if not cpus:
        return None
    os.sched_setaffinity(0, cpus)
    return cpus


def _near_cpus(ordinal: int) -> set[int] | None:
    """The CPUs Linux lists as local to GPU `ordinal`'s PCI device, or None."""
    import torch
    props = torch.cuda.get_device_properties(ordinal)
    bus = (getattr(props, "pci_domain_id", 0), getattr(props, "pci_bus_id", None),
           getattr(props, "pci_device_id", None))
    if None in bus:
        return None
    path = "/sys/bus/pci/devices/{:04x}:{:02x}:{:02x}.0/local_cpulist".format(*bus)
    try:
        with open(path) as listing:
            text = listing.read().strip()
    except OSError:
        return None
    near = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        near.update(range(int(first), int(last or first) + 1))
    return near


class GradientAllReduce:
    """Sums the flat gradient (and the loss) over the processes of `world`, in
    place. Made once per run, after the launcher started the processes: it joins their
    group."""

    def __init__(self, world: World, device: str):
        import torch
        import torch.distributed as dist
        self.world, self.device = world, device
        self._torch, self._dist = torch, dist
        self._started: list = []  # (work, tensor view) of the sums `start` began
        self.on_cuda = device.startswith("cuda")
        if self.on_cuda:
            torch.cuda.set_device(int(device.partition(":")[2] or 0))
        if not dist.is_initialized():
            dist.init_process_group("nccl" if self.on_cuda else "gloo")
        if dist.get_world_size() != world.size or dist.get_rank() != world.rank:
            raise DistributedError(f"the process group has {dist.get_world_size()} "
                                   f"processes, rank {dist.get_rank()}; expected "
                                   f"{world.size}, rank {world.rank}")

    def sum_gradients(self, flat) -> None:
        """`flat` (every gradient, in one buffer) becomes its sum over the processes: one
        collective. The caller divides by `world.size` (the Trainer, in its clip factor:
        no pass over the gradients of its own)."""
        self.start(flat)
        self.finish()

    def start(self, part) -> None:
        """Start summing `part` (a range of the flat gradient) over the processes in the
        background, in place: on NCCL's stream, after the kernels queued so far on the
        current one (ZynML's), or on gloo's thread. Every process must start the same
        parts in the same order. `finish` waits for them."""
        view = torch_view(part)
        self._started.append((self._dist.all_reduce(view, async_op=True), view))

    def finish(self) -> None:
        """Wait for every started sum: on CUDA, work queued after this waits for them
        (the host does not); on the CPU they are done."""
        started, self._started = self._started, []
        for work, _ in started:
            work.wait()

    def start_loss(self, loss):
        """Start summing a loss (a one-element array of the device) over the processes,
        like `start`; returns the array that holds the sum once `finish` has waited:
        `loss` itself on CUDA (nothing waits for the device), a float64 copy on the CPU
        (a result there may be a read-only view)."""
        if self.on_cuda:
            self.start(loss)
            return loss
        total = np.array(np.asarray(loss, np.float64).reshape(1))
        self.start(total)
        return total

    def close(self) -> None:
        if self._dist.is_initialized():
            self._dist.destroy_process_group()


def torch_view(array):
    """A torch tensor on `array`'s memory, no copy: DLPack for a DeviceArray (or another
    library's GPU array), from_numpy for a numpy array."""
    import torch
    if isinstance(array, np.ndarray):
        if not (array.flags.c_contiguous and array.flags.writeable):
            raise ValueError("gradients are reduced in place: C-contiguous, writable")
        return torch.from_numpy(array)
    return torch.from_dlpack(array)
