// linalg-to-gpu-kernels, matmul_wgmma on a batched product (the attention backward's):
// each operand's TMA descriptor is made of it collapsed to [batch * rows, cols] on the
// host (memref.collapse_shape: a view, no copy), the grid counts every batch entry's
// tiles, and the kernel stores C through TMA by a descriptor of C collapsed the same way
// (rows entry * M + ..; f32: 64 x 32 boxes). The zero fill of C is fused into the kernel
// though a generic on another buffer comes between them; one that reads C in between
// keeps the fill a kernel of its own (and C, read first, is stored by the threads).
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s

// CHECK-LABEL: func.func @fill_then_other_then_product(
// CHECK: gpu.launch_func  @zynml_kernels::@k1_pointwise {{.*}} args(%arg3 : memref<64xf32>, %arg4 : memref<64xf32>)
// CHECK-NOT: _pointwise
// CHECK: memref.collapse_shape %arg0 {{\[}}[0, 1], [2]] : memref<3x128x64xbf16> into memref<384x64xbf16>
// CHECK: nvgpu.tma.create.descriptor
// CHECK: memref.collapse_shape %arg1 {{\[}}[0, 1], [2]] : memref<3x64x64xbf16> into memref<192x64xbf16>
// CHECK: nvgpu.tma.create.descriptor
// CHECK: memref.collapse_shape {{.*}} {{\[}}[0, 1], [2]] : memref<3x128x64xf32> into memref<384x64xf32>
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c64{{(_[0-9]+)?}}, %c32{{(_[0-9]+)?}}]
// CHECK: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_matmul_wgmma blocks in (%c3, %c1{{.*}}, %c1{{.*}})
// CHECK-LABEL: gpu.func @k{{[0-9]+}}_matmul_wgmma(
// the copying thread fences each descriptor (written by a host copy) before its copies
// CHECK: nvgpu.tma.fence.descriptor
// CHECK-NEXT: nvgpu.tma.prefetch.descriptor
// CHECK-NEXT: nvgpu.tma.fence.descriptor
// CHECK-NEXT: nvgpu.tma.prefetch.descriptor
// CHECK-NEXT: nvgpu.tma.fence.descriptor
// CHECK-NEXT: nvgpu.tma.prefetch.descriptor
// CHECK: nvgpu.tma.async.load
// CHECK-NOT: vector.store {{.*}} : memref<3x128x64xf32>
// CHECK: vector.store {{.*}} : memref<2048xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: nvgpu.tma.async.store
#a = affine_map<(b, i, j, k) -> (b, i, k)>
#b = affine_map<(b, i, j, k) -> (b, k, j)>
#c = affine_map<(b, i, j, k) -> (b, i, j)>
#id = affine_map<(d0) -> (d0)>
func.func @fill_then_other_then_product(%a: memref<3x128x64xbf16>, %b: memref<3x64x64xbf16>,
                                        %c: memref<3x128x64xf32>, %x: memref<64xf32>,
                                        %y: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(b, i, j) -> ()>, affine_map<(b, i, j) -> (b, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%zero : f32) outs(%c : memref<3x128x64xf32>) {
  ^bb0(%z: f32, %o: f32):
    linalg.yield %z : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : memref<64xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<3x128x64xbf16>, memref<3x64x64xbf16>) outs(%c : memref<3x128x64xf32>) {
  ^bb0(%p: bf16, %q: bf16, %acc: f32):
    %pw = arith.extf %p : bf16 to f32
    %qw = arith.extf %q : bf16 to f32
    %m = arith.mulf %pw, %qw : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// CHECK-LABEL: func.func @fill_read_before_the_product(
// CHECK: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_pointwise
// CHECK: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_pointwise
// CHECK: gpu.launch_func  @zynml_kernels::@k{{[0-9]+}}_matmul_wgmma
#a = affine_map<(b, i, j, k) -> (b, i, k)>
#b = affine_map<(b, i, j, k) -> (b, k, j)>
#c = affine_map<(b, i, j, k) -> (b, i, j)>
#id3 = affine_map<(b, i, j) -> (b, i, j)>
func.func @fill_read_before_the_product(%a: memref<3x128x64xbf16>, %b: memref<3x64x64xbf16>,
                                        %c: memref<3x128x64xf32>, %d: memref<3x128x64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(b, i, j) -> ()>, #id3],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%zero : f32) outs(%c : memref<3x128x64xf32>) {
  ^bb0(%z: f32, %o: f32):
    linalg.yield %z : f32
  }
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c : memref<3x128x64xf32>) outs(%d : memref<3x128x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<3x128x64xbf16>, memref<3x64x64xbf16>) outs(%c : memref<3x128x64xf32>) {
  ^bb0(%p: bf16, %q: bf16, %acc: f32):
    %pw = arith.extf %p : bf16 to f32
    %qw = arith.extf %q : bf16 to f32
    %m = arith.mulf %pw, %qw : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
