"""A GPT training step: ZynML's Trainer (zynml/models) against PyTorch on one GPU.

    python benchmarks/train_gpt.py --compile-only    # here (MLIR): fills the cache
    python benchmarks/train_gpt.py --fake-driver     # anywhere: ZynML's Python per step
    python benchmarks/train_gpt.py                   # on the GPU (carry the cache)

Both halves must see the same ZYNML_CACHE_DIR. The same model (`--config`, GPT-2 small by
default), the same batch (`--batch` x `--seq` tokens) and the same random tokens. Each
side runs `--warmup` steps, then `--steps` timed steps (forward, backward, clipping,
AdamW, wall clock with the GPU drained before and after), then `--steps` steps queued
back to back; reported: the median step, the mean of the queued ones ("steady"), tokens
per second of each, and the GPU memory in use at the end (ZynML: the device's used memory
from cuMemGetInfo less what was used before the model existed; PyTorch:
torch.cuda.max_memory_allocated). ZynML runs in each `--precision` (bf16 mixed precision
by default, f32 too when asked). PyTorch runs in f32 with TF32 off (the same arithmetic
as ZynML's f32 model), eager and torch.compile, and in bf16 autocast with TF32 (what a
user would run). `--tf32`: f32 products on TF32 tensor cores on both sides (ZynML's
library compiled with ZYNML_TF32=1, PyTorch's f32 runs with allow_tf32); pass it to
`--compile-only` too. `--fake-driver` runs ZynML's steps on a driver that does nothing
(benchmarks/fake_cuda.py): the CPU time of a step's Python and the kernel launches,
allocations and frees per step, without a GPU (`--profile` adds a cProfile top 25).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from zynml import knobs
from zynml.compile_only import cpu_values_cuda_artifacts
from zynml.models import data
from zynml.models.gpt import CONFIGS, GPT, init_parameters, on_device
from zynml.models.train import PRECISIONS, AdamW, Schedule, Trainer


TORCH_MODES = ("f32 eager", "f32 compile", "bf16 eager", "bf16 compile")


def _batches(config, batch: int, seq: int):
    tokens = np.random.default_rng(0).integers(0, config.vocab, 1 << 20).astype(np.int32)
    return data.Batches(tokens, batch, seq, seed=1)


def compile_only(args) -> None:
    """One step with every CUDA kernel compiled at its shapes and the CPU's values
    (zynml/compile_only.py); the parameters (and the Trainer's flat buffers) stay numpy
    arrays."""
    config = CONFIGS[args.config]
    with cpu_values_cuda_artifacts():
        for precision in args.precision:
            model = GPT(config, init_parameters(config), "cuda:0")
            # a tiny clip: the clipping kernel runs (on the GPU it does once norms grow)
            Trainer(model, Schedule(), AdamW(clip=1e-9), precision=precision).step(
                _batches(config, args.batch, args.seq))


def _timed(step, warmup: int, steps: int, sync) -> dict:
    """`steps` steps timed one by one, the GPU drained before and after each (their
    median), then `steps` steps queued back to back and drained once at the end (their
    mean: what a training loop that reads its losses later gets)."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        sync()
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    losses = [step() for _ in range(steps)]
    sync()
    steady = (time.perf_counter() - start) / steps
    for loss in losses:  # read, so that reading is not what was timed
        float(loss)
    return {"median_s": statistics.median(times), "steady_s": steady}


def zynml_side(args, precision: str) -> dict:
    from zynml.runtime.cuda.driver import get_device
    device = get_device(0)
    used = lambda: _used_memory()
    before = used()
    config = CONFIGS[args.config]
    model = GPT(config, on_device(init_parameters(config), "cuda:0"), "cuda:0")
    trainer = Trainer(model, Schedule(warmup=1, steps=10 ** 6), AdamW(), precision=precision)
    batches = _batches(config, args.batch, args.seq)
    result = _timed(lambda: trainer.queue_step(batches), args.warmup, args.steps,
                    device.synchronize)
    result["memory"] = used() - before
    if args.split and precision == args.precision[0]:
        result["split"] = op_split(lambda: trainer.step(batches), device)
    return result


def op_split(step, device) -> dict[str, tuple[int, float]]:
    """{operation: (calls, ms)} over one step: a CUDA event pair on ZynML's stream around
    each call of a zynml.kernels function and each gradient copy. An operation's time is
    its kernels' GPU time, plus its own launch gaps where the GPU waits for the host; the
    step's wall time less the sum is time the GPU had nothing queued."""
    import inspect
    import zynml.kernels as K
    import zynml.models.gpt as gpt_module
    from zynml.runtime.cuda.driver import _driver, check
    driver, pairs = _driver(), []

    def timed(name, function):
        def wrapper(*args, **kwargs):
            start, end = (check(driver.cuEventCreate(0), "cuEventCreate") for _ in range(2))
            check(driver.cuEventRecord(start, device.stream), "cuEventRecord")
            out = function(*args, **kwargs)
            check(driver.cuEventRecord(end, device.stream), "cuEventRecord")
            pairs.append((name, start, end))
            return out
        return wrapper

    patched = {(K, name): getattr(K, name) for name in K.__all__
               if inspect.isfunction(getattr(K, name))}  # not the classes: isinstance
    patched[(gpt_module, "copy_into")] = gpt_module.copy_into
    for (module, name), function in patched.items():
        setattr(module, name, timed("gradient copies" if name == "copy_into" else name,
                                    function))
    try:
        device.synchronize()
        step()
        device.synchronize()
    finally:
        for (module, name), function in patched.items():
            setattr(module, name, function)
    split: dict[str, tuple[int, float]] = {}
    for name, start, end in pairs:
        ms = check(driver.cuEventElapsedTime(start, end), "cuEventElapsedTime")
        calls, total = split.get(name, (0, 0.0))
        split[name] = (calls + 1, total + ms)
        driver.cuEventDestroy(start)
        driver.cuEventDestroy(end)
    return split


def print_split(split: dict[str, tuple[int, float]], step_s: float) -> None:
    total = sum(ms for _, ms in split.values())
    print(f"\nZynML's step by operation (one step; GPU time between events around each "
          f"call): {total:.1f} ms of {step_s * 1e3:.1f} ms\n")
    print("| operation | calls | ms | share of the step |")
    print("|---|---:|---:|---:|")
    for name, (calls, ms) in sorted(split.items(), key=lambda item: -item[1][1]):
        print(f"| {name} | {calls} | {ms:.2f} | {ms / (step_s * 1e3):.1%} |")


def fake_driver_side(args) -> None:
    """ZynML's steps against a no-op driver: Python's CPU time and driver calls per step."""
    import cProfile
    import pstats
    from fake_cuda import FakeCuda
    from zynml.runtime.cuda.driver import get_device
    fake = FakeCuda()
    fake.install()
    config = CONFIGS[args.config]
    model = GPT(config, on_device(init_parameters(config), "cuda:0"), "cuda:0")
    trainer = Trainer(model, Schedule(warmup=1, steps=10 ** 6), AdamW(),
                      precision=args.precision[0])
    batches = _batches(config, args.batch, args.seq)
    for _ in range(max(args.warmup, 1)):  # compiles (or reads the cache), fills fast paths
        trainer.step(batches)
    before = dict(fake.counts)
    start = time.process_time()
    for _ in range(args.steps):
        trainer.step(batches)
    per_step = (time.process_time() - start) / args.steps
    calls = {k: (fake.counts[k] - before[k]) / args.steps for k in fake.counts}
    print(f"{args.config}, batch {args.batch} x {args.seq} tokens, fake driver "
          f"({fake.kind}): {per_step * 1e3:.1f} ms of CPU time per step; per step: "
          + ", ".join(f"{v:.0f} {k}s" for k, v in calls.items()))
    if args.split:  # the GPU times are the fake driver's zeros: the calls are what counts
        print_split(op_split(lambda: trainer.step(batches), get_device(0)), per_step)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        trainer.step(batches)
        profiler.disable()
        pstats.Stats(profiler).strip_dirs().sort_stats("tottime").print_stats(25)


def _used_memory() -> int:
    from cuda.bindings import driver
    err, free, total = driver.cuMemGetInfo()
    return int(total) - int(free)


def torch_side(args, mode: str) -> dict:
    import torch
    from zynml.models.gpt_torch import TorchGPT
    config = CONFIGS[args.config]
    bf16 = mode.startswith("bf16")
    torch.backends.cuda.matmul.allow_tf32 = bf16 or args.tf32
    torch.backends.cudnn.allow_tf32 = bf16 or args.tf32
    torch.cuda.reset_peak_memory_stats()
    model = TorchGPT(config, init_parameters(config), device="cuda")
    opt = model.optimizer(lr=1e-4, fused=True)
    forward = torch.compile(model) if mode.endswith("compile") else model
    batches = _batches(config, args.batch, args.seq)

    def step():
        ids, targets = (torch.from_numpy(a).long().cuda() for a in batches.next())
        with torch.autocast("cuda", torch.bfloat16, enabled=bf16):
            loss = forward(ids, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    result = _timed(step, args.warmup, args.steps, torch.cuda.synchronize)
    return {**result, "memory": torch.cuda.max_memory_allocated()}


def _tf32(args, name: str) -> str:
    """A row's precision as it multiplies: f32 runs say TF32 under --tf32."""
    return name.replace("f32", "tf32") if args.tf32 else name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="gpt2", choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--fake-driver", action="store_true",
                        help="no GPU: ZynML's Python per step against a no-op driver")
    parser.add_argument("--profile", action="store_true", help="with --fake-driver")
    parser.add_argument("--only", choices=("zynml", "torch"), help="one side only")
    parser.add_argument("--precision", nargs="+", choices=PRECISIONS, default=["bf16"],
                        help="ZynML's precisions (the split: the first's)")
    parser.add_argument("--torch-modes", nargs="+", choices=TORCH_MODES, default=TORCH_MODES,
                        metavar="MODE", help=f"PyTorch's runs (default: all of {TORCH_MODES})")
    parser.add_argument("--split", action="store_true",
                        help="ZynML's step by operation (CUDA events around each call)")
    parser.add_argument("--tf32", action="store_true",
                        help="f32 products on TF32 tensor cores, ZynML's and PyTorch's")
    args = parser.parse_args()
    if args.tf32:  # the knob of programs that do not choose: the library's
        os.environ[knobs.TF32.name] = "1"
    if args.compile_only:
        compile_only(args)
        return
    if args.fake_driver:
        fake_driver_side(args)
        return
    tokens = args.batch * args.seq
    rows = []
    if args.only != "torch":
        rows += [(f"ZynML {_tf32(args, precision)}", zynml_side(args, precision))
                 for precision in args.precision]
    if args.only != "zynml":
        for mode in args.torch_modes:
            rows.append((f"PyTorch {_tf32(args, mode)}", torch_side(args, mode)))
    print(f"{args.config}, batch {args.batch} x {args.seq} tokens")
    print(f"{'':20} {'step ms':>9} {'tokens/s':>10} {'steady ms':>10} {'tokens/s':>10} "
          f"{'memory GB':>10}")
    for name, r in rows:
        print(f"{name:20} {r['median_s'] * 1e3:9.1f} {tokens / r['median_s']:10,.0f} "
              f"{r['steady_s'] * 1e3:10.1f} {tokens / r['steady_s']:10,.0f} "
              f"{r['memory'] / 1e9:10.2f}")
    if rows and "split" in rows[0][1]:
        print_split(rows[0][1]["split"], rows[0][1]["median_s"])


if __name__ == "__main__":
    main()
