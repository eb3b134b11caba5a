// cir-join-stores makes the stores of one loop that together write a whole range of
// `out` one store over that range (passes/cir_join_stores.py): interleaved stores
// (out[.., 2p], out[.., 2p + 1]: the loop runs over 2n elements, p = e / 2, the value
// chosen by e % 2) and a row's halves (out[.., p], out[.., p + n]: p = e % n, chosen by
// e / n, n a run-time size recomputed at each use). Stores that leave gaps, accumulate,
// or sit beside another write stay as they are.
// RUN: zynml-opt %s --split-input-file --cir-join-stores | filecheck %s

// CHECK-LABEL: func.func private @interleaved(
// CHECK-SAME: [[X:%[a-z0-9]+]]: tensor<4x6xf32>, [[OUT:%[a-z0-9]+]]: tensor<4x6xf32>)
// CHECK-DAG: [[C3:%[a-z0-9_]+]] = arith.constant 3 : index
// CHECK: scf.for [[R:%[a-z0-9]+]] =
// CHECK: [[TWO:%[a-z0-9_]+]] = arith.constant 2 : index
// CHECK: [[N:%[0-9]+]] = arith.muli [[C3]], [[TWO]] : index
// CHECK: scf.for [[E:%[a-z0-9]+]] = %{{.*}} to [[N]] step
// CHECK-NEXT: [[P:%[0-9]+]] = arith.divui [[E]], [[TWO]] : index
// CHECK-NEXT: [[PART:%[0-9]+]] = arith.remui [[E]], [[TWO]] : index
// CHECK: [[A:%[0-9]+]] = "cir.load"([[X]], [[R]], %{{.*}})
// CHECK: [[B:%[0-9]+]] = "cir.load"([[X]], [[R]], %{{.*}})
// CHECK: [[D:%[0-9]+]] = arith.subf [[A]], [[B]] : f32
// CHECK: [[S:%[0-9]+]] = arith.addf [[A]], [[B]] : f32
// CHECK: [[ZERO:%[a-z0-9_]+]] = arith.constant 0 : index
// CHECK: [[FIRST:%[0-9]+]] = arith.cmpi eq, [[PART]], [[ZERO]] : index
// CHECK: [[V:%[0-9]+]] = arith.select [[FIRST]], [[D]], [[S]] : f32
// CHECK: "cir.store"([[V]], [[OUT]], [[R]], [[E]])
// CHECK-NOT: cir.store
// CHECK: return
func.func private @interleaved(%x: tensor<4x6xf32>, %out: tensor<4x6xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  scf.for %r = %c0 to %c4 step %c1 {
    scf.for %p = %c0 to %c3 step %c1 {
      %i0 = arith.muli %c2, %p : index
      %a = "cir.load"(%x, %r, %i0) : (tensor<4x6xf32>, index, index) -> f32
      %i1 = arith.addi %i0, %c1 : index
      %b = "cir.load"(%x, %r, %i1) : (tensor<4x6xf32>, index, index) -> f32
      %d = arith.subf %a, %b : f32
      %s = arith.addf %a, %b : f32
      %j0 = arith.muli %c2, %p : index
      "cir.store"(%d, %out, %r, %j0) : (f32, tensor<4x6xf32>, index, index) -> ()
      %j1 = arith.muli %c2, %p : index
      %j2 = arith.addi %j1, %c1 : index
      "cir.store"(%s, %out, %r, %j2) : (f32, tensor<4x6xf32>, index, index) -> ()
    }
  }
  return
}

// -----

// The halves of a row of run-time length: the bound `n / 2` and the offset `p + n / 2`
// are separate ops, the same computation. A loop nested in the body (a sum up to p)
// reads the new p; the value stored second (block 0) is the select's default.
// CHECK-LABEL: func.func private @halves(
// CHECK-SAME: [[X:%[a-z0-9]+]]: tensor<4x?xf32>, [[N:%[a-z0-9]+]]: index, [[OUT:%[a-z0-9]+]]: tensor<4x?xf32>)
// CHECK: scf.for [[R:%[a-z0-9]+]] =
// CHECK: [[HALF:%[0-9]+]] = arith.floordivsi [[N]]
// CHECK: [[LEN:%[0-9]+]] = arith.muli [[HALF]], %{{.*}} : index
// CHECK: scf.for [[E:%[a-z0-9]+]] = %{{.*}} to [[LEN]] step
// CHECK-NEXT: [[P:%[0-9]+]] = arith.remui [[E]], [[HALF]] : index
// CHECK-NEXT: [[PART:%[0-9]+]] = arith.divui [[E]], [[HALF]] : index
// CHECK: "cir.load"([[X]], [[R]], [[P]])
// CHECK: [[B:%[0-9]+]] = "cir.load"([[X]], [[R]], %{{.*}})
// CHECK: [[SUM:%[0-9]+]] = scf.for %{{.*}} = %{{.*}} to [[P]] step
// CHECK: [[ONE:%[a-z0-9_]+]] = arith.constant 1 : index
// CHECK: [[SECOND:%[0-9]+]] = arith.cmpi eq, [[PART]], [[ONE]] : index
// CHECK: [[V:%[0-9]+]] = arith.select [[SECOND]], [[B]], [[SUM]] : f32
// CHECK: "cir.store"([[V]], [[OUT]], [[R]], [[E]])
// CHECK-NOT: cir.store
// CHECK: return
func.func private @halves(%x: tensor<4x?xf32>, %n: index, %out: tensor<4x?xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  scf.for %r = %c0 to %c4 step %c1 {
    %h = arith.floordivsi %n, %c2 : index
    scf.for %p = %c0 to %h step %c1 {
      %a = "cir.load"(%x, %r, %p) : (tensor<4x?xf32>, index, index) -> f32
      %h1 = arith.floordivsi %n, %c2 : index
      %q = arith.addi %p, %h1 : index
      %b = "cir.load"(%x, %r, %q) : (tensor<4x?xf32>, index, index) -> f32
      %sum = scf.for %k = %c0 to %p step %c1 iter_args(%acc = %a) -> (f32) {
        %v = "cir.load"(%x, %r, %k) : (tensor<4x?xf32>, index, index) -> f32
        %w = arith.addf %acc, %v : f32
        scf.yield %w : f32
      }
      %h2 = arith.floordivsi %n, %c2 : index
      %q2 = arith.addi %p, %h2 : index
      "cir.store"(%b, %out, %r, %q2) : (f32, tensor<4x?xf32>, index, index) -> ()
      "cir.store"(%sum, %out, %r, %p) : (f32, tensor<4x?xf32>, index, index) -> ()
    }
  }
  return
}

// -----

// Three interleaved stores in any order (3p + 2, 3p, 3p + 1): two selects.
// CHECK-LABEL: func.func private @thirds(
// CHECK: [[THREE:%[a-z0-9_]+]] = arith.constant 3 : index
// CHECK: scf.for [[E:%[a-z0-9]+]] =
// CHECK-NEXT: arith.divui [[E]], [[THREE]]
// CHECK-NEXT: [[PART:%[0-9]+]] = arith.remui [[E]], [[THREE]]
// CHECK: arith.cmpi eq, [[PART]], %{{.*}}
// CHECK: [[INNER:%[0-9]+]] = arith.select
// CHECK: arith.cmpi eq, [[PART]], %{{.*}}
// CHECK: [[V:%[0-9]+]] = arith.select %{{.*}}, %{{.*}}, [[INNER]] : f32
// CHECK: "cir.store"([[V]], %{{.*}}, [[E]])
// CHECK-NOT: cir.store
func.func private @thirds(%x: tensor<5xf32>, %out: tensor<15xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %one = arith.constant 1.0 : f32
  scf.for %p = %c0 to %c5 step %c1 {
    %a = "cir.load"(%x, %p) : (tensor<5xf32>, index) -> f32
    %b = arith.addf %a, %one : f32
    %c = arith.mulf %a, %a : f32
    %i = arith.muli %p, %c3 : index
    %i2 = arith.addi %i, %c2 : index
    "cir.store"(%c, %out, %i2) : (f32, tensor<15xf32>, index) -> ()
    "cir.store"(%a, %out, %i) : (f32, tensor<15xf32>, index) -> ()
    %i1 = arith.addi %i, %c1 : index
    "cir.store"(%b, %out, %i1) : (f32, tensor<15xf32>, index) -> ()
  }
  return
}

// -----

// Left as they are: stores that leave every other pair out (2p, 2p + 2), stores that
// accumulate, and stores beside a store under a condition.
// CHECK-LABEL: func.func private @gaps(
// CHECK-COUNT-2: "cir.store"
// CHECK-LABEL: func.func private @accumulates(
// CHECK-COUNT-2: "cir.store"
// CHECK-LABEL: func.func private @guarded(
// CHECK-COUNT-3: "cir.store"
func.func private @gaps(%x: tensor<3xf32>, %out: tensor<8xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  scf.for %p = %c0 to %c3 step %c1 {
    %a = "cir.load"(%x, %p) : (tensor<3xf32>, index) -> f32
    %i = arith.muli %p, %c2 : index
    %i2 = arith.addi %i, %c2 : index
    "cir.store"(%a, %out, %i) : (f32, tensor<8xf32>, index) -> ()
    "cir.store"(%a, %out, %i2) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}
func.func private @accumulates(%x: tensor<3xf32>, %out: tensor<6xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  scf.for %p = %c0 to %c3 step %c1 {
    %a = "cir.load"(%x, %p) : (tensor<3xf32>, index) -> f32
    %i = arith.muli %p, %c2 : index
    %i1 = arith.addi %i, %c1 : index
    "cir.store"(%a, %out, %i) {combine = "+"} : (f32, tensor<6xf32>, index) -> ()
    "cir.store"(%a, %out, %i1) {combine = "+"} : (f32, tensor<6xf32>, index) -> ()
  }
  return
}
func.func private @guarded(%x: tensor<3xf32>, %out: tensor<6xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  scf.for %p = %c0 to %c3 step %c1 {
    %a = "cir.load"(%x, %p) : (tensor<3xf32>, index) -> f32
    %i = arith.muli %p, %c2 : index
    %i1 = arith.addi %i, %c1 : index
    "cir.store"(%a, %out, %i) : (f32, tensor<6xf32>, index) -> ()
    "cir.store"(%a, %out, %i1) : (f32, tensor<6xf32>, index) -> ()
    %first = arith.cmpi eq, %p, %c0 : index
    scf.if %first {
      "cir.store"(%a, %out, %c0) : (f32, tensor<6xf32>, index) -> ()
    }
  }
  return
}
