// --mlir-print-ir-before-all / -after-all / -after-failure print on stderr, as mlir-opt.
// RUN: zynml-opt %s --split-input-file --cir-verify --canonicalize --mlir-print-ir-before-all --mlir-print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=ALL
// RUN: zynml-opt %s | zynml-opt --cir-verify | filecheck %s --check-prefix=ROUNDTRIP
// RUN: not zynml-opt %s --split-input-file --cir-verify --cir-to-linalg --mlir-print-ir-after-failure 2>&1 >/dev/null | filecheck %s --check-prefix=FAILURE

// ALL: // -----// IR Dump Before cir-verify (cir-verify) //----- //
// ALL-NEXT: module {
// ALL: // -----// IR Dump After cir-verify (cir-verify) //----- //
// ALL: // -----// IR Dump Before Canonicalizer (canonicalize) //----- //
// ALL: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// ALL: func.func @reads_out

// ROUNDTRIP-LABEL: func.func @reads_out(
// ROUNDTRIP: "cir.compute"
// ROUNDTRIP-LABEL: func.func private @body(
// ROUNDTRIP: scf.for

// Only the failing pass prints, with the IR as it left it.
// FAILURE-NOT: IR Dump After cir-verify
// FAILURE: // -----// IR Dump After cir-to-linalg Failed (cir-to-linalg) //----- //
// FAILURE: "cir.compute"
// FAILURE: print-ir.mlir:35:10: error: cannot lower this 'elementwise' body to linalg: reading 'out' is not lowered yet
func.func @reads_out(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @body(%x: tensor<8xf32>, %n: index, %out: tensor<8xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = "cir.load"(%out, %i) : (tensor<8xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}
