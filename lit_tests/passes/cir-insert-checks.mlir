// cir-insert-checks (checked mode only) gives every read at an index not proven in
// range (and every write of a `mut` input at such an index) and every integer
// division by a divisor not known to be nonzero a reduce(max) compute over the loops
// around it, yielding a violation code where the check fails and -1 elsewhere; main
// returns the largest code as one more result ("zynml.checks"), the check table is
// the module's `zynml.checks` attribute, and divisors become `d == 0 ? 1 : d`.
// RUN: zynml-opt %s --split-input-file --cir-insert-checks | filecheck %s
// RUN: zynml-opt %s --split-input-file --cir-insert-checks | zynml-opt --split-input-file | filecheck %s

// A gather: its check copies the loop and the index read, then compares.
// CHECK-LABEL: module attributes {zynml.checks = "[{\22kind\22: \22read\22, \22file\22: \22p.zyn\22, \22line\22: 4, \22col\22: 18, \22tensor\22: \22x\22, \22dim\22: 0, \22size\22: 4}]"}
// CHECK: func.func @gather({{.*}}) -> (tensor<5xf32>, tensor<i64>) attributes {zynml.inputs = ["x", "idx"], zynml.outputs = ["y", "zynml.checks"]}
// CHECK: [[CODE:%[0-9]+]] = "cir.compute"(%{{.*}}) {body = @gather_body_check0, kind = "reduce", {{.*}}reduce = "max"} : (tensor<4xf32>, tensor<5xi64>) -> i64
// CHECK: [[Y:%[0-9]+]] = "cir.compute"(%{{.*}}) {body = @gather_body, kind = "elementwise"
// CHECK: [[T:%[a-z0-9_]+]] = tensor.from_elements [[CODE]] : tensor<i64>
// CHECK: return [[Y]], [[T]] : tensor<5xf32>, tensor<i64>
// CHECK-LABEL: func.func private @gather_body_check0(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<4xf32>, [[IDX:%[a-z0-9_]+]]: tensor<5xi64>, %{{.*}}: tensor<i64>) attributes {cir.body}
// CHECK: scf.for [[I:%[a-z0-9_]+]] =
// CHECK: [[J:%[0-9]+]] = "cir.load"([[IDX]], [[I]])
// CHECK-NOT: "cir.load"([[X]]
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge
// CHECK: [[V:%[0-9]+]] = arith.select %{{.*}}, %{{.*}}, %c-1_i64 : i64
// CHECK: "cir.yield"([[V]]) : (i64) -> ()
func.func @gather(%x: tensor<4xf32>, %idx: tensor<5xi64>) -> tensor<5xf32> attributes {zynml.inputs = ["x", "idx"], zynml.outputs = ["y"]} {
  %y = "cir.compute"(%x, %idx) {kind = "elementwise", body = @gather_body, names = ["x", "idx"],
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>, tensor<5xi64>) -> tensor<5xf32>
  return %y : tensor<5xf32>
}
func.func private @gather_body(%x: tensor<4xf32>, %idx: tensor<5xi64>, %out: tensor<5xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  scf.for %i = %c0 to %c5 step %c1 {
    %j = "cir.load"(%idx, %i) : (tensor<5xi64>, index) -> i64
    %k = arith.index_cast %j : i64 to index
    %v = "cir.load"(%x, %k) : (tensor<4xf32>, index) -> f32 loc("p.zyn":4:18)
    "cir.store"(%v, %out, %i) : (f32, tensor<5xf32>, index) -> ()
  }
  return
}

// -----

// Reads proven in range (`x[i]`, `x[i + 2]` over 0..6 of 8 elements) need no check: the
// module is left as it was.
// CHECK-LABEL: module {
// CHECK: func.func @in_range({{.*}}) -> tensor<6xf32> attributes {zynml.outputs = ["y"]}
// CHECK-NOT: reduce = "max"
// CHECK-NOT: check
func.func @in_range(%x: tensor<8xf32>) -> tensor<6xf32> attributes {zynml.outputs = ["y"]} {
  %y = "cir.compute"(%x) {kind = "elementwise", body = @in_range_body,
      operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>) -> tensor<6xf32>
  return %y : tensor<6xf32>
}
func.func private @in_range_body(%x: tensor<8xf32>, %out: tensor<6xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  scf.for %i = %c0 to %c6 step %c1 {
    %a = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    %k = arith.addi %i, %c2 : index
    %b = "cir.load"(%x, %k) : (tensor<8xf32>, index) -> f32
    %s = arith.addf %a, %b : f32
    "cir.store"(%s, %out, %i) : (f32, tensor<6xf32>, index) -> ()
  }
  return
}

// -----

// A remainder by a scalar input: the body divides by `m == 0 ? 1 : m`, and the check
// yields where m is 0 (the code carries the dividend). The read `x[i % m]` is checked
// too: its range depends on m.
// CHECK-LABEL: module attributes {zynml.checks = "[{\22kind\22: \22remainder\22
// CHECK-SAME: \22kind\22: \22read\22
// CHECK: func.func @modulo(
// CHECK: "cir.compute"(%{{.*}}) {body = @modulo_body_check0, kind = "reduce"
// CHECK: "cir.compute"(%{{.*}}) {body = @modulo_body_check1, kind = "reduce"
// CHECK: [[MAX:%[0-9]+]] = arith.maxsi
// CHECK: tensor.from_elements [[MAX]]
// CHECK-LABEL: func.func private @modulo_body(
// CHECK-SAME: %{{.*}}: tensor<7xf32>, [[M:%[a-z0-9_]+]]: i64,
// CHECK: [[ZERO:%[a-z0-9_]+]] = arith.cmpi eq, [[M]], %{{.*}} : i64
// CHECK: [[SAFE:%[0-9]+]] = arith.select [[ZERO]], %{{.*}}, [[M]] : i64
// CHECK: arith.remsi %{{.*}}, [[SAFE]] : i64
// CHECK-LABEL: func.func private @modulo_body_check0(
// CHECK-SAME: %{{.*}}: tensor<7xf32>, [[CM:%[a-z0-9_]+]]: i64,
// CHECK: [[BAD:%[0-9]+]] = arith.cmpi eq, [[CM]], %{{.*}} : i64
// CHECK: arith.select [[BAD]]
// CHECK: "cir.yield"
func.func @modulo(%x: tensor<7xf32>, %m: i64) -> tensor<7xf32> attributes {zynml.outputs = ["y"]} {
  %y = "cir.compute"(%x, %m) {kind = "elementwise", body = @modulo_body, names = ["x", "m"],
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<7xf32>, i64) -> tensor<7xf32>
  return %y : tensor<7xf32>
}
func.func private @modulo_body(%x: tensor<7xf32>, %m: i64, %out: tensor<7xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  scf.for %i = %c0 to %c7 step %c1 {
    %i64 = arith.index_cast %i : index to i64
    %r = arith.remsi %i64, %m : i64
    %k = arith.index_cast %r : i64 to index
    %v = "cir.load"(%x, %k) : (tensor<7xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<7xf32>, index) -> ()
  }
  return
}

// -----

// A read in the else branch of an `if` is checked only where the condition is false.
// CHECK-LABEL: func.func private @guarded_body_check0(
// CHECK: [[C:%[0-9]+]] = arith.cmpi slt, %{{.*}}, %{{.*}} : i64
// CHECK: [[NOTC:%[0-9]+]] = arith.xori [[C]], %true : i1
// CHECK: [[BAD:%[0-9]+]] = arith.ori
// CHECK: arith.andi [[BAD]], [[NOTC]] : i1
// CHECK: "cir.yield"
func.func @guarded(%x: tensor<4xf32>, %idx: tensor<3xi64>) -> tensor<3xf32> attributes {zynml.outputs = ["y"]} {
  %y = "cir.compute"(%x, %idx) {kind = "elementwise", body = @guarded_body, names = ["x", "idx"],
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>, tensor<3xi64>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}
func.func private @guarded_body(%x: tensor<4xf32>, %idx: tensor<3xi64>, %out: tensor<3xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : i64
  scf.for %i = %c0 to %c3 step %c1 {
    %j = "cir.load"(%idx, %i) : (tensor<3xi64>, index) -> i64
    %small = arith.cmpi slt, %j, %c4 : i64
    scf.if %small {
      %v = arith.constant 0.0 : f32
      "cir.store"(%v, %out, %i) : (f32, tensor<3xf32>, index) -> ()
    } else {
      %k = arith.index_cast %j : i64 to index
      %v = "cir.load"(%x, %k) : (tensor<4xf32>, index) -> f32
      "cir.store"(%v, %out, %i) : (f32, tensor<3xf32>, index) -> ()
    }
  }
  return
}

// -----

// An index carried by a loop cannot be rebuilt by a flat copy of the loops: no check (the
// read stays clamped by cir-to-linalg), and the module is left as it was.
// CHECK-LABEL: module {
// CHECK-NOT: check
func.func @carried(%x: tensor<4xf32>) -> tensor<f32> attributes {zynml.outputs = ["s"]} {
  %s = "cir.compute"(%x) {kind = "scan", body = @carried_body,
      operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
func.func private @carried_body(%x: tensor<4xf32>, %out: tensor<f32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %last = scf.for %i = %c0 to %c3 step %c1 iter_args(%k = %c0) -> (index) {
    %v = "cir.load"(%x, %k) : (tensor<4xf32>, index) -> f32
    "cir.store"(%v, %out) : (f32, tensor<f32>) -> ()
    %next = arith.addi %k, %c1 : index
    scf.yield %next : index
  }
  return
}

// -----
// A scatter into a `mut` input (`grad_w[ids[t], d] += ...`, a store with `combine`)
// checks its data-dependent index against the input's shape (the `inits` operand's: the
// result's own type is dynamic); the loop variables (bounds made constant, as
// cir-shape-propagation leaves them) are in range and need none.

module {
  func.func @main(%arg0: tensor<3x2xf32>, %arg1: tensor<3xi64>, %arg2: tensor<3x2xf32>) -> tensor<?x?xf32> attributes {zynml.inputs = ["grad_w", "ids", "grad_out"], zynml.outputs = ["grad_w"]} {
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %0 = "cir.compute"(%arg0, %arg1, %arg2, %c3, %c2, %c3, %c2) {body = @grad_w_body, inits = array<i64: 0>, kind = "scatter", names = ["grad_w", "ids", "grad_out", "tokens", "dim"], operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0>, out_dims = array<i64: 5, 6>} : (tensor<3x2xf32>, tensor<3xi64>, tensor<3x2xf32>, index, index, index, index) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }
  func.func private @grad_w_body(%arg0: tensor<3x2xf32>, %arg1: tensor<3xi64>, %arg2: tensor<3x2xf32>, %arg3: index, %arg4: index, %arg5: index, %arg6: index, %arg7: tensor<?x?xf32>) attributes {cir.body} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    scf.for %arg8 = %c0 to %c3 step %c1 {
      scf.for %arg9 = %c0 to %c2 step %c1 {
        %0 = "cir.load"(%arg1, %arg8) : (tensor<3xi64>, index) -> i64
        %1 = arith.index_cast %0 : i64 to index
        %2 = "cir.load"(%arg2, %arg8, %arg9) : (tensor<3x2xf32>, index, index) -> f32
        "cir.store"(%2, %arg7, %1, %arg9) {combine = "+"} : (f32, tensor<?x?xf32>, index, index) -> ()
      }
    }
    return
  }
}

// CHECK-LABEL: module attributes {zynml.checks = "[{\22kind\22: \22write\22, {{.*}}\22tensor\22: \22grad_w\22, \22dim\22: 0, \22size\22: 3}]"}
// CHECK: func.func @main({{.*}}) -> (tensor<?x?xf32>, tensor<i64>) attributes {{{.*}}zynml.outputs = ["grad_w", "zynml.checks"]}
// CHECK: "cir.compute"{{.*}}body = @grad_w_body_check0{{.*}}kind = "reduce"{{.*}}reduce = "max"
// CHECK: func.func private @grad_w_body_check0(
// CHECK: %[[ID:.*]] = "cir.load"(%{{.*}}, %{{.*}}) : (tensor<3xi64>, index) -> i64
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge, %{{.*}}, %c3_i64
// CHECK: "cir.yield"
// CHECK-NOT: _check1

// -----
// A write of a `mut` input at a run-time position (`cache[pos, d] = ...`, a store
// without `combine`) checks the position against the input's shape too; the loop
// variable's index is in range and needs none.

module {
  func.func @main(%arg0: tensor<5x2xf32>, %arg1: tensor<2xf32>, %arg2: i64) -> tensor<?x?xf32> attributes {zynml.inputs = ["cache", "x", "pos"], zynml.outputs = ["cache"]} {
    %c2 = arith.constant 2 : index
    %c5 = arith.constant 5 : index
    %0 = "cir.compute"(%arg0, %arg1, %arg2, %c2, %c5, %c2) {body = @cache_body, inits = array<i64: 0>, kind = "elementwise", names = ["cache", "x", "pos", "dim"], operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, out_dims = array<i64: 4, 5>} : (tensor<5x2xf32>, tensor<2xf32>, i64, index, index, index) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }
  func.func private @cache_body(%arg0: tensor<5x2xf32>, %arg1: tensor<2xf32>, %arg2: i64, %arg3: index, %arg4: index, %arg5: index, %arg6: tensor<?x?xf32>) attributes {cir.body} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    scf.for %arg7 = %c0 to %c2 step %c1 {
      %0 = arith.index_cast %arg2 : i64 to index
      %1 = "cir.load"(%arg1, %arg7) : (tensor<2xf32>, index) -> f32
      "cir.store"(%1, %arg6, %0, %arg7) : (f32, tensor<?x?xf32>, index, index) -> ()
    }
    return
  }
}

// CHECK-LABEL: module attributes {zynml.checks = "[{\22kind\22: \22write\22, {{.*}}\22tensor\22: \22cache\22, \22dim\22: 0, \22size\22: 5}]"}
// CHECK: func.func @main({{.*}}) -> (tensor<?x?xf32>, tensor<i64>) attributes {{{.*}}zynml.outputs = ["cache", "zynml.checks"]}
// CHECK: "cir.compute"{{.*}}body = @cache_body_check0{{.*}}kind = "reduce"{{.*}}reduce = "max"
// CHECK: func.func private @cache_body_check0(
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge, %{{.*}}, %c5_i64
// CHECK: "cir.yield"
// CHECK-NOT: _check1
