"""body_slices.loop_index_clamps (zynml/backend/cuda/strategies/body_slices.py): which of
a body's clamps a loop's own range makes the identity."""
import pytest

pytest.importorskip("mlir")
from mlir import ir  # noqa: E402

from zynml.backend.cuda.strategies.body_slices import loop_index_clamps  # noqa: E402
from zynml.dialects import new_context  # noqa: E402

# j runs to %n (the extents operand is allocated with it), i to %out's size; %y is read
# in the body, not an operand of the generic
DYNAMIC = """
func.func @f(%x: memref<?x?xf32>, %y: memref<?x?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %x, %c1 : memref<?x?xf32>
  %m = memref.dim %out, %c0 : memref<?xf32>
  %ny = memref.dim %y, %c1 : memref<?x?xf32>
  %k = memref.alloc(%n) : memref<?xi8>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%k : memref<?xi8>) outs(%out : memref<?xf32>) {
  ^bb0(%e: i8, %o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %n1 = arith.subi %n, %c1 : index
    %j0 = arith.maxsi %j, %c0 : index
    %j_own = arith.minsi %j0, %n1 : index loc("j_own")
    %m1 = arith.subi %m, %c1 : index
    %i_own = arith.minsi %i, %m1 : index loc("i_own")
    %ny1 = arith.subi %ny, %c1 : index
    %j_other = arith.minsi %j0, %ny1 : index loc("j_other")
    %j2 = arith.addi %j, %c1 : index
    %sum = arith.minsi %j2, %n1 : index loc("sum")
    %i_n = arith.minsi %i, %n1 : index loc("i_n")
    %j_two = arith.minsi %j, %c2 : index loc("j_two")
    %a = memref.load %x[%i_own, %j_own] : memref<?x?xf32>
    %b = memref.load %y[%i_n, %j_other] : memref<?x?xf32>
    %c = memref.load %x[%sum, %j_two] : memref<?x?xf32>
    %p = arith.mulf %a, %b : f32
    %q = arith.addf %p, %c : f32
    %s = arith.addf %o, %q : f32
    linalg.yield %s : f32
  }
  return
}
"""

STATIC = """
func.func @f(%x: memref<5x7xf32>, %out: memref<5xf32>) {
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<5x7xf32>) outs(%out : memref<5xf32>) {
  ^bb0(%e: f32, %o: f32):
    %j = linalg.index 1 : index
    %j_own = arith.minsi %j, %c6 : index loc("j_own")
    %j_short = arith.minsi %j, %c5 : index loc("j_short")
    %a = memref.load %x[%c5, %j_own] : memref<5x7xf32>
    %b = memref.load %x[%c5, %j_short] : memref<5x7xf32>
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}
"""


def clamps_of(text: str) -> dict:
    """{the clamp's name (its location in the text): its loop}"""
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        func = next(iter(module.body.operations))
        generic = next(op.operation for op in func.regions[0].blocks[0].operations
                       if op.operation.name == "linalg.generic")
        names = {}
        for op in generic.regions[0].blocks[0].operations:
            op = op.operation
            if op.name == "arith.minsi":
                names[op.results[0]] = str(op.location).split('"')[1]
        return {names[v]: loop for v, loop in loop_index_clamps(generic).items()}


def test_clamps_to_the_loops_own_run_time_extent():
    """j to %n (what its extents operand is allocated with), with or without max(j, 0),
    and i to %out's size along its loop; not j to another buffer's size, an expression
    of j, i to j's extent, or j to a number."""
    found = clamps_of(DYNAMIC)
    assert found == {"j_own": 1, "i_own": 0}


def test_clamps_to_a_static_extent_less_one():
    assert clamps_of(STATIC) == {"j_own": 1}
