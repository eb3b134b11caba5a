"""cast(value, T) on native CUDA: the same program as test_cast_calls.py's, against the
same numpy reference (tools/gpu_tests.sh runs it on the device machine)."""
import ml_dtypes
import numpy as np
import pytest

import zynml

from conftest import COMPILE_ONLY
from .test_cast_calls import CENTRED, _reference


@pytest.mark.gpu
@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 7), (67, 1031)])
def test_cuda_cast_to_an_input_type_rounds_once(rows, cols):
    rng = np.random.default_rng(rows + cols)
    x = rng.normal(size=(rows, cols)).astype(ml_dtypes.bfloat16)
    w = rng.normal(size=cols).astype(ml_dtypes.bfloat16)
    if COMPILE_ONLY:
        zynml.compile(CENTRED, device="cuda", require_device=False).artifact(x=x, w=w)
        pytest.skip("compile-only: the artifact is in the cache")
    r = zynml.compile(CENTRED, device="cuda:0")(x=x, w=w)
    assert r["centred"].dtype == ml_dtypes.bfloat16
    want = _reference(x, w).astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(np.asarray(r["centred"]).astype(np.float64), want,
                               rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(np.asarray(r["truncated"]),
                                  (x.astype(np.float32) * 4).astype(np.int32))
