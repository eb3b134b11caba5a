"""read-only-inputs: a program's inputs are the caller's arrays, so bufferization must
not write into them. Each tensor argument of a function that ZynML made (one with
`zynml.inputs`) gets `bufferization.writable = false`, and one-shot bufferization then
copies an input before writing where the program starts an output from it:

    func.func @main(%a: ..., %b: ..., %c: tensor<64x48xf32>) -> tensor<64x48xf32> {
      %0 = linalg.matmul ins(%a, %b : ...) outs(%c : tensor<64x48xf32>) -> ...
  becomes
    func.func @main(%a: ..., %b: ..., %c: tensor<64x48xf32> {bufferization.writable = false}) ...

(`var s = c[i, j]` accumulating into `out[i, j]`). Without it the product wrote into the
caller's `c`. Inputs a program updates (`compute(mut x)`) are written where they are
after bufferization, where that is safe (backend/cuda/inplace.py). Runs before
one-shot-bufferize; arguments that already say whether they are writable keep it.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

NAME = "read-only-inputs"
WRITABLE = "bufferization.writable"


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    for fn in module.regions[0].blocks[0].operations:
        fn = fn.operation
        if fn.name != "func.func" or "zynml.inputs" not in fn.attributes:
            continue
        arguments = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).inputs
        old = ir.ArrayAttr(fn.attributes["arg_attrs"]) if "arg_attrs" in fn.attributes \
            else [ir.DictAttr.get({}) for _ in arguments]
        new = []
        for type_, attrs in zip(arguments, old):
            entries = {a.name: a.attr for a in ir.DictAttr(attrs)}
            if isinstance(type_, ir.RankedTensorType) and WRITABLE not in entries:
                entries[WRITABLE] = ir.BoolAttr.get(False)
            new.append(ir.DictAttr.get(entries))
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get(new)
