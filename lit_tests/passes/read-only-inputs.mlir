// read-only-inputs marks each tensor argument of a ZynML function (one with
// zynml.inputs) `bufferization.writable = false`, so that one-shot bufferization copies
// an input before a kernel writes into it, except inputs the program updates in place
// (an output of the same name); a scatter declaration's updates and indices are marked
// `bufferization.access = "read"` (see passes/read_only_inputs.py). Arguments that
// already say, non-tensor arguments and other functions are left alone.
// RUN: zynml-opt %s --split-input-file --read-only-inputs | filecheck %s
// RUN: zynml-opt %s --split-input-file --read-only-inputs > %t.once
// RUN: zynml-opt %t.once --split-input-file --read-only-inputs > %t.twice
// RUN: diff %t.once %t.twice
// After bufferization the product accumulates into a copy of %c, not into %c.
// RUN: zynml-opt %s --split-input-file --pass-pipeline='builtin.module(read-only-inputs,linalg-generalize-named-ops,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map})' | filecheck %s --check-prefix=BUF

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %{{.*}}: tensor<4x3xf32> {bufferization.writable = false}
// CHECK-SAME: %{{.*}}: tensor<3x5xf32> {bufferization.writable = false}
// CHECK-SAME: %{{.*}}: tensor<4x5xf32> {bufferization.writable = false}
// BUF-LABEL: func.func @main(
// BUF-SAME: %[[A:.*]]: memref<4x3xf32>, %[[B:.*]]: memref<3x5xf32>, %[[C:.*]]: memref<4x5xf32>)
// BUF: %[[COPY:.*]] = memref.alloc()
// BUF: memref.copy %[[C]], %[[COPY]]
// BUF: linalg.generic
// BUF-SAME: ins(%[[A]], %[[B]] : memref<4x3xf32>, memref<3x5xf32>) outs(%[[COPY]] : memref<4x5xf32>)
// BUF: return %[[COPY]]
func.func @main(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %c: tensor<4x5xf32>) -> tensor<4x5xf32> attributes {zynml.inputs = ["a", "b", "c"], zynml.outputs = ["y"]} {
  %0 = linalg.matmul ins(%a, %b : tensor<4x3xf32>, tensor<3x5xf32>) outs(%c : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// A scalar stays as it is; an argument that says it is writable keeps that.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %{{.*}}: tensor<4xf32> {bufferization.writable = true}
// CHECK-SAME: %{{.*}}: f32)
// CHECK-NOT: writable = false
func.func @main(%x: tensor<4xf32> {bufferization.writable = true}, %s: f32) -> tensor<4xf32> attributes {zynml.inputs = ["x", "s"], zynml.outputs = ["x"]} {
  return %x : tensor<4xf32>
}

// -----

// A function ZynML did not make (no zynml.inputs) is not touched.
// CHECK-LABEL: func.func @helper(
// CHECK-NOT: writable
func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// `mut x` (x is an output too) stays writable; y is only read.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<4xf32>,
// CHECK-SAME: %{{.*}}: tensor<4xf32> {bufferization.writable = false})
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> attributes {zynml.inputs = ["x", "y"], zynml.outputs = ["x"]} {
  return %x : tensor<4xf32>
}

// -----

// A scatter's declaration: its updates and indices are only read, the original is
// updated (left as a declaration's default, read and written).
// CHECK-LABEL: func.func private @__zynml_scatter_add_d1_0(
// CHECK-SAME: tensor<3x5xf32> {bufferization.access = "read"}, tensor<3x1xi64> {bufferization.access = "read"}, tensor<7x5xf32>)
func.func private @__zynml_scatter_add_d1_0(tensor<3x5xf32>, tensor<3x1xi64>, tensor<7x5xf32>) -> tensor<7x5xf32> attributes {zynml.scatter}
