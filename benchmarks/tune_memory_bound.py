"""Time the memory-bound strategies' parameters (pointwise, row_fused) against PyTorch.

    python benchmarks/tune_memory_bound.py --compile-only   # here (MLIR): fills .tune/
    python benchmarks/tune_memory_bound.py                  # on the GPU (carry .tune)

Each case (a row of gpu_vs_torch.py, by name) is compiled once per `Params` of its
strategy's grid into a cache folder of its own, .tune/memory_bound/<case>-<params>/
(index-<strategy>.json lists them; the cache key ignores Params), with the strategy's `DEFAULT_PARAMS` swapped for the set. On
the GPU every folder's program runs on the same torch inputs, timed as gpu_vs_torch.py
times (median of 20 calls, CUDA events), next to PyTorch; each line gives ZynML's and
PyTorch's milliseconds, the ratio (> 1: ZynML faster), GB/s, the share of a
device-to-device copy's bandwidth measured in the same run, and the relative error
against PyTorch. Both halves need the same compiler source (the cache key has its hash).
The winners belong in the strategies' `Params` defaults, the figures in
docs/performance.md.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import re
from pathlib import Path

import numpy as np

import gpu_vs_torch  # benchmarks/gpu_vs_torch.py: the cases and the timing

TUNE = Path(__file__).resolve().parent.parent / ".tune" / "memory_bound"


def _grid(**values) -> tuple[dict, ...]:
    return tuple(dict(zip(values, combo)) for combo in itertools.product(*values.values()))


# strategy -> (the gpu_vs_torch cases it runs, its grid of Params fields)
STRATEGIES: dict[str, tuple[tuple[str, ...], tuple[dict, ...]]] = {
    "pointwise": (("GELU (tanh) 64M f32", "bias + GELU 8x2048x4096 f32"),
                  _grid(vector_bytes=(16,), vectors=(1, 2, 4),
                        vector_block=(128, 256, 512, 1024)) +
                  # grid-stride: one resident wave (2048 threads per multiprocessor)
                  _grid(vector_bytes=(16,), vectors=(2,), vector_block=(256, 512),
                        blocks_per_multiprocessor=(4, 8))),
    "row_fused": (("softmax 16384x2048 f32", "layernorm 16384x4096 f32",
                   "residual + layernorm 8x2048x4096 f32"),
                  ({"block": 32, "max_points": 64}, {"block": 64, "max_points": 64},
                   {"block": 64, "max_points": 32}, {"block": 128, "max_points": 32},
                   {"block": 256, "max_points": 32}, {"block": 512, "max_points": 32},
                   {"block": 1024, "max_points": 32})),
}


def _module(name: str):
    import importlib
    return importlib.import_module(f"zynml.passes.gpu_strategies.{name}")


def _folder(case: str, values: dict) -> str:
    case = re.sub(r"[^A-Za-z0-9]+", "_", case).strip("_")
    return f"{case}-{'-'.join(f'{k}{v}' for k, v in values.items())}"


def _case(name: str) -> gpu_vs_torch.Case:
    return next(c for c in gpu_vs_torch._cases() if c.name == name)


def compile_all(only: str) -> None:
    from zynml.runtime.cuda.artifact import launches
    for strategy, (cases, grid) in STRATEGIES.items():
        if only and only != strategy:
            continue
        index = []
        module = _module(strategy)
        for name in cases:
            case = _case(name)
            inputs = {n: np.broadcast_to(np.ones(1, spec[1]), spec[0]) if isinstance(spec, tuple)
                      else spec for n, spec in case.inputs.items()}
            for values in grid:
                module.DEFAULT_PARAMS = module.Params(**values)
                folder = _folder(name, values)
                os.environ["ZYNML_CACHE_DIR"] = str(TUNE / folder)
                prog = gpu_vs_torch._program(case, "cuda:0", require_device=False)
                if case.pipeline:
                    prog = getattr(prog, case.pipeline)._program
                artifact = prog.artifact(**inputs)
                kernels = [s["kernel"] for s in launches(artifact.plan["body"])]
                if not any(re.fullmatch(rf"k\d+_{strategy}", k) for k in kernels):
                    raise SystemExit(f"{name}: {strategy} does not take it ({kernels})")
                index.append({"case": name, "strategy": strategy, "params": values,
                              "cache": folder})
                print(f"compiled {name} {values}", flush=True)
        TUNE.mkdir(parents=True, exist_ok=True)
        (TUNE / f"index-{strategy}.json").write_text(json.dumps(index, indent=1))


def run(repeat: int) -> None:
    import torch
    index = [e for path in sorted(TUNE.glob("index-*.json"))
             for e in json.loads(path.read_text())]
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    big = torch.empty(2 ** 28, dtype=torch.float32, device="cuda")
    copy_gbs = 2 * big.numel() * 4 / gpu_vs_torch.median_ms(lambda: big.clone(), repeat,
                                                              torch) / 1e6
    print(f"# ceiling: device-to-device copy {copy_gbs:.0f} GB/s (read + write)")
    for name in dict.fromkeys(e["case"] for e in index):
        case = _case(name)
        host = gpu_vs_torch._numpy_inputs(case, np.random.default_rng())
        tensors = {n: gpu_vs_torch._to_torch(torch, v) if isinstance(v, np.ndarray) else v
                   for n, v in host.items()}
        reference = case.torch_fn(torch, tensors).double()
        torch_ms = gpu_vs_torch.median_ms(lambda: case.torch_fn(torch, tensors), repeat, torch)
        rows = []
        for entry in (e for e in index if e["case"] == name):
            os.environ["ZYNML_CACHE_DIR"] = str(TUNE / entry["cache"])
            prog = gpu_vs_torch._program(case, "cuda:0", require_device=True)
            call = (lambda p=getattr(prog, case.pipeline): p(**tensors)) if case.pipeline \
                else (lambda p=prog: p(**tensors)[case.output])
            result = torch.as_tensor(call(), device="cuda").double()
            error = ((result - reference).norm() / reference.norm()).item()
            rows.append((gpu_vs_torch.median_ms(call, repeat, torch), error, entry))
        torch_again = gpu_vs_torch.median_ms(lambda: case.torch_fn(torch, tensors), repeat,
                                             torch)
        print(f"{name}: PyTorch {torch_ms:.4f} ms (again at the end: {torch_again:.4f})")
        for ms, error, entry in sorted(rows, key=lambda r: r[0]):
            gbs = case.bytes / ms / 1e6
            print(f"  {ms:7.4f} ms  {torch_ms / ms:5.2f}x  {gbs:5.0f} GB/s "
                  f"{100 * gbs / copy_gbs:5.1f}%  err {error:.1e}  {entry['strategy']} "
                  f"{entry['params']}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true",
                        help="compile every case and parameter set into .tune/ and stop")
    parser.add_argument("--strategy", default="", choices=("", *STRATEGIES),
                        help="compile only this strategy's cases")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    compile_all(args.strategy) if args.compile_only else run(args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
