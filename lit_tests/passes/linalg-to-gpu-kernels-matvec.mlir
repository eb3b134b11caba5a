// linalg-to-gpu-kernels, matvec strategy: a product of at most 16 rows (a decode step's
// tokens) reads B once. A block of 256 threads takes 8 x 8 columns of a bf16 B (16-byte
// loads) and spreads k over 32 thread rows, 8 consecutive k each step; the partial sums
// meet through shuffles within each warp (xor 16, 8: lanes sharing a column thread) and
// one shared-memory row per warp. On sm_90 the 4 blocks of a cluster split k (1024 rows:
// 4 steps of 256), each publishes its totals in shared memory, and after a cluster
// barrier block s adds the 4 blocks' totals of its quarter of the outputs (distributed
// shared memory) and rounds each once. Without clusters (sm_80) a block takes 2 x 8
// columns and all of k. A product with more than 16 rows, or a k that is not a multiple
// of the 16-byte run, goes to the strategies after it.
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s
// RUN: zynml-opt %s --split-input-file --pass-pipeline='builtin.module(linalg-to-gpu-kernels{chip=sm_80})' | filecheck %s --check-prefix=SM80

// CHECK: gpu.launch_func @{{.*}}::@k0_matvec blocks in (%c1, %c4, %c1{{.*}}) threads in (%c256,
// CHECK: memref.global "private" @k0_matvec_partial : memref<8x192xf32, #gpu.address_space<workgroup>>
// CHECK: memref.global "private" @k0_matvec_total : memref<192xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: gpu.func @k0_matvec(
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>, nvvm.cluster_dim = array<i32: 1, 4, 1>
// CHECK: scf.for {{.*}} = %c0 to %c1 step {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32,
// CHECK-COUNT-3: vector.load {{.*}} : memref<3x1024xbf16, #gpu.address_space<global>>, vector<8xbf16>
// CHECK-COUNT-8: vector.load {{.*}} : memref<1024x40xbf16, #gpu.address_space<global>>, vector<8xbf16>
// CHECK: math.fma {{.*}} : f32
// CHECK: scf.yield
// CHECK: gpu.shuffle  xor {{.*}}, %c16_i32
// CHECK: gpu.shuffle  xor {{.*}}, %c8_i32
// CHECK-NOT: gpu.shuffle  xor {{.*}}, %c4_i32
// CHECK: gpu.barrier
// CHECK: memref.store {{.*}} : memref<192xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-COUNT-4: mapa.shared::cluster.u32
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: memref.store {{.*}} : memref<3x40xbf16>
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-NEXT: gpu.return

// SM80: gpu.launch_func @{{.*}}::@k0_matvec blocks in (%c3, %c1, %c1{{.*}}) threads in (%c256,
// SM80: memref.global "private" @k0_matvec_partial : memref<8x48xf32, #gpu.address_space<workgroup>>
// SM80-NOT: k0_matvec_total
// SM80-LABEL: gpu.func @k0_matvec(
// SM80-SAME: known_block_size = array<i32: 256, 1, 1>} {
// SM80: scf.for {{.*}} = %c0 to %c1 step {{.*}} iter_args
// SM80: gpu.shuffle  xor {{.*}}, %c16_i32
// SM80: gpu.shuffle  xor {{.*}}, %c2_i32
// SM80-NOT: gpu.shuffle  xor {{.*}}, %c1_i32
// SM80: gpu.barrier
// SM80-NOT: nvvm.cluster
// SM80: arith.truncf {{.*}} : f32 to bf16
// SM80: memref.store {{.*}} : memref<3x40xbf16>
// SM80: gpu.return
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @decode_step_product(%a: memref<3x1024xbf16>, %b: memref<1024x40xbf16>,
                               %c: memref<3x40xbf16>) {
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<3x1024xbf16>, memref<1024x40xbf16>) outs(%c : memref<3x40xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  }
  return
}

// -----

// CHECK-NOT: matvec
// CHECK-LABEL: gpu.func @k0_matmul(
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @seventeen_rows(%a: memref<17x1024xf32>, %b: memref<1024x400xf32>,
                          %c: memref<17x400xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<17x1024xf32>, memref<1024x400xf32>) outs(%c : memref<17x400xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// CHECK-NOT: matvec
// CHECK-LABEL: gpu.func @k0_
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @k_not_whole_runs(%a: memref<2x1001xf32>, %b: memref<1001x400xf32>,
                            %c: memref<2x400xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x1001xf32>, memref<1001x400xf32>) outs(%c : memref<2x400xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// C filled with zeros, then the product: one kernel that starts from the constant and
// never reads C.
// CHECK: gpu.launch_func @{{.*}}::@k0_matvec
// CHECK-NOT: gpu.launch_func
// CHECK-LABEL: gpu.func @k0_matvec(
// CHECK-NOT: memref.load {{.*}} : memref<2x40xf32>
// CHECK: memref.store {{.*}} : memref<2x40xf32>
// CHECK-NOT: gpu.func
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#fill = affine_map<(d0, d1) -> (d0, d1)>
func.func @filled_then_product(%a: memref<2x1024xf32>, %b: memref<1024x40xf32>,
                               %c: memref<2x40xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#fill], iterator_types = ["parallel", "parallel"]}
      outs(%c : memref<2x40xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x1024xf32>, memref<1024x40xf32>) outs(%c : memref<2x40xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
