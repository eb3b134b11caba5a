// When a pass fails, --mlir-pass-pipeline-crash-reproducer=FILE saves the IR the pipeline
// was given (generic form, with locations) under a `// configuration:` header holding the
// pipeline; running it again gives the same error at the same place.
// RUN: rm -f %t.repro.mlir
// RUN: not zynml-opt %s --cir-verify --cir-to-linalg --mlir-pass-pipeline-crash-reproducer=%t.repro.mlir 2>&1 | filecheck %s --check-prefix=ERR
// RUN: cat %t.repro.mlir | filecheck %s --check-prefix=REPRO
// RUN: not zynml-opt %t.repro.mlir --pass-pipeline='builtin.module(cir-verify,cir-to-linalg)' 2>&1 | filecheck %s --check-prefix=ERR
// A run that succeeds writes no reproducer.
// RUN: rm -f %t.none.mlir
// RUN: zynml-opt %s --cir-verify --mlir-pass-pipeline-crash-reproducer=%t.none.mlir
// RUN: not cat %t.none.mlir

// ERR: reproducer.mlir:31:10: error: cannot lower this 'elementwise' body to linalg: reading 'out' is not lowered yet
// REPRO: // configuration: --pass-pipeline='builtin.module(cir-verify,cir-to-linalg)'
// REPRO: "builtin.module"() ({
// REPRO: "cir.compute"
// REPRO: loc({{.*}}reproducer.mlir":31:10)

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
