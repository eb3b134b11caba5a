// linalg-to-gpu-kernels, row_fused strategy: gathers that read another chunk whole
// (row_gathers.py). RoPE's rotate-half, after cir-join-stores: point e reads x at
// e % 64 and e % 64 + 64 and cos, sin at e % 64 (rows of 64). A warp holds a row of 128
// (a chunk of 4 a lane), so x's chunks come from the lanes holding them (gpu.shuffle
// idx, 4 a gather); cos and sin, which no lane holds, by 16-byte loads (scalar ones
// where unaligned). Those do not depend on the head (the last row loop): a warp takes
// 2 heads in turn and loads them once; 8 rows make one block of 4 warps.
// RUN: zynml-opt %s --linalg-to-gpu-kernels | filecheck %s
// RUN: zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{params=row_fused.moved_gathers=false})' | filecheck %s --check-prefix=GATHERS

// CHECK: gpu.launch_func @zynml_kernels::@k0_row_fused blocks in (%c1, %c1{{.*}}) threads in (%c128,
// CHECK-LABEL: gpu.func @k0_row_fused(
// CHECK: vector.load {{.*}} : memref<2x4x128xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK-COUNT-8: gpu.shuffle  idx
// CHECK: vector.load {{.*}} : memref<2x64xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK: vector.load {{.*}} : memref<2x64xf32, #gpu.address_space<global>>, vector<4xf32>
// the warp's second head: x's chunk and its shuffles, the angles as loaded
// CHECK: vector.load {{.*}} : memref<2x4x128xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK-COUNT-8: gpu.shuffle  idx
// CHECK-NOT: memref<2x64xf32, #gpu.address_space<global>>
// CHECK: gpu.return

// A row a warp, a 4-byte load a point and gather:
// GATHERS: gpu.launch_func @zynml_kernels::@k0_row_fused blocks in (%c2, %c1{{.*}}) threads in (%c128,
// GATHERS-NOT: gpu.shuffle  idx
// GATHERS-NOT: vector.load {{.*}} : memref<2x64xf32
// GATHERS: gpu.return
#row = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sum = affine_map<(d0, d1, d2) -> (d0, d1)>
#fill = affine_map<(d0, d1) -> (d0, d1)>
func.func @rope_half(%x: memref<2x4x128xf32>, %cos: memref<2x64xf32>, %sin: memref<2x64xf32>, %y: memref<2x4x128xf32>) {
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  %s = memref.alloc() : memref<2x4xf32>
  linalg.generic {indexing_maps = [#fill], iterator_types = ["parallel", "parallel"]} outs(%s : memref<2x4xf32>) {
  ^bb0(%out: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#row, #sum], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<2x4x128xf32>) outs(%s : memref<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %acc = arith.addf %out, %sq : f32
    linalg.yield %acc : f32
  }
  linalg.generic {indexing_maps = [#sum, #row], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : memref<2x4xf32>) outs(%y : memref<2x4x128xf32>) {
  ^bb0(%r: f32, %out: f32):
    %t = linalg.index 0 : index
    %k = linalg.index 1 : index
    %e = linalg.index 2 : index
    %p = arith.remui %e, %c64 : index
    %q = arith.addi %p, %c64 : index
    %first = arith.cmpi ult, %e, %c64 : index
    %a = memref.load %x[%t, %k, %p] : memref<2x4x128xf32>
    %b = memref.load %x[%t, %k, %q] : memref<2x4x128xf32>
    %c = memref.load %cos[%t, %p] : memref<2x64xf32>
    %sn = memref.load %sin[%t, %p] : memref<2x64xf32>
    %ac = arith.mulf %a, %c : f32
    %bs = arith.mulf %b, %sn : f32
    %bc = arith.mulf %b, %c : f32
    %as = arith.mulf %a, %sn : f32
    %lo = arith.subf %ac, %bs : f32
    %hi = arith.addf %bc, %as : f32
    %v = arith.select %first, %lo, %hi : f32
    %o = arith.mulf %v, %r : f32
    linalg.yield %o : f32
  }
  memref.dealloc %s : memref<2x4xf32>
  return
}
