"""GPU kernel strategies: how linalg generics map onto blocks and threads.

Each strategy is a module with:

    NAME      its name (the `strategy` option of linalg-to-gpu-kernels)
    Params    a frozen dataclass of its tunable numbers (tuning.py says how they are chosen)
    REQUIRES  the chip features its kernels need (target.FEATURES; absent: none)
    DYNAMIC   True when it builds kernels for run-time extents (`?` sizes: extents.py);
              absent: it is given static generics only (pointwise takes the rest)

and, as REGISTRY says, one or both of
    single:   matches(generic, target) -> bool; build(generic, gpu_module, name, target)
    groups:   find_groups(generics, target) -> [group]; build(group, gpu_module, name, target)
where `build` adds one `gpu.func` and returns the `Launch` that runs it, and `target` is
the CudaTarget (chip facts, chosen params); a group strategy whose work takes several
kernels returns their Launches as a list, run in order. A Launch whose kernel fits only
some run-time sizes says which (`when`), and may say what runs elsewhere (`otherwise`).
A strategy declines (matches is false, or no
group is found) what it cannot build for the target, shared memory included.

linalg-to-gpu-kernels first lets the group strategies take the runs of generics one
kernel computes, in REGISTRY's order, then gives every other generic to the first single
strategy that matches; `pointwise` matches everything, so it comes last.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from mlir import ir

__all__ = ["Launch", "REGISTRY", "StrategyEntry", "TensorMap", "available",
           "BLOCKS_PER_MULTIPROCESSOR_ATTR", "STRATEGY_ATTR", "PROBLEM_ATTR", "get_strategy", "group_strategies",
           "later_group_launches", "single_strategies", "single_takes", "strategy_names",
           "takes_dynamic"]


@dataclass(frozen=True)
class StrategyEntry:
    name: str
    groups: bool = False  # takes runs of generics (find_groups)
    single: bool = True   # takes one generic (matches)


# The one table of strategies, in the order they are tried (most specific first).
REGISTRY = (
    # a few query rows per KV head (a decode step): the keys split over blocks, on
    # tensor cores (f16 / bf16) or FMAs
    StrategyEntry("attention_decode_mma", groups=True, single=False),
    StrategyEntry("attention_decode", groups=True, single=False),
    StrategyEntry("attention_wgmma", groups=True, single=False),
    StrategyEntry("attention_tensor_core", groups=True, single=False),
    StrategyEntry("attention_simt_tiled", groups=True, single=False),
    StrategyEntry("attention", groups=True, single=False),
    # a constant fill of C and the product accumulating into it (group), or the product
    StrategyEntry("matmul_wgmma", groups=True, single=True),
    StrategyEntry("row_fused", groups=True, single=False),
    # a product of 5-16 f16/bf16 rows on tensor cores (B read once), with or without
    # its fill; then of at most 16 rows of any float type on FMAs
    StrategyEntry("matvec_mma", groups=True, single=True),
    StrategyEntry("matvec", groups=True, single=True),
    StrategyEntry("matmul_tensor_core"),
    StrategyEntry("matmul", groups=True, single=True),
    # before row_reduce: a convolution's reduction loops make it a row too; f16 / bf16
    # products on tensor cores, others on FMAs
    StrategyEntry("implicit_gemm_mma"),
    StrategyEntry("implicit_gemm"),
    StrategyEntry("row_argreduce"),  # reduce(argmax / argmin): a block per row
    StrategyEntry("row_reduce"),
    StrategyEntry("transpose"),  # out[.., r, c] = f(in[.., c, r]): tiles in shared memory
    # a reduction with the constant fill of its output before it (group), or anything
    StrategyEntry("pointwise", groups=True, single=True),
)
_BY_NAME = {entry.name: entry for entry in REGISTRY}

# on a launch of a grid-stride kernel: the run time caps its grid's x at this many blocks
# per multiprocessor (Launch.blocks_per_multiprocessor; launch_plan.py records it)
BLOCKS_PER_MULTIPROCESSOR_ATTR = "zynml.blocks_per_multiprocessor"
# on every launch: the strategy that built its kernel, and the kernel's tuning problem
# (tuning.py), which the launch plan records for `zynml tune`
STRATEGY_ATTR = "zynml.strategy"
PROBLEM_ATTR = "zynml.problem"


@dataclass(frozen=True)
class TensorMap:
    """A kernel argument the host makes: the TMA descriptor of `source` (an outer memref)
    that copies `box`-shaped tiles; `type` is its !nvgpu.tensormap.descriptor. The kernel
    takes it as an !llvm.ptr and casts it to `type`."""
    source: ir.Value
    type: ir.Type
    box: tuple[int, ...]
    # reassociation groups: the descriptor is made of source collapsed by them (a
    # batched operand seen as one matrix); None: of source as it is
    collapse: tuple[tuple[int, ...], ...] | None = None


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
    # a host i1, or None: the kernel needs what run time knows of the sizes (TMA's
    # 16-byte rows, a row short enough for registers), so it runs only where `when`
    # holds; elsewhere `otherwise` runs (Launches, the first of which may have a `when`
    # of its own; empty: nothing), or, where that is None, the generics as the
    # strategies after this one build them (linalg-to-gpu-kernels)
    when: ir.Value | None = None
    otherwise: list | None = None


def strategy_names() -> list[str]:
    return [entry.name for entry in REGISTRY]


def get_strategy(name: str) -> ModuleType:
    if name not in _BY_NAME:
        raise KeyError(f"unknown GPU strategy '{name}'; strategies: "
                       f"{', '.join(strategy_names())}")
    return importlib.import_module(f".{name}", __name__)


def entry_of(name: str) -> StrategyEntry:
    get_strategy(name)  # the error that lists the names
    return _BY_NAME[name]


def available(strategy: ModuleType, target) -> bool:
    """Whether the target chip has the instructions the strategy's kernels need."""
    return target.has(getattr(strategy, "REQUIRES", ()))


def group_strategies(target) -> list[ModuleType]:
    return [get_strategy(e.name) for e in REGISTRY
            if e.groups and available(get_strategy(e.name), target)]


def later_group_launches(ops: list, after: str, gpu_module: ir.Operation, kernel_name: str,
                         target) -> list | None:
    """The Launches of the first group strategy after `after` in REGISTRY that takes
    `ops` as one run (kernels named after `kernel_name`'s number): what runs where a
    strategy's kernel, specialized at launch (`Launch.when`), does not apply; None
    where no other group strategy takes them (the generics then run one by one)."""
    names = [entry.name for entry in REGISTRY]
    number = kernel_name.split("_", 1)[0]
    for strategy in group_strategies(target):
        if names.index(strategy.NAME) <= names.index(after):
            continue
        found = strategy.find_groups(list(ops), target)
        if found:
            launch = strategy.build(found[0], gpu_module, f"{number}_{strategy.NAME}", target)
            return launch if isinstance(launch, list) else [launch]
    return None


def single_strategies(target) -> list[ModuleType]:
    return [get_strategy(e.name) for e in REGISTRY
            if e.single and available(get_strategy(e.name), target)]


def takes_dynamic(strategy: ModuleType) -> bool:
    """Whether a strategy builds kernels for run-time extents (extents.py); the others
    are given static generics only, so they decline the rest by not seeing them, and
    those fall to pointwise."""
    return getattr(strategy, "DYNAMIC", False)


def single_takes(strategy: ModuleType, generic: ir.Operation, target) -> bool:
    """Whether single strategy `strategy` takes `generic`: it matches, and builds
    run-time extents where the generic has them."""
    from .extents import has_dynamic_extent
    return (takes_dynamic(strategy) or not has_dynamic_extent(generic)) and \
        strategy.matches(generic, target)
