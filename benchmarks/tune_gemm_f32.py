"""Time the SIMT GEMM's parameters (matmul, implicit_gemm on f32) against PyTorch.

    python benchmarks/tune_gemm_f32.py --compile-only   # here (MLIR): fills .tune/
    python benchmarks/tune_gemm_f32.py                  # on the GPU (carry .tune)

Each case (a row of gpu_vs_torch.py) is compiled once per `Params` set of its strategy
(STRATEGIES) into .tune/gemm_f32/, with matmul's `DEFAULT_PARAMS` (implicit_gemm's
`CONFIGS`) swapped for the set, and timed on the GPU (TF32 off) next to PyTorch, with
TFLOP/s: benchmarks/tune_cases.py says how. The winners belong in the strategies' Params
defaults / CONFIGS.
"""
from __future__ import annotations

from pathlib import Path

import tune_cases

TUNE = Path(__file__).resolve().parent.parent / ".tune" / "gemm_f32"

# strategy -> (the gpu_vs_torch cases it runs, its Params sets (fields given))
STRATEGIES: tune_cases.Table = {
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


def _use(module, values: dict) -> None:
    """matmul builds with DEFAULT_PARAMS; implicit_gemm picks from CONFIGS."""
    if hasattr(module, "DEFAULT_PARAMS"):
        module.DEFAULT_PARAMS = module.Params(**values)
    else:
        module.CONFIGS = (module.Params(**values),)


if __name__ == "__main__":
    raise SystemExit(tune_cases.main(__doc__.splitlines()[0], STRATEGIES, TUNE, use=_use))
