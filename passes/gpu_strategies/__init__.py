"""GPU kernel strategies: how one linalg.generic maps onto blocks and threads.

Each strategy is a module with `NAME`, a frozen `Params` dataclass (its tunable numbers,
as data), `matches(generic)` and `build(generic, gpu_module, kernel_name, params)`, which
adds one `gpu.func` and returns the `Launch` that runs it. `choose` tries them in order;
`pointwise` matches everything, so it comes last. `attention` and `row_fused` work on
runs of generics (`find_groups`, then `build(group, ...)`); linalg-to-gpu-kernels applies
them first, in that order.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from mlir import ir

__all__ = ["Launch", "STRATEGIES", "choose", "get_strategy"]

# Most specific first.
# implicit_gemm before row_reduce: a convolution's reduction loops make it a row too.
STRATEGIES = ("matmul_tensor_core", "matmul", "implicit_gemm", "row_reduce", "pointwise")


@dataclass
class Launch:
    kernel: str
    operands: list  # outer values, in the kernel's argument order
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0


def get_strategy(name: str) -> ModuleType:
    if name not in STRATEGIES:
        raise KeyError(f"unknown GPU strategy '{name}'; strategies: {', '.join(STRATEGIES)}")
    return importlib.import_module(f".{name}", __name__)


def choose(generic: ir.Operation) -> ModuleType:
    for name in STRATEGIES:
        strategy = get_strategy(name)
        if strategy.matches(generic):
            return strategy
    raise AssertionError("pointwise matches every generic")
