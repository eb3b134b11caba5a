"""Time matmul_wgmma's parameters (zynml/backend/cuda/strategies/matmul_wgmma.py) next to torch.

    python benchmarks/tune_matmul.py --compile-only   # here (MLIR): fills .tune/matmul_wgmma
    python benchmarks/tune_matmul.py                  # on the GPU (carry .tune)

Modeled on tune_attention.py: each case is compiled once per `Params` of GRID into a
cache folder of its own, .tune/matmul_wgmma/CASE-PARAMS/ (the cache key ignores Params),
with the strategy's CONFIGS replaced by that one set. On the GPU each folder's program
runs on the same torch inputs through zynml.compile's per-call path and is timed the two
ways gpu_vs_torch.py times (`median_ms`: GPU time, each call queued behind a GPU sleep;
and per call, launch included), next to torch's `A @ B` timed the same two ways, with
its relative error against torch's result; the fastest comes first.
Both halves need the same compiler source (the cache key has its hash). The winners
belong in CONFIGS, with the figures in docs/performance.md. `--limit N` takes the first
N sets; `--only TEXT` the cases whose name has TEXT.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Optional

import numpy as np

from gpu_vs_torch import median_ms  # benchmarks/gpu_vs_torch.py: the same timing

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "programs" / "examples"
TUNE = ROOT / ".tune" / "matmul_wgmma"

# keyword arguments of Params, one dict per set: the defaults first, then one change at
# a time (persistence, raster order, stages, tile width)
GRID: tuple[dict, ...] = (
    {},
    {"persistent": False},
    {"group_m": 1},
    {"group_m": 16},
    {"group_m": 32},
    {"stages": 3},
    {"tile_n": 128},
    {"tile_n": 128, "stages": 6},
)
# name -> (M, K, N, dtype)
CASES = {"4096 f16": (4096, 4096, 4096, "float16"),
         "4096 bf16": (4096, 4096, 4096, "bfloat16"),
         "8192x8192x4096 f16": (8192, 4096, 8192, "float16")}


def _folder(case: str, values: dict) -> str:
    tag = "-".join(f"{k}={v}" for k, v in values.items()) or "default"
    return f"{case.replace(' ', '_')}-{tag}"


def compile_all(limit: Optional[int], only: str) -> None:
    import ml_dtypes
    import zynml
    from zynml.backend.cuda.strategies import matmul_wgmma as module
    from zynml.runtime.cuda.artifact import launches
    TUNE.mkdir(parents=True, exist_ok=True)
    index = []
    for case, (m, k, n, dtype) in CASES.items():
        if only not in case:
            continue
        np_type = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
        inputs = {"A": np.ones((m, k), np_type), "B": np.ones((k, n), np_type)}
        for values in GRID[:limit]:
            params = module.Params(**values)
            module.CONFIGS = (params,)
            folder = _folder(case, values)
            os.environ["ZYNML_CACHE_DIR"] = str(TUNE / folder)
            artifact = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda:0",
                                     require_device=False).artifact(**inputs)
            steps = [s for s in launches(artifact.plan["body"])
                     if re.fullmatch(rf"k\d+_{module.NAME}", s["kernel"])]
            if not steps:
                raise SystemExit(f"{case}: {module.NAME} does not take it")
            index.append({"case": case, "params": values, "cache": folder,
                          "grid": steps[0]["grid"]})
            print(f"compiled {case} {values} grid {steps[0]['grid']}", flush=True)
    (TUNE / "index.json").write_text(json.dumps(index, indent=1))


def run(only: str) -> None:
    import torch
    import zynml
    index = json.loads((TUNE / "index.json").read_text())
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for case, (m, k, n, dtype) in CASES.items():
        entries = [e for e in index if e["case"] == case]
        if only not in case or not entries:
            continue
        t = getattr(torch, dtype)
        a, b = torch.randn(m, k, dtype=t, device="cuda"), torch.randn(k, n, dtype=t, device="cuda")

        def mm():
            return a @ b
        reference = mm().double()
        torch_ms, torch_call = median_ms(mm, 20, torch), median_ms(mm, 20, torch, queued=False)
        flops = 2 * m * n * k
        rows = []
        for entry in entries:
            os.environ["ZYNML_CACHE_DIR"] = str(TUNE / entry["cache"])
            program = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda:0")

            def call():
                return program(A=a, B=b)["C"]
            result = torch.as_tensor(call(), device="cuda").double()
            error = ((result - reference).norm() / reference.norm()).item()
            rows.append((median_ms(call, 20, torch), median_ms(call, 20, torch, queued=False),
                         error, entry["params"], entry["grid"]))
        print(f"{case}: PyTorch {torch_ms:.3f} ms ({flops / torch_ms / 1e9:.0f} TFLOP/s), "
              f"per call {torch_call:.3f} ms")
        for ms, per_call, error, params, grid in sorted(rows, key=lambda r: r[0]):
            print(f"  {ms:7.3f} ms  {torch_ms / ms:5.2f}x  {flops / ms / 1e9:6.1f} TFLOP/s | "
                  f"per call {per_call:7.3f} ms {torch_call / per_call:5.2f}x | "
                  f"err {error:.1e}  {params or 'defaults'} planned grid {grid[0]}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true",
                        help="compile every case and parameter set into .tune and stop")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="only the first N parameter sets")
    parser.add_argument("--only", default="", metavar="TEXT",
                        help="only the cases whose name contains TEXT")
    args = parser.parse_args()
    if args.compile_only:
        compile_all(args.limit, args.only)
    else:
        run(args.only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
