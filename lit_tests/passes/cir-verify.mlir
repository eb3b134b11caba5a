// cir-verify checks what IRDL cannot and changes nothing: valid modules come out as they
// went in; a violation is a located error (every message is in
// dialects/cir/ops_invalid.mlir).
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --cir-verify | filecheck %s
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --cir-verify | zynml-opt --split-input-file | filecheck %s

// A shape-generic elementwise compute as the front end emits it: the result's extent is
// the operand named by out_dims.
// CHECK-LABEL: func.func @relu(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<?xf32>) -> tensor<?xf32>
// CHECK: [[LEN:%[a-z0-9_]+]] = tensor.dim [[X]], %{{.*}} : tensor<?xf32>
// CHECK: [[Y:%[0-9]+]] = "cir.compute"([[X]], [[LEN]]) {body = @relu_body, kind = "elementwise", {{.*}}out_dims = array<i64: 1>} : (tensor<?xf32>, index) -> tensor<?xf32>
// CHECK: return [[Y]]
// CHECK-LABEL: func.func private @relu_body(
// CHECK: "cir.load"
// CHECK: arith.maximumf
// CHECK: "cir.store"
func.func @relu(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %len = tensor.dim %x, %c0 : tensor<?xf32>
  %y = "cir.compute"(%x, %len) {kind = "elementwise", body = @relu_body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<?xf32>, index) -> tensor<?xf32>
  return %y : tensor<?xf32>
}
func.func private @relu_body(%x: tensor<?xf32>, %len: index, %out: tensor<?xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %len step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<?xf32>, index) -> f32
    %r = arith.maximumf %v, %zero : f32
    "cir.store"(%r, %out, %i) : (f32, tensor<?xf32>, index) -> ()
  }
  return
}

// -----

// A full argmax: the scalar i64 result goes with a rank-0 `out`; the body yields a
// (value, index) pair.
// CHECK-LABEL: func.func @argmax(
// CHECK: "cir.compute"({{.*}}) {body = @argmax_body, kind = "reduce", {{.*}}reduce = "argmax"} : (tensor<16xf32>, index) -> i64
// CHECK-LABEL: func.func private @argmax_body(
// CHECK-SAME: tensor<i64>) attributes {cir.body}
// CHECK: "cir.yield"(%{{.*}}, %{{.*}}) : (f32, index) -> ()
func.func @argmax(%data: tensor<16xf32>) -> i64 {
  %c16 = arith.constant 16 : index
  %r = "cir.compute"(%data, %c16) {kind = "reduce", reduce = "argmax", body = @argmax_body,
      out_dims = array<i64>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<16xf32>, index) -> i64
  return %r : i64
}
func.func private @argmax_body(%data: tensor<16xf32>, %n: index, %out: tensor<i64>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%data, %i) : (tensor<16xf32>, index) -> f32
    "cir.yield"(%v, %i) : (f32, index) -> ()
  }
  return
}

// -----

// A scalar captured from the program (`eps`) is an operand like any other; a user kind
// ("my_kernel") is allowed.
// CHECK-LABEL: func.func @captured_scalar(
// CHECK: "cir.compute"(%{{.*}}, %{{.*}}, %{{.*}}) {body = @add_eps_body, kind = "my_kernel", {{.*}}} : (tensor<4xf32>, f32, index) -> tensor<4xf32>
func.func @captured_scalar(%x: tensor<4xf32>, %eps: f32) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %eps, %c4) {kind = "my_kernel", body = @add_eps_body, out_dims = array<i64: 2>,
      operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>, f32, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @add_eps_body(%x: tensor<4xf32>, %eps: f32, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    %s = arith.addf %v, %eps : f32
    "cir.store"(%s, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

// The body of a compute must take its operands' types.
func.func @operand_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{operand #0 has type tensor<4xf32> but body @body takes tensor<?xf32>}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @body(%x: tensor<?xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  return
}

// -----

// Only a reduction's body yields.
func.func @yield_in_matmul(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%a, %c4) {kind = "matmul", body = @body, out_dims = array<i64: 1, 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4x4xf32>, index) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
func.func private @body(%a: tensor<4x4xf32>, %n: index, %out: tensor<4x4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %v = "cir.load"(%a, %c0, %c0) : (tensor<4x4xf32>, index, index) -> f32
  // expected-error@+1 {{'cir.yield' in the body of a 'matmul' compute; only reductions yield}}
  "cir.yield"(%v) : (f32) -> ()
  return
}

// -----

// Run-time extents agree with anything; the static ones still must (grouped: K's 2
// heads times 4 are Q's 8; the run-time head dims of Q and K, and V's 16, are let be).
// CHECK-LABEL: func.func @attention_run_time_sizes(
// CHECK: "cir.attention"({{.*}}) {kv_group = array<i64: 1, 4>, {{.*}}} : (tensor<?x8x?x?xf16>, tensor<?x2x?x?xf16>, tensor<?x2x?x16xf16>, f32) -> tensor<?x8x?x16xf16>
func.func @attention_run_time_sizes(%q: tensor<?x8x?x?xf16>, %k: tensor<?x2x?x?xf16>, %v: tensor<?x2x?x16xf16>) -> tensor<?x8x?x16xf16> {
  %scale = arith.constant 0.125 : f32
  %o = "cir.attention"(%q, %k, %v, %scale) {kv_group = array<i64: 1, 4>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<?x8x?x?xf16>, tensor<?x2x?x?xf16>, tensor<?x2x?x16xf16>, f32) -> tensor<?x8x?x16xf16>
  return %o : tensor<?x8x?x16xf16>
}

// -----

func.func @attention_run_time_sizes_grouped_wrong(%q: tensor<?x8x?x16xf16>, %k: tensor<?x3x?x16xf16>, %v: tensor<?x3x?x16xf16>) -> tensor<?x8x?x16xf16> {
  %scale = arith.constant 0.125 : f32
  // expected-error@+1 {{'cir.attention' shapes do not agree: query [?, 8, ?, 16], key [?, 3, ?, 16], value [?, 3, ?, 16], result [?, 8, ?, 16], kv_group [1, 4]}}
  %o = "cir.attention"(%q, %k, %v, %scale) {kv_group = array<i64: 1, 4>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<?x8x?x16xf16>, tensor<?x3x?x16xf16>, tensor<?x3x?x16xf16>, f32) -> tensor<?x8x?x16xf16>
  return %o : tensor<?x8x?x16xf16>
}

// -----

func.func @attention_shapes(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>) -> tensor<2x3x5xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' shapes do not agree: query [2, 3, 4], key [2, 5, 4], value [2, 5, 6], result [2, 3, 5]}}
  %o = "cir.attention"(%q, %k, %v, %scale) {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32) -> tensor<2x3x5xf32>
  return %o : tensor<2x3x5xf32>
}

// -----

func.func @attention_mask(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x6xf32>, %mask: tensor<5x3xi1>) -> tensor<3x6xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' mask must be a bool tensor whose 'mask_dims' name, per axis, a loop of (p.., i, j) of the same extent}}
  %o = "cir.attention"(%q, %k, %v, %scale, %mask) {mask_dims = array<i64: 0, 1>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>} : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x6xf32>, f32, tensor<5x3xi1>) -> tensor<3x6xf32>
  return %o : tensor<3x6xf32>
}

// -----

func.func @attention_causal_offset(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x6xf32>) -> tensor<3x6xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' causal_offset must be an i64 integer (key j allowed when j <= i + causal_offset)}}
  %o = "cir.attention"(%q, %k, %v, %scale) {causal_offset = 1 : i32, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x6xf32>, f32) -> tensor<3x6xf32>
  return %o : tensor<3x6xf32>
}

// -----

// A run-time offset is added to causal_offset: without it, the op is not causal.
func.func @attention_offset_alone(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x6xf32>, %s: i64) -> tensor<3x6xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' offset must be an integer or index scalar, with causal_offset (key j allowed when j <= i + offset + causal_offset)}}
  %o = "cir.attention"(%q, %k, %v, %scale, %s) {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1, 0>} : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x6xf32>, f32, i64) -> tensor<3x6xf32>
  return %o : tensor<3x6xf32>
}

// -----

func.func @attention_offset_float(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x6xf32>, %s: f32) -> tensor<3x6xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' offset must be an integer or index scalar}}
  %o = "cir.attention"(%q, %k, %v, %scale, %s) {causal_offset = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1, 0>} : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x6xf32>, f32, f32) -> tensor<3x6xf32>
  return %o : tensor<3x6xf32>
}

// -----

// kv_group: K's heads times the group are Q's.
func.func @attention_kv_group(%q: tensor<8x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>) -> tensor<8x3x6xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' shapes do not agree: query [8, 3, 4], key [2, 5, 4], value [2, 5, 6], result [8, 3, 6], kv_group [2]}}
  %o = "cir.attention"(%q, %k, %v, %scale) {kv_group = array<i64: 2>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<8x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32) -> tensor<8x3x6xf32>
  return %o : tensor<8x3x6xf32>
}

// -----

func.func @attention_kv_group_rank(%q: tensor<8x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>) -> tensor<8x3x6xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' kv_group needs one group >= 1 per leading axis (1)}}
  %o = "cir.attention"(%q, %k, %v, %scale) {kv_group = array<i64: 1, 4>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<8x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32) -> tensor<8x3x6xf32>
  return %o : tensor<8x3x6xf32>
}

// -----

// A run-time group: any extents along its axis (K's 3 heads are not a divisor of Q's 8,
// V's may differ from K's); the other axes still must agree.
// CHECK-LABEL: func.func @attention_run_time_group(
// CHECK: "cir.attention"({{.*}}) {group_axis = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1>}
func.func @attention_run_time_group(%q: tensor<2x8x3x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x?x5x6xf32>, %g: i64) -> tensor<2x8x3x6xf32> {
  %scale = arith.constant 0.5 : f32
  %o = "cir.attention"(%q, %k, %v, %scale, %g) {group_axis = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1>} : (tensor<2x8x3x4xf32>, tensor<2x3x5x4xf32>, tensor<2x?x5x6xf32>, f32, i64) -> tensor<2x8x3x6xf32>
  return %o : tensor<2x8x3x6xf32>
}

// -----

func.func @attention_run_time_group_batch(%q: tensor<2x8x3x4xf32>, %k: tensor<3x3x5x4xf32>, %v: tensor<3x3x5x6xf32>, %g: i64) -> tensor<2x8x3x6xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' shapes do not agree: query [2, 8, 3, 4], key [3, 3, 5, 4], value [3, 3, 5, 6], result [2, 8, 3, 6], kv_group [1, 1]}}
  %o = "cir.attention"(%q, %k, %v, %scale, %g) {group_axis = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1>} : (tensor<2x8x3x4xf32>, tensor<3x3x5x4xf32>, tensor<3x3x5x6xf32>, f32, i64) -> tensor<2x8x3x6xf32>
  return %o : tensor<2x8x3x6xf32>
}

// -----

func.func @attention_group_axis_without_group(%q: tensor<8x3x4xf32>, %k: tensor<8x5x4xf32>, %v: tensor<8x5x6xf32>) -> tensor<8x3x6xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' group_axis needs the group operand}}
  %o = "cir.attention"(%q, %k, %v, %scale) {group_axis = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<8x3x4xf32>, tensor<8x5x4xf32>, tensor<8x5x6xf32>, f32) -> tensor<8x3x6xf32>
  return %o : tensor<8x3x6xf32>
}

// -----

func.func @attention_group_on_a_grouped_axis(%q: tensor<8x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %g: i64) -> tensor<8x3x6xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' group must be an integer or index scalar, with group_axis (i64) naming a leading axis whose kv_group is 1}}
  %o = "cir.attention"(%q, %k, %v, %scale, %g) {group_axis = 0 : i64, kv_group = array<i64: 4>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1>} : (tensor<8x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32, i64) -> tensor<8x3x6xf32>
  return %o : tensor<8x3x6xf32>
}

// -----

func.func @attention_float_group(%q: tensor<8x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %g: f32) -> tensor<8x3x6xf32> {
  %scale = arith.constant 0.5 : f32
  // expected-error@+1 {{'cir.attention' group must be an integer or index scalar, with group_axis (i64) naming a leading axis whose kv_group is 1}}
  %o = "cir.attention"(%q, %k, %v, %scale, %g) {group_axis = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1>} : (tensor<8x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32, f32) -> tensor<8x3x6xf32>
  return %o : tensor<8x3x6xf32>
}

// -----

// A causal attention over more keys than queries (a KV cache of 2 earlier keys).
// CHECK-LABEL: func.func @attention_causal_good(
// CHECK: "cir.attention"({{.*}}) {causal_offset = 2 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>}
func.func @attention_causal_good(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x6xf32>) -> tensor<3x6xf32> {
  %scale = arith.constant 0.5 : f32
  %o = "cir.attention"(%q, %k, %v, %scale) {causal_offset = 2 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x6xf32>, f32) -> tensor<3x6xf32>
  return %o : tensor<3x6xf32>
}

// -----

func.func @attention_good(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x6xf32>, %mask: tensor<3x5xi1>) -> tensor<3x6xf32> {
  %scale = arith.constant 0.5 : f32
  %o = "cir.attention"(%q, %k, %v, %scale, %mask) {mask_dims = array<i64: 0, 1>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>} : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x6xf32>, f32, tensor<3x5xi1>) -> tensor<3x6xf32>
  return %o : tensor<3x6xf32>
}
