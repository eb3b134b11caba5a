"""Lowering to linalg does work linear in the size of a body: values shared or nested
deeply (a chain of unary minuses, `v = v * v` repeated) are looked at once per context.
Each chain here took 2^n steps before (18 minuses in a conv2d: 6.5 s; 16 in an attention
score: 9.5 s); the tests count the steps."""
import time
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.lowering import cir_ops, cir_terms, generic_region

EXAMPLES = Path(__file__).resolve().parents[1] / "programs" / "examples"


@pytest.fixture
def steps(monkeypatch):
    """Counts calls of the recursive steps of cir-raise-attention's trees, the generic
    builder's visits and constant folding."""
    counts = {}

    def counting(owner, name):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return original(*args, **kwargs)
        monkeypatch.setattr(owner, name, wrapper)
    counting(cir_terms.Terms, "expand")
    counting(generic_region.Plan, "_visit")
    counting(cir_ops, "_fold")
    return counts


def _lower(source, **inputs):
    start = time.perf_counter()
    module = zynml.compile(source).stage_module(inputs, "linalg")
    return module, time.perf_counter() - start


def test_forty_unary_minuses_in_a_conv2d(steps, rng):
    source = (EXAMPLES / "conv2d.zyn").read_text().replace(
        "var sum = bias[oc]", "var sum = " + "- " * 41 + "(bias[oc])")
    inputs = dict(input=rng.standard_normal((1, 2, 4, 4)).astype(np.float32),
                  kernel=rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
                  bias=rng.standard_normal(3).astype(np.float32),
                  out_h=4, out_w=4, in_h=4, in_w=4)
    _, seconds = _lower(source, **inputs)
    assert seconds < 5
    assert steps["expand"] < 2000 and steps["_visit"] < 2000 and steps["_fold"] < 5000, steps
    out = zynml.run(source, **inputs)["output"]  # 41 minuses: the bias negated
    plain = zynml.run((EXAMPLES / "conv2d.zyn").read_text(), **inputs)["output"]
    np.testing.assert_allclose(out, plain - 2 * inputs["bias"][None, :, None, None],
                               rtol=1e-5, atol=1e-5)


def test_forty_unary_minuses_in_an_attention_score(steps):
    source = (EXAMPLES / "attention.zyn").read_text().replace(
        "let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)",
        "let score = " + "- " * 40 + "(dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim))")
    q = np.ones((1, 2, 4, 8), np.float32)
    _, seconds = _lower(source, Q=q, K=q, V=q, mask=np.ones((4, 4), bool))
    assert seconds < 5
    assert steps["expand"] < 2000 and steps["_visit"] < 2000, steps


def test_forty_squarings_and_doublings(steps):
    """`v = v * v` reads v twice, `k = k + k` (an index) too: a DAG of 40 levels."""
    source = ("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
              "        var v = x[i]\n        var k = i\n"
              + "        v = v * v\n        k = k + k\n" * 40
              + "        out[i] = v + x[k - k + i]\n}\n")
    x = np.array([1, -1, 0.5, 2], np.float32)
    module, seconds = _lower(source, x=x)
    assert seconds < 5
    assert steps["_visit"] < 2000 and steps["_fold"] < 5000, steps
    assert "tensor.extract" not in str(module)  # k - k + i is i: an indexing map
    out = zynml.run(source, x=x)["y"]
    np.testing.assert_array_equal(out, [2, 0, 0.5, np.inf])


def test_a_chain_of_tile_lets_read_at_the_point():
    """`let t1 = t0 + t0` ... read only at the point of the written tile: each let is
    computed once per point (substituting each where it is read copied it twice per
    level: 16 lets took 40 s)."""
    lets = "".join(f"        let t{k + 1} = t{k} + t{k}\n" for k in range(40))
    source = ("let y = compute(x) {\n    @kernel fused\n    for i in 0..rows step 2:\n"
              "        let t0 = x[i:i+2]\n" + lets + "        out[i:i+2] = t40 * 0.5\n}\n")
    x = np.ones((4, 3), np.float32)
    module, seconds = _lower(source, x=x)
    assert seconds < 5
    assert zynml.run(source, x=x)["y"][0, 0] == 2.0 ** 39


def test_a_sum_of_reads_of_one_tile_slice(monkeypatch):
    """400 reads of one slice in the flash attention's K block (found by
    test_mutation_fuzz.py: 210 s): the rewrite of tiles asks for the shape of each
    subexpression once per statement, and the slice's bounds guard is kept once."""
    from zynml.frontend.tile_shapes import TileShapes
    calls = []
    shape = TileShapes._shape
    monkeypatch.setattr(TileShapes, "_shape", lambda self, e: calls.append(1) or shape(self, e))
    block = "K[b, h, kv_block:kv_block+64]"
    source = (EXAMPLES / "flash_attention.zyn").read_text().replace(
        f"let K_block = {block}", "let K_block = (" + " + ".join([block] * 400) + ")")
    q = np.ones((1, 1, 9, 4), np.float32)
    module, seconds = _lower(source, Q=q, K=q, V=q)
    assert len(calls) < 40000, len(calls)  # about 600000 before
    assert str(module).count("arith.cmpi") < 40
