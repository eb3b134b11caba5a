// linalg-to-gpu-kernels, matvec_mma strategy: a product of 5-16 bf16/f16 rows on
// mma.sync m16n8k16, transposed (B's 128 columns of a block are the mmas' rows). A
// block of 4 warps splits k (a 16-row step a trip); the 8 blocks of a cluster split it
// further (2048 rows: 128 steps, 16 a block: 4 trips). Per step a lane makes eight
// 16-byte loads of B and two 4-byte loads of A per 8 rows, then 8 mmas per 8 rows of A;
// the warps' sums meet in shared memory (rows of 16 x 129 words: a word of padding per
// row of A; with 8 warps: 4 rows, warps 4-7 adding theirs after a barrier), the
// cluster's through distributed shared memory, and each output is rounded once. 4 rows
// stay on matvec's FMAs.
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s
// RUN: zynml-opt %s --split-input-file --pass-pipeline='builtin.module(linalg-to-gpu-kernels{params=matvec_mma.warps=8})' | filecheck %s --check-prefix=WARPS8

// CHECK: gpu.launch_func @{{.*}}::@k0_matvec_mma blocks in (%c2, %c8, %c1{{.*}}) threads in (%c128,
// CHECK: memref.global "private" @k0_matvec_mma_partial : memref<4x2064xf32, #gpu.address_space<workgroup>>
// CHECK: memref.global "private" @k0_matvec_mma_total : memref<1536xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: gpu.func @k0_matvec_mma(
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>, nvvm.cluster_dim = array<i32: 1, 8, 1>
// CHECK: scf.for {{.*}} = %c0{{.*}} to %c4{{.*}} step
// CHECK-COUNT-8: vector.load {{.*}} : memref<2048x256xbf16, #gpu.address_space<global>>, vector<8xbf16>
// CHECK-COUNT-4: vector.load {{.*}} : memref<12x2048xbf16, #gpu.address_space<global>>, vector<2xbf16>
// CHECK-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK: scf.yield
// CHECK-COUNT-64: memref.store {{.*}} : memref<4x2064xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-NOT: memref.store {{.*}} : memref<4x2064xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK: mapa.shared::cluster.u32
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: memref.store {{.*}} : memref<12x256xbf16>
// CHECK: nvvm.cluster.wait {aligned}
// CHECK-NEXT: gpu.return
// WARPS8: threads in (%c256,
// WARPS8: memref.global "private" @k0_matvec_mma_partial : memref<4x2064xf32, #gpu.address_space<workgroup>>
// WARPS8: scf.yield
// WARPS8-COUNT-64: memref.store {{.*}} : memref<4x2064xf32, #gpu.address_space<workgroup>>
// WARPS8: gpu.barrier
// WARPS8-COUNT-64: arith.addf
// WARPS8: gpu.barrier
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @batched_decode_product(%a: memref<12x2048xbf16>, %b: memref<2048x256xbf16>,
                                  %c: memref<12x256xbf16>) {
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<12x2048xbf16>, memref<2048x256xbf16>) outs(%c : memref<12x256xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  }
  return
}

// -----

// CHECK-NOT: matvec_mma
// CHECK-LABEL: gpu.func @k0_matvec(
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @four_rows(%a: memref<4x2048xbf16>, %b: memref<2048x256xbf16>,
                     %c: memref<4x256xbf16>) {
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x2048xbf16>, memref<2048x256xbf16>) outs(%c : memref<4x256xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  }
  return
}
