// linalg-to-gpu-kernels, pointwise's split reductions (pointwise_split.py): few outputs,
// each a long sum, take a block of 16 warps per 32 outputs, the warps splitting the
// points and their partials meeting in shared memory, instead of a thread per output
// (a column sum's second step: 768 outputs of 256 group sums). Many outputs or short
// sums keep a thread per output.
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s

// CHECK-LABEL: func.func @group_sums(
// CHECK: gpu.launch_func @{{.*}}::@k0_pointwise blocks in (%c3, {{.*}}) threads in (%c512, {{.*}})
// CHECK-NOT: gpu.launch_func
// CHECK-LABEL: gpu.func @k0_pointwise(
// CHECK: scf.for %{{.*}} = %{{.*}} to %c256 step %c16 iter_args
// CHECK: memref.store {{.*}} : memref<512xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: arith.constant 2.500000e-01 : f32
// CHECK: memref.store {{.*}} : memref<96xf32>
#in = affine_map<(g, c) -> (g, c)>
#out = affine_map<(g, c) -> (c)>
#fill = affine_map<(c) -> (c)>
func.func @group_sums(%partial: memref<256x96xf32>, %sums: memref<96xf32>) {
  %start = arith.constant 0.25 : f32
  linalg.generic {indexing_maps = [#fill], iterator_types = ["parallel"]}
      outs(%sums : memref<96xf32>) {
  ^bb0(%o: f32):
    linalg.yield %start : f32
  }
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%partial : memref<256x96xf32>) outs(%sums : memref<96xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A maximum splits too (its identity is -inf); the output is read, not a fill's.
// CHECK-LABEL: func.func @column_max(
// CHECK: threads in (%c512, {{.*}})
// CHECK-LABEL: gpu.func @k0_pointwise(
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: gpu.barrier
// CHECK: memref.load {{.*}} : memref<40xf32>
// CHECK: arith.maximumf
#in = affine_map<(g, c) -> (g, c)>
#out = affine_map<(g, c) -> (c)>
func.func @column_max(%x: memref<100x40xf32>, %m: memref<40xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<100x40xf32>) outs(%m : memref<40xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.maximumf %acc, %v : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Sums of fewer than 64 points, and more than 16384 outputs, are not split: the short
// sums' 96 contiguous outputs take 4 a thread (pointwise_vector_sums.py), the 16385 a
// thread each.
// CHECK-LABEL: func.func @short_sums(
// CHECK: blocks in (%c1, {{.*}}) threads in (%c64, {{.*}})
// CHECK-LABEL: func.func @many_outputs(
// CHECK: threads in (%c256, {{.*}})
// CHECK-NOT: gpu.barrier
#in = affine_map<(g, c) -> (g, c)>
#out = affine_map<(g, c) -> (c)>
func.func @short_sums(%x: memref<63x96xf32>, %s: memref<96xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<63x96xf32>) outs(%s : memref<96xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  }
  return
}
func.func @many_outputs(%x: memref<64x16385xf32>, %s: memref<16385xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<64x16385xf32>) outs(%s : memref<16385xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A layer norm's parameter gradients' second step: the sums' loop innermost, each input
// read at [g, c] (lanes at neighbouring columns), two outputs: split.
// CHECK-LABEL: func.func @two_sums_reduction_innermost(
// CHECK: threads in (%c512, {{.*}})
// CHECK-LABEL: gpu.func @k0_pointwise(
// CHECK: scf.for %{{.*}} = %{{.*}} to %c256 step %c16 iter_args({{.*}}, {{.*}}) -> (f32, f32)
// CHECK: gpu.barrier
#in = affine_map<(c, g) -> (g, c)>
#out = affine_map<(c, g) -> (c)>
func.func @two_sums_reduction_innermost(%a: memref<256x768xf32>, %b: memref<256x768xf32>,
                                        %sa: memref<768xf32>, %sb: memref<768xf32>) {
  linalg.generic {indexing_maps = [#in, #in, #out, #out],
                  iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : memref<256x768xf32>, memref<256x768xf32>)
      outs(%sa, %sb : memref<768xf32>, memref<768xf32>) {
  ^bb0(%x: f32, %y: f32, %accx: f32, %accy: f32):
    %rx = arith.addf %accx, %x : f32
    %ry = arith.addf %accy, %y : f32
    linalg.yield %rx, %ry : f32, f32
  }
  return
}

