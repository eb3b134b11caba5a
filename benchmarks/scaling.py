"""Data-parallel scaling of the GPT training step: tokens per second on 1, 2, ... N GPUs.

    python benchmarks/scaling.py --compile-only    # here (MLIR): fills the cache
    python benchmarks/scaling.py                   # on the GPU machine (carry the cache)

Both halves must see the same ZYNML_CACHE_DIR (an artifact serves every GPU of a chip).
The step is benchmarks/train_gpt.py's: ZynML's Trainer on `--config` (GPT-2 small by
default), `--batch` x `--seq` tokens per GPU, `--precision` (bf16 mixed precision on GPUs,
f32 on the CPU, by default). For each GPU count n (1, 2, 4, ... up to N, the visible
GPUs, and N) it launches n processes with PyTorch's launcher (`--worker`,
zynml/models/distributed.py), runs `--warmup` then `--steps` timed steps (wall clock,
each process drained before and after, the slowest process's time), and times the
part of the gradient all-reduce that the backward pass did not hide (each block's sum
starts during the pass, `Trainer(overlap=True)`, unless `--no-overlap`; timed from the
end of ZynML's work to the end of NCCL's, so it includes waiting for the slowest
process); then
`--steps` steps queued back to back and drained once (`Trainer.queue_step`: what a
training loop that reads its losses later gets). Reported: the median step, tokens per
second over all GPUs, the speed-up against one GPU, that exposed all-reduce's share of
a step, and the queued steps' mean, rate and speed-up;
then the losses of the N-GPU run against one GPU that accumulates the same global batch
(the N shards in turn), step for step. `--device cpu --gpus N` runs the same on N CPU
processes (gloo): the tests' dry run of the machinery.

Then two `@parallel(data)` programs in one process, each on the same GPU counts against
the plain program on cuda:0 (the median of 5 calls, wall clock, inputs from the host and
the result back to it; the inputs in ordinary, then in page-locked host memory):
PROGRAMS["stream"], `--rows` x 4096 f32 through one elementwise
op (bound by host memory: 256 MB each way), and PROGRAMS["all_pairs"], a Gaussian kernel
sum of 2^20 points against `--centres` centres (bound by the GPUs: 69G exponentials for
12.5 MB moved at the default 65536). `--compile-only --gpus N` compiles every count's chunks.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from zynml.models import data, distributed
from zynml.models.gpt import CONFIGS, GPT, init_parameters, on_device
from zynml.models.train import PRECISIONS, AdamW, Schedule, Trainer

# NVLink multicast stays off (the device machines' rule: it can take shared GPUs out of
# service); kept for the workers, which get this environment
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}


def _tokens(config) -> np.ndarray:
    return np.random.default_rng(0).integers(0, config.vocab, 1 << 20).astype(np.int32)


class InTurn:
    """One process standing in for `parts` processes: each global batch's shards, one
    per call, so that accumulating `parts` micro-batches steps on the global batch."""

    def __init__(self, batches: data.Batches, parts: int):
        self.batches, self.parts, self._queue = batches, parts, []

    def next(self):
        if not self._queue:
            ids, targets = self.batches.next()
            self._queue = list(zip(np.split(ids, self.parts), np.split(targets, self.parts)))
        return self._queue.pop(0)


class TimedAllReduce:
    """A GradientAllReduce whose wait for the sums is timed: from the end of ZynML's
    work (its stream drained) to the end of NCCL's (the whole device drained), so what
    an overlap with the backward pass left exposed, and the wait for the slowest."""

    def __init__(self, inner: distributed.GradientAllReduce, compute_done, all_done):
        self.inner, self.compute_done, self.all_done = inner, compute_done, all_done
        self.world = inner.world  # the Trainer divides the summed gradients by its size
        self.seconds = []
        self.step_start = 0.0  # set by the worker: the host's and the drain's times
        self.host, self.drain = [], []  # from it to the call of finish, to ZynML's end

    def start(self, part) -> None:
        self.inner.start(part)

    def finish(self) -> None:
        called = time.perf_counter()
        self.host.append(called - self.step_start)
        self.compute_done()
        start = time.perf_counter()
        self.drain.append(start - called)
        self.inner.finish()
        self.all_done()
        self.seconds.append(time.perf_counter() - start)

    def start_loss(self, loss):
        return self.inner.start_loss(loss)


def worker(args) -> None:
    """One process of a run under torchrun (or alone: one GPU)."""
    import torch
    world = distributed.world_from_env() or distributed.World(0, 1, 0)
    on_gpu = args.device == "cuda"
    device = f"cuda:{world.local_rank}" if on_gpu else "cpu"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    if on_gpu:
        torch.cuda.set_device(world.local_rank)
        if args.bind_cpus:
            distributed.bind_to_device_cpus(world.local_rank,
                                            int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    config = CONFIGS[args.config]
    model = GPT(config, on_device(init_parameters(config), device), device)
    reduce = None
    if world.size > 1:
        # the legacy default stream (ZynML's and torch's default), not NCCL's
        compute_done = torch.cuda.current_stream().synchronize if on_gpu else sync
        reduce = TimedAllReduce(distributed.GradientAllReduce(world, device),
                                compute_done, sync)
    trainer = Trainer(model, Schedule(warmup=1, steps=10 ** 6), AdamW(),
                      accumulation=args.accumulate, all_reduce=reduce,
                      precision=precision(args), overlap=args.overlap)
    batches = data.Batches(_tokens(config), args.batch * world.size * args.accumulate,
                           args.seq, seed=1, rank=world.rank, world_size=world.size)
    if args.accumulate > 1:
        batches = InTurn(batches, args.accumulate)
    losses, times = [], []
    for step in range(args.warmup + args.steps):
        sync()
        start = time.perf_counter()
        if reduce is not None:
            reduce.step_start = start
        losses.append(trainer.step(batches))
        sync()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    reduce_times = reduce.seconds[args.warmup:] if reduce else [0.0] * len(times)
    # then steps queued back to back (the wait in TimedAllReduce would drain the GPU
    # each step: the inner all-reduce, untimed), their losses read at the end
    if reduce is not None:
        trainer.all_reduce = reduce.inner
    start = time.perf_counter()
    queued = [trainer.queue_step(batches) for _ in range(args.steps)]
    sync()
    steady = [(time.perf_counter() - start) / args.steps]
    losses += [float(loss) for loss in queued]
    if world.size > 1:  # every step as long as its slowest process
        import torch.distributed as dist
        slowest = torch.tensor([times + steady, reduce_times + [0.0]], dtype=torch.float64,
                               device=device if on_gpu else "cpu")
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        times, reduce_times = slowest.tolist()
        steady, times, reduce_times = times[-1:], times[:-1], reduce_times[:-1]
        # each process's own medians: queuing the step on the host, then ZynML's GPU
        # work left to run, then the wait for the sums (NCCL and the other processes)
        mine = [statistics.median(t[args.warmup:]) for t in
                (reduce.host, reduce.drain, reduce.seconds)]
        ranks = [None] * world.size
        dist.all_gather_object(ranks, mine)
        reduce.inner.close()
    if world.is_main:
        Path(args.out).write_text(json.dumps({"gpus": world.size, "losses": losses,
                                              "step_s": statistics.median(times),
                                              "steady_s": steady[0],
                                              "reduce_s": statistics.median(reduce_times),
                                              "ranks": ranks if world.size > 1 else []}))


def _launch(args, gpus: int, accumulate: int = 1) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "result.json"
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc-per-node={gpus}", __file__, "--worker", "--out", str(out),
                   "--config", args.config, "--batch", str(args.batch), "--seq",
                   str(args.seq), "--warmup", str(args.warmup), "--steps", str(args.steps),
                   "--accumulate", str(accumulate), "--device", args.device,
                   "--precision", precision(args)] + ["--no-overlap"] * (not args.overlap) \
            + ["--bind-cpus"] * args.bind_cpus
        env = NO_MULTICAST | dict(os.environ)
        returncode = _run_bounded(command, env, args.launch_timeout)
        if returncode is None:
            sys.exit(f"scaling.py: the run on {gpus} GPUs took over {args.launch_timeout} s "
                     "(--launch-timeout); its processes were stopped")
        if returncode:
            sys.exit(f"scaling.py: the run on {gpus} GPUs failed (exit {returncode})")
        return json.loads(out.read_text())


def _run_bounded(command: list[str], env: dict, seconds: float,
                 grace: float = 30) -> int | None:
    """The launcher's exit status, or None when it ran past `seconds`: then it is asked to
    stop its workers (SIGTERM, which torchrun passes on), and after `grace` seconds its
    whole process group is killed, so that a hung run does not hold the GPUs."""
    launcher = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        return launcher.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        launcher.terminate()
        try:
            launcher.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
        return None


def precision(args) -> str:
    """--precision, or bf16 mixed precision on GPUs and f32 on the CPU."""
    return args.precision or ("bf16" if args.device == "cuda" else "f32")


@dataclass(frozen=True)
class DataParallelProgram:
    """A one-block program for @parallel(data): `source` with DEVICES where the
    annotations go, and how to make its inputs (the first is split)."""
    what: str
    source: str
    inputs: Callable[[argparse.Namespace], dict]


def _stream_inputs(args) -> dict:
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((args.rows, 4096), dtype=np.float32),
            "w": rng.standard_normal(4096, dtype=np.float32)}


def _all_pairs_inputs(args) -> dict:
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((1 << 20, 2), dtype=np.float32),
            "c": rng.standard_normal((args.centres, 2), dtype=np.float32)}


PROGRAMS = {
    "stream": DataParallelProgram("tanh(x) * w on ROWS x 4096 f32", """
let y = compute(x, w) DEVICES {
    @kernel elementwise
    for b in 0..batch, i in 0..n:
        out[b, i] = tanh(x[b, i]) * w[i]
}
""", _stream_inputs),
    "all_pairs": DataParallelProgram(
        "sum of exp(-|x - c|^2) over CENTRES centres c, for 2^20 points x (f32)", """
let y = compute(x, c) DEVICES {
    @kernel fused
    for b in 0..points:
        var acc = 0.0
        for j in 0..centres:
            let dx = x[b, 0] - c[j, 0]
            let dy = x[b, 1] - c[j, 1]
            acc += exp(-(dx * dx + dy * dy))
        out[b] = acc
}
""", _all_pairs_inputs),
}


def program(source: str, gpus: int):
    """`source` on cuda:0, or split by @parallel(data) over `gpus` GPUs."""
    import zynml
    names = ", ".join(f'"cuda:{i}"' for i in range(gpus))
    devices = "" if gpus == 1 else f"@device([{names}]) @parallel(data)"
    return zynml.compile(source.replace("DEVICES", devices), device="cuda:0",
                         require_device=False)


def compile_program(spec: DataParallelProgram, args, gpus: int) -> None:
    """The artifacts of every GPU count's chunks (one GPU: the whole batch)."""
    inputs = spec.inputs(args)
    split, *rest = inputs
    rows = len(inputs[split])
    for n in gpu_counts(gpus):
        prog = program(spec.source, n)
        if n == 1:
            prog.artifact(inputs)
            continue
        bounds = np.linspace(0, rows, n + 1).round().astype(int)
        for size in sorted({int(b - a) for a, b in zip(bounds[:-1], bounds[1:])}):
            prog._device_parts()[0].artifact({split: inputs[split][:size]} |
                                             {name: inputs[name] for name in rest})


def time_program(spec: DataParallelProgram, args, gpus: int,
                 pinned: bool = False) -> list[tuple[int, float]]:
    """(GPUs, median seconds of a call) per GPU count; results checked against one GPU.
    `pinned`: the inputs in page-locked host memory (zynml.allocate(..., pinned=True)),
    which a GPU copies from directly, for every GPU count alike."""
    inputs, rows_out = spec.inputs(args), []
    if pinned:
        import zynml
        for name, value in inputs.items():
            inputs[name] = zynml.allocate(value.shape, value.dtype, pinned=True)
            inputs[name][...] = value
    want = None
    for n in gpu_counts(gpus):
        prog = program(spec.source, n)
        got = np.asarray(prog(inputs)["y"])  # compiles and loads on every GPU first
        want = got if want is None else want
        np.testing.assert_array_equal(got, want)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            prog(inputs)
            times.append(time.perf_counter() - start)
        rows_out.append((n, statistics.median(times)))
    return rows_out


def gpu_counts(n: int) -> list[int]:
    """1, 2, 4, ... below n, and n."""
    counts, k = [], 1
    while k < n:
        counts.append(k)
        k *= 2
    return counts + [n]


def compile_only(args) -> None:
    """One step with two accumulated micro-batches (every kernel a run uses, the
    accumulation's too) compiled at the per-GPU shapes on a driver that does nothing
    (benchmarks/fake_cuda.py): the compiler runs, no values are computed. (The CPU's
    values, as train_gpt.py's compile takes them, run out of memory at GPT-2 small's
    16 x 1024 tokens on a 23 GB machine.)"""
    from fake_cuda import FakeCuda
    FakeCuda().install()
    config = CONFIGS[args.config]
    model = GPT(config, on_device(init_parameters(config), "cuda:0"), "cuda:0")
    # a tiny clip: the clipping kernel runs (on the GPU it does once norms grow)
    trainer = Trainer(model, Schedule(), AdamW(clip=1e-9), accumulation=2,
                      precision=precision(args))
    trainer.step(data.Batches(_tokens(config), args.batch, args.seq, seed=1))
    for spec in PROGRAMS.values():
        compile_program(spec, args, args.gpus or 4)


def report_program(args, spec: DataParallelProgram, rows: list[tuple[int, float]],
                   pinned: bool) -> None:
    what = spec.what.replace("ROWS", str(args.rows)).replace("CENTRES", str(args.centres))
    where = "page-locked host arrays" if pinned else "host arrays (pageable)"
    print(f"\n@parallel(data): {what}, from and to {where}\n")
    print("| GPUs | call ms | speed-up |")
    print("|---:|---:|---:|")
    for n, seconds in rows:
        print(f"| {n} | {seconds * 1e3:.2f} | {rows[0][1] / seconds:.2f}x |")


def report(args, runs: list[dict], reference: dict | None) -> None:
    tokens = args.batch * args.seq
    base = tokens / runs[0]["step_s"]
    print(f"{args.config}, {args.batch} x {args.seq} tokens per {args.device.upper()} "
          f"process, {precision(args)}\n")
    unit = "GPUs" if args.device == "cuda" else "processes"
    steady_base = tokens / runs[0]["steady_s"]
    print(f"| {unit} | step ms | tokens/s | speed-up | exposed all-reduce ms | its share "
          f"| queued step ms | tokens/s | speed-up |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        rate = tokens * r["gpus"] / r["step_s"]
        steady = tokens * r["gpus"] / r["steady_s"]
        print(f"| {r['gpus']} | {r['step_s'] * 1e3:.1f} | {rate:,.0f} | {rate / base:.2f}x | "
              f"{r['reduce_s'] * 1e3:.2f} | {r['reduce_s'] / r['step_s']:.1%} | "
              f"{r['steady_s'] * 1e3:.1f} | {steady:,.0f} | {steady / steady_base:.2f}x |")
    for r in runs:
        for rank, (host, drain, wait) in enumerate(r["ranks"]):
            print(f"{r['gpus']} GPUs, rank {rank}: host queues the step in "
                  f"{host * 1e3:.1f} ms, then its GPU work ends {drain * 1e3:.1f} ms "
                  f"later, then the sums {wait * 1e3:.1f} ms later")
    if reference is None:
        return
    n = runs[-1]["gpus"]
    print(f"\n| step | 1 of {n} {unit}, {n} micro-batches | {n} {unit} | difference |")
    print("|---:|---:|---:|---:|")
    for step, (one, many) in enumerate(zip(reference["losses"], runs[-1]["losses"])):
        print(f"| {step} | {one:.5f} | {many:.5f} | {many - one:+.1e} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="gpt2", choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=int, default=16, help="sequences per GPU")
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--gpus", type=int, help="the most GPUs (default: all visible; "
                        "--compile-only: 4)")
    parser.add_argument("--rows", type=int, default=16384,
                        help="the stream program's batch")
    parser.add_argument("--centres", type=int, default=65536,
                        help="the all-pairs program's centres (its work per point)")
    parser.add_argument("--precision", choices=PRECISIONS,
                        help="the training step's (default: bf16 on GPUs, f32 on the CPU)")
    parser.add_argument("--launch-timeout", type=float, default=300,
                        help="seconds one GPU count's run may take before it is stopped")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--only", choices=("training", "program"),
                        help="one of the two benchmarks")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--accumulate", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--no-overlap", dest="overlap", action="store_false",
                        help="sum the gradients after the backward pass, not each "
                             "block's during it")
    parser.add_argument("--bind-cpus", action="store_true",
                        help="keep each process on CPUs of its own near its GPU")
    args = parser.parse_args()
    if args.compile_only:
        compile_only(args)
        return
    if args.worker:
        worker(args)
        return
    from zynml.runtime.cuda.driver import device_count
    n = args.gpus or (device_count() if args.device == "cuda" else 1)
    if n < 1:
        sys.exit("scaling.py: no GPU here; --compile-only fills the cache without one")
    if args.only != "program":
        runs = [_launch(args, gpus) for gpus in gpu_counts(n)]
        reference = _launch(args, 1, accumulate=n) if n > 1 else None
        report(args, runs, reference)
    if args.device == "cuda" and args.only != "training":
        for pinned in (False, True):
            for spec in PROGRAMS.values():
                report_program(args, spec, time_program(spec, args, n, pinned), pinned)


if __name__ == "__main__":
    main()
