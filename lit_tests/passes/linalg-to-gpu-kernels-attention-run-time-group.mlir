// linalg-to-gpu-kernels on decode attention whose grouped-query group is an input (`h /
// g`, cir.attention's run-time group: the scores and out generics gather K and V at head
// h floordiv g, clamped, and take g as a 0-d input; zynml.runtime_group = 1). 2 query
// rows x 8 query heads over 2 KV heads, f16, head dim 64, 1000 keys, a run-time causal
// offset. The decode kernels' block holds one KV head's query rows, so they are built
// for the one group the shapes give, 8 / 2 = 4, and run where the call's g is 4
// (scf.if on the host); elsewhere the flash kernel, which reads g itself (its argument
// %arg2: the head a block reads is min(h / max(g, 1), 1), 0 for g < 0).
// RUN: zynml-opt %s --linalg-to-gpu-kernels | filecheck %s

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %arg3: i64, %arg4: i64)
// CHECK: [[G:%[0-9]+]] = arith.index_cast %arg4 : i64 to index
// CHECK: [[IS4:%[0-9]+]] = arith.cmpi eq, [[G]], %c4 : index
// CHECK: scf.if [[IS4]] {
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_decode_mma_part {{.*}}args(%arg0 : memref<1x8x2x64xf16>, %arg1 : memref<1x2x1000x64xf16>, %arg2 : memref<1x2x1000x64xf16>, %arg3 : i64,
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_decode_mma_merge
// CHECK: } else {
// CHECK-NOT: attention_decode_part
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_wgmma {{.*}}args({{.*}}, %arg3 : i64, %arg4 : i64,
// CHECK: }
// CHECK: return
// the decode kernels do not take g: built for 4 (a query head's KV head: h / 4)
// CHECK-LABEL: gpu.func @k0_attention_decode_mma_part(
// CHECK-NOT: i64, %arg4: i64
// CHECK-LABEL: gpu.func @k0_attention_wgmma(
// CHECK-SAME: %arg1: i64, %arg2: i64
// CHECK: [[GROUP:%[0-9]+]] = arith.index_cast %arg2 : i64 to index
// CHECK: [[DIVISOR:%[0-9]+]] = arith.maxsi [[GROUP]], %c1
// CHECK: [[HEAD:%[0-9]+]] = arith.divui %{{[0-9]+}}, [[DIVISOR]] : index
// CHECK: [[CLAMPED:%[0-9]+]] = arith.minui [[HEAD]], %c1
// CHECK: [[NEGATIVE:%[0-9]+]] = arith.cmpi slt, [[GROUP]], %c0
// CHECK: arith.select [[NEGATIVE]], %c0{{[_0-9]*}}, [[CLAMPED]] : index

#map = affine_map<() -> ()>
#map1 = affine_map<(d0, d1, d2, d3) -> ()>
#map2 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map4 = affine_map<(d0, d1, d2, d3, d4) -> ()>
#map5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map6 = affine_map<(d0, d1, d2) -> ()>
#map7 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map8 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map9 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
module {
  func.func @main(%arg0: memref<1x8x2x64xf16>, %arg1: memref<1x2x1000x64xf16>, %arg2: memref<1x2x1000x64xf16>, %arg3: i64, %arg4: i64) -> memref<1x8x2x64xf16> attributes {zynml.inputs = ["Q", "K", "V", "cache_start", "g"], zynml.outputs = ["attn"]} {
    %cst = arith.constant 0xFF800000 : f32
    %c0 = arith.constant 0 : index
    %cst_0 = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %cst_1 = arith.constant 1.250000e-01 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<i64>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg3 : i64) outs(%alloc : memref<i64>) {
    ^bb0(%in: i64, %out: i64):
      linalg.yield %in : i64
    }
    %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<i64>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg4 : i64) outs(%alloc_2 : memref<i64>) {
    ^bb0(%in: i64, %out: i64):
      linalg.yield %in : i64
    }
    %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2x1000xf32>
    linalg.generic {indexing_maps = [#map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cst_0 : f32) outs(%alloc_3 : memref<1x8x2x1000xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    linalg.generic {indexing_maps = [#map3, #map4, #map5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %alloc_2 : memref<1x8x2x64xf16>, memref<i64>) outs(%alloc_3 : memref<1x8x2x1000xf32>) attrs =  {zynml.runtime_group = 1 : i64} {
    ^bb0(%in: f16, %in_8: i64, %out: f32):
      %0 = arith.index_cast %in_8 : i64 to index
      %1 = linalg.index 1 : index
      %2 = arith.floordivsi %1, %0 : index
      %3 = arith.maxsi %2, %c0 : index
      %4 = arith.minsi %3, %c1 : index
      %5 = linalg.index 3 : index
      %6 = linalg.index 4 : index
      %7 = memref.load %arg1[%c0, %4, %5, %6] : memref<1x2x1000x64xf16>
      %8 = arith.extf %in : f16 to f32
      %9 = arith.mulf %8, %cst_1 : f32
      %10 = arith.extf %7 : f16 to f32
      %11 = arith.mulf %9, %10 : f32
      %12 = arith.addf %out, %11 : f32
      linalg.yield %12 : f32
    }
    %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2xf32>
    %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2xf32>
    linalg.generic {indexing_maps = [#map6, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%cst : f32) outs(%alloc_5 : memref<1x8x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    linalg.generic {indexing_maps = [#map2, #map1, #map8], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_max"} ins(%alloc_3, %alloc : memref<1x8x2x1000xf32>, memref<i64>) outs(%alloc_5 : memref<1x8x2xf32>) attrs =  {zynml.causal_offset = 0 : i64, zynml.runtime_offset} {
    ^bb0(%in: f32, %in_8: i64, %out: f32):
      %0 = linalg.index 2 : index
      %1 = linalg.index 3 : index
      %2 = arith.index_cast %in_8 : i64 to index
      %3 = arith.addi %0, %2 : index
      %4 = arith.cmpi sle, %1, %3 : index
      %5 = arith.select %4, %in, %cst : f32
      %6 = arith.maximumf %out, %5 : f32
      linalg.yield %6 : f32
    }
    linalg.generic {indexing_maps = [#map6, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%cst_0 : f32) outs(%alloc_4 : memref<1x8x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    linalg.generic {indexing_maps = [#map2, #map8, #map1, #map8], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_sum"} ins(%alloc_3, %alloc_5, %alloc : memref<1x8x2x1000xf32>, memref<1x8x2xf32>, memref<i64>) outs(%alloc_4 : memref<1x8x2xf32>) attrs =  {zynml.causal_offset = 0 : i64, zynml.runtime_offset} {
    ^bb0(%in: f32, %in_8: f32, %in_9: i64, %out: f32):
      %0 = arith.subf %in, %in_8 : f32
      %1 = math.exp %0 : f32
      %2 = linalg.index 2 : index
      %3 = linalg.index 3 : index
      %4 = arith.index_cast %in_9 : i64 to index
      %5 = arith.addi %2, %4 : index
      %6 = arith.cmpi sle, %3, %5 : index
      %7 = arith.select %6, %1, %cst_0 : f32
      %8 = arith.addf %out, %7 : f32
      linalg.yield %8 : f32
    }
    %alloc_6 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2x64xf32>
    linalg.generic {indexing_maps = [#map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cst_0 : f32) outs(%alloc_6 : memref<1x8x2x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    linalg.generic {indexing_maps = [#map3, #map9, #map9, #map4, #map4, #map5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc_3, %alloc_5, %alloc_4, %alloc_2, %alloc : memref<1x8x2x1000xf32>, memref<1x8x2xf32>, memref<1x8x2xf32>, memref<i64>, memref<i64>) outs(%alloc_6 : memref<1x8x2x64xf32>) attrs =  {zynml.causal_offset = 0 : i64, zynml.runtime_group = 1 : i64, zynml.runtime_offset} {
    ^bb0(%in: f32, %in_8: f32, %in_9: f32, %in_10: i64, %in_11: i64, %out: f32):
      %0 = arith.index_cast %in_10 : i64 to index
      %1 = linalg.index 1 : index
      %2 = arith.floordivsi %1, %0 : index
      %3 = arith.maxsi %2, %c0 : index
      %4 = arith.minsi %3, %c1 : index
      %5 = linalg.index 4 : index
      %6 = linalg.index 3 : index
      %7 = memref.load %arg2[%c0, %4, %5, %6] : memref<1x2x1000x64xf16>
      %8 = arith.subf %in, %in_8 : f32
      %9 = math.exp %8 : f32
      %10 = arith.divf %9, %in_9 : f32
      %11 = arith.extf %7 : f16 to f32
      %12 = arith.mulf %10, %11 : f32
      %13 = linalg.index 2 : index
      %14 = arith.index_cast %in_11 : i64 to index
      %15 = arith.addi %13, %14 : index
      %16 = arith.cmpi sle, %5, %15 : index
      %17 = arith.select %16, %12, %cst_0 : f32
      %18 = arith.addf %out, %17 : f32
      linalg.yield %18 : f32
    }
    %alloc_7 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2x64xf16>
    linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel"], library_call = "zynml_attention_round"} ins(%alloc_6 : memref<1x8x2x64xf32>) outs(%alloc_7 : memref<1x8x2x64xf16>) {
    ^bb0(%in: f32, %out: f16):
      %0 = arith.truncf %in : f32 to f16
      linalg.yield %0 : f16
    }
    return %alloc_7 : memref<1x8x2x64xf16>
  }
}
