"""The launch plan's steps for run-time sizes (launch_plan.py's docstring shows them):
a dimension of a view ("dim"), and views whose sizes or strides are known only when the
plan runs ("subview", "collapse", "expand"; a `memref.cast` is its source). The
executor (zynml/runtime/cuda/executor.py) computes their sizes and strides from the
views it holds."""
from __future__ import annotations

from mlir import ir

__all__ = ["PlanError", "RUN_TIME_VIEWS", "dim_step", "run_time_subview"]


class PlanError(ValueError):
    """The host code does something the launch plan cannot express (launch_plan.py
    exports it)."""

    def __init__(self, message: str, location: ir.Location | None = None):
        super().__init__(message)
        self.location = location


def dim_step(extractor, op: ir.Operation) -> dict:
    """`memref.dim %v, %i` -> {"op": "dim", ...}: the view's size at run time."""
    return {"op": "dim", "result": extractor.define(op.results[0]),
            "source": extractor.name(op.operands[0]), "index": extractor.name(op.operands[1])}


def run_time_subview(extractor, op: ir.Operation) -> dict:
    """A subview with run-time sizes, or of a source with run-time strides."""
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)[1:]
    dyn = {"offsets": operands[:segments[1]],
           "sizes": operands[segments[1]:segments[1] + segments[2]]}
    if segments[3]:
        raise PlanError("a subview with run-time steps on the host", op.location)

    def values(key: str) -> list:
        out = []
        for value in ir.DenseI64ArrayAttr(op.attributes[f"static_{key}"]):
            out.append(extractor.name(dyn[key].pop(0)) if value == dynamic else value)
        return out

    offsets, sizes = values("offsets"), values("sizes")
    steps = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    result = ir.MemRefType(op.results[0].type)
    return {"op": "subview", "result": extractor.define(op.results[0]),
            "source": extractor.name(op.operands[0]), "offsets": offsets,
            "sizes": sizes, "steps": steps, "kept": _kept(sizes, result.rank)}


def _kept(sizes: list, rank: int) -> list[int]:
    """The source dimensions a (rank-reducing) subview keeps: a unit size is dropped
    while more dimensions remain than the result has, from the front."""
    drop = len(sizes) - rank
    kept = []
    for d, size in enumerate(sizes):
        if drop and size == 1:
            drop -= 1
            continue
        kept.append(d)
    if len(kept) != rank:
        raise ValueError("cannot tell which dimensions a rank-reducing subview keeps")
    return kept


def _groups(op: ir.Operation) -> list[list[int]]:
    return [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(group)]
            for group in ir.ArrayAttr(op.attributes["reassociation"])]


def _collapse(extractor, op: ir.Operation) -> dict:
    return {"op": "collapse", "result": extractor.define(op.results[0]),
            "source": extractor.name(op.operands[0]), "groups": _groups(op)}


def _expand(extractor, op: ir.Operation) -> dict:
    dynamic = ir.ShapedType.get_dynamic_size()
    given = list(op.operands)[1:]
    sizes = [extractor.name(given.pop(0)) if s == dynamic else s
             for s in ir.DenseI64ArrayAttr(op.attributes["static_output_shape"])]
    return {"op": "expand", "result": extractor.define(op.results[0]),
            "source": extractor.name(op.operands[0]), "groups": _groups(op), "sizes": sizes}


def _cast(extractor, op: ir.Operation) -> None:
    """A cast to a less static type: the same view."""
    extractor.names[op.results[0]] = extractor.name(op.operands[0])
    return None


RUN_TIME_VIEWS = {"memref.collapse_shape": _collapse, "memref.expand_shape": _expand,
                  "memref.cast": _cast}
