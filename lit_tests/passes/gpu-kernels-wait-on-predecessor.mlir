// gpu-kernels-wait-on-predecessor: each kernel of a gpu.module waits for the one before
// it in its stream (wait) before anything else, and lets the next one launch
// (launch_dependents) where it returns; a gpu.func that is not a kernel is left alone,
// and a second run adds nothing.
// RUN: zynml-opt %s --gpu-kernels-wait-on-predecessor | filecheck %s
// RUN: zynml-opt %s --gpu-kernels-wait-on-predecessor --gpu-kernels-wait-on-predecessor | filecheck %s

// CHECK-LABEL: gpu.func @k0_scale(
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: gpu.thread_id x
// CHECK-NOT: nvvm.griddepcontrol
// CHECK: memref.store
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NEXT: gpu.return
// CHECK-LABEL: gpu.func @helper(
// CHECK-NOT: nvvm.griddepcontrol
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @k1_early_exit(
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK: ^bb1:
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NEXT: gpu.return
// CHECK: ^bb2:
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
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
    gpu.func @k1_early_exit(%c: i1) kernel {
      cf.cond_br %c, ^bb1, ^bb2
    ^bb1:
      gpu.return
    ^bb2:
      gpu.return
    }
  }
}
