"""Which `Params` a strategy builds a kernel with.

A strategy proposes candidates for the kernel at hand (its defaults, or the configs that
suit the shape, best first) and builds with the first that fits the target. Each
candidate is first tuned, from the most specific to the least:

    1. `strategy@problem.field=value`  this kernel's problem only (`zynml tune` writes these)
    2. `strategy.field=value`          every kernel of the strategy
    3. CHIP_TUNING[chip][strategy]     measured values of one chip

1 and 2 come from linalg-to-gpu-kernels' `params` option (CudaTarget.params: entries
joined by ';', target.params_text), so they are part of the pipeline text and of the
artifact cache key; `parse` checks them against the strategies' Params.
A problem is named by `problem_key`: the shapes and element types of what the kernel
takes, e.g. `4096x4096f16_4096x4096f16_4096x4096f16` for a 4096^3 f16 product.

    linalg-to-gpu-kernels{chip=sm_90a params=matmul_wgmma.stages=3;pointwise.vectors=2}
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from typing import Callable, Iterable, Optional, TypeVar

from mlir import ir

from . import get_strategy

__all__ = ["CHIP_TUNING", "SEARCH", "TuningError", "parse", "choose", "tuned", "problem_key",
           "problem_of", "grid"]

P = TypeVar("P")

# chip -> strategy -> {field: value}. The strategies' defaults were measured on an H100
# (sm_90a; see each strategy's comments and docs/performance.md): a chip whose best
# values differ gets an entry here, with the measurement that chose it.
CHIP_TUNING: dict[str, dict[str, dict[str, object]]] = {}



def grid(**values) -> tuple[dict, ...]:
    """Every combination of the given fields' values (Params keyword arguments)."""
    return tuple(dict(zip(values, combo)) for combo in itertools.product(*values.values()))


# strategy -> the Params fields `zynml tune` tries, one dict per set (each set applied
# over the strategy's own choice for the kernel; sets that do not fit are skipped). From
# the grids of the scripts that chose the defaults on an H100 (benchmarks/tune_*.py,
# before `zynml tune` replaced them; docs/performance.md), widened a little.
SEARCH: dict[str, tuple[dict, ...]] = {
    "pointwise": grid(vectors=(1, 2, 4), vector_block=(128, 256, 512, 1024)) +
    # grid-stride: one resident wave (2048 threads per multiprocessor)
    grid(vectors=(2,), vector_block=(256, 512), blocks_per_multiprocessor=(4, 8)),
    "row_fused": ({"block": 32, "max_points": 64}, {"block": 64, "max_points": 64},
                  {"block": 64, "max_points": 32}, {"block": 128, "max_points": 32},
                  {"block": 256, "max_points": 32}, {"block": 512, "max_points": 32},
                  {"block": 1024, "max_points": 32}),
    "row_reduce": grid(max_block=(128, 256, 512, 1024)),
    "row_argreduce": grid(max_block=(64, 128, 512, 1024)),
    "transpose": ({"tile": 64, "rows_per_step": 8}, {"tile": 32, "rows_per_step": 4},
                  {"tile": 64, "rows_per_step": 16}),
    "matvec": grid(column_threads=(1, 2, 4, 8), threads=(128, 256, 512)) +
    grid(splits=(1, 2, 3, 4, 6, 8)),
    "matvec_mma": grid(warps=(2, 4), unroll=(1, 2, 4)) + grid(splits=(1, 2, 4, 8)),
    "matmul": ({"tile_k": 16}, {"warp_m": 8}, {"tile_k": 16, "warp_m": 4},
               {"vector_loads": False}, {"tile_n": 64}, {"tile_m": 64},
               {"tile_n": 64, "tile_k": 16}, {"tile_m": 256}, {"tile_m": 256, "warp_m": 4}),
    # over the default 64 x 256 tiles, BK 32, 2 x 4 warps
    "implicit_gemm_mma": ({"tile_n": 128}, {"tile_n": 128, "warps_m": 4, "warps_n": 2},
                          {"tile_k": 16}, {"warps_m": 4}, {"warps_n": 8},
                          {"tile_m": 128, "tile_n": 128, "warps_m": 4, "warps_n": 2},
                          {"tile_n": 64, "warps_n": 2},
                          {"tile_k": 64, "tile_n": 64, "warps_n": 2},
                          {"tile_m": 128, "tile_k": 16, "warps_m": 4}, {"copy_a": False}),
    "implicit_gemm": (dict(tile_m=64, tile_n=128, tile_k=8, thread_m=4, thread_n=8),
                      dict(tile_m=64, tile_n=128, tile_k=16, thread_m=4, thread_n=8),
                      dict(tile_m=64, tile_n=128, tile_k=8, thread_m=8, thread_n=8),
                      dict(tile_m=64, tile_n=256, tile_k=8, thread_m=8, thread_n=8),
                      dict(tile_m=64, tile_n=256, tile_k=16, thread_m=8, thread_n=8),
                      dict(tile_m=64, tile_n=64, tile_k=8, thread_m=4, thread_n=4),
                      dict(tile_m=64, tile_n=128, tile_k=16, thread_m=8, thread_n=4),
                      dict(tile_m=128, tile_n=128, tile_k=8, thread_m=8, thread_n=8),
                      dict(tile_m=128, tile_n=128, tile_k=16, thread_m=8, thread_n=8),
                      dict(tile_m=64, tile_n=256, tile_k=16, thread_m=8, thread_n=8, warp_m=8),
                      dict(tile_m=64, tile_n=256, tile_k=16, thread_m=8, thread_n=8, warp_m=2),
                      {"copy_a": True}),
    "matmul_tensor_core": grid(frags_m=(2, 4), frags_n=(2, 4), stage_k=(0, 32, 64)),
    "matmul_wgmma": ({"persistent": False}, {"group_m": 1}, {"group_m": 16},
                     {"group_m": 32}, {"stages": 3}, {"stages": 5}, {"tile_n": 128},
                     {"tile_n": 128, "stages": 6}),
    "attention_decode": grid(warps=(2, 4, 8), blocks=(132, 264, 528), min_trips=(1, 2, 4),
                             unroll=(2, 4)),
    "attention_decode_mma": grid(warps=(2, 4, 8), blocks_per_multiprocessor=(1, 2, 3, 4),
                                 min_trips=(1, 2), unroll=(1, 2)),
    "attention": grid(rows_per_block=(32, 64, 128), block_k=(16, 32, 64),
                      max_per_lane=(16, 32)),
    "attention_simt_tiled": grid(block_m=(64, 128), block_n=(32, 64), thread_m=(4, 8),
                                 thread_n=(2, 4, 8)),
    "attention_tensor_core": grid(warps=(2, 4, 8), m_tiles=(1, 2), block_n=(16, 32, 64),
                                  q_shared=(False, True)),
    "attention_wgmma": grid(block_n=(64, 128, 192), stages=(2, 3), overlap=(True, False),
                            persistent=(True, False)),
}

_ENTRY = re.compile(r"(?P<strategy>[a-z_0-9]+)(?:@(?P<problem>[A-Za-z0-9_+\-]+))?"
                    r"\.(?P<field>[a-z_0-9]+)=(?P<value>[^;=]+)")


class TuningError(ValueError):
    """A params entry that names no strategy or field, or a value of the wrong type."""


@dataclasses.dataclass(frozen=True)
class Entry:
    strategy: str
    problem: str       # "" for every problem of the strategy
    field: str
    value: object


@functools.lru_cache(maxsize=64)
def parse(text: str) -> tuple[Entry, ...]:
    """`params` option text -> entries, each checked against its strategy's Params."""
    entries = []
    for item in filter(None, text.split(";")):
        match = _ENTRY.fullmatch(item)
        if match is None:
            raise TuningError(f"bad params entry '{item}': expected "
                              "STRATEGY[@PROBLEM].FIELD=VALUE")
        strategy, field = match["strategy"], match["field"]
        params = _params_class(strategy)
        fields = {f.name: f for f in dataclasses.fields(params)}
        if field not in fields:
            raise TuningError(f"strategy '{strategy}' has no parameter '{field}'; its "
                              f"parameters: {', '.join(fields)}")
        entries.append(Entry(strategy, match["problem"] or "", field,
                             _value(item, fields[field], match["value"])))
    return tuple(entries)


def _params_class(strategy: str) -> type:
    try:
        return get_strategy(strategy).Params
    except KeyError as err:
        raise TuningError(str(err.args[0])) from None


def _value(item: str, field: dataclasses.Field, raw: str) -> object:
    kind = field.type if isinstance(field.type, str) else field.type.__name__
    if kind == "bool":
        if raw not in ("true", "false", "1", "0"):
            raise TuningError(f"'{item}': {field.name} is true or false")
        return raw in ("true", "1")
    if kind == "int":
        try:
            return int(raw)
        except ValueError:
            raise TuningError(f"'{item}': {field.name} is an integer") from None
    raise TuningError(f"'{item}': parameters of type {kind} cannot be set")


def _overrides(strategy: str, problem: str, chip: str, params_text: str) -> dict:
    """The fields tuned for (strategy, problem) on `chip`, least specific first."""
    fields = dict(CHIP_TUNING.get(chip, {}).get(strategy, {}))
    entries = [e for e in parse(params_text) if e.strategy == strategy]
    fields.update({e.field: e.value for e in entries if not e.problem})
    fields.update({e.field: e.value for e in entries if e.problem == problem})
    return fields


def choose(strategy: str, candidates: Iterable[P], target, problem: str,
           fits: Callable[[P], bool]) -> Optional[P]:
    """The first candidate, tuned for `problem` on `target`, that `fits`; None: none does
    (the strategy declines the kernel)."""
    fields = _overrides(strategy, problem, target.chip, target.params)
    for candidate in candidates:
        try:
            tuned = dataclasses.replace(candidate, **fields) if fields else candidate
        except (ValueError, AssertionError) as err:  # the Params' own checks
            raise TuningError(f"{strategy} parameters {fields} do not go together: "
                              f"{err}") from None
        if fits(tuned):
            return tuned
    return None


def tuned(strategy: str, default: P, target, problem: str) -> P:
    """`default` tuned for `problem` (a strategy with one Params set)."""
    return choose(strategy, [default], target, problem, lambda p: True)


def problem_key(values) -> str:
    """The shapes and element types of the values a kernel takes (its operands), each as
    `4096x4096f16` (a dynamic size as `d`, a scalar as its type), joined by '_'."""
    parts = []
    for value in values:
        if isinstance(value.type, ir.ShapedType):
            shaped = ir.ShapedType(value.type)
            dims = ["d" if ir.ShapedType.is_dynamic_size(n) else str(n) for n in shaped.shape]
            parts.append("x".join(dims) + str(shaped.element_type))
        else:
            parts.append(str(value.type))
    return "_".join(re.sub(r"[^A-Za-z0-9]", "", part) for part in parts)


def problem_of(strategy, taken) -> str:
    """The problem key of what `strategy` took: its `problem(group)` for runs of
    generics, the operands of one generic otherwise."""
    own = getattr(strategy, "problem", None)
    return own(taken) if own is not None else problem_key(taken.operands)
