// linalg-to-gpu-kernels on a generic of dynamic sizes (`?`, what a shape-less compile
// makes): the native CUDA backend compiles static sizes only (yet), so it is a located
// error that says what to give, not an internal error of a strategy.
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels)' 2>&1 | filecheck %s

// CHECK: linalg-to-gpu-kernels-dynamic.mlir:[[# @LINE + 4]]:{{[0-9]+}}: error: the native CUDA backend compiles static sizes only (yet), and this loop nest's extents are dynamic: give the inputs' shapes (zynml compile --shape NAME=DIMS[:DTYPE])
#map = affine_map<(d0) -> (d0)>
module {
  func.func @main(%x: memref<?xf32>, %y: memref<?xf32>) {
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%x : memref<?xf32>) outs(%y : memref<?xf32>) {
    ^bb0(%a: f32, %b: f32):
      %r = arith.addf %a, %a : f32
      linalg.yield %r : f32
    }
    return
  }
}
