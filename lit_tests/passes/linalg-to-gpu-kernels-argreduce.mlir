// linalg-to-gpu-kernels, row_argreduce strategy: argmax by rows (cirgen's form of
// `yield (x[r, c], c)`: the value and its i64 index, the body picking the better pair) as
// a block per row. Each thread folds a strided slice through the body, then pairs meet
// through shuffles (the bf16 value widened to f32, the index as i32), one pair per warp
// in shared memory, and warp 0's shuffles; thread 0 stores both outputs. A row shorter
// than 32 stays pointwise.
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s

// CHECK: gpu.launch_func @{{.*}}::@k0_row_argreduce blocks in (%c4, %c1{{.*}}) threads in (%c128,
// CHECK-DAG: memref.global "private" @k0_row_argreduce_partials0 : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @k0_row_argreduce_partials1 : memref<4xi32, #gpu.address_space<workgroup>>
// CHECK-LABEL: gpu.func @k0_row_argreduce(
// CHECK: scf.for {{.*}} -> (bf16, i64) {
// CHECK: arith.cmpf ogt, {{.*}} : bf16
// CHECK: scf.yield
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK: gpu.shuffle  xor {{.*}} : f32
// CHECK: gpu.shuffle  xor {{.*}} : i32
// CHECK: gpu.barrier
// CHECK: memref.store {{.*}} : memref<4xbf16>
// CHECK: memref.store {{.*}} : memref<4xi64>
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @argmax_rows(%x: memref<4x100xbf16>, %v: memref<4xbf16>, %i: memref<4xi64>) {
  linalg.generic {indexing_maps = [#in, #out, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x100xbf16>) outs(%v, %i : memref<4xbf16>, memref<4xi64>) {
  ^bb0(%in: bf16, %out: bf16, %out_0: i64):
    %5 = linalg.index 1 : index
    %6 = arith.index_cast %5 : index to i64
    %7 = arith.cmpi slt, %6, %out_0 : i64
    %8 = arith.cmpf ogt, %in, %out : bf16
    %9 = arith.cmpf oeq, %in, %out : bf16
    %10 = arith.andi %9, %7 : i1
    %11 = arith.ori %8, %10 : i1
    %12 = arith.cmpf uno, %in, %in : bf16
    %13 = arith.cmpf uno, %out, %out : bf16
    %14 = arith.andi %12, %7 : i1
    %15 = arith.ori %12, %11 : i1
    %16 = arith.select %13, %14, %15 : i1
    %17 = arith.select %16, %in, %out : bf16
    %18 = arith.select %16, %6, %out_0 : i64
    linalg.yield %17, %18 : bf16, i64
  }
  return
}

// -----

// CHECK-NOT: row_argreduce
// CHECK-LABEL: gpu.func @k0_pointwise(
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @short_rows(%x: memref<4x20xf32>, %v: memref<4xf32>, %i: memref<4xi64>) {
  linalg.generic {indexing_maps = [#in, #out, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x20xf32>) outs(%v, %i : memref<4xf32>, memref<4xi64>) {
  ^bb0(%in: f32, %out: f32, %out_0: i64):
    %5 = linalg.index 1 : index
    %6 = arith.index_cast %5 : index to i64
    %8 = arith.cmpf ogt, %in, %out : f32
    %17 = arith.select %8, %in, %out : f32
    %18 = arith.select %8, %6, %out_0 : i64
    linalg.yield %17, %18 : f32, i64
  }
  return
}
