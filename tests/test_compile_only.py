"""zynml/compile_only.py: a chain of CUDA calls compiled where there is no GPU."""
from __future__ import annotations

import numpy as np

import zynml
from zynml.compile_only import cpu_values_cuda_artifacts

SRC = """
pipeline twice_plus(x: tensor[n], s: float) -> tensor[n]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] * 2.0 + s
    }
    return y
"""


def test_cuda_calls_compile_artifacts_and_give_cpu_values(rng):
    x = rng.standard_normal(37).astype(np.float32)
    with cpu_values_cuda_artifacts():
        prog = zynml.compile(SRC, device="cuda:0")
        before = sum(1 for _ in prog.cache_folder.rglob("*"))
        y = prog.twice_plus(x, 0.5)
        z = prog.twice_plus(y, -1.0)  # the chain goes on with the first call's values
        after = sum(1 for _ in prog.cache_folder.rglob("*"))
    assert isinstance(z, np.ndarray)
    np.testing.assert_allclose(z, (x.astype(np.float64) * 2 + 0.5) * 2 - 1.0, rtol=1e-5,
                               atol=1e-6)  # f32 rounding where the value nears 0
    assert after > before or prog.stats().disk_hits > 0  # the artifact is in the cache
    assert zynml.Program.__call__.__name__ == "__call__"  # restored after the block
