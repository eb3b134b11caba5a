// linalg-to-gpu-kernels, transpose strategy: a generic that reads its one input with
// the last two axes swapped and writes its output in order (here [2, 40, 70] from
// [2, 70, 40] bf16, widened to f32 by the body) takes blocks of 32 x 8 threads, one per
// 32 x 32 output tile and batch entry (2 x 3 x 2 = 12): each thread reads 4 input
// values along the input's rows into a 32 x 33 shared tile, a barrier, then writes 4
// along the output's rows, each through the body; edge tiles check both bounds.
// RUN: zynml-opt %s --linalg-to-gpu-kernels | filecheck %s

// CHECK: gpu.launch_func  @zynml_kernels::@k0_transpose blocks in (%c12, %c1{{.*}}, %c1{{.*}}) threads in (%c32, %c8, %c1
// CHECK: memref.global "private" @k0_transpose_tile : memref<32x33xbf16, #gpu.address_space<workgroup>>
// CHECK-LABEL: gpu.func @k0_transpose(
// CHECK-SAME: known_block_size = array<i32: 32, 8, 1>
// CHECK-COUNT-4: memref.store {{.*}} : memref<32x33xbf16, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.load {{.*}} : memref<32x33xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: arith.extf {{.*}} : bf16 to f32
// CHECK-NEXT: memref.store {{.*}} : memref<2x40x70xf32>
func.func @transposed_and_widened(%x: memref<2x70x40xbf16>, %y: memref<2x40x70xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, r, c) -> (b, c, r)>,
                                   affine_map<(b, r, c) -> (b, r, c)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<2x70x40xbf16>) outs(%y : memref<2x40x70xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %w = arith.extf %v : bf16 to f32
    linalg.yield %w : f32
  }
  return
}
