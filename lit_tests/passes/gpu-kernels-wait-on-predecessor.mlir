// gpu-kernels-wait-on-predecessor: each kernel of a gpu.module lets the next kernel of
// its stream start (launch_dependents) and waits for the one before it (wait), before
// anything else; a gpu.func that is not a kernel is left alone, and a second run adds
// nothing.
// RUN: zynml-opt %s --gpu-kernels-wait-on-predecessor | filecheck %s
// RUN: zynml-opt %s --gpu-kernels-wait-on-predecessor --gpu-kernels-wait-on-predecessor | filecheck %s

// CHECK-LABEL: gpu.func @k0_scale(
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: gpu.thread_id x
// CHECK-NOT: nvvm.griddepcontrol
// CHECK-LABEL: gpu.func @helper(
// CHECK-NOT: nvvm.griddepcontrol
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @k1_empty(
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: gpu.return
module attributes {gpu.container_module} {
  gpu.module @zynml_kernels {
    gpu.func @k0_scale(%x: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %x[%i] : memref<64xf32>
      gpu.return
    }
    gpu.func @helper(%a: f32) {
      gpu.return
    }
    gpu.func @k1_empty() kernel {
      gpu.return
    }
  }
}
