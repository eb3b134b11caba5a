// pack-loop-carried-tensors carries the tensors of one type that an scf.for carries, each
// computed into one tensor.empty shape, as one tensor with a leading axis (see
// passes/pack_loop_carried_tensors.py): iree-compile 3.13 mispacks several carried
// tensors that start from one value. Other loops are left alone.
// RUN: zynml-opt %s --split-input-file --pack-loop-carried-tensors | filecheck %s
// RUN: zynml-opt %s --split-input-file --pack-loop-carried-tensors | zynml-opt --split-input-file | filecheck %s
// The result is a fixed point: a second run changes nothing.
// RUN: zynml-opt %s --split-input-file --pack-loop-carried-tensors > %t.once
// RUN: zynml-opt %t.once --split-input-file --pack-loop-carried-tensors > %t.twice
// RUN: diff %t.once %t.twice

// Two sums that start from one fill (run-time extents): one carried tensor<2x?xf32>,
// sliced at the top of the body and after the loop.
// CHECK-LABEL: func.func @two_sums(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<?xf32>, [[N:%[a-z0-9_]+]]: index)
// CHECK: [[D:%[a-z0-9_]+]] = tensor.dim [[X]]
// CHECK: [[E:%[0-9]+]] = tensor.empty([[D]]) : tensor<?xf32>
// CHECK: [[F:%[0-9]+]] = linalg.fill {{.*}} outs([[E]] : tensor<?xf32>)
// CHECK: [[P:%[0-9]+]] = tensor.empty([[D]]) : tensor<2x?xf32>
// CHECK: [[P0:%[a-z0-9_]+]] = tensor.insert_slice [[F]] into [[P]][0, 0] [1, [[D]]] [1, 1] : tensor<?xf32> into tensor<2x?xf32>
// CHECK: [[P1:%[a-z0-9_]+]] = tensor.insert_slice [[F]] into [[P0]][1, 0] [1, [[D]]] [1, 1]
// CHECK: [[R:%[0-9]+]] = scf.for {{.*}} iter_args([[ACC:%[a-z0-9_]+]] = [[P1]]) -> (tensor<2x?xf32>) {
// CHECK: [[A:%[a-z0-9_]+]] = tensor.extract_slice [[ACC]][0, 0] [1, [[D]]] [1, 1] : tensor<2x?xf32> to tensor<?xf32>
// CHECK: [[B:%[a-z0-9_]+]] = tensor.extract_slice [[ACC]][1, 0] [1, [[D]]] [1, 1] : tensor<2x?xf32> to tensor<?xf32>
// CHECK: [[A2:%[0-9]+]] = linalg.generic {{.*}} ins([[X]], [[A]] : {{.*}}) outs([[E]] : tensor<?xf32>)
// CHECK: [[B2:%[0-9]+]] = linalg.generic {{.*}} ins([[X]], [[B]] : {{.*}}) outs([[E]] : tensor<?xf32>)
// CHECK: [[Y:%[0-9]+]] = tensor.empty([[D]]) : tensor<2x?xf32>
// CHECK: [[Y0:%[a-z0-9_]+]] = tensor.insert_slice [[A2]] into [[Y]][0, 0]
// CHECK: [[Y1:%[a-z0-9_]+]] = tensor.insert_slice [[B2]] into [[Y0]][1, 0]
// CHECK: scf.yield [[Y1]] : tensor<2x?xf32>
// CHECK: [[RA:%[a-z0-9_]+]] = tensor.extract_slice [[R]][0, 0] [1, [[D]]] [1, 1]
// CHECK: [[RB:%[a-z0-9_]+]] = tensor.extract_slice [[R]][1, 0] [1, [[D]]] [1, 1]
// CHECK: return [[RA]], [[RB]]
#id = affine_map<(d0) -> (d0)>
func.func @two_sums(%x: tensor<?xf32>, %n: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %d = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%d) : tensor<?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %f, %b = %f) -> (tensor<?xf32>, tensor<?xf32>) {
    %a2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
        ins(%x, %a : tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?xf32>) {
    ^bb0(%u: f32, %v: f32, %o: f32):
      %s = arith.addf %u, %v : f32
      linalg.yield %s : f32
    } -> tensor<?xf32>
    %b2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
        ins(%x, %b : tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?xf32>) {
    ^bb0(%u: f32, %v: f32, %o: f32):
      %s = arith.mulf %u, %v : f32
      linalg.yield %s : f32
    } -> tensor<?xf32>
    scf.yield %a2, %b2 : tensor<?xf32>, tensor<?xf32>
  }
  return %r#0, %r#1 : tensor<?xf32>, tensor<?xf32>
}

// -----

// Carried values of two types, one value, or a value not computed into the common
// tensor.empty shape (an input passed through): left alone.
// CHECK-LABEL: func.func @left_alone(
// CHECK: scf.for {{.*}} -> (tensor<?xf32>, tensor<?xi32>)
// CHECK: scf.for {{.*}} -> (tensor<?xf32>) {
// CHECK: scf.for {{.*}} -> (tensor<?xf32>, tensor<?xf32>)
// CHECK-NOT: tensor.insert_slice
#id = affine_map<(d0) -> (d0)>
func.func @left_alone(%x: tensor<?xf32>, %y: tensor<?xi32>, %n: index)
    -> (tensor<?xf32>, tensor<?xi32>, tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %d = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%d) : tensor<?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %f, %b = %y) -> (tensor<?xf32>, tensor<?xi32>) {
    scf.yield %a, %b : tensor<?xf32>, tensor<?xi32>
  }
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%a = %f) -> (tensor<?xf32>) {
    scf.yield %a : tensor<?xf32>
  }
  %t:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %f, %b = %x) -> (tensor<?xf32>, tensor<?xf32>) {
    scf.yield %b, %a : tensor<?xf32>, tensor<?xf32>
  }
  return %r#0, %r#1, %s, %t#0 : tensor<?xf32>, tensor<?xi32>, tensor<?xf32>, tensor<?xf32>
}
