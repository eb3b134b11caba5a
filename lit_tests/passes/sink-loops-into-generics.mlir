// sink-loops-into-generics turns a host scf.for whose iterations are per-element work
// (all-parallel generics over the carried tensors' points) into one linalg.generic with
// the loop inside its region (see passes/sink_loops_into_generics.py); loops whose
// iterations are more than that stay on the host.
// RUN: zynml-opt %s --split-input-file --sink-loops-into-generics | filecheck %s
// RUN: zynml-opt %s --split-input-file --pass-pipeline='builtin.module(sink-loops-into-generics)' | filecheck %s
// RUN: zynml-opt %s --split-input-file --sink-loops-into-generics | zynml-opt --split-input-file | filecheck %s
// The result is a fixed point: a second run changes nothing.
// RUN: zynml-opt %s --split-input-file --sink-loops-into-generics > %t.once
// RUN: zynml-opt %t.once --split-input-file --sink-loops-into-generics > %t.twice
// RUN: diff %t.once %t.twice

// A constant count, the carried value starting from the input x: one generic reading
// x, the loop carrying a scalar inside it.
// CHECK: [[ID:#[a-z0-9]+]] = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @horner(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<37xf32>, [[A:%[a-z0-9_]+]]: f32, [[B:%[a-z0-9_]+]]: f32)
// CHECK-NOT: scf.for
// CHECK: [[E:%[0-9]+]] = tensor.empty() : tensor<37xf32>
// CHECK-NEXT: [[G:%[0-9]+]] = linalg.generic {indexing_maps = {{\[}}[[ID]], [[ID]]], iterator_types = ["parallel"]} ins([[X]] : tensor<37xf32>) outs([[E]] : tensor<37xf32>) {
// CHECK-NEXT: ^bb0([[IN:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[R:%[0-9]+]] = scf.for [[K:%[a-z0-9_]+]] = %c0 to %c8 step %c1 iter_args([[ACC:%[a-z0-9_]+]] = [[IN]]) -> (f32) {
// CHECK-NEXT: [[M:%[0-9]+]] = arith.mulf [[ACC]], [[A]] : f32
// CHECK-NEXT: [[S:%[0-9]+]] = arith.addf [[M]], [[B]] : f32
// CHECK-NEXT: scf.yield [[S]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: linalg.yield [[R]] : f32
// CHECK-NEXT: } -> tensor<37xf32>
// CHECK-NEXT: return [[G]] : tensor<37xf32>
#map = affine_map<(d0) -> (d0)>
func.func @horner(%x: tensor<37xf32>, %a: f32, %b: f32) -> tensor<37xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %r = scf.for %k = %c0 to %c8 step %c1 iter_args(%t = %x) -> (tensor<37xf32>) {
    %e = tensor.empty() : tensor<37xf32>
    %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%t : tensor<37xf32>) outs(%e : tensor<37xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %a : f32
      %s = arith.addf %m, %b : f32
      linalg.yield %s : f32
    } -> tensor<37xf32>
    scf.yield %g : tensor<37xf32>
  }
  return %r : tensor<37xf32>
}

// -----

// A count that is an input's size; the value starts from a fill (its scalar, the fill
// goes) and the iteration gathers c at the loop variable: the gather moves in with it.
// CHECK-LABEL: func.func @size_count(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<?xf32>, [[C:%[a-z0-9_]+]]: tensor<?xf32>)
// CHECK-DAG: [[ZERO:%[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: [[D:%[a-z0-9_]+]] = tensor.dim [[C]], %c0
// CHECK-NOT: linalg.fill
// CHECK-NOT: scf.for
// CHECK: linalg.generic {{.*}} ins([[X]] : tensor<?xf32>)
// CHECK-NEXT: ^bb0([[IN:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: scf.for [[K:%[a-z0-9_]+]] = %c0 to [[D]] step %c1 iter_args([[ACC:%[a-z0-9_]+]] = [[ZERO]]) -> (f32) {
// CHECK-NEXT: [[P:%[0-9]+]] = arith.mulf [[ACC]], [[IN]] : f32
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = tensor.extract [[C]]{{\[}}[[K]]] : tensor<?xf32>
// CHECK-NEXT: [[S:%[0-9]+]] = arith.addf [[P]], [[V]] : f32
// CHECK-NEXT: scf.yield [[S]] : f32
#map = affine_map<(d0) -> (d0)>
func.func @size_count(%x: tensor<?xf32>, %c: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %d = tensor.dim %c, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = scf.for %k = %c0 to %d step %c1 iter_args(%t = %f) -> (tensor<?xf32>) {
    %g = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
        ins(%t, %x : tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?xf32>) {
    ^bb0(%acc: f32, %xi: f32, %out: f32):
      %p = arith.mulf %acc, %xi : f32
      %v = tensor.extract %c[%k] : tensor<?xf32>
      %s = arith.addf %p, %v : f32
      linalg.yield %s : f32
    } -> tensor<?xf32>
    scf.yield %g : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}

// -----

// Two carried values, a generic each (the second reads the first's old value), and one
// generic after the loop reading both at their points: all of it is one generic, the
// work after the loop following the loop in its region.
// CHECK-LABEL: func.func @two_values(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<7x13xf32>)
// CHECK-NOT: linalg.fill
// CHECK-NOT: scf.for
// CHECK: [[G:%[0-9]+]] = linalg.generic {indexing_maps = [{{.*}}], iterator_types = ["parallel"]} outs({{%[0-9]+}} : tensor<7xf32>) {
// CHECK-NEXT: ^bb0({{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[I:%[0-9]+]] = linalg.index 0 : index
// CHECK-NEXT: [[R:%[0-9]+]]:2 = scf.for [[C:%[a-z0-9_]+]] = %c0 to %c13 step %c2 iter_args([[M:%[a-z0-9_]+]] = %cst, [[E:%[a-z0-9_]+]] = %cst_0) -> (f32, f32) {
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = tensor.extract [[X]]{{\[}}[[I]], [[C]]] : tensor<7x13xf32>
// CHECK-NEXT: [[NEW_M:%[0-9]+]] = arith.maximumf [[M]], [[V]] : f32
// CHECK-NEXT: [[H:%[0-9]+]] = arith.mulf [[E]], %cst_1 : f32
// CHECK-NEXT: [[V2:%[a-z0-9_]+]] = tensor.extract [[X]]{{\[}}[[I]], [[C]]] : tensor<7x13xf32>
// CHECK-NEXT: [[P:%[0-9]+]] = arith.mulf [[V2]], [[M]] : f32
// CHECK-NEXT: [[NEW_E:%[0-9]+]] = arith.addf [[H]], [[P]] : f32
// CHECK-NEXT: scf.yield [[NEW_M]], [[NEW_E]] : f32, f32
// CHECK-NEXT: }
// CHECK-NEXT: [[SUM:%[0-9]+]] = arith.addf [[R]]#1, [[R]]#0 : f32
// CHECK-NEXT: linalg.yield [[SUM]] : f32
// CHECK-NEXT: } -> tensor<7xf32>
// CHECK-NEXT: return [[G]] : tensor<7xf32>
#map = affine_map<(d0) -> (d0)>
func.func @two_values(%x: tensor<7x13xf32>) -> tensor<7xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c13 = arith.constant 13 : index
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.0 : f32
  %cst_1 = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<7xf32>
  %m0 = linalg.fill ins(%cst : f32) outs(%e : tensor<7xf32>) -> tensor<7xf32>
  %e0 = linalg.fill ins(%cst_0 : f32) outs(%e : tensor<7xf32>) -> tensor<7xf32>
  %r:2 = scf.for %c = %c0 to %c13 step %c2 iter_args(%m = %m0, %s = %e0) -> (tensor<7xf32>, tensor<7xf32>) {
    %gm = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%m : tensor<7xf32>) outs(%e : tensor<7xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 0 : index
      %v = tensor.extract %x[%i, %c] : tensor<7x13xf32>
      %n = arith.maximumf %in, %v : f32
      linalg.yield %n : f32
    } -> tensor<7xf32>
    %ge = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
        ins(%s, %m : tensor<7xf32>, tensor<7xf32>) outs(%e : tensor<7xf32>) {
    ^bb0(%in: f32, %old_m: f32, %out: f32):
      %h = arith.mulf %in, %cst_1 : f32
      %i = linalg.index 0 : index
      %v = tensor.extract %x[%i, %c] : tensor<7x13xf32>
      %p = arith.mulf %v, %old_m : f32
      %n = arith.addf %h, %p : f32
      linalg.yield %n : f32
    } -> tensor<7xf32>
    scf.yield %gm, %ge : tensor<7xf32>, tensor<7xf32>
  }
  %y = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%r#1, %r#0 : tensor<7xf32>, tensor<7xf32>) outs(%e : tensor<7xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %sum = arith.addf %a, %b : f32
    linalg.yield %sum : f32
  } -> tensor<7xf32>
  return %y : tensor<7xf32>
}

// -----

// A shape-less compile's integer input as the count: the host would read it from device
// memory; the generic reads it (extract, index_cast) before its loop instead.
// CHECK-LABEL: func.func @count_input(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<?xf32>, [[M:%[a-z0-9_]+]]: tensor<i64>)
// CHECK-NOT: scf.for
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0([[IN:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = tensor.extract [[M]][] : tensor<i64>
// CHECK-NEXT: [[N:%[0-9]+]] = arith.index_cast [[V]] : i64 to index
// CHECK-NEXT: scf.for {{%[a-z0-9_]+}} = %c0 to [[N]] step %c1 iter_args({{%[a-z0-9_]+}} = [[IN]]) -> (f32) {
#map = affine_map<(d0) -> (d0)>
func.func @count_input(%x: tensor<?xf32>, %m: tensor<i64>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %two = arith.constant 2.0 : f32
  %mv = tensor.extract %m[] : tensor<i64>
  %count = arith.index_cast %mv : i64 to index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %r = scf.for %k = %c0 to %count step %c1 iter_args(%t = %x) -> (tensor<?xf32>) {
    %e = tensor.empty(%n) : tensor<?xf32>
    %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%t : tensor<?xf32>) outs(%e : tensor<?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %s = arith.mulf %in, %two : f32
      linalg.yield %s : f32
    } -> tensor<?xf32>
    scf.yield %g : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}

// -----

// Nested loops run in order: the inner one is sunk first, then the outer one, whose
// iteration computes the index of its inner loop's end (j < k + 1) in the region.
// CHECK-LABEL: func.func @nested(
// CHECK-NOT: scf.for
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0([[IN:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: scf.for [[K:%[a-z0-9_]+]] = %c0 to %c4 step %c1 iter_args([[A:%[a-z0-9_]+]] = [[IN]]) -> (f32) {
// CHECK-NEXT: [[END:%[0-9]+]] = arith.addi [[K]], %c1 : index
// CHECK-NEXT: [[INNER:%[0-9]+]] = scf.for {{%[a-z0-9_]+}} = %c0 to [[END]] step %c1 iter_args([[B:%[a-z0-9_]+]] = [[A]]) -> (f32) {
// CHECK-NEXT: [[S:%[0-9]+]] = arith.mulf [[B]], [[B]] : f32
// CHECK-NEXT: scf.yield [[S]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: scf.yield [[INNER]] : f32
// CHECK-NEXT: }
#map = affine_map<(d0) -> (d0)>
func.func @nested(%x: tensor<5xf32>) -> tensor<5xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%t = %x) -> (tensor<5xf32>) {
    %end = arith.addi %k, %c1 : index
    %inner = scf.for %j = %c0 to %end step %c1 iter_args(%u = %t) -> (tensor<5xf32>) {
      %e = tensor.empty() : tensor<5xf32>
      %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
          ins(%u : tensor<5xf32>) outs(%e : tensor<5xf32>) {
      ^bb0(%in: f32, %out: f32):
        %s = arith.mulf %in, %in : f32
        linalg.yield %s : f32
      } -> tensor<5xf32>
      scf.yield %g : tensor<5xf32>
    }
    scf.yield %inner : tensor<5xf32>
  }
  return %r : tensor<5xf32>
}

// -----

// An iteration that reduces at each point (a row sum, a dot): the reduction is a loop
// inside the iteration's, reading x's elements along it; its accumulator starts from the
// carried value (the generic's output).
// CHECK-LABEL: func.func @reduces(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<5x3xf32>, [[INIT:%[a-z0-9_]+]]: tensor<5xf32>)
// CHECK-NOT: scf.for
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel"]} ins([[INIT]] : tensor<5xf32>)
// CHECK-NEXT: ^bb0([[IN:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[I:%[0-9]+]] = linalg.index 0 : index
// CHECK-NEXT: scf.for {{%[a-z0-9_]+}} = %c0 to %c4 step %c1 iter_args([[T:%[a-z0-9_]+]] = [[IN]]) -> (f32) {
// CHECK: [[R:%[0-9]+]] = scf.for [[J:%[a-z0-9_]+]] = %c0{{.*}} to %c3 step %c1{{.*}} iter_args([[ACC:%[a-z0-9_]+]] = [[T]]) -> (f32) {
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = tensor.extract [[X]]{{\[}}[[I]], [[J]]] : tensor<5x3xf32>
// CHECK-NEXT: [[S:%[0-9]+]] = arith.addf [[V]], [[ACC]] : f32
// CHECK-NEXT: scf.yield [[S]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: scf.yield [[R]] : f32
#row = affine_map<(d0, d1) -> (d0, d1)>
#first = affine_map<(d0, d1) -> (d0)>
func.func @reduces(%x: tensor<5x3xf32>, %init: tensor<5xf32>) -> tensor<5xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%t = %init) -> (tensor<5xf32>) {
    %g = linalg.generic {indexing_maps = [#row, #first], iterator_types = ["parallel", "reduction"]}
        ins(%x : tensor<5x3xf32>) outs(%t : tensor<5xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    } -> tensor<5xf32>
    scf.yield %g : tensor<5xf32>
  }
  return %r : tensor<5xf32>
}

// -----

// A reduction that starts from a fill made in the iteration (`var s = 1.0` before an
// `s *= ...` loop): the fill is its start's scalar, no tensor.
// CHECK-LABEL: func.func @reduces_from_a_fill(
// CHECK-NOT: linalg.fill
// CHECK: scf.for {{.*}} iter_args([[T:%[a-z0-9_]+]] = %cst_0) -> (f32) {
// CHECK: scf.for {{.*}} iter_args([[P:%[a-z0-9_]+]] = %cst) -> (f32) {
// CHECK: arith.mulf [[P]],
// CHECK-NOT: linalg.fill
#row = affine_map<(d0, d1) -> (d0, d1)>
#first = affine_map<(d0, d1) -> (d0)>
#map = affine_map<(d0) -> (d0)>
func.func @reduces_from_a_fill(%x: tensor<5x3xf32>) -> tensor<5xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %cst = arith.constant 1.0 : f32
  %cst_0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5xf32>
  %zero = linalg.fill ins(%cst_0 : f32) outs(%e : tensor<5xf32>) -> tensor<5xf32>
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%t = %zero) -> (tensor<5xf32>) {
    %one = linalg.fill ins(%cst : f32) outs(%e : tensor<5xf32>) -> tensor<5xf32>
    %p = linalg.generic {indexing_maps = [#row, #first, #first], iterator_types = ["parallel", "reduction"]}
        ins(%x, %t : tensor<5x3xf32>, tensor<5xf32>) outs(%one : tensor<5xf32>) {
    ^bb0(%in: f32, %old: f32, %acc: f32):
      %a = arith.addf %in, %old : f32
      %m = arith.mulf %acc, %a : f32
      linalg.yield %m : f32
    } -> tensor<5xf32>
    %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%p : tensor<5xf32>) outs(%e : tensor<5xf32>) {
    ^bb0(%in: f32, %out: f32):
      %h = arith.mulf %in, %cst : f32
      linalg.yield %h : f32
    } -> tensor<5xf32>
    scf.yield %g : tensor<5xf32>
  }
  return %r : tensor<5xf32>
}

// -----

// Loops that stay on the host: an iteration that computes more than a value per point (a
// local array: a generic over the points and one more loop), one that reads a carried
// value at another point (a reversed map, a gather from the carried tensor), and one that
// is not generics (a slice).
// CHECK-LABEL: func.func @local_array(
// CHECK: scf.for
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK-LABEL: func.func @other_point(
// CHECK: scf.for
// CHECK: linalg.generic
// CHECK-LABEL: func.func @gathers_carried(
// CHECK: scf.for
// CHECK: linalg.generic
// CHECK-LABEL: func.func @slices(
// CHECK: scf.for
// CHECK: tensor.insert_slice
#map = affine_map<(d0) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, d1)>
#first = affine_map<(d0, d1) -> (d0)>
#col0 = affine_map<(d0) -> (d0, 0)>
#reversed = affine_map<(d0) -> (4 - d0)>
func.func @local_array(%x: tensor<5x3xf32>, %init: tensor<5xf32>) -> tensor<5xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%t = %init) -> (tensor<5xf32>) {
    %e2 = tensor.empty() : tensor<5x3xf32>
    %buf = linalg.generic {indexing_maps = [#row, #first, #row], iterator_types = ["parallel", "parallel"]}
        ins(%x, %t : tensor<5x3xf32>, tensor<5xf32>) outs(%e2 : tensor<5x3xf32>) {
    ^bb0(%in: f32, %e: f32, %out: f32):
      %s = arith.mulf %in, %e : f32
      linalg.yield %s : f32
    } -> tensor<5x3xf32>
    %e1 = tensor.empty() : tensor<5xf32>
    %g = linalg.generic {indexing_maps = [#col0, #map], iterator_types = ["parallel"]}
        ins(%buf : tensor<5x3xf32>) outs(%e1 : tensor<5xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<5xf32>
    scf.yield %g : tensor<5xf32>
  }
  return %r : tensor<5xf32>
}
func.func @other_point(%x: tensor<5xf32>) -> tensor<5xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%t = %x) -> (tensor<5xf32>) {
    %e = tensor.empty() : tensor<5xf32>
    %g = linalg.generic {indexing_maps = [#reversed, #map], iterator_types = ["parallel"]}
        ins(%t : tensor<5xf32>) outs(%e : tensor<5xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<5xf32>
    scf.yield %g : tensor<5xf32>
  }
  return %r : tensor<5xf32>
}
func.func @gathers_carried(%x: tensor<5xf32>) -> tensor<5xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%t = %x) -> (tensor<5xf32>) {
    %e = tensor.empty() : tensor<5xf32>
    %g = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]}
        outs(%e : tensor<5xf32>) {
    ^bb0(%out: f32):
      %v = tensor.extract %t[%k] : tensor<5xf32>
      linalg.yield %v : f32
    } -> tensor<5xf32>
    scf.yield %g : tensor<5xf32>
  }
  return %r : tensor<5xf32>
}
func.func @slices(%x: tensor<5xf32>, %s: tensor<1xf32>) -> tensor<5xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%t = %x) -> (tensor<5xf32>) {
    %u = tensor.insert_slice %s into %t[%k] [1] [1] : tensor<1xf32> into tensor<5xf32>
    scf.yield %u : tensor<5xf32>
  }
  return %r : tensor<5xf32>
}
