"""Time the SIMT GEMM's parameters (matmul, implicit_gemm on f32) against PyTorch.

    python benchmarks/tune_gemm_f32.py --compile-only   # here (MLIR): fills .tune/
    python benchmarks/tune_gemm_f32.py                  # on the GPU (carry .tune)

Each case (a row of gpu_vs_torch.py, by name) is compiled once per `Params` of its
strategy's grid into a cache folder of its own, .tune/gemm_f32/<case>-<params>/
(index-<strategy>.json lists them; the cache key ignores Params), with matmul's
`DEFAULT_PARAMS` (implicit_gemm's `CONFIGS`) swapped for the set. On the GPU every
folder's program runs on the same torch inputs (TF32 off), timed as gpu_vs_torch.py times
(`median_ms`: GPU time, each call queued behind a GPU sleep), next to PyTorch; each line
gives ZynML's and PyTorch's milliseconds, the ratio (> 1: ZynML faster), TFLOP/s and the
relative error against PyTorch. Both halves need the same compiler source (the cache key
has its hash). The winners belong in the strategies' Params defaults / CONFIGS.
"""
from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import numpy as np

import gpu_vs_torch  # benchmarks/gpu_vs_torch.py: the cases and the timing

TUNE = Path(__file__).resolve().parent.parent / ".tune" / "gemm_f32"

# strategy -> (the gpu_vs_torch cases it runs, its Params sets (fields given))
STRATEGIES: dict[str, tuple[tuple[str, ...], tuple[dict, ...]]] = {
    "matmul": (("matmul 4096 f32 (no TF32)",),
               ({}, {"tile_k": 16}, {"warp_m": 8}, {"tile_k": 16, "warp_m": 8},
                {"vector_loads": False}, {"tile_n": 64}, {"tile_m": 64},
                {"tile_n": 64, "tile_k": 16}, {"tile_m": 256}, {"tile_m": 256, "warp_m": 8})),
    "implicit_gemm": (("conv2d 32x64x56x56 3x3 f32",),
                      (dict(tile_m=64, tile_n=128, tile_k=8, thread_m=4, thread_n=8),
                       dict(tile_m=64, tile_n=128, tile_k=16, thread_m=4, thread_n=8),
                       dict(tile_m=64, tile_n=128, tile_k=8, thread_m=4, thread_n=8,
                            warp_m=8),
                       dict(tile_m=64, tile_n=128, tile_k=8, thread_m=8, thread_n=8),
                       dict(tile_m=64, tile_n=256, tile_k=8, thread_m=8, thread_n=8),
                       dict(tile_m=64, tile_n=256, tile_k=16, thread_m=8, thread_n=8),
                       dict(tile_m=64, tile_n=64, tile_k=8, thread_m=4, thread_n=4),
                       dict(tile_m=64, tile_n=128, tile_k=16, thread_m=8, thread_n=8),
                       dict(tile_m=64, tile_n=128, tile_k=8, thread_m=8, thread_n=4),
                       dict(tile_m=64, tile_n=128, tile_k=16, thread_m=8, thread_n=4))),
}


def _module(name: str):
    import importlib
    return importlib.import_module(f"zynml.passes.gpu_strategies.{name}")


def _folder(case: str, values: dict) -> str:
    case = re.sub(r"[^A-Za-z0-9]+", "_", case).strip("_")
    return f"{case}-{'-'.join(f'{k}{v}' for k, v in values.items()) or 'default'}"


def _case(name: str) -> gpu_vs_torch.Case:
    return next(c for c in gpu_vs_torch._cases() if c.name == name)


def _use(strategy: str, module, values: dict) -> None:
    if strategy == "matmul":
        module.DEFAULT_PARAMS = module.Params(**values)
    else:
        module.CONFIGS = (module.Params(**values),)


def compile_all(only: str) -> None:
    from zynml.runtime.cuda.artifact import launches
    for strategy, (cases, grid) in STRATEGIES.items():
        if only and only != strategy:
            continue
        index = []
        module = _module(strategy)
        saved = module.DEFAULT_PARAMS if strategy == "matmul" else module.CONFIGS
        for name in cases:
            case = _case(name)
            inputs = {n: np.broadcast_to(np.ones(1, spec[1]), spec[0]) if isinstance(spec, tuple)
                      else spec for n, spec in case.inputs.items()}
            for values in grid:
                _use(strategy, module, values)
                folder = _folder(name, values)
                os.environ["ZYNML_CACHE_DIR"] = str(TUNE / folder)
                prog = gpu_vs_torch._program(case, "cuda:0", require_device=False)
                artifact = prog.artifact(**inputs)
                kernels = [s["kernel"] for s in launches(artifact.plan["body"])]
                if not any(re.fullmatch(rf"k\d+_{strategy}", k) for k in kernels):
                    raise SystemExit(f"{name}: {strategy} does not take it ({kernels})")
                index.append({"case": name, "strategy": strategy, "params": values,
                              "cache": folder})
                print(f"compiled {name} {values}", flush=True)
        if strategy == "matmul":
            module.DEFAULT_PARAMS = saved
        else:
            module.CONFIGS = saved
        TUNE.mkdir(parents=True, exist_ok=True)
        (TUNE / f"index-{strategy}.json").write_text(json.dumps(index, indent=1))


def run(repeat: int) -> None:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    index = [e for path in sorted(TUNE.glob("index-*.json"))
             for e in json.loads(path.read_text())]
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
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
            call = (lambda p=prog: p(**tensors)[case.output])
            result = torch.as_tensor(call(), device="cuda").double()
            error = ((result - reference).norm() / reference.norm()).item()
            rows.append((gpu_vs_torch.median_ms(call, repeat, torch), error, entry))
        torch_again = gpu_vs_torch.median_ms(lambda: case.torch_fn(torch, tensors), repeat,
                                             torch)
        print(f"{name}: PyTorch {torch_ms:.4f} ms (again at the end: {torch_again:.4f})")
        for ms, error, entry in sorted(rows, key=lambda r: r[0]):
            print(f"  {ms:7.4f} ms  {torch_ms / ms:5.2f}x  {case.flops / ms / 1e9:5.1f} "
                  f"TFLOP/s  err {error:.1e}  {entry['strategy']} {entry['params']}",
                  flush=True)


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
