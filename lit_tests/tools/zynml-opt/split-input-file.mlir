// --split-input-file: each chunk is parsed and run on its own, outputs are joined by
// `// -----`, and diagnostics give lines of the whole file (like mlir-opt).
// RUN: not zynml-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not zynml-opt %s 2>&1 | filecheck %s --check-prefix=WHOLE

func.func @first() {
  return
}

// -----

func.func @second(%a: i32) -> i32 {
  return %a : i32
}

// -----

func.func @third() {
  "cir.launch"() : () -> ()
  return
}

// -----

func.func @fourth() {
  return %missing : i32
}

// The chunk errors are at lines 19 and 26 of this file, each error once (the verifier
// adds a note showing the op).
// ERR: split-input-file.mlir:19:3: error: unregistered operation 'cir.launch' found in dialect ('cir') that does not allow unknown operations
// ERR-NEXT: {{^}}  "cir.launch"() : () -> ()
// ERR-NEXT: {{^  \^}}
// ERR-NEXT: split-input-file.mlir:19:3: note: see current operation:
// ERR-NEXT: {{^}}  "cir.launch"() : () -> ()
// ERR-NEXT: {{^  \^}}
// ERR-NEXT: split-input-file.mlir:26:10: error: use of undeclared SSA value name
// ERR-NEXT: {{^}}  return %missing : i32
// ERR-NEXT: {{^         \^}}
// ERR-NOT: error:

// Without the flag, the marker is a comment and the file is one module: parsing stops at
// the syntax error of line 26, before the verifier would see line 19.
// WHOLE: split-input-file.mlir:26:10: error: use of undeclared SSA value name
// WHOLE-NOT: error:
