// linalg-to-gpu-kernels, attention_decode_mma strategy: the decode attention of
// linalg-to-gpu-kernels-attention-decode.mlir at head dim 64 (2 query rows x a group of
// 4 query heads = 8 rows over each of 2 KV heads, f16, 1000 keys, a run-time causal
// offset) runs its part kernel on mma.sync. 8 warps a block and one block a
// multiprocessor (PTX's .minnctapersm 1): 132 blocks / 2 KV heads = 66 parts, but a part
// takes at least 2 trips of 8 warps x 16 keys, so 1000 keys make 3 parts; the parts
// buffer holds 2 KV heads x 3 parts x 8 rows x (64 + 2) f32. A lane loads Q's row g once
// (2 chunks of 16 bytes), and per 16 keys 4 chunks of K (keys g and g + 8) and 4 of V
// (keys 2t, 2t + 1, 2t + 8, 2t + 9); S = Q K^T is 2 x 4 mmas (2 tiles of 8 keys, 4
// k-steps), P V 8 mmas (an instance per 8 columns of O), V's pairs of keys by vector
// shuffles. A row's max meets across its quad (xor 1, 2), and so does its sum, once,
// after the loop. With one part (min_trips=8), the part kernel writes out itself: no
// scratch and no merge.
// RUN: zynml-opt %s --linalg-to-gpu-kernels | filecheck %s
// RUN: zynml-opt %s --pass-pipeline='builtin.module(linalg-to-gpu-kernels{params=attention_decode_mma.min_trips=8})' | filecheck %s --check-prefix=ONE

// CHECK-LABEL: func.func @main(
// CHECK: [[PARTS:%[a-z0-9_]+]] = memref.alloc() : memref<3168xf32>
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_decode_mma_part blocks in (%c3, %c2, %c1{{[_0-9]*}}) threads in (%c256, {{.*}} args(%arg0 : memref<1x8x2x64xf16>, %arg1 : memref<1x2x1000x64xf16>, %arg2 : memref<1x2x1000x64xf16>, %arg3 : i64, [[PARTS]] : memref<3168xf32>) {{.*}}zynml.strategy = "attention_decode_mma"
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_decode_mma_merge blocks in (%c8, %c2{{[_0-9]*}}, %c1{{[_0-9]*}}) threads in (%c64, {{.*}} args([[PARTS]] : memref<3168xf32>, [[OUT:%[a-z0-9_]+]] : memref<1x8x2x64xf16>)
// CHECK: return [[OUT]]
// CHECK-LABEL: gpu.func @k0_attention_decode_mma_part(
// CHECK-SAME: %arg3: i64
// CHECK-SAME: nvvm.minctasm = 1
// CHECK-COUNT-2: vector.load %arg0{{.*}} {alignment = 16 : i64} : memref<1x8x2x64xf16>, vector<8xf16>
// CHECK: scf.for {{.*}} step %c128
// CHECK-COUNT-4: vector.load %arg1{{.*}} {alignment = 16 : i64} : memref<1x2x1000x64xf16>, vector<8xf16>
// CHECK-COUNT-4: vector.load %arg2{{.*}} {alignment = 16 : i64} : memref<1x2x1000x64xf16>, vector<8xf16>
// CHECK-COUNT-8: llvm.inline_asm "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK: gpu.shuffle  xor {{.*}}, %c1_i32
// CHECK: gpu.shuffle  xor {{.*}}, %c2_i32
// CHECK: math.exp2
// CHECK: arith.truncf {{.*}} : vector<2xf32> to vector<2xf16>
// CHECK: vector.shuffle {{.*}} [0, 8] : vector<8xf16>, vector<8xf16>
// CHECK-COUNT-8: llvm.inline_asm "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-NOT: llvm.inline_asm
// CHECK: scf.yield
// the row sums of the quad's lanes, once
// CHECK: gpu.shuffle  xor {{.*}}, %c1_i32
// CHECK: gpu.shuffle  xor {{.*}}, %c2_i32
// CHECK: gpu.barrier
// CHECK: memref.store {{.*}} : memref<3168xf32>
// CHECK-LABEL: gpu.func @k0_attention_decode_mma_merge(
// CHECK-COUNT-9: memref.load %arg0
// CHECK: memref.store {{.*}} : memref<1x8x2x64xf16>

// ONE-LABEL: func.func @main(
// ONE-NOT: memref.alloc() : memref<{{[0-9]+}}xf32>
// ONE: [[OUT:%[a-z0-9_]+]] = memref.alloc() {{.*}} : memref<1x8x2x64xf16>
// ONE: gpu.launch_func @zynml_kernels::@k0_attention_decode_mma_part blocks in (%c1, %c2, %c1{{[_0-9]*}}) {{.*}}%arg3 : i64, [[OUT]] : memref<1x8x2x64xf16>)
// ONE-NOT: gpu.launch_func
// ONE: return [[OUT]]
// ONE-LABEL: gpu.func @k0_attention_decode_mma_part(
// ONE: gpu.barrier
// ONE: arith.truncf {{.*}} : f32 to f16
// ONE: memref.store {{.*}}, %arg4[{{.*}}] : memref<1x8x2x64xf16>
// ONE-NOT: gpu.func @k0_attention_decode_mma_merge

#map = affine_map<() -> ()>
#map1 = affine_map<(d0, d1, d2, d3) -> ()>
#map2 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map4 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 4, d3, d4)>
#map5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map6 = affine_map<(d0, d1, d2) -> ()>
#map7 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map8 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map9 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#map10 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 4, d4, d3)>
#map11 = affine_map<(d0, d1, d2, d3, d4) -> ()>
module {
  func.func @main(%arg0: memref<1x8x2x64xf16>, %arg1: memref<1x2x1000x64xf16>, %arg2: memref<1x2x1000x64xf16>, %arg3: i64) -> memref<1x8x2x64xf16> attributes {zynml.inputs = ["Q", "K", "V", "cache_start"], zynml.outputs = ["attn"]} {
    %cst = arith.constant 0xFF800000 : f32
    %cst_0 = arith.constant 0.000000e+00 : f32
    %cst_1 = arith.constant 1.250000e-01 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<i64>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg3 : i64) outs(%alloc : memref<i64>) {
    ^bb0(%in: i64, %out: i64):
      linalg.yield %in : i64
    }
    %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2x1000xf32>
    linalg.generic {indexing_maps = [#map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cst_0 : f32) outs(%alloc_2 : memref<1x8x2x1000xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    linalg.generic {indexing_maps = [#map3, #map4, #map5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : memref<1x8x2x64xf16>, memref<1x2x1000x64xf16>) outs(%alloc_2 : memref<1x8x2x1000xf32>) {
    ^bb0(%in: f16, %in_7: f16, %out: f32):
      %0 = arith.extf %in : f16 to f32
      %1 = arith.mulf %0, %cst_1 : f32
      %2 = arith.extf %in_7 : f16 to f32
      %3 = arith.mulf %1, %2 : f32
      %4 = arith.addf %out, %3 : f32
      linalg.yield %4 : f32
    }
    %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2xf32>
    %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2xf32>
    linalg.generic {indexing_maps = [#map6, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%cst : f32) outs(%alloc_4 : memref<1x8x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    linalg.generic {indexing_maps = [#map2, #map1, #map8], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_max"} ins(%alloc_2, %alloc : memref<1x8x2x1000xf32>, memref<i64>) outs(%alloc_4 : memref<1x8x2xf32>) attrs =  {zynml.causal_offset = 0 : i64, zynml.runtime_offset} {
    ^bb0(%in: f32, %in_7: i64, %out: f32):
      %0 = linalg.index 2 : index
      %1 = linalg.index 3 : index
      %2 = arith.index_cast %in_7 : i64 to index
      %3 = arith.addi %0, %2 : index
      %4 = arith.cmpi sle, %1, %3 : index
      %5 = arith.select %4, %in, %cst : f32
      %6 = arith.maximumf %out, %5 : f32
      linalg.yield %6 : f32
    }
    linalg.generic {indexing_maps = [#map6, #map7], iterator_types = ["parallel", "parallel", "parallel"]} ins(%cst_0 : f32) outs(%alloc_3 : memref<1x8x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    linalg.generic {indexing_maps = [#map2, #map8, #map1, #map8], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_sum"} ins(%alloc_2, %alloc_4, %alloc : memref<1x8x2x1000xf32>, memref<1x8x2xf32>, memref<i64>) outs(%alloc_3 : memref<1x8x2xf32>) attrs =  {zynml.causal_offset = 0 : i64, zynml.runtime_offset} {
    ^bb0(%in: f32, %in_7: f32, %in_8: i64, %out: f32):
      %0 = arith.subf %in, %in_7 : f32
      %1 = math.exp %0 : f32
      %2 = linalg.index 2 : index
      %3 = linalg.index 3 : index
      %4 = arith.index_cast %in_8 : i64 to index
      %5 = arith.addi %2, %4 : index
      %6 = arith.cmpi sle, %3, %5 : index
      %7 = arith.select %6, %1, %cst_0 : f32
      %8 = arith.addf %out, %7 : f32
      linalg.yield %8 : f32
    }
    %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2x64xf32>
    linalg.generic {indexing_maps = [#map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cst_0 : f32) outs(%alloc_5 : memref<1x8x2x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    linalg.generic {indexing_maps = [#map3, #map9, #map9, #map10, #map11, #map5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc_2, %alloc_4, %alloc_3, %arg2, %alloc : memref<1x8x2x1000xf32>, memref<1x8x2xf32>, memref<1x8x2xf32>, memref<1x2x1000x64xf16>, memref<i64>) outs(%alloc_5 : memref<1x8x2x64xf32>) attrs =  {zynml.causal_offset = 0 : i64, zynml.runtime_offset} {
    ^bb0(%in: f32, %in_7: f32, %in_8: f32, %in_9: f16, %in_10: i64, %out: f32):
      %0 = arith.subf %in, %in_7 : f32
      %1 = math.exp %0 : f32
      %2 = arith.divf %1, %in_8 : f32
      %3 = arith.extf %in_9 : f16 to f32
      %4 = arith.mulf %2, %3 : f32
      %5 = linalg.index 2 : index
      %6 = linalg.index 4 : index
      %7 = arith.index_cast %in_10 : i64 to index
      %8 = arith.addi %5, %7 : index
      %9 = arith.cmpi sle, %6, %8 : index
      %10 = arith.select %9, %4, %cst_0 : f32
      %11 = arith.addf %out, %10 : f32
      linalg.yield %11 : f32
    }
    %alloc_6 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2x64xf16>
    linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel"], library_call = "zynml_attention_round"} ins(%alloc_5 : memref<1x8x2x64xf32>) outs(%alloc_6 : memref<1x8x2x64xf16>) {
    ^bb0(%in: f32, %out: f16):
      %0 = arith.truncf %in : f32 to f16
      linalg.yield %0 : f16
    }
    return %alloc_6 : memref<1x8x2x64xf16>
  }
}
