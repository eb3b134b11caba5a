"""zynml.Device("cuda:0") on the GPU (marked `gpu`: CI skips these; they run on the device
machine, tools/gpu_tests.sh): every operation against float64 numpy (op_cases.py),
results that stay on the GPU, in-place updates of GPU arrays, and other libraries' arrays.

Under ZYNML_GPU_COMPILE_ONLY (tools/gpu_tests.sh compile, where the compiler is and no
GPU), the device is a stand-in: buffers stay numpy arrays, and each CUDA program an
operation calls is compiled into the cache while its values come from the CPU
(zynml.compile_only), so that every kernel of a case gets compiled, not only its first."""
import warnings

import numpy as np
import pytest

import conftest
import zynml
from conftest import assert_close
from zynml.compile_only import cpu_values_cuda_artifacts
from zynml.compiler import ZynMLNote
from . import op_cases

pytestmark = pytest.mark.gpu


@pytest.fixture
def dev():
    if not conftest.COMPILE_ONLY:
        yield zynml.Device("cuda:0")
        return
    stand_in = zynml.Device("cpu")
    stand_in.name, stand_in.kind = "cuda:0", "cuda"  # host buffers, CUDA programs
    stand_in.alloc = lambda shape, dtype=np.float32: np.zeros(shape, dtype)
    with warnings.catch_warnings():  # the CPU twins' notes (a scatter that stays static)
        warnings.simplefilter("ignore", ZynMLNote)
        with cpu_values_cuda_artifacts():
            yield stand_in


def on_gpu(value) -> bool:
    return conftest.COMPILE_ONLY or hasattr(value, "__cuda_array_interface__")


@pytest.mark.parametrize("case", op_cases.ALL, ids=lambda case: case.__name__)
def test_operation(dev, rng, case):
    case(dev, rng)


def test_results_stay_on_the_gpu(dev, rng):
    x = dev.upload(rng.standard_normal((5, 7)))
    for out in (dev.softmax(x), dev.matmul(x, dev.transpose_2d(x)), dev.reduce_sum(x, 1),
                dev.elementwise([x], lambda x: zynml.exp(x) + 1.0), dev.copy_buffer(x)):
        assert on_gpu(out)
    if not conftest.COMPILE_ONLY:
        with pytest.raises(zynml.DeviceAPIError, match="Device.softmax: argument 'data' "
                           "is a host"):
            dev.softmax(np.ones((2, 3), np.float32))


def test_in_place_updates_write_the_callers_buffer(dev, rng):
    dst = dev.upload(rng.standard_normal(37))
    address = getattr(dst, "ptr", None)
    dev.add_assign(dst, dev.upload(np.ones(37)))
    dev.zero_buffer(dst)
    assert getattr(dst, "ptr", None) == address and not dev.download(dst).any()


def test_torch_tensors_in(dev, rng):
    a, b = rng.standard_normal((7, 13)), rng.standard_normal((13, 5))
    if conftest.COMPILE_ONLY:  # the kernels (op_cases.matmul and in_place compile them)
        pytest.skip("compile-only: torch runs on the GPU machine")
    torch = pytest.importorskip("torch")
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
    assert on_gpu(out)
    assert_close(dev.download(out), np.tanh(x) * b - (1 / (1 + np.exp(-b))) ** 2)
