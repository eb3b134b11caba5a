// widen-half-arithmetic: f16 / bf16 arithmetic of GPU kernels in f32, rounded once where
// a value leaves it (a store, a loop's carried value); exp as exp2 of x log2 e and
// division with `afn` (the chip's approximate instructions: the result is rounded to a
// half type). A bf16 accumulator carried by a loop still rounds at each step; a rounding
// the kernel had (a cast) is kept; a kernel of the chip's half instructions only (add,
// mul, fma, ...) and f32 kernels are left as they are; a second run changes nothing.
// RUN: zynml-opt %s --widen-half-arithmetic | filecheck %s
// RUN: zynml-opt %s --widen-half-arithmetic --widen-half-arithmetic | filecheck %s

// CHECK-LABEL: gpu.func @k0_sigmoid(
// CHECK: [[V:%[0-9]+]] = memref.load
// CHECK: [[W:%[0-9]+]] = arith.extf [[V]] : bf16 to f32
// CHECK-NEXT: [[A:%[0-9]+]] = math.absf [[W]] : f32
// CHECK-NEXT: [[N:%[0-9]+]] = arith.negf [[A]] : f32
// CHECK: [[L:%[0-9]+]] = arith.mulf [[N]], %{{.*}} : f32
// CHECK-NEXT: [[E:%[0-9]+]] = math.exp2 [[L]] : f32
// CHECK: [[D:%[0-9]+]] = arith.addf [[E]], %{{.*}} : f32
// CHECK: [[S:%[0-9]+]] = arith.divf %{{.*}}, [[D]] fastmath<afn> : f32
// CHECK-NEXT: [[R:%[0-9]+]] = arith.truncf [[S]] : f32 to bf16
// CHECK-NEXT: memref.store [[R]]
// CHECK-NOT: arith.truncf
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @k1_sum(
// CHECK: scf.for {{.*}} -> (bf16)
// CHECK: arith.divf %{{.*}}, %{{.*}} fastmath<afn> : f32
// CHECK: [[T:%[0-9]+]] = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: [[TR:%[0-9]+]] = arith.truncf [[T]] : f32 to bf16
// CHECK-NEXT: scf.yield [[TR]] : bf16
// CHECK-LABEL: gpu.func @k2_vectors(
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK: math.exp2 %{{.*}} : vector<8xf32>
// CHECK: arith.cmpf olt, %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK-NOT: arith.truncf
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @k3_f32(
// CHECK-NOT: arith.extf
// CHECK: math.exp %{{.*}} : f32
// CHECK-NEXT: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK-LABEL: gpu.func @k4_native(
// CHECK-NOT: arith.extf
// CHECK: arith.mulf %{{.*}}, %{{.*}} : bf16
// CHECK-NEXT: arith.addf %{{.*}}, %{{.*}} : bf16
// CHECK-LABEL: gpu.func @k5_cast(
// CHECK: [[C:%[0-9]+]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: [[CW:%[0-9]+]] = arith.extf [[C]] : bf16 to f32
// CHECK: math.exp2
module attributes {gpu.container_module} {
  gpu.module @zynml_kernels {
    gpu.func @k0_sigmoid(%x: memref<64xbf16>, %y: memref<64xbf16>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xbf16>
      %one = arith.constant 1.0 : bf16
      %a = math.absf %v : bf16
      %n = arith.negf %a : bf16
      %e = math.exp %n : bf16
      %d = arith.addf %e, %one : bf16
      %s = arith.divf %one, %d : bf16
      memref.store %s, %y[%i] : memref<64xbf16>
      gpu.return
    }
    gpu.func @k1_sum(%x: memref<64xbf16>, %y: memref<bf16>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : bf16
      %sum = scf.for %j = %c0 to %c64 step %c1 iter_args(%acc = %zero) -> (bf16) {
        %v = memref.load %x[%j] : memref<64xbf16>
        %h = arith.divf %v, %v : bf16
        %t = arith.addf %acc, %h : bf16
        scf.yield %t : bf16
      }
      memref.store %sum, %y[] : memref<bf16>
      gpu.return
    }
    gpu.func @k2_vectors(%x: memref<64xf16>, %y: memref<64xi1>) kernel {
      %c0 = arith.constant 0 : index
      %v = vector.load %x[%c0] : memref<64xf16>, vector<8xf16>
      %w = arith.mulf %v, %v : vector<8xf16>
      %e = math.exp %w : vector<8xf16>
      %z = arith.constant dense<1.0> : vector<8xf16>
      %b = arith.cmpf olt, %e, %z : vector<8xf16>
      vector.store %b, %y[%c0] : memref<64xi1>, vector<8xi1>
      gpu.return
    }
    gpu.func @k3_f32(%x: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %e = math.exp %v : f32
      %d = arith.divf %v, %e : f32
      memref.store %d, %x[%i] : memref<64xf32>
      gpu.return
    }
    gpu.func @k4_native(%x: memref<64xbf16>, %w: memref<64xbf16>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xbf16>
      %u = memref.load %w[%i] : memref<64xbf16>
      %p = arith.mulf %v, %u : bf16
      %s = arith.addf %p, %v : bf16
      memref.store %s, %x[%i] : memref<64xbf16>
      gpu.return
    }
    gpu.func @k5_cast(%x: memref<64xf32>, %y: memref<64xbf16>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %c = arith.truncf %v : f32 to bf16
      %e = math.exp %c : bf16
      memref.store %e, %y[%i] : memref<64xbf16>
      gpu.return
    }
  }
}
