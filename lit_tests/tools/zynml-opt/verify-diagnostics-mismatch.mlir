// When diagnostics and expectations differ, zynml-opt exits 1 and reports, like mlir-opt:
// a diagnostic nobody expected at its own location, an expectation nothing met at the
// comment, a diagnostic of another severity as a near miss.
// RUN: not zynml-opt %s --split-input-file --verify-diagnostics 2>&1 | filecheck %s

func.func @unexpected() {
  "cir.launch"() : () -> ()
  return
}
// CHECK: verify-diagnostics-mismatch.mlir:7:3: error: unexpected error: unregistered operation 'cir.launch'

// -----

func.func @missing() {
  // expected-error@+1 {{this never happens}}
  return
}
// CHECK: verify-diagnostics-mismatch.mlir:15:6: error: expected error "this never happens" was not produced

// -----

func.func @wrong_text() -> i32 {
  %c = arith.constant 1 : i64
  return %c : i64 // expected-error {{something else}}
}
// CHECK: verify-diagnostics-mismatch.mlir:24:3: error: unexpected error: type of return operand 0
// CHECK: verify-diagnostics-mismatch.mlir:24:22: error: expected error "something else" was not produced

// -----

func.func @wrong_severity() -> i32 {
  %c = arith.constant 1 : i64
  return %c : i64 // expected-warning {{type of return operand 0}}
}
// CHECK: verify-diagnostics-mismatch.mlir:33:22: error: 'error' diagnostic emitted when expecting a 'warning'

// -----

func.func @fine() {
  return
}
// CHECK-NOT: error:
