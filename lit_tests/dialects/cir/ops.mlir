// Every cir op parses, verifies (IRDL, then --cir-verify) and prints back the same:
// cir.compute (elementwise, reduce, argmax, axis reduction, fused with its optional
// attributes), cir.load, cir.store, cir.yield with one and two operands, cir.alloc,
// cir.barrier, cir.print, cir.attention with and without a mask, causal with and without one.
// RUN: zynml-opt %s | filecheck %s
// RUN: zynml-opt %s --cir-verify | filecheck %s
// RUN: zynml-opt %s --mlir-print-op-generic | zynml-opt | filecheck %s
// RUN: zynml-opt %s > %t.1.mlir && zynml-opt %t.1.mlir > %t.2.mlir && diff %t.1.mlir %t.2.mlir

// CHECK-LABEL: func.func @main(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<8xf32>, [[M:%[a-z0-9_]+]]: tensor<4x8xf32>)
// CHECK-DAG: [[C4:%[a-z0-9_]+]] = arith.constant 4 : index
// CHECK-DAG: [[C8:%[a-z0-9_]+]] = arith.constant 8 : index
// CHECK: [[Y:%[0-9]+]] = "cir.compute"([[X]], [[C8]]) {body = @relu_body, kind = "elementwise", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, out_dims = array<i64: 1>} : (tensor<8xf32>, index) -> tensor<8xf32>
// CHECK: [[S:%[0-9]+]] = "cir.compute"([[X]], [[C8]]) {body = @sum_body, kind = "reduce", {{.*}}out_dims = array<i64>, reduce = "+"} : (tensor<8xf32>, index) -> f32
// CHECK: [[A:%[0-9]+]] = "cir.compute"([[X]], [[C8]]) {body = @argmax_body, kind = "reduce", {{.*}}reduce = "argmax"} : (tensor<8xf32>, index) -> i64
// CHECK: [[R:%[0-9]+]] = "cir.compute"([[M]], [[C4]], [[C8]]) {axis = 1 : i64, body = @rows_body, kind = "reduce", {{.*}}out_dims = array<i64: 1>, reduce = "+"} : (tensor<4x8xf32>, index, index) -> tensor<4xf32>
// CHECK: [[F:%[0-9]+]] = "cir.compute"([[X]], [[X]], [[C8]]) {body = @fused_body, broadcast = {b = 0 : i64}, device = "cpu", kind = "fused", names = ["a", "b", "n"], {{.*}}shared = 64 : i64, tile = {block = 4 : i64}, workgroup = array<i64: 8, 1, 1>} : (tensor<8xf32>, tensor<8xf32>, index) -> tensor<8xf32>
// CHECK: return [[Y]], [[S]], [[A]], [[R]], [[F]] : tensor<8xf32>, f32, i64, tensor<4xf32>, tensor<8xf32>
func.func @main(%x: tensor<8xf32>, %m: tensor<4x8xf32>)
    -> (tensor<8xf32>, f32, i64, tensor<4xf32>, tensor<8xf32>) {
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @relu_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> tensor<8xf32>
  %s = "cir.compute"(%x, %c8) {kind = "reduce", reduce = "+", body = @sum_body, out_dims = array<i64>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> f32
  %a = "cir.compute"(%x, %c8) {kind = "reduce", reduce = "argmax", body = @argmax_body,
      out_dims = array<i64>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> i64
  %r = "cir.compute"(%m, %c4, %c8) {kind = "reduce", reduce = "+", axis = 1 : i64,
      body = @rows_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4x8xf32>, index, index) -> tensor<4xf32>
  %f = "cir.compute"(%x, %x, %c8) {kind = "fused", body = @fused_body, out_dims = array<i64: 2>,
      workgroup = array<i64: 8, 1, 1>, shared = 64 : i64, broadcast = {b = 0 : i64},
      tile = {block = 4 : i64}, device = "cpu", names = ["a", "b", "n"],
      operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, tensor<8xf32>, index) -> tensor<8xf32>
  return %y, %s, %a, %r, %f : tensor<8xf32>, f32, i64, tensor<4xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func private @relu_body(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<8xf32>, [[N:%[a-z0-9_]+]]: index, [[OUT:%[a-z0-9_]+]]: tensor<8xf32>) attributes {cir.body}
// CHECK: scf.for [[I:%[a-z0-9_]+]] =
// CHECK-NEXT: [[V:%[0-9]+]] = "cir.load"([[X]], [[I]]) : (tensor<8xf32>, index) -> f32
// CHECK-NEXT: [[RELU:%[0-9]+]] = arith.maximumf [[V]], %{{.*}} : f32
// CHECK-NEXT: "cir.store"([[RELU]], [[OUT]], [[I]]) : (f32, tensor<8xf32>, index) -> ()
// CHECK-NEXT: "cir.print"([[I]], [[RELU]]) {format = "i = {} relu = {}", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (index, f32) -> ()
func.func private @relu_body(%x: tensor<8xf32>, %n: index, %out: tensor<8xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    %relu = arith.maximumf %v, %zero : f32
    "cir.store"(%relu, %out, %i) : (f32, tensor<8xf32>, index) -> ()
    "cir.print"(%i, %relu) {format = "i = {} relu = {}",
        operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (index, f32) -> ()
  }
  return
}

// CHECK-LABEL: func.func private @sum_body(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<8xf32>, {{.*}}: index, {{.*}}: tensor<f32>) attributes {cir.body}
// CHECK: [[V:%[0-9]+]] = "cir.load"([[X]], {{.*}}) : (tensor<8xf32>, index) -> f32
// CHECK-NEXT: "cir.yield"([[V]]) : (f32) -> ()
func.func private @sum_body(%x: tensor<8xf32>, %n: index, %out: tensor<f32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    "cir.yield"(%v) : (f32) -> ()
  }
  return
}

// CHECK-LABEL: func.func private @argmax_body(
// CHECK: scf.for [[I:%[a-z0-9_]+]] =
// CHECK-NEXT: [[V:%[0-9]+]] = "cir.load"(%{{.*}}, [[I]]) : (tensor<8xf32>, index) -> f32
// CHECK-NEXT: "cir.yield"([[V]], [[I]]) : (f32, index) -> ()
func.func private @argmax_body(%x: tensor<8xf32>, %n: index, %out: tensor<i64>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    "cir.yield"(%v, %i) : (f32, index) -> ()
  }
  return
}

// CHECK-LABEL: func.func private @rows_body(
// CHECK: [[V:%[0-9]+]] = "cir.load"(%{{.*}}, [[I:%[a-z0-9_]+]], [[J:%[a-z0-9_]+]]) : (tensor<4x8xf32>, index, index) -> f32
// CHECK-NEXT: "cir.yield"([[V]]) : (f32) -> ()
func.func private @rows_body(%m: tensor<4x8xf32>, %rows: index, %cols: index, %out: tensor<4xf32>)
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

// CHECK-LABEL: func.func private @fused_body(
// CHECK: [[VA:%[0-9]+]] = "cir.load"
// CHECK-NEXT: [[BUF:%[0-9]+]] = "cir.alloc"([[ONE:%[a-z0-9_]+]]) : (index) -> tensor<1xf32>
// CHECK-NEXT: "cir.store"([[VA]], [[BUF]], [[ZERO:%[a-z0-9_]+]]) : (f32, tensor<1xf32>, index) -> ()
// CHECK-NEXT: "cir.barrier"() : () -> ()
// CHECK-NEXT: [[VB:%[0-9]+]] = "cir.load"
// CHECK-NEXT: [[KEPT:%[0-9]+]] = "cir.load"([[BUF]], [[ZERO]]) : (tensor<1xf32>, index) -> f32
// CHECK-NEXT: [[SUM:%[0-9]+]] = arith.addf [[KEPT]], [[VB]] : f32
// CHECK-NEXT: "cir.store"([[SUM]],
func.func private @fused_body(%a: tensor<8xf32>, %b: tensor<8xf32>, %n: index, %out: tensor<8xf32>)
    attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %va = "cir.load"(%a, %i) : (tensor<8xf32>, index) -> f32
    %buf = "cir.alloc"(%c1) : (index) -> tensor<1xf32>
    "cir.store"(%va, %buf, %c0) : (f32, tensor<1xf32>, index) -> ()
    "cir.barrier"() : () -> ()
    %vb = "cir.load"(%b, %i) : (tensor<8xf32>, index) -> f32
    %kept = "cir.load"(%buf, %c0) : (tensor<1xf32>, index) -> f32
    %sum = arith.addf %kept, %vb : f32
    "cir.store"(%sum, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}

// CHECK-LABEL: func.func @attention(
// CHECK: "cir.attention"(%arg0, %arg1, %arg2, %{{.*}}, %arg3) {mask_dims = array<i64: 1, 2>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32, tensor<3x5xi1>) -> tensor<2x3x6xf32>
// CHECK: "cir.attention"(%arg0, %arg1, %arg2, %{{.*}}) {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32) -> tensor<2x3x6xf32>
func.func @attention(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>) -> (tensor<2x3x6xf32>, tensor<2x3x6xf32>) {
  %scale = arith.constant 0.5 : f32
  %masked = "cir.attention"(%q, %k, %v, %scale, %mask) {mask_dims = array<i64: 1, 2>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32, tensor<3x5xi1>) -> tensor<2x3x6xf32>
  %all = "cir.attention"(%q, %k, %v, %scale) {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32) -> tensor<2x3x6xf32>
  return %masked, %all : tensor<2x3x6xf32>, tensor<2x3x6xf32>
}

// CHECK-LABEL: func.func @causal_attention(
// CHECK: "cir.attention"(%arg0, %arg1, %arg2, %{{.*}}) {causal_offset = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32) -> tensor<2x3x6xf32>
// CHECK: "cir.attention"(%arg0, %arg1, %arg2, %{{.*}}, %arg3) {causal_offset = -2 : i64, mask_dims = array<i64: 1, 2>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32, tensor<3x5xi1>) -> tensor<2x3x6xf32>
func.func @causal_attention(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>) -> (tensor<2x3x6xf32>, tensor<2x3x6xf32>) {
  %scale = arith.constant 0.5 : f32
  %causal = "cir.attention"(%q, %k, %v, %scale) {causal_offset = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32) -> tensor<2x3x6xf32>
  %both = "cir.attention"(%q, %k, %v, %scale, %mask) {causal_offset = -2 : i64, mask_dims = array<i64: 1, 2>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32, tensor<3x5xi1>) -> tensor<2x3x6xf32>
  return %causal, %both : tensor<2x3x6xf32>, tensor<2x3x6xf32>
}

// cir.multi_compute: several results of different types, an `out` per result; `inits`
// (`mut x`) names the operand a result starts from.
// CHECK-LABEL: func.func @several(
// CHECK: "cir.multi_compute"({{.*}}) {body = @several_body, inits = array<i64: 0, -1>, kind = "elementwise", {{.*}}out_dims = array<i64: 1, 1>, resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<8xf32>, index) -> (tensor<8xf32>, tensor<8xi64>)
func.func @several(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xi64>) {
  %c8 = arith.constant 8 : index
  %r:2 = "cir.multi_compute"(%x, %c8) {kind = "elementwise", body = @several_body,
      inits = array<i64: 0, -1>, out_dims = array<i64: 1, 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
      resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> (tensor<8xf32>, tensor<8xi64>)
  return %r#0, %r#1 : tensor<8xf32>, tensor<8xi64>
}
func.func private @several_body(%x: tensor<8xf32>, %n: index, %a: tensor<8xf32>,
                                %b: tensor<8xi64>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    %k = arith.index_cast %i : index to i64
    "cir.store"(%v, %a, %i) : (f32, tensor<8xf32>, index) -> ()
    "cir.store"(%k, %b, %i) : (i64, tensor<8xi64>, index) -> ()
  }
  return
}
