// linalg-to-gpu-kernels with tf32=true: an f32 product runs on wgmma in TF32 (k8
// steps), which reads both operands K-major, so B [K, N] is first transposed into a
// buffer of its own by a kernel (zynml/backend/cuda/tf32_operands.py) and the product
// reads it [N, K] through TMA in boxes of tile_n rows x 32 f32. Without the option the
// product stays f32 on SIMT tiles; a B given K-major (W[j, k]) and a transposed copy
// made only for the product are read as they are, with no copy at all (bf16 too).
// RUN: zynml-opt %s --split-input-file --pass-pipeline='builtin.module(linalg-to-gpu-kernels{tf32=true})' | filecheck %s
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s --check-prefix=F32
// RUN: zynml-opt %s --split-input-file --pass-pipeline='builtin.module(linalg-to-gpu-kernels{tf32=true chip=sm_80})' | filecheck %s --check-prefix=SM80

#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (k, j)>
#c = affine_map<(i, j, k) -> (i, j)>
// CHECK-LABEL: func.func @product(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: memref<256x128xf32>, [[B:%[a-z0-9_]+]]: memref<128x512xf32>
// CHECK: [[BT:%[a-z0-9_]+]] = memref.alloc() : memref<512x128xf32>
// CHECK: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_transpose {{.*}} args([[B]] : memref<128x512xf32>, [[BT]] : memref<512x128xf32>)
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c128{{(_[0-9]+)?}}, %c32{{(_[0-9]+)?}}] {{.*}}memref<128x32xf32
// CHECK: memref.cast [[BT]]
// CHECK: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_matmul_wgmma {{.*}} args([[A]] : memref<256x128xf32>, [[BT]] : memref<512x128xf32>
// CHECK-LABEL: gpu.func @k{{[0-9]+}}_matmul_wgmma(
// CHECK: wgmma.mma_async.sync.aligned.m64n{{[0-9]+}}k8.f32.tf32.tf32 {{.*}}, p, 1, 1; }
// F32-LABEL: func.func @product(
// F32-NOT: memref.alloc
// F32-NOT: tf32
// F32: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_matmul blocks
// a chip without wgmma keeps f32 products whatever the option
// SM80-LABEL: func.func @product(
// SM80-NOT: memref.alloc
// SM80: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_matmul blocks
// SM80-LABEL: func.func @k_major(
// SM80-NOT: tf32
// SM80: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_matmul blocks
func.func @product(%a: memref<256x128xf32>, %b: memref<128x512xf32>, %c: memref<256x512xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(i, j) -> ()>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%zero : f32) outs(%c : memref<256x512xf32>) {
  ^bb0(%z: f32, %o: f32):
    linalg.yield %z : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<256x128xf32>, memref<128x512xf32>) outs(%c : memref<256x512xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// B K-major: one kernel, B's TMA boxes its tile_n rows, wgmma's B read K-major
#a = affine_map<(i, j, k) -> (i, k)>
#w = affine_map<(i, j, k) -> (j, k)>
#c = affine_map<(i, j, k) -> (i, j)>
// CHECK-LABEL: func.func @k_major(
// CHECK-NOT: memref.alloc
// CHECK-NOT: _transpose
// CHECK: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_matmul_wgmma
// CHECK: wgmma.mma_async.sync.aligned.m64n{{[0-9]+}}k8.f32.tf32.tf32
// F32-LABEL: func.func @k_major(
// F32: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_matmul blocks
func.func @k_major(%a: memref<256x128xf32>, %w: memref<512x128xf32>, %c: memref<256x512xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(i, j) -> ()>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%zero : f32) outs(%c : memref<256x512xf32>) {
  ^bb0(%z: f32, %o: f32):
    linalg.yield %z : f32
  }
  linalg.generic {indexing_maps = [#a, #w, #c],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<256x128xf32>, memref<512x128xf32>) outs(%c : memref<256x512xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// dx = grad @ w^T written with a transposed copy of w [K, N] (bf16; as the library's
// linear_backward_input): the copy is never made, TMA reads w itself K-major, and
// wgmma's transpose-B mode is off (the last immediate)
#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (k, j)>
#c = affine_map<(i, j, k) -> (i, j)>
// CHECK-LABEL: func.func @transposed_copy(
// CHECK-SAME: [[G:%[a-z0-9_]+]]: memref<256x128xbf16>, [[W:%[a-z0-9_]+]]: memref<512x128xbf16>
// CHECK-NOT: memref.alloc
// CHECK-NOT: _transpose
// CHECK: memref.cast [[W]]
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c{{[0-9]+}}{{(_[0-9]+)?}}, %c64{{(_[0-9]+)?}}]
// CHECK: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_matmul_wgmma {{.*}} args([[G]] : memref<256x128xbf16>, [[W]] : memref<512x128xbf16>
// CHECK: wgmma.mma_async.sync.aligned.m64n{{[0-9]+}}k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0; }
// F32-LABEL: func.func @transposed_copy(
// F32-NOT: _transpose
// F32: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_matmul_wgmma
func.func @transposed_copy(%g: memref<256x128xbf16>, %w: memref<512x128xbf16>,
                           %c: memref<256x512xf32>) {
  %wt = memref.alloc() : memref<128x512xbf16>
  linalg.generic {indexing_maps = [affine_map<(j, k) -> (k, j)>, affine_map<(j, k) -> (j, k)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<512x128xbf16>) outs(%wt : memref<128x512xbf16>) {
  ^bb0(%v: bf16, %o: bf16):
    linalg.yield %v : bf16
  }
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(i, j) -> ()>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%zero : f32) outs(%c : memref<256x512xf32>) {
  ^bb0(%z: f32, %o: f32):
    linalg.yield %z : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g, %wt : memref<256x128xbf16>, memref<128x512xbf16>) outs(%c : memref<256x512xf32>) {
  ^bb0(%p: bf16, %q: bf16, %acc: f32):
    %pw = arith.extf %p : bf16 to f32
    %qw = arith.extf %q : bf16 to f32
    %m = arith.mulf %pw, %qw : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
