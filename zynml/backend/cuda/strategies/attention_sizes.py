"""The attention kernels at run-time sizes: which kernel a call runs, chosen by the
launch plan at each call from the sizes (Triton's specialization on divisibility and
on the head dim, taken at run time: nothing recompiles).

attention_wgmma and attention read the batch, heads, query and key lengths off their
buffers, but build their tiles (and lanes) for one head dim, and attention_wgmma its
last key tile's check for one case. So a group of run-time sizes gets a kernel per case,
tried in order under `Launch.when`:

    head dim D (each of the strategy's head dims where Q's and V's are run-time sizes,
    else theirs):
      keys in whole key tiles (`block_n`)  -> attention_wgmma without the per-key bound
                                              check (a mask staged in shared memory)
      otherwise                            -> the kernel checking the last tile's keys
    none of them                           -> the generics, as the strategies after this
                                              one build them (a head dim of 96, say)

A scale that is a value of the call (`1 / sqrt(head_dim)` of a run-time head dim) is
the kernels' argument; where a kernel needs it > 0 (attention_wgmma takes max(s) * c for
max(s * c)) each test asks that too.
"""
from __future__ import annotations

from typing import Callable, Optional

from mlir import ir
from mlir.dialects import arith, memref

from .extents import as_index
from .kernel_builder import index_const
from .flash_skeleton import host_sizes, run_time_scale, run_time_sizes

__all__ = ["head_dim_cases", "per_head_dim", "run_time_launch"]


def head_dim_cases(group, head_dims: tuple[int, ...]) -> list[Optional[int]]:
    """The head dims to build kernels for: None (Q's and V's own, static), or each of
    `head_dims` where both are run-time; [] where only one of them is."""
    shapes = [ir.MemRefType(v.type).shape for v in (group.query, group.value)]
    dynamic = [ir.ShapedType.is_dynamic_size(shape[-1]) for shape in shapes]
    if not any(dynamic):
        return [None]
    return list(head_dims) if all(dynamic) else []


def per_head_dim(group, kernel_name: str, head_dims: tuple[int, ...], build: Callable):
    """A strategy's Launch that needs no more than its head dims fixed: `build(name,
    head_dim)`'s for the group's own (static sizes), or one per head dim under the
    plan's tests (run-time sizes)."""
    if not run_time_sizes(group):
        return build(kernel_name, None)
    return run_time_launch(group, kernel_name, head_dim_cases(group, head_dims),
                           lambda name, head_dim, _: build(name, head_dim))


def run_time_launch(group, kernel_name: str, cases: list[Optional[int]], build: Callable,
                    block_n: Optional[int] = None, positive_scale: bool = False):
    """The Launch chain described above; `build(name, head_dim, whole_key_tiles)`
    builds one kernel's Launch (head_dim None: the group's own); `block_n`: the key tile
    to split whole tiles from partial ones at (None: one kernel per head dim);
    `positive_scale`: the kernels need a run-time scale > 0."""
    first = previous = None
    for head_dim in cases:
        name = f"{kernel_name}_d{head_dim}" if len(cases) > 1 else kernel_name
        with ir.InsertionPoint(group.ops[-1]), group.ops[-1].location:
            fits = _fits(group, head_dim, positive_scale)
        launch = build(name + ("_partial" if block_n else ""), head_dim, False)
        launch.when, last = fits, launch
        if block_n:
            whole = build(name, head_dim, True)
            with ir.InsertionPoint(group.ops[-1]), group.ops[-1].location:
                keys = as_index(host_sizes(group)[2])
                whole.when = _both(fits, arith.CmpIOp(arith.CmpIPredicate.eq, arith.RemUIOp(
                    keys, index_const(block_n)).result, index_const(0)).result)
            whole.otherwise, launch = [last], whole
        if previous is None:
            first = launch
        else:
            previous.otherwise = [launch]
        previous = last  # its otherwise: the next head dim's kernels, or the generics
    return first


def _fits(group, head_dim: Optional[int], positive_scale: bool) -> Optional[ir.Value]:
    """On the host: Q's and V's head dims are `head_dim` (None: static, nothing to
    test) and (`positive_scale`) a run-time scale is > 0; an i1, or None for always."""
    test = None
    if head_dim is not None:
        for buffer in (group.query, group.value):
            rank = ir.MemRefType(buffer.type).rank
            extent = memref.DimOp(buffer, index_const(rank - 1)).result
            test = _both(test, arith.CmpIOp(arith.CmpIPredicate.eq, extent,
                                            index_const(head_dim)).result)
    if positive_scale and run_time_scale(group):
        zero = arith.ConstantOp(group.scale.type, 0.0).result
        test = _both(test, arith.CmpFOp(arith.CmpFPredicate.OGT, group.scale, zero).result)
    return test


def _both(a: Optional[ir.Value], b: Optional[ir.Value]) -> Optional[ir.Value]:
    if a is None or b is None:
        return b if a is None else a
    return arith.AndIOp(a, b).result
