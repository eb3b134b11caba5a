// Output options: generic op form (which parses again), locations, pass timing on stderr,
// --verify-each=false, reading stdin.
// RUN: zynml-opt %s --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: zynml-opt %s --mlir-print-op-generic | zynml-opt | filecheck %s --check-prefix=PRETTY
// RUN: zynml-opt %s --mlir-print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: zynml-opt %s --canonicalize --mlir-timing 2>&1 >/dev/null | filecheck %s --check-prefix=TIMING
// RUN: zynml-opt %s --canonicalize --verify-each=false | filecheck %s --check-prefix=PRETTY
// RUN: zynml-opt < %s | filecheck %s --check-prefix=PRETTY
// RUN: zynml-opt - < %s | filecheck %s --check-prefix=PRETTY

// GENERIC: "func.func"() <{function_type = (i32) -> i32, sym_name = "id"}> ({
// GENERIC: "func.return"
// PRETTY: func.func @id([[A:%[a-z0-9_]+]]: i32) -> i32 {
// PRETTY-NEXT: return [[A]] : i32
// LOC: return %{{.*}} : i32 loc({{#loc[0-9]*}})
// LOC: loc("{{.*}}print-options.mlir":{{[0-9]+}}:{{[0-9]+}})
// TIMING: Execution time report
// TIMING: Canonicalizer
func.func @id(%a: i32) -> i32 {
  return %a : i32
}
