"""implicit_gemm_mma (zynml/backend/cuda/strategies/implicit_gemm_mma.py): f16 / bf16
convolutions as implicit GEMMs on tensor cores. What it takes and builds is checked
without a GPU; the results (marked `gpu`) against float64 numpy on the device machine,
at odd sizes: partial tiles both ways, channels that BK divides and not, windows of 1 to
5, strides 1 and 2, every tile configuration, run-time sizes."""
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import zynml
import conftest
from conftest import COMPILE_ONLY, assert_close
from zynml.runtime.cuda.artifact import launches

CONV2D = Path(__file__).resolve().parents[1] / "programs" / "examples" / "conv2d.zyn"
HALVES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}
# the output's rounding: f16 keeps 11 bits, bf16 8 (the f32 sums add next to nothing)
RTOL = {"f16": 2e-3, "bf16": 1e-2}


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def conv2d(stride=1, padding=1, **options):
    source = CONV2D.read_text().replace("let stride = 1", f"let stride = {stride}") \
        .replace("let padding = 1", f"let padding = {padding}")
    on_gpu = conftest.HAS_GPU and not COMPILE_ONLY
    return zynml.compile(source, device="cuda:0" if on_gpu else "cuda",
                         require_device=on_gpu, **options)


def inputs(rng, dtype, batch, in_ch, out_ch, size, k, stride=1, padding=1):
    out_size = (size + 2 * padding - k) // stride + 1
    half = HALVES[dtype]
    return dict(input=f32(rng, batch, in_ch, size, size).astype(half),
                kernel=(f32(rng, out_ch, in_ch, k, k) * 0.5).astype(half),
                bias=f32(rng, out_ch).astype(half),
                in_h=size, in_w=size, out_h=out_size, out_w=out_size)


def kernels(prog, given) -> list[str]:
    return [s["kernel"].split("_", 1)[1] for s in launches(prog.artifact(**given).plan["body"])]


def check(prog, given, dtype, stride=1, padding=1):
    if COMPILE_ONLY:
        prog.artifact(**given)
        pytest.skip("compile-only: the artifact is in the cache")
    out = prog(**given)["output"]
    assert out.dtype == HALVES[dtype]
    assert_close(out, conftest.conv2d_reference(given["input"], given["kernel"],
                                                given["bias"], stride, padding),
                 rtol=RTOL[dtype])


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_convolutions_run_on_tensor_cores(rng, dtype):
    """Both sides f16 (or bf16): mma.sync of that type, operands through ldmatrix, two
    shared stages of the operands' own type (44 KB at the default 64 x 256 tiles, half
    what f32 stages would take; the epilogue's staged sums reuse them), no local
    memory."""
    given = inputs(rng, dtype, 2, 64, 64, 16, 3)  # N = 512: the default tiles
    prog = conv2d()
    assert kernels(prog, given) == ["pointwise", "implicit_gemm_mma_a_rows", "implicit_gemm_mma"]
    ptx = prog.artifact(**given).ptx
    body = ptx.split(".entry k1_implicit_gemm_mma(", 1)[1]
    # 2 steps of 16 a stage x (2 x 8) tiles of 16 x 8 a warp
    assert body.count(f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype}.{dtype}.f32") == 32
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in body
    assert "local" not in body
    # A: 2 x 64 x 40, B: 2 x 32 x 264 elements; the sums, 32 x 264 f32, fit in them
    assert ".shared .align 16 .b8 k1_implicit_gemm_mma_shared[44032]" in ptx


def test_the_kernels_a_side_is_copied_once_into_rows(rng):
    """The weights (A') are computed once by k1_implicit_gemm_mma_a_rows into rows in the k
    plan's order: a stage reads them by one 16-byte load a thread (64 x 32 elements, 256
    threads) and gathers only the input (B', 32 elements a thread); `copy_a=False`
    gathers both, as run-time sizes do."""
    given = inputs(rng, "f16", 2, 64, 64, 16, 3)
    body = conv2d().artifact(**given).ptx.split(".entry k1_implicit_gemm_mma(", 1)[1]
    assert body.count("ld.global.v4.b32") == 2  # before the loop, and in it
    # B' before the loop and in it; C's initial values at the thread's 64 points
    assert body.count("ld.global.b16") == 2 * 32 + 64
    # K = 9 (one channel): the rows are padded to a whole stage of 32, 64 x 32 in all
    one = inputs(rng, "f16", 2, 1, 64, 16, 3)
    assert [s["shape"] for s in conv2d().artifact(**one).plan["body"]
            if s["op"] == "alloc" and s["dtype"] == "float16" and len(s["shape"]) == 1] \
        == [[64 * 32]]
    plain = conv2d(params={"implicit_gemm_mma": {"copy_a": False}})
    assert kernels(plain, given) == ["pointwise", "implicit_gemm_mma"]
    body = plain.artifact(**given).ptx.split(".entry k1_implicit_gemm_mma(", 1)[1]
    assert "ld.global.v4" not in body
    assert body.count("ld.global.b16") == 2 * (32 + 8) + 64


def test_f32_products_stay_on_fmas(rng):
    given = inputs(rng, "f16", 2, 64, 64, 12, 3)
    given.update({k: given[k].astype(np.float32) for k in ("input", "kernel", "bias")})
    assert kernels(conv2d(), given) == ["pointwise", "implicit_gemm"]


def test_chips_without_mma_sync_keep_the_simt_kernel(rng):
    """sm_75 (Turing) has ldmatrix but no mma.sync m16n8k16 on bf16: implicit_gemm."""
    given = inputs(rng, "f16", 2, 64, 64, 12, 3)
    prog = zynml.compile(CONV2D, device="cuda", require_device=False, target="sm_75")
    assert kernels(prog, given) == ["pointwise", "implicit_gemm"]


def test_run_time_sizes_build_a_whole_stage_and_a_partial_kernel(rng):
    """As implicit_gemm's: where BK divides the channels, and not; nothing where K = 0
    (the output keeps the bias)."""
    given = inputs(rng, "bf16", 2, 20, 24, 11, 3)
    prog = conv2d(dynamic=True)
    assert kernels(prog, given) == \
        ["pointwise", "implicit_gemm_mma", "implicit_gemm_mma_partial"]
    assert "local" not in prog.artifact(**given).ptx


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("batch,in_ch,out_ch,size,k,stride,padding", [
    (3, 64, 64, 56, 3, 1, 1),   # the benchmark's layer, batch 3: K = 576, whole stages
    (1, 1, 64, 13, 3, 1, 1),    # K = 9: one partial stage
    (3, 3, 5, 13, 3, 1, 1),     # 5 of 64 rows
    (1, 5, 3, 56, 5, 2, 1),     # 5x5, stride 2
    (3, 64, 64, 7, 1, 1, 0),    # 1x1
    (1, 3, 130, 13, 3, 2, 0),   # 130 rows: a partial third tile
    (2, 48, 24, 11, 3, 1, 1),   # K = 432: 48 channels, BK 32 does not divide them
    (1, 32, 65, 13, 5, 2, 0),   # 5x5, stride 2, 65 rows, 32 channels a stage
    (2, 17, 7, 9, 3, 1, 1),     # 17 channels (prime), 7 output channels
])
def test_half_convolutions_match_float64(rng, dtype, batch, in_ch, out_ch, size, k,
                                         stride, padding):
    given = inputs(rng, dtype, batch, in_ch, out_ch, size, k, stride, padding)
    prog = conv2d(stride, padding)
    assert "implicit_gemm_mma" in kernels(prog, given)
    check(prog, given, dtype, stride, padding)


# implicit_gemm_mma.CONFIGS (the GPU machine has no MLIR to import it: the test below
# checks the copy)
CONFIGS = [dict(tile_m=64, tile_n=256, tile_k=32, warps_m=2, warps_n=4),
           dict(tile_m=128, tile_n=128, tile_k=32, warps_m=4, warps_n=2),
           dict(tile_m=64, tile_n=128, tile_k=32, warps_m=4, warps_n=2),
           dict(tile_m=64, tile_n=64, tile_k=32, warps_m=2, warps_n=2),
           dict(tile_m=64, tile_n=128, tile_k=16, warps_m=2, warps_n=4)]


def test_the_configurations_tested_are_the_strategys():
    from dataclasses import asdict
    pytest.importorskip("mlir")  # the compiler's side (not on the GPU machine)
    from zynml.backend.cuda.strategies import implicit_gemm_mma
    tiles = ("tile_m", "tile_n", "tile_k", "warps_m", "warps_n")
    assert CONFIGS == [{k: v for k, v in asdict(p).items() if k in tiles}
                       for p in implicit_gemm_mma.CONFIGS]


@pytest.mark.parametrize("m,n,tiles", [
    (64, 56 * 56 * 32, (64, 256)),    # the benchmark's layer: wide N tiles
    (128, 28 * 28 * 32, (128, 128)),  # M 128: one tile of rows, each input gathered once
    (40, 30, (64, 64)),               # pads least
    (24, 11 * 11 * 2, (64, 256)),     # as little padding as 64 x 64, fewer gathers
    (64, 512, (64, 256)),
])
def test_tiles_by_cost(m, n, tiles):
    pytest.importorskip("mlir")  # the compiler's side (not on the GPU machine)
    from zynml.backend.cuda.strategies.implicit_gemm_mma import by_cost
    first = by_cost(m, n)[0]
    assert (first.tile_m, first.tile_n) == tiles


@pytest.mark.gpu
@pytest.mark.parametrize("params", CONFIGS)
def test_every_tile_configuration(rng, params):
    given = inputs(rng, "f16", 2, 37, 67, 15, 3)
    prog = conv2d(params={"implicit_gemm_mma": params})
    assert "implicit_gemm_mma" in kernels(prog, given)
    check(prog, given, "f16")


@pytest.mark.gpu
def test_one_compile_serves_every_shape(rng):
    """Run-time sizes (out_h and out_w, which size the output, by value): channels that
    BK divides and not, one channel, none (the output is the bias), windows of 1 to 5,
    130 output channels."""
    prog = conv2d(dynamic=True)
    for batch, in_ch, out_ch, k in ((1, 3, 5, 3), (2, 32, 24, 3), (1, 20, 33, 5),
                                    (3, 64, 64, 3), (1, 7, 130, 5), (2, 1, 17, 1),
                                    (2, 0, 5, 3)):
        size = 13 + k - 3
        check(prog, inputs(rng, "bf16", batch, in_ch, out_ch, size, k), "bf16")
