// cir-shape-propagation folds the out_dims operands of each compute to constants when it
// can (constants, tensor.dim of static tensors, index arithmetic), makes the result and the
// body function static, replaces constant size arguments in the body by constants, and
// retypes main's results. Computes are visited in order, so static results flow onward.
// RUN: zynml-opt %s --split-input-file --cir-shape-propagation | filecheck %s
// RUN: zynml-opt %s --split-input-file | zynml-opt --split-input-file --cir-shape-propagation | zynml-opt --split-input-file | filecheck %s

// CHECK-LABEL: func.func @static_input(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<8xf32>) -> tensor<8xf32>
// CHECK: [[N:%[a-z0-9_]+]] = tensor.dim [[X]], %{{.*}} : tensor<8xf32>
// CHECK: [[Y:%[0-9]+]] = "cir.compute"([[X]], [[N]]){{.*}} : (tensor<8xf32>, index) -> tensor<8xf32>
// CHECK: return [[Y]] : tensor<8xf32>
// CHECK-LABEL: func.func private @static_input_body(
// CHECK-SAME: [[BX:%[a-z0-9_]+]]: tensor<8xf32>, [[BN:%[a-z0-9_]+]]: index, [[OUT:%[a-z0-9_]+]]: tensor<8xf32>)
// CHECK: [[C8:%[a-z0-9_]+]] = arith.constant 8 : index
// CHECK: scf.for [[I:%[a-z0-9_]+]] = %{{.*}} to [[C8]] step
// CHECK: "cir.store"(%{{.*}}, [[OUT]], [[I]]) : (f32, tensor<8xf32>, index) -> ()
func.func @static_input(%x: tensor<8xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<8xf32>
  %y = "cir.compute"(%x, %n) {kind = "elementwise", body = @static_input_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> tensor<?xf32>
  return %y : tensor<?xf32>
}
func.func private @static_input_body(%x: tensor<8xf32>, %n: index, %out: tensor<?xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    %e = math.exp %v : f32
    "cir.store"(%e, %out, %i) : (f32, tensor<?xf32>, index) -> ()
  }
  return
}

// -----

// A dynamic input leaves everything dynamic.
// CHECK-LABEL: func.func @dynamic_input(
// CHECK-SAME: tensor<?xf32>) -> tensor<?xf32>
// CHECK: "cir.compute"({{.*}} : (tensor<?xf32>, index) -> tensor<?xf32>
// CHECK-LABEL: func.func private @dynamic_input_body(
// CHECK-SAME: [[BX:%[a-z0-9_]+]]: tensor<?xf32>, [[BN:%[a-z0-9_]+]]: index, [[OUT:%[a-z0-9_]+]]: tensor<?xf32>)
// CHECK: scf.for %{{.*}} = %{{.*}} to [[BN]] step
func.func @dynamic_input(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %y = "cir.compute"(%x, %n) {kind = "elementwise", body = @dynamic_input_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<?xf32>, index) -> tensor<?xf32>
  return %y : tensor<?xf32>
}
func.func private @dynamic_input_body(%x: tensor<?xf32>, %n: index, %out: tensor<?xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<?xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<?xf32>, index) -> ()
  }
  return
}

// -----

// The first result becomes static, so the second compute, which reads it and sizes its
// result with index arithmetic on its tensor.dim (2 * 4 + 1), becomes static too.
// CHECK-LABEL: func.func @chained(
// CHECK-SAME: -> (tensor<4x6xf32>, tensor<9xf32>)
// CHECK: [[A:%[0-9]+]] = "cir.compute"({{.*}} : (tensor<4x6xf32>, index, index) -> tensor<4x6xf32>
// CHECK: [[B:%[0-9]+]] = "cir.compute"([[A]], {{.*}} : (tensor<4x6xf32>, index) -> tensor<9xf32>
// CHECK: return [[A]], [[B]] : tensor<4x6xf32>, tensor<9xf32>
// CHECK-LABEL: func.func private @first_body(
// CHECK-SAME: tensor<4x6xf32>) attributes {cir.body}
// CHECK-LABEL: func.func private @second_body(
// CHECK-SAME: [[IN:%[a-z0-9_]+]]: tensor<4x6xf32>, {{.*}}: index, [[OUT:%[a-z0-9_]+]]: tensor<9xf32>)
// CHECK: [[C9:%[a-z0-9_]+]] = arith.constant 9 : index
// CHECK: scf.for %{{.*}} = %{{.*}} to [[C9]] step
// CHECK: "cir.store"(%{{.*}}, [[OUT]], %{{.*}}) : (f32, tensor<9xf32>, index) -> ()
func.func @chained(%x: tensor<4x6xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %rows = tensor.dim %x, %c0 : tensor<4x6xf32>
  %cols = tensor.dim %x, %c1 : tensor<4x6xf32>
  %a = "cir.compute"(%x, %rows, %cols) {kind = "elementwise", body = @first_body,
      out_dims = array<i64: 1, 2>,
      operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4x6xf32>, index, index) -> tensor<?x?xf32>
  %arows = tensor.dim %a, %c0 : tensor<?x?xf32>
  %twice = arith.muli %arows, %c2 : index
  %len = arith.addi %twice, %c1 : index
  %b = "cir.compute"(%a, %len) {kind = "elementwise", body = @second_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<?x?xf32>, index) -> tensor<?xf32>
  return %a, %b : tensor<?x?xf32>, tensor<?xf32>
}
func.func private @first_body(%x: tensor<4x6xf32>, %rows: index, %cols: index, %out: tensor<?x?xf32>)
    attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %rows step %c1 {
    scf.for %j = %c0 to %cols step %c1 {
      %v = "cir.load"(%x, %i, %j) : (tensor<4x6xf32>, index, index) -> f32
      "cir.store"(%v, %out, %i, %j) : (f32, tensor<?x?xf32>, index, index) -> ()
    }
  }
  return
}
func.func private @second_body(%a: tensor<?x?xf32>, %len: index, %out: tensor<?xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %len step %c1 {
    "cir.store"(%zero, %out, %i) : (f32, tensor<?xf32>, index) -> ()
  }
  return
}

// -----

// A full reduction's scalar result keeps its rank-0 `out`.
// CHECK-LABEL: func.func @scalar_result(
// CHECK: "cir.compute"({{.*}} : (tensor<16xf32>, index) -> f32
// CHECK-LABEL: func.func private @sum_body(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<16xf32>, {{.*}}: index, {{.*}}: tensor<f32>)
// CHECK: [[C16:%[a-z0-9_]+]] = arith.constant 16 : index
// CHECK: scf.for %{{.*}} = %{{.*}} to [[C16]]
func.func @scalar_result(%data: tensor<16xf32>) -> f32 {
  %c16 = arith.constant 16 : index
  %s = "cir.compute"(%data, %c16) {kind = "reduce", reduce = "+", body = @sum_body, out_dims = array<i64>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<16xf32>, index) -> f32
  return %s : f32
}
func.func private @sum_body(%data: tensor<16xf32>, %n: index, %out: tensor<f32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%data, %i) : (tensor<16xf32>, index) -> f32
    "cir.yield"(%v) : (f32) -> ()
  }
  return
}

// -----

// A function declaration (a scatter's callee, after cir-to-linalg) has no body to
// retype: left as it is (it was an internal error, found by the zynml-opt fuzzer).
// CHECK-LABEL: func.func @takes_a_declaration(
// CHECK: func.func private @__zynml_scatter_add_d1_0(tensor<13x5xf32>, tensor<13x1xi64>, tensor<7x5xf32>) -> tensor<7x5xf32>
func.func @takes_a_declaration(%x: tensor<7x5xf32>) -> tensor<7x5xf32> {
  return %x : tensor<7x5xf32>
}
func.func private @__zynml_scatter_add_d1_0(tensor<13x5xf32>, tensor<13x1xi64>, tensor<7x5xf32>) -> tensor<7x5xf32>
