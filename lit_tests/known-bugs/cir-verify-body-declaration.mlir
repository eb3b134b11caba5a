// KNOWN BUG (XFAIL until fixed; then move the chunk to dialects/cir/ops_invalid.mlir).
// A compute whose body is a function declaration (no region) makes cir-verify raise
// IndexError: "internal error in pass 'cir-verify': IndexError: attempt to access out of
// bounds block", located at the module (0:0), exit code 2. It should be a located error
// at the compute, e.g. "body @body is a declaration; it needs a body".
// XFAIL: *
// RUN: zynml-opt %s --verify-diagnostics --cir-verify

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{@body}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body}
