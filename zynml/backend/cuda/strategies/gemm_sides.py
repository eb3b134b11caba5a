"""The two sides of an implicit GEMM (implicit_gemm.py's `a` and `b`), evaluated from
the body's slices at coordinates of the kernel's choosing, and the stages of k.

A Side clones its value's backward slice in parts (body_slices.py's loops of each
value): what depends on the batch loops only, once a kernel; what depends on its own
loops, once a staged element (`hoist`); what depends on k, once per k (`k_part`); and the
rest (`at`). k_plan orders the reduction loops so that the k of one stage of BK share
every loop's coordinate but the last (a convolution's (ic, kh, kw) becomes (kh, kw, ic));
KPlan and KStage give a stage's k as loop coordinates, in range, with whether each is
inside K.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith

from .body_slices import backward_slice, body_dims, loop_index_clamps
from .extents import as_index, ceil_div, is_static, minus, product
from .kernel_builder import (apply_map, delinearize, generic_operands, index_const,
                             indexing_maps)
from .simt_gemm import clamp

__all__ = ["KPlan", "KStage", "Part", "Side", "coordinates", "k_plan"]


@dataclass
class Part:
    ivs: dict          # loop -> coordinate
    values: dict       # body value -> kernel value
    inside: ir.Value | None = None  # k < K (k parts)


class Side:
    """`value` (and `mask`) of one side of the product, cloned from the body in parts:
    ops on batch loops only (once per kernel), on this side's and batch loops (`hoist`,
    once per staged element, before the loop over k), on reduction and batch loops
    (`k_part`, per k), and the rest (`at`)."""

    def __init__(self, generic, scope, ranges, gemm, value, mask, loops, k_loops: list,
                 batch: dict):
        self.scope, self.value, self.mask = scope, value, mask
        self.zero, self.operand = gemm.zero, gemm.operand  # as the block's products take
        self.loops = loops
        self.ranges = ranges
        ins, _ = generic_operands(generic)
        self.reads = dict(zip(generic.regions[0].blocks[0].arguments,
                              zip(ins, indexing_maps(generic))))
        # coordinates given here are in their loops' ranges (clamped where they could
        # pass the end): such clamps are their index (a run-time-size kernel's gathers
        # then multiply no clamped index per element)
        self.clamps = loop_index_clamps(generic)
        dims = body_dims(generic)
        ops, args = backward_slice(generic, [value] + ([mask] if mask is not None else []))
        remaining, self.parts = ops + args, []
        for within in (set(batch), set(loops) | set(batch), set(k_loops) | set(batch), None):
            def fits(x, within=within):
                values = x.results if isinstance(x, ir.Operation) else [x]
                return within is None or all(dims[v] <= within for v in values)
            self.parts.append([x for x in remaining if fits(x)])
            remaining = [x for x in remaining if not fits(x)]
        self.common = Part(dict(batch), self._clone(self.parts[0], batch, None))

    def hoist(self, index: ir.Value) -> Part:
        ivs = dict(self.common.ivs)
        ivs.update(coordinates(clamp(index, self._extent(self.loops)), self.loops,
                                self.ranges))
        return Part(ivs, self._clone(self.parts[1], ivs, self.common.values))

    def k_part(self, stage: "KStage", offset: ir.Value) -> Part:
        """The part of k = stage's k0 + offset (offset < BK)."""
        ivs = dict(self.common.ivs)
        coordinates, inside = stage.at(offset)
        ivs.update(coordinates)
        return Part(ivs, self._clone(self.parts[2], ivs, self.common.values), inside)

    def at(self, hoisted: Part, k_part: Part) -> ir.Value:
        """The side's element at (hoisted's point, k_part's k), as the block's products
        take it (SIMT: f32), 0 where masked."""
        ivs = {**hoisted.ivs, **k_part.ivs}
        values = self._clone(self.parts[3], ivs, {**hoisted.values, **k_part.values})
        inside = k_part.inside
        if self.mask is not None:
            inside = arith.AndIOp(inside, values[self.mask]).result
        return arith.SelectOp(inside, self.operand(values[self.value]), self.zero).result

    def _clone(self, part, ivs: dict, known: dict | None) -> dict:
        bound = {clamp: ivs[d] for clamp, d in self.clamps.items() if ivs.get(d) is not None}
        ops = [x for x in part if isinstance(x, ir.Operation) and
               not (len(x.results) == 1 and x.results[0] in bound)]
        for arg in (x for x in part if not isinstance(x, ir.Operation)):
            operand, amap = self.reads[arg]
            ivs_list = [ivs.get(d) for d in range(len(self.ranges))]
            bound[arg] = self.scope.load(operand, apply_map(amap, ivs_list)) \
                if isinstance(operand.type, ir.MemRefType) else self.scope.value(operand)
        return self.scope.clone_slice(ops, bound, lambda d: ivs[d], known)

    def _extent(self, loops):
        return product([self.ranges[d] for d in loops])


def k_plan(loops: list[int], extents: list, tile_k: int) -> tuple[list[int], bool]:
    """(the reduction loops in the order k linearizes them, whether stages split k along
    the last one: KPlan). Last: the longest loop whose extent is a multiple of BK (the
    latest of equals), so the k of one stage share every other loop's coordinate. A
    convolution's k (ic, kh, kw) becomes (kh, kw, ic): a staged input element's bounds
    and clamps are then the same for all its stage's k, and its address moves by a
    constant stride with ic. With run-time extents (None) and none that divides, the
    first run-time loop (a convolution's channels: the window's loops come after it),
    its last stage of each run partial. Otherwise the loops as they are, unsplit."""
    fits = [d for d in loops if extents[d] is not None and extents[d] % tile_k == 0]
    if fits:
        inner = max(reversed(fits), key=lambda d: extents[d])
    elif any(extents[d] is None for d in loops):
        inner = next(d for d in loops if extents[d] is None)
    else:
        return list(loops), False
    return [d for d in loops if d != inner] + [inner], True


class KPlan:
    """k as stages of BK, built in the kernel (`ranges`: numbers, or index values).

    split: each run of the last loop (extent E) takes ceil(E / BK) stages, the others'
    coordinates fixed within a stage: trip = (the other loops' extents) x ceil(E / BK) x
    BK, k0 / BK the stage. Unsplit: k = k0 + offset runs to K, each split alone."""

    def __init__(self, loops: list[int], ranges: list, tile_k: int, split: bool,
                 whole_stages: bool = False):
        self.loops, self.ranges, self.tile_k, self.split = loops, ranges, tile_k, split
        if split:
            self.inner = ranges[loops[-1]]
            # BK divides E (known, or tested at launch): no per-k masks or clamps
            self.exact = whole_stages or (is_static(self.inner) and self.inner % tile_k == 0)
            self.runs = ceil_div(self.inner, tile_k)  # stages per run of the last loop
            self.stages = product([ranges[d] for d in loops[:-1]] + [self.runs])
            self.trip = product([self.stages, tile_k])
        else:
            self.trip = product([ranges[d] for d in loops])


class KStage:
    """The k of one shared-memory stage, k0 + offset for offset < BK, as loop coordinates
    (KPlan). Split: the stage's other coordinates once from k0, clamped to the last stage
    (the read past the end stays in bounds; masked by k0 < trip), the last loop's
    (k0 / BK mod runs) x BK + offset, clamped and masked where E is no multiple of BK."""

    def __init__(self, k0: ir.Value, plan: KPlan):
        self.k0, self.plan = k0, plan
        if plan.split:  # one test of k0 < trip for the stage (unsplit: per k, in `at`)
            self.inside = arith.CmpIOp(arith.CmpIPredicate.ult, k0,
                                       as_index(plan.trip)).result
            stage = arith.DivUIOp(k0, index_const(plan.tile_k)).result
            stage = arith.MinUIOp(stage, as_index(minus(plan.stages, 1))).result
            runs = as_index(plan.runs)
            self.outer = coordinates(arith.DivUIOp(stage, runs).result, plan.loops[:-1],
                                      plan.ranges) if len(plan.loops) > 1 else {}
            self.inner0 = arith.MulIOp(arith.RemUIOp(stage, runs).result,
                                       index_const(plan.tile_k)).result

    def at(self, offset: ir.Value) -> tuple[dict, ir.Value]:
        """(loop -> coordinate, k < K) of k = k0 + offset."""
        plan = self.plan
        if plan.split:
            inner = arith.AddIOp(self.inner0, offset).result
            if plan.exact:
                return {**self.outer, plan.loops[-1]: inner}, self.inside
            inside = arith.AndIOp(self.inside, arith.CmpIOp(
                arith.CmpIPredicate.ult, inner, as_index(plan.inner)).result).result
            return {**self.outer, plan.loops[-1]: clamp(inner, plan.inner)}, inside
        k = arith.AddIOp(self.k0, offset).result
        inside = arith.CmpIOp(arith.CmpIPredicate.ult, k, as_index(plan.trip)).result
        return coordinates(clamp(k, plan.trip), plan.loops, plan.ranges), inside


def coordinates(linear: ir.Value, loops: list[int], ranges: list[int]) -> dict:
    return dict(zip(loops, delinearize(linear, [ranges[d] for d in loops])))
