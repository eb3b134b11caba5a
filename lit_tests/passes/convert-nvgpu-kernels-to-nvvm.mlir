// convert-nvgpu-kernels-to-nvvm runs upstream's convert-nvgpu-to-nvvm on the kernels that
// use nvgpu ops, while their loops are still scf.for, and leaves the other kernels as they
// are, in place (passes/nvgpu_kernels_to_nvvm.py). Upstream's pass alone rejects the
// wmma kernel below: its loop carries !gpu.mma_matrix values it cannot convert (the
// NOPASS run shows that error).
// RUN: zynml-opt %s --convert-nvgpu-kernels-to-nvvm | filecheck %s
// RUN: zynml-opt %s --pass-pipeline='builtin.module(convert-nvgpu-kernels-to-nvvm)' | filecheck %s
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(gpu.module(convert-nvgpu-to-nvvm))' 2>&1 | filecheck %s --check-prefix=NOPASS

// CHECK: gpu.module @kernels {
// CHECK: memref.global "private" @__mbarrier : memref<2xi64, 3>
// CHECK: gpu.func @wmma_first(
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (!gpu.mma_matrix<16x16xf32, "COp">)
// CHECK: gpu.subgroup_mma_compute
// CHECK: gpu.func @barriers(
// CHECK-NOT: nvgpu.
// CHECK: memref.get_global @__mbarrier
// CHECK: nvvm.mbarrier.init {{.*}} : !llvm.ptr<3>, i32
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity {{.*}} : !llvm.ptr<3>, i32, i32
// CHECK: gpu.return
// CHECK: gpu.func @wmma_last(
// CHECK: gpu.subgroup_mma_compute
// NOPASS: failed to legalize operation 'scf.for'
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @wmma_first(%a: memref<16x16xf16>, %c: memref<16x16xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %zero = arith.constant 0.0 : f32
      %init = gpu.subgroup_mma_constant_matrix %zero : !gpu.mma_matrix<16x16xf32, "COp">
      %sum = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (!gpu.mma_matrix<16x16xf32, "COp">) {
        %x = gpu.subgroup_mma_load_matrix %a[%c0, %c0] {leadDimension = 16 : index} : memref<16x16xf16> -> !gpu.mma_matrix<16x16xf16, "AOp">
        %y = gpu.subgroup_mma_load_matrix %a[%c0, %c0] {leadDimension = 16 : index} : memref<16x16xf16> -> !gpu.mma_matrix<16x16xf16, "BOp">
        %next = gpu.subgroup_mma_compute %x, %y, %acc : !gpu.mma_matrix<16x16xf16, "AOp">, !gpu.mma_matrix<16x16xf16, "BOp"> -> !gpu.mma_matrix<16x16xf32, "COp">
        scf.yield %next : !gpu.mma_matrix<16x16xf32, "COp">
      }
      gpu.subgroup_mma_store_matrix %sum, %c[%c0, %c0] {leadDimension = 16 : index} : !gpu.mma_matrix<16x16xf32, "COp">, memref<16x16xf32>
      gpu.return
    }
    gpu.func @barriers(%steps: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %ticks = arith.constant 1000 : index
      %parity = arith.constant false
      %group = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      nvgpu.mbarrier.init %group[%c0], %c1 : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      scf.for %i = %c0 to %steps step %c1 {
        nvgpu.mbarrier.try_wait.parity %group[%c0], %parity, %ticks : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      }
      gpu.return
    }
    gpu.func @wmma_last(%a: memref<16x16xf16>, %c: memref<16x16xf32>) kernel {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %init = gpu.subgroup_mma_constant_matrix %zero : !gpu.mma_matrix<16x16xf32, "COp">
      %x = gpu.subgroup_mma_load_matrix %a[%c0, %c0] {leadDimension = 16 : index} : memref<16x16xf16> -> !gpu.mma_matrix<16x16xf16, "AOp">
      %y = gpu.subgroup_mma_load_matrix %a[%c0, %c0] {leadDimension = 16 : index} : memref<16x16xf16> -> !gpu.mma_matrix<16x16xf16, "BOp">
      %d = gpu.subgroup_mma_compute %x, %y, %init : !gpu.mma_matrix<16x16xf16, "AOp">, !gpu.mma_matrix<16x16xf16, "BOp"> -> !gpu.mma_matrix<16x16xf32, "COp">
      gpu.subgroup_mma_store_matrix %d, %c[%c0, %c0] {leadDimension = 16 : index} : !gpu.mma_matrix<16x16xf32, "COp">, memref<16x16xf32>
      gpu.return
    }
  }
}
