"""A decode step's matrix products alone: ZynML (`matvec`, `matvec_mma`) against cuBLAS
through PyTorch, at the 1b Llama's shapes, 1 and 16 rows of bf16.

    python benchmarks/decode_products.py --compile-only   # here (MLIR): fills the cache
    python benchmarks/decode_products.py                  # on the GPU (carry the cache)

Each product is timed as a graph of calls over distinct weight matrices (at least 400 MB
of them, so that no call finds its weights in L2, as in a step, whose layers each read
their own): ZynML's calls captured with `zynml.capture`, PyTorch's `a @ w` in a
`torch.cuda.CUDAGraph`, each replay queued behind a GPU sleep, the median of 15 replays
divided by the calls in it. `--params` compares strategy parameter sets (as
`zynml.compile(params=...)` takes them, e.g. "matvec_mma.warps=8"), and `--target` a
chip to compile for (sm_80: no clusters, so no split of k over blocks); each needs its
own `--compile-only` run. Columns: GPU microseconds per product, and the bytes of the weights
over that time against a device-to-device copy's rate (read + written) in the same run.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import ml_dtypes
import numpy as np

import zynml

MATMUL = Path(__file__).resolve().parent.parent / "zynml" / "kernels" / "src" / "matmul.zyn"
BF16 = np.dtype(ml_dtypes.bfloat16)
# the 1b Llama's (k, n): qkv, o, gate or up, down, the head, gate and up side by side
SHAPES = [(2048, 3072), (2048, 2048), (2048, 8192), (8192, 2048), (2048, 32000),
          (2048, 16384)]
ROWS = [1, 16]
WEIGHT_BYTES = 400_000_000


def _program(params: str, target: str | None, require_device: bool = True):
    return zynml.compile(MATMUL, device="cuda:0", params=params, target=target,
                         dynamic=False, require_device=require_device).matmul


def compile_only(param_sets: list[str], target: str | None) -> None:
    for params in param_sets:
        program = _program(params, target, require_device=False)._program
        for m in ROWS:
            for k, n in SHAPES:
                program.artifact(a=np.empty((m, k), BF16), b=np.empty((k, n), BF16))
        print(f"compiled: {params or 'defaults'}", flush=True)


def graph_ms(torch, replay, repeat: int = 15) -> float:
    """Median GPU milliseconds of `replay()` (gpu_vs_torch.median_ms), each queued behind
    a sleep longer than the host takes to launch it, so that the events time the GPU's
    work (a ZynML replay checks every captured call's inputs first)."""
    from gpu_vs_torch import median_ms  # benchmarks/
    replay()
    torch.cuda.synchronize()
    start = time.perf_counter()
    replay()
    host_seconds = time.perf_counter() - start
    torch.cuda.synchronize()
    cycles = int(host_seconds * 4e9) + 200_000  # twice the host time at about 2 GHz
    return median_ms(replay, repeat, torch, queue_cycles=cycles)


def run(param_sets: list[str], target: str | None) -> None:
    import torch
    big = torch.empty(2 ** 28, dtype=torch.float32, device="cuda")
    copy_gbs = 2 * big.numel() * 4 / graph_ms(torch, big.clone) / 1e6
    del big
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; device-to-device "
          f"copy {copy_gbs:.0f} GB/s (read + write); ZynML compiled for "
          f"{target or 'the default chip'}")
    print("| rows | k x n | cuBLAS us | of copy | " +
          " | ".join(f"ZynML {p or 'defaults'} us | of copy | vs cuBLAS | rel. error"
                     for p in param_sets) + " |")
    print("|---|---|---|---|" + "---|---|---|---|" * len(param_sets))
    for m in ROWS:
        for k, n in SHAPES:
            copies = max(4, -(-WEIGHT_BYTES // (k * n * 2)))
            weights = [torch.randn(k, n, device="cuda").to(torch.bfloat16)
                       for _ in range(copies)]
            a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            reference = a.double() @ weights[0].double()
            theirs = _torch_ms(torch, a, weights) / copies
            rate = lambda ms: f"{k * n * 2 / ms / 1e6 / copy_gbs:.0%}"
            cells = [f"{m} | {k} x {n} | {theirs * 1e3:.2f} | {rate(theirs)}"]
            for params in param_sets:
                product = _program(params, target)
                got = torch.from_dlpack(product(a, weights[0])).double()
                error = ((got - reference).norm() / reference.norm()).item()
                for w in weights:  # loads every kernel before the capture
                    product(a, w)
                with zynml.capture("cuda:0") as graph:
                    for w in weights:
                        product(a, w)
                ours = graph_ms(torch, graph.replay) / copies
                cells.append(f"{ours * 1e3:.2f} | {rate(ours)} | {theirs / ours:.2f}x | "
                             f"{error:.0e}")
                del graph
            print("| " + " | ".join(cells) + " |", flush=True)
            del weights
            torch.cuda.empty_cache()


def _torch_ms(torch, a, weights) -> float:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the capture, as PyTorch asks
        for w in weights:
            a @ w
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = [a @ w for w in weights]
    ms = graph_ms(torch, graph.replay)
    del outputs
    return ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--params", nargs="*", default=[""], metavar="SET",
                        help='strategy parameter sets to compare ("" = the defaults)')
    parser.add_argument("--target", help="the CUDA chip to compile for (default sm_90a)")
    args = parser.parse_args()
    if args.compile_only:
        compile_only(args.params, args.target)
    else:
        run(args.params, args.target)


if __name__ == "__main__":
    main()
