"""GPU kernel strategies: how one linalg.generic maps onto blocks and threads.

Each strategy is a module with `NAME`, a frozen `Params` dataclass (its tunable numbers,
as data), `matches(generic)` and `build(generic, gpu_module, kernel_name, params)`, which
adds one `gpu.func` and returns the `Launch` that runs it. `choose` tries them in order;
`pointwise` matches everything, so it comes last. A strategy that needs one
architecture's instructions lists the chips that have them in `REQUIRES_CHIPS`. `attention_tensor_core`, `attention` and `row_fused` work on
runs of generics (`find_groups`, then `build(group, ...)`); linalg-to-gpu-kernels applies
them first, in that order.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from mlir import ir

__all__ = ["Launch", "STRATEGIES", "TensorMap", "available", "choose", "get_strategy"]

# Most specific first.
# implicit_gemm before row_reduce: a convolution's reduction loops make it a row too.
STRATEGIES = ("matmul_wgmma", "matmul_tensor_core", "matmul", "implicit_gemm", "row_reduce", "pointwise")


# on a launch of a grid-stride kernel: the run time caps its grid's x at this many blocks
# per multiprocessor (Launch.blocks_per_multiprocessor; launch_plan.py records it)
BLOCKS_PER_MULTIPROCESSOR_ATTR = "zynml.blocks_per_multiprocessor"


@dataclass(frozen=True)
class TensorMap:
    """A kernel argument the host makes: the TMA descriptor of `source` (an outer memref)
    that copies `box`-shaped tiles; `type` is its !nvgpu.tensormap.descriptor. The kernel
    takes it as an !llvm.ptr and casts it to `type`."""
    source: ir.Value
    type: ir.Type
    box: tuple[int, ...]


@dataclass
class Launch:
    kernel: str
    operands: list  # outer values (or TensorMaps of them), in the kernel's argument order
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0  # dynamic shared memory per block
    # > 0: the kernel loops over its work (grid-stride), and the run time caps grid[0] at
    # this many blocks per multiprocessor of the device it runs on
    blocks_per_multiprocessor: int = 0


def get_strategy(name: str) -> ModuleType:
    if name not in STRATEGIES:
        raise KeyError(f"unknown GPU strategy '{name}'; strategies: {', '.join(STRATEGIES)}")
    return importlib.import_module(f".{name}", __name__)


def available(strategy: ModuleType, chip: str) -> bool:
    """Whether `chip` has what the strategy's kernels need (`REQUIRES_CHIPS`: the chips
    with its instructions; absent: every chip)."""
    return chip in getattr(strategy, "REQUIRES_CHIPS", (chip,))


def choose(generic: ir.Operation, chip: str = "sm_90a") -> ModuleType:
    for name in STRATEGIES:
        strategy = get_strategy(name)
        if available(strategy, chip) and strategy.matches(generic):
            return strategy
    raise AssertionError("pointwise matches every generic")
