"""Time the memory-bound strategies' parameters (pointwise, row_fused) against PyTorch.

    python benchmarks/tune_memory_bound.py --compile-only   # here (MLIR): fills .tune/
    python benchmarks/tune_memory_bound.py                  # on the GPU (carry .tune)

Each case (a row of gpu_vs_torch.py) is compiled once per `Params` set of its strategy
(STRATEGIES) into .tune/memory_bound/, with the strategy's `DEFAULT_PARAMS` swapped for
the set, and timed on the GPU next to PyTorch, with GB/s and the share of a copy's
bandwidth: benchmarks/tune_cases.py says how.
"""
from __future__ import annotations

from pathlib import Path

import tune_cases
from tune_cases import grid

TUNE = Path(__file__).resolve().parent.parent / ".tune" / "memory_bound"

# strategy -> (the gpu_vs_torch cases it runs, its grid of Params fields)
STRATEGIES: tune_cases.Table = {
    "pointwise": (("GELU (tanh) 64M f32", "bias + GELU 8x2048x4096 f32"),
                  grid(vector_bytes=(16,), vectors=(1, 2, 4),
                       vector_block=(128, 256, 512, 1024)) +
                  # grid-stride: one resident wave (2048 threads per multiprocessor)
                  grid(vector_bytes=(16,), vectors=(2,), vector_block=(256, 512),
                       blocks_per_multiprocessor=(4, 8))),
    "row_fused": (("softmax 16384x2048 f32", "layernorm 16384x4096 f32",
                   "residual + layernorm 8x2048x4096 f32"),
                  ({"block": 32, "max_points": 64}, {"block": 64, "max_points": 64},
                   {"block": 64, "max_points": 32}, {"block": 128, "max_points": 32},
                   {"block": 256, "max_points": 32}, {"block": 512, "max_points": 32},
                   {"block": 1024, "max_points": 32})),
}


if __name__ == "__main__":
    raise SystemExit(tune_cases.main(__doc__.splitlines()[0], STRATEGIES, TUNE))
