// linalg-to-gpu-kernels, implicit_gemm_mma strategy: the convolution of
// linalg-to-gpu-kernels.mlir in f16 (conv2d.zyn's gathers and bounds predicate; 32 input
// channels, 40 output channels, 6 x 5 pixels) on tensor cores. M = 40 output channels, N
// = 30 pixels: one 64 x 64 tile of C, 4 warps of 32 x 32 (the tile that pads least);
// k = (kh, kw, ic) in stages of 32 channels (288 in all). A first kernel computes A'
// (the kernel's weights) once into a buffer of 64 rows of 288 in that order (a thread
// per element, rows past 40 clamped); the GEMM's block then reads A' by 16-byte loads
// of those rows and gathers B' (the input, 0 where the predicate fails), both in f16,
// into two shared stages each, views of one buffer: A' as [2 x 64, 32 + 8] (a row per
// output channel) and B' as [2 x 32, 64 + 8] (a row per k), the first stage before
// the loop; in it, each warp
// reads its fragments with ldmatrix (B' transposed) and makes 2 x 4 mma.sync m16n8k16
// products a step of 16, f32 accumulators, then stores the next stage's elements before
// its one barrier. The epilogue stages a row of warps' sums in the same buffer ([32, 64
// + 8] f32, a lane's two columns by one 64-bit store), then each thread adds a column's
// initial values (the bias) in f32 and rounds once to f16.
// RUN: zynml-opt %s --linalg-to-gpu-kernels | filecheck %s
// RUN: zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{chip=sm_75})' | filecheck %s --check-prefix=TURING

// CHECK: [[COPY:%[a-z0-9_]+]] = memref.alloc() {alignment = 64 : i64} : memref<18432xf16>
// CHECK: gpu.launch_func @zynml_kernels::@k0_implicit_gemm_mma_a_rows blocks in (%c72{{(_[0-9]+)?}}, {{.*}}) threads in (%c256{{(_[0-9]+)?}}, {{.*}}, [[COPY]] : memref<18432xf16>)
// CHECK: gpu.launch_func @zynml_kernels::@k0_implicit_gemm_mma blocks in (%c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c128{{(_[0-9]+)?}}, {{.*}}) {zynml.problem = "{{[^"]*}}", zynml.strategy = "implicit_gemm_mma"}
// CHECK: gpu.func @k0_implicit_gemm_mma_a_rows({{%[a-z0-9_]+}}: memref<32x3x3xi8>, {{%[a-z0-9_]+}}: memref<1x40x6x5xf16>, {{%[a-z0-9_]+}}: memref<1x32x6x5xf16>, [[W0:%[a-z0-9_]+]]: memref<40x32x3x3xf16>, [[BUF:%[a-z0-9_]+]]: memref<18432xf16>)
// CHECK: arith.cmpi ult, {{%[0-9]+}}, %c18432
// CHECK: scf.if
// CHECK: memref.load [[W0]][
// CHECK: memref.store {{.*}}, [[BUF]][{{%[0-9]+}}] : memref<18432xf16>
// CHECK: memref.global "private" @k0_implicit_gemm_mma_shared : memref<19456xi8, #gpu.address_space<workgroup>>
// CHECK: gpu.func @k0_implicit_gemm_mma({{%[a-z0-9_]+}}: memref<32x3x3xi8>, [[OUT:%[a-z0-9_]+]]: memref<1x40x6x5xf16>, [[IN:%[a-z0-9_]+]]: memref<1x32x6x5xf16>, [[W:%[a-z0-9_]+]]: memref<40x32x3x3xf16>, [[A:%[a-z0-9_]+]]: memref<18432xf16>)
// CHECK: memref.view {{%[0-9]+}}[%c0{{(_[0-9]+)?}}][] : memref<19456xi8, #gpu.address_space<workgroup>> to memref<128x40xf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{%[0-9]+}}[%c10240][] : memref<19456xi8, #gpu.address_space<workgroup>> to memref<64x72xf16, #gpu.address_space<workgroup>>
// CHECK: [[SUMS:%[a-z0-9_]+]] = memref.view {{%[0-9]+}}[%c0{{(_[0-9]+)?}}][] : memref<19456xi8, #gpu.address_space<workgroup>> to memref<32x72xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: memref.load [[W]]
// CHECK-COUNT-2: vector.store {{.*}} : memref<128x40xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK-COUNT-16: memref.store {{.*}} : memref<64x72xf16, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.for {{%[a-z0-9_]+}} = %c0{{(_[0-9]+)?}} to %c288{{(_[0-9]+)?}} step %c32{{(_[0-9]+)?}} iter_args(
// CHECK: vector.load [[A]][{{%[0-9]+}}] {alignment = 16 : i64} : memref<18432xf16>, vector<8xf16>
// CHECK: vector.load [[A]][{{%[0-9]+}}] {alignment = 16 : i64} : memref<18432xf16>, vector<8xf16>
// CHECK-NOT: memref.load [[W]]
// CHECK: memref.load [[IN]][
// CHECK: arith.select {{.*}} : f16
// CHECK-NOT: memref.store
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<128x40xf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<64x72xf16, #gpu.address_space<workgroup>>
// CHECK-COUNT-8: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK-COUNT-8: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-2: vector.store {{.*}} : memref<128x40xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK-COUNT-16: memref.store {{.*}} : memref<64x72xf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: scf.yield
// CHECK: scf.if
// CHECK-COUNT-16: vector.store {{.*}}, [[SUMS]][{{.*}}] {alignment = 8 : i64} : memref<32x72xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK-NEXT: memref.load [[SUMS]]
// CHECK-NEXT: [[INIT:%[0-9]+]] = memref.load [[OUT]]
// CHECK-NEXT: [[WIDE:%[0-9]+]] = arith.extf [[INIT]] : f16 to f32
// CHECK-NEXT: [[SUM:%[0-9]+]] = arith.addf [[WIDE]], {{%[0-9]+}} : f32
// CHECK-NEXT: [[ROUNDED:%[0-9]+]] = arith.truncf [[SUM]] : f32 to f16
// CHECK-NEXT: memref.store [[ROUNDED]], [[OUT]]
// sm_75 has ldmatrix but no mma.sync m16n8k16: the SIMT implicit GEMM, in f32 stages
// TURING: @k0_implicit_gemm blocks
// TURING: memref.global "private" @k0_implicit_gemm_a : memref<2x8x68xf32, #gpu.address_space<workgroup>>
// TURING-NOT: mma.sync
#extents = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d4, d5, d6)>
#conv_out = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>
func.func @conv2d_f16(%input: memref<1x32x6x5xf16>, %kernel: memref<40x32x3x3xf16>, %extents: memref<32x3x3xi8>, %output: memref<1x40x6x5xf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c39 = arith.constant 39 : index
  %zero = arith.constant 0.0 : f16
  linalg.generic {indexing_maps = [#extents, #conv_out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%extents : memref<32x3x3xi8>) outs(%output : memref<1x40x6x5xf16>) {
  ^bb0(%e: i8, %o: f16):
    %ic = linalg.index 4 : index
    %oh = linalg.index 2 : index
    %kh = linalg.index 5 : index
    %ih0 = arith.addi %oh, %kh : index
    %ih = arith.subi %ih0, %c1 : index
    %ow = linalg.index 3 : index
    %kw = linalg.index 6 : index
    %iw0 = arith.addi %ow, %kw : index
    %iw = arith.subi %iw0, %c1 : index
    %ih1 = arith.maxsi %ih, %c0 : index
    %ih2 = arith.minsi %ih1, %c5 : index
    %iw1 = arith.maxsi %iw, %c0 : index
    %iw2 = arith.minsi %iw1, %c4 : index
    %x = memref.load %input[%c0, %ic, %ih2, %iw2] : memref<1x32x6x5xf16>
    %oc = linalg.index 1 : index
    %oc1 = arith.minsi %oc, %c39 : index
    %w = memref.load %kernel[%oc1, %ic, %kh, %kw] : memref<40x32x3x3xf16>
    %p = arith.mulf %x, %w : f16
    %h0 = arith.cmpi sge, %ih, %c0 : index
    %h1 = arith.cmpi slt, %ih, %c6 : index
    %w0 = arith.cmpi sge, %iw, %c0 : index
    %w1 = arith.cmpi slt, %iw, %c5 : index
    %hh = arith.andi %h0, %h1 : i1
    %ww = arith.andi %w0, %w1 : i1
    %inside = arith.andi %hh, %ww : i1
    %term = arith.select %inside, %p, %zero : f16
    %s = arith.addf %o, %term : f16
    linalg.yield %s : f16
  }
  return
}

