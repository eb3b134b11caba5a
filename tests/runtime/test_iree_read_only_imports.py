"""Large inputs that a program only reads (zynml/backend/iree/read_only.py) are handed to
IREE without a copy where they are aligned as the kernels assume (16 bytes on the CPU
target); others are copied into staging buffers as before. Numerics against numpy
float64 on views at odd byte offsets of larger arrays, inputs never modified, results of
earlier calls never overwritten. `rng` is freshly seeded per test."""
from __future__ import annotations

import mlir.ir
import numpy as np
import pytest

import zynml
from conftest import assert_close
from zynml.backend.iree.stages import to_vmfb
from zynml.backend.iree.target import CPU
from zynml.cache import ArtifactCache
from zynml.dialects import new_context
from zynml.runtime import IreeModule, iree_runner

MODULE = """
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @rowsum(%x: tensor<131x257xf32>) -> tensor<131xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<131xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<131xf32>) -> tensor<131xf32>
  %r = linalg.reduce ins(%x : tensor<131x257xf32>) outs(%f : tensor<131xf32>) dimensions = [1]
      (%v: f32, %acc: f32) {
        %s = arith.addf %v, %acc : f32
        linalg.yield %s : f32
      }
  return %r : tensor<131xf32>
}
// rows 0..7 of b pasted over a (in place, in a's buffer: a is written), then row sums
func.func @paste(%a: tensor<131x257xf32>, %b: tensor<131x257xf32>) -> tensor<131xf32> {
  %s = tensor.extract_slice %b[0, 0] [8, 257] [1, 1] : tensor<131x257xf32> to tensor<8x257xf32>
  %t = tensor.insert_slice %s into %a[0, 0] [8, 257] [1, 1] : tensor<8x257xf32> into tensor<131x257xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<131xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<131xf32>) -> tensor<131xf32>
  %r = linalg.reduce ins(%t : tensor<131x257xf32>) outs(%f : tensor<131xf32>) dimensions = [1]
      (%v: f32, %acc: f32) {
        %q = arith.addf %v, %acc : f32
        linalg.yield %q : f32
      }
  return %r : tensor<131xf32>
}
func.func @same(%a: tensor<131x257xf32>) -> tensor<131x257xf32> {
  return %a : tensor<131x257xf32>
}
"""
SHAPE = (131, 257)  # 134,668 bytes: over the 64 KiB from which inputs are imported

SOFTMAX = """
pipeline softmax(x: tensor[rows, cols]) -> tensor[rows, cols]:
    let m = compute(x) {
        @kernel reduce(max, axis=1)
        for i in 0..rows, j in 0..cols:
            yield x[i, j]
    }
    let e = compute(x, m) {
        @kernel elementwise
        for i in 0..rows, j in 0..cols:
            out[i, j] = exp(x[i, j] - m[i])
    }
    let s = compute(e) {
        @kernel reduce(+, axis=1)
        for i in 0..rows, j in 0..cols:
            yield e[i, j]
    }
    let y = compute(e, s) {
        @kernel elementwise
        for i in 0..rows, j in 0..cols:
            out[i, j] = e[i, j] / s[i]
    }
    return y
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory) -> IreeModule:
    parsed = mlir.ir.Module.parse(MODULE, new_context())
    return IreeModule(to_vmfb(parsed, CPU, ArtifactCache(tmp_path_factory.mktemp("cache"))))


def at_offset(rng, shape, offset: int) -> np.ndarray:
    """Random f32 data (away from zero) starting `offset` bytes past a 64-byte boundary,
    inside a larger array."""
    count = int(np.prod(shape))
    raw = np.empty(count * 4 + 128, np.uint8)
    start = -raw.ctypes.data % 64 + offset
    x = raw[start:start + count * 4].view(np.float32).reshape(shape)
    x[...] = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    return x


@pytest.fixture
def copies(monkeypatch) -> list:
    counted = []
    copy = iree_runner._copy
    monkeypatch.setattr(iree_runner, "_copy", lambda dst, src: counted.append(1) or copy(dst, src))
    return counted


def test_reflection_marks_read_only_parameters(module):
    def state(name):
        return [(p.borrow, p.alignment) for p in module.function(name)._params]
    assert state("rowsum") == [(True, 16)]
    assert state("paste") == [(False, 64), (True, 16)]
    assert state("same") == [(False, 64)]


def test_aligned_read_only_inputs_are_not_copied(module, rng, copies):
    rowsum = module.function("rowsum")
    first = at_offset(rng, SHAPE, 16)
    assert_close(rowsum(first)[0], first.astype(np.float64).sum(1))  # the probe: staged
    assert copies == [1] and rowsum._params[0].writes is False
    kept = []
    for offset in (16, 0, 48, 16):  # aligned to 16: imported as they are
        x = at_offset(rng, SHAPE, offset)
        before = x.copy()
        (r,) = rowsum(x)
        np.testing.assert_array_equal(x, before)
        assert not np.shares_memory(r, x)
        kept.append((r, r.copy(), before))
    assert copies == [1]
    for offset in (4, 20, 36):  # less aligned: copied into a staging buffer
        x = at_offset(rng, SHAPE, offset)
        assert_close(rowsum(x)[0], x.astype(np.float64).sum(1))
    assert len(copies) == 4
    for r, copy, x in kept:  # earlier results: never overwritten, and right
        np.testing.assert_array_equal(r, copy)
        assert_close(r, x.astype(np.float64).sum(1))


def test_written_and_returned_inputs_are_still_copied(module, rng):
    paste, same = module.function("paste"), module.function("same")
    for offset in (16, 0, 16):
        a, b = at_offset(rng, SHAPE, offset), at_offset(rng, SHAPE, offset)
        keep_a, keep_b = a.copy(), b.copy()
        pasted = keep_a.astype(np.float64)
        pasted[:8] = keep_b[:8]
        assert_close(paste(a, b)[0], pasted.sum(1))
        np.testing.assert_array_equal(a, keep_a)
        np.testing.assert_array_equal(b, keep_b)
        (r,) = same(a)
        assert not np.shares_memory(r, a)
        np.testing.assert_array_equal(r, keep_a)


@pytest.mark.parametrize("offset", [0, 4, 16, 20, 36])
def test_programs_on_views_at_odd_byte_offsets(rng, offset):
    softmax = zynml.compile(SOFTMAX, device="cpu").softmax
    for _ in range(3):  # the probe, then imports where aligned
        x = at_offset(rng, SHAPE, offset)
        before = x.copy()
        wide = x.astype(np.float64)
        e = np.exp(wide - wide.max(axis=1, keepdims=True))
        assert_close(softmax(x), e / e.sum(axis=1, keepdims=True))
        np.testing.assert_array_equal(x, before)
