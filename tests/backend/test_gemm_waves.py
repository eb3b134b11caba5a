"""The wave model of tiled GEMMs (zynml/backend/cuda/gemm_waves.py): rounds of tiles on
the multiprocessors, and the tile width it picks."""
import pytest

from zynml.backend.cuda import gemm_waves
from zynml.backend.cuda.target import CHIPS

H100 = CHIPS["sm_90a"].multiprocessors


def test_the_planning_figure_is_an_h100s():
    assert H100 == 132 and CHIPS["sm_80"].multiprocessors == 108


@pytest.mark.parametrize("m,n,k,width", [
    (4096, 768, 50304, 192),    # the loss chunk's grad_hidden: 96 / 128 / 192 tiles
    (8192, 768, 50304, 192),    # 192 / 256 / 384 tiles: 2, 2 and 3 rounds
    (4096, 4096, 4096, 256),    # many tiles: the widest, fastest per multiply-add
    (16384, 768, 768, 256),     # GPT-2's projections: 384 tiles of 256, 3 rounds
    (16384, 3072, 768, 256),
    (8192, 50304, 4096, 192),   # 256 does not tile 50304
    (1280, 1920, 256, 192),     # 100 tiles of 192 in one round, 150 of 128 in two
    (256, 640, 64, 128),        # only 128 tiles 640
])
def test_the_width_with_the_fewest_rounds_in_time(m, n, k, width):
    assert gemm_waves.fastest_width(m, n, k, H100) == width


def test_rounds_count_whole_tiles_and_waves():
    one = gemm_waves.tile_us(256, 768)
    assert gemm_waves.product_us(128 * 132, 256, 768, 256, 132) == pytest.approx(one)
    assert gemm_waves.product_us(128 * 133, 256, 768, 256, 132) == pytest.approx(2 * one)
    # a partial tile counts whole; batches multiply the tiles
    assert gemm_waves.product_us(129, 256, 768, 256, 1) == pytest.approx(2 * one)
    assert gemm_waves.product_us(128, 256, 768, 256, 1, batches=3) == pytest.approx(3 * one)
    # a narrower tile is cheaper, but less than in proportion to its width
    assert gemm_waves.tile_us(128, 768) > one / 2


def test_no_width_for_rows_that_do_not_tile():
    assert gemm_waves.fastest_width(100, 768, 64, H100) is None
    assert gemm_waves.fastest_width(128, 96, 64, H100) is None


def test_partial_tiles_open_every_width():
    """Where the kernel takes partial tiles (matmul_wgmma with C written through TMA),
    a width need not divide N: 50304 columns as 197 tiles of 256 (the last half empty)
    take fewer rounds in time than 262 of 192 at k = 4096."""
    assert gemm_waves.ranked_widths(8192, 50304, 4096, H100, partial=True)[0] == 256
    assert gemm_waves.ranked_widths(100, 96, 64, H100, partial=True) != []
    assert gemm_waves.ranked_widths(8192, 50304, 4096, H100) == [192, 128]
