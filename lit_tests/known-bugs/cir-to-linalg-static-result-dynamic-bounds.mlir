// KNOWN BUG (XFAIL until fixed; then move the chunks to passes/cir-to-linalg.mlir).
// A compute with a static result whose body's loops run to a size *argument* (valid cir:
// cir-verify accepts it; cir-shape-propagation would have made the bound a constant):
// * store form: rejected with a misleading "strided writes of 'out' need static shapes"
//   (the write is neither strided nor offset; the loop bound is just not a constant);
// * reduce with axis: the pass builds an invalid linalg.reduce, and verification after the
//   pass fails: "'linalg.reduce' op init dimensions [-9223372036854775808] doesn't match
//   input dimensions after reduction [4]".
// Expected: both lower (bounds from the compute's operands, or from the static types).
// XFAIL: *
// RUN: zynml-opt %s --split-input-file --cir-to-linalg | filecheck %s

// CHECK-LABEL: func.func @copy(
// CHECK: linalg.generic
func.func @copy(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @copy_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @copy_body(%x: tensor<8xf32>, %n: index, %out: tensor<8xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}

// -----

// CHECK-LABEL: func.func @row_sums(
// CHECK: linalg.reduce
func.func @row_sums(%m: tensor<4x8xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %r = "cir.compute"(%m, %c4, %c8) {kind = "reduce", reduce = "+", axis = 1 : i64, body = @row_sums_body,
      out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4x8xf32>, index, index) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func private @row_sums_body(%m: tensor<4x8xf32>, %rows: index, %cols: index, %out: tensor<4xf32>)
    attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %rows step %c1 {
    scf.for %j = %c0 to %cols step %c1 {
      %v = "cir.load"(%m, %i, %j) : (tensor<4x8xf32>, index, index) -> f32
      "cir.yield"(%v) : (f32) -> ()
    }
  }
  return
}
