"""Time the flash-attention kernel's parameters (passes/gpu_strategies/attention.py).

    python benchmarks/tune_attention.py --compile-only   # here (MLIR): .tune/attention/
    python benchmarks/tune_attention.py                  # on the GPU (carry .tune)

Each case is compiled once per `Params` of the grid into an artifact; on the GPU each
artifact runs on the same torch inputs (median of 20 calls, CUDA events, as gpu_vs_torch.py times) and the fastest
comes first. The winner belongs in `Params`' defaults, with the figures in
docs/performance.md.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from gpu_vs_torch import median_ms  # benchmarks/gpu_vs_torch.py: the same timing

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / ".tune" / "attention"
CASES = {  # name -> (Q/K/V shape, dtype)
    "bert f32": ((8, 12, 512, 64), "float32"),
    "seq4096 d128 f16": ((1, 16, 4096, 128), "float16"),
}
GRID = dict(rows_per_block=(32, 64, 128), block_k=(16, 32, 64), max_per_lane=(16, 32))


def compile_all() -> None:
    import zynml
    from zynml.passes.gpu_strategies import attention
    OUT.mkdir(parents=True, exist_ok=True)
    index = []
    for case, (shape, dtype) in CASES.items():
        inputs = {n: np.ones(shape, dtype) for n in "QKV"}
        inputs["mask"] = np.ones(shape[2:3] * 2, bool)
        for values in itertools.product(*GRID.values()):
            params = attention.Params(**dict(zip(GRID, values)))
            attention.DEFAULT_PARAMS = params
            with tempfile.TemporaryDirectory() as cache:  # the cache key ignores Params
                os.environ["ZYNML_CACHE_DIR"] = cache
                program = zynml.compile(ROOT / "tests/programs/examples/attention.zyn",
                                        device="cuda:0", require_device=False)
                path = OUT / f"{case.replace(' ', '_')}-{'-'.join(map(str, values))}.zynart"
                program.artifact(**inputs).save(path)
            index.append({"case": case, "params": dict(zip(GRID, values)), "path": path.name})
            print(f"compiled {case} {values}", flush=True)
    (OUT / "index.json").write_text(json.dumps(index, indent=1))


def run() -> None:
    import torch
    import zynml
    index = json.loads((OUT / "index.json").read_text())
    results = []
    for case, (shape, dtype) in CASES.items():
        tensors = {n: torch.randn(shape, dtype=getattr(torch, dtype), device="cuda")
                   for n in "QKV"}
        tensors["mask"] = torch.ones(shape[2:3] * 2, dtype=torch.bool, device="cuda")
        for entry in (e for e in index if e["case"] == case):
            program = zynml.load(OUT / entry["path"])
            results.append((case, median_ms(lambda: program(**tensors), 20, torch),
                            entry["params"]))
    for case in CASES:
        rows = sorted((r for r in results if r[0] == case), key=lambda r: r[1])
        for _, ms, params in rows:
            print(f"{case:18s} {ms:8.3f} ms  {params}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    compile_all() if args.compile_only else run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
