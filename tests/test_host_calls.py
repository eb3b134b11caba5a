"""Fast calls on the CPU (zynml/host_calls.py): a call of a signature seen before skips
the checks and goes straight to the IREE function. The fast path must give what the
checked path gives (against numpy float64 references, odd sizes), be taken only for the
signature it was made for (a new shape, dtype or number kind goes through the checks),
never hand back outputs that a later call overwrites, and keep `mut`'s semantics."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from conftest import assert_close
from zynml.errors import ZynMLError

CHAIN = Path(__file__).parent / "programs" / "tanh_relu_chain.zyn"
SCALE = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * alpha + shift
}
"""
TOTAL = """
let s = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i]
}
"""
ADD_INTO = """compute(mut acc, x) {
    @kernel elementwise
    for i in 0..n:
        acc[i] += x[i]
}
"""


def chain_reference(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    return np.tanh(x * 2.0 + y) * 0.5 + np.maximum(x - y, 0.0)


class _Checked:
    """Counts the calls that take the checked path (Program._run)."""

    def __init__(self, monkeypatch, program):
        self.count = 0
        run = program._run

        def counted(inputs):
            self.count += 1
            return run(inputs)
        monkeypatch.setattr(program, "_run", counted)


@pytest.mark.filterwarnings("ignore:.*took a second value")
@pytest.mark.parametrize("n", [1, 7, 1009])
def test_fast_calls_match_the_reference_and_skip_the_checks(rng, monkeypatch, n):
    prog = zynml.compile(CHAIN, device="cpu")
    checked = _Checked(monkeypatch, prog.chain._program)
    for _ in range(3):
        x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        # floor: 2x + y cancels in f32, so a lone near-zero value is good to eps * |x|, |y|
        assert_close(prog.chain(x, y), chain_reference(x, y),
                     floor=np.abs(x).max() + np.abs(y).max())
    assert checked.count == 1
    stats = prog.chain._program.stats()
    assert stats.calls == 3 and stats.memory_hits == 2, stats


@pytest.mark.filterwarnings("ignore:.*took a second value")
def test_a_new_shape_or_dtype_takes_the_checked_path(rng, monkeypatch):
    prog = zynml.compile(CHAIN, device="cpu")
    checked = _Checked(monkeypatch, prog.chain._program)
    calls = [(7, np.float32), (7, np.float32), (11, np.float32), (7, np.float64),
             (11, np.float32), (7, np.float64)]
    for n, dtype in calls:
        x, y = (rng.standard_normal(n).astype(dtype) for _ in range(2))
        out = prog.chain(x, y)
        assert out.dtype == dtype
        assert_close(out, chain_reference(x, y), rtol=1e-5)
    assert checked.count == 3  # each (n, dtype) once


def test_outputs_of_a_call_are_not_overwritten_by_the_next(rng):
    prog = zynml.compile(CHAIN, device="cpu")
    first = [rng.standard_normal(33).astype(np.float32) for _ in range(2)]
    prog.chain(*first)  # the checked call: the next ones are fast
    out1 = prog.chain(*first)
    kept = out1.copy()
    second = [rng.standard_normal(33).astype(np.float32) for _ in range(2)]
    out2 = prog.chain(*second)
    np.testing.assert_array_equal(out1, kept)
    assert_close(out1, chain_reference(*first))
    assert_close(out2, chain_reference(*second))
    assert not np.may_share_memory(out1, out2)


def test_strided_and_byte_swapped_arrays_on_the_fast_path(rng, monkeypatch):
    """The key holds dtype and shape, not the layout: a strided view of a signature seen
    before is fast, and made contiguous as on the checked path. Byte-swapped arrays are
    refused by the checks, so they never reach the fast path."""
    prog = zynml.compile(CHAIN, device="cpu")
    checked = _Checked(monkeypatch, prog.chain._program)
    x, y = (rng.standard_normal(2 * 101).astype(np.float32) for _ in range(2))
    assert_close(prog.chain(x[:101], y[:101]), chain_reference(x[:101], y[:101]))
    assert_close(prog.chain(x[::2], y[1::2]), chain_reference(x[::2], y[1::2]))
    assert checked.count == 1
    swapped = [a[:101].astype(">f4") for a in (x, y)]
    for _ in range(2):  # refused by the checks, every time: never made a fast call
        with pytest.raises(ZynMLError, match=">f4"):
            prog.chain(*swapped)
    assert checked.count == 3


def test_numbers_on_the_fast_path(rng, monkeypatch):
    prog = zynml.compile(SCALE, device="cpu")
    checked = _Checked(monkeypatch, prog)
    x = rng.standard_normal(13).astype(np.float32)
    for alpha, shift in [(1.5, 3), (-0.25, -7), (2.0, 11)]:
        expected = x.astype(np.float64) * alpha + shift
        assert_close(prog(x=x, alpha=alpha, shift=shift)["y"], expected)
    assert checked.count == 1
    with pytest.raises(ZynMLError, match="shift"):  # still range-checked as an i64
        prog(x=x, alpha=1.0, shift=2 ** 70)
    assert_close(prog(x=x, alpha=np.float32(0.5), shift=1)["y"], x * 0.5 + 1)
    assert checked.count == 2  # a numpy scalar is another signature


def test_scalar_outputs_stay_numpy_scalars(rng):
    prog = zynml.compile(TOTAL, device="cpu")
    for _ in range(3):
        x = rng.standard_normal(97).astype(np.float32)
        s = prog(x=x)["s"]
        assert isinstance(s, np.float32)
        # against the sum of magnitudes: a sum that cancels keeps only f32's error in it
        assert_close(s, x.astype(np.float64).sum(), floor=np.abs(x).sum())


def test_mut_inputs_are_written_back_and_aliasing_is_refused(rng, monkeypatch):
    prog = zynml.compile(ADD_INTO, device="cpu")
    checked = _Checked(monkeypatch, prog)
    acc = rng.standard_normal(29).astype(np.float32)
    expected = acc.astype(np.float64)
    for _ in range(3):
        x = rng.standard_normal(29).astype(np.float32)
        expected += x
        assert prog(acc=acc, x=x)["acc"] is acc
    assert_close(acc, expected)
    assert checked.count == 1
    with pytest.raises(ZynMLError, match="share memory"):
        prog(acc=acc, x=acc)
    with pytest.raises(ZynMLError, match="writable"):
        frozen = acc.copy()
        frozen.flags.writeable = False
        prog(acc=frozen, x=x)
