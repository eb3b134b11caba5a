"""The spec's transformer block (tests/programs/transformer/transformer_block.zyn) on the
CPU against float64 numpy, its three projections lowered as matrix products (no note
that a 'matmul' body is lowered generically). The native CUDA backend's compile is in
tests/backend/test_cuda_plan_views.py, its run on a GPU in
tests/runtime/test_cuda_transformer.py."""
import warnings
from pathlib import Path

import numpy as np
import pytest

import zynml
from conftest import assert_close, run_transformer_block
from zynml.compiler import ZynMLNote

TRANSFORMER = Path(__file__).resolve().parent / "programs" / "transformer" / \
    "transformer_block.zyn"


@pytest.mark.parametrize("batch,seq,heads,head_dim,ffn", [
    (3, 5, 3, 5, 11),   # odd everywhere
    (1, 1, 1, 1, 1),    # one of everything
    (2, 17, 2, 7, 37),  # primes
])
def test_the_transformer_block_on_the_cpu_against_numpy(rng, batch, seq, heads, head_dim,
                                                        ffn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, expected = run_transformer_block("cpu", rng, batch, seq, heads, head_dim, ffn)
    notes = [str(w.message) for w in caught if issubclass(w.category, ZynMLNote)]
    assert not [n for n in notes if "not a plain matrix product" in n], notes
    assert out.shape == expected.shape and out.dtype == np.float32
    assert_close(out, expected, rtol=1e-4)


def test_its_projections_are_matrix_products_of_the_rows():
    """qkv, output and FFN-up projections: linalg.matmul of the (batch*seq) rows, by a
    collapse of the activations (a view), not a generic over (batch, seq, column, k)."""
    w = np.zeros
    layer = dict(qkv_proj=w((6, 18), np.float32), out_proj=w((6, 6), np.float32),
                 ln1_weight=w(6, np.float32), ln1_bias=w(6, np.float32),
                 ffn_up=w((6, 5), np.float32), ffn_down=w((5, 6), np.float32),
                 ln2_weight=w(6, np.float32), ln2_bias=w(6, np.float32))
    prog = zynml.compile(TRANSFORMER, device="cpu").pipeline("transformer_block")
    linalg = prog.emit("linalg", {"x": w((2, 3, 6), np.float32), "layer": 0,
                                  "model": {"layers": [layer]}, "num_heads": 2,
                                  "head_dim": 3})
    products = [line for line in linalg.splitlines() if "linalg.matmul" in line]
    assert [p.split("ins(")[1].split(")")[0].split(" : ")[1] for p in products] == [
        "tensor<6x6xf32>, tensor<6x18xf32>", "tensor<6x6xf32>, tensor<6x6xf32>",
        "tensor<6x6xf32>, tensor<6x5xf32>"]
