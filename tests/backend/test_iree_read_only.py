"""zynml/backend/iree/read_only.py: which entry arguments a module only reads (those the
CPU runtime may hand to IREE without a copy). Every kind of write, alias and unknown use
must count as not read-only; reads through views must count as read-only."""
from __future__ import annotations

import mlir.ir
import pytest

from zynml.backend.iree.read_only import ALIGNMENT_KEY, READ_ONLY_KEY, annotate
from zynml.backend.iree.target import CPU, CUDA
from zynml.dialects import new_context

_GENERIC = """
#map = affine_map<(d0) -> (d0)>
module {{
  func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>) -> tensor<8xf32> {{
{body}
  }}
  func.func private @helper(tensor<8xf32>) -> tensor<8xf32>
}}
"""
_ADD = """    %{r} = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel"]}}
        ins({x} : tensor<8xf32>) outs({y} : tensor<8xf32>) {{
    ^bb0(%in: f32, %out: f32):
      %s = arith.addf %in, %out : f32
      linalg.yield %s : f32
    }} -> tensor<8xf32>"""

CASES = {
    # a, b read through `ins`; c read by tensor.extract: all read-only
    "reads": ("0 1 2", _ADD.format(r="0", x="%a", y="%b").replace("outs(%b", "outs(%e")
              .replace("    %0", "    %e = tensor.empty() : tensor<8xf32>\n    %0") + """
    %i = arith.constant 3 : index
    %v = tensor.extract %c[%i] : tensor<8xf32>
    %1 = tensor.insert %v into %0[%i] : tensor<8xf32>
    return %1 : tensor<8xf32>"""),
    # b is the destination of a linalg op (IREE computes into it in place)
    "outs": ("0 2", _ADD.format(r="0", x="%a", y="%b") + "\n    return %0 : tensor<8xf32>"),
    # c is inserted into; a returned as it is (the output would share its memory)
    "insert and return": ("1", """    %i = arith.constant 3 : index
    %v = tensor.extract %b[%i] : tensor<8xf32>
    %0 = tensor.insert %v into %c[%i] : tensor<8xf32>
    %1 = tensor.insert_slice %0 into %c[0] [8] [1] : tensor<8xf32> into tensor<8xf32>
    return %a : tensor<8xf32>"""),
    # a view of b is a destination, a view of a is read; c goes to a call (unknown)
    "views and calls": ("0", """    %va = tensor.expand_shape %a [[0, 1]] output_shape [2, 4]
        : tensor<8xf32> into tensor<2x4xf32>
    %vb = tensor.extract_slice %b[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
    %i = arith.constant 1 : index
    %x = tensor.extract %va[%i, %i] : tensor<2x4xf32>
    %0 = tensor.insert %x into %vb[%i] : tensor<4xf32>
    %1 = func.call @helper(%c) : (tensor<8xf32>) -> tensor<8xf32>
    return %1 : tensor<8xf32>"""),
}


@pytest.mark.parametrize("case", CASES)
def test_read_only_arguments(case):
    expected, body = CASES[case]
    module = mlir.ir.Module.parse(_GENERIC.format(body=body), new_context())
    annotate(module, 16)
    main = next(op for op in module.body.operations if "main" in str(op.attributes["sym_name"]))
    reflection = mlir.ir.DictAttr(main.attributes["iree.reflection"])
    assert mlir.ir.StringAttr(reflection[READ_ONLY_KEY]).value == expected
    assert mlir.ir.StringAttr(reflection[ALIGNMENT_KEY]).value == "16"


def test_binding_alignment_of_targets():
    assert CPU.binding_alignment() == 16  # what the runtime's zero-copy imports rely on
    assert CUDA.binding_alignment() == 64
