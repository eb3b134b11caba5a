"""The matvec_mma strategy (zynml/backend/cuda/strategies/matvec_mma.py): products of
5-16 rows of f16/bf16 on mma.sync, as a batched decode step makes. Without a GPU: which
products it takes, its grid and its instructions (plan and PTX). On a GPU (marked
`gpu`): the results against float64 at sizes with tail tiles, rows that fill half an
mma, one and several blocks per cluster."""
from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

from conftest import COMPILE_ONLY

KERNELS = Path(__file__).resolve().parents[2] / "zynml" / "kernels" / "src"
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _inputs(m: int, k: int, n: int, dtype: str, rng):
    return (rng.standard_normal((m, k)).astype(DTYPES[dtype]),
            rng.standard_normal((k, n)).astype(DTYPES[dtype]))


def _artifact(m: int, k: int, n: int, dtype: str, rng, chip: str | None = None):
    program = zynml.compile(KERNELS / "matmul.zyn", device="cuda", target=chip,
                            require_device=False).matmul._program
    a, b = _inputs(m, k, n, dtype, rng)
    return program.artifact(a=a, b=b)


def _launches(artifact) -> list[dict]:
    return list(launches(artifact.plan["body"]))


@pytest.mark.parametrize("m, k, n, dtype, strategy", [
    (16, 8192, 2048, "bf16", "matvec_mma"), (5, 2048, 3072, "f16", "matvec_mma"),
    (4, 2048, 3072, "bf16", "matvec"),      # 4 rows: memory-bound on FMAs already
    (16, 2056, 2048, "bf16", "matvec"),     # k not whole 16-row mma steps
    (16, 2048, 2048, "f32", "matvec"),      # no f32 mma here
])
def test_rows_and_types_it_takes(m, k, n, dtype, strategy, rng):
    [launch] = _launches(_artifact(m, k, n, dtype, rng))
    assert launch["strategy"] == strategy


@pytest.mark.parametrize("m, k, n, splits", [(16, 2048, 2048, 8), (16, 8192, 2048, 8),
                                             (8, 2048, 8192, 5), (16, 2048, 32000, 2),
                                             (12, 64, 256, 1)])
def test_grid_and_instructions(m, k, n, splits, rng):
    """128 columns a block, the fewest blocks per cluster that make 264 blocks (each
    warp of 4 at least one step); 8 mmas per 8 rows of A and k-step, one k-step a
    trip; eight 16-byte loads of B per step."""
    artifact = _artifact(m, k, n, "bf16", rng)
    [launch] = _launches(artifact)
    assert launch["grid"] == [-(-n // 128), splits, 1]
    assert launch["block"] == [128, 1, 1]
    halves = -(-m // 8)
    assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32",
                          artifact.ptx)) == 8 * halves
    assert len(re.findall(r"ld\.global(?:\.nc)?\.v4\.b32", artifact.ptx)) == 8
    assert (f".reqnctapercluster 1, {splits}, 1" in artifact.ptx) == (splits > 1)


def test_without_clusters_a_block_sums_all_of_k(rng):
    [launch] = _launches(_artifact(16, 2048, 2048, "bf16", rng, chip="sm_80"))
    assert launch["strategy"] == "matvec_mma" and launch["grid"] == [16, 1, 1]


@pytest.mark.gpu
@pytest.mark.parametrize("m, k, n, dtype", [
    (16, 8192, 2048, "bf16"),  # a decode step's down projection: 8 blocks a cluster
    (16, 2048, 3000, "bf16"),  # a tail tile (3000 = 23.4 tiles of 128)
    (5, 1040, 136, "f16"),     # half an mma's rows; k 65 steps over 8 warps' trips
    (12, 4096, 264, "bf16"),   # rows 8-11 in the second mma
    (8, 64, 8, "bf16"),        # one tile of 8 columns, one trip
    (9, 2048, 8192, "f16"),
])
def test_matvec_mma_matches_float64(m, k, n, dtype, rng):
    if COMPILE_ONLY:
        _artifact(m, k, n, dtype, np.random.default_rng(0))
        pytest.skip("compile-only: the artifact is in the cache")
    a, b = _inputs(m, k, n, dtype, rng)
    program = zynml.compile(KERNELS / "matmul.zyn", device="cuda:0").matmul
    got = np.asarray(program(a, b), np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    rounding = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8}[dtype]
    bound = rounding * np.abs(want) + 1e-6 * (np.abs(a64) @ np.abs(b64))
    assert np.all(np.abs(got - want) <= bound * 1.01), np.max(np.abs(got - want) - bound)


@pytest.mark.gpu
def test_accumulating_in_place_matches_float64(rng):
    """c += a @ b at 16 bf16 rows (matmul_accumulate.zyn): the store reads c's start."""
    if COMPILE_ONLY:
        c = np.zeros((16, 2048), ml_dtypes.bfloat16)
        a, b = _inputs(16, 8192, 2048, "bf16", np.random.default_rng(0))
        zynml.compile(KERNELS / "matmul_accumulate.zyn", device="cuda",
                      require_device=False).artifact(c=c, a=a, b=b)
        pytest.skip("compile-only: the artifact is in the cache")
    a, b = _inputs(16, 8192, 2048, "bf16", rng)
    c = rng.standard_normal((16, 2048)).astype(ml_dtypes.bfloat16)
    start = c.astype(np.float64)
    program = zynml.compile(KERNELS / "matmul_accumulate.zyn", device="cuda:0")
    got = np.asarray(program(c=c, a=a, b=b)["c"], np.float64)
    want = start + a.astype(np.float64) @ b.astype(np.float64)
    bound = 2.0 ** -8 * np.abs(want) + 1e-6 * (np.abs(start) + np.abs(a.astype(np.float64))
                                               @ np.abs(b.astype(np.float64)))
    assert np.all(np.abs(got - want) <= bound * 1.01), np.max(np.abs(got - want) - bound)
