// --mlir-print-ir-before-all / -after-all / -after-failure print on stderr, as mlir-opt.
// RUN: zynml-opt %s --split-input-file --cir-verify --canonicalize --mlir-print-ir-before-all --mlir-print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=ALL
// RUN: not zynml-opt %s --split-input-file --cir-verify --cir-to-linalg --mlir-print-ir-after-failure 2>&1 >/dev/null | filecheck %s --check-prefix=FAILURE

// ALL: // -----// IR Dump Before cir-verify (cir-verify) //----- //
// ALL-NEXT: module {
// ALL: // -----// IR Dump After cir-verify (cir-verify) //----- //
// ALL: // -----// IR Dump Before Canonicalizer (canonicalize) //----- //
// ALL: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// ALL: func.func @strided

// Only the failing pass prints, with the IR as it left it.
// FAILURE-NOT: IR Dump After cir-verify
// FAILURE: // -----// IR Dump After cir-to-linalg Failed (cir-to-linalg) //----- //
// FAILURE: "cir.compute"
// FAILURE: print-ir.mlir:28:3: error: cannot lower this 'elementwise' body to linalg: loops must run from 0 in steps of 1
func.func @strided(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @body(%x: tensor<8xf32>, %n: index, %out: tensor<8xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c2 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}
