// linalg-to-gpu-kernels' options (passes/linalg_to_gpu_kernels.py): `strategy` forces one
// strategy of the registry (zynml/backend/cuda/strategies/__init__.py), a group strategy
// too; `params` sets strategy parameters (strategies/tuning.py), for every kernel of a
// strategy or for one problem (`@` its operand shapes); `chip` picks the target, whose
// shared memory and instructions the strategies check. Bad options are located errors.
// RUN: zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=attention_tensor_core})' | filecheck %s --check-prefix=TC
// RUN: zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=attention_simt_tiled})' | filecheck %s --check-prefix=SIMT
// RUN: zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=attention_simt_tiled params=attention_simt_tiled.block_m=32})' | filecheck %s --check-prefix=SIMT32
// RUN: zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=attention_simt_tiled params=attention_simt_tiled@1x2x20x16f16_1x2x20x16f16_1x2x20x16f16_20x20i1_1x2x20x16f16.block_m=32})' | filecheck %s --check-prefix=SIMT32
// RUN: zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=attention_simt_tiled params=attention_simt_tiled@1x2x20x16f16.block_m=32})' | filecheck %s --check-prefix=SIMT
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=attention_wgmma})' 2>&1 | filecheck %s --check-prefix=NOFIT
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=bogus})' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{params=attention_tensor_core.foo=1})' 2>&1 | filecheck %s --check-prefix=FIELD
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{params=attention_tensor_core.warps=x})' 2>&1 | filecheck %s --check-prefix=VALUE
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{params=nope.warps=1})' 2>&1 | filecheck %s --check-prefix=STRATEGY
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{chip=sm_42})' 2>&1 | filecheck %s --check-prefix=CHIP
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{strategy=attention_tensor_core chip=sm_75})' 2>&1 | filecheck %s --check-prefix=FEATURES

// One f16 attention (scores, row max, row sum, weighted values, the rounding to f16):
// each attention strategy takes the run as one kernel when it is forced.
// TC: gpu.launch_func @zynml_kernels::@k0_attention_tensor_core blocks in (%c1, %c2, %c1{{.*}}) threads in (%c64,
// TC-SAME: {zynml.problem = "1x2x20x16f16_1x2x20x16f16_1x2x20x16f16_20x20i1_1x2x20x16f16", zynml.strategy = "attention_tensor_core"}
// TC-NOT: gpu.launch_func
// 64 query rows a block, 16 lanes a row: 256 threads; with 32 rows, 128
// SIMT: gpu.launch_func @zynml_kernels::@k0_attention_simt_tiled blocks in (%c1, %c2, %c1{{.*}}) threads in (%c256,
// SIMT-SAME: {zynml.problem = "{{[^"]*}}", zynml.strategy = "attention_simt_tiled"}
// SIMT32: gpu.launch_func @zynml_kernels::@k0_attention_simt_tiled blocks in (%c1, %c2, %c1{{.*}}) threads in (%c128,
// Head dim 16: not one attention_wgmma takes (64 or 128)
// NOFIT: error: GPU strategy 'attention_wgmma' does not fit this loop nest
// UNKNOWN: error: unknown GPU strategy 'bogus'; strategies: attention_decode_mma, attention_decode, attention_wgmma, attention_tensor_core, attention_simt_tiled, attention, matmul_wgmma, row_fused, matvec_mma, matvec, matmul_tensor_core, matmul, implicit_gemm_mma, implicit_gemm, row_argreduce, row_reduce, transpose, pointwise
// FIELD: error: strategy 'attention_tensor_core' has no parameter 'foo'; its parameters: warps, m_tiles, block_n, q_shared, pad
// VALUE: error: 'attention_tensor_core.warps=x': warps is an integer
// STRATEGY: error: unknown GPU strategy 'nope'; strategies: attention_decode_mma, attention_decode, attention_wgmma,
// CHIP: error: unknown CUDA target 'sm_42'; known: sm_70, sm_75, sm_80,
// FEATURES: error: GPU strategy 'attention_tensor_core' needs cp_async, mma_sync, which sm_75 lacks

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map2 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#map6 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map7 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#map8 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#map9 = affine_map<(d0, d1, d2, d3, d4) -> (d2, d4)>
func.func @attention_f16(%arg0: memref<1x2x20x16xf16>, %arg1: memref<1x2x20x16xf16>, %arg2: memref<1x2x20x16xf16>, %arg3: memref<20x20xi1>) -> memref<1x2x20x16xf16> {
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %cst_1 = arith.constant 2.500000e-01 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x20xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<1x2x20x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : memref<1x2x20x16xf16>, memref<1x2x20x16xf16>) outs(%alloc : memref<1x2x20x20xf32>) {
  ^bb0(%in: f16, %in_6: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.mulf %0, %cst_1 : f32
    %2 = arith.extf %in_6 : f16 to f32
    %3 = arith.mulf %1, %2 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  }
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20xf32>
  %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20xf32>
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_3 : memref<1x2x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst : f32
  }
  linalg.generic {indexing_maps = [#map, #map5, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_max"} ins(%alloc, %arg3 : memref<1x2x20x20xf32>, memref<20x20xi1>) outs(%alloc_3 : memref<1x2x20xf32>) {
  ^bb0(%in: f32, %in_6: i1, %out: f32):
    %0 = arith.select %in_6, %in, %cst : f32
    %1 = arith.maximumf %out, %0 : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel"]} outs(%alloc_2 : memref<1x2x20xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map6, #map5, #map6], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_sum"} ins(%alloc, %alloc_3, %arg3 : memref<1x2x20x20xf32>, memref<1x2x20xf32>, memref<20x20xi1>) outs(%alloc_2 : memref<1x2x20xf32>) {
  ^bb0(%in: f32, %in_6: f32, %in_7: i1, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.select %in_7, %1, %cst_0 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x16xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc_4 : memref<1x2x20x16xf32>) {
  ^bb0(%out: f32):
    linalg.yield %cst_0 : f32
  }
  linalg.generic {indexing_maps = [#map1, #map7, #map7, #map8, #map9, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc, %alloc_3, %alloc_2, %arg2, %arg3 : memref<1x2x20x20xf32>, memref<1x2x20xf32>, memref<1x2x20xf32>, memref<1x2x20x16xf16>, memref<20x20xi1>) outs(%alloc_4 : memref<1x2x20x16xf32>) {
  ^bb0(%in: f32, %in_6: f32, %in_7: f32, %in_8: f16, %in_9: i1, %out: f32):
    %0 = arith.subf %in, %in_6 : f32
    %1 = math.exp %0 : f32
    %2 = arith.divf %1, %in_7 : f32
    %3 = arith.extf %in_8 : f16 to f32
    %4 = arith.mulf %2, %3 : f32
    %5 = arith.select %in_9, %4, %cst_0 : f32
    %6 = arith.addf %out, %5 : f32
    linalg.yield %6 : f32
  }
  %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<1x2x20x16xf16>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"], library_call = "zynml_attention_round"} ins(%alloc_4 : memref<1x2x20x16xf32>) outs(%alloc_5 : memref<1x2x20x16xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  return %alloc_5 : memref<1x2x20x16xf16>
}

