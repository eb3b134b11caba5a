// -o FILE writes the output (atomically); on failure nothing is written, and an existing
// file is left as it was.
// RUN: rm -f %t.out.mlir
// RUN: zynml-opt %s -o %t.out.mlir
// RUN: cat %t.out.mlir | filecheck %s
// RUN: zynml-opt %t.out.mlir | filecheck %s
// RUN: not zynml-opt %s --cir-to-linalg=named-ops=maybe -o %t.out.mlir
// RUN: cat %t.out.mlir | filecheck %s
// RUN: rm -f %t.fail.mlir
// RUN: echo 'not mlir' | not zynml-opt - -o %t.fail.mlir
// RUN: not cat %t.fail.mlir

// CHECK: func.func @kept()
func.func @kept() {
  return
}
