"""Data-parallel training (zynml/models/distributed.py) on the CPU with gloo: two
processes train as one process does on the whole global batch, and stay equal; the
launcher's variables and the batch shards."""
from __future__ import annotations

import datetime
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_close
from zynml.models import data, distributed
from zynml.models.gpt import CONFIGS, GPT, init_parameters
from zynml.models.train import AdamW, Schedule, Trainer

CONFIG = CONFIGS["toy"]  # the shapes examples/train_gpt.py's test under torchrun uses too
SEQ, GLOBAL_BATCH, STEPS = 13, 4, 3
SCHEDULE = Schedule(max_lr=3e-3, min_lr=3e-4, warmup=1, steps=STEPS)
ENV = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
       "MASTER_PORT": "29500"}


def _batches(rank=0, world_size=1):
    tokens = np.random.default_rng(3).integers(0, CONFIG.vocab, 3000).astype(np.int32)
    return data.Batches(tokens, GLOBAL_BATCH, SEQ, 8, rank, world_size)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _steps(trainer, batches, scale=1.0):
    """The losses of STEPS steps, and the first step's gradients (times `scale`)."""
    losses = [trainer.step(batches)]
    grads = {name: np.array(g) * scale for name, g in trainer.gradients.items()}
    losses += [trainer.step(batches) for _ in range(STEPS - 1)]
    return losses, grads


def _rank(rank: int, world_size: int, port: int, folder: str, overlap: bool) -> None:
    """One process of the data-parallel run (torch.multiprocessing.spawn's target)."""
    import torch.distributed as dist
    os.environ.update(ENV, WORLD_SIZE=str(world_size), RANK=str(rank),
                      LOCAL_RANK=str(rank), MASTER_PORT=str(port))
    world = distributed.world_from_env()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    model = GPT(CONFIG, init_parameters(CONFIG, seed=2), "cpu")
    reduce = distributed.GradientAllReduce(world, "cpu")
    trainer = Trainer(model, SCHEDULE, AdamW(), all_reduce=reduce, overlap=overlap)
    # the gradients the Trainer holds are summed over the processes: their mean
    losses, grads = _steps(trainer, _batches(rank, world_size), 1.0 / world_size)
    np.savez(Path(folder) / f"rank{rank}.npz", losses=np.asarray(losses), **model.params,
             **{"grad/" + name: g for name, g in grads.items()})
    reduce.close()


@pytest.mark.parametrize("overlap", [False, True])
def test_two_processes_train_as_one_process_on_the_global_batch(tmp_path, overlap):
    spawn = pytest.importorskip("torch.multiprocessing").spawn
    model = GPT(CONFIG, init_parameters(CONFIG, seed=2), "cpu")
    want, grads = _steps(Trainer(model, SCHEDULE, AdamW()), _batches())
    spawn(_rank, args=(2, _free_port(), str(tmp_path), overlap), nprocs=2, join=True)
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    np.testing.assert_allclose(ranks[0]["losses"], want, rtol=1e-5)
    largest = max(np.abs(g).max() for g in grads.values())
    for name, param in model.params.items():
        # the averaged gradients are the global batch's; the key bias's is zero in exact
        # arithmetic (softmax ignores a shift shared by all keys), hence the floor
        assert_close(ranks[0]["grad/" + name], grads[name], rtol=1e-5, floor=1e-3 * largest)
        for key in (name, "grad/" + name):  # every process holds the same numbers
            np.testing.assert_array_equal(ranks[0][key], ranks[1][key], err_msg=key)
        # AdamW steps by about lr per element whatever a gradient's size, so rounding in
        # a near-zero gradient moves a parameter by up to lr: compare absolutely
        np.testing.assert_allclose(ranks[0][name], param, rtol=0, atol=1e-5, err_msg=name)


class RecordingAllReduce:
    """The all-reduce of a world of one process, recording the Trainer's calls."""
    world = distributed.World(rank=0, size=1, local_rank=0)

    def __init__(self, log: list):
        self.log, self.flat = log, None

    def start(self, part) -> None:
        start = (part.ctypes.data - self.flat.ctypes.data) // part.itemsize
        self.log.append(("start", start, start + part.size))

    def finish(self) -> None:
        self.log.append("finish")

    def start_loss(self, loss):
        self.log.append("loss")
        return loss


def test_each_blocks_sum_starts_beside_the_next_blocks_attention_backward(monkeypatch):
    """With `overlap`, while the backward pass goes on: a range per block's matrices and
    one per block's vectors (the last block's with the final LayerNorm's), each block's
    queued just before the next block's attention backward (the first block's after its
    own), then the embeddings' once their gradient is made; every gradient's range
    exactly once; then one wait."""
    import zynml.kernels as K
    log = []
    reduce = RecordingAllReduce(log)
    trainer = Trainer(GPT(CONFIG, init_parameters(CONFIG, seed=2), "cpu"), SCHEDULE,
                      AdamW(), all_reduce=reduce, overlap=True)
    reduce.flat = trainer._grads
    embed_backward = K.embed_backward_tokens
    monkeypatch.setattr(K, "embed_backward_tokens",
                        lambda *args, **kw: (log.append("embeddings"),
                                             embed_backward(*args, **kw))[1])
    for kernel, entry in [("fused_qkv_attention_backward", "attention"),
                          ("linear_backward", "linear")]:
        monkeypatch.setattr(K, kernel, lambda *args, entry=entry, run=getattr(K, kernel),
                            **kw: (log.append(entry), run(*args, **kw))[1])
    loss = trainer.step(_batches())
    during = [e if isinstance(e, str) else e[0] for e in log[:log.index("embeddings")]]
    block = ["linear"] * 3 + ["start", "start", "attention", "linear"]
    assert during == block[:3] + block[5:] + block * (CONFIG.layers - 1) + ["start", "start"]
    # the loss is summed with the gradients, and waited for with them, once
    assert log[-2:] == ["loss", "finish"] and log.count("finish") == 1
    covered = np.zeros(trainer.layout.size, int)
    for _, start, stop in (e for e in log if e[0] == "start"):
        covered[start:stop] += 1
    for name, slot in trainer.layout.slots.items():
        assert (covered[slot.start:slot.start + slot.size] == 1).all(), name
    alone = Trainer(GPT(CONFIG, init_parameters(CONFIG, seed=2), "cpu"), SCHEDULE, AdamW())
    assert loss == alone.step(_batches())


def test_shards_are_the_global_batch_split_in_order():
    ids, targets = _batches().next()
    shards = [_batches(r, 2).next() for r in range(2)]
    np.testing.assert_array_equal(np.concatenate([s[0] for s in shards]), ids)
    np.testing.assert_array_equal(np.concatenate([s[1] for s in shards]), targets)


def test_a_batch_that_does_not_split_evenly_is_refused():
    tokens = np.arange(100, dtype=np.int32)
    with pytest.raises(distributed.ZynMLError, match="does not split evenly over 2"):
        data.Batches(tokens, 3, 5, 0, rank=0, world_size=2)


def test_the_launchers_variables_make_the_world():
    assert distributed.world_from_env({}) is None  # not under torchrun: one process
    world = distributed.world_from_env(ENV)
    assert world == distributed.World(rank=1, size=2, local_rank=1) and not world.is_main
    assert distributed.device_for(world, "cpu") == "cpu"
    assert distributed.device_for(None, "cuda:1") == "cuda:1"


@pytest.mark.parametrize("change,message", [
    ({"RANK": ""}, "WORLD_SIZE is set but RANK is not"),
    ({"MASTER_ADDR": ""}, "WORLD_SIZE is set but MASTER_ADDR is not"),
    ({"RANK": "2"}, "RANK=2 is not a process of WORLD_SIZE=2"),
    ({"WORLD_SIZE": "two"}, "must be integers"),
])
def test_a_wrong_world_says_what_is_wrong(change, message):
    with pytest.raises(distributed.DistributedError, match=message):
        distributed.world_from_env(ENV | change)


def test_several_processes_take_the_gpu_of_their_local_rank():
    world = distributed.World(rank=1, size=2, local_rank=1)
    with pytest.raises(distributed.DistributedError, match="say --device cuda"):
        distributed.device_for(world, "cuda:1")
    with pytest.raises(distributed.DistributedError, match="'cpu' or 'cuda'"):
        distributed.device_for(world, "vulkan")


def test_the_all_reduce_works_on_the_gradients_own_memory(rng):
    pytest.importorskip("torch")
    grad = rng.standard_normal((3, 5)).astype(np.float32)
    view = distributed.torch_view(grad)
    view.mul_(2.0)
    assert view.data_ptr() == grad.ctypes.data and view.shape == (3, 5)
    with pytest.raises(ValueError, match="C-contiguous, writable"):
        distributed.torch_view(grad.T)


def test_processes_on_one_numa_node_get_cpus_of_their_own(monkeypatch):
    """Four GPUs near CPUs 0-63 (a core's second hyperthread 32 further on): each
    process takes every fourth CPU, so the shares are disjoint and whole cores. A GPU
    near other CPUs keeps its node's; unknown CPUs bind nothing."""
    near = {rank: set(range(64)) for rank in range(4)}
    bound = []
    monkeypatch.setattr(distributed, "_near_cpus", lambda ordinal: near[ordinal])
    monkeypatch.setattr(distributed.os, "sched_getaffinity", lambda pid: set(range(96)))
    monkeypatch.setattr(distributed.os, "sched_setaffinity",
                        lambda pid, cpus: bound.append(cpus))
    shares = [distributed.bind_to_device_cpus(rank, 4) for rank in range(4)]
    assert shares == [list(range(rank, 64, 4)) for rank in range(4)] == bound
    assert all((14 in share) == (46 in share) for share in shares)  # one core's two
    near[2] = set(range(64, 96))
    assert distributed.bind_to_device_cpus(2, 4) == list(range(64, 96))
    assert distributed.bind_to_device_cpus(3, 4) == list(range(2, 64, 3))  # third of 0, 1, 3
    near[0] = None
    assert distributed.bind_to_device_cpus(0, 4) is None
