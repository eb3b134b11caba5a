"""The outputs of a compute: one tensor per `out` argument of its body (cir-to-linalg).

A `cir.multi_compute` (`let (a, b) = compute(...)`) whose outputs are each written once,
over the same loops, by `out.a[i, j] = ...`, becomes ONE `linalg.generic` with a result
per output, so the values they share are computed once and one kernel writes them all
(an output that is a `mut` input's update may be written in part, at offsets, a KV
cache's row at a run-time position: its tile goes into the input's values):

    "cir.store"(%p2, %out0, %i)  "cir.store"(%m2, %out1, %i)     (one loop over i)
  becomes
    %r:2 = linalg.generic {iterator_types = ["parallel"]} ins(%p, %g, ...)
             outs(%e0, %e1) { ... linalg.yield %p2, %m2 }

Any other layout (outputs of different shapes, several writes of one output, a partial
write of a new output) lowers each output on its own, as a block of one output does
(nest_lowering.py); the reductions they read are computed once either way.
"""
from __future__ import annotations

from typing import Optional

from mlir import ir

from .cir_ops import i64_array, ops_in
from .generic_region import LoweringError
from .linalg_emit import PARALLEL, covers, identity_map
from .scatter_lowering import lower_scatter

__all__ = ["lower_outputs"]


def lower_outputs(nest, result_types: list[ir.Type]) -> list[ir.Value]:
    """The value of each output of `nest`'s compute (a NestLowering), in order."""
    outs = nest.L.out_args
    operands = list(nest.compute.operands)
    inits = [None if k < 0 else operands[k]
             for k in i64_array(nest.compute, "inits") or [-1] * len(outs)]
    stores = [[op for op in ops_in(nest.body) if op.name == "cir.store"
               and op.operands[1] == out] for out in outs]
    if any("combine" in s.attributes for written in stores for s in written):
        return [lower_scatter(nest, written, t, init)
                if any("combine" in s.attributes for s in written)
                else nest.lower_stores(t, out, init)
                for out, written, t, init in zip(outs, stores, result_types, inits)]
    if len(outs) == 1:
        return [nest.lower_stores(result_types[0], outs[0], inits[0])]
    fused = _one_generic(nest, stores, result_types, inits)
    if fused is not None:
        return fused
    return [nest.lower_stores(t, out, init) for out, t, init in zip(outs, result_types, inits)]


def _one_generic(nest, stores: list[list[ir.Operation]], result_types: list[ir.Type],
                 inits: list) -> Optional[list[ir.Value]]:
    """One generic computing every output, when each is one plain write over the same
    loops (covering the whole of a `mut` input's output); None otherwise."""
    from .nest_lowering import loop_of
    if any(len(written) != 1 for written in stores):
        return None
    layouts = []
    for (store,) in stores:
        ctx = nest.context(store)
        if nest.guarded(store) or any(len(loop_of(iv).results) for iv in ctx):
            return None  # the lowering of one output says why
        try:
            layouts.append(nest._store_layout(store, ctx))
        except LoweringError:
            return None
    dims = layouts[0].dims
    if any(layout.dims != dims for layout in layouts[1:]):
        return None
    extents = [nest.static_bound(iv) for iv in dims]
    # a new output's shape is its loops' extents, run-time ones included; a `mut` input's
    # is its own, so a run-time extent may write part of it
    whole = [layout.plain and (covers(extents, shape) if init is None else extents == shape)
             for layout, init, shape in zip(
                 layouts, inits, (list(ir.RankedTensorType(t).shape) for t in result_types))]
    if any(not w and init is None for w, init in zip(whole, inits)):
        return None  # a partial write of a new output: the rest is zeros, on its own
    location = stores[0][0].location if not dims else loop_of(dims[-1]).location
    nest.unmasked(dims, location)
    bounds = [nest.bound(iv) for iv in dims]
    empties = [nest.L.empty(bounds, ir.RankedTensorType(t).element_type)
               for t in result_types]
    n = len(dims)
    tiles = nest.generic(dims, [PARALLEL] * n, [written[0].operands[0] for written in stores],
                         [(empty, identity_map(n)) for empty in empties],
                         lambda vals, outs: vals)
    # a partial update of a `mut` input (a KV cache's row at a run-time position): the
    # tile goes into the input's values
    return [nest._cast(tile if w else nest._insert(tile, init, layout), t)
            for tile, w, init, layout, t in zip(tiles, whole, inits, layouts, result_types)]
