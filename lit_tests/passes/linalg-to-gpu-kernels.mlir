// linalg-to-gpu-kernels outlines each linalg.generic of a bufferized module into a
// gpu.func of `gpu.module @zynml_kernels`, built by the first strategy that matches
// (zynml/backend/cuda/strategies/: row_reduce, then pointwise), and replaces the generic by the
// gpu.launch_func that runs it, tagged with zynml.strategy (see
// passes/linalg_to_gpu_kernels.py). Strided memref.copy ops become copy kernels first.
// The FORCE lines check strategy=pointwise (which also takes a reduction's constant fill
// into its kernel: the attention chunks' scores, maxima and sums start from their fills'
// constants, fewer kernels than generics); the last chunks are modules the pass rejects,
// each with a located error.
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --linalg-to-gpu-kernels | filecheck %s
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(linalg-to-gpu-kernels)' | filecheck %s
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --linalg-to-gpu-kernels | zynml-opt --split-input-file | filecheck %s
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=pointwise})' | filecheck %s --check-prefix=FORCE
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --linalg-to-gpu-kernels=strategy=pointwise | filecheck %s --check-prefix=FORCE
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(linalg-to-gpu-kernels{chip=sm_80})' | filecheck %s --check-prefix=SM80
// RUN: not zynml-opt %s --split-input-file --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=matmul_wgmma chip=sm_80})' 2>&1 | filecheck %s --check-prefix=NOWGMMA

// Elementwise, 2-d, with a broadcast row input: pointwise. The 33 * 99 = 3267 points are
// flattened row-major (the column is linear % 99, the row linear / 99) and cut into
// 13 blocks of 256 threads; threads past 3267 do nothing. Rows of 99 are no multiple of
// 4: no 16-byte chunks (see @bias_exp_vectors).
// CHECK: module attributes {gpu.container_module} {
// CHECK-LABEL: func.func @softmax_exp(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: memref<33x99xf32>, [[M:%[a-z0-9_]+]]: memref<33xf32>, [[Y:%[a-z0-9_]+]]: memref<33x99xf32>)
// CHECK-NOT: linalg.generic
// CHECK-DAG: [[GX:%[a-z0-9_]+]] = arith.constant 13 : index
// CHECK-DAG: [[BX:%[a-z0-9_]+]] = arith.constant 256 : index
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise blocks in ([[GX]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in ([[BX]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args([[X]] : memref<33x99xf32>, [[M]] : memref<33xf32>, [[Y]] : memref<33x99xf32>) {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
// CHECK-NEXT: return
// CHECK: gpu.module @zynml_kernels {
// CHECK-NEXT: gpu.func @k0_pointwise([[KX:%[a-z0-9_]+]]: memref<33x99xf32>, [[KM:%[a-z0-9_]+]]: memref<33xf32>, [[KY:%[a-z0-9_]+]]: memref<33x99xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
// CHECK-NEXT: [[BID:%[a-z0-9_]+]] = gpu.block_id x
// CHECK-NEXT: [[C256:%[a-z0-9_]+]] = arith.constant 256 : index
// CHECK-NEXT: [[BASE:%[0-9]+]] = arith.muli [[BID]], [[C256]] : index
// CHECK-NEXT: [[TID:%[a-z0-9_]+]] = gpu.thread_id x
// CHECK-NEXT: [[LIN:%[0-9]+]] = arith.addi [[BASE]], [[TID]] : index
// CHECK-NEXT: [[TOTAL:%[a-z0-9_]+]] = arith.constant 3267 : index
// CHECK-NEXT: [[IN:%[0-9]+]] = arith.cmpi ult, [[LIN]], [[TOTAL]] : index
// CHECK-NEXT: scf.if [[IN]] {
// CHECK-NEXT: [[C100:%[a-z0-9_]+]] = arith.constant 99 : index
// CHECK-NEXT: [[J:%[0-9]+]] = arith.remui [[LIN]], [[C100]] : index
// CHECK-NEXT: [[I:%[0-9]+]] = arith.divui [[LIN]], [[C100]] : index
// CHECK: [[A:%[0-9]+]] = memref.load [[KX]]{{\[}}[[I]], [[J]]] : memref<33x99xf32>
// CHECK-NEXT: [[B:%[0-9]+]] = memref.load [[KM]]{{\[}}[[I]]] : memref<33xf32>
// CHECK-NEXT: [[D:%[0-9]+]] = arith.subf [[A]], [[B]] : f32
// CHECK-NEXT: [[E:%[0-9]+]] = math.exp [[D]] : f32
// CHECK-NEXT: memref.store [[E]], [[KY]]{{\[}}[[I]], [[J]]] : memref<33x99xf32>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.return
// FORCE-LABEL: func.func @softmax_exp(
// FORCE: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @softmax_exp(%x: memref<33x99xf32>, %m: memref<33xf32>, %y: memref<33x99xf32>) {
  linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<33x99xf32>, memref<33xf32>) outs(%y : memref<33x99xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// Elementwise over rows of 100 (a multiple of 4) with a bias broadcast over the rows and
// a value per row: pointwise's vector path. 825 chunks of 4 columns, one a thread (small
// nests take one chunk each), 2 blocks of 512; each thread checks that x, bias and y start at
// 16 bytes and then loads x's and bias's chunk with one 16-byte load each (else 4 scalar
// loads each), loads m once for its chunk, runs the body per lane, and stores one
// 16-byte vector (else 4 scalars), only when its chunk is one of the 825.
// CHECK-LABEL: func.func @bias_exp_vectors(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: memref<33x100xf32>, [[M:%[a-z0-9_]+]]: memref<33xf32>, [[B:%[a-z0-9_]+]]: memref<100xf32>, [[Y:%[a-z0-9_]+]]: memref<33x100xf32>)
// CHECK-DAG: [[GX:%[a-z0-9_]+]] = arith.constant 2 : index
// CHECK-DAG: [[BX:%[a-z0-9_]+]] = arith.constant 512 : index
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise blocks in ([[GX]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in ([[BX]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args([[X]] : memref<33x100xf32>, [[M]] : memref<33xf32>, [[B]] : memref<100xf32>, [[Y]] : memref<33x100xf32>) {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
// CHECK: gpu.func @k0_pointwise([[KX:%[a-z0-9_]+]]: memref<33x100xf32>, [[KM:%[a-z0-9_]+]]: memref<33xf32>, [[KB:%[a-z0-9_]+]]: memref<100xf32>, [[KY:%[a-z0-9_]+]]: memref<33x100xf32>)
// CHECK: [[IN:%[0-9]+]] = arith.cmpi ult, {{%[0-9]+}}, %c825 : index
// CHECK: [[SAFE:%[0-9]+]] = arith.select [[IN]], {{%[0-9]+}}, %c0 : index
// CHECK: [[COL4:%[0-9]+]] = arith.remui [[SAFE]], %c25 : index
// CHECK-NEXT: [[I:%[0-9]+]] = arith.divui [[SAFE]], %c25 : index
// CHECK: [[J:%[0-9]+]] = arith.muli [[COL4]], %c4{{(_[0-9]+)?}} : index
// CHECK: memref.extract_aligned_pointer_as_index [[KX]]
// CHECK: memref.extract_aligned_pointer_as_index [[KB]]
// CHECK: memref.extract_aligned_pointer_as_index [[KY]]
// CHECK: [[ALIGNED:%[0-9]+]] = arith.andi
// CHECK-NEXT: [[V:%[0-9]+]]:8 = scf.if [[ALIGNED]]
// CHECK-NEXT: [[GXV:%[a-z0-9_]+]] = memref.memory_space_cast [[KX]]
// CHECK-NEXT: vector.load [[GXV]]{{\[}}[[I]], [[J]]] {alignment = 16 : i64} : memref<33x100xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK-COUNT-4: vector.extract
// CHECK-NEXT: [[GB:%[a-z0-9_]+]] = memref.memory_space_cast [[KB]]
// CHECK-NEXT: vector.load [[GB]]{{\[}}[[J]]] {alignment = 16 : i64}
// CHECK: } else {
// CHECK-COUNT-4: memref.load [[KX]]
// CHECK-COUNT-4: memref.load [[KB]]
// CHECK-NEXT: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: [[R:%[0-9]+]] = memref.load [[KM]]{{\[}}[[I]]] : memref<33xf32>
// CHECK-NOT: memref.load
// CHECK: [[S:%[0-9]+]] = arith.addf [[V]]#3, [[V]]#7 : f32
// CHECK-NEXT: [[D:%[0-9]+]] = arith.subf [[S]], [[R]] : f32
// CHECK-NEXT: [[E:%[0-9]+]] = math.exp [[D]] : f32
// CHECK-NEXT: scf.if [[ALIGNED]] {
// CHECK-NEXT: [[GY:%[a-z0-9_]+]] = memref.memory_space_cast [[KY]]
// CHECK-NEXT: scf.if [[IN]] {
// CHECK-NEXT: [[CHUNK:%[0-9]+]] = vector.from_elements {{.*}}, [[E]] : vector<4xf32>
// CHECK-NEXT: vector.store [[CHUNK]], [[GY]]{{\[}}[[I]], [[J]]] {alignment = 16 : i64}
// CHECK: } else {
// CHECK-NEXT: scf.if [[IN]] {
// CHECK-COUNT-4: memref.store {{.*}}, [[KY]]
// CHECK: gpu.return
// FORCE-LABEL: func.func @bias_exp_vectors(
// FORCE: {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @bias_exp_vectors(%x: memref<33x100xf32>, %m: memref<33xf32>, %b: memref<100xf32>, %y: memref<33x100xf32>) {
  linalg.generic {indexing_maps = [#id2, #row, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m, %b : memref<33x100xf32>, memref<33xf32>, memref<100xf32>) outs(%y : memref<33x100xf32>) {
  ^bb0(%a: f32, %r: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %d = arith.subf %s, %r : f32
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
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_reduce blocks in ([[GX]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in ([[BX]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args([[X]] : memref<33x100xf32>, [[S]] : memref<33xf32>) {zynml.problem = "{{[^"]*}}", zynml.strategy = "row_reduce"}
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
// FORCE: gpu.launch_func @zynml_kernels::@k0_pointwise blocks in (%c1{{(_[0-9]+)?}}, {{.*}}) threads in (%c256, {{.*}}) {{.*}} {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
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
// per column (101 threads, one block) looping over the 33 rows from the output's value
// (columns in whole chunks of 4 take 4 a thread: linalg-to-gpu-kernels-vector-sums.mlir).
// CHECK-LABEL: func.func @column_sum(
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise blocks in (%c1{{(_[0-9]+)?}}, {{.*}}) threads in (%c256, {{.*}}) {{.*}} {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
// CHECK-NOT: memref.global
// CHECK: gpu.func @k0_pointwise([[KX:%[a-z0-9_]+]]: memref<33x101xf32>, [[KS:%[a-z0-9_]+]]: memref<101xf32>) kernel
// CHECK: [[LIN:%[0-9]+]] = arith.addi
// CHECK: arith.cmpi ult, [[LIN]], %c101 : index
// CHECK: [[INIT:%[0-9]+]] = memref.load [[KS]]{{\[}}[[LIN]]] : memref<101xf32>
// CHECK: [[SUM:%[0-9]+]] = scf.for [[K:%[a-z0-9_]+]] = %{{.*}} to %c33 step %{{.*}} iter_args([[ACC:%[a-z0-9_]+]] = [[INIT]]) -> (f32) {
// CHECK-NEXT: [[V:%[0-9]+]] = memref.load [[KX]]{{\[}}[[K]], [[LIN]]] : memref<33x101xf32>
// CHECK-NEXT: [[R:%[0-9]+]] = arith.addf [[ACC]], [[V]] : f32
// CHECK-NEXT: scf.yield [[R]] : f32
// CHECK: memref.store [[SUM]], [[KS]]{{\[}}[[LIN]]] : memref<101xf32>
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
#tr = affine_map<(d0, d1) -> (d1, d0)>
#col = affine_map<(d0, d1) -> (d0)>
func.func @column_sum(%x: memref<33x101xf32>, %s: memref<101xf32>) {
  linalg.generic {indexing_maps = [#tr, #col], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<33x101xf32>) outs(%s : memref<101xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A row shorter than a warp (7) stays pointwise: a thread per row.
// CHECK-LABEL: func.func @short_row_max(
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
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
// CHECK-NEXT: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} args([[C8]] : memref<5x5xi8>, [[A]] : memref<5x5xf32>, [[Y]] : memref<5x5xf32>) {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
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
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} args([[SRC]] : memref<4x4xf32>, [[VIEW]] : memref<4x4xf32, strided<[8, 2]>>) {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
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
// one row_fused kernel. The row of 100 fits in registers: a warp per row, 32 threads
// taking 4 neighbouring columns each (one 16-byte load of x where x is aligned, else four
// scalar loads), y is stored once, and the sum folds the scaled values where the scale
// left them, reading no y; one warp needs no barrier, and a block takes 4 rows (9
// blocks, the last block's fourth warp past row 32 doing nothing). A scalar the host
// read from device memory (memref.load) is read by the kernel itself: the kernel takes
// the memref and the host load goes away.
// CHECK-LABEL: func.func @scale_then_sum(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: memref<33x100xf32>, [[S:%[a-z0-9_]+]]: memref<33xf32>, [[K:%[a-z0-9_]+]]: memref<f32>, [[Y:%[a-z0-9_]+]]: memref<33x100xf32>)
// CHECK-NOT: memref.load
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_fused blocks in (%c9, {{.*}}) threads in (%c128, {{.*}}) args([[X]] : memref<33x100xf32>, [[Y]] : memref<33x100xf32>, [[K]] : memref<f32>, [[S]] : memref<33xf32>) {zynml.problem = "{{[^"]*}}", zynml.strategy = "row_fused"}
// CHECK-NEXT: return
// CHECK: memref.global "private" @k0_row_fused_partials10 : memref<1xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.func @k0_row_fused([[KX:%[a-z0-9_]+]]: memref<33x100xf32>, [[KY:%[a-z0-9_]+]]: memref<33x100xf32>, [[KK:%[a-z0-9_]+]]: memref<f32>, [[KS:%[a-z0-9_]+]]: memref<33xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// CHECK-NEXT: [[F:%[0-9]+]] = memref.load [[KK]][] : memref<f32>
// CHECK: [[BLOCK:%[a-z0-9_]+]] = gpu.block_id x
// CHECK: [[THREAD:%[a-z0-9_]+]] = gpu.thread_id x
// CHECK: [[FIRST:%[0-9]+]] = arith.muli [[BLOCK]], %c4{{(_[0-9]+)?}} : index
// CHECK: [[WARP:%[0-9]+]] = arith.divui [[THREAD]], %c32{{(_[0-9]+)?}} : index
// CHECK: [[ROW:%[0-9]+]] = arith.addi [[FIRST]], [[WARP]] : index
// CHECK: [[TID:%[0-9]+]] = arith.remui [[THREAD]], %c32{{(_[0-9]+)?}} : index
// CHECK: [[REAL:%[0-9]+]] = arith.cmpi ult, [[ROW]], %c33{{(_[0-9]+)?}} : index
// CHECK: scf.if [[REAL]] {
// CHECK: [[COL:%[0-9]+]] = arith.muli [[TID]], %c4{{(_[0-9]+)?}} : index
// CHECK: [[IN:%[0-9]+]] = arith.cmpi ult, [[COL]], %c100{{(_[0-9]+)?}} : index
// CHECK: [[C:%[0-9]+]] = arith.select [[IN]], [[COL]], %c0{{(_[0-9]+)?}} : index
// CHECK: memref.extract_aligned_pointer_as_index [[KX]]
// CHECK: [[XV:%[0-9]+]]:4 = scf.if
// CHECK-NEXT: [[GX:%[a-z0-9_]+]] = memref.memory_space_cast [[KX]]
// CHECK-NEXT: vector.load [[GX]]{{\[}}[[ROW]], [[C]]] {alignment = 16 : i64} : memref<33x100xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK: } else {
// CHECK-COUNT-4: memref.load [[KX]]{{\[}}[[ROW]],
// CHECK: [[P0:%[0-9]+]] = arith.mulf [[XV]]#0, [[F]] : f32
// CHECK: [[P3:%[0-9]+]] = arith.mulf [[XV]]#3, [[F]] : f32
// CHECK: memref.extract_aligned_pointer_as_index [[KY]]
// CHECK: vector.from_elements [[P0]], {{.*}}, [[P3]] : vector<4xf32>
// CHECK-NEXT: vector.store {{.*}}{{\[}}[[ROW]], [[C]]]
// CHECK: memref.store [[P3]], [[KY]]{{\[}}[[ROW]],
// CHECK-NOT: gpu.barrier
// CHECK: [[ZERO:%[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: [[A0:%[0-9]+]] = arith.addf [[ZERO]], [[P0]] : f32
// CHECK-NEXT: arith.select [[IN]], [[A0]], [[ZERO]] : f32
// CHECK-NOT: [[KY]]
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK-NOT: [[KY]]
// CHECK: memref.store {{.*}}, [[KS]]{{\[}}[[ROW]]]
// CHECK-NOT: [[KY]]
// CHECK: gpu.return
// CHECK: // -----
// FORCE-LABEL: func.func @scale_then_sum(
// FORCE: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
// FORCE: gpu.launch_func @zynml_kernels::@k1_pointwise {{.*}} {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
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

// A softmax as max, exp, sum and divide over rows of 2048, the exp values in a temporary
// nothing else uses: one row_fused kernel whose 256 threads hold 8 points of a row each,
// two chunks of 4 columns. x is read once (two 16-byte loads per thread where x is
// aligned, else eight scalar ones); max, exp, sum and divide run on those values where
// they are; the temporary is neither passed, stored nor allocated; y is stored once. The
// row max and sum stay in registers too (every thread gets each total: one barrier per
// reduction, for the warps' partials; none between the generics).
// CHECK-LABEL: func.func @softmax_in_registers(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: memref<64x2048xf32>, [[Y:%[a-z0-9_]+]]: memref<64x2048xf32>)
// CHECK-NOT: memref.alloc() : memref<64x2048xf32>
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_fused blocks in (%c64, {{.*}}) threads in (%c256, {{.*}}) args([[X]] : memref<64x2048xf32>, [[Y]] : memref<64x2048xf32>) {zynml.problem = "{{[^"]*}}", zynml.strategy = "row_fused"}
// CHECK-NEXT: return
// CHECK: memref.global "private" @k0_row_fused_partials10 : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.func @k0_row_fused([[KX:%[a-z0-9_]+]]: memref<64x2048xf32>, [[KY:%[a-z0-9_]+]]: memref<64x2048xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK-NOT: gpu.barrier
// CHECK: [[XV:%[0-9]+]]:8 = scf.if
// CHECK-NEXT: [[GX:%[a-z0-9_]+]] = memref.memory_space_cast [[KX]]
// CHECK-COUNT-2: vector.load [[GX]]
// CHECK-NOT: vector.load
// CHECK: } else {
// CHECK-COUNT-8: memref.load [[KX]]
// CHECK-NOT: [[KX]]
// CHECK: arith.maximumf %{{.*}}, [[XV]]#7 : f32
// CHECK-NOT: [[KX]]
// CHECK: [[P:%[0-9]+]] = memref.get_global @k0_row_fused_partials10
// CHECK: memref.store {{.*}}, [[P]]
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: memref.load [[P]]
// CHECK: [[M:%[0-9]+]] = arith.maximumf %cst{{(_[0-9]+)?}}, %{{[0-9]+}} : f32
// CHECK-NOT: gpu.barrier
// CHECK-NOT: memref.load
// CHECK: [[D:%[0-9]+]] = arith.subf [[XV]]#7, [[M]] : f32
// CHECK-NEXT: [[E:%[0-9]+]] = math.exp [[D]] : f32
// CHECK-NOT: [[KX]]
// CHECK: arith.addf %{{.*}}, [[E]] : f32
// CHECK-NOT: [[KX]]
// CHECK-NOT: [[KY]]
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK-NOT: [[KX]]
// CHECK-NOT: [[KY]]
// CHECK: [[S:%[0-9]+]] = arith.addf %cst{{(_[0-9]+)?}}, %{{.*}} : f32
// CHECK-NOT: memref.load
// CHECK: arith.divf [[E]], [[S]] : f32
// CHECK: memref.memory_space_cast [[KY]]
// CHECK-COUNT-2: vector.store
// CHECK: } else {
// CHECK-COUNT-8: memref.store {{.*}}, [[KY]]
// CHECK-NEXT: }
// CHECK-NEXT: gpu.return
// FORCE-LABEL: func.func @softmax_in_registers(
// FORCE-COUNT-6: {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#rows = affine_map<(d0) -> (d0)>
func.func @softmax_in_registers(%x: memref<64x2048xf32>, %y: memref<64x2048xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %max = memref.alloc() : memref<64xf32>
  linalg.generic {indexing_maps = [#rows], iterator_types = ["parallel"]}
      outs(%max : memref<64xf32>) {
  ^bb0(%o: f32):
    linalg.yield %ninf : f32
  }
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x2048xf32>) outs(%max : memref<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %out, %in : f32
    linalg.yield %m : f32
  }
  %e = memref.alloc() : memref<64x2048xf32>
  linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max : memref<64x2048xf32>, memref<64xf32>) outs(%e : memref<64x2048xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %v = math.exp %d : f32
    linalg.yield %v : f32
  }
  %sum = memref.alloc() : memref<64xf32>
  linalg.generic {indexing_maps = [#rows], iterator_types = ["parallel"]}
      outs(%sum : memref<64xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%e : memref<64x2048xf32>) outs(%sum : memref<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%e, %sum : memref<64x2048xf32>, memref<64xf32>) outs(%y : memref<64x2048xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %q = arith.divf %a, %b : f32
    linalg.yield %q : f32
  }
  return
}
// -----

// Layer norm over rows of 4099 (mean, variance, normalize; gamma and beta broadcast over
// the rows). 4099 is no multiple of 4: a column at a time, 17 per thread of 256, the 17th
// only for the first 3 threads (the others load column 0 instead, their sums skip it,
// their store does not happen). x is loaded once for the three passes, gamma and beta
// once in the last, y stored once; the sums stay in registers (no arguments, a barrier
// per reduction and none between the generics).
// CHECK-LABEL: func.func @layer_norm_in_registers(
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_fused blocks in (%c64, {{.*}}) threads in (%c256, {{.*}})
// CHECK: gpu.func @k0_row_fused([[KX:%[a-z0-9_]+]]: memref<64x4099xf32>, [[KG:%[a-z0-9_]+]]: memref<4099xf32>, [[KB:%[a-z0-9_]+]]: memref<4099xf32>, [[KY:%[a-z0-9_]+]]: memref<64x4099xf32>) kernel
// CHECK: [[ROW:%[a-z0-9_]+]] = gpu.block_id x
// CHECK: [[TID:%[a-z0-9_]+]] = gpu.thread_id x
// CHECK: [[LAST:%[0-9]+]] = arith.addi [[TID]], %c4096{{(_[0-9]+)?}} : index
// CHECK: [[IN:%[0-9]+]] = arith.cmpi ult, [[LAST]], %c4099{{(_[0-9]+)?}} : index
// CHECK: [[SAFE:%[0-9]+]] = arith.select [[IN]], [[LAST]], %c0{{(_[0-9]+)?}} : index
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-16: memref.load [[KX]]
// CHECK-NEXT: [[XL:%[0-9]+]] = memref.load [[KX]]{{\[}}[[ROW]], [[SAFE]]]
// CHECK-NOT: [[KX]]
// CHECK: [[ALL:%[0-9]+]] = arith.addf %{{.*}}, [[XL]] : f32
// CHECK-NEXT: arith.select [[IN]], [[ALL]], %{{.*}} : f32
// CHECK-NOT: [[KX]]
// CHECK: gpu.barrier
// CHECK-NOT: [[KX]]
// CHECK: arith.subf [[XL]],
// CHECK: [[SQ:%[0-9]+]] = arith.addf %{{.*}} : f32
// CHECK-NEXT: arith.select [[IN]], [[SQ]], %{{.*}} : f32
// CHECK-NOT: [[KX]]
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK-NOT: [[KX]]
// CHECK-COUNT-17: memref.load [[KG]]
// CHECK-COUNT-17: memref.load [[KB]]
// CHECK-NOT: [[KX]]
// CHECK: math.rsqrt
// CHECK-NOT: [[KX]]
// CHECK-COUNT-16: memref.store {{.*}}, [[KY]]
// CHECK-NEXT: scf.if [[IN]] {
// CHECK-NEXT: memref.store {{.*}}, [[KY]]{{\[}}[[ROW]], [[SAFE]]]
// CHECK: gpu.return
// FORCE-LABEL: func.func @layer_norm_in_registers(
// FORCE-COUNT-4: {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#rows = affine_map<(d0) -> (d0)>
func.func @layer_norm_in_registers(%x: memref<64x4099xf32>, %gamma: memref<4099xf32>, %beta: memref<4099xf32>, %y: memref<64x4099xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 4099.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %sum = memref.alloc() : memref<64xf32>
  %sq = memref.alloc() : memref<64xf32>
  linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel"]}
      outs(%sum, %sq : memref<64xf32>, memref<64xf32>) {
  ^bb0(%o: f32, %p: f32):
    linalg.yield %zero, %zero : f32, f32
  }
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x4099xf32>) outs(%sum : memref<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id2, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %sum : memref<64x4099xf32>, memref<64xf32>) outs(%sq : memref<64xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %mean = arith.divf %s, %n : f32
    %d = arith.subf %in, %mean : f32
    %dd = arith.mulf %d, %d : f32
    %r = arith.addf %out, %dd : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id2, #row, #row, #col, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum, %sq, %gamma, %beta : memref<64x4099xf32>, memref<64xf32>, memref<64xf32>, memref<4099xf32>, memref<4099xf32>)
      outs(%y : memref<64x4099xf32>) {
  ^bb0(%in: f32, %s: f32, %q: f32, %g: f32, %b: f32, %o: f32):
    %mean = arith.divf %s, %n : f32
    %d = arith.subf %in, %mean : f32
    %var = arith.divf %q, %n : f32
    %ve = arith.addf %var, %eps : f32
    %inv = math.rsqrt %ve : f32
    %t = arith.mulf %d, %inv : f32
    %u = arith.mulf %t, %g : f32
    %v = arith.addf %u, %b : f32
    linalg.yield %v : f32
  }
  return
}
// -----

// Rows too long for registers (65536: 64 values a thread even at 1024 threads) keep the
// strided loops through memory, a pass over the row per generic.
// CHECK-LABEL: func.func @long_rows_in_memory(
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_fused blocks in (%c8, {{.*}}) threads in (%c256, {{.*}})
// CHECK: gpu.func @k0_row_fused(
// CHECK-NOT: vector.load
// CHECK: scf.for {{.*}} to %c65536{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} iter_args
// CHECK: gpu.barrier
// CHECK: scf.for {{.*}} to %c65536{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} {
// CHECK: math.exp
// CHECK: gpu.return
// FORCE-LABEL: func.func @long_rows_in_memory(
// FORCE-COUNT-2: {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @long_rows_in_memory(%x: memref<8x65536xf32>, %m: memref<8xf32>, %y: memref<8x65536xf32>) {
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x65536xf32>) outs(%m : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %out, %in : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<8x65536xf32>, memref<8xf32>) outs(%y : memref<8x65536xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  }
  return
}
// -----

// A fill, then a matrix product: the product takes the matmul strategy (one 128x128
// tile per block, two shared-memory stages of A (transposed, rows padded to 132) and B,
// 16-byte global reads of both (row-major f32, 64 a multiple of 4), the first step staged
// before the loop; in the loop the next step's reads, 16-byte shared reads of the
// current stage, FMAs, the stores into the other stage and one barrier), never row_fused,
// and the fill with it: the sums start from its constant, C is neither filled by a
// kernel of its own nor read.
// CHECK-LABEL: func.func @fill_then_matmul(
// CHECK: gpu.launch_func @zynml_kernels::@k0_matmul blocks in (%c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c256{{(_[0-9]+)?}}, {{.*}}) {zynml.problem = "{{[^"]*}}", zynml.strategy = "matmul"}
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: row_fused
// CHECK: memref.global "private" @k0_matmul_a : memref<2x8x132xf32, #gpu.address_space<workgroup>>
// CHECK: memref.global "private" @k0_matmul_b : memref<2x8x128xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.func @k0_matmul(
// CHECK: vector.load {{.*}} : memref<64x64xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK: vector.load {{.*}} : memref<64x64xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK: memref.store {{.*}} : memref<2x8x132xf32, #gpu.address_space<workgroup>>
// CHECK: vector.store {{.*}} : memref<2x8x128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NEXT: gpu.barrier
// CHECK: scf.for
// CHECK: vector.load {{.*}} : memref<64x64xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK: vector.load {{.*}} : memref<64x64xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK-NOT: gpu.barrier
// CHECK: vector.load {{.*}} : memref<2x8x132xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NOT: gpu.barrier
// CHECK: math.fma
// CHECK-NOT: gpu.barrier
// CHECK: vector.store {{.*}} : memref<2x8x128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: scf.yield
// CHECK-NOT: memref.load {{.*}} : memref<64x64xf32>
// CHECK: memref.store {{.*}} : memref<64x64xf32>
// CHECK-NOT: memref.load {{.*}} : memref<64x64xf32>
// CHECK: gpu.return
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
// CHECK: gpu.launch_func @zynml_kernels::@k0_matmul_tensor_core blocks in (%c2{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c128{{(_[0-9]+)?}}, {{.*}}) {zynml.problem = "{{[^"]*}}", zynml.strategy = "matmul_tensor_core"}
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

// On sm_90a (the default chip) an f16 product whose sizes tile by 128 x 256, 192 or 128
// x 64 takes matmul_wgmma, its tiles as wide as gemm_waves' model finds fastest (128 x
// 256 here: two tiles 128 wide, each half the work of one 256 wide): the host makes a
// TMA descriptor of A (128x64 boxes) and of B (64x64 boxes), passed as pointers; 384
// threads (two multiplying warpgroups and a copying one that hands them registers with
// setmaxnreg), a persistent grid (one block per tile, here 2, capped at run time at one
// per multiprocessor: zynml.blocks_per_multiprocessor; each block loops over its tiles
// from block_id by grid_dim) and a 4-stage ring in dynamic shared memory (and after it
// the two 8 KB store buffers of each multiplying warpgroup); full/empty mbarriers per
// slot; wgmma m64n128k16 as inline PTX, 4 per k step, and, since C is read first (no
// fill), the accumulators added to C's pairs and stored straight back. On sm_80 the same
// product stays on the wmma strategy, and forcing matmul_wgmma there is an error.
// CHECK-LABEL: func.func @f16_matmul_wgmma(
// CHECK: [[A:%[a-z0-9_]+]] = memref.cast %arg0 : memref<128x64xf16> to memref<*xf16>
// CHECK: nvgpu.tma.create.descriptor [[A]] box[%c128{{(_[0-9]+)?}}, %c64{{(_[0-9]+)?}}] : memref<*xf16> -> <tensor = memref<128x64xf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: [[B:%[a-z0-9_]+]] = memref.cast %arg1 : memref<64x256xf16> to memref<*xf16>
// CHECK: nvgpu.tma.create.descriptor [[B]] box[%c64{{(_[0-9]+)?}}, %c64{{(_[0-9]+)?}}]
// CHECK: gpu.launch_func @zynml_kernels::@k0_matmul_wgmma blocks in (%c2{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c384, {{.*}}) dynamic_shared_memory_size %c164864_i32 args({{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr) {zynml.blocks_per_multiprocessor = 1 : i64, zynml.problem = "{{[^"]*}}", zynml.strategy = "matmul_wgmma"}
// CHECK: gpu.func @k0_matmul_wgmma({{.*}}, %arg3: !llvm.ptr, %arg4: !llvm.ptr) kernel attributes {known_block_size = array<i32: 384, 1, 1>}
// CHECK: gpu.dynamic_shared_memory
// CHECK-COUNT-2: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
// CHECK: [[BLOCK:%[a-z0-9_]+]] = gpu.block_id x
// CHECK-NEXT: [[GRID:%[a-z0-9_]+]] = gpu.grid_dim x
// CHECK: gpu.shuffle idx
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: scf.for [[LOCAL:%[a-z0-9_]+]] = %c0{{(_[0-9]+)?}} to {{%[0-9]+}} step
// CHECK-NEXT: arith.muli [[LOCAL]], [[GRID]] : index
// CHECK-NEXT: arith.addi [[BLOCK]], {{%[0-9]+}} : index
// CHECK: nvgpu.mbarrier.arrive.expect_tx {{.*}}, %c32768
// CHECK-COUNT-3: nvgpu.tma.async.load
// CHECK: nvvm.setmaxregister increase 232
// CHECK: scf.for
// CHECK: scf.for {{.*}} iter_args(
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: wgmma.fence.sync.aligned;
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// CHECK: wgmma.commit_group.sync.aligned;
// CHECK: wgmma.wait_group.sync.aligned 1;
// CHECK: nvgpu.mbarrier.arrive
// CHECK: wgmma.wait_group.sync.aligned 0;
// CHECK: nvgpu.mbarrier.arrive
// CHECK-NOT: gpu.barrier
// CHECK: arith.truncf {{.*}} : vector<2xf32> to vector<2xf16>
// CHECK-NEXT: vector.store {{.*}} {alignment = 4 : i64} : memref<128x256xf16>, vector<2xf16>
// SM80-LABEL: func.func @f16_matmul_wgmma(
// SM80-NOT: nvgpu.tma
// SM80: {zynml.problem = "{{[^"]*}}", zynml.strategy = "matmul_tensor_core"}
// NOWGMMA: error: GPU strategy 'matmul_wgmma' needs setmaxnreg, tma, wgmma, which sm_80 lacks
#aw = affine_map<(d0, d1, d2) -> (d0, d2)>
#bw = affine_map<(d0, d1, d2) -> (d2, d1)>
#cw = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @f16_matmul_wgmma(%x: memref<128x64xf16>, %y: memref<64x256xf16>, %z: memref<128x256xf16>) {
  linalg.generic {indexing_maps = [#aw, #bw, #cw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : memref<128x64xf16>, memref<64x256xf16>) outs(%z : memref<128x256xf16>) {
  ^bb0(%l: f16, %r: f16, %o: f16):
    %p = arith.mulf %l, %r : f16
    %s = arith.addf %o, %p : f16
    linalg.yield %s : f16
  }
  return
}

// -----

// A product into C just filled with a constant: one matmul_wgmma kernel (the fill goes),
// whose epilogue never reads C. It stores C through TMA: a third descriptor (C's, 64 x 64
// boxes); each warpgroup waits until its buffer's last store has read it, writes its
// pairs into the swizzled buffer in shared memory, fences them for the copy engine and
// its first thread stores the chunk (a bulk group); the block waits for its stores
// before it ends.
// CHECK-LABEL: func.func @f16_matmul_wgmma_from_zero(
// CHECK-NOT: @k1_
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c64{{(_[0-9]+)?}}, %c64{{(_[0-9]+)?}}] : memref<*xf16> -> <tensor = memref<64x64xf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: gpu.launch_func @zynml_kernels::@k0_matmul_wgmma {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr)
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.func @k0_matmul_wgmma(
// CHECK-NOT: vector.load {{.*}} : memref<128x128xf16>
// CHECK-NOT: vector.store {{.*}} : memref<128x128xf16>
// CHECK: "cp.async.bulk.wait_group.read 1;"
// CHECK-NEXT: }
// CHECK: "bar.sync $0, 128;"
// CHECK-COUNT-16: vector.store {{.*}} : memref<4096xf16, #gpu.address_space<workgroup>>, vector<2xf16>
// CHECK: "fence.proxy.async.shared::cta;"
// CHECK: "bar.sync $0, 128;"
// CHECK: nvgpu.tma.async.store
// CHECK-NEXT: "cp.async.bulk.commit_group;"
// CHECK: "cp.async.bulk.wait_group 0;"
// CHECK: gpu.return
#af = affine_map<(d0, d1, d2) -> (d0, d2)>
#bf = affine_map<(d0, d1, d2) -> (d2, d1)>
#cf = affine_map<(d0, d1, d2) -> (d0, d1)>
#fill = affine_map<(d0, d1) -> (d0, d1)>
func.func @f16_matmul_wgmma_from_zero(%x: memref<128x64xf16>, %y: memref<64x128xf16>) -> memref<128x128xf16> {
  %zero = arith.constant 0.0 : f16
  %z = memref.alloc() : memref<128x128xf16>
  linalg.generic {indexing_maps = [#fill], iterator_types = ["parallel", "parallel"]} outs(%z : memref<128x128xf16>) {
  ^bb0(%o: f16):
    linalg.yield %zero : f16
  }
  linalg.generic {indexing_maps = [#af, #bf, #cf], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : memref<128x64xf16>, memref<64x128xf16>) outs(%z : memref<128x128xf16>) {
  ^bb0(%l: f16, %r: f16, %o: f16):
    %p = arith.mulf %l, %r : f16
    %s = arith.addf %o, %p : f16
    linalg.yield %s : f16
  }
  return %z : memref<128x128xf16>
}

// -----

// Sizes that are multiples of 8 but not of the tiles (200 x 48 x 320), C filled first:
// still one matmul_wgmma kernel, with partial tiles: 2 x 3 tiles of 128 x 128 (the
// model's width for few tiles), ceil(48 / 64) = 1 k step. TMA reads zeros past M, N, K
// and drops the stores past M and N; on sm_80 (no TMA) the product stays elsewhere.
// CHECK-LABEL: func.func @f16_matmul_wgmma_partial_tiles(
// CHECK: gpu.launch_func @zynml_kernels::@k0_matmul_wgmma blocks in (%c6{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.func @k0_matmul_wgmma(
// CHECK: nvgpu.tma.async.store
// SM80-LABEL: func.func @f16_matmul_wgmma_partial_tiles(
// SM80-NOT: matmul_wgmma
#ap = affine_map<(d0, d1, d2) -> (d0, d2)>
#bp = affine_map<(d0, d1, d2) -> (d2, d1)>
#cp = affine_map<(d0, d1, d2) -> (d0, d1)>
#fillp = affine_map<(d0, d1) -> (d0, d1)>
func.func @f16_matmul_wgmma_partial_tiles(%x: memref<200x48xf16>, %y: memref<48x320xf16>) -> memref<200x320xf16> {
  %zero = arith.constant 0.0 : f16
  %z = memref.alloc() : memref<200x320xf16>
  linalg.generic {indexing_maps = [#fillp], iterator_types = ["parallel", "parallel"]} outs(%z : memref<200x320xf16>) {
  ^bb0(%o: f16):
    linalg.yield %zero : f16
  }
  linalg.generic {indexing_maps = [#ap, #bp, #cp], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : memref<200x48xf16>, memref<48x320xf16>) outs(%z : memref<200x320xf16>) {
  ^bb0(%l: f16, %r: f16, %o: f16):
    %p = arith.mulf %l, %r : f16
    %s = arith.addf %o, %p : f16
    linalg.yield %s : f16
  }
  return %z : memref<200x320xf16>
}

// -----

// At 128x128 tiles the block stages A and B in shared memory (16-byte copies, rows padded
// by 8 halves) and each warp multiplies 4x4 fragments read from there.
// CHECK-LABEL: func.func @f16_matmul_staged(
// CHECK: gpu.launch_func @zynml_kernels::@k0_matmul_tensor_core blocks in (%c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c128{{(_[0-9]+)?}}, {{.*}}) {zynml.problem = "{{[^"]*}}", zynml.strategy = "matmul_tensor_core"}
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

// A convolution as the spec's conv2d arrives (conv2d.zyn: gathers at clamped indices, a
// bounds predicate) takes implicit_gemm: C[oc, (b, oh, ow)] += A'[oc, k] * B'[k, (b, oh, ow)]
// over k = (ic, kh, kw), 40 x 30 x 18, one 64x64 tile of C. Per step of 8 along k, the
// block stages A' (the kernel) and B' (the input, 0 where the predicate fails) in shared
// memory by cloning the body's gathers; a column's (oh, ow) are computed once, before the
// loop. Two stages: the first step is staged before the loop, each step in it gathers
// the next one into registers, computes on the current stage (4x4 FMAs per k and thread)
// and stores the gathered elements into the other stage before its one barrier; the
// epilogue adds the output's initial value (the bias) at the points inside 40 x 30.
// CHECK-LABEL: func.func @conv2d_gathers(
// CHECK: gpu.launch_func @zynml_kernels::@k0_implicit_gemm blocks in (%c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c256{{(_[0-9]+)?}}, {{.*}}) {zynml.problem = "{{[^"]*}}", zynml.strategy = "implicit_gemm"}
// CHECK: memref.global "private" @k0_implicit_gemm_a : memref<2x8x68xf32, #gpu.address_space<workgroup>>
// CHECK: memref.global "private" @k0_implicit_gemm_b : memref<2x8x64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.func @k0_implicit_gemm({{%[a-z0-9_]+}}: memref<2x3x3xi8>, [[OUT:%[a-z0-9_]+]]: memref<1x40x6x5xf32>, [[IN:%[a-z0-9_]+]]: memref<1x2x6x5xf32>, [[W:%[a-z0-9_]+]]: memref<40x2x3x3xf32>)
// CHECK: {{%[0-9]+}} = arith.remui [[N:%[0-9]+]], %c5{{(_[0-9]+)?}} : index
// CHECK-NEXT: [[R:%[0-9]+]] = arith.divui [[N]], %c5{{(_[0-9]+)?}} : index
// CHECK-NOT: scf.for
// CHECK: [[OH:%[0-9]+]] = arith.remui [[R]], %c6{{(_[0-9]+)?}} : index
// CHECK-NOT: scf.for
// CHECK: memref.load [[W]][
// CHECK-NOT: scf.for
// CHECK: memref.store {{.*}} : memref<2x8x68xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: scf.for
// CHECK: memref.store {{.*}} : memref<2x8x64xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: scf.for
// CHECK: gpu.barrier
// CHECK: scf.for [[K0:%[a-z0-9_]+]] = %c0{{(_[0-9]+)?}} to %c18{{(_[0-9]+)?}} step %c8{{(_[0-9]+)?}} iter_args(
// CHECK: arith.addi [[K0]], %c8{{(_[0-9]+)?}} : index
// CHECK: memref.load [[W]][
// CHECK: arith.addi [[OH]], {{%[0-9]+}} : index
// CHECK: memref.load [[IN]][
// CHECK: arith.cmpi slt
// CHECK: arith.select
// CHECK-NOT: memref.store
// CHECK: vector.load {{.*}} : memref<2x8x68xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: vector.load {{.*}} : memref<2x8x64xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-16: math.fma
// CHECK-NOT: gpu.barrier
// CHECK: memref.store {{.*}} : memref<2x8x68xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store {{.*}} : memref<2x8x64xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: math.fma
// CHECK: gpu.barrier
// CHECK-NEXT: scf.yield
// CHECK: arith.cmpi ult, {{%[0-9]+}}, %c40{{(_[0-9]+)?}} : index
// CHECK-NEXT: %c30{{(_[0-9]+)?}} = arith.constant 30 : index
// CHECK-NEXT: arith.cmpi ult, {{%[0-9]+}}, %c30{{(_[0-9]+)?}} : index
// CHECK: scf.if
// CHECK-NEXT: [[INIT:%[0-9]+]] = memref.load [[OUT]]
// CHECK-NEXT: [[SUM:%[0-9]+]] = arith.addf [[INIT]], {{%[0-9]+#0}} : f32
// CHECK-NEXT: memref.store [[SUM]], [[OUT]]
// FORCE-LABEL: func.func @conv2d_gathers(
// FORCE: @k0_pointwise
#extents = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d4, d5, d6)>
#conv_out = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>
func.func @conv2d_gathers(%input: memref<1x2x6x5xf32>, %kernel: memref<40x2x3x3xf32>, %extents: memref<2x3x3xi8>, %output: memref<1x40x6x5xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c39 = arith.constant 39 : index
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#extents, #conv_out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%extents : memref<2x3x3xi8>) outs(%output : memref<1x40x6x5xf32>) {
  ^bb0(%e: i8, %o: f32):
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
    %x = memref.load %input[%c0, %ic, %ih2, %iw2] : memref<1x2x6x5xf32>
    %oc = linalg.index 1 : index
    %oc1 = arith.minsi %oc, %c39 : index
    %w = memref.load %kernel[%oc1, %ic, %kh, %kw] : memref<40x2x3x3xf32>
    %p = arith.mulf %x, %w : f32
    %h0 = arith.cmpi sge, %ih, %c0 : index
    %h1 = arith.cmpi slt, %ih, %c6 : index
    %w0 = arith.cmpi sge, %iw, %c0 : index
    %w1 = arith.cmpi slt, %iw, %c5 : index
    %hh = arith.andi %h0, %h1 : i1
    %ww = arith.andi %w0, %w1 : i1
    %inside = arith.andi %hh, %ww : i1
    %term = arith.select %inside, %p, %zero : f32
    %s = arith.addf %o, %term : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A depthwise convolution (conv2d_depthwise.zyn) reads its channel c on both sides,
// input[b, c, oh + kh, ow + kw] * kernel[c, kh, kw]: no parallel loop is the kernel's
// alone, so it is no matrix product and implicit_gemm leaves it (to pointwise here).
// CHECK-LABEL: func.func @depthwise_conv2d(
// CHECK-NOT: implicit_gemm
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
// CHECK-NOT: implicit_gemm
// CHECK: gpu.func @k0_pointwise(
#dw_in = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 + d4, d3 + d5)>
#dw_kernel = affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d4, d5)>
#dw_out = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
func.func @depthwise_conv2d(%input: memref<2x64x34x34xf32>, %kernel: memref<64x3x3xf32>, %output: memref<2x64x32x32xf32>) {
  linalg.generic {indexing_maps = [#dw_in, #dw_kernel, #dw_out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%input, %kernel : memref<2x64x34x34xf32>, memref<64x3x3xf32>) outs(%output : memref<2x64x32x32xf32>) {
  ^bb0(%x: f32, %w: f32, %o: f32):
    %p = arith.mulf %x, %w : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An f16 attention's generics (attention_lowering.py's scores, max, sum, out, round; 2
// heads of 20 queries and keys, head dim 16, a bool mask) take attention_tensor_core:
// one kernel of 2 warps (64 threads) per 64 query rows and head, each warp 2 tiles of 16
// rows. Q's rows go to shared memory once; K and V tiles of 32 keys follow by cp.async
// (16 bytes, zero-filled past key 20), K tile j + 1 in flight during P V of tile j, V
// tile j during its scores. S = Q K^T and O += P V on mma.sync m16n8k16 (f16 in, f32
// accumulators), fragments by ldmatrix (V's transposed); each row's max and sum across
// the lanes of a quad by shuffles; the mask read two keys (2 bytes) at a time; O / l
// stored 2 f16 at a time in the rows that exist. S, M, L and the f32 O are gone.
// CHECK-LABEL: func.func @attention_f16(
// CHECK-SAME: [[Q:%[a-z0-9_]+]]: memref<1x2x20x16xf16>, [[K:%[a-z0-9_]+]]: memref<1x2x20x16xf16>, [[V:%[a-z0-9_]+]]: memref<1x2x20x16xf16>, [[M:%[a-z0-9_]+]]: memref<20x20xi1>)
// CHECK-NOT: memref.alloc() {{.*}} : memref<1x2x20x20xf32>
// CHECK-NOT: memref.alloc() {{.*}} : memref<1x2x20xf32>
// CHECK-DAG: [[M8:%[0-9]+]] = builtin.unrealized_conversion_cast [[M]] : memref<20x20xi1> to memref<20x20xi8>
// CHECK-DAG: [[O:%[a-z0-9_]+]] = memref.alloc() {{.*}} : memref<1x2x20x16xf16>
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_tensor_core blocks in (%c1{{(_[0-9]+)?}}, %c2{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c64, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args([[Q]] : memref<1x2x20x16xf16>, [[K]] : memref<1x2x20x16xf16>, [[V]] : memref<1x2x20x16xf16>, [[M8]] : memref<20x20xi8>, [[O]] : memref<1x2x20x16xf16>) {zynml.problem = "{{[^"]*}}", zynml.strategy = "attention_tensor_core"}
// CHECK-NEXT: return [[O]]
// CHECK: memref.global "private" @k0_attention_tensor_core_k : memref<32x24xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-NEXT: memref.global "private" @k0_attention_tensor_core_v : memref<32x24xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-NEXT: memref.global "private" @k0_attention_tensor_core_q : memref<64x24xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-NEXT: gpu.func @k0_attention_tensor_core([[KQ:%[a-z0-9_]+]]: memref<1x2x20x16xf16>, [[KK:%[a-z0-9_]+]]: memref<1x2x20x16xf16>, [[KV:%[a-z0-9_]+]]: memref<1x2x20x16xf16>, [[KM:%[a-z0-9_]+]]: memref<20x20xi8>, [[KO:%[a-z0-9_]+]]: memref<1x2x20x16xf16>) kernel attributes {known_block_size = array<i32: 64, 1, 1>}
// CHECK-DAG: [[KT:%[0-9]+]] = memref.get_global @k0_attention_tensor_core_k
// CHECK-DAG: [[VT:%[0-9]+]] = memref.get_global @k0_attention_tensor_core_v
// CHECK-DAG: [[QT:%[0-9]+]] = memref.get_global @k0_attention_tensor_core_q
// CHECK-COUNT-2: nvgpu.device_async_copy [[KQ]][{{.*}}], [[QT]][{{.*}}], 8 {bypassL1}
// CHECK: nvgpu.device_async_copy [[KK]][{{.*}}], [[KT]][{{.*}}], 8, {{%[0-9]+}} {bypassL1}
// CHECK-NEXT: [[FIRST:%[0-9]+]] = nvgpu.device_async_create_group
// CHECK: scf.for {{.*}} iter_args([[TOKEN:%[a-z0-9_]+]] = [[FIRST]], {{.*}}) -> (!nvgpu.device.async.token, f32, f32, f32, f32, f32, f32, f32, f32, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>)
// CHECK: nvgpu.device_async_wait [[TOKEN]] {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy [[KV]][{{.*}}], [[VT]][{{.*}}], 8, {{%[0-9]+}} {bypassL1}
// CHECK-NEXT: [[VTOKEN:%[0-9]+]] = nvgpu.device_async_create_group
// CHECK: nvgpu.ldmatrix [[QT]][{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<64x24xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK: nvgpu.ldmatrix [[KT]][{{.*}}] {numTiles = 4 : i32, transpose = false}
// CHECK-COUNT-4: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK: vector.load [[KM]][{{.*}}] {alignment = 2 : i64} : memref<20x20xi8>, vector<2xi8>
// CHECK: arith.maximumf
// CHECK: gpu.shuffle xor {{.*}}, %c1_i32{{.*}}, %c32_i32
// CHECK: gpu.shuffle xor {{.*}}, %c2_i32{{.*}}, %c32_i32
// CHECK: math.fma
// CHECK-NEXT: math.exp2
// CHECK: nvgpu.device_async_wait [[VTOKEN]] {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if {{.*}} -> (!nvgpu.device.async.token) {
// CHECK: nvgpu.device_async_copy [[KK]][{{.*}}], [[KT]][{{.*}}]
// CHECK: } else {
// CHECK-NEXT: scf.yield [[VTOKEN]] : !nvgpu.device.async.token
// CHECK: arith.truncf {{.*}} : f32 to f16
// CHECK: nvgpu.ldmatrix [[VT]][{{.*}}] {numTiles = 4 : i32, transpose = true}
// CHECK-COUNT-4: nvgpu.mma.sync
// CHECK: scf.yield
// CHECK: nvgpu.device_async_wait
// CHECK-COUNT-8: gpu.shuffle xor
// CHECK: scf.if
// CHECK-COUNT-2: vector.store {{.*}}, [[KO]][{{.*}}] {alignment = 4 : i64} : memref<1x2x20x16xf16>, vector<2xf16>
// CHECK: gpu.return
// FORCE-LABEL: func.func @attention_f16(
// FORCE-COUNT-5: {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map2 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#map6 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map7 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#map8 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#map9 = affine_map<(d0, d1, d2, d3, d4) -> (d2, d4)>
func.func @attention_f16(%arg0: memref<1x2x20x16xf16>, %arg1: memref<1x2x20x16xf16>, %arg2: memref<1x2x20x16xf16>, %arg3: memref<20x20xi1>) -> memref<1x2x20x16xf16> {
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %cst_1 = arith.constant 2.500000e-01 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x20xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<1x2x20x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : memref<1x2x20x16xf16>, memref<1x2x20x16xf16>) outs(%alloc : memref<1x2x20x20xf32>) {
  ^bb0(%in: f16, %in_6: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.mulf %0, %cst_1 : f32
    %2 = arith.extf %in_6 : f16 to f32
    %3 = arith.mulf %1, %2 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  }
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20xf32>
  %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_3 : memref<1x2x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst : f32
  }
  linalg.generic {indexing_maps = [#map, #map5, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_max"} ins(%alloc, %arg3 : memref<1x2x20x20xf32>, memref<20x20xi1>) outs(%alloc_3 : memref<1x2x20xf32>) {
  ^bb0(%in: f32, %in_6: i1, %out: f32):
    %0 = arith.select %in_6, %in, %cst : f32
    %1 = arith.maximumf %out, %0 : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_2 : memref<1x2x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map6, #map5, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_sum"} ins(%alloc, %alloc_3, %arg3 : memref<1x2x20x20xf32>, memref<1x2x20xf32>, memref<20x20xi1>) outs(%alloc_2 : memref<1x2x20xf32>) {
  ^bb0(%in: f32, %in_6: f32, %in_7: i1, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.select %in_7, %1, %cst_0 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x16xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc_4 : memref<1x2x20x16xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map7, #map7, #map8, #map9, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc, %alloc_3, %alloc_2, %arg2, %arg3 : memref<1x2x20x20xf32>, memref<1x2x20xf32>, memref<1x2x20xf32>, memref<1x2x20x16xf16>, memref<20x20xi1>) outs(%alloc_4 : memref<1x2x20x16xf32>) {
  ^bb0(%in: f32, %in_6: f32, %in_7: f32, %in_8: f16, %in_9: i1, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.divf %1, %in_7 : f32
    %3 = arith.extf %in_8 : f16 to f32
    %4 = arith.mulf %2, %3 : f32
    %5 = arith.select %in_9, %4, %cst_0 : f32
    %6 = arith.addf %out, %5 : f32
    linalg.yield %6 : f32
  }
  %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x16xf16>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"], library_call = "zynml_attention_round"} ins(%alloc_4 : memref<1x2x20x16xf32>) outs(%alloc_5 : memref<1x2x20x16xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  return %alloc_5 : memref<1x2x20x16xf16>
}

// -----

// Causal f16 attention (causal_offset = 0: the max, sum and out generics carry
// zynml.causal_offset; 70 queries and keys, head dim 16) takes attention_tensor_core with
// tile skipping: block x (rows 64x..) visits key tiles 0..ceil(min(64x + 64, 70) / 32)
// only, the tiles above the diagonal never copied nor multiplied (block 0: tiles 0, 1 of
// 3); the prefetch stops there too. In the tiles it visits, key j of row i is allowed
// when j <= i (and j < 70).
// CHECK-LABEL: func.func @causal_attention_f16(
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_tensor_core blocks in (%c2, %c2{{(_[0-9]+)?}}, %c1) threads in (%c64, {{.*}}) {zynml.problem = "{{[^"]*}}", zynml.strategy = "attention_tensor_core"}
// CHECK: gpu.func @k0_attention_tensor_core(
// CHECK: [[BX:%[a-z0-9_]+]] = gpu.block_id x
// CHECK: [[ROW0:%[0-9]+]] = arith.muli [[BX]], %c64{{(_[0-9]+)?}} : index
// CHECK: [[PAST:%[0-9]+]] = arith.addi [[ROW0]], %c64{{(_[0-9]+)?}} : index
// CHECK: [[END:%[0-9]+]] = arith.minsi [[PAST]], %c70{{(_[0-9]+)?}} : index
// CHECK: [[UP:%[0-9]+]] = arith.addi [[END]], %c31{{(_[0-9]+)?}} : index
// CHECK: [[TILES:%[0-9]+]] = arith.divui [[UP]], %c32{{(_[0-9]+)?}} : index
// CHECK: scf.for {{%[a-z0-9_]+}} = {{%[a-z0-9_]+}} to [[TILES]] step %c1
// CHECK: arith.cmpi sle,
// CHECK: arith.cmpi ult, {{%[0-9]+}}, [[TILES]] : index
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map2 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map6 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#map7 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
func.func @causal_attention_f16(%arg0: memref<1x2x70x16xf16>, %arg1: memref<1x2x70x16xf16>, %arg2: memref<1x2x70x16xf16>) -> memref<1x2x70x16xf16> {
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %cst_1 = arith.constant 2.500000e-01 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x2x70x70xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<1x2x70x70xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : memref<1x2x70x16xf16>, memref<1x2x70x16xf16>) outs(%alloc : memref<1x2x70x70xf32>) {
  ^bb0(%in: f16, %in_6: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.mulf %0, %cst_1 : f32
    %2 = arith.extf %in_6 : f16 to f32
    %3 = arith.mulf %1, %2 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  }
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x2x70xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_2 : memref<1x2x70xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst : f32
  }
  linalg.generic {indexing_maps = [#map, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_max"} ins(%alloc : memref<1x2x70x70xf32>) outs(%alloc_2 : memref<1x2x70xf32>) attrs =  {zynml.causal_offset = 0 : i64} {
  ^bb0(%in: f32, %out: f32):
    %0 = linalg.index 2 : index
    %1 = linalg.index 3 : index
    %2 = arith.cmpi sle, %1, %0 : index
    %3 = arith.select %2, %in, %cst : f32
    %4 = arith.maximumf %out, %3 : f32
    linalg.yield %4 : f32
  }
  %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x2x70xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_3 : memref<1x2x70xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map5, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_sum"} ins(%alloc, %alloc_2 : memref<1x2x70x70xf32>, memref<1x2x70xf32>) outs(%alloc_3 : memref<1x2x70xf32>) attrs =  {zynml.causal_offset = 0 : i64} {
  ^bb0(%in: f32, %in_6: f32, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = linalg.index 2 : index
    %3 = linalg.index 3 : index
    %4 = arith.cmpi sle, %3, %2 : index
    %5 = arith.select %4, %1, %cst_0 : f32
    %6 = arith.addf %out, %5 : f32
    linalg.yield %6 : f32
  }
  %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x2x70x16xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc_4 : memref<1x2x70x16xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map6, #map6, #map7, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc, %alloc_2, %alloc_3, %arg2 : memref<1x2x70x70xf32>, memref<1x2x70xf32>, memref<1x2x70xf32>, memref<1x2x70x16xf16>) outs(%alloc_4 : memref<1x2x70x16xf32>) attrs =  {zynml.causal_offset = 0 : i64} {
  ^bb0(%in: f32, %in_6: f32, %in_7: f32, %in_8: f16, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.divf %1, %in_7 : f32
    %3 = arith.extf %in_8 : f16 to f32
    %4 = arith.mulf %2, %3 : f32
    %5 = linalg.index 2 : index
    %6 = linalg.index 4 : index
    %7 = arith.cmpi sle, %6, %5 : index
    %8 = arith.select %7, %4, %cst_0 : f32
    %9 = arith.addf %out, %8 : f32
    linalg.yield %9 : f32
  }
  %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<1x2x70x16xf16>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"], library_call = "zynml_attention_round"} ins(%alloc_4 : memref<1x2x70x16xf32>) outs(%alloc_5 : memref<1x2x70x16xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  return %alloc_5 : memref<1x2x70x16xf16>
}

// -----

// Causal f32 attention with causal_offset = -3 (row i sees keys 0..i - 3; rows 0..2
// none: 0) takes the SIMT attention kernel, whose key loop per block ends at
// max(0, min(64x + 64, 70) - 3): block 1 visits keys 0..66, block 0 keys 0..60; each
// score is checked against its row's limit (row - 3).
// CHECK-LABEL: func.func @causal_attention_f32(
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention blocks in (%c2, %c2{{(_[0-9]+)?}}, %c1) {{.*}} {zynml.problem = "{{[^"]*}}", zynml.strategy = "attention"}
// CHECK: gpu.func @k0_attention(
// CHECK: [[BX:%[a-z0-9_]+]] = gpu.block_id x
// CHECK: [[ROW0:%[0-9]+]] = arith.muli [[BX]], %c64{{(_[0-9]+)?}} : index
// CHECK: [[ROW:%[0-9]+]] = arith.minui {{%[0-9]+}}, %c69{{(_[0-9]+)?}} : index
// CHECK: [[PAST:%[0-9]+]] = arith.addi [[ROW0]], %c64{{(_[0-9]+)?}} : index
// CHECK: [[LAST:%[0-9]+]] = arith.minsi [[PAST]], %c70{{(_[0-9]+)?}} : index
// CHECK: [[SHIFTED:%[0-9]+]] = arith.addi [[LAST]], %c-3{{(_[0-9]+)?}} : index
// CHECK: [[END:%[0-9]+]] = arith.maxsi [[SHIFTED]], %c0{{(_[0-9]+)?}} : index
// CHECK: scf.for [[KV0:%[a-z0-9_]+]] = {{%[a-z0-9_]+}} to [[END]] step %c32
// CHECK: [[KEY:%[0-9]+]] = arith.addi [[KV0]], %c0{{(_[0-9]+)?}} : index
// CHECK: [[LIMIT:%[0-9]+]] = arith.addi [[ROW]], %c-3{{(_[0-9]+)?}} : index
// CHECK: arith.cmpi sle, [[KEY]], [[LIMIT]] : index
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map2 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map6 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#map7 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
func.func @causal_attention_f32(%arg0: memref<1x2x70x16xf32>, %arg1: memref<1x2x70x16xf32>, %arg2: memref<1x2x70x16xf32>) -> memref<1x2x70x16xf32> {
  %c-3 = arith.constant -3 : index
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %cst_1 = arith.constant 2.500000e-01 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x2x70x70xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<1x2x70x70xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : memref<1x2x70x16xf32>, memref<1x2x70x16xf32>) outs(%alloc : memref<1x2x70x70xf32>) {
  ^bb0(%in: f32, %in_5: f32, %out: f32):
    %0 = arith.mulf %in, %cst_1 : f32
    %1 = arith.mulf %0, %in_5 : f32
    %2 = arith.addf %out, %1 : f32
    linalg.yield %2 : f32
  }
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x2x70xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_2 : memref<1x2x70xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst : f32
  }
  linalg.generic {indexing_maps = [#map, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_max"} ins(%alloc : memref<1x2x70x70xf32>) outs(%alloc_2 : memref<1x2x70xf32>) attrs =  {zynml.causal_offset = -3 : i64} {
  ^bb0(%in: f32, %out: f32):
    %0 = linalg.index 2 : index
    %1 = linalg.index 3 : index
    %2 = arith.addi %0, %c-3 : index
    %3 = arith.cmpi sle, %1, %2 : index
    %4 = arith.select %3, %in, %cst : f32
    %5 = arith.maximumf %out, %4 : f32
    linalg.yield %5 : f32
  }
  %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x2x70xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_3 : memref<1x2x70xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map5, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_sum"} ins(%alloc, %alloc_2 : memref<1x2x70x70xf32>, memref<1x2x70xf32>) outs(%alloc_3 : memref<1x2x70xf32>) attrs =  {zynml.causal_offset = -3 : i64} {
  ^bb0(%in: f32, %in_5: f32, %out: f32):
    %0 = arith.subf %in, %in_5 : f32
    %1 = math.exp %0 : f32
    %2 = linalg.index 2 : index
    %3 = linalg.index 3 : index
    %4 = arith.addi %2, %c-3 : index
    %5 = arith.cmpi sle, %3, %4 : index
    %6 = arith.select %5, %1, %cst_0 : f32
    %7 = arith.addf %out, %6 : f32
    linalg.yield %7 : f32
  }
  %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x2x70x16xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc_4 : memref<1x2x70x16xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map6, #map6, #map7, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc, %alloc_2, %alloc_3, %arg2 : memref<1x2x70x70xf32>, memref<1x2x70xf32>, memref<1x2x70xf32>, memref<1x2x70x16xf32>) outs(%alloc_4 : memref<1x2x70x16xf32>) attrs =  {zynml.causal_offset = -3 : i64} {
  ^bb0(%in: f32, %in_5: f32, %in_6: f32, %in_7: f32, %out: f32):
    %0 = arith.subf %in, %in_5 : f32
    %1 = math.exp %0 : f32
    %2 = arith.divf %1, %in_6 : f32
    %3 = arith.mulf %2, %in_7 : f32
    %4 = linalg.index 2 : index
    %5 = linalg.index 4 : index
    %6 = arith.addi %4, %c-3 : index
    %7 = arith.cmpi sle, %5, %6 : index
    %8 = arith.select %7, %3, %cst_0 : f32
    %9 = arith.addf %out, %8 : f32
    linalg.yield %9 : f32
  }
  return %alloc_4 : memref<1x2x70x16xf32>
}

// -----

// The same without a mask, head dim 64, on sm_90a: attention_wgmma. The host makes a TMA
// descriptor of Q (boxes of 128 rows x 64), K and V (128 keys x 64), with the tensors'
// leading unit dims; one kernel of two warpgroups and a copying warpgroup (384 threads),
// a persistent grid (one block per work item of 128 query rows of a head, here 2, capped
// at run time at one per multiprocessor; each block loops over its items from block_id
// by grid_dim), 113 KB of dynamic shared memory (Q's tile, three K/V slots, 1 KB to
// align them). The copying thread, after its warpgroup gives registers up (setmaxnreg),
// loads each item's Q once the previous item's is released (the q_empty mbarrier), then
// K and V tiles into the ring (full/empty mbarriers); the warpgroups take the registers,
// wait on Q, then per tile compute S with 4 wgmma k-steps from shared memory, mask keys
// past 20 (the last tile), the online softmax, and O += P V with 8 wgmma k-steps taking
// P from registers (at head dim 64 one after the other), and release Q after the last S.
// On sm_80 the mma.sync kernel takes it.
// CHECK-LABEL: func.func @attention_f16_wgmma(
// CHECK-SAME: [[Q:%[a-z0-9_]+]]: memref<1x2x20x64xf16>, [[K:%[a-z0-9_]+]]: memref<1x2x20x64xf16>, [[V:%[a-z0-9_]+]]: memref<1x2x20x64xf16>)
// CHECK-DAG: [[O:%[a-z0-9_]+]] = memref.alloc() {{.*}} : memref<1x2x20x64xf16>
// CHECK-DAG: [[QMAP:%[0-9]+]] = nvgpu.tma.create.descriptor {{%[a-z0-9_]+}} box[%c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c128{{(_[0-9]+)?}}, %c64{{(_[0-9]+)?}}] : memref<*xf16> -> <tensor = memref<1x1x128x64xf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK-DAG: [[QPTR:%[0-9]+]] = builtin.unrealized_conversion_cast [[QMAP]]
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_wgmma blocks in (%c2{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c384, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c115712_i32 args([[O]] : memref<1x2x20x64xf16>, [[QPTR]] : !llvm.ptr, {{%[0-9]+}} : !llvm.ptr, {{%[0-9]+}} : !llvm.ptr) {zynml.blocks_per_multiprocessor = 1 : i64, zynml.problem = "{{[^"]*}}", zynml.strategy = "attention_wgmma"}
// CHECK: gpu.func @k0_attention_wgmma({{%[a-z0-9_]+}}: memref<1x2x20x64xf16>, {{%[a-z0-9_]+}}: !llvm.ptr, {{%[a-z0-9_]+}}: !llvm.ptr, {{%[a-z0-9_]+}}: !llvm.ptr) kernel attributes {known_block_size = array<i32: 384, 1, 1>}
// CHECK: [[BLOCK:%[a-z0-9_]+]] = gpu.block_id x
// CHECK-NEXT: [[GRID:%[a-z0-9_]+]] = gpu.grid_dim x
// CHECK: gpu.shuffle idx
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: scf.for [[ITEM:%[a-z0-9_]+]] = %c0{{(_[0-9]+)?}} to {{%[0-9]+}} step
// CHECK-NEXT: arith.muli [[ITEM]], [[GRID]] : index
// CHECK-NEXT: arith.addi [[BLOCK]], {{%[0-9]+}} : index
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive.expect_tx {{.*}}, %c16384
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<1x1x128x64xf16, {{.*}}>, swizzle = swizzle_128b, {{.*}}> -> memref<1x1x128x64xf16, #gpu.address_space<workgroup>>
// CHECK: scf.for
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive.expect_tx
// CHECK-COUNT-2: nvgpu.tma.async.load
// CHECK: } else {
// CHECK-NEXT: nvvm.setmaxregister increase 232
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: scf.for {{.*}} -> (f32, f32, f32, f32, f32,
// CHECK: llvm.inline_asm has_side_effects "wgmma.fence.sync.aligned;"
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {$0, {{.*}}}, ${{[0-9]+}}, ${{[0-9]+}}, p, 1, 1, 0, 0;
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: scf.if {{.*}} -> (f32, f32,
// CHECK: arith.select
// CHECK: gpu.shuffle xor
// CHECK: math.exp2
// CHECK: "wgmma.fence.sync.aligned;"
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.*}}}, {${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}}, ${{[0-9]+}}, p, 1, 1, 1;
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: nvgpu.mbarrier.arrive {{.*}}num_barriers = 3>
// CHECK: nvgpu.mbarrier.arrive {{%[0-9]+}}[{{%[a-z0-9_]+}}] : <memorySpace = #gpu.address_space<workgroup>> ->
// CHECK: vector.store {{.*}} : memref<1x2x20x64xf16>, vector<2xf16>
// SM80-LABEL: func.func @attention_f16_wgmma(
// SM80-NOT: nvgpu.tma
// SM80: {zynml.problem = "{{[^"]*}}", zynml.strategy = "attention_tensor_core"}
// FORCE-LABEL: func.func @attention_f16_wgmma(
// FORCE-COUNT-7: {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map2 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map6 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map7 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#map8 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
func.func @attention_f16_wgmma(%arg0: memref<1x2x20x64xf16>, %arg1: memref<1x2x20x64xf16>, %arg2: memref<1x2x20x64xf16>) -> memref<1x2x20x64xf16> {
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %cst_1 = arith.constant 1.250000e-01 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x20xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<1x2x20x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : memref<1x2x20x64xf16>, memref<1x2x20x64xf16>) outs(%alloc : memref<1x2x20x20xf32>) {
  ^bb0(%in: f16, %in_6: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.mulf %0, %cst_1 : f32
    %2 = arith.extf %in_6 : f16 to f32
    %3 = arith.mulf %1, %2 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  }
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20xf32>
  %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_3 : memref<1x2x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst : f32
  }
  linalg.generic {indexing_maps = [#map, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_max"} ins(%alloc : memref<1x2x20x20xf32>) outs(%alloc_3 : memref<1x2x20xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %out, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_2 : memref<1x2x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map6, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_sum"} ins(%alloc, %alloc_3 : memref<1x2x20x20xf32>, memref<1x2x20xf32>) outs(%alloc_2 : memref<1x2x20xf32>) {
  ^bb0(%in: f32, %in_6: f32, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.addf %out, %1 : f32
    linalg.yield %2 : f32
  }
  %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x64xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc_4 : memref<1x2x20x64xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map7, #map7, #map8, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc, %alloc_3, %alloc_2, %arg2 : memref<1x2x20x20xf32>, memref<1x2x20xf32>, memref<1x2x20xf32>, memref<1x2x20x64xf16>) outs(%alloc_4 : memref<1x2x20x64xf32>) {
  ^bb0(%in: f32, %in_6: f32, %in_7: f32, %in_8: f16, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.divf %1, %in_7 : f32
    %3 = arith.extf %in_8 : f16 to f32
    %4 = arith.mulf %2, %3 : f32
    %5 = arith.addf %out, %4 : f32
    linalg.yield %5 : f32
  }
  %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x64xf16>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"], library_call = "zynml_attention_round"} ins(%alloc_4 : memref<1x2x20x64xf32>) outs(%alloc_5 : memref<1x2x20x64xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  return %alloc_5 : memref<1x2x20x64xf16>
}

// -----

// A masked f16 attention (the first chunk's, head dim 64) on sm_90a: attention_wgmma
// takes the mask's bytes as its second argument. Per key tile each thread loads, after
// issuing S's wgmma and before waiting for it, the bytes of its accumulators' (row,
// key) pairs: 16 2-byte loads for each of its two rows (rows of 20 keys: even, so pairs
// stay 2-byte aligned; keys past 20 read the last pair, which the tail check drops), and
// a masked score is -inf. A row may have no allowed key: its shift is 0 (not -inf * c)
// and its 1 / l is 0. On sm_80 the mma.sync kernel takes it.
// CHECK-LABEL: func.func @attention_f16_wgmma_masked(
// CHECK-SAME: {{%[a-z0-9_]+}}: memref<1x2x20x64xf16>, {{%[a-z0-9_]+}}: memref<1x2x20x64xf16>, {{%[a-z0-9_]+}}: memref<1x2x20x64xf16>, [[M:%[a-z0-9_]+]]: memref<20x20xi1>)
// CHECK-DAG: [[M8:%[0-9]+]] = builtin.unrealized_conversion_cast [[M]] : memref<20x20xi1> to memref<20x20xi8>
// CHECK-DAG: [[O:%[a-z0-9_]+]] = memref.alloc() {{.*}} : memref<1x2x20x64xf16>
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_wgmma blocks in (%c2{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c384, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c115712_i32 args([[O]] : memref<1x2x20x64xf16>, [[M8]] : memref<20x20xi8>, {{%[0-9]+}} : !llvm.ptr, {{%[0-9]+}} : !llvm.ptr, {{%[0-9]+}} : !llvm.ptr) {zynml.blocks_per_multiprocessor = 1 : i64, zynml.problem = "{{[^"]*}}", zynml.strategy = "attention_wgmma"}
// CHECK: gpu.func @k0_attention_wgmma({{%[a-z0-9_]+}}: memref<1x2x20x64xf16>, [[KM:%[a-z0-9_]+]]: memref<20x20xi8>, {{%[a-z0-9_]+}}: !llvm.ptr, {{%[a-z0-9_]+}}: !llvm.ptr, {{%[a-z0-9_]+}}: !llvm.ptr) kernel attributes {known_block_size = array<i32: 384, 1, 1>}
// CHECK: nvvm.setmaxregister increase 232
// CHECK: scf.for {{.*}} -> (f32, f32, f32, f32, f32,
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-COUNT-32: vector.load [[KM]][{{%[0-9]+}}, {{%[0-9]+}}] {alignment = 2 : i64} : memref<20x20xi8>, vector<2xi8>
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK-COUNT-64: arith.select {{%[0-9]+}}, {{%[0-9]+}}, %cst{{(_[0-9]+)?}} : f32
// CHECK: scf.if {{.*}} -> (f32, f32,
// CHECK: gpu.shuffle xor
// CHECK: arith.cmpf oeq
// CHECK: math.exp2
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// CHECK: arith.cmpf ogt
// CHECK: vector.store {{.*}} : memref<1x2x20x64xf16>, vector<2xf16>
// SM80-LABEL: func.func @attention_f16_wgmma_masked(
// SM80-NOT: nvgpu.tma
// SM80: {zynml.problem = "{{[^"]*}}", zynml.strategy = "attention_tensor_core"}
// FORCE-LABEL: func.func @attention_f16_wgmma_masked(
// FORCE-COUNT-7: {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map2 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#map6 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map7 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#map8 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#map9 = affine_map<(d0, d1, d2, d3, d4) -> (d2, d4)>
func.func @attention_f16_wgmma_masked(%arg0: memref<1x2x20x64xf16>, %arg1: memref<1x2x20x64xf16>, %arg2: memref<1x2x20x64xf16>, %arg3: memref<20x20xi1>) -> memref<1x2x20x64xf16> {
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %cst_1 = arith.constant 1.250000e-01 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x20xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<1x2x20x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : memref<1x2x20x64xf16>, memref<1x2x20x64xf16>) outs(%alloc : memref<1x2x20x20xf32>) {
  ^bb0(%in: f16, %in_6: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.mulf %0, %cst_1 : f32
    %2 = arith.extf %in_6 : f16 to f32
    %3 = arith.mulf %1, %2 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  }
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20xf32>
  %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_3 : memref<1x2x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst : f32
  }
  linalg.generic {indexing_maps = [#map, #map5, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_max"} ins(%alloc, %arg3 : memref<1x2x20x20xf32>, memref<20x20xi1>) outs(%alloc_3 : memref<1x2x20xf32>) {
  ^bb0(%in: f32, %in_6: i1, %out: f32):
    %0 = arith.select %in_6, %in, %cst : f32
    %1 = arith.maximumf %out, %0 : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_2 : memref<1x2x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map6, #map5, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_sum"} ins(%alloc, %alloc_3, %arg3 : memref<1x2x20x20xf32>, memref<1x2x20xf32>, memref<20x20xi1>) outs(%alloc_2 : memref<1x2x20xf32>) {
  ^bb0(%in: f32, %in_6: f32, %in_7: i1, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.select %in_7, %1, %cst_0 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x64xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc_4 : memref<1x2x20x64xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map7, #map7, #map8, #map9, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc, %alloc_3, %alloc_2, %arg2, %arg3 : memref<1x2x20x20xf32>, memref<1x2x20xf32>, memref<1x2x20xf32>, memref<1x2x20x64xf16>, memref<20x20xi1>) outs(%alloc_4 : memref<1x2x20x64xf32>) {
  ^bb0(%in: f32, %in_6: f32, %in_7: f32, %in_8: f16, %in_9: i1, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.divf %1, %in_7 : f32
    %3 = arith.extf %in_8 : f16 to f32
    %4 = arith.mulf %2, %3 : f32
    %5 = arith.select %in_9, %4, %cst_0 : f32
    %6 = arith.addf %out, %5 : f32
    linalg.yield %6 : f32
  }
  %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x64xf16>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"], library_call = "zynml_attention_round"} ins(%alloc_4 : memref<1x2x20x64xf32>) outs(%alloc_5 : memref<1x2x20x64xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  return %alloc_5 : memref<1x2x20x64xf16>
}

// -----

// Causal f16 attention (causal_offset = 0, 200 queries and keys, head dim 64) on sm_90a:
// attention_wgmma with tile skipping. Work items are numbered heaviest first (item b:
// row block 1 - b / 2, head b % 2), a block each (not persistent: the GPU's block
// scheduler balances their unequal work, so no run-time cap), and row block x's key
// tiles end at ceil(min(128x + 128, 200) / 128): the same bound, computed per item, for
// the copying thread and the warpgroups (every slot filled is consumed). A tile whose
// last key lies past the warp's first row (or the last tile, past key 199) compares each
// key with min(row, 199).
// CHECK-LABEL: func.func @causal_attention_f16_wgmma(
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_wgmma blocks in (%c4, %c1, %c1{{(_[0-9]+)?}}) threads in (%c384, {{.*}}) dynamic_shared_memory_size %c115712_i32 args({{%[a-z0-9_]+}} : memref<1x2x200x64xf16>, {{%[0-9]+}} : !llvm.ptr, {{%[0-9]+}} : !llvm.ptr, {{%[0-9]+}} : !llvm.ptr) {zynml.problem = "{{[^"]*}}", zynml.strategy = "attention_wgmma"}
// CHECK: gpu.func @k0_attention_wgmma(
// CHECK: [[BLOCK:%[a-z0-9_]+]] = gpu.block_id x
// CHECK-NEXT: [[GRID:%[a-z0-9_]+]] = gpu.grid_dim x
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: scf.for [[LOCAL:%[a-z0-9_]+]] = {{.*}} -> (index) {
// CHECK-NEXT: [[STRIDE:%[0-9]+]] = arith.muli [[LOCAL]], [[GRID]] : index
// CHECK-NEXT: [[ITEM:%[0-9]+]] = arith.addi [[BLOCK]], [[STRIDE]] : index
// CHECK: [[HALF:%[0-9]+]] = arith.divui [[ITEM]], %c2{{(_[0-9]+)?}} : index
// CHECK-NEXT: [[RB:%[0-9]+]] = arith.subi %c1{{(_[0-9]+)?}}, [[HALF]] : index
// CHECK: [[ROW0:%[0-9]+]] = arith.muli [[RB]], %c128{{(_[0-9]+)?}} : index
// CHECK: [[PAST:%[0-9]+]] = arith.addi [[ROW0]], %c128{{(_[0-9]+)?}} : index
// CHECK: [[END:%[0-9]+]] = arith.minsi [[PAST]], %c200 : index
// CHECK: [[UP:%[0-9]+]] = arith.addi [[END]], %c127{{(_[0-9]+)?}} : index
// CHECK: [[TILES:%[0-9]+]] = arith.divui [[UP]], %c128{{(_[0-9]+)?}} : index
// CHECK: scf.for {{%[a-z0-9_]+}} = {{%[a-z0-9_]+}} to [[TILES]] step
// CHECK: nvgpu.tma.async.load
// CHECK: nvvm.setmaxregister increase 232
// CHECK: scf.for {{.*}} -> (index) {
// CHECK: [[END2:%[0-9]+]] = arith.minsi {{%[0-9]+}}, %c200 : index
// CHECK: [[UP2:%[0-9]+]] = arith.addi [[END2]], %c127{{(_[0-9]+)?}} : index
// CHECK: [[TILES2:%[0-9]+]] = arith.divui [[UP2]], %c128{{(_[0-9]+)?}} : index
// CHECK: scf.for {{%[a-z0-9_]+}} = {{%[a-z0-9_]+}} to [[TILES2]] step {{.*}} -> (f32, f32,
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: [[LAST:%[0-9]+]] = arith.cmpi eq, {{%[a-z0-9_]+}}, %c1{{(_[0-9]+)?}} : index
// CHECK: [[DIAGONAL:%[0-9]+]] = arith.cmpi sgt,
// CHECK: [[CHECK:%[0-9]+]] = arith.ori [[LAST]], [[DIAGONAL]] : i1
// CHECK: scf.if [[CHECK]] -> (f32, f32,
// CHECK: arith.minsi {{%[0-9]+}}, %c199{{(_[0-9]+)?}} : index
// CHECK: arith.cmpi sle, %c0{{(_[0-9]+)?}}, {{%[0-9]+}} : index
// CHECK: } else {
// CHECK: math.exp2
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// CHECK: vector.store {{.*}} : memref<1x2x200x64xf16>, vector<2xf16>
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map2 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map6 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#map7 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
func.func @causal_attention_f16_wgmma(%arg0: memref<1x2x200x64xf16>, %arg1: memref<1x2x200x64xf16>, %arg2: memref<1x2x200x64xf16>) -> memref<1x2x200x64xf16> {
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %cst_1 = arith.constant 1.250000e-01 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x2x200x200xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<1x2x200x200xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : memref<1x2x200x64xf16>, memref<1x2x200x64xf16>) outs(%alloc : memref<1x2x200x200xf32>) {
  ^bb0(%in: f16, %in_6: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.mulf %0, %cst_1 : f32
    %2 = arith.extf %in_6 : f16 to f32
    %3 = arith.mulf %1, %2 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  }
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x2x200xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_2 : memref<1x2x200xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst : f32
  }
  linalg.generic {indexing_maps = [#map, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_max"} ins(%alloc : memref<1x2x200x200xf32>) outs(%alloc_2 : memref<1x2x200xf32>) attrs =  {zynml.causal_offset = 0 : i64} {
  ^bb0(%in: f32, %out: f32):
    %0 = linalg.index 2 : index
    %1 = linalg.index 3 : index
    %2 = arith.cmpi sle, %1, %0 : index
    %3 = arith.select %2, %in, %cst : f32
    %4 = arith.maximumf %out, %3 : f32
    linalg.yield %4 : f32
  }
  %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x2x200xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_3 : memref<1x2x200xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map5, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_sum"} ins(%alloc, %alloc_2 : memref<1x2x200x200xf32>, memref<1x2x200xf32>) outs(%alloc_3 : memref<1x2x200xf32>) attrs =  {zynml.causal_offset = 0 : i64} {
  ^bb0(%in: f32, %in_6: f32, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = linalg.index 2 : index
    %3 = linalg.index 3 : index
    %4 = arith.cmpi sle, %3, %2 : index
    %5 = arith.select %4, %1, %cst_0 : f32
    %6 = arith.addf %out, %5 : f32
    linalg.yield %6 : f32
  }
  %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x2x200x64xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc_4 : memref<1x2x200x64xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map6, #map6, #map7, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc, %alloc_2, %alloc_3, %arg2 : memref<1x2x200x200xf32>, memref<1x2x200xf32>, memref<1x2x200xf32>, memref<1x2x200x64xf16>) outs(%alloc_4 : memref<1x2x200x64xf32>) attrs =  {zynml.causal_offset = 0 : i64} {
  ^bb0(%in: f32, %in_6: f32, %in_7: f32, %in_8: f16, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.divf %1, %in_7 : f32
    %3 = arith.extf %in_8 : f16 to f32
    %4 = arith.mulf %2, %3 : f32
    %5 = linalg.index 2 : index
    %6 = linalg.index 4 : index
    %7 = arith.cmpi sle, %6, %5 : index
    %8 = arith.select %7, %4, %cst_0 : f32
    %9 = arith.addf %out, %8 : f32
    linalg.yield %9 : f32
  }
  %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<1x2x200x64xf16>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"], library_call = "zynml_attention_round"} ins(%alloc_4 : memref<1x2x200x64xf32>) outs(%alloc_5 : memref<1x2x200x64xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  return %alloc_5 : memref<1x2x200x64xf16>
}

// -----

// An f32 attention's generics (scores, max, sum, out; 2 heads of 20 queries and keys,
// head dim 16, a bool mask) take attention_simt_tiled: one kernel of 256 threads per 64
// query rows and head, 16 lanes per row (4 rows x 4 keys of S per thread), its tiles
// views of dynamic shared memory (Q 64x20, K 64x20 and P 64x68 with rows padded by 4
// floats; V 64x64; O / l over them at the end). Q's rows, scaled, are stored once; K and
// V tiles of 64 keys follow by cp.async (16 bytes, zero-filled past key 20), K tile j + 1
// in flight during P V of tile j, V tile j during its scores. S = Q K^T: 4 + 4 16-byte
// shared reads for 64 FMAs per 4 dims; the mask read per score; each row's max across
// its 16 lanes by shuffles (xor 1, 2, 4, 8); exp2; P through shared memory; O += P V as
// another micro-tiled product; the rows' sums meet at the end; O / l goes through shared
// memory to 16-byte stores of the rows that exist. No TF32, no tensor cores.
// CHECK-LABEL: func.func @attention_f32(
// CHECK-SAME: [[Q:%[a-z0-9_]+]]: memref<1x2x20x16xf32>, [[K:%[a-z0-9_]+]]: memref<1x2x20x16xf32>, [[V:%[a-z0-9_]+]]: memref<1x2x20x16xf32>, [[M:%[a-z0-9_]+]]: memref<20x20xi1>)
// CHECK-NOT: memref.alloc() {{.*}} : memref<1x2x20x20xf32>
// CHECK-NOT: memref.alloc() {{.*}} : memref<1x2x20xf32>
// CHECK-DAG: [[M8:%[0-9]+]] = builtin.unrealized_conversion_cast [[M]] : memref<20x20xi1> to memref<20x20xi8>
// CHECK-DAG: [[O:%[a-z0-9_]+]] = memref.alloc() {{.*}} : memref<1x2x20x16xf32>
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_simt_tiled blocks in (%c1{{(_[0-9]+)?}}, %c2{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c256, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c44032_i32 args([[Q]] : memref<1x2x20x16xf32>, [[K]] : memref<1x2x20x16xf32>, [[V]] : memref<1x2x20x16xf32>, [[M8]] : memref<20x20xi8>, [[O]] : memref<1x2x20x16xf32>) {zynml.problem = "{{[^"]*}}", zynml.strategy = "attention_simt_tiled"}
// CHECK-NEXT: return [[O]]
// CHECK: gpu.func @k0_attention_simt_tiled([[KQ:%[a-z0-9_]+]]: memref<1x2x20x16xf32>, [[KK:%[a-z0-9_]+]]: memref<1x2x20x16xf32>, [[KV:%[a-z0-9_]+]]: memref<1x2x20x16xf32>, [[KM:%[a-z0-9_]+]]: memref<20x20xi8>, [[KO:%[a-z0-9_]+]]: memref<1x2x20x16xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK: [[SHM:%[0-9]+]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: [[QT:%view[_0-9]*]] = memref.view [[SHM]][{{.*}}][] : {{.*}} to memref<64x20xf32, #gpu.address_space<workgroup>>
// CHECK: [[KT:%view[_0-9]*]] = memref.view [[SHM]][{{.*}}][] : {{.*}} to memref<64x20xf32, #gpu.address_space<workgroup>>
// CHECK: [[VT:%view[_0-9]*]] = memref.view [[SHM]][{{.*}}][] : {{.*}} to memref<64x64xf32, #gpu.address_space<workgroup>>
// CHECK: [[PT:%view[_0-9]*]] = memref.view [[SHM]][{{.*}}][] : {{.*}} to memref<64x68xf32, #gpu.address_space<workgroup>>
// CHECK: [[OT:%view[_0-9]*]] = memref.view [[SHM]][%c0{{(_[0-9]+)?}}][] : {{.*}} to memref<64x68xf32, #gpu.address_space<workgroup>>
// CHECK: vector.load [[KQ]][{{.*}}] {alignment = 16 : i64} : memref<1x2x20x16xf32>, vector<4xf32>
// CHECK-NEXT: vector.broadcast
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: vector.store {{.*}}, [[QT]][{{.*}}] : memref<64x20xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: nvgpu.device_async_copy [[KK]][{{.*}}], [[KT]][{{.*}}], 4, {{%[0-9]+}} {bypassL1}
// CHECK-NEXT: [[FIRST:%[0-9]+]] = nvgpu.device_async_create_group
// CHECK: scf.for {{.*}} iter_args([[TOKEN:%[a-z0-9_]+]] = [[FIRST]], {{.*}}) -> (!nvgpu.device.async.token, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK: nvgpu.device_async_wait [[TOKEN]] {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy [[KV]][{{.*}}], [[VT]][{{.*}}], 4, {{%[0-9]+}} {bypassL1}
// CHECK-NEXT: [[VTOKEN:%[0-9]+]] = nvgpu.device_async_create_group
// CHECK-COUNT-4: vector.load [[QT]][{{.*}}] {alignment = 16 : i64} : memref<64x20xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-4: vector.load [[KT]][{{.*}}] {alignment = 16 : i64} : memref<64x20xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-64: math.fma
// CHECK: memref.load [[KM]][
// CHECK: arith.maximumf
// CHECK: gpu.shuffle xor {{.*}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32
// CHECK-NEXT: arith.maximumf
// CHECK: gpu.shuffle xor {{.*}}, %c2_i32{{(_[0-9]+)?}}, %c32_i32
// CHECK: gpu.shuffle xor {{.*}}, %c4_i32{{(_[0-9]+)?}}, %c32_i32
// CHECK: gpu.shuffle xor {{.*}}, %c8_i32{{(_[0-9]+)?}}, %c32_i32
// CHECK: math.exp2
// CHECK: memref.store {{.*}}, [[PT]][
// CHECK: nvgpu.device_async_wait [[VTOKEN]] {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if {{.*}} -> (!nvgpu.device.async.token) {
// CHECK: nvgpu.device_async_copy [[KK]][{{.*}}], [[KT]][{{.*}}]
// CHECK: } else {
// CHECK-NEXT: scf.yield [[VTOKEN]] : !nvgpu.device.async.token
// CHECK-COUNT-4: vector.load [[PT]][{{.*}}] {alignment = 16 : i64}
// CHECK: vector.load [[VT]][{{.*}}] {alignment = 16 : i64}
// CHECK-COUNT-16: math.fma
// CHECK: scf.yield
// CHECK: nvgpu.device_async_wait
// CHECK-COUNT-16: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK: vector.store {{.*}}, [[OT]][{{.*}}] : memref<64x68xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: vector.load [[OT]][
// CHECK-NEXT: vector.store {{.*}}, [[KO]][{{.*}}] : memref<1x2x20x16xf32>, vector<4xf32>
// CHECK: gpu.return
// SM80-LABEL: func.func @attention_f32(
// SM80: {zynml.problem = "{{[^"]*}}", zynml.strategy = "attention_simt_tiled"}
// FORCE-LABEL: func.func @attention_f32(
// FORCE-COUNT-4: {zynml.problem = "{{[^"]*}}", zynml.strategy = "pointwise"}
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map2 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#map6 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map7 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#map8 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#map9 = affine_map<(d0, d1, d2, d3, d4) -> (d2, d4)>
func.func @attention_f32(%arg0: memref<1x2x20x16xf32>, %arg1: memref<1x2x20x16xf32>, %arg2: memref<1x2x20x16xf32>, %arg3: memref<20x20xi1>) -> memref<1x2x20x16xf32> {
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %cst_1 = arith.constant 2.500000e-01 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x20xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<1x2x20x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : memref<1x2x20x16xf32>, memref<1x2x20x16xf32>) outs(%alloc : memref<1x2x20x20xf32>) {
  ^bb0(%in: f32, %in_6: f32, %out: f32):
    %1 = arith.mulf %in, %cst_1 : f32
    %3 = arith.mulf %1, %in_6 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  }
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20xf32>
  %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_3 : memref<1x2x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst : f32
  }
  linalg.generic {indexing_maps = [#map, #map5, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_max"} ins(%alloc, %arg3 : memref<1x2x20x20xf32>, memref<20x20xi1>) outs(%alloc_3 : memref<1x2x20xf32>) {
  ^bb0(%in: f32, %in_6: i1, %out: f32):
    %0 = arith.select %in_6, %in, %cst : f32
    %1 = arith.maximumf %out, %0 : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_2 : memref<1x2x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map6, #map5, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_sum"} ins(%alloc, %alloc_3, %arg3 : memref<1x2x20x20xf32>, memref<1x2x20xf32>, memref<20x20xi1>) outs(%alloc_2 : memref<1x2x20xf32>) {
  ^bb0(%in: f32, %in_6: f32, %in_7: i1, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.select %in_7, %1, %cst_0 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x16xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc_4 : memref<1x2x20x16xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map7, #map7, #map8, #map9, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc, %alloc_3, %alloc_2, %arg2, %arg3 : memref<1x2x20x20xf32>, memref<1x2x20xf32>, memref<1x2x20xf32>, memref<1x2x20x16xf32>, memref<20x20xi1>) outs(%alloc_4 : memref<1x2x20x16xf32>) {
  ^bb0(%in: f32, %in_6: f32, %in_7: f32, %in_8: f32, %in_9: i1, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.divf %1, %in_7 : f32
    %4 = arith.mulf %2, %in_8 : f32
    %5 = arith.select %in_9, %4, %cst_0 : f32
    %6 = arith.addf %out, %5 : f32
    linalg.yield %6 : f32
  }
  return %alloc_4 : memref<1x2x20x16xf32>
}

// -----

// A scatter's call (zynml/backend/cuda/scatter.py) becomes a pointwise kernel of atomic
// adds, one thread per update; the copy of the updated input it works on becomes the
// input itself (zynml/backend/cuda/inplace.py: `mut grad_w` written where it is).
// CHECK-LABEL: func.func @main(
// CHECK-SAME: [[W:%[a-z0-9_]+]]: memref<7x5xf32>, [[IDS:%[a-z0-9_]+]]: memref<13x1xi64>, [[G:%[a-z0-9_]+]]: memref<13x5xf32>)
// CHECK-NOT: memref.copy
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} args([[G]] : memref<13x5xf32>, [[IDS]] : memref<13x1xi64>, [[W]] : memref<7x5xf32>)
// CHECK: return [[W]] : memref<7x5xf32>
// CHECK-NOT: __zynml_scatter_add
// CHECK: gpu.func @k0_pointwise(
// CHECK: memref.atomic_rmw addf
// FORCE-LABEL: func.func @main(
// FORCE: gpu.launch_func @zynml_kernels::@k0_pointwise
func.func @main(%w: memref<7x5xf32>, %ids: memref<13x1xi64>, %g: memref<13x5xf32>)
    -> memref<7x5xf32> attributes {zynml.inputs = ["grad_w", "ids", "g"], zynml.outputs = ["grad_w"], cir.mutated = ["grad_w"]} {
  %a = memref.alloc() {alignment = 64 : i64} : memref<7x5xf32>
  memref.copy %w, %a : memref<7x5xf32> to memref<7x5xf32>
  %r = call @__zynml_scatter_add_d1_0(%g, %ids, %a) : (memref<13x5xf32>, memref<13x1xi64>, memref<7x5xf32>) -> memref<7x5xf32>
  return %r : memref<7x5xf32>
}
func.func private @__zynml_scatter_add_d1_0(memref<13x5xf32>, memref<13x1xi64>, memref<7x5xf32>) -> memref<7x5xf32> attributes {zynml.scatter}
// -----

// An input the program writes whole and never reads (`compute(parts, mut total)`, a sum
// over parts): its output is the input itself whatever kernel writes it. An output
// named like an input the program does not update (`let x = ...` over a parameter x:
// not in cir.mutated) keeps a buffer of its own.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: [[PARTS:%[a-z0-9_]+]]: memref<3x37xf32>, [[TOTAL:%[a-z0-9_]+]]: memref<37xf32>)
// CHECK-NOT: memref.alloc
// CHECK: gpu.launch_func @zynml_kernels::@k0_{{.*}} args([[PARTS]] : memref<3x37xf32>, [[TOTAL]] : memref<37xf32>)
// CHECK: return [[TOTAL]] : memref<37xf32>
#sum_parts = affine_map<(d0, d1) -> (d1, d0)>
#sum_total = affine_map<(d0, d1) -> (d0)>
#sum_total1 = affine_map<(d0) -> (d0)>
func.func @main(%parts: memref<3x37xf32>, %total: memref<37xf32>) -> memref<37xf32>
    attributes {zynml.inputs = ["parts", "total"], zynml.outputs = ["total"], cir.mutated = ["total"]} {
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() {alignment = 64 : i64} : memref<37xf32>
  linalg.generic {indexing_maps = [#sum_total1], iterator_types = ["parallel"]} outs(%a : memref<37xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#sum_parts, #sum_total], iterator_types = ["parallel", "reduction"]}
      ins(%parts : memref<3x37xf32>) outs(%a : memref<37xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return %a : memref<37xf32>
}
// -----

// CHECK-LABEL: func.func @main(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: memref<37xf32>, [[Y:%[a-z0-9_]+]]: memref<37xf32>)
// CHECK: [[NEW:%[a-z0-9_]+]] = memref.alloc
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise {{.*}} args([[Y]] : memref<37xf32>, [[NEW]] : memref<37xf32>)
// CHECK: return [[NEW]] : memref<37xf32>
#same = affine_map<(d0) -> (d0)>
func.func @main(%x: memref<37xf32>, %y: memref<37xf32>) -> memref<37xf32>
    attributes {zynml.inputs = ["x", "y"], zynml.outputs = ["x"]} {
  %a = memref.alloc() {alignment = 64 : i64} : memref<37xf32>
  linalg.generic {indexing_maps = [#same, #same], iterator_types = ["parallel"]}
      ins(%y : memref<37xf32>) outs(%a : memref<37xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.addf %in, %in : f32
    linalg.yield %d : f32
  }
  return %a : memref<37xf32>
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

// -----

// A row sum on tensors: rejected before any strategy looks at it (the strategies that
// take groups of generics read extents off memrefs; found by tests/cli/test_opt_fuzz.py,
// seed 7133, as an internal error).
#rows = affine_map<(d0, d1) -> (d0, d1)>
#first = affine_map<(d0, d1) -> (d0)>
func.func @row_sum_on_tensors(%x: tensor<5x3xf32>, %init: tensor<5xf32>) -> tensor<5xf32> {
  // expected-error@+1 {{linalg-to-gpu-kernels needs a bufferized module}}
  %r = linalg.generic {indexing_maps = [#rows, #first], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<5x3xf32>) outs(%init : tensor<5xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<5xf32>
  return %r : tensor<5xf32>
}
