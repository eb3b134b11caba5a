// The pipeline on a cir module written by hand (no front end): shape-generic cir, static
// inputs; shape propagation makes it static before the lowering.
// RUN: zynml-opt %s --pass-pipeline='%cir_to_linalg_pipeline' | filecheck %s
// RUN: zynml-opt %s | zynml-opt --pass-pipeline='%cir_to_linalg_pipeline' | zynml-opt | filecheck %s

// CHECK-LABEL: func.func @scale(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<6xf32>) -> tensor<6xf32>
// CHECK: [[TWO:%[a-z0-9_]+]] = arith.constant 2.000000e+00 : f32
// CHECK: linalg.generic {{.*}} ins([[X]] : tensor<6xf32>)
// CHECK: arith.mulf %{{.*}}, [[TWO]] : f32
// CHECK-NOT: cir.
func.func @scale(%x: tensor<6xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<6xf32>
  %y = "cir.compute"(%x, %n) {kind = "elementwise", body = @scale_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<6xf32>, index) -> tensor<?xf32>
  return %y : tensor<?xf32>
}
func.func private @scale_body(%x: tensor<6xf32>, %n: index, %out: tensor<?xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %two = arith.constant 2.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<6xf32>, index) -> f32
    %s = arith.mulf %v, %two : f32
    "cir.store"(%s, %out, %i) : (f32, tensor<?xf32>, index) -> ()
  }
  return
}
