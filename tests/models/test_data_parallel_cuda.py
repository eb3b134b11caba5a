"""Data-parallel training on GPUs (zynml/models/distributed.py): DLPack views share the
DeviceArrays' memory, and two GPUs averaging gradients with NCCL train as one GPU does on
the whole global batch (needs two GPUs: nvidia-h100-x2). Under ZYNML_GPU_COMPILE_ONLY
the steps of both shapes compile (the global batch, one GPU's half) and the tests skip."""
from __future__ import annotations

import datetime
import os
import socket
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.models import data, distributed
from zynml.models.gpt import GPT, GPTConfig, init_parameters, on_device
from zynml.models.train import AdamW, Schedule, Trainer

from conftest import COMPILE_ONLY

CONFIG = GPTConfig(layers=2, hidden=64, heads=4, context=32, vocab=257)
SEQ, GLOBAL_BATCH, STEPS = 31, 4, 3
SCHEDULE = Schedule(max_lr=3e-3, min_lr=3e-4, warmup=1, steps=STEPS)


def _batches(rank=0, world_size=1):
    tokens = np.random.default_rng(9).integers(0, CONFIG.vocab, 5000).astype(np.int32)
    return data.Batches(tokens, GLOBAL_BATCH, SEQ, 4, rank, world_size)


def _rank(rank: int, world_size: int, port: int, folder: str, overlap: bool) -> None:
    """One GPU's process (torch.multiprocessing.spawn's target)."""
    import torch
    import torch.distributed as dist
    os.environ.update(WORLD_SIZE=str(world_size), RANK=str(rank), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    world = distributed.world_from_env()
    device = f"cuda:{rank}"
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120))
    model = GPT(CONFIG, on_device(init_parameters(CONFIG, seed=6), device), device)
    reduce = distributed.GradientAllReduce(world, device)
    trainer = Trainer(model, SCHEDULE, AdamW(), all_reduce=reduce, overlap=overlap)
    batches = _batches(rank, world_size)
    losses = [trainer.step(batches) for _ in range(STEPS)]
    np.savez(Path(folder) / f"rank{rank}.npz", losses=np.asarray(losses),
             **{n: np.asarray(p) for n, p in model.params.items()})
    reduce.close()


@pytest.mark.gpu
def test_dlpack_views_share_the_device_arrays_memory(rng):
    if COMPILE_ONLY:
        pytest.skip("compile-only: nothing to compile")
    torch = pytest.importorskip("torch")
    from zynml.runtime.cuda.device_array import DeviceArray
    host = rng.standard_normal((7, 3)).astype(np.float32)
    array = DeviceArray.from_numpy(host)
    view = distributed.torch_view(array)
    assert view.data_ptr() == array.ptr and view.device == torch.device("cuda:0")
    view.mul_(2.0)
    np.testing.assert_array_equal(array.numpy(), host * 2)


@pytest.mark.gpu
@pytest.mark.parametrize("overlap", [False, True])
def test_two_gpus_with_nccl_train_as_one_gpu_on_the_global_batch(device, tmp_path, overlap):
    if not COMPILE_ONLY and \
            sum(d["id"].startswith("cuda:") for d in zynml.compute_devices()) < 2:
        pytest.skip("needs two GPUs (nvidia-h100-x2)")
    model = GPT(CONFIG, on_device(init_parameters(CONFIG, seed=6), device), device)
    trainer, batches = Trainer(model, SCHEDULE, AdamW()), _batches()
    want = [trainer.step(batches) for _ in range(STEPS)]
    if COMPILE_ONLY:  # one GPU's half of the batch: the shapes each process runs
        half = Trainer(GPT(CONFIG, init_parameters(CONFIG, seed=6), device), SCHEDULE,
                       AdamW())
        half.step(_batches(0, 2))
        pytest.skip("compile-only: the artifacts are in the cache")
    spawn = pytest.importorskip("torch.multiprocessing").spawn
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spawn(_rank, args=(2, port, str(tmp_path), overlap), nprocs=2, join=True)
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    np.testing.assert_allclose(ranks[0]["losses"], want, rtol=1e-4)
    for name, param in model.params.items():
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name], err_msg=name)
        # AdamW moves every element by about lr: compare absolutely (test_data_parallel)
        np.testing.assert_allclose(ranks[0][name], np.asarray(param), rtol=0, atol=1e-4,
                                   err_msg=name)
