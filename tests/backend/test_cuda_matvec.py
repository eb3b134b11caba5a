"""The matvec strategy (zynml/backend/cuda/strategies/matvec.py): products of at most 16
rows, as a decode step makes. Without a GPU: which products it takes (from the launch
plan) and that bf16 products sum in f32 (from the PTX). On a GPU (marked `gpu`): the
results against float64 at sizes with tail blocks, tail k-steps and one row."""
from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

from conftest import COMPILE_ONLY

MATMUL = Path(__file__).resolve().parents[2] / "zynml" / "kernels" / "src" / "matmul.zyn"
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _artifact(m: int, k: int, n: int, dtype: str, rng, chip: str | None = None):
    program = zynml.compile(MATMUL, device="cuda", target=chip,
                            require_device=False).matmul._program
    a = rng.standard_normal((m, k)).astype(DTYPES[dtype])
    b = rng.standard_normal((k, n)).astype(DTYPES[dtype])
    return program.artifact(a=a, b=b)


def _strategies(artifact) -> list[str]:
    return [step["strategy"] for step in launches(artifact.plan["body"])]


@pytest.mark.parametrize("m, k, n, dtype", [(1, 2048, 3072, "bf16"), (4, 8192, 2048, "bf16"),
                                            (16, 4104, 2048, "bf16"), (16, 1024, 400, "f32"),
                                            (3, 1000, 36, "f32"), (1, 64, 8, "f16")])
def test_decode_sized_products_run_on_matvec(m, k, n, dtype, rng):
    artifact = _artifact(m, k, n, dtype, rng)
    assert "matvec" in _strategies(artifact)
    if dtype != "f32":  # 16-bit factors, f32 sums: no 16-bit arithmetic in the kernel
        assert not re.findall(rf"\b(?:add|mul|fma)(?:\.rn)?\.{dtype}", artifact.ptx)


@pytest.mark.parametrize("n, blocks", [(32000, 500), (8192, 128), (3072, 96), (2048, 128)])
def test_without_clusters_wide_products_take_wider_blocks(n, blocks, rng):
    """sm_80: 8 column threads (64 bf16 columns a block) where that leaves 96 blocks or
    more, then 4, else 2 (16 columns); a block sums all of k."""
    artifact = _artifact(1, 2048, n, "bf16", rng, chip="sm_80")
    [grid] = [step["grid"] for step in launches(artifact.plan["body"])
              if step["strategy"] == "matvec"]
    assert grid == [blocks, 1, 1]
    assert ".reqnctapercluster" not in artifact.ptx


@pytest.mark.parametrize("k, n, splits", [(2048, 32000, 1), (2048, 8192, 3), (2048, 3072, 6),
                                          (2048, 2048, 8), (8192, 2048, 8), (256, 2048, 1)])
def test_with_clusters_blocks_of_a_cluster_split_k(k, n, splits, rng):
    """sm_90a: 64-column blocks, and the fewest blocks per cluster (at most 8, each summing
    at least one step of 256 rows) that make 264 blocks; the cluster adds its blocks'
    totals through distributed shared memory."""
    artifact = _artifact(1, k, n, "bf16", rng)
    [grid] = [step["grid"] for step in launches(artifact.plan["body"])
              if step["strategy"] == "matvec"]
    assert grid == [-(-n // 64), splits, 1]
    clustered = f".reqnctapercluster 1, {splits}, 1" in artifact.ptx
    assert clustered == (splits > 1)
    assert len(re.findall(r"ld\.shared::cluster\.f32", artifact.ptx)) == \
        (splits if splits > 1 else 0)


@pytest.mark.parametrize("m, k, n, dtype", [(17, 1024, 400, "f32"), (2, 1001, 400, "f32"),
                                            (4, 1020, 400, "bf16")])
def test_other_products_go_to_the_strategies_after_it(m, k, n, dtype, rng):
    """17 rows; a k that is not whole 16-byte runs (4 f32, 8 bf16)."""
    strategies = _strategies(_artifact(m, k, n, dtype, rng))
    assert "matvec" not in strategies and "matvec_mma" not in strategies


@pytest.mark.gpu
@pytest.mark.parametrize("m, k, n, dtype", [
    (1, 64, 8, "f32"),       # one block of 8 f32 columns, one k-step
    (3, 1000, 36, "f32"),    # a tail block (36 of 40 columns), a tail k-step
    (1, 2048, 3000, "bf16"),  # a tail block of bf16 (3000 = 187.5 blocks of 16)
    (16, 4104, 40, "bf16"),  # 16 rows, k a step and a bit
    (7, 520, 24, "f16"),
    (13, 1000, 40, "f32"),
    (9, 72, 16, "bf16"),
])
def test_matvec_matches_float64(m, k, n, dtype, rng):
    if COMPILE_ONLY:
        _artifact(m, k, n, dtype, np.random.default_rng(0))
        pytest.skip("compile-only: the artifact is in the cache")
    a = rng.standard_normal((m, k)).astype(DTYPES[dtype])
    b = rng.standard_normal((k, n)).astype(DTYPES[dtype])
    program = zynml.compile(MATMUL, device="cuda:0").matmul
    got = np.asarray(program(a, b), np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    # f32 sums (an f32 ulp per term of |a||b|), then one rounding to the output type
    rounding = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}[dtype]
    bound = rounding * np.abs(want) + 1e-6 * (np.abs(a64) @ np.abs(b64))
    assert np.all(np.abs(got - want) <= bound * 1.01), np.max(np.abs(got - want) - bound)
