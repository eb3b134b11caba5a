"""Decode attention compiled for CUDA (no GPU needed; ptxas checks the PTX): a run-time
causal offset (`j <= i + cache_start`, cache_start an integer input), grouped-query
attention (K and V read at head h / group) and the online softmax per element run as ONE
flash-attention launch, the offset read by the kernel at run time from a 0-d buffer (so
one artifact serves every value; cache_start comes by value, and a one-thread kernel puts
it in that buffer)."""
import numpy as np
import pytest

import zynml
from conftest import decode_attention, online_attention
from zynml.runtime.cuda.artifact import launches

HEADS = 8


def artifact(source, rows, keys, d, group, dtype, target=None, batch=1, heads=HEADS,
             **scalars):
    prog = zynml.compile(source, device="cuda", target=target, require_device=False)
    q = np.ones((batch, heads, rows, d), dtype)
    kv = np.ones((batch, heads // group, keys, d), dtype)
    return prog.artifact(Q=q, K=kv, V=kv, **scalars)


def only_launch(artifact):
    """The flash launch, alone: no S, M, L buffers, and no kernel that would put
    cache_start in a 0-d buffer (the flash kernel takes it by value)."""
    [launch] = launches(artifact.plan["body"])
    assert not any(step["op"] == "alloc" and len(step["shape"]) not in (0, 4)
                   for step in artifact.plan["body"])  # no S, M, L buffers
    assert artifact.cubin[:4] == b"\x7fELF"  # ptxas took it
    return launch


@pytest.mark.parametrize("group", [1, 2, 4, 8])
@pytest.mark.parametrize("dtype,d,target,kernel", [
    (np.float16, 64, "sm_90a", "_attention_wgmma"),
    (np.float16, 128, "sm_90a", "_attention_wgmma"),
    (np.float16, 64, "sm_80", "_attention_tensor_core"),
    (np.float32, 8, None, "_attention"),
    (np.float32, 64, None, "_attention"),
])
def test_run_time_offset_and_groups_are_one_flash_kernel(group, dtype, d, target, kernel):
    """The kernel takes cache_start at run time (by value, the program's "%in3"): the
    offset is not compiled in, and K and V stay the inputs' own (no copy per query
    head)."""
    built = artifact(decode_attention(str(group)), 33, 61, d, group, dtype, target,
                     cache_start=np.int64(37))
    launch = only_launch(built)
    assert launch["kernel"].endswith(kernel), launch
    assert launch["arg_kinds"][launch["args"].index("%in3")] == "int64"
    assert not any(step["op"] == "copy" for step in built.plan["body"])


def test_one_artifact_whatever_the_offset():
    """The PTX of cache_start = 0 and of cache_start = 4000 is the same."""
    ptx = {artifact(decode_attention("4"), 1, 4096, 128, 4, np.float16, "sm_90a",
                    cache_start=np.int64(start)).ptx for start in (0, 4000)}
    assert len(ptx) == 1


RUN_TIME_GROUP = decode_attention("g", inputs="Q, K, V, cache_start, g")


@pytest.mark.parametrize("dtype,d,target,groups,kernel", [
    (np.float16, 64, "sm_90a", (1, 2, 8), "_attention_wgmma"),
    (np.float16, 128, "sm_80", (4,), "_attention_tensor_core"),  # static sizes only
    (np.float32, 8, None, (1, 2, 8), "_attention"),
])
def test_run_time_group_is_one_flash_kernel(dtype, d, target, groups, kernel):
    """`h / g` with g an input: one flash launch that takes g by value ("%in4") after
    cache_start ("%in3"), K and V the inputs' own; the PTX is the same for every g (one
    artifact serves groups 1 to 8 where K's heads are a run-time size)."""
    prog = zynml.compile(RUN_TIME_GROUP, device="cuda", target=target, require_device=False,
                         dynamic=["K.shape[1]", "V.shape[1]"] if len(groups) > 1 else None)
    built = []
    for group in groups:
        q = np.ones((2, HEADS, 33, d), dtype)
        kv = np.ones((2, HEADS // group, 61, d), dtype)
        built.append(prog.artifact(Q=q, K=kv, V=kv, cache_start=np.int64(5),
                                   g=np.int64(group)))
    launch = only_launch(built[0])
    assert kernel + ("_partial" if len(groups) > 1 and "wgmma" in kernel else "") == \
        launch["kernel"][2:], launch  # 61 keys: the run-time keys' partial tile kernel
    assert launch["arg_kinds"][launch["args"].index("%in4")] == "int64"
    assert len({b.ptx for b in built}) == 1


def plan_outline(steps: list) -> list:
    """A plan's launches and branches: kernel names, and ("if", then, else) lists."""
    outline = []
    for step in steps:
        if step["op"] == "if":
            outline.append(("if", plan_outline(step["then"]), plan_outline(step["else"])))
        elif step["op"] == "launch":
            outline.append(step["kernel"])
    return outline


@pytest.mark.parametrize("dtype,target,decode,flash", [
    (np.float16, "sm_90a", "attention_decode_mma", "attention_wgmma"),
    (np.float32, None, "attention_decode", "attention"),
])
def test_run_time_group_specializes_the_decode_kernels_at_launch(dtype, target, decode, flash):
    """A decode step whose group is an input (32 query heads, 8 key heads): the decode
    kernels, built for group 32 / 8 = 4, run where g is 4 (the launch plan tests the
    call's g); the flash kernel, which reads g, runs for any other g. One artifact."""
    shape = dict(rows=1, keys=4096, d=128 if dtype == np.float16 else 64, group=4,
                 dtype=dtype, target=target, batch=2, heads=32, cache_start=np.int64(9))
    built = artifact(RUN_TIME_GROUP, g=np.int64(4), **shape)
    steps = built.plan["body"]
    [test] = [step for step in steps if step["op"] == "scalar" and step["fn"] == "eq"]
    assert test["args"][1] == 4 and built.ptx == artifact(RUN_TIME_GROUP, g=np.int64(3),
                                                          **shape).ptx
    [(branch, then, otherwise)] = [item for item in plan_outline(steps) if item[0] == "if"]
    assert then == [f"k0_{decode}_part", f"k0_{decode}_merge"] and otherwise == [f"k0_{flash}"]
    constant = plan_outline(artifact(decode_attention("4"), **shape).plan["body"])
    assert constant[-2:] == then  # the constant group's kernels, untested


def split_launches(built, strategy="attention_decode_mma"):
    """The decode strategy's two launches (the parts, then their merge) and its scratch
    buffer of the parts' O, m and l."""
    *scalar, part, merge = launches(built.plan["body"])
    assert part["kernel"].endswith(f"_{strategy}_part"), part
    assert merge["kernel"].endswith(f"_{strategy}_merge"), merge
    [scratch] = [step for step in built.plan["body"]
                 if step["op"] == "alloc" and len(step["shape"]) == 1]
    assert part["args"][-1] == merge["args"][0] == scratch["result"]
    assert built.cubin[:4] == b"\x7fELF"  # ptxas took both
    return part, merge, scratch


@pytest.mark.parametrize("batch,parts", [(1, 16), (2, 8), (8, 2)])
def test_benchmark_shape_splits_the_keys(batch, parts):
    """benchmarks/decode_attention.py's step: 32 query heads of one token, 8 KV heads
    (group 4) of a 4096-key cache, head dim 128, f16, on tensor cores. A block of 8
    warps per KV head and part of the keys, a block a multiprocessor: 132 / (batch x 8)
    parts, 4 rows a block; the merge has a block per row and a thread per dim."""
    part, merge, scratch = split_launches(artifact(
        decode_attention("4"), 1, 4096, 128, 4, np.float16, "sm_90a", batch=batch,
        heads=32, cache_start=np.int64(9)))
    slices = batch * 8
    assert part["grid"] == [parts, slices, 1] and part["block"] == [256, 1, 1]
    assert merge["grid"] == [4, slices, 1] and merge["block"] == [128, 1, 1]
    assert scratch["shape"] == [slices * parts * 4 * (128 + 2)]


@pytest.mark.parametrize("batch", [16, 64])
def test_one_part_writes_out_without_a_merge(batch):
    """16 x 8 KV heads fill a wave of 132 blocks with one part each: the part kernel
    writes out itself (no scratch buffer, no merge launch)."""
    built = artifact(decode_attention("4"), 1, 4096, 128, 4, np.float16, "sm_90a",
                     batch=batch, heads=32, cache_start=np.int64(9))
    *scalar, part = launches(built.plan["body"])
    assert part["kernel"].endswith("_attention_decode_mma_part"), part
    assert part["grid"] == [1, batch * 8, 1]
    assert not any(step["op"] == "alloc" and len(step["shape"]) == 1
                   for step in built.plan["body"])


def test_fma_kernel_splits_the_keys():
    """attention_decode (FMAs), where the mma kernel is declined: about 264 blocks of 4
    warps, each part at least 2 trips of 4 warps x 2 keys x 4."""
    prog = zynml.compile(decode_attention("4"), device="cuda", target="sm_90a",
                         params="attention_decode_mma.max_rows=0", require_device=False)
    q = np.ones((1, 32, 1, 128), np.float16)
    kv = np.ones((1, 8, 4096, 128), np.float16)
    built = prog.artifact(Q=q, K=kv, V=kv, cache_start=np.int64(9))
    part, merge, scratch = split_launches(built, "attention_decode")
    assert part["grid"] == [33, 8, 1] and part["block"] == [128, 1, 1]


def test_mma_part_kernel_fits_one_block_a_multiprocessor():
    """The part kernel asks ptxas for one 256-thread block a multiprocessor
    (.minnctapersm 1), and its mmas are m16n8k16 with f32 accumulators."""
    built = artifact(decode_attention("4"), 1, 4096, 128, 4, np.float16, "sm_90a",
                     batch=2, heads=32, cache_start=np.int64(9))
    part = built.ptx[built.ptx.index(".entry k0_attention_decode_mma_part"):
                     built.ptx.index(".entry k0_attention_decode_mma_merge")]
    assert ".minnctapersm 1" in part and ".maxntid 256, 1, 1" in part
    assert part.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 32


@pytest.mark.parametrize("batch,steps", [(2, 1), (16, 2)])
def test_a_trip_takes_two_steps_where_the_slices_fill_the_wave(batch, steps):
    """Where the KV slices alone fill a wave (16 x 8 on 132 multiprocessors: one part
    each), a warp loads two 16-key steps a trip (32 mmas each at d 128); with several
    parts (batch 2), one."""
    built = artifact(decode_attention("4"), 1, 4096, 128, 4, np.float16, "sm_90a",
                     batch=batch, heads=32, cache_start=np.int64(9))
    part = built.ptx[built.ptx.index(".entry k0_attention_decode_mma_part"):]
    part = part[:part.find(".entry", 1)] if ".entry" in part[1:] else part
    assert part.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 32 * steps


def test_keys_and_values_load_16_bytes_at_a_time():
    """Each lane's K and V vector is one aligned 16-byte load (`ld.global.v4`), not eight
    loads of 2 bytes: the first version's vector loads carried no alignment, and LLVM
    split them (57% of the copy rate at batch 16 instead of 70%, on an H200)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for params in ("", "attention_decode_mma.max_rows=0"):
        prog = zynml.compile(decode_attention("4"), device="cuda", target="sm_90a",
                             params=params, require_device=False)
        q = np.ones((2, 32, 1, 64), ml_dtypes.bfloat16)
        kv = np.ones((2, 8, 4096, 64), ml_dtypes.bfloat16)
        built = prog.artifact(Q=q, K=kv, V=kv, cache_start=np.int64(9))
        part = built.ptx[built.ptx.index("_part("):built.ptx.index("_merge(")]
        assert "ld.global.v4.b32" in part or "ld.global.nc.v4.b32" in part
        assert "ld.global.b16" not in part and "ld.global.nc.b16" not in part


@pytest.mark.parametrize("rows,group,dtype,d,kernel", [
    (1, 8, np.float16, 64, "_attention_decode_mma_part"),  # 8 rows: the mma's g rows
    (2, 8, np.float16, 64, "_attention_decode_mma_part"),  # 16 rows: g and g + 8
    (2, 8, np.float16, 128, "_attention_wgmma"),  # 8 warps' 16 x 128 states: 66 KB shared
    (1, 8, np.float16, 32, "_attention_decode_part"),      # head dim not a multiple of 64
    (3, 8, np.float16, 64, "_attention_wgmma"),            # 24 rows: more than a few
    (4, 4, np.float32, 64, "_attention_decode_part"),      # 16 rows x 4 dims a lane
    (1, 1, np.float64, 64, "_attention"),                  # f64: the SIMT flash kernel
    (1, 1, np.float32, 5, "_attention_decode_part"),       # one row of 5: a lane a key
    (17, 1, np.float32, 8, "_attention"),                  # 17 rows: more than a few
])
def test_rows_per_kv_head_choose_the_kernel(rows, group, dtype, d, kernel):
    built = artifact(decode_attention(str(group)), rows, 300, d, group, dtype, "sm_90a",
                     cache_start=np.int64(5))
    assert any(launch["kernel"].endswith(kernel) for launch in launches(built.plan["body"]))


@pytest.mark.parametrize("target,kernel", [("sm_80", "_attention_decode_mma_part"),
                                           ("sm_75", "_attention_decode_part")])
def test_mma_kernel_needs_mma_sync(target, kernel):
    """sm_75 has no mma.sync m16n8k16: its decode step stays on FMAs."""
    built = artifact(decode_attention("4"), 1, 300, 64, 4, np.float16, target,
                     cache_start=np.int64(5))
    assert any(launch["kernel"].endswith(kernel) for launch in launches(built.plan["body"]))


@pytest.mark.parametrize("group", [1, 2, 4, 8])
@pytest.mark.parametrize("dtype,d,target,kernel", [
    (np.float16, 64, "sm_90a", "_attention_wgmma"),
    (np.float32, 8, None, "_attention"),
])
def test_online_softmax_is_one_flash_kernel(group, dtype, d, target, kernel):
    """Not causal: f32 without groups takes the register-tiled SIMT kernel, which does
    not read K and V by group (grouped f32 keeps `attention`)."""
    launch = only_launch(artifact(online_attention(str(group)), 33, 61, d, group, dtype,
                                  target))
    if dtype == np.float32 and group == 1:
        kernel = "_attention_simt_tiled"
    assert launch["kernel"].endswith(kernel), launch
