"""Autotune gpu_vs_torch.py's rows with ZynML's own tuner (Program.tune, zynml/autotune/).

    ZYNML_CACHE_DIR=.gpucache python benchmarks/tune_rows.py --compile-only   # here (MLIR)
    ZYNML_CACHE_DIR=.gpucache python benchmarks/tune_rows.py                  # on the GPU

Each row's program is tuned for the row's shapes: every parameter set of its kernels'
strategies (zynml/backend/cuda/strategies/tuning.py: SEARCH) is compiled here into the
cache, then timed there, and the winners go to the autotuning database in the same cache
folder, where `gpu_vs_torch.py` (same ZYNML_CACHE_DIR) uses them; ZYNML_AUTOTUNE=0 turns
them off for the baseline. The table per row gives the strategy's own choice's time, the
winner's and the winner's fields. Results go in docs/performance.md.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import gpu_vs_torch  # benchmarks/gpu_vs_torch.py: the rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true",
                        help="compile every candidate into the cache and stop (no GPU)")
    parser.add_argument("--only", default="", metavar="TEXT",
                        help="only the rows whose name contains TEXT")
    parser.add_argument("--limit", type=int, default=None,
                        help="at most N parameter sets per kernel")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for case in gpu_vs_torch._selected(args.only):
        program = gpu_vs_torch._program(case, "cuda:0", require_device=not args.compile_only)
        if case.pipeline:
            program = program.pipeline(case.pipeline)
        inputs = gpu_vs_torch._numpy_inputs(case, rng)
        report = program.tune(compile_only=args.compile_only, limit=args.limit,
                              progress=sys.stderr.isatty(), **inputs)
        print(f"## {case.name}", flush=True)
        if args.compile_only:
            print(f"compiled {sum(len(k.candidates) for k in report.kernels)} sets",
                  flush=True)
        else:
            print(report.table(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
