"""Decode attention: ZynML's flash kernel over a fixed KV cache, against PyTorch SDPA.

    python benchmarks/decode_attention.py --compile-only   # here (MLIR): fills the cache
    python benchmarks/decode_attention.py                  # on the GPU (carry the cache)

Both halves must see the same ZYNML_CACHE_DIR. A decode loop of `--steps` steps (4096),
batch 1 and 16, 32 query heads, 8 KV heads (grouped-query attention, group 4), head dim
128, f16: each step, one query token attends to the keys 0..step of a KV cache
preallocated at `--steps` keys (a fixed shape). ZynML's program says so with a run-time
causal offset, `if j <= i + cache_start` with cache_start = step: the keys past the
current position are masked, and the kernel skips their tiles. PyTorch runs
`scaled_dot_product_attention(q, k[:, :, :step + 1], v[:, :, :step + 1],
enable_gqa=True)` on the same tensors in the same run (the cache sliced to the current
length). Writing the new token into the cache is the same for both and left out.

Reported per batch: the loop's total wall time (the first pass, which makes ZynML's
executables, and a second one), the per-step GPU time (CUDA events around each step,
each queued behind a GPU sleep so that the launch cost is hidden: median and mean over
the steps), ZynML's compile count and specializations (Program.stats()), and the
largest relative error against SDPA over a few steps.

`--group input` writes the group as an integer input (`K[b, h / group, j]`, group = 4
passed at each call: a run-time group, which runs on the flash kernels) instead of the
constant 4 (the decode kernels).

ZynML runs the step two ways (`--via`):
  artifact (default)  the program's artifact for one cache_start, from the cache, saved
                      and `zynml.load`ed: one compiled kernel for every step, since the
                      kernel reads cache_start at run time (compiles: 0 on the GPU)
  program             Program calls (`prog(Q=.., cache_start=step)`): cache_start is a
                      run-time value (not part of the executable's key), so every step
                      calls the one executable (from the cache: compiles 0 on the GPU);
                      Program.stats() counts what happened
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128

_SOURCE = """
let attn = compute(Q, K, V, cache_start{inputs}) {{
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        var max_score = -inf
        for j in 0..keys:
            if j <= i + cache_start:
                let score = dot(Q[b, h, i], K[b, h / {group}, j]) / sqrt(head_dim)
                max_score = max(max_score, score)
        var sum_exp = 0.0
        for j in 0..keys:
            if j <= i + cache_start:
                let score = dot(Q[b, h, i], K[b, h / {group}, j]) / sqrt(head_dim)
                sum_exp += exp(score - max_score)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..keys:
                if j <= i + cache_start:
                    let score = dot(Q[b, h, i], K[b, h / {group}, j]) / sqrt(head_dim)
                    acc += exp(score - max_score) / sum_exp * V[b, h / {group}, j, d]
            out[b, h, i, d] = acc
}}
"""
GROUP = HEADS // KV_HEADS


def _source(group_input: bool) -> str:
    """The step's program: the group the constant GROUP, or the integer input `group`."""
    return _SOURCE.format(group="group" if group_input else GROUP,
                          inputs=", group" if group_input else "")


SIZES = ["batch", "heads", "seq_len", "keys", "head_dim"]  # pinned static: a fixed cache

# ~0.2 ms of GPU clock cycles: longer than Python takes to queue one step
QUEUE_CYCLES = 400_000


def _program(require_device: bool, group_input: bool = False):
    import zynml
    return zynml.compile(_source(group_input), device="cuda:0", static=SIZES,
                         require_device=require_device)


def _scalars(group_input: bool, start: int) -> dict:
    """The step's integer inputs: cache_start, and the group where it is an input."""
    return dict(cache_start=np.int64(start), **({"group": np.int64(GROUP)}
                                                 if group_input else {}))


def _shapes(batch: int, steps: int) -> dict:
    return dict(Q=(batch, HEADS, 1, HEAD_DIM), K=(batch, KV_HEADS, steps, HEAD_DIM),
                V=(batch, KV_HEADS, steps, HEAD_DIM))


def compile_only(batches: list[int], steps: int, group_input: bool) -> None:
    prog = _program(require_device=False, group_input=group_input)
    for batch in batches:
        arrays = {n: np.zeros(s, np.float16) for n, s in _shapes(batch, steps).items()}
        prog.artifact(**_scalars(group_input, 0), **arrays)
        print(f"compiled: batch {batch}, cache {steps}", flush=True)


def _timed_steps(torch, step_fn, steps: range) -> list[float]:
    """Per-step GPU milliseconds: CUDA events around each step, queued behind a GPU
    sleep (the events then time the GPU's work, not Python's launch)."""
    events = []
    for step in steps:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(QUEUE_CYCLES)
        start.record()
        step_fn(step)
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def _wall(torch, step_fn, steps: range) -> float:
    """Seconds for the whole loop, the GPU's work included."""
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for step in steps:
        step_fn(step)
    torch.cuda.synchronize()
    return time.perf_counter() - begin


def _step_function(prog, via: str, q, k, v, steps: int, folder: Path, group_input: bool):
    """(step -> ZynML's output) for `via` "artifact" or "program"."""
    import zynml
    scalars = [_scalars(group_input, s) for s in range(steps)]
    if via == "program":
        return lambda step: prog(Q=q, K=k, V=v, **scalars[step])["attn"]
    host = {n: np.zeros(tuple(t.shape), np.float16) for n, t in (("Q", q), ("K", k), ("V", v))}
    path = folder / f"decode_attention_{q.shape[0]}.zynml"
    prog.artifact(**scalars[0], **host).save(path)  # from the cache: no compile
    loaded = zynml.load(path)
    return lambda step: loaded(Q=q, K=k, V=v, **scalars[step])["attn"]


def run(batches: list[int], steps: int, warmup: int, via: str, group_input: bool) -> None:
    import torch
    import torch.nn.functional as F
    prog = _program(require_device=True, group_input=group_input)
    folder = Path(tempfile.mkdtemp(prefix="decode_attention_"))
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}; "
          f"{steps} steps, {HEADS} query heads, {KV_HEADS} KV heads, head dim {HEAD_DIM}, "
          f"f16; ZynML via {via}, the group {'an input' if group_input else 'a constant'}")
    print("| batch | ZynML total s (1st / 2nd pass) | SDPA total s | ZynML step ms "
          "(median / mean) | SDPA step ms (median / mean) | SDPA / ZynML (median) | "
          "compiles | specializations | disk hits | max rel. error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for batch in batches:
        shapes = _shapes(batch, steps)
        q, k, v = (torch.randn(shapes[n], generator=gen, device="cuda",
                               dtype=torch.float16) for n in "QKV")
        before = prog.stats()
        zynml_step = _step_function(prog, via, q, k, v, steps, folder, group_input)

        def sdpa_step(step):
            return F.scaled_dot_product_attention(q, k[:, :, :step + 1], v[:, :, :step + 1],
                                                  enable_gqa=True)

        every = range(steps)
        z_first = _wall(torch, zynml_step, every)  # makes the executables
        for _ in range(warmup):
            _wall(torch, sdpa_step, range(min(steps, 64)))
        z_total, t_total = _wall(torch, zynml_step, every), _wall(torch, sdpa_step, every)
        z_ms, t_ms = _timed_steps(torch, zynml_step, every), _timed_steps(torch, sdpa_step, every)
        error = 0.0
        for step in sorted({0, 1, steps // 3, steps - 1}):
            ours = torch.as_tensor(zynml_step(step), device="cuda").double()
            ref = sdpa_step(step).double()
            error = max(error, ((ours - ref).norm() / ref.norm()).item())
        after = prog.stats()
        z_med, t_med = statistics.median(z_ms), statistics.median(t_ms)
        print(f"| {batch} | {z_first:.2f} / {z_total:.2f} | {t_total:.2f} | "
              f"{z_med:.4f} / {statistics.fmean(z_ms):.4f} | "
              f"{t_med:.4f} / {statistics.fmean(t_ms):.4f} | {t_med / z_med:.2f}x | "
              f"{after.compiles - before.compiles} | "
              f"{after.specializations - before.specializations} | "
              f"{after.disk_hits - before.disk_hits} | {error:.1e} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true",
                        help="compile the artifacts into ZYNML_CACHE_DIR and stop")
    parser.add_argument("--steps", type=int, default=4096,
                        help="decode steps, and the KV cache's length (default 4096)")
    parser.add_argument("--batch", default="1,16", help="batch sizes (default 1,16)")
    parser.add_argument("--warmup", type=int, default=2, help="warm-up passes of SDPA")
    parser.add_argument("--via", choices=("artifact", "program"), default="artifact",
                        help="how ZynML's step is called (see the module's docstring)")
    parser.add_argument("--group", choices=("constant", "input"), default="constant",
                        help="the GQA group in the source: the constant 4, or an input")
    args = parser.parse_args()
    group_input = args.group == "input"
    batches = [int(b) for b in args.batch.split(",")]
    if args.steps < 1 or any(b < 1 for b in batches):
        parser.error("--steps and --batch take positive integers")
    if args.compile_only:
        compile_only(batches, args.steps, group_input)
    else:
        run(batches, args.steps, args.warmup, args.via, group_input)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
