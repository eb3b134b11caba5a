"""Scatters for IREE: each call of a `@__zynml_scatter_<kind>_d<depth>_<n>` declaration
(zynml/lowering/scatter_lowering.py) in the printed linalg module becomes IREE's
`iree_linalg_ext.scatter`, which iree-compile takes as input (the MLIR bindings ZynML
builds with have no such op, hence a call until the text crosses into IREE):

    %0 = call @__zynml_scatter_add_d1_0(%u, %k, %x) : (tensor<13x5xf32>, tensor<13x1xi64>,
             tensor<7x5xf32>) -> tensor<7x5xf32>
  becomes
    %0 = "iree_linalg_ext.scatter"(%u, %k, %x) ({
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %b, %a : f32
      "iree_linalg_ext.yield"(%s) : (f32) -> ()
    }) {dimension_map = array<i64: 0>, unique_indices = false,
        operandSegmentSizes = array<i32: 2, 1>} : (...) -> tensor<7x5xf32>

`unique_indices = false`: repeated indices add up. A min (max) scatter's region is
`arith.minimumf` (`maximumf`: NaN propagates, as in reduce(min)), `minsi` or `minui`
(zynml/lowering: SCATTER_COMBINERS). The declarations are dropped.

IREE's CPU backend runs a scatter whose indices may repeat as one sequential loop over
the updates in order (it does not split the batch dimension of a scatter without
`unique_indices`): contributions combine in loop order, so float sums are the same
bits run to run and as the interpreter's (tests/test_scatter_modes.py checks both).
"""
from __future__ import annotations

import re

from ...lowering import SCATTER_PREFIX, scatter_combiner

__all__ = ["expand_scatters"]

_CALL = re.compile(r"^(?P<indent>\s*)(?P<result>%[\w.$-]+) = (?:func\.)?call "
                   rf"@{SCATTER_PREFIX}(?P<kind>[a-z]+)_d(?P<depth>\d+)_\d+"
                   r"\((?P<args>[^)]*)\) : "
                   r"(?P<types>\(.*\) -> (?P<out>tensor<[^>]*>))$", re.M)
_DECLARATION = re.compile(rf"^\s*func\.func private @{SCATTER_PREFIX}[a-z]+_d\d+_\d+\(.*\n",
                          re.M)


def expand_scatters(text: str) -> str:
    if SCATTER_PREFIX not in text:
        return text
    count = iter(range(1 << 30))

    def scatter(match: re.Match) -> str:
        k = next(count)
        element = match["out"][len("tensor<"):-1].split("x")[-1]
        combine = "arith." + scatter_combiner(match["kind"], element.startswith(("f", "bf")))
        pad = match["indent"]
        a, b, s = (f"%zynml_scatter{k}_{n}" for n in ("a", "b", "s"))
        dims = ", ".join(str(d) for d in range(int(match["depth"])))
        return (f'{pad}{match["result"]} = "iree_linalg_ext.scatter"({match["args"]}) ({{\n'
                f"{pad}^bb0({a}: {element}, {b}: {element}):\n"
                f"{pad}  {s} = {combine} {b}, {a} : {element}\n"
                f'{pad}  "iree_linalg_ext.yield"({s}) : ({element}) -> ()\n'
                f"{pad}}}) {{dimension_map = array<i64: {dims}>, unique_indices = false, "
                f"operandSegmentSizes = array<i32: 2, 1>}} : {match['types']}")
    return _DECLARATION.sub("", _CALL.sub(scatter, text))
