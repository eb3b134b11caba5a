// The outputs of the chunks are joined by `// -----`, so the output splits again.
// RUN: zynml-opt %s --split-input-file | filecheck %s
// RUN: zynml-opt %s --split-input-file | zynml-opt --split-input-file | filecheck %s
// RUN: zynml-opt %s --split-input-file --canonicalize | filecheck %s --check-prefix=CANON

// CHECK: module {
// CHECK-NEXT: func.func @first(
// CHECK: // -----
// CHECK-NEXT: module {
// CHECK-NEXT: func.func @second(
// CHECK: // -----
// CHECK-NEXT: module {
// CHECK-NEXT: }
// CHECK-NOT: // -----

// CANON-LABEL: func.func @first(
// CANON-SAME: [[A:%[a-z0-9_]+]]: i32) -> i32
// CANON-NEXT: return [[A]] : i32
// CANON-LABEL: func.func @second(
func.func @first(%a: i32) -> i32 {
  %zero = arith.constant 0 : i32
  %r = arith.addi %a, %zero : i32
  return %r : i32
}

// -----

func.func @second() {
  return
}

// -----

// An empty chunk is an empty module.
