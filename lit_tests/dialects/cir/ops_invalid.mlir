// Invalid cir, one mistake per chunk: first what IRDL rejects while parsing (operand and
// result counts, index operands, attribute kinds, operandSegmentSizes, unknown ops), then
// every error of the cir-verify pass (passes/cir_verify.py), in the order it checks them.
// RUN: zynml-opt %s --split-input-file --verify-diagnostics --cir-verify

func.func @load_index_type(%t: tensor<4xf32>, %i: i32) -> f32 {
  // expected-error@+1 {{expected 'index' but got 'i32'}}
  %v = "cir.load"(%t, %i) : (tensor<4xf32>, i32) -> f32
  return %v : f32
}

// -----

func.func @load_without_result(%t: tensor<4xf32>, %i: index) {
  // expected-error@+1 {{op expects exactly 1 results, but got 0}}
  "cir.load"(%t, %i) : (tensor<4xf32>, index) -> ()
  return
}

// -----

func.func @load_without_source() {
  // expected-error@+1 {{op expects at least 1 operands, but got 0}}
  %v = "cir.load"() : () -> f32
  return
}

// -----

func.func @store_with_result(%v: f32, %t: tensor<4xf32>, %i: index) {
  // expected-error@+1 {{op expects exactly 0 results, but got 1}}
  %r = "cir.store"(%v, %t, %i) : (f32, tensor<4xf32>, index) -> i32
  return
}

// -----

func.func @store_index_type(%v: f32, %t: tensor<4xf32>, %i: f32) {
  // expected-error@+1 {{expected 'index' but got 'f32'}}
  "cir.store"(%v, %t, %i) : (f32, tensor<4xf32>, f32) -> ()
  return
}

// -----

func.func @store_without_dest(%v: f32) {
  // expected-error@+1 {{op expects at least 2 operands, but got 1}}
  "cir.store"(%v) : (f32) -> ()
  return
}

// -----

func.func @yield_three_operands(%v: f32, %i: index) {
  // expected-error@+1 {{op expects at most 2 operands, but got 3}}
  "cir.yield"(%v, %i, %i) : (f32, index, index) -> ()
  return
}

// -----

func.func @yield_index_type(%v: f32, %i: f32) {
  // expected-error@+1 {{expected 'index' but got 'f32'}}
  "cir.yield"(%v, %i) : (f32, f32) -> ()
  return
}

// -----

func.func @yield_nothing() {
  // expected-error@+1 {{op expects at least 1 operands, but got 0}}
  "cir.yield"() : () -> ()
  return
}

// -----

func.func @barrier_operand(%i: index) {
  // expected-error@+1 {{op expects exactly 0 operands, but got 1}}
  "cir.barrier"(%i) : (index) -> ()
  return
}

// -----

func.func @barrier_result() {
  // expected-error@+1 {{op expects exactly 0 results, but got 1}}
  %r = "cir.barrier"() : () -> index
  return
}

// -----

func.func @alloc_index_type(%n: i32) {
  // expected-error@+1 {{expected 'index' but got 'i32'}}
  %t = "cir.alloc"(%n) : (i32) -> tensor<?xf32>
  return
}

// -----

func.func @alloc_without_result(%n: index) {
  // expected-error@+1 {{op expects exactly 1 results, but got 0}}
  "cir.alloc"(%n) : (index) -> ()
  return
}

// -----

func.func @print_without_format(%i: index) {
  // expected-error@+1 {{'cir.print' op attribute "format" is expected but not provided}}
  "cir.print"(%i) {operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (index) -> ()
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'cir.compute' op attribute "kind" is expected but not provided}}
  %y = "cir.compute"(%x) {body = @body, operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{expected base attribute 'builtin.string' but got 'builtin.integer'}}
  %y = "cir.compute"(%x) {kind = 1 : i64, body = @body, operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'cir.compute' op attribute "body" is expected but not provided}}
  %y = "cir.compute"(%x) {kind = "elementwise", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{expected base attribute 'builtin.symbol_ref' but got 'builtin.string'}}
  %y = "cir.compute"(%x) {kind = "elementwise", body = "body", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'operandSegmentSizes' attribute is expected but not provided}}
  %y = "cir.compute"(%x) {kind = "elementwise", body = @body} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{element 0 in 'operandSegmentSizes' attribute must be equal to 0 or 1}}
  %y = "cir.compute"(%x) {kind = "elementwise", body = @body, operandSegmentSizes = array<i32: 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'operandSegmentSizes' attribute for specifying operand segments must have 16 elements, but got 1}}
  %y = "cir.compute"(%x) {kind = "elementwise", body = @body, operandSegmentSizes = array<i32: 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @compute_without_result(%x: tensor<4xf32>) {
  // expected-error@+1 {{op expects exactly 1 results, but got 0}}
  "cir.compute"(%x) {kind = "elementwise", body = @body, operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>) -> ()
  return
}

// -----

func.func @unknown_op() {
  // expected-error@+1 {{unregistered operation 'cir.launch' found in dialect ('cir') that does not allow unknown operations}}
  "cir.launch"() : () -> ()
  return
}

// -----

func.func @not_a_body(%t: tensor<4xf32>, %i: index) -> f32 {
  // expected-error@+1 {{'cir.load' is only valid in a compute body function (marked cir.body)}}
  %v = "cir.load"(%t, %i) : (tensor<4xf32>, index) -> f32
  return %v : f32
}

// -----

func.func @barrier_not_in_body() {
  // expected-error@+1 {{'cir.barrier' is only valid in a compute body function (marked cir.body)}}
  "cir.barrier"() : () -> ()
  return
}

// -----

func.func @print_not_in_body(%i: index) {
  // expected-error@+1 {{'cir.print' is only valid in a compute body function (marked cir.body)}}
  "cir.print"(%i) {format = "{}", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (index) -> ()
  return
}

// -----

func.func @alloc_not_in_body(%n: index) {
  // expected-error@+1 {{'cir.alloc' is only valid in a compute body function (marked cir.body)}}
  %t = "cir.alloc"(%n) : (index) -> tensor<?xf32>
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'cir.compute' needs a non-empty kind}}
  %y = "cir.compute"(%x, %c4) {kind = "", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'cir.compute' body @missing is not a function of this module}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @missing, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'cir.compute' body @body is not marked 'cir.body'}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'cir.compute' body @body is a declaration; it needs a body}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'cir.compute' of kind reduce needs 'reduce' to be one of +, *, min, max, and, or, argmin, argmax; got None}}
  %y = "cir.compute"(%x, %c4) {kind = "reduce", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{of kind reduce needs 'reduce' to be one of +, *, min, max, and, or, argmin, argmax; got 'median'}}
  %y = "cir.compute"(%x, %c4) {kind = "reduce", reduce = "median", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'reduce' attribute on a compute of kind 'elementwise'}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", reduce = "+", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{body @body takes 2 arguments; expected 3 (the 2 operands, then out)}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c1 step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{operand #0 has type tensor<4xf32> but body @body takes tensor<8xf32>}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<8xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> f32 {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{a 'fused' compute has a tensor result; only 'reduce' computes give a scalar (got f32)}}
  %y = "cir.compute"(%x, %c4) {kind = "fused", body = @body, out_dims = array<i64>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> f32
  return %y : f32
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<f32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out) : (f32, tensor<f32>) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{body @body takes out as tensor<8xf32>; expected tensor<4xf32>}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<8xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'cir.compute' needs 'out_dims' (one operand index per result dimension)}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'out_dims' has 2 entries for a result of rank 1}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1, 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'out_dims' entry 0 is not an index operand}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 0>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'out_dims' entry 5 is not an index operand}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 5>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    // expected-error@+1 {{'cir.store' may only write 'out' (the body's last argument)}}
    "cir.store"(%v, %x, %i) : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %c4) {kind = "scatter", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    // expected-error@+1 {{'cir.store' combine must be "+", "min", "max", "umin" or "umax" (a scatter)}}
    "cir.store"(%v, %out, %i) {combine = "*"} : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %c4) {kind = "scatter", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    // expected-error@+1 {{'cir.store' combine = "umin" (unsigned) needs an integer value}}
    "cir.store"(%v, %out, %i) {combine = "umin"} : (f32, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    // expected-error@+1 {{'cir.alloc' takes one extent per dimension of its result; got 2 for tensor<?xf32>}}
    %buf = "cir.alloc"(%n, %n) : (index, index) -> tensor<?xf32>
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    // expected-error@+1 {{'cir.yield' in the body of a 'elementwise' compute; only reductions yield}}
    "cir.yield"(%v) : (f32) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    // expected-error@+1 {{'cir.load' needs a ranked tensor, got index}}
    %w = "cir.load"(%n) : (index) -> f32
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    // expected-error@+1 {{'cir.load' uses 2 indices on a tensor of rank 1}}
    %w = "cir.load"(%x, %i, %i) : (tensor<4xf32>, index, index) -> f32
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    // expected-error@+1 {{'cir.load' element type f64 does not match f32}}
    %w = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f64
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    // expected-error@+1 {{'cir.store' element type index does not match f32}}
    "cir.store"(%i, %out, %i) : (index, tensor<4xf32>, index) -> ()
  }
  return
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @body, out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<4xf32>, index) -> f32
    // expected-error@+1 {{'cir.store' uses 0 indices on a tensor of rank 1}}
    "cir.store"(%v, %out) : (f32, tensor<4xf32>) -> ()
  }
  return
}

// -----

// `inits` names, per result, the operand it starts from (a `mut` input): one per result.
func.func @bad_inits(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c4 = arith.constant 4 : index
  // expected-error@+1 {{'inits' has 2 entries for 1 results}}
  %y = "cir.compute"(%x, %c4) {kind = "elementwise", body = @inits_body, inits = array<i64: 0, -1>,
      out_dims = array<i64: 1>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>, index) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @inits_body(%x: tensor<4xf32>, %n: index, %out: tensor<4xf32>) attributes {cir.body} {
  return
}
