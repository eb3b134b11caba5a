// Invalid input of any kind is a located error and exit code 1, never a traceback.
// RUN: echo 'this is not MLIR' | not zynml-opt 2>&1 | filecheck %s --check-prefix=GARBAGE
// RUN: echo 'func.func @f( {' | not zynml-opt - 2>&1 | filecheck %s --check-prefix=SYNTAX
// RUN: not zynml-opt %s 2>&1 | filecheck %s --check-prefix=VERIFY
// RUN: not zynml-opt %s.does-not-exist 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not zynml-opt %s -x=fortran 2>&1 | filecheck %s --check-prefix=LANGUAGE

// GARBAGE: <stdin>:1:1: error: custom op 'this' is unknown
// GARBAGE-NEXT: this is not MLIR
// GARBAGE-NEXT: {{^\^}}
// GARBAGE-NOT: Traceback
// SYNTAX: <stdin>:1:14: error: expected non-function type
// MISSING: zynml-opt: error: cannot read '{{.*}}invalid-input.mlir.does-not-exist': No such file or directory
// LANGUAGE: zynml-opt: error: '--x=fortran': the input language is mlir or zyn

// A verifier error (here IRDL's, on a cir op) is located too.
func.func @bad_load(%t: tensor<4xf32>, %i: i32) -> f32 {
  %v = "cir.load"(%t, %i) : (tensor<4xf32>, i32) -> f32
  return %v : f32
}
// VERIFY: invalid-input.mlir:18:8: error: expected 'index' but got 'i32'
// VERIFY-NEXT: {{^}}  %v = "cir.load"(%t, %i) : (tensor<4xf32>, i32) -> f32
// VERIFY-NEXT: {{^       \^}}
// VERIFY-NOT: Traceback
