// cir-to-linalg lowers each cir.compute to linalg on tensors, from the structure of its body
// (see passes/cir_to_linalg.py), and erases the body functions. Inputs are static, as
// after cir-shape-propagation. The GENERIC lines check named-ops=false (no linalg.matmul,
// linalg.batch_matmul or linalg.reduce: generics). The last chunks are bodies the pass
// rejects, each with a located error.
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --cir-to-linalg | filecheck %s
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --cir-to-linalg=named-ops=false | filecheck %s --check-prefix=GENERIC
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(cir-to-linalg{named-ops=false})' | filecheck %s --check-prefix=GENERIC
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --cir-to-linalg | zynml-opt --split-input-file | filecheck %s

// An elementwise body is one linalg.generic, every loop parallel, the load an input with
// the identity map; the body's scalar ops move into the region.
// CHECK-DAG: [[ID1:#[a-z0-9]+]] = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @relu(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<8xf32>) -> tensor<8xf32>
// CHECK: [[INIT:%[0-9]+]] = tensor.empty() : tensor<8xf32>
// CHECK: [[Y:%[0-9]+]] = linalg.generic {indexing_maps = {{\[}}[[ID1]], [[ID1]]], iterator_types = ["parallel"]} ins([[X]] : tensor<8xf32>) outs([[INIT]] : tensor<8xf32>) {
// CHECK-NEXT: ^bb0([[IN:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK: [[R:%[0-9]+]] = arith.maximumf [[IN]], %{{.*}} : f32
// CHECK-NEXT: linalg.yield [[R]] : f32
// CHECK: return [[Y]] : tensor<8xf32>
// CHECK-NOT: cir.
// CHECK-NOT: @relu_body
func.func @relu(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @relu_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @relu_body(%x: tensor<8xf32>, %n_arg: index, %out: tensor<8xf32>) attributes {cir.body} {
  %n = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %zero : f32
    "cir.store"(%r, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}

// -----

// Broadcasting: vector[j] in a 2-d nest is an input with map (d0, d1) -> (d1); still a
// single generic.
// CHECK-DAG: [[ID2:#[a-z0-9]+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: [[COL:#[a-z0-9]+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @broadcast(
// CHECK-SAME: [[M:%[a-z0-9_]+]]: tensor<4x8xf32>, [[V:%[a-z0-9_]+]]: tensor<8xf32>)
// CHECK: linalg.generic {indexing_maps = {{\[}}[[ID2]], [[COL]], [[ID2]]], iterator_types = ["parallel", "parallel"]} ins([[M]], [[V]] : tensor<4x8xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK-NEXT: ^bb0([[A:%[a-z0-9_]+]]: f32, [[B:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[P:%[0-9]+]] = arith.mulf [[A]], [[B]] : f32
// CHECK-NEXT: linalg.yield [[P]] : f32
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @broadcast(%m: tensor<4x8xf32>, %v: tensor<8xf32>) -> tensor<4x8xf32> {
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%m, %v, %c4, %c8) {kind = "elementwise", body = @scaled_body, broadcast = {v = 1 : i64},
      out_dims = array<i64: 2, 3>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4x8xf32>, tensor<8xf32>, index, index) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func private @scaled_body(%m: tensor<4x8xf32>, %v: tensor<8xf32>, %rows_arg: index, %cols_arg: index,
                               %out: tensor<4x8xf32>) attributes {cir.body} {
  %rows = arith.constant 4 : index  // as cir-shape-propagation leaves it
  %cols = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %rows step %c1 {
    scf.for %j = %c0 to %cols step %c1 {
      %a = "cir.load"(%m, %i, %j) : (tensor<4x8xf32>, index, index) -> f32
      %b = "cir.load"(%v, %j) : (tensor<8xf32>, index) -> f32
      %p = arith.mulf %a, %b : f32
      "cir.store"(%p, %out, %i, %j) : (f32, tensor<4x8xf32>, index, index) -> ()
    }
  }
  return
}

// -----

// out[i, j] = sum_k A[i, k] * B[k, j] is linalg.matmul on a zero-filled init; with
// named-ops=false, a generic with a reduction loop.
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: tensor<4x8xf32>, [[B:%[a-z0-9_]+]]: tensor<8x16xf32>)
// CHECK: [[ZERO:%[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK: [[EMPTY:%[0-9]+]] = tensor.empty() : tensor<4x16xf32>
// CHECK: [[INIT:%[0-9]+]] = linalg.fill ins([[ZERO]] : f32) outs([[EMPTY]] : tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK: linalg.matmul ins([[A]], [[B]] : tensor<4x8xf32>, tensor<8x16xf32>) outs([[INIT]] : tensor<4x16xf32>) -> tensor<4x16xf32>
// GENERIC-DAG: [[MA:#[a-z0-9]+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// GENERIC-DAG: [[MB:#[a-z0-9]+]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// GENERIC-DAG: [[MC:#[a-z0-9]+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// GENERIC-LABEL: func.func @matmul(
// GENERIC-NOT: linalg.matmul
// GENERIC: linalg.generic {indexing_maps = {{\[}}[[MA]], [[MB]], [[MC]]], iterator_types = ["parallel", "parallel", "reduction"]}
// GENERIC-NEXT: ^bb0([[VA:%[a-z0-9_]+]]: f32, [[VB:%[a-z0-9_]+]]: f32, [[ACC:%[a-z0-9_]+]]: f32):
// GENERIC-NEXT: [[P:%[0-9]+]] = arith.mulf [[VA]], [[VB]] : f32
// GENERIC-NEXT: [[S:%[0-9]+]] = arith.addf [[ACC]], [[P]] : f32
// GENERIC-NEXT: linalg.yield [[S]] : f32
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c8 = arith.constant 8 : index
  %c = "cir.compute"(%a, %b, %c4, %c16, %c8) {kind = "matmul", body = @matmul_body,
      out_dims = array<i64: 2, 3>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4x8xf32>, tensor<8x16xf32>, index, index, index) -> tensor<4x16xf32>
  return %c : tensor<4x16xf32>
}
func.func private @matmul_body(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %m_arg: index, %n_arg: index, %k_arg: index,
                               %out: tensor<4x16xf32>) attributes {cir.body} {
  %m = arith.constant 4 : index  // as cir-shape-propagation leaves it
  %n = arith.constant 16 : index  // as cir-shape-propagation leaves it
  %k = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %m step %c1 {
    scf.for %j = %c0 to %n step %c1 {
      %sum = scf.for %kk = %c0 to %k step %c1 iter_args(%acc = %zero) -> (f32) {
        %x = "cir.load"(%a, %i, %kk) : (tensor<4x8xf32>, index, index) -> f32
        %y = "cir.load"(%b, %kk, %j) : (tensor<8x16xf32>, index, index) -> f32
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        scf.yield %s : f32
      }
      "cir.store"(%sum, %out, %i, %j) : (f32, tensor<4x16xf32>, index, index) -> ()
    }
  }
  return
}

// -----

// B given K-major, out[i, j] = sum_k A[i, k] * W[j, k] (a weight [N, K] as a layer keeps
// it), is linalg.matmul with its indexing maps: no transposed copy of W.
// CHECK-DAG: [[TA:#[a-z0-9]+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: [[TB:#[a-z0-9]+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: [[TC:#[a-z0-9]+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @matmul_k_major_b(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: tensor<4x8xf32>, [[W:%[a-z0-9_]+]]: tensor<16x8xf32>)
// CHECK: linalg.matmul indexing_maps = {{\[}}[[TA]], [[TB]], [[TC]]] ins([[A]], [[W]] : tensor<4x8xf32>, tensor<16x8xf32>)
// GENERIC-LABEL: func.func @matmul_k_major_b(
// GENERIC-NOT: linalg.matmul
func.func @matmul_k_major_b(%a: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c8 = arith.constant 8 : index
  %c = "cir.compute"(%a, %w, %c4, %c16, %c8) {kind = "matmul", body = @matmul_k_major_b_body,
      out_dims = array<i64: 2, 3>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4x8xf32>, tensor<16x8xf32>, index, index, index) -> tensor<4x16xf32>
  return %c : tensor<4x16xf32>
}
func.func private @matmul_k_major_b_body(%a: tensor<4x8xf32>, %w: tensor<16x8xf32>, %m_arg: index,
                                         %n_arg: index, %k_arg: index,
                                         %out: tensor<4x16xf32>) attributes {cir.body} {
  %m = arith.constant 4 : index
  %n = arith.constant 16 : index
  %k = arith.constant 8 : index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %m step %c1 {
    scf.for %j = %c0 to %n step %c1 {
      %sum = scf.for %kk = %c0 to %k step %c1 iter_args(%acc = %zero) -> (f32) {
        %x = "cir.load"(%a, %i, %kk) : (tensor<4x8xf32>, index, index) -> f32
        %y = "cir.load"(%w, %j, %kk) : (tensor<16x8xf32>, index, index) -> f32
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        scf.yield %s : f32
      }
      "cir.store"(%sum, %out, %i, %j) : (f32, tensor<4x16xf32>, index, index) -> ()
    }
  }
  return
}

// -----

// The batched form is linalg.batch_matmul.
// CHECK-LABEL: func.func @batch_matmul(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: tensor<2x4x8xf32>, [[B:%[a-z0-9_]+]]: tensor<2x8x16xf32>)
// CHECK: [[INIT:%[0-9]+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
// CHECK: linalg.batch_matmul ins([[A]], [[B]] : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs([[INIT]] : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
// GENERIC-LABEL: func.func @batch_matmul(
// GENERIC-NOT: linalg.batch_matmul
// GENERIC: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
func.func @batch_matmul(%a: tensor<2x4x8xf32>, %b: tensor<2x8x16xf32>) -> tensor<2x4x16xf32> {
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c8 = arith.constant 8 : index
  %c = "cir.compute"(%a, %b, %c2, %c4, %c16, %c8) {kind = "batched_matmul", body = @bmm_body,
      out_dims = array<i64: 2, 3, 4>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<2x4x8xf32>, tensor<2x8x16xf32>, index, index, index, index) -> tensor<2x4x16xf32>
  return %c : tensor<2x4x16xf32>
}
func.func private @bmm_body(%a: tensor<2x4x8xf32>, %b: tensor<2x8x16xf32>, %batch_arg: index, %m_arg: index,
                            %n_arg: index, %k_arg: index, %out: tensor<2x4x16xf32>) attributes {cir.body} {
  %batch = arith.constant 2 : index  // as cir-shape-propagation leaves it
  %m = arith.constant 4 : index  // as cir-shape-propagation leaves it
  %n = arith.constant 16 : index  // as cir-shape-propagation leaves it
  %k = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %bb = %c0 to %batch step %c1 {
    scf.for %i = %c0 to %m step %c1 {
      scf.for %j = %c0 to %n step %c1 {
        %sum = scf.for %kk = %c0 to %k step %c1 iter_args(%acc = %zero) -> (f32) {
          %x = "cir.load"(%a, %bb, %i, %kk) : (tensor<2x4x8xf32>, index, index, index) -> f32
          %y = "cir.load"(%b, %bb, %kk, %j) : (tensor<2x8x16xf32>, index, index, index) -> f32
          %p = arith.mulf %x, %y : f32
          %s = arith.addf %acc, %p : f32
          scf.yield %s : f32
        }
        "cir.store"(%sum, %out, %bb, %i, %j) : (f32, tensor<2x4x16xf32>, index, index, index) -> ()
      }
    }
  }
  return
}

// -----

// A projection by one weight matrix, C[b, s, j] = sum_k A[b, s, k] * W[k, j] (W has no
// batch dim), is one linalg.matmul of A's rows: collapse, matmul, expand.
// CHECK-LABEL: func.func @projection(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: tensor<2x3x5xf32>, [[W:%[a-z0-9_]+]]: tensor<5x7xf32>)
// CHECK: [[A2:%[a-z0-9_]+]] = tensor.collapse_shape [[A]] {{\[}}[0, 1], [2]] : tensor<2x3x5xf32> into tensor<6x5xf32>
// CHECK: [[P:%[0-9]+]] = linalg.matmul ins([[A2]], [[W]] : tensor<6x5xf32>, tensor<5x7xf32>) outs(%{{.*}} : tensor<6x7xf32>) -> tensor<6x7xf32>
// CHECK: tensor.expand_shape [[P]] {{\[}}[0, 1], [2]] output_shape [2, 3, 7] : tensor<6x7xf32> into tensor<2x3x7xf32>
// GENERIC-LABEL: func.func @projection(
// GENERIC-NOT: linalg.matmul
// GENERIC: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
func.func @projection(%a: tensor<2x3x5xf32>, %w: tensor<5x7xf32>) -> tensor<2x3x7xf32> {
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c7 = arith.constant 7 : index
  %c5 = arith.constant 5 : index
  %c = "cir.compute"(%a, %w, %c2, %c3, %c7, %c5) {kind = "matmul", body = @proj_body,
      out_dims = array<i64: 2, 3, 4>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<2x3x5xf32>, tensor<5x7xf32>, index, index, index, index) -> tensor<2x3x7xf32>
  return %c : tensor<2x3x7xf32>
}
func.func private @proj_body(%a: tensor<2x3x5xf32>, %w: tensor<5x7xf32>, %b_arg: index, %s_arg: index,
                             %n_arg: index, %k_arg: index, %out: tensor<2x3x7xf32>) attributes {cir.body} {
  %batch = arith.constant 2 : index  // as cir-shape-propagation leaves it
  %seq = arith.constant 3 : index  // as cir-shape-propagation leaves it
  %n = arith.constant 7 : index  // as cir-shape-propagation leaves it
  %k = arith.constant 5 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %bb = %c0 to %batch step %c1 {
    scf.for %s = %c0 to %seq step %c1 {
      scf.for %j = %c0 to %n step %c1 {
        %sum = scf.for %kk = %c0 to %k step %c1 iter_args(%acc = %zero) -> (f32) {
          %x = "cir.load"(%a, %bb, %s, %kk) : (tensor<2x3x5xf32>, index, index, index) -> f32
          %y = "cir.load"(%w, %kk, %j) : (tensor<5x7xf32>, index, index) -> f32
          %p = arith.mulf %x, %y : f32
          %t = arith.addf %acc, %p : f32
          scf.yield %t : f32
        }
        "cir.store"(%sum, %out, %bb, %s, %j) : (f32, tensor<2x3x7xf32>, index, index, index) -> ()
      }
    }
  }
  return
}

// -----

// reduce(+) of a plain load is linalg.reduce over a zero-filled rank-0 init; the scalar
// result is a tensor.extract.
// CHECK-LABEL: func.func @sum(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<16xf32>) -> f32
// CHECK: [[ZERO:%[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK: [[INIT:%[0-9]+]] = linalg.fill ins([[ZERO]] : f32) outs(%{{.*}} : tensor<f32>) -> tensor<f32>
// CHECK: [[RED:%[a-z0-9_]+]] = linalg.reduce { arith.addf } ins([[X]] : tensor<16xf32>) outs([[INIT]] : tensor<f32>) dimensions = [0]
// CHECK: [[S:%[a-z0-9_]+]] = tensor.extract [[RED]][] : tensor<f32>
// CHECK: return [[S]] : f32
func.func @sum(%x: tensor<16xf32>) -> f32 {
  %c16 = arith.constant 16 : index
  %r = "cir.compute"(%x, %c16) {kind = "reduce", reduce = "+", body = @sum_body,
      out_dims = array<i64>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<16xf32>, index) -> f32
  return %r : f32
}
func.func private @sum_body(%x: tensor<16xf32>, %n0_arg: index, %out: tensor<f32>) attributes {cir.body} {
  %n0 = arith.constant 16 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n0 step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<16xf32>, index) -> f32
    "cir.yield"(%v) : (f32) -> ()
  }
  return
}

// -----

// reduce(+, axis=1) reduces dimension 1 only: a tensor<4xf32> result.
// CHECK-LABEL: func.func @row_sums(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4xf32>
// CHECK: [[INIT:%[0-9]+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4xf32>) -> tensor<4xf32>
// CHECK: [[RED:%[a-z0-9_]+]] = linalg.reduce { arith.addf } ins([[X]] : tensor<4x8xf32>) outs([[INIT]] : tensor<4xf32>) dimensions = [1]
// CHECK: return [[RED]] : tensor<4xf32>
// GENERIC-DAG: [[ID:#[a-z0-9]+]] = affine_map<(d0, d1) -> (d0, d1)>
// GENERIC-DAG: [[ROW:#[a-z0-9]+]] = affine_map<(d0, d1) -> (d0)>
// GENERIC-LABEL: func.func @row_sums(
// GENERIC: linalg.generic {indexing_maps = {{\[}}[[ID]], [[ROW]]], iterator_types = ["parallel", "reduction"]}
func.func @row_sums(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %r = "cir.compute"(%x, %c4, %c8) {kind = "reduce", reduce = "+", axis = 1 : i64, body = @row_sums_body,
      out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4x8xf32>, index, index) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func private @row_sums_body(%x: tensor<4x8xf32>, %n0_arg: index, %n1_arg: index, %out: tensor<4xf32>) attributes {cir.body} {
  %n0 = arith.constant 4 : index  // as cir-shape-propagation leaves it
  %n1 = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n0 step %c1 {
    scf.for %j = %c0 to %n1 step %c1 {
      %v = "cir.load"(%x, %i, %j) : (tensor<4x8xf32>, index, index) -> f32
      "cir.yield"(%v) : (f32) -> ()
    }
  }
  return
}

// -----

// A yielded expression (data[i] * data[i]) is a reduction generic: the product and the
// accumulation in its region.
// CHECK-DAG: [[IN:#[a-z0-9]+]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: [[SCALAR:#[a-z0-9]+]] = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @sum_of_squares(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<16xf32>) -> f32
// CHECK: [[G:%[0-9]+]] = linalg.generic {indexing_maps = {{\[}}[[IN]], [[SCALAR]]], iterator_types = ["reduction"]} ins([[X]] : tensor<16xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK-NEXT: ^bb0([[V:%[a-z0-9_]+]]: f32, [[ACC:%[a-z0-9_]+]]: f32):
// CHECK-NEXT: [[SQ:%[0-9]+]] = arith.mulf [[V]], [[V]] : f32
// CHECK-NEXT: [[S:%[0-9]+]] = arith.addf [[ACC]], [[SQ]] : f32
// CHECK-NEXT: linalg.yield [[S]] : f32
// CHECK: tensor.extract [[G]][] : tensor<f32>
func.func @sum_of_squares(%x: tensor<16xf32>) -> f32 {
  %c16 = arith.constant 16 : index
  %r = "cir.compute"(%x, %c16) {kind = "reduce", reduce = "+", body = @sum_of_squares_body,
      out_dims = array<i64>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<16xf32>, index) -> f32
  return %r : f32
}
func.func private @sum_of_squares_body(%x: tensor<16xf32>, %n0_arg: index, %out: tensor<f32>) attributes {cir.body} {
  %n0 = arith.constant 16 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n0 step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<16xf32>, index) -> f32
    %sq = arith.mulf %v, %v : f32
    "cir.yield"(%sq) : (f32) -> ()
  }
  return
}

// -----

// argmax is one generic with two results (best value, its index): a strictly greater
// value or an equal one at a lower index wins, and a NaN beats any number (between NaNs
// the lower index wins: the first NaN, numpy's rule); the result is the index.
// CHECK-DAG: [[IN:#[a-z0-9]+]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: [[SCALAR:#[a-z0-9]+]] = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @argmax(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<16xf32>) -> i64
// CHECK-DAG: [[NEG_INF:%[a-z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: [[VALUES:%[0-9]+]] = linalg.fill ins([[NEG_INF]] : f32) outs(%{{.*}} : tensor<f32>) -> tensor<f32>
// CHECK-DAG: [[INDICES:%[0-9]+]] = linalg.fill ins(%{{.*}} : i64) outs(%{{.*}} : tensor<i64>) -> tensor<i64>
// CHECK: [[G:%[0-9]+]]:2 = linalg.generic {indexing_maps = {{\[}}[[IN]], [[SCALAR]], [[SCALAR]]], iterator_types = ["reduction"]} ins([[X]] : tensor<16xf32>) outs([[VALUES]], [[INDICES]] : tensor<f32>, tensor<i64>)
// CHECK-NEXT: ^bb0([[V:%[a-z0-9_]+]]: f32, [[BEST:%[a-z0-9_]+]]: f32, [[BEST_I:%[a-z0-9_]+]]: i64):
// CHECK-NEXT: [[I:%[0-9]+]] = linalg.index 0 : index
// CHECK-NEXT: [[I64:%[0-9]+]] = arith.index_cast [[I]] : index to i64
// CHECK-NEXT: [[LT:%[0-9]+]] = arith.cmpi slt, [[I64]], [[BEST_I]] : i64
// CHECK-NEXT: [[GT:%[0-9]+]] = arith.cmpf ogt, [[V]], [[BEST]] : f32
// CHECK-NEXT: [[EQ:%[0-9]+]] = arith.cmpf oeq, [[V]], [[BEST]] : f32
// CHECK-NEXT: [[TIE:%[0-9]+]] = arith.andi [[EQ]], [[LT]] : i1
// CHECK-NEXT: [[BETTER:%[0-9]+]] = arith.ori [[GT]], [[TIE]] : i1
// CHECK-NEXT: [[V_NAN:%[0-9]+]] = arith.cmpf uno, [[V]], [[V]] : f32
// CHECK-NEXT: [[BEST_NAN:%[0-9]+]] = arith.cmpf uno, [[BEST]], [[BEST]] : f32
// CHECK-NEXT: [[EARLIER_NAN:%[0-9]+]] = arith.andi [[V_NAN]], [[LT]] : i1
// CHECK-NEXT: [[NAN_OR_BETTER:%[0-9]+]] = arith.ori [[V_NAN]], [[BETTER]] : i1
// CHECK-NEXT: [[TAKE:%[0-9]+]] = arith.select [[BEST_NAN]], [[EARLIER_NAN]], [[NAN_OR_BETTER]] : i1
// CHECK-NEXT: [[NV:%[0-9]+]] = arith.select [[TAKE]], [[V]], [[BEST]] : f32
// CHECK-NEXT: [[NI:%[0-9]+]] = arith.select [[TAKE]], [[I64]], [[BEST_I]] : i64
// CHECK-NEXT: linalg.yield [[NV]], [[NI]] : f32, i64
// CHECK: [[R:%[a-z0-9_]+]] = tensor.extract [[G]]#1[] : tensor<i64>
// CHECK: return [[R]] : i64
func.func @argmax(%x: tensor<16xf32>) -> i64 {
  %c16 = arith.constant 16 : index
  %r = "cir.compute"(%x, %c16) {kind = "reduce", reduce = "argmax", body = @argmax_body,
      out_dims = array<i64>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<16xf32>, index) -> i64
  return %r : i64
}
func.func private @argmax_body(%x: tensor<16xf32>, %n0_arg: index, %out: tensor<i64>) attributes {cir.body} {
  %n0 = arith.constant 16 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n0 step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<16xf32>, index) -> f32
    "cir.yield"(%v, %i) : (f32, index) -> ()
  }
  return
}

// -----

// A data-dependent index x[idx[i]] is a gather: idx[i] is an input of the generic, and
// x is read with tensor.extract inside the region, at the index clamped into 0..15 (an
// index out of range reads the nearest element, never outside x).
// CHECK-LABEL: func.func @gather(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<16xf32>, [[IDX:%[a-z0-9_]+]]: tensor<4xi64>) -> tensor<4xf32>
// CHECK: linalg.generic {{.*}} ins([[IDX]] : tensor<4xi64>) outs(%{{.*}} : tensor<4xf32>)
// CHECK-NEXT: ^bb0([[J:%[a-z0-9_]+]]: i64, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[JI:%[0-9]+]] = arith.index_cast [[J]] : i64 to index
// CHECK-NEXT: [[C15:%[a-z0-9_]+]] = arith.constant 15 : index
// CHECK-NEXT: [[C0:%[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-NEXT: [[LO:%[0-9]+]] = arith.maxsi [[JI]], [[C0]] : index
// CHECK-NEXT: [[IN:%[0-9]+]] = arith.minsi [[LO]], [[C15]] : index
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = tensor.extract [[X]][[[IN]]] : tensor<16xf32>
// CHECK-NEXT: linalg.yield [[V]] : f32
func.func @gather(%x: tensor<16xf32>, %idx: tensor<4xi64>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %g = "cir.compute"(%x, %idx, %c4) {kind = "elementwise", body = @gather_body, out_dims = array<i64: 2>,
      operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<16xf32>, tensor<4xi64>, index) -> tensor<4xf32>
  return %g : tensor<4xf32>
}
func.func private @gather_body(%x: tensor<16xf32>, %idx: tensor<4xi64>, %n_arg: index, %out: tensor<4xf32>)
    attributes {cir.body} {
  %n = arith.constant 4 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %j = "cir.load"(%idx, %i) : (tensor<4xi64>, index) -> i64
    %ji = arith.index_cast %j : i64 to index
    %v = "cir.load"(%x, %ji) : (tensor<16xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

// A non-affine index x[i * i] has no indexing map: the generic has no inputs, recomputes
// the index from linalg.index and gathers with tensor.extract (unclamped: i * i stays in
// 0..9, inside x).
// CHECK-LABEL: func.func @square_index(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<16xf32>) -> tensor<4xf32>
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<4xf32>)
// CHECK-NEXT: ^bb0({{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[I:%[0-9]+]] = linalg.index 0 : index
// CHECK-NEXT: [[SQ:%[0-9]+]] = arith.muli [[I]], [[I]] : index
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = tensor.extract [[X]][[[SQ]]] : tensor<16xf32>
// CHECK-NEXT: linalg.yield [[V]] : f32
func.func @square_index(%x: tensor<16xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %h = "cir.compute"(%x, %c4) {kind = "elementwise", body = @square_index_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<16xf32>, index) -> tensor<4xf32>
  return %h : tensor<4xf32>
}
func.func private @square_index_body(%x: tensor<16xf32>, %n_arg: index, %out: tensor<4xf32>) attributes {cir.body} {
  %n = arith.constant 4 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %sq = arith.muli %i, %i : index
    %v = "cir.load"(%x, %sq) : (tensor<16xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

// A depthwise convolution: input[b, c, oh + kh, ow + kw] becomes the map
// (d0, ..., d5) -> (d0, d1, d2 + d4, d3 + d5), with kh and kw as reduction loops.
// CHECK-DAG: [[IMG:#[a-z0-9]+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 + d4, d3 + d5)>
// CHECK-DAG: [[KER:#[a-z0-9]+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d4, d5)>
// CHECK-DAG: [[OUT:#[a-z0-9]+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @depthwise(
// CHECK-SAME: [[I:%[a-z0-9_]+]]: tensor<1x2x6x6xf32>, [[K:%[a-z0-9_]+]]: tensor<2x3x3xf32>)
// CHECK: linalg.generic {indexing_maps = {{\[}}[[IMG]], [[KER]], [[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins([[I]], [[K]] : tensor<1x2x6x6xf32>, tensor<2x3x3xf32>) outs(%{{.*}} : tensor<1x2x4x4xf32>)
// CHECK: arith.mulf
// CHECK-NEXT: arith.addf
func.func @depthwise(%input: tensor<1x2x6x6xf32>, %kernel: tensor<2x3x3xf32>) -> tensor<1x2x4x4xf32> {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%input, %kernel, %c1, %c2, %c4, %c4, %c3, %c3) {kind = "conv2d_depthwise",
      body = @depthwise_body, out_dims = array<i64: 2, 3, 4, 5>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<1x2x6x6xf32>, tensor<2x3x3xf32>, index, index, index, index, index, index)
      -> tensor<1x2x4x4xf32>
  return %y : tensor<1x2x4x4xf32>
}
func.func private @depthwise_body(%input: tensor<1x2x6x6xf32>, %kernel: tensor<2x3x3xf32>,
    %batch_arg: index, %channels_arg: index, %out_h_arg: index, %out_w_arg: index, %kernel_h_arg: index, %kernel_w_arg: index,
    %out: tensor<1x2x4x4xf32>) attributes {cir.body} {
  %batch = arith.constant 1 : index  // as cir-shape-propagation leaves it
  %channels = arith.constant 2 : index  // as cir-shape-propagation leaves it
  %out_h = arith.constant 4 : index  // as cir-shape-propagation leaves it
  %out_w = arith.constant 4 : index  // as cir-shape-propagation leaves it
  %kernel_h = arith.constant 3 : index  // as cir-shape-propagation leaves it
  %kernel_w = arith.constant 3 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %b = %c0 to %batch step %c1 {
    scf.for %c = %c0 to %channels step %c1 {
      scf.for %oh = %c0 to %out_h step %c1 {
        scf.for %ow = %c0 to %out_w step %c1 {
          %sum = scf.for %kh = %c0 to %kernel_h step %c1 iter_args(%acc0 = %zero) -> (f32) {
            %inner = scf.for %kw = %c0 to %kernel_w step %c1 iter_args(%acc = %acc0) -> (f32) {
              %ih = arith.addi %oh, %kh : index
              %iw = arith.addi %ow, %kw : index
              %x = "cir.load"(%input, %b, %c, %ih, %iw) : (tensor<1x2x6x6xf32>, index, index, index, index) -> f32
              %w = "cir.load"(%kernel, %c, %kh, %kw) : (tensor<2x3x3xf32>, index, index, index) -> f32
              %p = arith.mulf %x, %w : f32
              %s = arith.addf %acc, %p : f32
              scf.yield %s : f32
            }
            scf.yield %inner : f32
          }
          "cir.store"(%sum, %out, %b, %c, %oh, %ow) : (f32, tensor<1x2x4x4xf32>, index, index, index, index) -> ()
        }
      }
    }
  }
  return
}

// -----

// A reduction followed by more work (out[i] = sum / 8): a reduction generic computes the
// row sums, then a parallel generic reads them to divide.
// CHECK-DAG: [[ID:#[a-z0-9]+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: [[ROW:#[a-z0-9]+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: [[ID1:#[a-z0-9]+]] = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @row_mean(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4xf32>
// CHECK: [[SUMS:%[0-9]+]] = linalg.generic {indexing_maps = {{\[}}[[ID]], [[ROW]]], iterator_types = ["parallel", "reduction"]} ins([[X]] : tensor<4x8xf32>)
// CHECK: [[MEAN:%[0-9]+]] = linalg.generic {indexing_maps = {{\[}}[[ID1]], [[ID1]]], iterator_types = ["parallel"]} ins([[SUMS]] : tensor<4xf32>)
// CHECK: arith.divf
// CHECK: return [[MEAN]] : tensor<4xf32>
func.func @row_mean(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %m = "cir.compute"(%x, %c4, %c8) {kind = "fused", body = @row_mean_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4x8xf32>, index, index) -> tensor<4xf32>
  return %m : tensor<4xf32>
}
func.func private @row_mean_body(%x: tensor<4x8xf32>, %rows_arg: index, %cols_arg: index, %out: tensor<4xf32>)
    attributes {cir.body} {
  %rows = arith.constant 4 : index  // as cir-shape-propagation leaves it
  %cols = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %eight = arith.constant 8.0 : f32
  scf.for %i = %c0 to %rows step %c1 {
    %sum = scf.for %j = %c0 to %cols step %c1 iter_args(%acc = %zero) -> (f32) {
      %v = "cir.load"(%x, %i, %j) : (tensor<4x8xf32>, index, index) -> f32
      %s = arith.addf %acc, %v : f32
      scf.yield %s : f32
    }
    %mean = arith.divf %sum, %eight : f32
    "cir.store"(%mean, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

// cir.barrier orders the work items of a workgroup; on tensors, where each value is
// computed from its inputs, it has no effect: the body lowers as if it were not there.
// CHECK-LABEL: func.func @barrier(
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0([[IN:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: linalg.yield [[IN]] : f32
// CHECK-NOT: cir.barrier
func.func @barrier(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "fused", body = @barrier_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @barrier_body(%x: tensor<8xf32>, %n_arg: index, %out: tensor<8xf32>) attributes {cir.body} {
  %n = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    "cir.barrier"() : () -> ()
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}

// -----

// A loop-carried value that is not a reduction (acc = v - acc) is a sequential loop: an
// scf.for in the function carrying the values over the parallel loops as a tensor, each
// step one parallel generic.
// CHECK-LABEL: func.func @not_an_accumulator(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<8xf32>) -> tensor<1xf32>
// CHECK: [[LOOP:%[0-9]+]] = scf.for [[I:%[a-z0-9_]+]] = {{.*}} iter_args([[CARRIED:%[a-z0-9_]+]] = %{{.*}}) -> (tensor<1xf32>) {
// CHECK: [[STEP:%[0-9]+]] = linalg.generic {{.*}} ins([[CARRIED]] : tensor<1xf32>)
// CHECK: [[V:%[a-z0-9_]+]] = tensor.extract [[X]][[[I]]] : tensor<8xf32>
// CHECK-NEXT: arith.subf [[V]], %{{.*}} : f32
// CHECK: scf.yield [[STEP]] : tensor<1xf32>
func.func @not_an_accumulator(%x: tensor<8xf32>) -> tensor<1xf32> {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %r = "cir.compute"(%x, %c1, %c8) {kind = "fused", body = @not_an_accumulator_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index, index) -> tensor<1xf32>
  return %r : tensor<1xf32>
}
func.func private @not_an_accumulator_body(%x: tensor<8xf32>, %rows_arg: index, %n_arg: index,
                                           %out: tensor<1xf32>) attributes {cir.body} {
  %rows = arith.constant 1 : index  // as cir-shape-propagation leaves it
  %n = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %row = %c0 to %rows step %c1 {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
      %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
      %d = arith.subf %v, %acc : f32
      scf.yield %d : f32
    }
    "cir.store"(%r, %out, %row) : (f32, tensor<1xf32>, index) -> ()
  }
  return
}

// -----

// A loop in steps of 2 writes every other element: one generic over its 4 iterations
// reading x through (d0) -> (d0 * 2), inserted with stride 2 into a zero-filled out.
// CHECK-DAG: [[EVEN:#[a-z0-9]+]] = affine_map<(d0) -> (d0 * 2)>
// CHECK-DAG: [[ID1:#[a-z0-9]+]] = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @strided_loop(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<8xf32>)
// CHECK: [[HALF:%[0-9]+]] = linalg.generic {indexing_maps = {{\[}}[[EVEN]], [[ID1]]], iterator_types = ["parallel"]} ins([[X]] : tensor<8xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: [[ZEROS:%[0-9]+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<8xf32>) -> tensor<8xf32>
// CHECK: [[Y:%[a-z0-9_]+]] = tensor.insert_slice [[HALF]] into [[ZEROS]][0] [4] [2] : tensor<4xf32> into tensor<8xf32>
// CHECK: return [[Y]] : tensor<8xf32>
func.func @strided_loop(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @strided_loop_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @strided_loop_body(%x: tensor<8xf32>, %n_arg: index, %out: tensor<8xf32>) attributes {cir.body} {
  %n = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %n step %c2 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}

// -----

// Loop bounds that are size arguments (not constants) with a static result: the loops run
// over the compute's operands (here constants), and the result is cast to its type.
// CHECK-LABEL: func.func @bound_by_argument(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<8xf32>) -> tensor<8xf32>
// CHECK: [[C8:%[a-z0-9_]+]] = arith.constant 8 : index
// CHECK: [[XS:%[a-z0-9_]+]] = tensor.extract_slice [[X]][0] {{\[}}[[C8]]] [1] : tensor<8xf32> to tensor<?xf32>
// CHECK: [[G:%[0-9]+]] = linalg.generic {{.*}} ins([[XS]] : tensor<?xf32>)
// CHECK: [[Y:%[a-z0-9_]+]] = tensor.cast [[G]] : tensor<?xf32> to tensor<8xf32>
// CHECK: return [[Y]] : tensor<8xf32>
func.func @bound_by_argument(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @copy_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @copy_body(%x: tensor<8xf32>, %n: index, %out: tensor<8xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}

// -----

// The same for an axis reduction: linalg.reduce over the sizes given, cast to the result.
// CHECK-LABEL: func.func @reduce_bound_by_argument(
// CHECK: [[R:%[a-z0-9_]+]] = linalg.reduce { arith.addf } ins(%{{.*}} : tensor<?x?xf32>) outs(%{{.*}} : tensor<?xf32>) dimensions = [1]
// CHECK: [[C:%[a-z0-9_]+]] = tensor.cast [[R]] : tensor<?xf32> to tensor<4xf32>
// CHECK: return [[C]] : tensor<4xf32>
func.func @reduce_bound_by_argument(%m: tensor<4x8xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %r = "cir.compute"(%m, %c4, %c8) {kind = "reduce", reduce = "+", axis = 1 : i64, body = @row_sums_body,
      out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4x8xf32>, index, index) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func private @row_sums_body(%m: tensor<4x8xf32>, %rows: index, %cols: index, %out: tensor<4xf32>)
    attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %rows step %c1 {
    scf.for %j = %c0 to %cols step %c1 {
      %v = "cir.load"(%m, %i, %j) : (tensor<4x8xf32>, index, index) -> f32
      "cir.yield"(%v) : (f32) -> ()
    }
  }
  return
}

// -----

// cir.attention (from cir-raise-attention) becomes four generics a library may take as one
// (library_call): scores (queries pre-scaled), row max, row sum of exponentials, and the
// weighted values, all in f32; f16 results get one rounding generic. No mask: no select.
// CHECK-LABEL: func.func @attention_f16(
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : tensor<2x3x4xf16>, tensor<2x5x4xf16>) outs(%{{.*}} : tensor<2x3x5xf32>)
// CHECK: arith.extf
// CHECK: library_call = "zynml_attention_max"} ins(%{{.*}} : tensor<2x3x5xf32>) outs(%{{.*}} : tensor<2x3xf32>)
// CHECK-NOT: arith.select
// CHECK: library_call = "zynml_attention_sum"}
// CHECK: math.exp
// CHECK: library_call = "zynml_attention_out"} ins(%{{.*}}, %{{.*}}, %{{.*}}, %arg2 : tensor<2x3x5xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x5x6xf16>) outs(%{{.*}} : tensor<2x3x6xf32>)
// CHECK: [[R:%[0-9]+]] = linalg.generic {{.*}}library_call = "zynml_attention_round"} ins(%{{.*}} : tensor<2x3x6xf32>) outs(%{{.*}} : tensor<2x3x6xf16>)
// CHECK: arith.truncf
// CHECK: return [[R]]
func.func @attention_f16(%q: tensor<2x3x4xf16>, %k: tensor<2x5x4xf16>, %v: tensor<2x5x6xf16>) -> tensor<2x3x6xf16> {
  %scale = arith.constant 0.5 : f16
  %o = "cir.attention"(%q, %k, %v, %scale) {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<2x3x4xf16>, tensor<2x5x4xf16>, tensor<2x5x6xf16>, f16) -> tensor<2x3x6xf16>
  return %o : tensor<2x3x6xf16>
}

// -----

// Causal attention with a KV cache (causal_offset = 2) and a mask: the max, sum and out
// generics read i and j (linalg.index) and allow key j when j <= i + 2 and the mask's
// bit is set; each says so in zynml.causal_offset for the CUDA strategies.
// CHECK-LABEL: func.func @attention_causal(
// CHECK: library_call = "zynml_attention_scores"}
// CHECK-NOT: linalg.index
// CHECK: library_call = "zynml_attention_max"} ins(%{{.*}}, %arg3 : tensor<2x3x5xf32>, tensor<3x5xi1>) outs(%{{.*}} : tensor<2x3xf32>) attrs =  {zynml.causal_offset = 2 : i64}
// CHECK-NEXT: ^bb0(%{{.*}}: f32, [[BIT:%[a-z0-9_]+]]: i1, [[M:%[a-z0-9_]+]]: f32):
// CHECK: [[I:%[0-9]+]] = linalg.index 1 : index
// CHECK: [[J:%[0-9]+]] = linalg.index 2 : index
// CHECK: [[C2:%[a-z0-9_]+]] = arith.constant 2 : index
// CHECK: [[LIMIT:%[0-9]+]] = arith.addi [[I]], [[C2]] : index
// CHECK: [[CAUSAL:%[0-9]+]] = arith.cmpi sle, [[J]], [[LIMIT]] : index
// CHECK: [[ALLOWED:%[0-9]+]] = arith.andi [[CAUSAL]], [[BIT]] : i1
// CHECK: arith.select [[ALLOWED]]
// CHECK: library_call = "zynml_attention_sum"}{{.*}} attrs =  {zynml.causal_offset = 2 : i64}
// CHECK: arith.cmpi sle
// CHECK: library_call = "zynml_attention_out"}{{.*}} attrs =  {zynml.causal_offset = 2 : i64}
// CHECK: [[OI:%[0-9]+]] = linalg.index 1 : index
// CHECK: [[OJ:%[0-9]+]] = linalg.index 3 : index
// CHECK: [[OLIMIT:%[0-9]+]] = arith.addi [[OI]], %{{.*}} : index
// CHECK: arith.cmpi sle, [[OJ]], [[OLIMIT]] : index
func.func @attention_causal(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>) -> tensor<2x3x6xf32> {
  %scale = arith.constant 0.5 : f32
  %o = "cir.attention"(%q, %k, %v, %scale, %mask) {causal_offset = 2 : i64, mask_dims = array<i64: 1, 2>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32, tensor<3x5xi1>) -> tensor<2x3x6xf32>
  return %o : tensor<2x3x6xf32>
}

// -----

// Decode attention: a run-time causal offset (the 0-d input it is extracted from becomes
// the last input of the max, sum and out generics, j <= i + 1 + start) and grouped-query
// attention (kv_group 4: K and V read at head h floordiv 4).
// CHECK-DAG: [[KV:#map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 4, d3, d4)>
// CHECK-DAG: [[V:#map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 4, d4, d3)>
// CHECK-DAG: [[SCALAR:#map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> ()>
// CHECK-LABEL: func.func @attention_decode(
// CHECK: indexing_maps = [#{{.*}}, [[KV]], #{{.*}}]{{.*}}library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : tensor<1x8x1x4xf16>, tensor<1x2x9x4xf16>)
// CHECK: library_call = "zynml_attention_max"} ins(%{{.*}}, %arg3 : tensor<1x8x1x9xf32>, tensor<i64>){{.*}} attrs =  {zynml.causal_offset = 1 : i64, zynml.runtime_offset}
// CHECK: ^bb0(%{{[a-z0-9_]+}}: f32, [[START:%[a-z0-9_]+]]: i64, %{{[a-z0-9_]+}}: f32):
// CHECK: [[I:%[0-9]+]] = linalg.index 2 : index
// CHECK: [[J:%[0-9]+]] = linalg.index 3 : index
// CHECK: [[SHIFTED:%[0-9]+]] = arith.addi [[I]], %{{.*}} : index
// CHECK: [[S:%[0-9]+]] = arith.index_cast [[START]] : i64 to index
// CHECK: [[LIMIT:%[0-9]+]] = arith.addi [[SHIFTED]], [[S]] : index
// CHECK: arith.cmpi sle, [[J]], [[LIMIT]] : index
// CHECK: library_call = "zynml_attention_sum"} ins(%{{.*}}, %{{.*}}, %arg3 : {{.*}}) {{.*}}zynml.runtime_offset
// CHECK: indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}, [[V]], [[SCALAR2:#map[0-9]*]], #{{.*}}]{{.*}}library_call = "zynml_attention_out"} ins(%{{.*}}, %{{.*}}, %{{.*}}, %arg2, %arg3 : {{.*}}) {{.*}}zynml.runtime_offset
func.func @attention_decode(%q: tensor<1x8x1x4xf16>, %k: tensor<1x2x9x4xf16>, %v: tensor<1x2x9x4xf16>, %start: tensor<i64>) -> tensor<1x8x1x4xf16> {
  %scale = arith.constant 0.5 : f32
  %s = tensor.extract %start[] : tensor<i64>
  %o = "cir.attention"(%q, %k, %v, %scale, %s) {causal_offset = 1 : i64, kv_group = array<i64: 1, 4>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1, 0>} : (tensor<1x8x1x4xf16>, tensor<1x2x9x4xf16>, tensor<1x2x9x4xf16>, f32, i64) -> tensor<1x8x1x4xf16>
  return %o : tensor<1x8x1x4xf16>
}

// -----

// A run-time group (the `group` operand along group_axis 1): no map can divide by it, so
// the scores and out generics take it as a 0-d input (second and fourth) and gather K and
// V in their bodies at head clamp(h floordiv g, 0, heads - 1), each tensor's own heads
// (K's 3, V's run-time extent); they carry zynml.runtime_group = 1.
// CHECK-LABEL: func.func @attention_run_time_group(
// CHECK: [[VLAST:%[0-9]+]] = arith.subi %dim{{[_0-9]*}}, %c1
// CHECK: library_call = "zynml_attention_scores"} ins(%arg0, %arg3 : tensor<1x8x2x4xf32>, tensor<i64>){{.*}} attrs =  {zynml.runtime_group = 1 : i64}
// CHECK: ^bb0(%{{[a-z0-9_]+}}: f32, [[G:%[a-z0-9_]+]]: i64, %{{[a-z0-9_]+}}: f32):
// CHECK: [[GI:%[0-9]+]] = arith.index_cast [[G]] : i64 to index
// CHECK: [[B:%[0-9]+]] = linalg.index 0 : index
// CHECK: [[H:%[0-9]+]] = linalg.index 1 : index
// CHECK: [[DIV:%[0-9]+]] = arith.floordivsi [[H]], [[GI]] : index
// CHECK: [[LOW:%[0-9]+]] = arith.maxsi [[DIV]], %c0
// CHECK: [[HEAD:%[0-9]+]] = arith.minsi [[LOW]], %c2
// CHECK: [[J:%[0-9]+]] = linalg.index 3 : index
// CHECK: [[D:%[0-9]+]] = linalg.index 4 : index
// CHECK: tensor.extract %arg1[[[B]], [[HEAD]], [[J]], [[D]]] : tensor<1x3x9x4xf32>
// CHECK: library_call = "zynml_attention_out"} ins(%{{.*}}, %{{.*}}, %{{.*}}, %arg3 : {{.*}}, tensor<i64>){{.*}} attrs =  {zynml.runtime_group = 1 : i64}
// CHECK: arith.minsi %{{[0-9]+}}, [[VLAST]] : index
// CHECK: [[VJ:%[0-9]+]] = linalg.index 4 : index
// CHECK: [[VE:%[0-9]+]] = linalg.index 3 : index
// CHECK: tensor.extract %arg2[%{{[0-9]+}}, %{{[0-9]+}}, [[VJ]], [[VE]]] : tensor<1x?x9x4xf32>
func.func @attention_run_time_group(%q: tensor<1x8x2x4xf32>, %k: tensor<1x3x9x4xf32>, %v: tensor<1x?x9x4xf32>, %g: tensor<i64>) -> tensor<1x8x2x4xf32> {
  %scale = arith.constant 0.5 : f32
  %group = tensor.extract %g[] : tensor<i64>
  %o = "cir.attention"(%q, %k, %v, %scale, %group) {group_axis = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1>} : (tensor<1x8x2x4xf32>, tensor<1x3x9x4xf32>, tensor<1x?x9x4xf32>, f32, i64) -> tensor<1x8x2x4xf32>
  return %o : tensor<1x8x2x4xf32>
}

// -----

// A run-time offset that is a scalar argument (index here), not a 0-d input's element,
// reaches the generics as a 0-d tensor of its own.
// CHECK-LABEL: func.func @attention_scalar_offset(
// CHECK: [[T:%[a-z0-9_]+]] = tensor.from_elements %arg3 : tensor<index>
// CHECK: library_call = "zynml_attention_max"} ins(%{{.*}}, [[T]] : tensor<3x5xf32>, tensor<index>){{.*}}zynml.runtime_offset
// CHECK: ^bb0(%{{[a-z0-9_]+}}: f32, [[S:%[a-z0-9_]+]]: index, %{{[a-z0-9_]+}}: f32):
// CHECK-NOT: arith.index_cast
// CHECK: arith.addi %{{[0-9]+}}, [[S]] : index
func.func @attention_scalar_offset(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x6xf32>, %s: index) -> tensor<3x6xf32> {
  %scale = arith.constant 0.5 : f32
  %o = "cir.attention"(%q, %k, %v, %scale, %s) {causal_offset = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1, 0>} : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x6xf32>, f32, index) -> tensor<3x6xf32>
  return %o : tensor<3x6xf32>
}

// -----

// A cir.multi_compute whose outputs are written once each over the same loop is ONE
// generic with a result per output (outputs_lowering.py); the shared load is one input.
// CHECK-LABEL: func.func @two_outputs(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<5xf32>)
// CHECK: [[R:%[0-9]+]]:2 = linalg.generic {{.*}} ins([[X]] : tensor<5xf32>) outs(%{{.*}}, %{{.*}} : tensor<5xf32>, tensor<5xi1>)
// CHECK: linalg.yield %{{.*}}, %{{.*}} : f32, i1
// CHECK-NOT: linalg.generic
// CHECK: return [[R]]#0, [[R]]#1 : tensor<5xf32>, tensor<5xi1>
// GENERIC-LABEL: func.func @two_outputs(
// GENERIC-COUNT-1: linalg.generic
// GENERIC-NOT: linalg.generic
func.func @two_outputs(%x: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xi1>) {
  %c5 = arith.constant 5 : index
  %y:2 = "cir.multi_compute"(%x, %c5) {kind = "elementwise", body = @two_body,
      out_dims = array<i64: 1, 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
      resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>}
      : (tensor<5xf32>, index) -> (tensor<5xf32>, tensor<5xi1>)
  return %y#0, %y#1 : tensor<5xf32>, tensor<5xi1>
}
func.func private @two_body(%x: tensor<5xf32>, %n_arg: index, %a: tensor<5xf32>,
                            %b: tensor<5xi1>) attributes {cir.body} {
  %n = arith.constant 5 : index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<5xf32>, index) -> f32
    %d = arith.addf %v, %v : f32
    %zero = arith.constant 0.0 : f32
    %p = arith.cmpf ogt, %v, %zero : f32
    "cir.store"(%d, %a, %i) : (f32, tensor<5xf32>, index) -> ()
    "cir.store"(%p, %b, %i) : (i1, tensor<5xi1>, index) -> ()
  }
  return
}

// -----

// `mut x` (inits names the operand a result starts from): a partial write inserts into
// the input itself, so the elements it does not write keep their values.
// CHECK-LABEL: func.func @update_odd(
// GENERIC-LABEL: func.func @update_odd(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<6xf32>)
// CHECK: [[T:%[0-9]+]] = linalg.generic
// CHECK: [[R:%[a-z0-9_]+]] = tensor.insert_slice [[T]] into [[X]][1] [3] [2] : tensor<3xf32> into tensor<6xf32>
// CHECK: return [[R]] : tensor<6xf32>
func.func @update_odd(%x: tensor<6xf32>) -> tensor<6xf32> {
  %c6 = arith.constant 6 : index
  %y = "cir.compute"(%x, %c6) {kind = "elementwise", body = @odd_body, inits = array<i64: 0>,
      out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<6xf32>, index) -> tensor<6xf32>
  return %y : tensor<6xf32>
}
func.func private @odd_body(%x: tensor<6xf32>, %n: index, %out: tensor<6xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c3 step %c1 {
    %j = arith.muli %i, %c2 : index
    %k = arith.addi %j, %c1 : index
    %v = "cir.load"(%x, %k) : (tensor<6xf32>, index) -> f32
    %w = arith.negf %v : f32
    "cir.store"(%w, %out, %k) : (f32, tensor<6xf32>, index) -> ()
  }
  return
}
// -----

// From here on, bodies the lowering rejects: each error is located at the op it cannot
// handle. Reading back what the body wrote to out.
func.func @read_out(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @read_out_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @read_out_body(%x: tensor<8xf32>, %n_arg: index, %out: tensor<8xf32>) attributes {cir.body} {
  %n = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %n step %c1 {
    // expected-error@+1 {{cannot lower this 'elementwise' body to linalg: reading 'out' is not lowered yet}}
    %v = "cir.load"(%out, %i) : (tensor<8xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}

// -----

// A write of out under a condition.
func.func @store_under_if(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @store_under_if_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @store_under_if_body(%x: tensor<8xf32>, %n_arg: index, %out: tensor<8xf32>) attributes {cir.body} {
  %n = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    %positive = arith.cmpf ogt, %v, %zero : f32
    scf.if %positive {
      // expected-error@+1 {{cannot lower this 'elementwise' body to linalg: a write inside an 'if' is not lowered yet}}
      "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
    }
  }
  return
}

// -----

// A body that never writes out: the error is at the compute.
func.func @no_write(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  // expected-error@+1 {{cannot lower this 'elementwise' body to linalg: the body never writes 'out'}}
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @no_write_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @no_write_body(%x: tensor<8xf32>, %n_arg: index, %out: tensor<8xf32>) attributes {cir.body} {
  %n = arith.constant 8 : index  // as cir-shape-propagation leaves it
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index

  return
}

// -----

// print(...) runs only on the reference interpreter: the error is at the print.
func.func @prints(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @prints_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @prints_body(%x: tensor<8xf32>, %n: index, %out: tensor<8xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    // expected-error@+1 {{'print' runs only with device="interpreter" (the reference interpreter); remove it to compile for this device}}
    "cir.print"(%i, %v) {format = "{} {}", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (index, f32) -> ()
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}
