// KNOWN BUG (XFAIL until fixed). cir-verify accepts a scalar result on a compute of any
// kind (its body's `out` is rank 0), but cir-to-linalg lowers non-reduce computes with
// RankedTensorType(result type): "internal error in pass 'cir-to-linalg': ValueError:
// Cannot cast type to RankedTensorType (from Type(f32))", exit code 2. Expected: the
// scalar lowered like a full reduction's (tensor.extract of a rank-0 result). If the fix
// is to reject scalar results outside `reduce` in cir-verify instead, make this a chunk
// of dialects/cir/ops_invalid.mlir.
// XFAIL: *
// RUN: zynml-opt %s --cir-verify --cir-to-linalg | filecheck %s

// CHECK-LABEL: func.func @total(
// CHECK: tensor.extract
// CHECK-NOT: cir.
func.func @total(%x: tensor<8xf32>) -> f32 {
  %c8 = arith.constant 8 : index
  %r = "cir.compute"(%x, %c8) {kind = "fused", body = @total_body, out_dims = array<i64>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> f32
  return %r : f32
}
func.func private @total_body(%x: tensor<8xf32>, %n_arg: index, %out: tensor<f32>) attributes {cir.body} {
  %n = arith.constant 8 : index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %sum = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    %s = arith.addf %acc, %v : f32
    scf.yield %s : f32
  }
  "cir.store"(%sum, %out) : (f32, tensor<f32>) -> ()
  return
}
