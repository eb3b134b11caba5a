// linalg-to-gpu-kernels, pointwise's vector sums (pointwise_vector_sums.py): a reduction
// of many outputs along a contiguous axis (a column sum's first step: groups of 64 rows
// summed per column) takes 4 neighbouring outputs a thread (16 bytes of its f32 sums),
// reads them with one access per input and point, 16 points a trip of the sum, and
// stores them with one access; a lane at a time where a buffer is not aligned.
// RUN: zynml-opt %s --split-input-file --linalg-to-gpu-kernels | filecheck %s

// The fill before it is taken too: the sums start from 0, the output is not read.
// 32 x 768 / 4 = 6144 threads, in blocks of 64 (4 blocks a multiprocessor).
// CHECK-LABEL: func.func @column_sums_first_step(
// CHECK: gpu.launch_func @{{.*}}::@k0_pointwise blocks in (%c96, {{.*}}) threads in (%c64, {{.*}})
// CHECK-NOT: gpu.launch_func
// CHECK-LABEL: gpu.func @k0_pointwise(
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: arith.constant 0.000000e+00 : f32
// CHECK: scf.for %{{.*}} = %{{.*}} to %c64{{[_0-9]*}} step %c16{{[_0-9]*}} iter_args({{.*}}) -> (f32, f32, f32, f32)
// CHECK: scf.if %{{.*}} -> (bf16, bf16
// CHECK: vector.load {{.*}} : memref<32x64x768xbf16, #gpu.address_space<global>>, vector<4xbf16>
// CHECK: } else {
// CHECK: memref.load {{.*}} : memref<32x64x768xbf16>
// CHECK: scf.yield
// CHECK: vector.store {{.*}} : memref<32x768xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK-NOT: gpu.func
#in = affine_map<(g, j, c) -> (g, j, c)>
#out = affine_map<(g, j, c) -> (g, c)>
#fill = affine_map<(g, c) -> (g, c)>
func.func @column_sums_first_step(%x: memref<32x64x768xbf16>, %sums: memref<32x768xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#fill], iterator_types = ["parallel", "parallel"]}
      outs(%sums : memref<32x768xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#in, #out],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<32x64x768xbf16>) outs(%sums : memref<32x768xf32>) {
  ^bb0(%v: bf16, %acc: f32):
    %w = arith.extf %v : bf16 to f32
    %s = arith.addf %acc, %w : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A layer norm's parameter gradients' first step: two outputs (read first: no fill), the
// per-row mean and rstd read once a point beside the chunked x and grad; 37 points a
// sum: two trips of 16, then the last 5 one a trip.
// CHECK-LABEL: func.func @two_sums_per_row_values(
// CHECK: threads in (%c64, {{.*}})
// CHECK-LABEL: gpu.func @k0_pointwise(
// CHECK: vector.load {{.*}} : memref<24x768xf32, #gpu.address_space<global>>, vector<4xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %c32{{[_0-9]*}} step %c16{{[_0-9]*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK: scf.for %{{.*}} = %{{.*}} to %c37{{[_0-9]*}} step %c1{{[_0-9]*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK: memref.load {{.*}} : memref<24x37xf32>
// CHECK: vector.store {{.*}} : memref<24x768xf32, #gpu.address_space<global>>, vector<4xf32>
#x = affine_map<(g, c, j) -> (g, j, c)>
#row = affine_map<(g, c, j) -> (g, j)>
#out = affine_map<(g, c, j) -> (g, c)>
func.func @two_sums_per_row_values(%x: memref<24x37x768xbf16>, %grad: memref<24x37x768xbf16>,
                                   %mean: memref<24x37xf32>, %rstd: memref<24x37xf32>,
                                   %dw: memref<24x768xf32>, %db: memref<24x768xf32>) {
  linalg.generic {indexing_maps = [#x, #x, #row, #row, #out, #out],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %grad, %mean, %rstd : memref<24x37x768xbf16>, memref<24x37x768xbf16>,
                                    memref<24x37xf32>, memref<24x37xf32>)
      outs(%dw, %db : memref<24x768xf32>, memref<24x768xf32>) {
  ^bb0(%xv: bf16, %gv: bf16, %m: f32, %r: f32, %accw: f32, %accb: f32):
    %xf = arith.extf %xv : bf16 to f32
    %gf = arith.extf %gv : bf16 to f32
    %c = arith.subf %xf, %m : f32
    %p = arith.mulf %gf, %c : f32
    %q = arith.mulf %p, %r : f32
    %sw = arith.addf %accw, %q : f32
    %sb = arith.addf %accb, %gf : f32
    linalg.yield %sw, %sb : f32, f32
  }
  return
}

// -----

// 97 columns are not whole chunks of 4: a thread per output.
// CHECK-LABEL: func.func @ragged_columns(
// CHECK: threads in (%c256, {{.*}})
// CHECK-NOT: vector.load
#in = affine_map<(g, j, c) -> (g, j, c)>
#out = affine_map<(g, j, c) -> (g, c)>
func.func @ragged_columns(%x: memref<200x64x97xf32>, %sums: memref<200x97xf32>) {
  linalg.generic {indexing_maps = [#in, #out],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<200x64x97xf32>) outs(%sums : memref<200x97xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Run-time extents: the columns checked for whole chunks of 4 at run time (else a
// thread's 4 single outputs, the grid's threads apart), the rows read 16 a trip and the
// last rows % 16 one a trip, the strides only run time knows checked with the alignment.
// CHECK-LABEL: func.func @run_time_sizes(
// CHECK: threads in (%c256{{[_0-9]*}}, {{.*}})
// CHECK-LABEL: gpu.func @k0_pointwise(
// CHECK: arith.remui %{{.*}}, %c4{{[_0-9]*}}
// CHECK: scf.if
// CHECK: memref.extract_strided_metadata
// CHECK: scf.for %{{.*}} step %c16{{[_0-9]*}} iter_args({{.*}}) -> (f32, f32, f32, f32)
// CHECK: vector.load {{.*}} vector<4xf32>
// CHECK: scf.for %{{.*}} step %c1{{[_0-9]*}} iter_args({{.*}}) -> (f32, f32, f32, f32)
// CHECK: vector.store {{.*}} vector<4xf32>
// CHECK: } else {
// CHECK: gpu.grid_dim x
// CHECK: scf.for
#in = affine_map<(g, j, c) -> (g, j, c)>
#out = affine_map<(g, j, c) -> (g, c)>
func.func @run_time_sizes(%x: memref<?x?x?xf32>, %sums: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#in, #out],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<?x?x?xf32>) outs(%sums : memref<?x?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Two outputs that fills of one constant wrote just before: one kernel, both sums start
// from it; fills of two constants stay kernels of their own.
// CHECK-LABEL: func.func @two_filled_sums(
// CHECK: gpu.launch_func @{{.*}}::@k0_pointwise
// CHECK-NOT: gpu.launch_func
// CHECK-LABEL: func.func @two_constants(
// CHECK-COUNT-3: gpu.launch_func
// CHECK-LABEL: gpu.func @k0_pointwise(
// CHECK: arith.constant 0.000000e+00 : f32
// CHECK: scf.for %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK-LABEL: gpu.func @k1_pointwise(
#in = affine_map<(g, j, c) -> (g, j, c)>
#out = affine_map<(g, j, c) -> (g, c)>
#fill = affine_map<(g, c) -> (g, c)>
func.func @two_filled_sums(%x: memref<32x64x768xf32>, %a: memref<32x768xf32>,
                           %b: memref<32x768xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#fill], iterator_types = ["parallel", "parallel"]}
      outs(%a : memref<32x768xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#fill], iterator_types = ["parallel", "parallel"]}
      outs(%b : memref<32x768xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#in, #out, #out],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<32x64x768xf32>) outs(%a, %b : memref<32x768xf32>, memref<32x768xf32>) {
  ^bb0(%v: f32, %sa: f32, %sb: f32):
    %s = arith.addf %sa, %v : f32
    %q = arith.mulf %v, %v : f32
    %t = arith.addf %sb, %q : f32
    linalg.yield %s, %t : f32, f32
  }
  return
}
func.func @two_constants(%x: memref<32x64x768xf32>, %a: memref<32x768xf32>,
                         %b: memref<32x768xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#fill], iterator_types = ["parallel", "parallel"]}
      outs(%a : memref<32x768xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#fill], iterator_types = ["parallel", "parallel"]}
      outs(%b : memref<32x768xf32>) {
  ^bb0(%o: f32):
    linalg.yield %one : f32
  }
  linalg.generic {indexing_maps = [#in, #out, #out],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<32x64x768xf32>) outs(%a, %b : memref<32x768xf32>, memref<32x768xf32>) {
  ^bb0(%v: f32, %sa: f32, %sb: f32):
    %s = arith.addf %sa, %v : f32
    %q = arith.mulf %v, %v : f32
    %t = arith.addf %sb, %q : f32
    linalg.yield %s, %t : f32, f32
  }
  return
}
