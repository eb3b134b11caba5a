// split-shared-fills gives each linalg init (outs) that shares a linalg.fill of a
// tensor.empty with other inits a fill of its own (a new tensor.empty and fill right
// after the original), so that bufferization makes one buffer per accumulator and copies
// none (see passes/split_shared_fills.py). The first init in program order keeps the
// original; inputs, and fills of anything but a tensor.empty, are left alone.
// RUN: zynml-opt %s --split-input-file --split-shared-fills | filecheck %s
// RUN: zynml-opt %s --split-input-file --pass-pipeline='builtin.module(split-shared-fills)' | filecheck %s
// RUN: zynml-opt %s --split-input-file --split-shared-fills | zynml-opt --split-input-file | filecheck %s
// The result is a fixed point: a second run changes nothing.
// RUN: zynml-opt %s --split-input-file --split-shared-fills > %t.once
// RUN: zynml-opt %t.once --split-input-file --split-shared-fills > %t.twice
// RUN: diff %t.once %t.twice

// Two outs of one generic (a sum and a sum of squares, residual + layer norm).
// CHECK-LABEL: func.func @two_outs_of_one_generic(
// CHECK: [[ZERO:%[a-z0-9_]+]] = arith.constant 0.0
// CHECK-NEXT: [[E0:%[0-9]+]] = tensor.empty() : tensor<64xf32>
// CHECK-NEXT: [[F0:%[0-9]+]] = linalg.fill ins([[ZERO]] : f32) outs([[E0]] : tensor<64xf32>)
// CHECK-NEXT: [[E1:%[0-9]+]] = tensor.empty() : tensor<64xf32>
// CHECK-NEXT: [[F1:%[0-9]+]] = linalg.fill ins([[ZERO]] : f32) outs([[E1]] : tensor<64xf32>)
// CHECK-NEXT: linalg.generic
// CHECK-SAME: outs([[F0]], [[F1]] : tensor<64xf32>, tensor<64xf32>)
func.func @two_outs_of_one_generic(%x: tensor<64x4096xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<64x4096xf32>) outs(%f, %f : tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%in: f32, %a: f32, %b: f32):
    %s = arith.addf %a, %in : f32
    %m = arith.mulf %in, %in : f32
    %q = arith.addf %b, %m : f32
    linalg.yield %s, %q : f32, f32
  } -> (tensor<64xf32>, tensor<64xf32>)
  return %r#0, %r#1 : tensor<64xf32>, tensor<64xf32>
}

// -----

// Two generics (a layer norm's mean, then its variance, which reads the mean): the
// second gets the new fill; the mean's input use is no init.
// CHECK-LABEL: func.func @two_generics(
// CHECK: [[F0:%[0-9]+]] = linalg.fill
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: [[F1:%[0-9]+]] = linalg.fill
// CHECK-NEXT: [[MEAN:%[0-9]+]] = linalg.generic
// CHECK-SAME: outs([[F0]] : tensor<64xf32>)
// CHECK: linalg.generic
// CHECK-SAME: ins({{%[a-z0-9_]+}}, [[MEAN]] : tensor<64x4096xf32>, tensor<64xf32>) outs([[F1]] : tensor<64xf32>)
// CHECK-NOT: linalg.fill
func.func @two_generics(%x: tensor<64x4096xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %mean = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<64x4096xf32>) outs(%f : tensor<64xf32>) {
  ^bb0(%in: f32, %a: f32):
    %s = arith.addf %a, %in : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %var = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x, %mean : tensor<64x4096xf32>, tensor<64xf32>) outs(%f : tensor<64xf32>) {
  ^bb0(%in: f32, %m: f32, %a: f32):
    %d = arith.subf %in, %m : f32
    %d2 = arith.mulf %d, %d : f32
    %s = arith.addf %a, %d2 : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %mean, %var : tensor<64xf32>, tensor<64xf32>
}

// -----

// One init and one input use: nothing to split.
// CHECK-LABEL: func.func @init_and_input(
// CHECK-COUNT-1: linalg.fill
// CHECK-NOT: linalg.fill
func.func @init_and_input(%x: tensor<64xf32>) -> tensor<64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x, %f : tensor<64xf32>, tensor<64xf32>) outs(%f : tensor<64xf32>) {
  ^bb0(%in: f32, %b: f32, %o: f32):
    %s = arith.addf %in, %b : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

// A fill of a function argument (not a tensor.empty) stays shared.
// CHECK-LABEL: func.func @fill_of_an_argument(
// CHECK-COUNT-1: linalg.fill
// CHECK-NOT: linalg.fill
func.func @fill_of_an_argument(%x: tensor<64x8xf32>, %t: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%t : tensor<64xf32>) -> tensor<64xf32>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<64x8xf32>) outs(%f, %f : tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%in: f32, %a: f32, %b: f32):
    %s = arith.addf %a, %in : f32
    %q = arith.maximumf %b, %in : f32
    linalg.yield %s, %q : f32, f32
  } -> (tensor<64xf32>, tensor<64xf32>)
  return %r#0, %r#1 : tensor<64xf32>, tensor<64xf32>
}
