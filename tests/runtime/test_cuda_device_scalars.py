"""Scalar results on the native CUDA backend: computed on GPU arrays, a scalar (a loss)
stays on the GPU as a 0-d DeviceArray, with no wait for the GPU and on the per-call fast
path; `float(x)`, `int(x)`, `bool(x)`, `x.item()` and `x.numpy()` read it, and wait.
Numpy inputs still give numpy scalars. Run on the fake driver of test_cuda_executor.py
(no GPU), and on a GPU (marked `gpu`)."""
import gc

import numpy as np
import pytest

import zynml
from conftest import assert_close
from zynml.runtime.cuda.device_array import DeviceArray

from .test_cuda_executor import TorchLike, f32, fake, program_on_fake, upload  # noqa: F401

LOSS = """
let loss = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i] * x[i]
}
"""


def k_sum_of_squares(out, x):
    out[...] = np.sum(x.astype(np.float64) ** 2)


def test_a_scalar_result_stays_on_the_gpu_without_a_wait(fake, rng, monkeypatch):
    calls = []
    run = zynml.api.Program._run
    monkeypatch.setattr(zynml.api.Program, "_run",
                        lambda self, inputs: calls.append(1) or run(self, inputs))
    prog = program_on_fake(fake, LOSS, k_sum_of_squares, x=np.zeros(101, np.float32))
    for _ in range(3):
        x = f32(rng, 101)
        xs = upload(x)
        waits = fake.count("cuStreamSynchronize")
        loss = prog(x=TorchLike(xs))["loss"]
        assert fake.count("cuStreamSynchronize") == waits  # the call did not wait
        assert isinstance(loss, DeviceArray)
        assert loss.shape == () and loss.ndim == 0 and loss.dtype == np.float32
        value = float(loss)  # the explicit step: copies and waits
        assert fake.count("cuStreamSynchronize") == waits + 1
        assert isinstance(value, float)
        assert_close(value, np.sum(x.astype(np.float64) ** 2))
        assert loss.item() == value and loss.numpy().shape == ()
    assert len(calls) == 1  # the later calls took the fast path


def test_numpy_inputs_still_give_a_numpy_scalar(fake, rng):
    prog = program_on_fake(fake, LOSS, k_sum_of_squares, x=np.zeros(101, np.float32))
    x = f32(rng, 101)
    loss = prog(x=x)["loss"]
    assert isinstance(loss, np.float32)
    assert_close(loss, np.sum(x.astype(np.float64) ** 2))


def test_a_0d_device_array_converts_explicitly(fake):
    flag = upload(np.array(1, np.int8)).view(np.bool_)  # a bool result crosses as int8
    assert flag.dtype == np.bool_ and flag.shape == ()
    assert bool(flag) is True and flag.item() is True
    count = upload(np.array(-3, np.int32))
    assert int(count) == -3 and float(count) == -3.0
    assert count.view("int32") is count
    assert int(count.view(np.uint32)) == 2 ** 32 - 3  # an unsigned result, same bits
    with pytest.raises(ValueError, match="item sizes differ"):
        count.view(np.int8)
    with pytest.raises(ValueError, match="only one element converts"):
        float(upload(np.zeros(3, np.float32)))
    del flag, count
    gc.collect()


@pytest.mark.gpu
def test_a_scalar_result_on_the_gpu(rng):
    x = rng.standard_normal(1001).astype(np.float32)
    prog = zynml.compile(LOSS, device="cuda:0")
    prog.artifact(x=x)  # compile-only runs stop here
    for _ in range(2):  # checked, then the fast path
        loss = prog(x=DeviceArray.from_numpy(x))["loss"]
        assert isinstance(loss, DeviceArray) and loss.shape == ()
        assert_close(float(loss), np.sum(x.astype(np.float64) ** 2))
    assert isinstance(prog(x=x)["loss"], np.float32)


def test_a_loaded_artifact_keeps_a_bool_scalar_on_the_gpu(fake, monkeypatch):
    """zynml.load's programs: a bool result (0-d int8 at the boundary) computed on GPU
    arrays is a 0-d bool DeviceArray of the same memory; from numpy, an np.bool_."""
    from types import SimpleNamespace

    from zynml.runtime.cuda import loaded
    program = loaded.LoadedProgram.__new__(loaded.LoadedProgram)
    program.artifact = SimpleNamespace(plan={"bool_outputs": ["found"]})
    program.function = None
    on_gpu = upload(np.array(1, np.int8))
    monkeypatch.setattr(loaded, "named_call", lambda function, inputs: dict(inputs))
    found = program(found=on_gpu, other=on_gpu)
    assert isinstance(found["found"], DeviceArray) and found["found"].dtype == np.bool_
    assert found["found"].ptr == on_gpu.ptr and bool(found["found"]) is True
    assert found["other"] is on_gpu  # not a bool output: as it came
    assert program(found=np.array(0, np.int8))["found"] is np.False_
