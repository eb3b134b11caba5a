// linalg-to-gpu-kernels, attention_decode strategy: an attention with few query rows per
// KV head (here 2 rows x a group of 4 query heads = 8 rows over one KV head, f16, head
// dim 16, a run-time causal offset) splits its 1000 keys into 3 parts (at least 2 trips
// of 128 keys each): the part kernel has a block per (part, KV head), 2 lanes a key (16
// bytes each) and 2 keys a thread per trip, the next trip's loaded before this trip's
// arithmetic, and writes each part's O, m and l into a scratch buffer (2 KV heads x 3
// parts x 8 rows x (16 + 2) f32); the merge kernel has a block per (row, KV head) and a
// thread per dim, and loads the 3 parts at once. The attention's own S, M and L
// buffers are gone, and so is the 0-d buffer the host's cache_start filled: the part
// kernel takes cache_start by value (no kernel of its own to fill it).
// RUN: zynml-opt %s --linalg-to-gpu-kernels | filecheck %s

// CHECK-LABEL: func.func @main(
// CHECK-NOT: memref<1x8x2x1000xf32>
// CHECK-NOT: memref<i64>
// CHECK: [[PARTS:%[a-z0-9_]+]] = memref.alloc() : memref<864xf32>
// CHECK-NOT: gpu.launch_func @zynml_kernels::@k{{[0-9]+}}_pointwise
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_decode_part blocks in (%c3, %c2, %c1{{[_0-9]*}}) threads in (%c128, {{.*}} args(%arg0 : memref<1x8x2x16xf16>, %arg1 : memref<1x2x1000x16xf16>, %arg2 : memref<1x2x1000x16xf16>, %arg3 : i64, [[PARTS]] : memref<864xf32>) {{.*}}zynml.strategy = "attention_decode"
// CHECK: gpu.launch_func @zynml_kernels::@k0_attention_decode_merge blocks in (%c8, %c2{{[_0-9]*}}, %c1{{[_0-9]*}}) threads in (%c16, {{.*}} args([[PARTS]] : memref<864xf32>, [[OUT:%[a-z0-9_]+]] : memref<1x8x2x16xf16>)
// CHECK: return [[OUT]]
// CHECK: memref.global "private" @k0_attention_decode_part_o : memref<4x8x16xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: gpu.func @k0_attention_decode_part(
// the run-time offset, by value
// CHECK-SAME: %arg3: i64
// CHECK-NOT: memref.load %arg3
// CHECK-COUNT-8: vector.load %arg0{{.*}} : memref<1x8x2x16xf16>, vector<8xf16>
// the first trip's K and V (key, value, key, value), then the loop carrying them; each
// vector 16-byte aligned (one 16-byte load, not eight of 2 bytes)
// CHECK-COUNT-2: vector.load %arg1{{.*}} {alignment = 16 : i64} : memref<1x2x1000x16xf16>, vector<8xf16>
// CHECK: scf.for {{.*}} step %c128 iter_args({{.*}}) -> ({{.*}}vector<8xf16>, vector<8xf16>, vector<8xf16>, vector<8xf16>)
// the next trip's
// CHECK: vector.load %arg1{{.*}} : memref<1x2x1000x16xf16>, vector<8xf16>
// CHECK-NEXT: vector.load %arg2{{.*}} : memref<1x2x1000x16xf16>, vector<8xf16>
// a key's two lanes add their halves of each row's dot product
// CHECK: gpu.shuffle  xor {{.*}}, %c1_i32
// CHECK: math.exp2
// CHECK: scf.yield
// the warp's 16 key streams meet: xor 2, 4, 8, 16
// CHECK: gpu.shuffle  xor {{.*}}, %c2_i32
// CHECK: gpu.shuffle  xor {{.*}}, %c16_i32
// CHECK: gpu.barrier
// CHECK: memref.store {{.*}} : memref<864xf32>
// CHECK-LABEL: gpu.func @k0_attention_decode_merge(
// CHECK-NOT: scf.for
// CHECK-COUNT-9: memref.load %arg0
// CHECK: arith.maximumf
// CHECK-COUNT-3: math.exp2
// CHECK: arith.truncf {{.*}} : f32 to f16
// CHECK: memref.store {{.*}} : memref<1x8x2x16xf16>

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
  func.func @main(%arg0: memref<1x8x2x16xf16>, %arg1: memref<1x2x1000x16xf16>, %arg2: memref<1x2x1000x16xf16>, %arg3: i64) -> memref<1x8x2x16xf16> attributes {zynml.inputs = ["Q", "K", "V", "cache_start"], zynml.outputs = ["attn"]} {
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
    linalg.generic {indexing_maps = [#map3, #map4, #map5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_scores"} ins(%arg0, %arg1 : memref<1x8x2x16xf16>, memref<1x2x1000x16xf16>) outs(%alloc_2 : memref<1x8x2x1000xf32>) {
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
    %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2x16xf32>
    linalg.generic {indexing_maps = [#map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cst_0 : f32) outs(%alloc_5 : memref<1x8x2x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    linalg.generic {indexing_maps = [#map3, #map9, #map9, #map10, #map11, #map5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"], library_call = "zynml_attention_out"} ins(%alloc_2, %alloc_4, %alloc_3, %arg2, %alloc : memref<1x8x2x1000xf32>, memref<1x8x2xf32>, memref<1x8x2xf32>, memref<1x2x1000x16xf16>, memref<i64>) outs(%alloc_5 : memref<1x8x2x16xf32>) attrs =  {zynml.causal_offset = 0 : i64, zynml.runtime_offset} {
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
    %alloc_6 = memref.alloc() {alignment = 64 : i64} : memref<1x8x2x16xf16>
    linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel"], library_call = "zynml_attention_round"} ins(%alloc_5 : memref<1x8x2x16xf32>) outs(%alloc_6 : memref<1x8x2x16xf16>) {
    ^bb0(%in: f32, %out: f16):
      %0 = arith.truncf %in : f32 to f16
      linalg.yield %0 : f16
    }
    return %alloc_6 : memref<1x8x2x16xf16>
  }
}
