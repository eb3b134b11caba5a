"""zynml.kernels: library kernels compiled once per device and called from Python."""
from __future__ import annotations

import numpy as np
import pytest

import zynml.kernels
from zynml import ZynMLError


def _swiglu(gate, up):
    g = gate.astype(np.float64)
    return g / (1 + np.exp(-g)) * up


def test_swiglu_compiles_once_for_every_row_count(rng):
    prog = zynml.kernels.program("swiglu", "cpu")
    before = prog.pipeline("swiglu").stats().specializations
    for rows in (1, 7, 129):
        gate, up = rng.standard_normal((2, rows, 13)).astype(np.float32)
        got = zynml.kernels.swiglu(gate, up, device="cpu")
        np.testing.assert_allclose(got, _swiglu(gate, up), rtol=1e-5, atol=1e-6)
    assert prog.pipeline("swiglu").stats().specializations - before <= 1


def test_every_shipped_source_is_listed_and_readable():
    names = zynml.kernels.names()
    assert "swiglu" in names
    for name in names:
        assert zynml.kernels.source_path(name).read_text().strip()


def test_unknown_kernel_names_the_ones_there_are():
    with pytest.raises(ZynMLError, match="no kernel 'nope'; it has: .*swiglu"):
        zynml.kernels.source_path("nope")
