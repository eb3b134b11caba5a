"""Programmatic dependent launch (runtime/cuda/driver.py): the kernels whose PTX waits
for the kernel before them (`griddepcontrol.wait`, which the compiler puts first in each
kernel with ZYNML_PROGRAMMATIC_LAUNCH: passes/gpu_kernels_wait_on_predecessor.py) launch
with programmatic stream serialization through cuLaunchKernelEx, on the fast path and
the plan interpreter alike; other kernels, and every kernel with the knob off at run
time, launch as before. On the fake driver: the compiler half is
tests/passes/test_gpu_kernels_wait_on_predecessor.py, the GPU run its GPU tests."""
import pytest

from conftest import assert_close
from runtime.test_cuda_executor import (executor_for, f32, fake, flat_plan,  # noqa: F401
                                        flat_reference, k_add_row, k_scale, upload)
from zynml.runtime.cuda import driver

# k_add_row waits; k_scale does not (a kernel of an older compile, say)
PTX = """//
.version 8.3
.target sm_90a
.visible .entry k_add_row(
	.param .u64 .ptr .align 1 k_add_row_param_0
)
.maxntid 7, 1, 1
{
	griddepcontrol.launch_dependents;
	griddepcontrol.wait;
	ret;
}
.visible .entry k_scale(
	.param .u64 .ptr .align 1 k_scale_param_0
)
{
	ret;
}
"""


def test_the_kernels_that_wait_are_read_from_the_ptx():
    assert driver.kernels_that_wait(PTX) == {"k_add_row"}
    assert driver.kernels_that_wait(PTX.replace("griddepcontrol.wait;", "")) == set()
    assert driver.kernels_that_wait("") == set()


@pytest.mark.parametrize("knob", ["1", "0"])
def test_kernels_that_wait_launch_programmatically(fake, rng, monkeypatch, knob):
    monkeypatch.setenv("ZYNML_PROGRAMMATIC_LAUNCH", knob)
    fake.kernels.update(k_add_row=k_add_row, k_scale=k_scale)
    executor = executor_for(fake, flat_plan(), image=PTX.encode())
    x, v = f32(rng, 5, 7), f32(rng, 7)
    fast, = executor([upload(x), upload(v)])
    slow, = executor.run_plan([upload(x), upload(v)])
    for out in (fast, slow):
        assert_close(out.numpy(), flat_reference(x, v))
    if fake.path != "ctypes":  # cuda-python's cuLaunchKernel: no attributes, no waiting
        assert fake.launch_attributes == []
        return
    waits = [(driver.PROGRAMMATIC_STREAM_SERIALIZATION, 1)] if knob == "1" else []
    assert fake.launch_attributes == [("k_add_row", waits), ("k_scale", [])] * 2


def test_a_cubin_takes_the_kernels_that_wait_from_its_ptx(fake, monkeypatch):
    monkeypatch.setenv("ZYNML_PROGRAMMATIC_LAUNCH", "1")
    module = driver.get_device(0).load_module(b"\x7fELF\x02binary", PTX, True)
    assert module._waiting == {"k_add_row"}
    module = driver.get_device(0).load_module(PTX.encode(), "", True)
    assert module._waiting == {"k_add_row"}
    assert driver.get_device(0).load_module(PTX.encode())._waiting == set()
