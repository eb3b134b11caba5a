"""zynml.Device("cuda:0") on the GPU (marked `gpu`: CI skips these; they run on the device
machine): every operation against float64 numpy (op_cases.py), results that stay on the
GPU, in-place updates of GPU arrays, and other libraries' arrays in."""
import numpy as np
import pytest

import zynml
from conftest import assert_close
from . import op_cases

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def dev():
    return zynml.Device("cuda:0")


@pytest.mark.parametrize("case", op_cases.ALL, ids=lambda case: case.__name__)
def test_operation(dev, rng, case):
    case(dev, rng)


def test_results_stay_on_the_gpu(dev, rng):
    x = dev.upload(rng.standard_normal((5, 7)))
    for out in (dev.softmax(x), dev.matmul(x, dev.transpose_2d(x)), dev.reduce_sum(x, 1),
                dev.elementwise([x], lambda x: zynml.exp(x) + 1.0), dev.copy_buffer(x)):
        assert hasattr(out, "__cuda_array_interface__")
    with pytest.raises(zynml.DeviceAPIError, match="Device.softmax: argument 'data' is a "
                       "host"):
        dev.softmax(np.ones((2, 3), np.float32))


def test_in_place_updates_write_the_callers_buffer(dev, rng):
    dst = dev.upload(rng.standard_normal(37))
    ptr = dst.ptr
    dev.add_assign(dst, dev.upload(np.ones(37)))
    dev.zero_buffer(dst)
    assert dst.ptr == ptr and not dev.download(dst).any()


def test_torch_tensors_in(dev, rng):
    torch = pytest.importorskip("torch")
    a, b = rng.standard_normal((7, 13)), rng.standard_normal((13, 5))
    ta, tb = (torch.tensor(v, dtype=torch.float32, device="cuda") for v in (a, b))
    out = dev.matmul(ta, tb)
    assert_close(torch.as_tensor(out, device="cuda").cpu().numpy(), a @ b)
    grad = torch.zeros(7, 13, device="cuda")
    dev.add_assign(grad, ta)
    dev.sync()
    assert_close(grad.cpu().numpy(), a)


def test_elementwise_on_the_gpu(dev, rng):
    x, b = rng.standard_normal((33, 130)), rng.standard_normal(130)
    out = dev.elementwise([dev.upload(x), dev.upload(b)],
                          lambda x, b: zynml.tanh(x) * b - zynml.sigmoid(b) ** 2)
    assert_close(dev.download(out), np.tanh(x) * b - (1 / (1 + np.exp(-b))) ** 2)
