"""The flash-attention skeleton's arithmetic (zynml/backend/cuda/strategies/
flash_skeleton.py), run on the CPU: the online softmax update for rows of any length,
scaled or already in base 2, as a chain or a balanced tree, the key rule's mask bytes, and
the final 1 / l, against numpy. (The kernels that use it run in tests/runtime.)"""
import ctypes

import numpy as np
import pytest
from mlir import ir
from mlir.dialects import func, memref
from mlir.execution_engine import ExecutionEngine
from mlir.passmanager import PassManager
from mlir.runtime import get_ranked_memref_descriptor

from zynml.backend.cuda.strategies.flash_skeleton import (OnlineSoftmax, inverse_sum,
                                                          mask_allows)
from zynml.backend.cuda.strategies.kernel_builder import index_const

LOWER = ("builtin.module(convert-math-to-llvm,expand-strided-metadata,finalize-memref-to-llvm,"
         "convert-arith-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts)")


def update(rows, m, l, mask=None, **softmax):
    """OnlineSoftmax(f32, **softmax).update of `rows` (scores per row, any lengths) from
    the running m and l, run on the CPU. Per row: (probs, m_new, l_new, alpha, 1 / l_new
    or 0)."""
    width = max(len(row) for row in rows)
    scores = np.full((len(rows), width + 2), np.nan, np.float32)
    allowed = np.ones((len(rows), width), np.int8) if mask is None else \
        np.asarray(mask, np.int8)
    for r, row in enumerate(rows):
        scores[r, :len(row)] = row
        scores[r, width:] = m[r], l[r]
    out = np.full((len(rows), width + 4), np.nan, np.float32)
    with ir.Context(), ir.Location.unknown():
        f32, i8 = ir.F32Type.get(), ir.IntegerType.get_signless(8)
        types = [ir.MemRefType.get(list(a.shape), t)
                 for a, t in ((scores, f32), (allowed, i8), (out, f32))]
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("update", (types, []))
            fn.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            source, bytes_, target = block.arguments
            def at(r, c):
                return [index_const(r), index_const(c)]
            values = [[memref.LoadOp(source, at(r, c)).result for c in range(len(row))]
                      for r, row in enumerate(rows)]
            state = [[memref.LoadOp(source, at(r, width + k)).result for r in range(len(rows))]
                     for k in (0, 1)]
            verdicts = [[mask_allows(memref.LoadOp(bytes_, at(r, c)).result)
                         for c in range(len(row))] for r, row in enumerate(rows)]
            result = OnlineSoftmax(f32, **softmax).update(
                values, *state, verdicts if mask is not None else None)
            for r in range(len(rows)):
                for c, p in enumerate(result.probs[r]):
                    memref.StoreOp(p, target, at(r, c))
                total = result.sums[r]
                for k, v in enumerate((result.maxima[r], total, result.alphas[r],
                                       inverse_sum(total))):
                    memref.StoreOp(v, target, at(r, width + k))
            func.ReturnOp([])
        PassManager.parse(LOWER).run(module.operation)
        arrays = [scores, allowed, out]
        ExecutionEngine(module, opt_level=2).invoke(
            "update", *[ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a)))
                        for a in arrays])
    return [(out[r, :len(row)], *out[r, width:]) for r, row in enumerate(rows)]


def reference(row, m, l, c=1.0):
    """The spec's update in float64: scores scaled by c (> 0), in base 2."""
    s = np.asarray(row, np.float64) * c
    m_new = max(m * c, s.max(initial=-np.inf))
    shift = 0.0 if m_new == -np.inf else m_new  # no allowed key yet: exp2 gives 0
    p, alpha = np.exp2(s - shift), np.exp2(m * c - shift)
    l_new = l * alpha + p.sum()
    return p, m_new / c, l_new, alpha, (1 / l_new if l_new > 0 else 0.0)


@pytest.mark.parametrize("scale", [None, 0.125 * np.log2(np.e)])
@pytest.mark.parametrize("balanced", [False, True])
def test_update_of_rows_of_any_length(scale, balanced):
    rows = [[1.0, 2.5, -3.0, 0.25, 4.0], [-1.0], [0.5, 7.0, -np.inf]]
    m, l = [0.5, 3.0, -np.inf], [2.0, 1.5, 0.0]
    got = update(rows, m, l, scale=scale, balanced=balanced)
    for row, m0, l0, mine in zip(rows, m, l, got):
        for have, want in zip(mine, reference(row, m0, l0, scale or 1.0)):
            np.testing.assert_allclose(have, want, rtol=1e-6)


def test_a_row_with_no_allowed_key_is_zero_not_nan():
    """All of a row's keys forbidden so far: m stays -inf, p and l are 0 (a shift of
    -inf would make exp2 NaN), and the final 1 / l is 0."""
    [(p, m_new, l_new, alpha, inverse)] = update([[1.0, 2.0]], [-np.inf], [0.0],
                                                 mask=[[0, 0]])
    assert m_new == -np.inf and not p.any() and l_new == 0 and alpha == 0 and inverse == 0


def test_forbidden_scores_count_as_minus_inf():
    [(p, m_new, l_new, _, _)] = update([[1.0, 9.0, 2.0]], [-np.inf], [0.0], mask=[[1, 0, 1]])
    np.testing.assert_allclose(p, [0.5, 0.0, 1.0])
    assert m_new == 2.0 and l_new == 1.5


def test_two_tiles_give_the_whole_row():
    """The online update over a row's two key tiles ends where one pass over the row
    does: the max, and the sum of exp2(s - max)."""
    row = np.array([0.5, -2.0, 3.0, 1.0, 6.0, -1.0], np.float32)
    [(_, m1, l1, _, _)] = update([row[:3].tolist()], [-np.inf], [0.0])
    [(p2, m2, l2, _, inverse)] = update([row[3:].tolist()], [m1], [l1])
    assert m2 == row.max()
    np.testing.assert_allclose(l2, np.exp2(row - row.max()).sum(), rtol=1e-6)
    np.testing.assert_allclose(inverse, 1 / l2, rtol=1e-6)
