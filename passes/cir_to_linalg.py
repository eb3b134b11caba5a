"""cir-to-linalg: lower every `cir.compute` to linalg on tensors.

The body decides the lowering (nest_lowering.py); the kind only names intent:

* a write `out[P] = f(loads)`            -> one `linalg.generic`, all loops parallel;
  writes at offsets/strides (`out[.., 2*d + 1]`) add a `tensor.insert_slice`; the
  outputs of a `cir.multi_compute` written over the same loops share one generic
  (outputs_lowering.py)
* a reduction loop `acc = acc op g`      -> a generic with reduction loops, one result per
  accumulator (`linalg.matmul` / `linalg.batch_matmul` when g is A*B with matmul maps);
  a guarded update `if c: acc += g` becomes `select(c, g, 0)`
* `yield g` in a `reduce` kernel         -> `linalg.reduce` when g is a plain load, else a
  reduction generic; argmin/argmax as a two-result generic (value, first index)
* `cir.attention` (cir-raise-attention)  -> four generics (attention_lowering.py)
* `cir.print` (`print(...)`)              -> an error: it runs only on the interpreter

Loads with affine indices become indexing maps; other loads become `tensor.extract`
gathers (clamped into bounds when they sit under an `if`). Body functions are erased.

    %y = "cir.compute"(%a, %b, ...) {kind = "matmul", body = @c_body, ...}
  becomes
    %init = linalg.fill ins(%zero) outs(%empty)
    %y = linalg.matmul ins(%a, %b) outs(%init)
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from ..lowering.attention_lowering import lower_attention
from ..lowering.cir_ops import (body_of, compute_ops, func_by_name, int_attr, ops_in, string_attr,
                      top_level_funcs)
from ..lowering.bounds import OutOfBounds
from ..lowering.nest_lowering import LoweringError, NestLowering
from ..lowering.outputs_lowering import lower_outputs
from .cir_verify import verify_bodies
from .pipeline import fail

NAME = "cir-to-linalg"
# Module attribute listing notes for the user (`FILE:LINE:COL: note: ...`).
NOTES_ATTR = "zynml.notes"


@dataclass
class Options:
    # Recognise matmul/batch_matmul/reduce bodies as named linalg ops (else generics).
    named_ops: bool = True


def run(module: ir.Operation, options: Options) -> None:
    verify_bodies(module)  # what this pass relies on, also when run on its own
    funcs = func_by_name(module)
    for fn in funcs.values():
        for op in ops_in(fn, "cir.print"):
            raise fail(op.location, "'print' runs only with device=\"interpreter\" (the "
                                    "reference interpreter); remove it to compile for "
                                    "this device")
    bodies = set()
    notes: list[str] = []
    for compute in compute_ops(module):
        body = body_of(compute, funcs)
        bodies.add(ir.StringAttr(body.attributes["sym_name"]).value)
        kind = string_attr(compute, "kind")
        lowering = NestLowering(compute, body, named_ops=options.named_ops)
        try:
            if kind == "reduce":
                results = [lowering.lower_yield(string_attr(compute, "reduce"),
                                                int_attr(compute, "axis"),
                                                unsigned="unsigned" in compute.attributes)]
            else:
                results = lower_outputs(lowering, [r.type for r in compute.results])
        except OutOfBounds as err:  # the program's mistake, not the lowering's limit
            raise fail(err.location or compute.location, str(err))
        except LoweringError as err:
            raise fail(err.location or compute.location,
                       f"cannot lower this '{kind}' body to linalg: {err}")
        note = _kind_note(kind, lowering, options)
        if note:
            notes.append(f"{_where(compute.location)}: note: {note}")
        for old, new in zip(compute.results, results):
            old.replace_all_uses_with(new)
        compute.erase()
    for name in bodies:
        funcs[name].erase()
    for attention in [op for f in top_level_funcs(module) for op in ops_in(f, "cir.attention")]:
        attention.results[0].replace_all_uses_with(lower_attention(attention))
        attention.erase()
    if notes:
        module.attributes[NOTES_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in notes])


def _kind_note(kind: str, lowering: NestLowering, options: Options):
    """The kind names a strategy; when the body is not what the kind says, the body wins
    and the user hears about it."""
    if kind in ("matmul", "batched_matmul") and options.named_ops and \
            not lowering.named_used and not lowering.skipped_empty:
        return (f"the body of this '{kind}' kernel is not a plain matrix product; it is "
                "lowered generically from the body")
    return None


def _where(location: ir.Location) -> str:
    text = str(location)  # loc("file":line:col)
    return text[len('loc("'):-1].replace('":', ":", 1) if text.startswith('loc("') else "<unknown>"
