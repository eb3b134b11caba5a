"""zynml.Device("cuda:0") on the GPU (marked `gpu`: CI skips these; they run on the device
machine, tools/gpu_tests.sh): every operation against float64 numpy (op_cases.py),
results that stay on the GPU, in-place updates of GPU arrays, and other libraries' arrays.

Under ZYNML_GPU_COMPILE_ONLY (tools/gpu_tests.sh compile, where the compiler is and no
GPU), the device is a stand-in: buffers stay numpy arrays, and each CUDA program an
operation calls is compiled into the cache (`Program.artifact`, the signature the GPU
run will ask for) while its values come from the same source on the CPU, so that every
kernel of a case gets compiled, not only its first."""
import warnings

import numpy as np
import pytest

import conftest
import zynml
from conftest import assert_close
from zynml.api import Program
from zynml.compiler import ZynMLNote
from . import op_cases

pytestmark = pytest.mark.gpu

_cpu_twins: dict = {}


def _compile_then_run_on_cpu(program: Program, inputs=None, /, **named):
    """Program.__call__ in compile-only runs: the CUDA artifact of these inputs, then the
    values from the CPU."""
    inputs = {**(inputs or {}), **named}
    if not program.device.startswith("cuda"):
        return _real_call(program, inputs)
    program.artifact(inputs)
    key = (program.source.text, program.source.name)
    if key not in _cpu_twins:
        _cpu_twins[key] = zynml.compile(program.source.text, device="cpu", dynamic=True)
    twin = _cpu_twins[key]
    with warnings.catch_warnings():  # the twin's notes (a scatter that stays static)
        warnings.simplefilter("ignore", ZynMLNote)
        if program._pipeline is not None:
            return {"result": getattr(twin, program._pipeline.name)(**inputs)}
        return twin(**inputs)


_real_call = Program.__call__


@pytest.fixture
def dev(monkeypatch):
    if not conftest.COMPILE_ONLY:
        return zynml.Device("cuda:0")
    monkeypatch.setattr(Program, "__call__", _compile_then_run_on_cpu)
    stand_in = zynml.Device("cpu")
    stand_in.name, stand_in.kind = "cuda:0", "cuda"  # host buffers, CUDA programs
    stand_in.alloc = lambda shape, dtype=np.float32: np.zeros(shape, dtype)
    return stand_in


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
