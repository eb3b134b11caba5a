// fold-scalar-tensors rewrites each scalar island between 0-d tensors (tensor.extract of
// 0-d tensors, scalar arguments and constants, through arith/math, back into a 0-d
// tensor.from_elements) into a 0-d linalg.generic, and folds a plain round trip
// from_elements(extract %t[]) to %t (see passes/fold_scalar_tensors.py). Scalars left
// unused are erased; from_elements of more than one element, or of a scalar not made of
// such leaves, is left alone.
// RUN: zynml-opt %s --split-input-file --fold-scalar-tensors | filecheck %s
// RUN: zynml-opt %s --split-input-file --pass-pipeline='builtin.module(fold-scalar-tensors)' | filecheck %s
// RUN: zynml-opt %s --split-input-file --fold-scalar-tensors | zynml-opt --split-input-file | filecheck %s
// The result is a fixed point: a second run changes nothing.
// RUN: zynml-opt %s --split-input-file --fold-scalar-tensors > %t.once
// RUN: zynml-opt %t.once --split-input-file --fold-scalar-tensors > %t.twice
// RUN: diff %t.once %t.twice

// A plain round trip is the tensor itself; the extract goes too.
// CHECK-LABEL: func.func @round_trip(
// CHECK-SAME: [[T:%[a-z0-9_]+]]: tensor<f32>) -> tensor<f32>
// CHECK-NOT: tensor.extract
// CHECK-NOT: tensor.from_elements
// CHECK-NOT: linalg.generic
// CHECK: return [[T]] : tensor<f32>
func.func @round_trip(%t: tensor<f32>) -> tensor<f32> {
  %s = tensor.extract %t[] : tensor<f32>
  %u = tensor.from_elements %s : tensor<f32>
  return %u : tensor<f32>
}

// -----

// extract -> sqrt -> from_elements: a 0-d generic reading %t, the sqrt in its body.
// CHECK: [[MAP0:#[a-z0-9]+]] = affine_map<() -> ()>
// CHECK-LABEL: func.func @sqrt(
// CHECK-SAME: [[T:%[a-z0-9_]+]]: tensor<f32>) -> tensor<f32>
// CHECK-NOT: tensor.extract
// CHECK: [[E:%[0-9]+]] = tensor.empty() : tensor<f32>
// CHECK-NEXT: [[G:%[0-9]+]] = linalg.generic {indexing_maps = {{\[}}[[MAP0]], [[MAP0]]], iterator_types = []} ins([[T]] : tensor<f32>) outs([[E]] : tensor<f32>) {
// CHECK-NEXT: ^bb0([[IN:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[R:%[0-9]+]] = math.sqrt [[IN]] : f32
// CHECK-NEXT: linalg.yield [[R]] : f32
// CHECK-NEXT: } -> tensor<f32>
// CHECK-NEXT: return [[G]] : tensor<f32>
// CHECK-NOT: tensor.from_elements
func.func @sqrt(%t: tensor<f32>) -> tensor<f32> {
  %s = tensor.extract %t[] : tensor<f32>
  %r = math.sqrt %s : f32
  %u = tensor.from_elements %r : tensor<f32>
  return %u : tensor<f32>
}

// -----

// Two leaves are two inputs, in the order the island reaches them; the constant is
// cloned into the body, not passed in.
// CHECK: [[MAP0:#[a-z0-9]+]] = affine_map<() -> ()>
// CHECK-LABEL: func.func @two_leaves(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: tensor<f32>, [[B:%[a-z0-9_]+]]: tensor<f32>) -> tensor<f32>
// CHECK-NOT: tensor.extract
// CHECK-NOT: arith.
// CHECK: [[G:%[0-9]+]] = linalg.generic {indexing_maps = {{\[}}[[MAP0]], [[MAP0]], [[MAP0]]], iterator_types = []} ins([[A]], [[B]] : tensor<f32>, tensor<f32>) outs(%{{.*}} : tensor<f32>) {
// CHECK-NEXT: ^bb0([[X:%[a-z0-9_]+]]: f32, [[Y:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[Q:%[0-9]+]] = arith.divf [[X]], [[Y]] : f32
// CHECK-NEXT: [[C2:%[a-z0-9_]+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT: [[R:%[0-9]+]] = arith.mulf [[Q]], [[C2]] : f32
// CHECK-NEXT: linalg.yield [[R]] : f32
// CHECK: return [[G]] : tensor<f32>
// CHECK-NOT: tensor.from_elements
func.func @two_leaves(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %x = tensor.extract %a[] : tensor<f32>
  %y = tensor.extract %b[] : tensor<f32>
  %q = arith.divf %x, %y : f32
  %c2 = arith.constant 2.0 : f32
  %r = arith.mulf %q, %c2 : f32
  %u = tensor.from_elements %r : tensor<f32>
  return %u : tensor<f32>
}

// -----

// A scalar function argument is a leaf too: it enters the generic as a scalar input
// (not a round trip, since nothing was extracted).
// CHECK: [[MAP0:#[a-z0-9]+]] = affine_map<() -> ()>
// CHECK-LABEL: func.func @scalar_arg(
// CHECK-SAME: [[S:%[a-z0-9_]+]]: f32) -> tensor<f32>
// CHECK: [[G:%[0-9]+]] = linalg.generic {indexing_maps = {{\[}}[[MAP0]], [[MAP0]]], iterator_types = []} ins([[S]] : f32) outs(%{{.*}} : tensor<f32>) {
// CHECK-NEXT: ^bb0([[IN:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: linalg.yield [[IN]] : f32
// CHECK: return [[G]] : tensor<f32>
// CHECK-NOT: tensor.from_elements
func.func @scalar_arg(%s: f32) -> tensor<f32> {
  %u = tensor.from_elements %s : tensor<f32>
  return %u : tensor<f32>
}

// -----

// A 0-d tensor and a scalar argument together: one tensor input, one scalar input.
// CHECK-LABEL: func.func @scalar_arg_mixed(
// CHECK-SAME: [[T:%[a-z0-9_]+]]: tensor<f32>, [[S:%[a-z0-9_]+]]: f32) -> tensor<f32>
// CHECK-NOT: tensor.extract
// CHECK: linalg.generic {{.*}} ins([[T]], [[S]] : tensor<f32>, f32) outs(%{{.*}} : tensor<f32>) {
// CHECK-NEXT: ^bb0([[X:%[a-z0-9_]+]]: f32, [[Y:%[a-z0-9_]+]]: f32, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[R:%[0-9]+]] = arith.addf [[X]], [[Y]] : f32
// CHECK-NEXT: linalg.yield [[R]] : f32
// CHECK-NOT: tensor.from_elements
func.func @scalar_arg_mixed(%t: tensor<f32>, %s: f32) -> tensor<f32> {
  %x = tensor.extract %t[] : tensor<f32>
  %r = arith.addf %x, %s : f32
  %u = tensor.from_elements %r : tensor<f32>
  return %u : tensor<f32>
}

// -----

// A loop's induction variable is a scalar block argument: a leaf, here of index type,
// and the generic is built inside the loop.
// CHECK-LABEL: func.func @in_loop(
// CHECK: scf.for [[I:%[a-z0-9_]+]] = {{.*}} iter_args([[ACC:%[a-z0-9_]+]] = {{.*}}) -> (tensor<f32>) {
// CHECK-NOT: tensor.extract
// CHECK: [[G:%[0-9]+]] = linalg.generic {{.*}} ins([[ACC]], [[I]] : tensor<f32>, index) outs(%{{.*}} : tensor<f32>) {
// CHECK-NEXT: ^bb0([[X:%[a-z0-9_]+]]: f32, [[N:%[a-z0-9_]+]]: index, {{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[NI:%[0-9]+]] = arith.index_cast [[N]] : index to i32
// CHECK-NEXT: [[NF:%[0-9]+]] = arith.sitofp [[NI]] : i32 to f32
// CHECK-NEXT: [[R:%[0-9]+]] = arith.addf [[X]], [[NF]] : f32
// CHECK-NEXT: linalg.yield [[R]] : f32
// CHECK: scf.yield [[G]] : tensor<f32>
// CHECK-NOT: tensor.from_elements
func.func @in_loop(%t: tensor<f32>, %n: index) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %t) -> tensor<f32> {
    %s = tensor.extract %acc[] : tensor<f32>
    %f = arith.index_cast %i : index to i32
    %g = arith.sitofp %f : i32 to f32
    %v = arith.addf %s, %g : f32
    %u = tensor.from_elements %v : tensor<f32>
    scf.yield %u : tensor<f32>
  }
  return %r : tensor<f32>
}

// -----

// A scalar of the island still used on the host stays there (with its extract); the
// generic recomputes it.
// CHECK-LABEL: func.func @shared(
// CHECK-SAME: [[T:%[a-z0-9_]+]]: tensor<f32>) -> (tensor<f32>, f32)
// CHECK: [[S:%[a-z0-9_]+]] = tensor.extract [[T]][] : tensor<f32>
// CHECK-NEXT: [[HOST:%[0-9]+]] = math.sqrt [[S]] : f32
// CHECK: [[G:%[0-9]+]] = linalg.generic {{.*}} ins([[T]] : tensor<f32>)
// CHECK: math.sqrt
// CHECK: return [[G]], [[HOST]] : tensor<f32>, f32
// CHECK-NOT: tensor.from_elements
func.func @shared(%t: tensor<f32>) -> (tensor<f32>, f32) {
  %s = tensor.extract %t[] : tensor<f32>
  %r = math.sqrt %s : f32
  %u = tensor.from_elements %r : tensor<f32>
  return %u, %r : tensor<f32>, f32
}

// -----

// Not 0-d: left alone.
// CHECK-LABEL: func.func @not_0d(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: f32, [[B:%[a-z0-9_]+]]: f32) -> tensor<2xf32>
// CHECK-NEXT: [[U:%[a-z0-9_]+]] = tensor.from_elements [[A]], [[B]] : tensor<2xf32>
// CHECK-NEXT: return [[U]] : tensor<2xf32>
// CHECK-NOT: linalg.generic
func.func @not_0d(%a: f32, %b: f32) -> tensor<2xf32> {
  %u = tensor.from_elements %a, %b : tensor<2xf32>
  return %u : tensor<2xf32>
}

// -----

// An element extracted from a 1-d tensor is not a leaf: the island is not rewritten.
// CHECK-LABEL: func.func @from_1d(
// CHECK-SAME: [[T:%[a-z0-9_]+]]: tensor<4xf32>) -> tensor<f32>
// CHECK-NEXT: [[C1:%[a-z0-9_]+]] = arith.constant 1 : index
// CHECK-NEXT: [[S:%[a-z0-9_]+]] = tensor.extract [[T]]{{\[}}[[C1]]] : tensor<4xf32>
// CHECK-NEXT: [[R:%[0-9]+]] = math.sqrt [[S]] : f32
// CHECK-NEXT: [[U:%[a-z0-9_]+]] = tensor.from_elements [[R]] : tensor<f32>
// CHECK-NEXT: return [[U]] : tensor<f32>
// CHECK-NOT: linalg.generic
func.func @from_1d(%t: tensor<4xf32>) -> tensor<f32> {
  %c1 = arith.constant 1 : index
  %s = tensor.extract %t[%c1] : tensor<4xf32>
  %r = math.sqrt %s : f32
  %u = tensor.from_elements %r : tensor<f32>
  return %u : tensor<f32>
}

// -----

// A lone constant is an island too: it moves into the generic's body.
// CHECK-LABEL: func.func @lone_constant(
// CHECK-NOT: arith.constant
// CHECK: linalg.generic {indexing_maps = [{{.*}}], iterator_types = []} outs(
// CHECK-NEXT: ^bb0({{%[a-z0-9_]+}}: f32):
// CHECK-NEXT: [[C:%[a-z0-9_]+]] = arith.constant 3.000000e+00 : f32
// CHECK-NEXT: linalg.yield [[C]] : f32
// CHECK-NOT: tensor.from_elements
func.func @lone_constant() -> tensor<f32> {
  %c = arith.constant 3.0 : f32
  %t = tensor.from_elements %c : tensor<f32>
  return %t : tensor<f32>
}
