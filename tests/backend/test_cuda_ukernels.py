"""The CUDA ukernels (zynml/backend/cuda/ukernels/): which problems the attention
backward takes, its host function and launches as a launch plan, and the artifact's
compile and cache (a second call reads the cache; a damaged entry is compiled again).
Their numerics run on a GPU: tests/kernels/test_attention_backward_cuda.py."""
import math

import pytest

from zynml.backend.cuda import ukernels
from zynml.backend.cuda.launch_plan import extract_plan
from zynml.backend.cuda.target import CudaTarget
from zynml.backend.cuda.ukernels.attention_backward import BLOCK, Problem, supports
from zynml.cache import ArtifactCache
from zynml.errors import ZynMLError
from zynml.runtime.cuda.artifact import launches

AMPERE = CudaTarget("sm_80")  # mma.sync's products: no wgmma
ODD = Problem(heads=6, kv_heads=3, rows=37, keys=101, d=32, element="bf16", causal=True,
              scale=0.17)


def _with(**changes):
    return Problem(**{**ODD.__dict__, **changes})


def test_supports_half_types_head_dims_to_128_and_whole_groups():
    assert supports(ODD) is None
    assert supports(_with(element="f16", d=64, causal=False, rows=200)) is None
    assert supports(_with(d=128)) is None and supports(_with(d=80)) is None
    for problem, why in ((_with(element="f32"), "element f32"),
                         (_with(d=144), "head dim 144"), (_with(d=40), "head dim 40"),
                         (_with(kv_heads=4), "not groups of 4"),
                         (_with(rows=102), "more queries than keys"),
                         (_with(scale=-1.0), "scale")):
        assert why in supports(problem)


def test_the_host_function_is_a_plan_of_two_launches():
    module = ukernels.module("attention_backward", ODD)
    with module.context:
        plan, _ = extract_plan(module.operation)
    assert plan["input_names"] == ["q", "k", "v", "dout", "o"]
    assert plan["output_names"] == ["dq", "dk", "dv"]
    assert [spec["shape"] for spec in plan["inputs"]] == \
        [[6, 37, 32], [3, 101, 32], [3, 101, 32], [6, 37, 32], [6, 37, 32]]
    steps = list(launches(plan["body"]))
    assert [s["kernel"] for s in steps] == ["k0_attention_backward_dq",
                                            "k1_attention_backward_dkdv"]
    # a block a head's tile (tile_kernel.BlockOrder)
    assert [s["grid"] for s in steps] == [[6 * math.ceil(37 / BLOCK), 1, 1],
                                          [3 * math.ceil(101 / BLOCK), 1, 1]]


def _shared_memory(name, problem, target=None):
    """(dynamic shared bytes of each launch, a static stage declared, dynamic shared
    memory used) of ukernel `name`'s module."""
    module = ukernels.module(name, problem, target)
    with module.context:
        plan, _ = extract_plan(module.operation)
    text = str(module)
    return [s["shared_bytes"] for s in launches(plan["body"])], "_stage" in text, \
        "gpu.dynamic_shared_memory" in text


@pytest.mark.parametrize("name", ["attention_backward", "attention_forward"])
def test_without_wgmma_heads_over_64_keep_their_tiles_in_dynamic_shared_memory(name):
    """mma.sync: up to 64 the kept tiles are register fragments and the stage, four
    64-row tiles, is static; at 128 the stage is six tiles (the kept two and the buffers
    after them), too large for static shared memory: each launch asks for it."""
    launches_made = 2 if name == "attention_backward" else 1
    assert _shared_memory(name, _with(d=64), AMPERE) == ([0] * launches_made, True, False)
    assert _shared_memory(name, _with(d=128, rows=101), AMPERE) == \
        ([6 * BLOCK * (128 + 8) * 2] * launches_made, False, True)


@pytest.mark.parametrize("d", [64, 128])
def test_with_wgmma_the_stage_is_six_swizzled_tiles_in_dynamic_shared_memory(d):
    """sm_90a, head dims 64 and 128: six tiles of d / 64 boxes of 64 rows x 128 bytes,
    from a 1024-byte boundary (the swizzle's period, which the launch adds)."""
    assert _shared_memory("attention_backward", _with(d=d)) == \
        ([6 * (d // 64) * 64 * 128 + 1024] * 2, False, True)
    assert _shared_memory("attention_backward", _with(d=48))[0] == [0, 0]  # mma.sync


def test_artifact_is_compiled_once_then_read_from_the_cache(tmp_path, monkeypatch):
    cache = ArtifactCache(tmp_path)
    made = ukernels.artifact("attention_backward", ODD, cache=cache)
    assert ".entry k0_attention_backward_dq" in made.ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in made.ptx
    entries = list(tmp_path.rglob("*"))

    def no_build(*_):
        raise AssertionError("compiled again")
    monkeypatch.setattr(ukernels, "module", no_build)
    assert ukernels.artifact("attention_backward", ODD, cache=cache).ptx == made.ptx
    assert list(tmp_path.rglob("*")) == entries
    # another problem is another entry
    with pytest.raises(AssertionError, match="compiled again"):
        ukernels.artifact("attention_backward", _with(causal=False), cache=cache)


def test_a_damaged_entry_is_compiled_again(tmp_path, monkeypatch):
    cache = ArtifactCache(tmp_path)
    made = ukernels.artifact("attention_backward", ODD, cache=cache)
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.stat().st_size > 1000:
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0xFF
            path.write_bytes(bytes(data))
    built, module = [], ukernels.module
    monkeypatch.setattr(ukernels, "module", lambda *a: built.append(a) or module(*a))
    again = ukernels.artifact("attention_backward", ODD, cache=ArtifactCache(tmp_path))
    assert len(built) == 1 and again.ptx == made.ptx


def test_an_unknown_ukernel_is_an_error():
    with pytest.raises(ZynMLError, match="no ukernel 'softmax'"):
        ukernels.artifact("softmax", ODD)


def test_the_library_takes_the_ukernels_only_on_cuda_and_when_asked(monkeypatch):
    from zynml.kernels.attention_backward import _problem
    import numpy as np
    q = np.ones((1, 2, 5, 16), np.float16)
    sizes = (1, 2, 2, 5, 5, 16)
    assert _problem((q,), sizes, True, 0.25, "cpu", lse_given=False) is None
    monkeypatch.setenv("ZYNML_UKERNELS", "0")
    # refused before the device is looked at: no GPU is needed to say no
    assert _problem((q,), sizes, True, 0.25, "cuda:0", lse_given=False) is None


def test_the_forward_is_one_launch_that_writes_out_and_lse():
    module = ukernels.module("attention_forward", ODD)
    with module.context:
        plan, _ = extract_plan(module.operation)
    assert plan["input_names"] == ["q", "k", "v"]
    assert plan["output_names"] == ["o", "lse"]
    assert [spec["shape"] for spec in plan["outputs"]] == [[6, 37, 32], [6, 37]]
    steps = list(launches(plan["body"]))
    assert [(s["kernel"], s["grid"]) for s in steps] == \
        [("k0_attention_forward", [6 * math.ceil(37 / BLOCK), 1, 1])]


def test_a_backward_given_lse_takes_it_and_skips_its_sweep(tmp_path):
    given = _with(lse_given=True)
    module = ukernels.module("attention_backward", given)
    with module.context:
        plan, _ = extract_plan(module.operation)
    assert plan["input_names"] == ["q", "k", "v", "dout", "o", "lse"]
    # the dQ kernel's first sweep (S = Q K^T alone) is gone: 1 of the 8 products, each
    # built with and without the key rule (whole tiles: no product is merged away)
    whole = Problem(**{**ODD.__dict__, "rows": 128, "keys": 128, "d": 64, "kv_heads": 6})
    count = lambda p: ukernels.artifact("attention_backward", p, AMPERE, ArtifactCache(
        tmp_path)).ptx.count("mma.sync.aligned")
    one_product = (64 // 16) * (BLOCK // 8)
    assert count(whole) == 2 * 8 * one_product
    assert count(Problem(**{**whole.__dict__, "lse_given": True})) == 2 * 7 * one_product


@pytest.mark.parametrize("d, target, instruction", [
    (64, AMPERE, "mma.sync.aligned"), (64, None, "wgmma.mma_async"),
    (128, None, "wgmma.mma_async")])
def test_causal_sweeps_build_each_tile_step_with_and_without_the_key_rule(
        tmp_path, d, target, instruction):
    """A causal tile below the diagonal needs no per-score compare and select: each
    sweep's step is built twice (scf.if on the tile), so the kernels hold twice the
    products of a problem whose every tile is whole and seen (counted in the module:
    LLVM sinks some of the two branches' wgmmas into one). sm_90a's wgmma products take
    the place of mma.sync's (none left in the PTX)."""
    def products(**changes):
        problem = Problem(**{**ODD.__dict__, "rows": 128, "keys": 128, "d": d,
                             "kv_heads": 6, **changes})
        ptx = ukernels.artifact("attention_backward", problem, target,
                                cache=ArtifactCache(tmp_path)).ptx
        other = "wgmma.mma_async" if instruction == "mma.sync.aligned" else "mma.sync"
        assert instruction in ptx and other not in ptx
        return str(ukernels.module("attention_backward", problem, target)).count(instruction)
    whole = products(causal=False)
    # lse 1, dq 3, dk dv 4 products: 5 S-like over d (S, dP, S^T, dP^T), 3 over BLOCK
    # (dQ, dK, dV); mma.sync's are 16 x 8 x 16 a warp, wgmma's 64 x n x 16
    if instruction == "mma.sync.aligned":
        s_like, d_like = (d // 16) * (BLOCK // 8), (BLOCK // 16) * (d // 8)
    else:
        s_like, d_like = d // 16, BLOCK // 16
    assert whole == 5 * s_like + 3 * d_like
    assert products(causal=True) == 2 * whole


def test_the_token_major_layout_reads_a_fused_projection_and_writes_its_gradient():
    tokens = Problem(heads=6, kv_heads=6, rows=37, keys=37, d=32, element="bf16",
                     causal=True, scale=0.17, lse_given=True, layout="tokens", batch=2)
    assert supports(tokens) is None
    forward = ukernels.module("attention_forward", _with(**{**tokens.__dict__,
                                                            "lse_given": False}))
    backward = ukernels.module("attention_backward", tokens)
    with forward.context:
        forward_plan, _ = extract_plan(forward.operation)
    with backward.context:
        backward_plan, _ = extract_plan(backward.operation)
    packed, rows = [2, 37, 3, 3, 32], [2, 37, 3, 32]
    assert forward_plan["input_names"] == ["qkv"]
    assert [s["shape"] for s in forward_plan["inputs"]] == [packed]
    assert [s["shape"] for s in forward_plan["outputs"]] == [rows, [6, 37]]
    assert backward_plan["input_names"] == ["qkv", "dout", "o", "lse"]
    assert [s["shape"] for s in backward_plan["inputs"]] == [packed, rows, rows, [6, 37]]
    assert backward_plan["output_names"] == ["dqkv"]
    # both kernels write their parts of the one d qkv
    steps = list(launches(backward_plan["body"]))
    assert steps[0]["args"][0] == steps[0]["args"][1] == steps[0]["args"][2]
    assert steps[0]["args"][5] == steps[1]["args"][6] == steps[1]["args"][7]


def test_the_token_major_layout_is_self_attention_without_groups():
    tokens = dict(layout="tokens", batch=2, kv_heads=6, rows=101)
    assert supports(_with(**tokens)) is None
    for changes in ({"kv_heads": 3}, {"rows": 37}, {"batch": 4}):
        assert "fused projection" in supports(_with(**{**tokens, **changes}))
    assert "layout 'rows'" in supports(_with(layout="rows"))
