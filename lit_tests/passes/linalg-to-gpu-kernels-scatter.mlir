// linalg-to-gpu-kernels on scatters (zynml/backend/cuda/scatter.py): each call of a
// `__zynml_scatter_<kind>_d<depth>_<n>` declaration becomes pointwise kernels. Integer
// min/max are atomics; float min/max a compare-and-swap loop on the element's bits around
// arith.minimumf (NaN propagates); with deterministic=true a float sum is three kernels
// (ranks, the sorted order, one sum per run of one id) and no atomics (DET lines).
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | zynml-opt --split-input-file | filecheck %s
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels=deterministic=true | filecheck %s --check-prefix=DET

// CHECK-LABEL: func.func @main(
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.func @k0_pointwise(
// CHECK: memref.atomic_rmw mins
// DET-LABEL: func.func @main(
// DET: gpu.launch_func @zynml_kernels::@k0_pointwise
// DET-NOT: gpu.launch_func
// DET: memref.atomic_rmw mins
func.func @main(%w: memref<7x5xi32>, %ids: memref<13x1xi64>, %g: memref<13x5xi32>)
    -> memref<7x5xi32> attributes {zynml.inputs = ["w", "ids", "g"], zynml.outputs = ["w"], cir.mutated = ["w"]} {
  %a = memref.alloc() {alignment = 64 : i64} : memref<7x5xi32>
  memref.copy %w, %a : memref<7x5xi32> to memref<7x5xi32>
  %r = call @__zynml_scatter_min_d1_0(%g, %ids, %a) : (memref<13x5xi32>, memref<13x1xi64>, memref<7x5xi32>) -> memref<7x5xi32>
  return %r : memref<7x5xi32>
}
func.func private @__zynml_scatter_min_d1_0(memref<13x5xi32>, memref<13x1xi64>, memref<7x5xi32>) -> memref<7x5xi32> attributes {zynml.scatter}

// -----

// CHECK-LABEL: func.func @main(
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise
// CHECK: gpu.func @k0_pointwise(
// CHECK: memref.atomic_rmw maxu
// DET-LABEL: func.func @main(
// DET: memref.atomic_rmw maxu
func.func @main(%w: memref<7x5xi8>, %ids: memref<13x1xi64>, %g: memref<13x5xi8>)
    -> memref<7x5xi8> attributes {zynml.inputs = ["w", "ids", "g"], zynml.outputs = ["w"], cir.mutated = ["w"]} {
  %a = memref.alloc() {alignment = 64 : i64} : memref<7x5xi8>
  memref.copy %w, %a : memref<7x5xi8> to memref<7x5xi8>
  %r = call @__zynml_scatter_umax_d1_0(%g, %ids, %a) : (memref<13x5xi8>, memref<13x1xi64>, memref<7x5xi8>) -> memref<7x5xi8>
  return %r : memref<7x5xi8>
}
func.func private @__zynml_scatter_umax_d1_0(memref<13x5xi8>, memref<13x1xi64>, memref<7x5xi8>) -> memref<7x5xi8> attributes {zynml.scatter}

// -----

// CHECK-LABEL: func.func @main(
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.func @k0_pointwise(
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: scf.while
// CHECK: arith.minimumf
// CHECK: llvm.cmpxchg
// CHECK-NOT: memref.atomic_rmw
// DET-LABEL: func.func @main(
// DET: llvm.cmpxchg
func.func @main(%w: memref<7x5xf32>, %ids: memref<13x1xi64>, %g: memref<13x5xf32>)
    -> memref<7x5xf32> attributes {zynml.inputs = ["w", "ids", "g"], zynml.outputs = ["w"], cir.mutated = ["w"]} {
  %a = memref.alloc() {alignment = 64 : i64} : memref<7x5xf32>
  memref.copy %w, %a : memref<7x5xf32> to memref<7x5xf32>
  %r = call @__zynml_scatter_min_d1_0(%g, %ids, %a) : (memref<13x5xf32>, memref<13x1xi64>, memref<7x5xf32>) -> memref<7x5xf32>
  return %r : memref<7x5xf32>
}
func.func private @__zynml_scatter_min_d1_0(memref<13x5xf32>, memref<13x1xi64>, memref<7x5xf32>) -> memref<7x5xf32> attributes {zynml.scatter}

// -----

// A float sum: atomics by default; sorted segments with deterministic=true, written into
// the input itself (no copy), the ranks and the order in buffers of their own.
// CHECK-LABEL: func.func @main(
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise
// CHECK: memref.atomic_rmw addf
// DET-LABEL: func.func @main(
// DET-SAME: [[W:%[a-z0-9_]+]]: memref<7x5xf32>, [[IDS:%[a-z0-9_]+]]: memref<13x1xi64>, [[G:%[a-z0-9_]+]]: memref<13x5xf32>)
// DET-NOT: memref.copy
// DET: [[RANK:%[a-z0-9_]+]] = memref.alloc() : memref<13xi64>
// DET: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} args([[RANK]] : memref<13xi64>, [[IDS]] : memref<13x1xi64>)
// DET: [[ORDER:%[a-z0-9_]+]] = memref.alloc() : memref<13xi64>
// DET: gpu.launch_func @zynml_kernels::@k1_pointwise {{.*}} args([[RANK]] : memref<13xi64>, [[ORDER]] : memref<13xi64>)
// DET: gpu.launch_func @zynml_kernels::@k2_pointwise {{.*}}[[ORDER]]{{.*}}[[W]]
// DET: return [[W]] : memref<7x5xf32>
// DET: gpu.func @k0_pointwise(
// DET: scf.for
// DET: arith.cmpi slt
// DET: gpu.func @k1_pointwise(
// DET: memref.store
// DET: gpu.func @k2_pointwise(
// DET: scf.if
// DET: scf.while
// DET: arith.addf
// DET-NOT: atomic
func.func @main(%w: memref<7x5xf32>, %ids: memref<13x1xi64>, %g: memref<13x5xf32>)
    -> memref<7x5xf32> attributes {zynml.inputs = ["w", "ids", "g"], zynml.outputs = ["w"], cir.mutated = ["w"]} {
  %a = memref.alloc() {alignment = 64 : i64} : memref<7x5xf32>
  memref.copy %w, %a : memref<7x5xf32> to memref<7x5xf32>
  %r = call @__zynml_scatter_add_d1_0(%g, %ids, %a) : (memref<13x5xf32>, memref<13x1xi64>, memref<7x5xf32>) -> memref<7x5xf32>
  return %r : memref<7x5xf32>
}
func.func private @__zynml_scatter_add_d1_0(memref<13x5xf32>, memref<13x1xi64>, memref<7x5xf32>) -> memref<7x5xf32> attributes {zynml.scatter}

// -----

// A float sum whose rows are 16 bytes: a thread per point, the atomics inside its range
// guard (not the vector path, whose idle threads would add point 0 again).
// CHECK-LABEL: func.func @main(
// CHECK: gpu.func @k0_pointwise(
// CHECK-NOT: vector.load
// CHECK: scf.if
// CHECK: memref.atomic_rmw addf
// CHECK-NOT: memref.atomic_rmw
// CHECK: gpu.return
func.func @main(%w: memref<9x4xf32>, %ids: memref<1x1xi64>, %g: memref<1x4xf32>)
    -> memref<9x4xf32> attributes {zynml.inputs = ["w", "ids", "g"], zynml.outputs = ["w"], cir.mutated = ["w"]} {
  %r = call @__zynml_scatter_add_d1_0(%g, %ids, %w) : (memref<1x4xf32>, memref<1x1xi64>, memref<9x4xf32>) -> memref<9x4xf32>
  return %r : memref<9x4xf32>
}
func.func private @__zynml_scatter_add_d1_0(memref<1x4xf32>, memref<1x1xi64>, memref<9x4xf32>) -> memref<9x4xf32> attributes {zynml.scatter}
