// linalg-to-gpu-kernels outlines each linalg.generic of a bufferized module into a
// gpu.func of `gpu.module @zynml_kernels`, built by the first strategy that matches
// (passes/gpu_strategies/: row_reduce, then pointwise), and replaces the generic by the
// gpu.launch_func that runs it, tagged with zynml.strategy (see
// passes/linalg_to_gpu_kernels.py). Strided memref.copy ops become copy kernels first.
// The FORCE lines check strategy=pointwise; the last chunks are modules the pass rejects,
// each with a located error.
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --linalg-to-gpu-kernels | filecheck %s
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(linalg-to-gpu-kernels)' | filecheck %s
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --linalg-to-gpu-kernels | zynml-opt --split-input-file | filecheck %s
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=pointwise})' | filecheck %s --check-prefix=FORCE
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --linalg-to-gpu-kernels=strategy=pointwise | filecheck %s --check-prefix=FORCE

// Elementwise, 2-d, with a broadcast row input: pointwise. The 33 * 100 = 3300 points are
// flattened row-major (the column is linear % 100, the row linear / 100) and cut into
// 13 blocks of 256 threads; threads past 3300 do nothing.
// CHECK: module attributes {gpu.container_module} {
// CHECK-LABEL: func.func @softmax_exp(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: memref<33x100xf32>, [[M:%[a-z0-9_]+]]: memref<33xf32>, [[Y:%[a-z0-9_]+]]: memref<33x100xf32>)
// CHECK-NOT: linalg.generic
// CHECK-DAG: [[GX:%[a-z0-9_]+]] = arith.constant 13 : index
// CHECK-DAG: [[BX:%[a-z0-9_]+]] = arith.constant 256 : index
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise blocks in ([[GX]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in ([[BX]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args([[X]] : memref<33x100xf32>, [[M]] : memref<33xf32>, [[Y]] : memref<33x100xf32>) {zynml.strategy = "pointwise"}
// CHECK-NEXT: return
// CHECK: gpu.module @zynml_kernels {
// CHECK-NEXT: gpu.func @k0_pointwise([[KX:%[a-z0-9_]+]]: memref<33x100xf32>, [[KM:%[a-z0-9_]+]]: memref<33xf32>, [[KY:%[a-z0-9_]+]]: memref<33x100xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
// CHECK-NEXT: [[BID:%[a-z0-9_]+]] = gpu.block_id x
// CHECK-NEXT: [[C256:%[a-z0-9_]+]] = arith.constant 256 : index
// CHECK-NEXT: [[BASE:%[0-9]+]] = arith.muli [[BID]], [[C256]] : index
// CHECK-NEXT: [[TID:%[a-z0-9_]+]] = gpu.thread_id x
// CHECK-NEXT: [[LIN:%[0-9]+]] = arith.addi [[BASE]], [[TID]] : index
// CHECK-NEXT: [[TOTAL:%[a-z0-9_]+]] = arith.constant 3300 : index
// CHECK-NEXT: [[IN:%[0-9]+]] = arith.cmpi ult, [[LIN]], [[TOTAL]] : index
// CHECK-NEXT: scf.if [[IN]] {
// CHECK-NEXT: [[C100:%[a-z0-9_]+]] = arith.constant 100 : index
// CHECK-NEXT: [[J:%[0-9]+]] = arith.remui [[LIN]], [[C100]] : index
// CHECK-NEXT: [[I:%[0-9]+]] = arith.divui [[LIN]], [[C100]] : index
// CHECK: [[A:%[0-9]+]] = memref.load [[KX]]{{\[}}[[I]], [[J]]] : memref<33x100xf32>
// CHECK-NEXT: [[B:%[0-9]+]] = memref.load [[KM]]{{\[}}[[I]]] : memref<33xf32>
// CHECK-NEXT: [[D:%[0-9]+]] = arith.subf [[A]], [[B]] : f32
// CHECK-NEXT: [[E:%[0-9]+]] = math.exp [[D]] : f32
// CHECK-NEXT: memref.store [[E]], [[KY]]{{\[}}[[I]], [[J]]] : memref<33x100xf32>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.return
// FORCE-LABEL: func.func @softmax_exp(
// FORCE: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} {zynml.strategy = "pointwise"}
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @softmax_exp(%x: memref<33x100xf32>, %m: memref<33xf32>, %y: memref<33x100xf32>) {
  linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<33x100xf32>, memref<33xf32>) outs(%y : memref<33x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A row sum: row_reduce, one block per row (33), a 100-long row on 128 threads (4 warps).
// Each thread folds a strided slice of the row, a warp combines with 5 xor shuffles, the
// 4 warp totals meet in shared memory, warp 0 combines them, thread 0 adds the output.
// CHECK-LABEL: func.func @row_sum(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: memref<33x100xf32>, [[S:%[a-z0-9_]+]]: memref<33xf32>)
// CHECK-NOT: linalg.generic
// CHECK-DAG: [[GX:%[a-z0-9_]+]] = arith.constant 33 : index
// CHECK-DAG: [[BX:%[a-z0-9_]+]] = arith.constant 128 : index
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_reduce blocks in ([[GX]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in ([[BX]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args([[X]] : memref<33x100xf32>, [[S]] : memref<33xf32>) {zynml.strategy = "row_reduce"}
// CHECK: gpu.module @zynml_kernels {
// CHECK-NEXT: memref.global "private" @k0_row_reduce_partials0 : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.func @k0_row_reduce([[KX:%[a-z0-9_]+]]: memref<33x100xf32>, [[KS:%[a-z0-9_]+]]: memref<33xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK-DAG: [[ZERO:%[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: [[BID:%[a-z0-9_]+]] = gpu.block_id x
// CHECK-DAG: [[TID:%[a-z0-9_]+]] = gpu.thread_id x
// CHECK-DAG: [[ROW:%[a-z0-9_]+]] = arith.constant 100 : index
// CHECK-DAG: [[STEP:%[a-z0-9_]+]] = arith.constant 128 : index
// CHECK: [[ACC:%[0-9]+]] = scf.for [[R:%[a-z0-9_]+]] = [[TID]] to [[ROW]] step [[STEP]] iter_args([[PART:%[a-z0-9_]+]] = [[ZERO]]) -> (f32) {
// CHECK-NEXT: [[V:%[0-9]+]] = memref.load [[KX]]{{\[}}[[BID]], [[R]]] : memref<33x100xf32>
// CHECK-NEXT: [[SUM:%[0-9]+]] = arith.addf [[PART]], [[V]] : f32
// CHECK-NEXT: scf.yield [[SUM]] : f32
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK-NOT: gpu.shuffle
// CHECK: [[SHARED:%[0-9]+]] = memref.get_global @k0_row_reduce_partials0 : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: [[LANE:%[0-9]+]] = arith.remui [[TID]], %c32{{(_[0-9]+)?}} : index
// CHECK: [[WARP:%[0-9]+]] = arith.divui [[TID]], %c32{{(_[0-9]+)?}} : index
// CHECK: memref.store %{{.*}}, [[SHARED]]{{\[}}[[WARP]]] : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: arith.cmpi eq, [[WARP]], %{{.*}} : index
// CHECK: arith.cmpi ult, [[LANE]], %c4{{(_[0-9]+)?}} : index
// CHECK: memref.load [[SHARED]]{{\[}}[[LANE]]] : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: scf.yield [[ZERO]] : f32
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK-NOT: gpu.shuffle
// CHECK: [[TOTAL:%[0-9]+]] = arith.addf
// CHECK-NEXT: arith.cmpi eq, [[TID]], %{{.*}} : index
// CHECK-NEXT: scf.if
// CHECK-NEXT: [[OLD:%[0-9]+]] = memref.load [[KS]]{{\[}}[[BID]]] : memref<33xf32>
// CHECK-NEXT: [[NEW:%[0-9]+]] = arith.addf [[OLD]], [[TOTAL]] : f32
// CHECK-NEXT: memref.store [[NEW]], [[KS]]{{\[}}[[BID]]] : memref<33xf32>
// CHECK: gpu.return
// strategy=pointwise: one thread per row, looping over it; no shuffles, no shared memory.
// FORCE-LABEL: func.func @row_sum(
// FORCE: gpu.launch_func @zynml_kernels::@k0_pointwise blocks in (%c1{{(_[0-9]+)?}}, {{.*}}) threads in (%c256, {{.*}}) {{.*}} {zynml.strategy = "pointwise"}
// FORCE-NOT: memref.global
// FORCE: gpu.func @k0_pointwise({{.*}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
// FORCE: arith.cmpi ult, %{{.*}}, %c33 : index
// FORCE: scf.for {{.*}} = %{{.*}} to %c100 step %{{.*}} iter_args
// FORCE: arith.addf
// FORCE-NOT: gpu.shuffle
// FORCE-NOT: gpu.barrier
// FORCE: gpu.return
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @row_sum(%x: memref<33x100xf32>, %s: memref<33xf32>) {
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<33x100xf32>) outs(%s : memref<33xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A column sum reads the input strided along the reduction: it stays pointwise, a thread
// per column (100 threads, one block) looping over the 33 rows from the output's value.
// CHECK-LABEL: func.func @column_sum(
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise blocks in (%c1{{(_[0-9]+)?}}, {{.*}}) threads in (%c256, {{.*}}) {{.*}} {zynml.strategy = "pointwise"}
// CHECK-NOT: memref.global
// CHECK: gpu.func @k0_pointwise([[KX:%[a-z0-9_]+]]: memref<33x100xf32>, [[KS:%[a-z0-9_]+]]: memref<100xf32>) kernel
// CHECK: [[LIN:%[0-9]+]] = arith.addi
// CHECK: arith.cmpi ult, [[LIN]], %c100 : index
// CHECK: [[INIT:%[0-9]+]] = memref.load [[KS]]{{\[}}[[LIN]]] : memref<100xf32>
// CHECK: [[SUM:%[0-9]+]] = scf.for [[K:%[a-z0-9_]+]] = %{{.*}} to %c33 step %{{.*}} iter_args([[ACC:%[a-z0-9_]+]] = [[INIT]]) -> (f32) {
// CHECK-NEXT: [[V:%[0-9]+]] = memref.load [[KX]]{{\[}}[[K]], [[LIN]]] : memref<33x100xf32>
// CHECK-NEXT: [[R:%[0-9]+]] = arith.addf [[ACC]], [[V]] : f32
// CHECK-NEXT: scf.yield [[R]] : f32
// CHECK: memref.store [[SUM]], [[KS]]{{\[}}[[LIN]]] : memref<100xf32>
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
#tr = affine_map<(d0, d1) -> (d1, d0)>
#col = affine_map<(d0, d1) -> (d0)>
func.func @column_sum(%x: memref<33x100xf32>, %s: memref<100xf32>) {
  linalg.generic {indexing_maps = [#tr, #col], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<33x100xf32>) outs(%s : memref<100xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A row shorter than a warp (7) stays pointwise: a thread per row.
// CHECK-LABEL: func.func @short_row_max(
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} {zynml.strategy = "pointwise"}
// CHECK-NOT: memref.global
// CHECK: gpu.func @k0_pointwise([[KX:%[a-z0-9_]+]]: memref<33x7xf32>, [[KS:%[a-z0-9_]+]]: memref<33xf32>) kernel
// CHECK: [[LIN:%[0-9]+]] = arith.addi
// CHECK: arith.cmpi ult, [[LIN]], %c33 : index
// CHECK: scf.for [[K:%[a-z0-9_]+]] = %{{.*}} to %c7 step
// CHECK-NEXT: memref.load [[KX]]{{\[}}[[LIN]], [[K]]] : memref<33x7xf32>
// CHECK-NEXT: arith.maximumf
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @short_row_max(%x: memref<33x7xf32>, %s: memref<33xf32>) {
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<33x7xf32>) outs(%s : memref<33xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %out, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// An i1 memref crosses as i8 (a host-side cast, a trunci after each load in the kernel);
// the constant the body captures is cloned into the kernel, not passed.
// CHECK-LABEL: func.func @select(
// CHECK-SAME: [[C:%[a-z0-9_]+]]: memref<5x5xi1>, [[A:%[a-z0-9_]+]]: memref<5x5xf32>, [[Y:%[a-z0-9_]+]]: memref<5x5xf32>)
// CHECK: [[C8:%[0-9]+]] = builtin.unrealized_conversion_cast [[C]] : memref<5x5xi1> to memref<5x5xi8>
// CHECK-NEXT: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} args([[C8]] : memref<5x5xi8>, [[A]] : memref<5x5xf32>, [[Y]] : memref<5x5xf32>) {zynml.strategy = "pointwise"}
// CHECK: gpu.func @k0_pointwise([[KC:%[a-z0-9_]+]]: memref<5x5xi8>, [[KA:%[a-z0-9_]+]]: memref<5x5xf32>, [[KY:%[a-z0-9_]+]]: memref<5x5xf32>) kernel
// CHECK-NEXT: [[ZERO:%[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK: arith.cmpi ult, %{{.*}}, %c25 : index
// CHECK: [[BYTE:%[0-9]+]] = memref.load [[KC]]{{\[}}[[I:%[0-9]+]], [[J:%[0-9]+]]] : memref<5x5xi8>
// CHECK-NEXT: [[P:%[0-9]+]] = arith.trunci [[BYTE]] : i8 to i1
// CHECK-NEXT: [[V:%[0-9]+]] = memref.load [[KA]]{{\[}}[[I]], [[J]]] : memref<5x5xf32>
// CHECK-NEXT: [[R:%[0-9]+]] = arith.select [[P]], [[V]], [[ZERO]] : f32
// CHECK-NEXT: memref.store [[R]], [[KY]]{{\[}}[[I]], [[J]]] : memref<5x5xf32>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @select(%c: memref<5x5xi1>, %a: memref<5x5xf32>, %y: memref<5x5xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c, %a : memref<5x5xi1>, memref<5x5xf32>) outs(%y : memref<5x5xf32>) {
  ^bb0(%p: i1, %v: f32, %o: f32):
    %r = arith.select %p, %v, %zero : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A copy into a strided view becomes a pointwise copy kernel; a contiguous copy stays a
// memref.copy (one memcpy).
// CHECK-LABEL: func.func @copies(
// CHECK-SAME: [[SRC:%[a-z0-9_]+]]: memref<4x4xf32>, [[DST:%[a-z0-9_]+]]: memref<4x8xf32>, [[A:%[a-z0-9_]+]]: memref<8xf32>, [[B:%[a-z0-9_]+]]: memref<8xf32>)
// CHECK: [[VIEW:%[a-z0-9_]+]] = memref.subview [[DST]][0, 0] [4, 4] [1, 2] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 2]>>
// CHECK-NOT: memref.copy [[SRC]]
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} args([[SRC]] : memref<4x4xf32>, [[VIEW]] : memref<4x4xf32, strided<[8, 2]>>) {zynml.strategy = "pointwise"}
// CHECK-NEXT: memref.copy [[A]], [[B]] : memref<8xf32> to memref<8xf32>
// CHECK-NEXT: return
// CHECK: gpu.func @k0_pointwise([[KS:%[a-z0-9_]+]]: memref<4x4xf32>, [[KD:%[a-z0-9_]+]]: memref<4x4xf32, strided<[8, 2]>>) kernel
// CHECK: arith.cmpi ult, %{{.*}}, %c16 : index
// CHECK: [[V:%[0-9]+]] = memref.load [[KS]]{{\[}}[[I:%[0-9]+]], [[J:%[0-9]+]]] : memref<4x4xf32>
// CHECK-NEXT: memref.store [[V]], [[KD]]{{\[}}[[I]], [[J]]] : memref<4x4xf32, strided<[8, 2]>>
// CHECK-NOT: gpu.func
func.func @copies(%src: memref<4x4xf32>, %dst: memref<4x8xf32>, %a: memref<8xf32>, %b: memref<8xf32>) {
  %view = memref.subview %dst[0, 0] [4, 4] [1, 2] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 2]>>
  memref.copy %src, %view : memref<4x4xf32> to memref<4x4xf32, strided<[8, 2]>>
  memref.copy %a, %b : memref<8xf32> to memref<8xf32>
  return
}

// -----

// Two generics over the same 33 rows (a scale, then a row sum of its result) fuse into
// one row_fused kernel: a block per row, the map, a barrier, the block reduction. A
// scalar the host read from device memory (memref.load) is read by the kernel itself:
// the kernel takes the memref and the host load goes away.
// CHECK-LABEL: func.func @scale_then_sum(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: memref<33x100xf32>, [[S:%[a-z0-9_]+]]: memref<33xf32>, [[K:%[a-z0-9_]+]]: memref<f32>, [[Y:%[a-z0-9_]+]]: memref<33x100xf32>)
// CHECK-NOT: memref.load
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_fused blocks in (%c33, {{.*}}) threads in (%c128, {{.*}}) args([[X]] : memref<33x100xf32>, [[Y]] : memref<33x100xf32>, [[K]] : memref<f32>, [[S]] : memref<33xf32>) {zynml.strategy = "row_fused"}
// CHECK-NEXT: return
// CHECK: memref.global "private" @k0_row_fused_partials10 : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.func @k0_row_fused([[KX:%[a-z0-9_]+]]: memref<33x100xf32>, [[KY:%[a-z0-9_]+]]: memref<33x100xf32>, [[KK:%[a-z0-9_]+]]: memref<f32>, [[KS:%[a-z0-9_]+]]: memref<33xf32>) kernel
// CHECK-NEXT: [[F:%[0-9]+]] = memref.load [[KK]][] : memref<f32>
// CHECK: [[ROW:%[a-z0-9_]+]] = gpu.block_id x
// CHECK: scf.for
// CHECK: [[V:%[0-9]+]] = memref.load [[KX]]{{\[}}[[ROW]],
// CHECK-NEXT: [[P:%[0-9]+]] = arith.mulf [[V]], [[F]] : f32
// CHECK-NEXT: memref.store [[P]], [[KY]]{{\[}}[[ROW]],
// CHECK: gpu.barrier
// CHECK: memref.load [[KY]]{{\[}}[[ROW]],
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: memref.store {{.*}}, [[KS]]{{\[}}[[ROW]]]
// CHECK: gpu.return
// CHECK: // -----
// FORCE-LABEL: func.func @scale_then_sum(
// FORCE: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} {zynml.strategy = "pointwise"}
// FORCE: gpu.launch_func @zynml_kernels::@k1_pointwise {{.*}} {zynml.strategy = "pointwise"}
// FORCE-NOT: row_reduce
// FORCE: // -----
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @scale_then_sum(%x: memref<33x100xf32>, %s: memref<33xf32>, %scale: memref<f32>, %y: memref<33x100xf32>) {
  %k = memref.load %scale[] : memref<f32>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<33x100xf32>) outs(%y : memref<33x100xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %k : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<33x100xf32>) outs(%s : memref<33xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A fill, then a matrix product: the product takes the matmul strategy (one 128x128
// tile per block, shared-memory stages, 16-byte shared reads, FMAs), never row_fused.
// CHECK-LABEL: func.func @fill_then_matmul(
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise
// CHECK: gpu.launch_func @zynml_kernels::@k1_matmul blocks in (%c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c256{{(_[0-9]+)?}}, {{.*}}) {zynml.strategy = "matmul"}
// CHECK-NOT: row_fused
// CHECK: memref.global "private" @k1_matmul_a : memref<8x128xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.func @k1_matmul(
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: vector.load {{.*}} : memref<8x128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: math.fma
// FORCE-LABEL: func.func @fill_then_matmul(
// FORCE: @k1_pointwise
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#all = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
func.func @fill_then_matmul(%x: memref<64x64xf32>, %y: memref<64x64xf32>, %z: memref<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#scalar, #all], iterator_types = ["parallel", "parallel"]}
      ins(%zero : f32) outs(%z : memref<64x64xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : memref<64x64xf32>, memref<64x64xf32>) outs(%z : memref<64x64xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %p = arith.mulf %l, %r : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An f16 product whose sizes tile exactly takes the tensor cores: 4 warps per tile of C
// (128x128, or 64x64 as here: 64x48 @ 48x128, grid 2x1), 2x2 wmma fragments per warp,
// f32 accumulation, each fragment staged through shared memory to add C's initial value
// and round once.
// CHECK-LABEL: func.func @f16_matmul_tensor_cores(
// CHECK: gpu.launch_func @zynml_kernels::@k0_matmul_tensor_core blocks in (%c2{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c128{{(_[0-9]+)?}}, {{.*}}) {zynml.strategy = "matmul_tensor_core"}
// CHECK: memref.global "private" @k0_matmul_tensor_core_stage : memref<4x16x16xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.func @k0_matmul_tensor_core(
// CHECK: gpu.subgroup_mma_constant_matrix {{.*}} : !gpu.mma_matrix<16x16xf32, "COp">
// CHECK: scf.for
// CHECK: gpu.subgroup_mma_load_matrix {{.*}} {leadDimension = 48 : index} : memref<64x48xf16> -> !gpu.mma_matrix<16x16xf16, "AOp">
// CHECK: gpu.subgroup_mma_load_matrix {{.*}} {leadDimension = 128 : index} : memref<48x128xf16> -> !gpu.mma_matrix<16x16xf16, "BOp">
// CHECK-COUNT-4: gpu.subgroup_mma_compute
// CHECK: gpu.subgroup_mma_store_matrix
// CHECK: gpu.barrier
// CHECK: arith.truncf {{.*}} : f32 to f16
// FORCE-LABEL: func.func @f16_matmul_tensor_cores(
// FORCE: @k0_pointwise
#a16 = affine_map<(d0, d1, d2) -> (d0, d2)>
#b16 = affine_map<(d0, d1, d2) -> (d2, d1)>
#c16 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @f16_matmul_tensor_cores(%x: memref<64x48xf16>, %y: memref<48x128xf16>, %z: memref<64x128xf16>) {
  linalg.generic {indexing_maps = [#a16, #b16, #c16], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : memref<64x48xf16>, memref<48x128xf16>) outs(%z : memref<64x128xf16>) {
  ^bb0(%l: f16, %r: f16, %o: f16):
    %p = arith.mulf %l, %r : f16
    %s = arith.addf %o, %p : f16
    linalg.yield %s : f16
  }
  return
}

// -----

// At 128x128 tiles the block stages A and B in shared memory (16-byte copies, rows padded
// by 8 halves) and each warp multiplies 4x4 fragments read from there.
// CHECK-LABEL: func.func @f16_matmul_staged(
// CHECK: gpu.launch_func @zynml_kernels::@k0_matmul_tensor_core blocks in (%c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c128{{(_[0-9]+)?}}, {{.*}}) {zynml.strategy = "matmul_tensor_core"}
// CHECK-DAG: memref.global "private" @k0_matmul_tensor_core_a : memref<128x40xf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @k0_matmul_tensor_core_b : memref<32x136xf16, #gpu.address_space<workgroup>>
// CHECK: gpu.func @k0_matmul_tensor_core(
// CHECK: scf.for
// CHECK: vector.load {{.*}} : memref<128x32xf16>, vector<8xf16>
// CHECK: vector.store {{.*}} : memref<128x40xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: gpu.barrier
// CHECK: gpu.subgroup_mma_load_matrix {{.*}} {leadDimension = 40 : index} : memref<128x40xf16, #gpu.address_space<workgroup>> -> !gpu.mma_matrix<16x16xf16, "AOp">
// CHECK-COUNT-16: gpu.subgroup_mma_compute
#as = affine_map<(d0, d1, d2) -> (d0, d2)>
#bs = affine_map<(d0, d1, d2) -> (d2, d1)>
#cs = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @f16_matmul_staged(%x: memref<128x32xf16>, %y: memref<32x128xf16>, %z: memref<128x128xf16>) {
  linalg.generic {indexing_maps = [#as, #bs, #cs], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : memref<128x32xf16>, memref<32x128xf16>) outs(%z : memref<128x128xf16>) {
  ^bb0(%l: f16, %r: f16, %o: f16):
    %p = arith.mulf %l, %r : f16
    %s = arith.addf %o, %p : f16
    linalg.yield %s : f16
  }
  return
}

// -----

// No generic: the module is left as it is (no gpu.container_module, no gpu.module). The
// rejected chunks after this one print nothing, so this is the end of the output.
// CHECK-LABEL: func.func @only_contiguous_copy(
// CHECK-NEXT: memref.copy
// CHECK-NEXT: return
// CHECK-NOT: gpu.
func.func @only_contiguous_copy(%a: memref<8xf32>, %b: memref<8xf32>) {
  memref.copy %a, %b : memref<8xf32> to memref<8xf32>
  return
}

// -----

// Named linalg ops must be generalized first.
func.func @fill(%y: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  // expected-error@+1 {{'linalg.fill' must be generalized (run linalg-generalize-named-ops) before linalg-to-gpu-kernels}}
  linalg.fill ins(%zero : f32) outs(%y : memref<8xf32>)
  return
}

// -----

// Every loop needs a static extent.
#id1 = affine_map<(d0) -> (d0)>
func.func @dynamic(%x: memref<?xf32>, %y: memref<?xf32>) {
  // expected-error@+1 {{cannot map this loop nest to GPU threads: a loop of the generic has no static extent}}
  linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%x : memref<?xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// Generics on tensors: bufferize first.
#id1 = affine_map<(d0) -> (d0)>
func.func @on_tensors(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{linalg-to-gpu-kernels needs a bufferized module}}
  %r = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%y : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
