// linalg-to-gpu-kernels, pointwise strategy: a product sum (`out + a * b`, a matmul's body)
// with an f16 / bf16 output keeps its running sum in f32 and rounds once at the end, as
// the GEMM strategies do: a decode step's 3-row product (too small for them) must not
// round after every term. The factors are widened first (no 16-bit multiply either). A
// sum that is not a product of the two inputs (`out + out * a`) keeps its type.
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s

// CHECK-LABEL: gpu.func @k0_pointwise(
// CHECK: [[OUT:%[0-9]+]] = memref.load {{.*}} : memref<3x72xbf16>
// CHECK: [[ZERO:%[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK: [[SUM:%[0-9]+]] = scf.for {{.*}} iter_args([[ACC:%[a-z0-9_]+]] = [[ZERO]]) -> (f32) {
// CHECK-DAG: [[A:%[0-9]+]] = memref.load {{.*}} : memref<3x40xbf16>
// CHECK-DAG: [[B:%[0-9]+]] = memref.load {{.*}} : memref<40x72xbf16>
// CHECK-DAG: [[AW:%[0-9]+]] = arith.extf [[A]] : bf16 to f32
// CHECK-DAG: [[BW:%[0-9]+]] = arith.extf [[B]] : bf16 to f32
// CHECK: [[P:%[0-9]+]] = arith.mulf [[AW]], [[BW]] : f32
// CHECK-NEXT: [[NEXT:%[0-9]+]] = arith.addf [[ACC]], [[P]] : f32
// CHECK-NEXT: scf.yield [[NEXT]] : f32
// CHECK: [[OW:%[0-9]+]] = arith.extf [[OUT]] : bf16 to f32
// CHECK-NEXT: [[T:%[0-9]+]] = arith.addf [[OW]], [[SUM]] : f32
// CHECK-NEXT: [[R:%[0-9]+]] = arith.truncf [[T]] : f32 to bf16
// CHECK: memref.store [[R]], {{.*}} : memref<3x72xbf16>
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @decode_matmul(%a: memref<3x40xbf16>, %b: memref<40x72xbf16>, %c: memref<3x72xbf16>) {
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<3x40xbf16>, memref<40x72xbf16>) outs(%c : memref<3x72xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  }
  return
}

// -----

// CHECK-LABEL: gpu.func @k0_pointwise(
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f16) {
// CHECK: arith.mulf {{.*}} : f16
// CHECK-NEXT: arith.addf {{.*}} : f16
// CHECK-NOT: arith.truncf
#a = affine_map<(d0, d1) -> (d0, d1)>
#c = affine_map<(d0, d1) -> (d0)>
func.func @growth(%a: memref<5x7xf16>, %b: memref<5x7xf16>, %c: memref<5xf16>) {
  linalg.generic {indexing_maps = [#a, #a, #c], iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : memref<5x7xf16>, memref<5x7xf16>) outs(%c : memref<5xf16>) {
  ^bb0(%x: f16, %y: f16, %acc: f16):
    %p = arith.mulf %acc, %x : f16
    %s = arith.addf %acc, %p : f16
    linalg.yield %s : f16
  }
  return
}
