"""ZynML's own CUDA target, as validated options (the native backend's `IreeTarget`).

    CudaTarget()                      sm_90a (H100/H200), PTX ISA 8.0, LLVM -O3
    CudaTarget("sm_80")               A100
    CudaTarget.parse("sm_89")         from a command-line `--target`

The chip decides the PTX ISA version: each chip needs at least the ISA that introduced
it (PTX ISA notes of the CUDA docs), and the CUDA 13 toolkit and driver accept up to 9.0.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CudaTarget", "DEFAULT_CHIP", "PTX_ISA"]

DEFAULT_CHIP = "sm_90a"

# chip -> the PTX ISA it needs (+ptxNN is LLVM NVPTX's feature name for ISA N.N).
PTX_ISA = {
    "sm_70": 60, "sm_75": 63, "sm_80": 70, "sm_86": 71, "sm_87": 74, "sm_89": 78,
    "sm_90": 78, "sm_90a": 80, "sm_100": 86, "sm_100a": 86, "sm_120": 87, "sm_120a": 87,
}


# chip -> the most shared memory one block may opt into, bytes (CUDA programming guide,
# "Technical Specifications per Compute Capability").
MAX_SHARED_PER_BLOCK = {
    "sm_70": 98304, "sm_75": 65536, "sm_80": 166912, "sm_86": 101376, "sm_87": 166912,
    "sm_89": 101376, "sm_90": 232448, "sm_90a": 232448, "sm_100": 232448,
    "sm_100a": 232448, "sm_120": 101376, "sm_120a": 101376,
}
MAX_THREADS_PER_BLOCK = 1024


@dataclass(frozen=True)
class CudaTarget:
    """chip: an NVIDIA architecture (`sm_90a`); opt_level: LLVM's -O for the kernels."""

    chip: str = DEFAULT_CHIP
    opt_level: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.chip, str) or self.chip not in PTX_ISA:
            raise ValueError(f"unknown CUDA target {self.chip!r}; known: {', '.join(PTX_ISA)}")
        if self.opt_level not in (0, 1, 2, 3):
            raise ValueError(f"CudaTarget.opt_level must be 0..3, not {self.opt_level!r}")

    @staticmethod
    def parse(text: str) -> "CudaTarget":
        match = re.fullmatch(r"(sm_\d+a?)", text.strip())
        if not match:
            raise ValueError(f"bad CUDA target '{text}': expected e.g. sm_90a, sm_80")
        return CudaTarget(match.group(1))

    @property
    def ptx_features(self) -> str:
        return f"+ptx{PTX_ISA[self.chip]}"

    @property
    def compute_capability(self) -> tuple[int, int]:
        digits = re.sub(r"\D", "", self.chip)
        return int(digits[:-1]), int(digits[-1])

    @property
    def max_shared_per_block(self) -> int:
        return MAX_SHARED_PER_BLOCK[self.chip]

    def cache_key(self) -> str:
        return f"cuda:{self.chip}:O{self.opt_level}"
