// linalg-to-gpu-kernels on run-time extents (`?` dimensions, what a shape-less or
// dynamic compile makes): pointwise, row_reduce, row_fused, matmul_wgmma and matmul
// take them (strategies/extents.py), reading each extent with memref.dim inside the
// kernel and computing the grid on the host from memref.dim of the operands; the other
// strategies are not offered them, so their generics fall back to those.
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --linalg-to-gpu-kernels | filecheck %s

// An elementwise map: one kernel for every n (pointwise_dynamic.py). When n % 4 == 0 a
// thread takes a 16-byte chunk (with the buffers' alignment checked, else scalar
// accesses of the same points); otherwise 4 points a grid's threads apart, each
// checked against n. The grid is ceil(ceil(n / 4) / 512), computed on the host.
// CHECK-LABEL: func.func @map
// CHECK: %[[N:.*]] = memref.dim %arg0, %c0 : memref<?xf32>
// CHECK: %[[CHUNKS:.*]] = arith.ceildivsi %[[N]], %c4 : index
// CHECK: %[[GRID:.*]] = arith.ceildivsi %[[CHUNKS]], %c512 : index
// CHECK: gpu.launch_func @zynml_kernels::@k0_pointwise blocks in (%[[GRID]], %c1, %{{.*}}) threads in (%c512{{.*}}, %c1{{.*}}, %c1{{.*}}) args(%arg0 : memref<?xf32>, %arg1 : memref<?xf32>) {zynml.problem = "df32_df32", zynml.strategy = "pointwise"}
// CHECK: gpu.func @k0_pointwise(%arg0: memref<?xf32>, %arg1: memref<?xf32>) kernel
// CHECK: %[[END:.*]] = memref.dim %arg0, %c0 : memref<?xf32>
// CHECK: %[[REST:.*]] = arith.remui %[[END]], %c4 : index
// CHECK: %[[DIVISIBLE:.*]] = arith.cmpi eq, %[[REST]], %c0{{.*}} : index
// CHECK: scf.if %[[DIVISIBLE]] {
// CHECK: memref.extract_aligned_pointer_as_index %arg0
// CHECK: vector.load {{.*}} vector<4xf32>
// CHECK-COUNT-4: math.exp
// CHECK: vector.store
// CHECK: } else {
// CHECK: gpu.grid_dim x
// CHECK-COUNT-4: arith.cmpi ult, %{{.*}}, %[[END]] : index
#id1 = affine_map<(d0) -> (d0)>
func.func @map(%x: memref<?xf32>, %y: memref<?xf32>) {
  linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%x : memref<?xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A map over the rows of a ?x? view (strides only run time knows): the chunk path also
// checks that the row stride is a multiple of 4 (memref.extract_strided_metadata).
// CHECK-LABEL: func.func @rows
// CHECK: gpu.func @k0_pointwise
// CHECK: memref.extract_strided_metadata %arg0
// CHECK: vector.load
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @rows(%x: memref<?x?xf32, strided<[?, 1]>>, %y: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x?xf32, strided<[?, 1]>>) outs(%y : memref<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = arith.negf %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A row sum of a ?x? matrix: a block per row (the grid: the rows, a host memref.dim), the
// block's threads striding over the run-time row length.
// CHECK-LABEL: func.func @row_sum
// CHECK: %[[ROWS:.*]] = memref.dim %arg0, %c0 : memref<?x?xf32>
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_reduce blocks in (%[[ROWS]], %c1{{.*}}, %c1{{.*}}) threads in (%c256, %c1{{.*}}, %c1{{.*}})
// CHECK: gpu.func @k0_row_reduce(%arg0: memref<?x?xf32>, %arg1: memref<?xf32>) kernel
// CHECK: %[[LEN:.*]] = memref.dim %arg0, %c1 : memref<?x?xf32>
// CHECK: scf.for %{{.*}} = %thread_id_x to %[[LEN]] step %c256
// CHECK: gpu.shuffle xor
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @row_sum(%m: memref<?x?xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%m : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A static row length (64) with run-time rows: row_reduce's block fits the row.
// CHECK-LABEL: func.func @static_rows
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_reduce blocks in (%dim, %c1{{.*}}, %c1{{.*}}) threads in (%c64, %c1{{.*}}, %c1{{.*}})
// CHECK: scf.for %{{.*}} = %thread_id_x to %c64 step %c64{{.*}}
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @static_rows(%m: memref<?x64xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%m : memref<?x64xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// An f32 matrix product of run-time sizes, C read first: `matmul`'s SIMT tiles, 128 x
// 128 of C a block, bounds-checked, so any size with K > 0 (the host's test; K = 0 is
// pointwise's): the grid is ceil(N / 128) x ceil(M / 128) on the host, and the kernel's
// loop over k runs to K read off A, in one of two versions: 16-byte reads where K and N
// are multiples of 4 and A and B start on 16 bytes, element by element otherwise.
// CHECK-LABEL: func.func @matmul
// CHECK: %[[M:.*]] = memref.dim %arg0, %c0 : memref<?x?xf32>
// CHECK: %[[N:.*]] = memref.dim %arg1, %c1 : memref<?x?xf32>
// CHECK: %[[K:.*]] = memref.dim %arg0, %c1{{.*}} : memref<?x?xf32>
// CHECK: %[[TN:.*]] = arith.ceildivsi %[[N]], %c128 : index
// CHECK: %[[TM:.*]] = arith.ceildivsi %[[M]], %c128{{.*}} : index
// CHECK: %[[SOME:.*]] = arith.cmpi ugt, %[[K]], %c0{{.*}} : index
// CHECK: scf.if %[[SOME]] {
// CHECK: gpu.launch_func @zynml_kernels::@k0_matmul blocks in (%[[TN]], %[[TM]], %c1{{.*}})
// CHECK: } else {
// CHECK: gpu.launch_func @zynml_kernels::@k1_pointwise
// CHECK: gpu.func @k0_matmul
// CHECK-DAG: %[[KM:.*]] = memref.dim %arg0, %c0{{.*}} : memref<?x?xf32>
// CHECK-DAG: %[[KK:.*]] = memref.dim %arg0, %c1{{.*}} : memref<?x?xf32>
// CHECK: memref.extract_aligned_pointer_as_index %arg0
// CHECK: memref.extract_aligned_pointer_as_index %arg1
// CHECK: scf.if
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[KK]] step %c8
// CHECK: vector.load {{.*}} vector<4xf32>
// CHECK: } else {
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[KK]] step %c8
// CHECK: arith.cmpi ult, %{{.*}}, %[[KM]] : index
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @matmul(%A: memref<?x?xf32>, %B: memref<?x?xf32>, %C: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<?x?xf32>, memref<?x?xf32>) outs(%C : memref<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}


// -----

// A bf16 product of run-time sizes into a zero-filled C: matmul_wgmma, fill fused, 128 x
// 256 tiles over ceil(M / 128) * ceil(N / 256) of them (TMA reads zeros past M, N, K and
// drops stores past M, N). TMA needs rows of 16-byte multiples, so the launch runs under
// a host test of N % 8, K % 8 and K > 0; the else branch runs the fill on pointwise
// and the product on `matmul`'s SIMT tiles. M and N are read off C, K off B (A may be a copy the kernel never
// makes), on the host and in the kernel.
// CHECK-LABEL: func.func @bf16_product
// CHECK: %[[M:.*]] = memref.dim %arg2, %c0 : memref<?x?xbf16>
// CHECK: %[[N:.*]] = memref.dim %arg2, %c1 : memref<?x?xbf16>
// CHECK: %[[K:.*]] = memref.dim %arg1, %c0{{.*}} : memref<?x?xbf16>
// CHECK: %[[TM:.*]] = arith.ceildivsi %[[M]], %c128 : index
// CHECK: %[[TN:.*]] = arith.ceildivsi %[[N]], %c256 : index
// CHECK: %[[GRID:.*]] = arith.muli %[[TM]], %[[TN]] : index
// CHECK: arith.remui %[[N]], %c8
// CHECK: arith.remui %[[K]], %c8
// CHECK: arith.cmpi ugt, %[[K]], %c0
// CHECK: arith.andi
// CHECK: %[[WHEN:.*]] = arith.andi
// CHECK: scf.if %[[WHEN]] {
// CHECK-COUNT-3: nvgpu.tma.create.descriptor
// CHECK: gpu.launch_func  @zynml_kernels::@k0_matmul_wgmma blocks in (%[[GRID]],
// CHECK: } else {
// CHECK: gpu.launch_func  @zynml_kernels::@k1_pointwise
// CHECK: gpu.launch_func  @zynml_kernels::@k2_matmul
// CHECK: gpu.func @k0_matmul_wgmma(%arg0: memref<?x?xbf16>, %arg1: memref<?x?xbf16>, %arg2: memref<?x?xbf16>
// CHECK-DAG: memref.dim %arg2, %c0{{.*}} : memref<?x?xbf16>
// CHECK-DAG: memref.dim %arg2, %c1{{.*}} : memref<?x?xbf16>
// CHECK-DAG: memref.dim %arg1, %c0{{.*}} : memref<?x?xbf16>
// CHECK: nvgpu.tma.async.load
// CHECK: nvgpu.tma.async.store
#pa = affine_map<(i, j, k) -> (i, k)>
#pb = affine_map<(i, j, k) -> (k, j)>
#pc = affine_map<(i, j, k) -> (i, j)>
func.func @bf16_product(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %c: memref<?x?xbf16>) {
  %zero = arith.constant 0.0 : bf16
  linalg.generic {indexing_maps = [affine_map<(i, j) -> ()>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%zero : bf16) outs(%c : memref<?x?xbf16>) {
  ^bb0(%z: bf16, %o: bf16):
    linalg.yield %z : bf16
  }
  linalg.generic {indexing_maps = [#pa, #pb, #pc], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x?xbf16>, memref<?x?xbf16>) outs(%c : memref<?x?xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  }
  return
}


// -----

// A row max and the map that uses it (softmax's first half), over a ?x? input read
// through a whole-input subview: the subview is folded into its source (the generics
// then read %arg0 itself), and row_fused takes the fill, the reduction and the map as
// one kernel, a block per row, the grid the rows. The row's length is known at run time
// only: kernels holding rows of up to 1024, 2048, 4096 and 8192 points in registers (4
// columns at a time) run where the length fits and is a multiple of 4, the tightest
// first, then the loops through memory, the only kernel that needs the row max in
// memory (allocated in its branch alone).
// CHECK-LABEL: func.func @softmax_rows
// CHECK-NOT: memref.subview
// CHECK: %[[FITS:.*]] = arith.cmpi ule, %[[LENGTH:.*]], %c1024 : index
// CHECK: %[[REST:.*]] = arith.remui %[[LENGTH]], %c4{{.*}} : index
// CHECK: %[[WHOLE:.*]] = arith.cmpi eq, %[[REST]], %c0{{.*}} : index
// CHECK: %[[SHORT:.*]] = arith.andi %[[FITS]], %[[WHOLE]] : i1
// CHECK: scf.if %[[SHORT]] {
// CHECK-NOT: memref.alloc
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_fused_upto1024 blocks in (%{{.*}}, %c1{{.*}}, %c1{{.*}}) threads in (%c256, %c1{{.*}}, %c1{{.*}}) args(%arg0 : memref<?x?xf32>, %alloc : memref<?x?xf32>)
// CHECK: } else {
// CHECK-NOT: memref.alloc
// CHECK: @k0_row_fused_upto2048
// CHECK-NOT: memref.alloc
// CHECK: @k0_row_fused_upto4096
// CHECK-NOT: memref.alloc
// CHECK: @k0_row_fused_upto8192
// CHECK: } else {
// CHECK: %[[MAX:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: gpu.launch_func @zynml_kernels::@k0_row_fused blocks in (%[[ROWS:.*]], %c1{{.*}}, %c1{{.*}}) threads in (%c256, %c1{{.*}}, %c1{{.*}}) args(%[[MAX]] : memref<?xf32>, %arg0 : memref<?x?xf32>, %alloc : memref<?x?xf32>) {zynml.problem = "df32_dxdf32_dxdf32", zynml.strategy = "row_fused"}
// CHECK: gpu.func @k0_row_fused(
// CHECK: memref.dim %arg1, %c1{{.*}} : memref<?x?xf32>
// CHECK: scf.for %{{.*}} = %thread_id_x{{.*}} to %dim{{.*}} step %c256
// CHECK: gpu.barrier
// CHECK: math.exp
// The register kernels (the longest bound's built first) guard each of a thread's
// chunks (two for 2048 points) against the run-time length, read 16 bytes at a time
// where the buffer is aligned, in straight-line code.
// CHECK: gpu.func @k0_row_fused_upto8192
// CHECK: gpu.func @k0_row_fused_upto4096
// CHECK: gpu.func @k0_row_fused_upto2048(%arg0: memref<?x?xf32>, %arg1: memref<?x?xf32>)
// CHECK: %[[COLS:.*]] = memref.dim %arg0, %c1{{.*}} : memref<?x?xf32>
// CHECK-COUNT-2: arith.cmpi ult, %{{.*}}, %[[COLS]] : index
// CHECK-NOT: scf.for
// CHECK: vector.load
// CHECK-NOT: scf.for
// CHECK: math.exp
// CHECK-NOT: scf.for
// CHECK: gpu.return
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#one = affine_map<(d0) -> (d0)>
func.func @softmax_rows(%x: memref<?x?xf32>) -> memref<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %ninf = arith.constant 0xFF800000 : f32
  %rows = memref.dim %x, %c0 : memref<?x?xf32>
  %cols = memref.dim %x, %c1 : memref<?x?xf32>
  %max = memref.alloc(%rows) : memref<?xf32>
  linalg.generic {indexing_maps = [#one], iterator_types = ["parallel"]} outs(%max : memref<?xf32>) {
  ^bb0(%o: f32):
    linalg.yield %ninf : f32
  }
  %whole = memref.subview %x[0, 0] [%rows, %cols] [1, 1] : memref<?x?xf32> to memref<?x?xf32, strided<[?, 1]>>
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%whole : memref<?x?xf32, strided<[?, 1]>>) outs(%max : memref<?xf32>) {
  ^bb0(%a: f32, %m: f32):
    %t = arith.maximumf %m, %a : f32
    linalg.yield %t : f32
  }
  %e = memref.alloc(%rows, %cols) : memref<?x?xf32>
  linalg.generic {indexing_maps = [#rows, #row, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%whole, %max : memref<?x?xf32, strided<[?, 1]>>, memref<?xf32>) outs(%e : memref<?x?xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %v = math.exp %d : f32
    linalg.yield %v : f32
  }
  return %e : memref<?x?xf32>
}

// -----

// The same product with elementwise work after it that writes a view of run-time
// strides: its rows need not be N long, which the host's test could not vouch for, so
// the epilogue is not fused into the wgmma kernel (C, a temporary, is stored; the
// epilogue runs on its own).
// CHECK-LABEL: func.func @bf16_product_into_a_strided_view
// CHECK: gpu.launch_func  @zynml_kernels::@k0_matmul_wgmma {{.*}} args(%arg0 : memref<?x?xbf16>, %arg1 : memref<?x?xbf16>, %alloc : memref<?x?xbf16>,
// CHECK: gpu.launch_func {{.*}}@zynml_kernels::@k{{[0-9]+}}_pointwise {{.*}} args(%alloc : memref<?x?xbf16>, %arg2 : memref<?x?xbf16, strided<[?, 1]>>)
#sa = affine_map<(i, j, k) -> (i, k)>
#sb = affine_map<(i, j, k) -> (k, j)>
#sc = affine_map<(i, j, k) -> (i, j)>
#s2 = affine_map<(i, j) -> (i, j)>
func.func @bf16_product_into_a_strided_view(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16, strided<[?, 1]>>) {
  %zero = arith.constant 0.0 : bf16
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = memref.dim %a, %c0 : memref<?x?xbf16>
  %n = memref.dim %b, %c1 : memref<?x?xbf16>
  %c = memref.alloc(%m, %n) : memref<?x?xbf16>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> ()>, #s2],
                  iterator_types = ["parallel", "parallel"]}
      ins(%zero : bf16) outs(%c : memref<?x?xbf16>) {
  ^bb0(%z: bf16, %o: bf16):
    linalg.yield %z : bf16
  }
  linalg.generic {indexing_maps = [#sa, #sb, #sc], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x?xbf16>, memref<?x?xbf16>) outs(%c : memref<?x?xbf16>) {
  ^bb0(%x: bf16, %w: bf16, %acc: bf16):
    %p = arith.mulf %x, %w : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  }
  linalg.generic {indexing_maps = [#s2, #s2], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<?x?xbf16>) outs(%y : memref<?x?xbf16, strided<[?, 1]>>) {
  ^bb0(%v: bf16, %o: bf16):
    %t = arith.negf %v : bf16
    linalg.yield %t : bf16
  }
  return
}
