// --verify-diagnostics succeeds when the diagnostics are exactly those the comments
// expect: on the same line, @+N / @-N, @above / @below (skipping lines that hold only
// designators), notes, and -re patterns.
// RUN: zynml-opt %s --split-input-file --verify-diagnostics

func.func @same_line() {
  "cir.launch"() : () -> () // expected-error {{unregistered operation 'cir.launch' found in dialect ('cir')}}
  return
}

// -----

func.func @offsets() -> i32 {
  // expected-error@+2 {{type of return operand 0 ('i64') doesn't match function result type ('i32')}}
  %c = arith.constant 1 : i64
  return %c : i64
}

// -----

func.func @f() {
  return
}
// expected-error@below {{redefinition of symbol named 'f'}}
// expected-note@-4 {{see existing symbol definition here}}
func.func @f() {
  return
}

// -----

func.func @above() -> i32 {
  %c = arith.constant 1 : i64
  return %c : i64
  // expected-error@above {{type of return operand 0}}
}

// -----

func.func @regex() -> i32 {
  %c = arith.constant 1 : i64
  // expected-error-re@+1 {{doesn't match function result type ('i{{[0-9]+}}')}}
  return %c : i64
}
