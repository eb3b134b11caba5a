// collapse-matmul-rows views the row loops of a matrix product by one weight matrix,
// C[b, s, j] = sum_k A[b, s, k] * W[k, j] on row-major memrefs, as one (memref.collapse_shape
// of A and C, no copy), so that the generic is a plain M x N x K product (see
// passes/collapse_matmul_rows.py). Other generics are left as they are.
// RUN: zynml-opt %s --split-input-file --collapse-matmul-rows | filecheck %s
// RUN: zynml-opt %s --split-input-file --pass-pipeline='builtin.module(collapse-matmul-rows)' | filecheck %s
// RUN: zynml-opt %s --split-input-file --collapse-matmul-rows | zynml-opt --split-input-file | filecheck %s
// A second run changes nothing.
// RUN: zynml-opt %s --split-input-file --collapse-matmul-rows > %t.once
// RUN: zynml-opt %t.once --split-input-file --collapse-matmul-rows > %t.twice
// RUN: diff %t.once %t.twice

// CHECK-DAG: [[MK:#[a-z0-9]+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: [[KN:#[a-z0-9]+]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: [[MN:#[a-z0-9]+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @projection(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: memref<2x3x5xf32>, [[W:%[a-z0-9_]+]]: memref<5x7xf32>, [[C:%[a-z0-9_]+]]: memref<2x3x7xf32>)
// CHECK: [[A2:%[a-z0-9_]+]] = memref.collapse_shape [[A]] {{\[}}[0, 1], [2]] : memref<2x3x5xf32> into memref<6x5xf32>
// CHECK: [[C2:%[a-z0-9_]+]] = memref.collapse_shape [[C]] {{\[}}[0, 1], [2]] : memref<2x3x7xf32> into memref<6x7xf32>
// CHECK: linalg.generic {indexing_maps = {{\[}}[[MK]], [[KN]], [[MN]]], iterator_types = ["parallel", "parallel", "reduction"]} ins([[A2]], [[W]] : memref<6x5xf32>, memref<5x7xf32>) outs([[C2]] : memref<6x7xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.addf
func.func @projection(%a: memref<2x3x5xf32>, %w: memref<5x7xf32>, %c: memref<2x3x7xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %w : memref<2x3x5xf32>, memref<5x7xf32>) outs(%c : memref<2x3x7xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Three row loops, dynamic sizes: the rows collapse into one of dynamic size.
// CHECK-LABEL: func.func @three_rows_dynamic(
// CHECK: memref.collapse_shape %{{.*}} {{\[}}[0, 1, 2], [3]] : memref<?x3x?x5xf32> into memref<?x5xf32>
// CHECK: memref.collapse_shape %{{.*}} {{\[}}[0, 1, 2], [3]] : memref<?x3x?x7xf32> into memref<?x7xf32>
// CHECK: iterator_types = ["parallel", "parallel", "reduction"]
func.func @three_rows_dynamic(%a: memref<?x3x?x5xf32>, %w: memref<5x7xf32>, %c: memref<?x3x?x7xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%a, %w : memref<?x3x?x5xf32>, memref<5x7xf32>) outs(%c : memref<?x3x?x7xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Left alone: A strided (a split's part: its rows are not one run of memory), a batched
// product (W has the batch dim), and a body that reads its indices.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT: memref.collapse_shape
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
func.func @left_alone(%a: memref<2x3x5xf32, strided<[45, 15, 1]>>, %a2: memref<2x3x5xf32>, %wb: memref<2x5x7xf32>,
                      %w: memref<5x7xf32>, %c: memref<2x3x7xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %w : memref<2x3x5xf32, strided<[45, 15, 1]>>, memref<5x7xf32>) outs(%c : memref<2x3x7xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a2, %wb : memref<2x3x5xf32>, memref<2x5x7xf32>) outs(%c : memref<2x3x7xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a2, %w : memref<2x3x5xf32>, memref<5x7xf32>) outs(%c : memref<2x3x7xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %p = arith.mulf %x, %fi : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
