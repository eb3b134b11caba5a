"""Fused row kernels of short rows (row_fused.py): a row a warp holds in registers (up to
128 f32 points; up to 32 a lane, 1024 points, where there are 512 rows or more) takes
one warp, and a block takes `warp_rows` such rows (blocks of one warp would cap a
multiprocessor at 32 warps); the last block's extra warps do nothing. Long rows that
would take 1024 threads of up to 32 points take 512 of up to 64 instead.
The plans here (no GPU needed); the numbers against float64 on a GPU
(tools/gpu_tests.sh), for row counts that fill no whole block."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

from conftest import assert_close, dynamic_on_gpu

PROGRAMS = Path(__file__).parents[1] / "programs"
SOFTMAX = (PROGRAMS / "softmax_pipeline.zyn").read_text()
ROWS = [1, 3, 4, 5, 7, 33, 1001]
LENGTHS = [1, 5, 32, 100, 128, 768]


def _launch(rows, length, params=""):
    prog = zynml.compile(SOFTMAX, device="cuda", require_device=False, params=params)
    plan = prog.softmax._program.artifact(x=np.ones((rows, length), np.float32)).plan
    [launch] = launches(plan["body"])
    return launch


@pytest.mark.parametrize("rows", ROWS)
def test_a_block_takes_four_rows_of_a_warp(rows):
    launch = _launch(rows, 128)
    assert launch["strategy"] == "row_fused"
    assert launch["block"] == [128, 1, 1] and launch["grid"] == [-(-rows // 4), 1, 1]


def test_rows_a_block_takes_is_a_parameter():
    launch = _launch(33, 128, "row_fused.warp_rows=1")
    assert launch["block"] == [32, 1, 1] and launch["grid"] == [33, 1, 1]


def test_rows_of_a_block_of_warps_keep_one_row_a_block():
    """256 points: 64 threads of 4, a barrier between warps; one row a block."""
    launch = _launch(33, 256)
    assert launch["block"] == [64, 1, 1] and launch["grid"] == [33, 1, 1]


@pytest.mark.parametrize("length", [768, 1024])
def test_many_rows_of_up_to_32_points_a_lane_take_a_warp_each(length):
    """GPT-2's 768-wide layer norms: a warp a row (24 points a lane), four a block,
    rather than a block of 256 threads and its barriers a row."""
    launch = _launch(1001, length)
    assert launch["block"] == [128, 1, 1] and launch["grid"] == [-(-1001 // 4), 1, 1]


@pytest.mark.parametrize("rows, length, params", [
    (511, 768, ""),          # fewer rows: a block a row spreads them over more threads
    (1001, 1028, ""),        # 9 chunks of 4 a lane: more than 32 points
    (1001, 768, "row_fused.warp_points=0"),
])
def test_other_rows_keep_a_block_a_row(rows, length, params):
    launch = _launch(rows, length, params)
    assert launch["grid"] == [rows, 1, 1] and launch["block"][0] > 32


@pytest.mark.parametrize("length, block", [
    (16384, 512),      # 32 points a thread at 512: no wider
    (20000, 512),      # 40 at 512 rather than 20 at 1024 (wide_block, wide_points)
    (32000, 512),      # 63 (a vocabulary's softmax backward)
    (32768, 512),      # 64
])
def test_long_rows_take_blocks_of_512_threads_of_up_to_64_points(length, block):
    launch = _launch(3, length)
    assert launch["block"] == [block, 1, 1] and launch["grid"] == [3, 1, 1]


def test_a_wide_block_is_a_parameter():
    """row_fused.wide_block=1024: a 32000-point row takes 1024 threads of 32, as before
    the wide blocks; a tuned block of 1024 keeps it for rows of up to 32 a thread."""
    assert _launch(3, 32000, "row_fused.wide_block=1024")["block"] == [1024, 1, 1]
    assert _launch(3, 16384, "row_fused.block=1024")["block"] == [1024, 1, 1]


def _softmax64(x):
    wide = x.astype(np.float64)
    want = np.exp(wide - wide.max(axis=1, keepdims=True))
    return want / want.sum(axis=1, keepdims=True)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("length", LENGTHS)
def test_cuda_short_rows_match_float64(rng, rows, length):
    prog = zynml.compile(SOFTMAX, device="cuda:0")
    x = (rng.standard_normal((rows, length)) * 3).astype(np.float32)
    assert_close(prog.softmax(x=x), _softmax64(x), rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("length", [20000, 32000, 32768])
def test_cuda_long_rows_in_wide_blocks_match_float64(rng, length):
    prog = zynml.compile(SOFTMAX, device="cuda:0")
    x = (rng.standard_normal((3, length)) * 3).astype(np.float32)
    assert_close(prog.softmax(x=x), _softmax64(x), rtol=1e-5)


@pytest.mark.gpu
def test_cuda_dynamic_short_rows_match_float64(rng):
    """A run-time number of rows of a known length: the guard on the last block."""
    prog = dynamic_on_gpu(SOFTMAX, "softmax", dynamic=["rows"],
                          x=np.ones((3, 128), np.float32))
    for rows in ROWS:
        x = (rng.standard_normal((rows, 128)) * 3).astype(np.float32)
        assert_close(prog.softmax(x=x), _softmax64(x), rtol=1e-5)
    assert prog.softmax._program.stats().specializations == 1

