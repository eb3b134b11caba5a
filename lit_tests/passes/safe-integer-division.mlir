// safe-integer-division gives each integer division or remainder whose divisor may trap
// (0; -1 under the smallest signed value) the divisor 1 in those cases, in functions
// and in linalg regions alike; safe constant divisors are left alone (see
// passes/safe_integer_division.py). IREE's CPU code gets it: x86 raises SIGFPE.
// RUN: zynml-opt %s --split-input-file --safe-integer-division | filecheck %s
// RUN: zynml-opt %s --split-input-file --safe-integer-division | zynml-opt --split-input-file | filecheck %s
// The result is a fixed point: a second run changes nothing.
// RUN: zynml-opt %s --split-input-file --safe-integer-division > %t.once
// RUN: zynml-opt %t.once --split-input-file --safe-integer-division > %t.twice
// RUN: diff %t.once %t.twice

// Signed: divisor 0, or -1 with the dividend i64_min (-9223372036854775808).
// CHECK-LABEL: func.func @signed(
// CHECK-SAME: [[A:%[a-z0-9_-]+]]: i64, [[D:%[a-z0-9_-]+]]: i64)
// CHECK: [[ZERO:%[a-z0-9_-]+]] = arith.constant 0 : i64
// CHECK: [[Z:%[0-9]+]] = arith.cmpi eq, [[D]], [[ZERO]] : i64
// CHECK: [[MONE:%[a-z0-9_-]+]] = arith.constant -1 : i64
// CHECK: [[M:%[0-9]+]] = arith.cmpi eq, [[D]], [[MONE]] : i64
// CHECK: [[MIN:%[a-z0-9_-]+]] = arith.constant -9223372036854775808 : i64
// CHECK: [[L:%[0-9]+]] = arith.cmpi eq, [[A]], [[MIN]] : i64
// CHECK: [[O:%[0-9]+]] = arith.andi [[M]], [[L]] : i1
// CHECK: [[BAD:%[0-9]+]] = arith.ori [[Z]], [[O]] : i1
// CHECK: [[ONE:%[a-z0-9_-]+]] = arith.constant 1 : i64
// CHECK: [[S:%[0-9]+]] = arith.select [[BAD]], [[ONE]], [[D]] : i64
// CHECK: arith.divsi [[A]], [[S]] : i64
func.func @signed(%a: i64, %d: i64) -> i64 {
  %q = arith.divsi %a, %d : i64
  return %q : i64
}

// -----

// Unsigned: only 0 traps. i32 remainders; floordiv on index in a linalg region.
// CHECK-LABEL: func.func @unsigned(
// CHECK-SAME: [[A:%[a-z0-9_-]+]]: i32, [[D:%[a-z0-9_-]+]]: i32)
// CHECK: [[Z:%[0-9]+]] = arith.cmpi eq, [[D]], {{%[a-z0-9_-]+}} : i32
// CHECK-NOT: arith.ori
// CHECK: [[S:%[0-9]+]] = arith.select [[Z]], {{%[a-z0-9_-]+}}, [[D]] : i32
// CHECK: arith.remui [[A]], [[S]] : i32
func.func @unsigned(%a: i32, %d: i32) -> i32 {
  %r = arith.remui %a, %d : i32
  return %r : i32
}

// -----

// CHECK-LABEL: func.func @in_a_generic(
// CHECK: linalg.generic
// CHECK: ^bb0([[IN:%[a-z0-9_-]+]]: index, [[K:%[a-z0-9_-]+]]: index, {{%[a-z0-9_-]+}}: index):
// CHECK: [[MIN:%[a-z0-9_-]+]] = arith.constant -9223372036854775808 : index
// CHECK: arith.cmpi eq, [[IN]], [[MIN]] : index
// CHECK: [[S:%[0-9]+]] = arith.select {{%[0-9]+}}, {{%[a-z0-9_-]+}}, [[K]] : index
// CHECK: arith.floordivsi [[IN]], [[S]] : index
#map = affine_map<(d0) -> (d0)>
func.func @in_a_generic(%x: tensor<5xindex>, %k: tensor<5xindex>) -> tensor<5xindex> {
  %e = tensor.empty() : tensor<5xindex>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%x, %k : tensor<5xindex>, tensor<5xindex>) outs(%e : tensor<5xindex>) {
  ^bb0(%in: index, %kk: index, %out: index):
    %q = arith.floordivsi %in, %kk : index
    linalg.yield %q : index
  } -> tensor<5xindex>
  return %r : tensor<5xindex>
}

// -----

// Safe constant divisors are left alone; a constant -1 is not safe for signed ops (the
// dividend may be i64_min), and is for unsigned ones.
// CHECK-LABEL: func.func @constants(
// CHECK-SAME: [[A:%[a-z0-9_-]+]]: i64)
// CHECK: [[C3:%[a-z0-9_-]+]] = arith.constant 3 : i64
// CHECK: [[CM1:%[a-z0-9_-]+]] = arith.constant -1 : i64
// CHECK: arith.divsi [[A]], [[C3]] : i64
// CHECK: [[S:%[0-9]+]] = arith.select {{%[0-9]+}}, {{%[a-z0-9_-]+}}, [[CM1]] : i64
// CHECK: arith.remsi [[A]], [[S]] : i64
// CHECK: arith.divui [[A]], [[CM1]] : i64
func.func @constants(%a: i64) -> (i64, i64, i64) {
  %c3 = arith.constant 3 : i64
  %cm1 = arith.constant -1 : i64
  %q = arith.divsi %a, %c3 : i64
  %r = arith.remsi %a, %cm1 : i64
  %u = arith.divui %a, %cm1 : i64
  return %q, %r, %u : i64, i64, i64
}
