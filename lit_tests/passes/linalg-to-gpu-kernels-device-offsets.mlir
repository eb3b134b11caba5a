// linalg-to-gpu-kernels on a write at an offset read from device memory (a KV cache's
// row at a position that a graph replay reads in place: zynml/backend/cuda/
// device_offsets.py): the subview, its offset's arithmetic and the load move into the
// kernel, which gets the 0-d buffer and the view's source; the host computes nothing
// from device memory. A copy into such a view becomes a kernel for the same reason. A
// number computed from the load that a kernel is given moves into it too.
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s

// CHECK-LABEL: func.func @row_at_pos(
// CHECK-SAME: [[CACHE:%[a-z0-9]+]]: memref<3x11x5xf32>, [[K:%[a-z0-9]+]]: memref<3x5xf32>, [[POS:%[a-z0-9]+]]: memref<i64>
// CHECK-NOT: memref.load
// CHECK-NOT: memref.subview
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} args([[K]] : memref<3x5xf32>, [[POS]] : memref<i64>, [[CACHE]] : memref<3x11x5xf32>)
// CHECK: gpu.func @k0_pointwise([[KK:%[a-z0-9]+]]: memref<3x5xf32>, [[KP:%[a-z0-9]+]]: memref<i64>, [[KC:%[a-z0-9]+]]: memref<3x11x5xf32>) kernel
// CHECK: [[P:%[0-9]+]] = memref.load [[KP]][] : memref<i64>
// CHECK: [[I:%[0-9]+]] = arith.index_cast [[P]] : i64 to index
// CHECK: [[LOW:%[0-9]+]] = arith.maxsi [[I]], %{{.*}} : index
// CHECK: [[AT:%[0-9]+]] = arith.minsi [[LOW]], %{{.*}} : index
// CHECK: memref.subview [[KC]][0, [[AT]], 0] [3, 1, 5] [1, 1, 1]
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @row_at_pos(%cache: memref<3x11x5xf32>, %k: memref<3x5xf32>, %pos: memref<i64>) {
  %c0 = arith.constant 0 : index
  %c10 = arith.constant 10 : index
  %p = memref.load %pos[] : memref<i64>
  %i = arith.index_cast %p : i64 to index
  %low = arith.maxsi %i, %c0 : index
  %at = arith.minsi %low, %c10 : index
  %row = memref.subview %cache[0, %at, 0] [3, 1, 5] [1, 1, 1] : memref<3x11x5xf32> to memref<3x5xf32, strided<[55, 1], offset: ?>>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%k : memref<3x5xf32>) outs(%row : memref<3x5xf32, strided<[55, 1], offset: ?>>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

// -----

// CHECK-LABEL: func.func @rows_from_start(
// CHECK-SAME: [[ROWS:%[a-z0-9]+]]: memref<13x5xf32>, [[X:%[a-z0-9]+]]: memref<7x5xf32>, [[START:%[a-z0-9]+]]: memref<i64>
// CHECK-NOT: memref.copy
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} args([[X]] : memref<7x5xf32>, [[START]] : memref<i64>, [[ROWS]] : memref<13x5xf32>)
// CHECK: gpu.func @k0_pointwise(
// CHECK: memref.load
// CHECK: memref.subview
func.func @rows_from_start(%rows: memref<13x5xf32>, %x: memref<7x5xf32>, %start: memref<i64>) {
  %c0 = arith.constant 0 : index
  %c6 = arith.constant 6 : index
  %s = memref.load %start[] : memref<i64>
  %i = arith.index_cast %s : i64 to index
  %low = arith.maxsi %i, %c0 : index
  %at = arith.minsi %low, %c6 : index
  %block = memref.subview %rows[%at, 0] [7, 5] [1, 1] : memref<13x5xf32> to memref<7x5xf32, strided<[5, 1], offset: ?>>
  memref.copy %x, %block : memref<7x5xf32> to memref<7x5xf32, strided<[5, 1], offset: ?>>
  return
}

// -----

// The clamped position as a number the kernel reads its table at (`cos[pos, e]`, CSE
// having shared the clamp with the view's): the kernel loads and clamps it itself.
// CHECK-LABEL: func.func @table_row_at_pos(
// CHECK-SAME: [[T:%[a-z0-9]+]]: memref<11x5xf32>, [[Y:%[a-z0-9]+]]: memref<5xf32>, [[P:%[a-z0-9]+]]: memref<i64>
// CHECK-NOT: memref.load
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} args([[Y]] : memref<5xf32>, [[T]] : memref<11x5xf32>, [[P]] : memref<i64>)
// CHECK: gpu.func @k0_pointwise(
// CHECK: memref.load
// CHECK: arith.minsi
#row = affine_map<(d0) -> (d0)>
func.func @table_row_at_pos(%table: memref<11x5xf32>, %y: memref<5xf32>, %pos: memref<i64>) {
  %c0 = arith.constant 0 : index
  %c10 = arith.constant 10 : index
  %p = memref.load %pos[] : memref<i64>
  %i = arith.index_cast %p : i64 to index
  %low = arith.maxsi %i, %c0 : index
  %at = arith.minsi %low, %c10 : index
  linalg.generic {indexing_maps = [#row], iterator_types = ["parallel"]} outs(%y : memref<5xf32>) {
  ^bb0(%out: f32):
    %e = linalg.index 0 : index
    %v = memref.load %table[%at, %e] : memref<11x5xf32>
    linalg.yield %v : f32
  }
  return
}
