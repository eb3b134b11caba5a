"""read-only-inputs: a program's inputs are the caller's arrays, so bufferization must
not write into them. Each tensor argument of a function that ZynML made (one with
`zynml.inputs`) gets `bufferization.writable = false`, unless the program updates it in
place (`compute(mut x)`: an output of the same name), and one-shot bufferization then
copies an input before writing where the program starts an output from it:

    func.func @main(%a: ..., %b: ..., %c: tensor<64x48xf32>) -> tensor<64x48xf32> {
      %0 = linalg.matmul ins(%a, %b : ...) outs(%c : tensor<64x48xf32>) -> ...
  becomes
    func.func @main(%a: ..., %b: ...,
                    %c: tensor<64x48xf32> {bufferization.writable = false}) ...

(`var s = c[i, j]` accumulating into `out[i, j]`). Without it the product wrote into the
caller's `c`. The scatter declarations' updates and indices (scatter_lowering.py) get
`bufferization.access = "read"`: a call of a declaration may write any argument it is
not told about, and read-only arguments would be copied for it. Runs before
one-shot-bufferize; arguments that already say keep what they say.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

NAME = "read-only-inputs"
WRITABLE = "bufferization.writable"
ACCESS = "bufferization.access"
SCATTER = "zynml.scatter"  # lowering/scatter_lowering.py's declarations


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    for fn in module.regions[0].blocks[0].operations:
        fn = fn.operation
        if fn.name != "func.func":
            continue
        if "zynml.inputs" in fn.attributes:
            updated = set(_names(fn, "zynml.outputs"))
            _mark(fn, WRITABLE, ir.BoolAttr.get(False),
                  [name not in updated for name in _names(fn, "zynml.inputs")])
        elif SCATTER in fn.attributes:  # (updates, indices, original)
            _mark(fn, ACCESS, ir.StringAttr.get("read"), [True, True, False])


def _names(fn: ir.Operation, key: str) -> list[str]:
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(fn.attributes[key])]


def _mark(fn: ir.Operation, key: str, value: ir.Attribute, which: list[bool]) -> None:
    """`key = value` on the tensor arguments of `fn` that `which` selects, unless set."""
    arguments = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).inputs
    old = ir.ArrayAttr(fn.attributes["arg_attrs"]) if "arg_attrs" in fn.attributes \
        else [ir.DictAttr.get({}) for _ in arguments]
    new = []
    for type_, attrs, chosen in zip(arguments, old, list(which) + [False] * len(arguments)):
        entries = {a.name: a.attr for a in ir.DictAttr(attrs)}
        if chosen and isinstance(type_, ir.RankedTensorType) and key not in entries:
            entries[key] = value
        new.append(ir.DictAttr.get(entries))
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(new)
