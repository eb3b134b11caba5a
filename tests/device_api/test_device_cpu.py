"""zynml.Device("cpu"): every operation against float64 numpy (op_cases.py)."""
import numpy as np
import pytest

import zynml
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


def test_auto_is_a_device_present():
    dev = zynml.Device("auto")
    assert dev.name in [d["id"] for d in zynml.compute_devices()]
    assert repr(dev) == f"zynml.Device('{dev.name}')"
