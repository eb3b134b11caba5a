"""Llama decode steps: ZynML's graph replay against PyTorch eager and torch.compile
(mode="reduce-overhead", CUDA graphs), one GPU.

    python benchmarks/decode.py --compile-only   # here (MLIR): fills the cache
    python benchmarks/decode.py                  # on the GPU (carry the cache)

Both halves must see the same ZYNML_CACHE_DIR and the same --config, --batch and
--context. The model is zynml/models/llama.py (issue 20's: 16 layers, hidden 2048, 32
query / 8 KV heads, head dim 64, vocab 32000, bf16, random weights) and its PyTorch twin
zynml/models/llama_torch.py with the same weights. For each batch, first a check: a
short greedy generation on both, logits compared (bf16: 1e-2 relative). Then, for each
position (a context of that many tokens in the caches), per decode step:

* GPU ms: the median of CUDA events around one step queued behind a GPU sleep of about
  10 ms (longer than Python takes to launch any step: a graph's replay() checks every
  captured input first), so the events time the GPU's work alone. ZynML: one graph
  replay; PyTorch: the
  step eager, and compiled (each compiled once per batch, after warm-up, weights and
  caches marked static, checked against eager first; the position a 0-d tensor, so
  positions compile nothing).
* tokens/s: batch / the wall time of a step as a generation loop runs it (ZynML: write
  the token and position, replay, read the next tokens; PyTorch: the step and its
  argmax read back), the median of --steps.
* roofline: the fewest bytes a step reads (every weight but the embedding's other rows,
  and the keys and values of `position` positions) / the device-to-device copy rate
  measured in the same run (bytes read + written per second); `of roofline` = roofline
  time / ZynML's GPU time.
* launches: ZynML's per step (1 graph launch holding N kernel nodes, from C calls), and
  the host time of one `replay()` call (launching, not waiting).

The caches hold random values: timing does not depend on them (the same slot is written
again each repeat; the scatter adds, which changes no timing).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from zynml.compile_only import DeviceScalar, cpu_values_cuda_artifacts
from zynml.models.llama import CONFIGS, Llama, init_parameters

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


def compile_only(args) -> None:
    """Every kernel a GPU run calls, compiled at its shapes (zynml/compile_only.py): a
    stand-in device (host buffers, CUDA programs), the position a 0-d device scalar as
    the GPU run's is, each batch's step, reset and check once."""
    import zynml
    config = _config(args)
    params = init_parameters(config, seed=0)
    for batch in args.batch:
        dev = zynml.Device("cpu")
        dev.name, dev.kind = "cuda:0", "cuda"
        dev.alloc = lambda shape, dtype=np.float32: np.zeros(shape, dtype)
        with cpu_values_cuda_artifacts():
            model = Llama(config, params, dev, batch=batch, context=max(args.context))
            model.pos = DeviceScalar(np.array(0, np.int64))
            model.reset()
            model.step()
        print(f"compiled: batch {batch}", flush=True)


def _config(args):
    config = CONFIGS[args.config]
    return config.with_dtype(args.dtype) if args.dtype else config


# about 10 ms of GPU clock cycles: longer than Python takes to launch a step
QUEUE_CYCLES = 20_000_000


def gpu_ms(fn, repeat: int, torch) -> float:
    """Median GPU milliseconds of `fn()` (gpu_vs_torch.median_ms), each call queued
    behind a sleep long enough for a whole decode step's launches."""
    from gpu_vs_torch import median_ms  # benchmarks/
    return median_ms(fn, repeat, torch, queue_cycles=QUEUE_CYCLES)


def run(args) -> None:
    import torch
    from gpu_vs_torch import median_ms  # benchmarks/
    torch.backends.cuda.matmul.allow_tf32 = False
    config = _config(args)
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}; "
          f"{args.config} {config.dtype}, context {max(args.context)}")
    big = torch.empty(2 ** 28, dtype=torch.float32, device="cuda")
    copy_gbs = 2 * big.numel() * 4 / median_ms(lambda: big.clone(), args.repeat, torch) / 1e6
    del big
    print(f"# ceiling: device-to-device copy {copy_gbs:.0f} GB/s (read + write)")
    print("| batch | position | ZynML GPU ms | eager GPU ms | compile GPU ms | ZynML tok/s "
          "| eager tok/s | compile tok/s | vs compile | roofline ms | of roofline "
          "| ZynML launches |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    params = init_parameters(config, seed=0)
    for batch in args.batch:
        ours, theirs = _models(config, params, batch, max(args.context), torch)
        for position in args.context:
            _row(args, ours, theirs, batch, position - 1, copy_gbs, torch)
        if args.kernels:
            _kernel_table(ours, batch, max(args.context) - 1, args.kernels, torch)
        del ours, theirs
        torch.cuda.empty_cache()


def _models(config, params, batch: int, context: int, torch):
    """ZynML's model (checked, captured) and PyTorch's (eager and compiled)."""
    from zynml.models.llama_torch import TorchLlama
    ours = Llama(config, params, "cuda:0", batch=batch, context=context)
    theirs = TorchLlama(config, params, batch, context, device="cuda")
    prompt = np.random.default_rng(batch).integers(0, config.vocab, (batch, 4))
    try:
        got = ours.generate(prompt, 4)
        ours.timed_step = ours.replay
    except Exception as err:  # stream capture fails on the H100 today (docs/devices.md)
        print(f"# batch {batch}: graph capture failed ({type(err).__name__}: {err}); "
              "ZynML's step is timed as its calls one by one", flush=True)
        ours.graph = None
        got = ours.generate(prompt, 4, use_graph=False)
        ours.timed_step = ours.step
    _check(config, params, batch, context, prompt, got, theirs, torch)
    torch._dynamo.reset()
    for tensor in theirs.static_tensors():
        torch._dynamo.mark_static_address(tensor)
    theirs.compiled = torch.compile(theirs.step, mode="reduce-overhead", dynamic=False)
    return ours, theirs


def _check(config, params, batch, context, prompt, got, theirs, torch) -> None:
    """ZynML's logits and PyTorch's (same dtype) against PyTorch in f32, both fed
    ZynML's tokens (greedy sequences part at the first near tie in bf16, after which
    logits compare nothing): ZynML passes at up to twice PyTorch's error, or 1e-2
    (1e-3 in f32) where that is more, as tests/models/test_llama_cuda.py does."""
    from zynml.models.llama_torch import TorchLlama
    with torch.no_grad():
        _, theirs_logits = theirs.generate(prompt, 4, forced=got.tokens)
        if config.dtype == "float32":
            reference = theirs_logits
        else:
            wide = {name: value.astype(np.float32) for name, value in params.items()}
            exact = TorchLlama(config.with_dtype("float32"), wide, batch, context, "cuda")
            _, reference = exact.generate(prompt, 4, forced=got.tokens)
            del exact
            torch.cuda.empty_cache()
    ours_error = max(_relative(a, b) for a, b in zip(got.logits, reference))
    theirs_error = max(_relative(a, b) for a, b in zip(theirs_logits, reference))
    allowed = max(2 * theirs_error, 1e-2 if config.dtype == "bfloat16" else 1e-3)
    print(f"# batch {batch}: logits against PyTorch f32 on ZynML's tokens: ZynML "
          f"{ours_error:.1e}, PyTorch {config.dtype} {theirs_error:.1e} relative"
          f"{'' if ours_error <= allowed else f' (OVER {allowed:.1e})'}", flush=True)


def _relative(actual, expected) -> float:
    actual, expected = (np.asarray(a, np.float64) for a in (actual, expected))
    return float(np.abs(actual - expected).max() / np.abs(expected).max())


def _row(args, ours, theirs, batch, pos, copy_gbs, torch) -> None:
    tokens = np.random.default_rng(pos).integers(0, ours.config.vocab, batch)
    ours.set_inputs(tokens, pos)
    t_tokens = torch.as_tensor(tokens, device="cuda")
    t_pos = torch.tensor(pos, device="cuda")
    with torch.no_grad():
        eager_out = theirs.step(t_tokens, t_pos)
        for _ in range(3):  # warm-up: the compile, then the graph's recording
            compiled_out = theirs.compiled(t_tokens, t_pos)
        scale = eager_out.float().abs().max()
        if float((compiled_out.float() - eager_out.float()).abs().max() / scale) > 2e-2:
            print(f"# batch {batch} position {pos}: torch.compile differs from eager")
        gpu = [gpu_ms(ours.timed_step, args.repeat, torch),
               gpu_ms(lambda: theirs.step(t_tokens, t_pos), args.repeat, torch),
               gpu_ms(lambda: theirs.compiled(t_tokens, t_pos), args.repeat, torch)]
        host = _host_ms(ours.timed_step, args.repeat, torch)

        def ours_loop():
            ours.set_inputs(tokens, pos)
            ours.dev.download(ours.timed_step()["next"])

        loops = [_wall(ours_loop, args.steps),
                 _wall(lambda: theirs.step(t_tokens, t_pos).argmax(-1).cpu(), args.steps),
                 _wall(lambda: theirs.compiled(t_tokens, t_pos).argmax(-1).cpu(), args.steps)]
    roofline = ours.bytes_per_step(pos + 1) / (copy_gbs * 1e6)
    rates = " | ".join(f"{batch / s:,.0f}" for s in loops)
    if ours.graph is not None:
        nodes = getattr(ours.graph._graph, "nodes", "?")
        launches = (f"1 graph ({nodes} kernels, {len(ours.graph.outputs)} calls; replay() "
                    f"{host:.2f} ms on the host)")
    else:
        launches = f"no graph: {4 + 13 * ours.config.layers} calls, {host:.2f} ms on the host"
    print(f"| {batch} | {pos + 1} | {gpu[0]:.3f} | {gpu[1]:.3f} | {gpu[2]:.3f} | {rates} | "
          f"{gpu[2] / gpu[0]:.2f}x | {roofline:.3f} | {roofline / gpu[0]:.0%} | "
          f"{launches} |", flush=True)


def _kernel_table(ours, batch: int, pos: int, top: int, torch) -> None:
    """ZynML's step at `pos` by kernel: GPU time from PyTorch's profiler (CUPTI sees
    every kernel of the process, ZynML's too), the `top` longest by total time."""
    from torch.profiler import ProfilerActivity, profile
    ours.set_inputs(np.zeros(batch, np.int64), pos)
    ours.timed_step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        ours.timed_step()
        torch.cuda.synchronize()
    kernels = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            calls, total = kernels.get(event.name, (0, 0.0))
            kernels[event.name] = (calls + 1, total + event.device_time / 1e3)
    total = sum(ms for _, ms in kernels.values())
    print(f"\n# batch {batch}, position {pos + 1}: {sum(c for c, _ in kernels.values())} "
          f"kernels, {total:.3f} GPU ms\n\n| kernel | calls | GPU ms | share |\n|---|---|---|---|")
    for name, (calls, ms) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"| {name[:60]} | {calls} | {ms:.3f} | {ms / total:.0%} |")
    print(flush=True)


def _host_ms(fn, repeat: int, torch) -> float:
    """Median host milliseconds of `fn()` alone (the GPU drained before each)."""
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    torch.cuda.synchronize()
    return statistics.median(times)


def _wall(step, steps: int) -> float:
    """The median wall time of `step` (each ends by reading a result back)."""
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="1b", choices=sorted(CONFIGS))
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), help="default: the config's")
    parser.add_argument("--batch", type=_ints, default=[1, 16], help="e.g. 1,16")
    parser.add_argument("--context", type=_ints, default=[128, 1024, 4096],
                        help="positions in the caches at each timed step; the largest is "
                             "the caches' length")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--steps", type=int, default=20, help="steps of the wall-clock loop")
    parser.add_argument("--kernels", type=int, default=0, metavar="N",
                        help="also print ZynML's N longest kernels of a step (profiler)")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    compile_only(args) if args.compile_only else run(args)


if __name__ == "__main__":
    main()
