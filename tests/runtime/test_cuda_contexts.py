"""Each GPU's work in its own context, whichever context the thread has current
(zynml/runtime/cuda/driver.py): the legacy default stream, and the memory an allocation,
copy or free goes to, are the current context's. Found on a fake of two GPUs: uploading
a model for cuda:1 while cuda:0's context was current put its arrays in cuda:0's memory,
on cuda:0's stream. Uses test_cuda_executor's fake driver, on both of its call paths."""
import gc

import numpy as np

from .test_cuda_executor import (executor_for, f32, fake, flat_plan,  # noqa: F401
                                 flat_reference, k_add_row, k_scale)
from conftest import assert_close
from zynml.runtime.cuda.device_array import DeviceArray
from zynml.runtime.cuda.driver import get_device

WORK = ("cuMemAllocAsync", "cuMemFreeAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
        "cuMemcpyDtoDAsync", "cuMemsetD8Async", "cuStreamSynchronize", "cuLaunchKernel")


def contexts_of_work(fake) -> list:
    """(call, context current at the call) for every call that queues work or memory,
    from now on (both call paths reach fake.driver's functions)."""
    seen = []
    for name in WORK:
        inner = getattr(fake.driver, name)

        def call(*args, _inner=inner, _name=name):
            seen.append((_name, getattr(fake, "current", None)))
            return _inner(*args)
        setattr(fake.driver, name, call)
    return seen


def two_gpus(fake):
    fake.device_count = 2
    first, second = get_device(0), get_device(1)
    assert fake.current == first.context  # the first device made current stays so
    return first, second


def test_uploads_downloads_and_syncs_go_to_their_gpu_whatever_is_current(fake, rng):
    first, second = two_gpus(fake)
    seen = contexts_of_work(fake)
    x = f32(rng, 3, 5)
    on_second = DeviceArray.from_numpy(x, second)
    np.testing.assert_array_equal(on_second.numpy(), x)
    first.make_current()  # say, the next cuda:0 call, or torch.cuda.set_device(0)
    on_second.device.synchronize()
    calls = [call for call, _ in seen]
    assert {"cuMemAllocAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
            "cuStreamSynchronize"} <= set(calls)
    assert all(context == second.context for _, context in seen), seen


def test_a_free_from_a_finalizer_keeps_the_current_context(fake, rng):
    first, second = two_gpus(fake)
    on_second = DeviceArray.from_numpy(f32(rng, 7), second)
    address = on_second.ptr
    first.make_current()  # cuda:0's work under way when the array is collected
    seen = contexts_of_work(fake)
    del on_second
    gc.collect()
    assert address in fake.frees
    assert ("cuMemFreeAsync", second.context) in seen
    assert fake.current == first.context  # cuda:0's next launch goes where it should


def test_a_fast_path_call_on_the_second_gpu_runs_there(fake, rng):
    first, second = two_gpus(fake)
    fake.kernels.update(k_add_row=k_add_row, k_scale=k_scale)
    executor = executor_for(fake, flat_plan(), ordinal=1)
    assert executor.flat is not None
    x, v = f32(rng, 5, 7), f32(rng, 7)
    inputs = [DeviceArray.from_numpy(x, second), DeviceArray.from_numpy(v, second)]
    first.make_current()
    seen = contexts_of_work(fake)
    out, = executor(inputs)
    assert [call for call, _ in seen].count("cuLaunchKernel") == 2
    assert all(context == second.context for _, context in seen), seen
    assert_close(out.numpy(), flat_reference(x, v))


def test_a_device_already_current_is_not_asked_about_through_the_bindings(fake):
    """make_current runs before each of a device's calls (a thousand times a training
    step): with libcuda's hot calls it asks through ctypes, and only a context that is
    not current costs cuda-python's calls."""
    first, second = two_gpus(fake)
    start = len(fake.calls)
    first.make_current()
    second.make_current()
    asked = [call for call, _ in fake.calls[start:] if call.startswith("cuCtx")]
    if fake.path == "ctypes":  # first is current: ctypes alone; second: ctypes, then set
        assert asked == ["cuCtxGetCurrent (ctypes)", "cuCtxGetCurrent (ctypes)",
                         "cuCtxGetCurrent", "cuCtxSetCurrent"]
    else:
        assert asked == ["cuCtxGetCurrent", "cuCtxGetCurrent", "cuCtxSetCurrent"]
    assert fake.current == second.context
