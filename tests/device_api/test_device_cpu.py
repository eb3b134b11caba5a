"""zynml.Device("cpu"): every operation against float64 numpy (op_cases.py)."""
import numpy as np
import pytest

import zynml
import numpy_references as ref
from conftest import assert_close
from . import op_cases


@pytest.fixture(scope="module")
def dev():
    return zynml.Device("cpu")


@pytest.mark.parametrize("case", op_cases.ALL, ids=lambda case: case.__name__)
def test_operation(dev, rng, case):
    case(dev, rng)


def test_buffers_are_numpy_arrays(dev, rng):
    x = rng.standard_normal((2, 3))
    up = dev.upload(x)
    assert isinstance(up, np.ndarray) and up.dtype == np.float32
    assert isinstance(dev.matmul(up, dev.upload(x.T)), np.ndarray)
    assert dev.download(up) is not up  # a copy: the caller may change it


def test_a_0d_upload_stays_0d_and_is_a_copy(dev):
    value = np.array(7)
    up = dev.upload(value, np.int64)
    assert up.shape == () and up.dtype == np.int64 and int(up) == 7
    value[()] = 8  # a position a graph reads is written in place: not the caller's array
    assert int(up) == 7


def test_auto_is_a_device_present():
    dev = zynml.Device("auto")
    assert dev.name in [d["id"] for d in zynml.compute_devices()]
    assert repr(dev) == f"zynml.Device('{dev.name}')"


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float16, 1e-2),
                                        ("bfloat16", 5e-2)])
def test_other_float_types(dev, rng, dtype, rtol):
    import ml_dtypes
    dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    x, w = rng.standard_normal((7, 37)), rng.standard_normal(37)
    X, W = dev.upload(x, dtype=dtype), dev.upload(w, dtype=dtype)
    x, w = X.astype(np.float64), W.astype(np.float64)  # the values as uploaded
    y = dev.softmax(X)
    assert y.dtype == dtype
    assert_close(y, ref.softmax(x), rtol=rtol)
    assert dev.matmul(X, dev.transpose_2d(X)).dtype == dtype
    assert_close(dev.elementwise([X, W], lambda x, w: x * w + 1.0), x * w + 1.0, rtol=rtol)
    # eps is f32, so RMSNorm of half floats computes (and accumulates) in f32
    normed = dev.rms_norm(X, W)
    assert normed.dtype == np.promote_types(dtype, np.float32)
    assert_close(normed, ref.rms_norm(x, w, 1e-5), rtol=max(rtol, 1e-5))
