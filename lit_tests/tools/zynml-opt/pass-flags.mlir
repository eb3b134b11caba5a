// Pass flags run in command-line order and mix zynml and upstream passes; options are
// --pass=opt=value (or pass{opt=value} in --pass-pipeline). The IR dumps show the order.
// RUN: zynml-opt %s --cir-verify --canonicalize --cse --mlir-print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=ORDER
// RUN: zynml-opt %s --cse --cir-verify --mlir-print-ir-before-all 2>&1 >/dev/null | filecheck %s --check-prefix=REVERSED
// RUN: zynml-opt %s --canonicalize=max-iterations=1 | filecheck %s --check-prefix=CANON
// RUN: zynml-opt %s | zynml-opt --canonicalize=max-iterations=1 | zynml-opt | filecheck %s --check-prefix=CANON
// RUN: zynml-opt %s --pass-pipeline='builtin.module(cir-verify,canonicalize{max-iterations=1},func.func(cse))' | filecheck %s --check-prefix=CANON

// ORDER: IR Dump After cir-verify (cir-verify)
// ORDER: IR Dump After Canonicalizer (canonicalize)
// ORDER: IR Dump After CSE (cse)
// REVERSED: IR Dump Before CSE (cse)
// REVERSED: IR Dump Before cir-verify (cir-verify)

// CANON-LABEL: func.func @fold(
// CANON-SAME: [[A:%[a-z0-9_]+]]: i32)
// CANON-NEXT: [[S:%[0-9]+]] = arith.addi [[A]], [[A]] : i32
// CANON-NEXT: return [[S]] : i32
func.func @fold(%a: i32) -> i32 {
  %zero = arith.constant 0 : i32
  %b = arith.addi %a, %zero : i32
  %s = arith.addi %b, %b : i32
  return %s : i32
}
