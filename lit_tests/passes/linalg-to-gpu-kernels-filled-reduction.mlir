// linalg-to-gpu-kernels, pointwise's group: a reduction that no other strategy takes,
// into a buffer a constant fill wrote just before, is one kernel whose sums start from
// the constant: the fill's kernel goes and the output is never read. A column sum in
// groups of rows (the bias gradient's first step) is the common case.
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s

// CHECK-LABEL: func.func @filled_column_sums(
// CHECK: gpu.launch_func @{{.*}}::@k0_pointwise
// CHECK-NOT: gpu.launch_func
// CHECK-LABEL: gpu.func @k0_pointwise(
// CHECK-NOT: memref.load {{.*}} : memref<4x7xf32>
// CHECK: arith.constant 1.500000e+00 : f32
// CHECK: memref.store {{.*}} : memref<4x7xf32>
// CHECK-NOT: gpu.func
#in = affine_map<(g, j, c) -> (g, j, c)>
#out = affine_map<(g, j, c) -> (g, c)>
#fill = affine_map<(g, c) -> (g, c)>
func.func @filled_column_sums(%x: memref<4x64x7xf32>, %sums: memref<4x7xf32>) {
  %start = arith.constant 1.5 : f32
  linalg.generic {indexing_maps = [#fill], iterator_types = ["parallel", "parallel"]}
      outs(%sums : memref<4x7xf32>) {
  ^bb0(%o: f32):
    linalg.yield %start : f32
  }
  linalg.generic {indexing_maps = [#in, #out],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<4x64x7xf32>) outs(%sums : memref<4x7xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The filled buffer read in between (a copy of it): the fill must land first, so it
// keeps its kernel and the reduction reads what the buffer holds.
// CHECK-LABEL: func.func @read_between(
// CHECK: gpu.launch_func @{{.*}}::@k{{[0-9]+}}_pointwise
// CHECK: gpu.launch_func @{{.*}}::@k{{[0-9]+}}_pointwise
// CHECK: gpu.launch_func @{{.*}}::@k{{[0-9]+}}_pointwise
#in = affine_map<(g, j, c) -> (g, j, c)>
#out = affine_map<(g, j, c) -> (g, c)>
#same = affine_map<(g, c) -> (g, c)>
func.func @read_between(%x: memref<4x64x7xf32>, %sums: memref<4x7xf32>,
                        %seen: memref<4x7xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#same], iterator_types = ["parallel", "parallel"]}
      outs(%sums : memref<4x7xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#same, #same], iterator_types = ["parallel", "parallel"]}
      ins(%sums : memref<4x7xf32>) outs(%seen : memref<4x7xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#in, #out],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<4x64x7xf32>) outs(%sums : memref<4x7xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  return
}
