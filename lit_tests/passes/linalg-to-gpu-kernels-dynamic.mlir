// linalg-to-gpu-kernels on run-time extents (`?` dimensions, what a shape-less or
// dynamic compile makes): pointwise and row_reduce take them (strategies/extents.py),
// reading each extent with memref.dim inside the kernel and computing the grid on the
// host from memref.dim of the operands; every other strategy is not offered them, so a
// matrix product or a fused row run falls back to those two.
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --linalg-to-gpu-kernels | filecheck %s

// An elementwise map: a thread per point, the grid ceil(n / 256), the kernel's bound the
// descriptor's size.
// CHECK-LABEL: func.func @map
// CHECK: %[[N:.*]] = memref.dim %arg0, %c0 : memref<?xf32>
// CHECK: %[[GRID:.*]] = arith.ceildivsi %[[N]], %c256 : index
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise blocks in (%[[GRID]], %c1, %{{.*}}) threads in (%c256{{.*}}, %c1{{.*}}, %c1{{.*}}) args(%arg0 : memref<?xf32>, %arg1 : memref<?xf32>) {zynml.problem = "df32_df32", zynml.strategy = "pointwise"}
// CHECK: gpu.func @k0_pointwise(%arg0: memref<?xf32>, %arg1: memref<?xf32>) kernel
// CHECK: %[[END:.*]] = memref.dim %arg0, %c0 : memref<?xf32>
// CHECK: %[[I:.*]] = arith.addi
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[I]], %[[END]] : index
// CHECK: scf.if %[[IN]]
// CHECK: math.exp
#id1 = affine_map<(d0) -> (d0)>
func.func @map(%x: memref<?xf32>, %y: memref<?xf32>) {
  linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%x : memref<?xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A row sum of a ?x? matrix: a block per row (the grid: the rows, a host memref.dim), the
// block's threads striding over the run-time row length.
// CHECK-LABEL: func.func @row_sum
// CHECK: %[[ROWS:.*]] = memref.dim %arg0, %c0 : memref<?x?xf32>
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_reduce blocks in (%[[ROWS]], %c1{{.*}}, %c1{{.*}}) threads in (%c256, %c1{{.*}}, %c1{{.*}})
// CHECK: gpu.func @k0_row_reduce(%arg0: memref<?x?xf32>, %arg1: memref<?xf32>) kernel
// CHECK: %[[LEN:.*]] = memref.dim %arg0, %c1 : memref<?x?xf32>
// CHECK: scf.for %{{.*}} = %thread_id_x to %[[LEN]] step %c256
// CHECK: gpu.shuffle xor
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @row_sum(%m: memref<?x?xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%m : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A static row length (64) with run-time rows: row_reduce's block fits the row.
// CHECK-LABEL: func.func @static_rows
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_reduce blocks in (%dim, %c1{{.*}}, %c1{{.*}}) threads in (%c64, %c1{{.*}}, %c1{{.*}})
// CHECK: scf.for %{{.*}} = %thread_id_x to %c64 step %c64{{.*}}
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @static_rows(%m: memref<?x64xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%m : memref<?x64xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A matrix product of run-time sizes: the matmul strategies are not offered it, so it
// is a thread per output point with the reduction loop's bound read from the descriptor.
// CHECK-LABEL: func.func @matmul
// CHECK: %[[M:.*]] = memref.dim %arg0, %c0 : memref<?x?xf32>
// CHECK: %[[N:.*]] = memref.dim %arg1, %c1 : memref<?x?xf32>
// CHECK: %[[MN:.*]] = arith.muli %[[M]], %[[N]] : index
// CHECK: %[[GRID:.*]] = arith.ceildivsi %[[MN]], %c256 : index
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise blocks in (%[[GRID]], %c1{{.*}}, %c1{{.*}})
// CHECK: gpu.func @k0_pointwise
// CHECK: %[[K:.*]] = memref.dim %arg0, %c1{{.*}} : memref<?x?xf32>
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[K]] step %c1
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @matmul(%A: memref<?x?xf32>, %B: memref<?x?xf32>, %C: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<?x?xf32>, memref<?x?xf32>) outs(%C : memref<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

