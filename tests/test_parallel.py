"""@device([...]) @parallel(data) (zynml/parallel.py): which blocks split, the located
reasons others do not, the split-and-gather logic and the devices working at the same
time (with stand-in devices), how GPUs are fed (on the fake driver of
tests/runtime/test_cuda_executor.py), and a real split over the CPU and the interpreter
(the real multi-GPU run is in tests/runtime/test_cuda_native.py)."""
import re
import threading

import numpy as np
import pytest

import zynml
from conftest import assert_close
from runtime.test_cuda_executor import fake  # noqa: F401  (the fixture)
from zynml.parallel import DataParallel
from zynml.runtime.cuda.device_array import DeviceArray
from zynml.runtime.cuda.driver import get_device

HEAD = 'let y = compute(x, w) @device(["cuda:0", "cuda:1"]) @parallel(data) {\n'
GOOD = HEAD + ("    @kernel elementwise\n    for b in 0..batch, i in 0..n:\n"
               "        out[b, i] = x[b, i] * w[i]\n}\n")


def plan(source):
    return zynml.compile(source, require_device=False)._data_parallel


def test_a_batch_loop_splits_the_inputs_it_indexes_first():
    dp = plan(GOOD)
    assert dp.devices == ["cuda:0", "cuda:1"] and dp.split == ["x"] and dp.output == "y"


@pytest.mark.parametrize("body,where,message", [
    ("        out[b, i] = x[b, i] * b\n", "4:31", "may only be the first index"),
    ("        out[i, b] = x[b, i]\n", "4:16", "may only be the first index"),
    ("        out[b, i] = x[i, b]\n", "4:26", "may only be the first index"),
])
def test_a_batch_variable_used_otherwise_is_refused(body, where, message):
    source = HEAD + "    @kernel elementwise\n    for b in 0..batch, i in 0..n:\n" + body + "}\n"
    with pytest.raises(zynml.ZynMLError) as err:
        plan(source)
    assert f"<string>:{where}: error:" in str(err.value) and message in str(err.value)


@pytest.mark.parametrize("source,where,message", [
    (GOOD.replace("@parallel(data)", "@parallel(model)"), "1:53", "only @parallel(data)"),
    (GOOD.replace('@device(["cuda:0", "cuda:1"]) ', ""), "1:23", "needs @device(["),
    (GOOD.replace('"cuda:1"', '"cuda:0"'), "1:53", "two or more different devices"),
    (GOOD + "let z = compute(y) {\n    @kernel elementwise\n    for b in 0..m, i in 0..k:\n"
     "        out[b, i] = y[b, i]\n}\n", "1:53", "one compute block"),
])
def test_blocks_that_cannot_split_say_why(source, where, message):
    with pytest.raises(zynml.ZynMLError, match=re.escape(message)) as err:
        plan(source)
    assert str(err.value).startswith(f"<string>:{where}: error:")


@pytest.mark.parametrize("batch,devices", [(7, 3), (1, 2), (2, 2), (13, 4)])
def test_split_and_gather_equal_one_run(rng, batch, devices):
    x, w = rng.standard_normal((batch, 5)), rng.standard_normal(5)
    seen = []

    def part(**inputs):
        seen.append(inputs["x"].shape[0])
        assert inputs["w"] is w  # not split: every device gets all of it
        return {"y": inputs["x"] * inputs["w"]}

    dp = DataParallel(["d"] * devices, ["x"], "y", None)
    out = dp.run([part] * devices, {"x": x, "w": w})["y"]
    assert_close(out, x * w)
    assert sum(seen) == batch and max(seen) - min(seen) <= 1 and len(seen) == min(batch, devices)


def test_the_devices_chunks_run_at_the_same_time(rng):
    x, w = rng.standard_normal((6, 5)), rng.standard_normal(5)
    threads = set()

    def part(**inputs):
        meet.wait()
        threads.add(threading.current_thread().name)
        return {"y": inputs["x"] * inputs["w"]}

    # stand-in device names (no GPU is needed): each device has a thread of its own
    dp = DataParallel(["vulkan:3", "cpu"], ["x"], "y", None)
    meet = threading.Barrier(2, timeout=60)  # chunks run one after another: it breaks
    out = dp.run([part] * 2, {"x": x, "w": w})["y"]
    assert_close(out, x * w)
    assert threads == {"zynml-vulkan:3_0", "zynml-cpu_0"}


def test_a_chunk_is_copied_out_while_another_still_runs(rng, monkeypatch):
    """One trip to each device's thread: its chunk runs and is copied into the output
    there, without waiting for the other devices' chunks (the slow one below waits for
    the fast one's copy, which two trips would only start after every chunk is done)."""
    import zynml.parallel as parallel
    x, w = rng.standard_normal((6, 5)), rng.standard_normal(5)
    fast_copied = threading.Event()
    download = parallel._download

    def recording_download(result, rows):
        download(result, rows)
        if threading.current_thread().name.startswith("zynml-vulkan:1"):
            fast_copied.set()

    def fast(**inputs):
        return {"y": inputs["x"] * inputs["w"]}

    def slow(**inputs):
        assert fast_copied.wait(timeout=30), "the fast chunk was not copied out first"
        return {"y": inputs["x"] * inputs["w"]}

    monkeypatch.setattr(parallel, "_download", recording_download)
    dp = DataParallel(["vulkan:1", "vulkan:2"], ["x"], "y", None)
    assert_close(dp.run([fast, slow], {"x": x, "w": w})["y"], x * w)


def test_a_failing_chunk_fails_the_call_after_the_others_finish(rng):
    x, w = rng.standard_normal((4, 3)), rng.standard_normal(3)
    finished = []

    def good(**inputs):
        finished.append(True)
        return {"y": inputs["x"]}

    def bad(**inputs):
        raise zynml.ZynMLError("chunk failed")

    dp = DataParallel(["vulkan:1", "vulkan:2"], ["x"], "y", None)
    with pytest.raises(zynml.ZynMLError, match="chunk failed"):
        dp.run([bad, good], {"x": x, "w": w})
    assert finished == [True]


def test_a_program_over_the_cpu_and_the_interpreter_runs_both_chunks(rng):
    source = GOOD.replace('"cuda:0", "cuda:1"', '"cpu", "interpreter"')
    x = rng.standard_normal((7, 5)).astype(np.float32)
    w = rng.standard_normal(5).astype(np.float32)
    program = zynml.compile(source)
    assert [p.backend for p in program._device_parts()] == ["iree", "interpreter"]
    for _ in range(2):  # the second call finds the devices' threads running
        assert_close(program(x=x, w=w)["y"], x.astype(np.float64) * w)


# ---------------------------------------------------------------- feeding GPUs (fake driver)

def _host_copies(fake):
    """The host address of each cuMemcpyHtoDAsync, in order."""
    return [args[1] for call, args in fake.calls if call == "cuMemcpyHtoDAsync"]


def _contexts_set_by_this_thread(fake, monkeypatch) -> list:
    """The contexts this thread makes current from now on (the fake's `current` is one
    for all threads; the driver's is per thread)."""
    made, set_current = [], fake.driver.cuCtxSetCurrent

    def recording(context):
        if threading.current_thread() is threading.main_thread():
            made.append(context)
        return set_current(context)
    monkeypatch.setattr(fake.driver, "cuCtxSetCurrent", recording)
    return made


def _gpu_parts(threads):
    """Two parts returning x * w in float64 (computed on the host through the fake's
    memory) as a DeviceArray of their GPU; each records the thread that called it."""
    def part(**inputs):
        threads.append(threading.current_thread().name)
        x, w = inputs["x"], inputs["w"]
        assert isinstance(x, DeviceArray) and isinstance(w, DeviceArray)
        product = (x.numpy() * w.numpy()).astype(np.float64)
        return {"y": DeviceArray.from_numpy(product, x.device)}
    return [part, part]


def _pinned(rng, *shape):
    array = zynml.allocate(shape, "float32", pinned=True)
    array[...] = rng.standard_normal(shape)
    return array


@pytest.mark.parametrize("rows", [1, 2, 13])
def test_page_locked_inputs_are_queued_from_the_calling_thread(fake, rng, rows,
                                                              monkeypatch):
    """The GPUs read the caller's page-locked rows where they are: no thread hand-over."""
    fake.device_count = 2
    x, w = _pinned(rng, rows, 5), _pinned(rng, 5)
    threads, current = [], fake.current
    made_current = _contexts_set_by_this_thread(fake, monkeypatch)
    dp = DataParallel(["cuda:0", "cuda:1"], ["x"], "y", None)
    out = dp.run(_gpu_parts(threads), {"x": x, "w": w})["y"]
    np.testing.assert_array_equal(out, (x * w).astype(np.float64))
    assert threads == ["MainThread"] * min(rows, 2)
    sources = _host_copies(fake)
    first = int(np.linspace(0, rows, 3).round()[1])
    assert x.ctypes.data in sources and sources.count(w.ctypes.data) == min(rows, 2)
    if rows >= 2:
        assert x.ctypes.data + first * 5 * 4 in sources  # the second GPU's rows
        # the caller's context is put back once both GPUs have their work (this
        # fake's current context is one for all threads, so the threads' copies of
        # the results may move it afterwards)
        assert current in made_current[made_current.index(fake.current_of(1)):]


def test_pageable_inputs_are_copied_on_each_gpus_thread(fake, rng):
    fake.device_count = 2
    get_device(0)
    x = rng.standard_normal((9, 5)).astype(np.float32)
    w = _pinned(rng, 5)  # one pageable input is enough to need the host's copies
    threads = []
    dp = DataParallel(["cuda:0", "cuda:1"], ["x"], "y", None)
    out = dp.run(_gpu_parts(threads), {"x": x, "w": w})["y"]
    np.testing.assert_array_equal(out, (x * w).astype(np.float64))
    assert sorted(threads) == ["zynml-cuda:0_0", "zynml-cuda:1_0"]


def test_a_strided_page_locked_input_is_copied_by_the_host(fake, rng):
    fake.device_count = 2
    get_device(0)
    wide, w = _pinned(rng, 6, 10), _pinned(rng, 5)
    threads = []
    dp = DataParallel(["cuda:0", "cuda:1"], ["x"], "y", None)
    out = dp.run(_gpu_parts(threads), {"x": wide[:, ::2], "w": w})["y"]
    np.testing.assert_array_equal(out, (wide[:, ::2] * w).astype(np.float64))
    assert sorted(threads) == ["zynml-cuda:0_0", "zynml-cuda:1_0"]


def test_a_failing_gpu_part_waits_for_the_queued_work_before_raising(fake, rng,
                                                                     monkeypatch):
    """The GPUs given work read the caller's arrays: the error waits for them."""
    fake.device_count = 2
    x, w = _pinned(rng, 4, 3), _pinned(rng, 3)
    current = fake.current
    made_current = _contexts_set_by_this_thread(fake, monkeypatch)

    def good(**inputs):
        return {"y": inputs["x"]}  # no copy back, which would wait too

    def bad(**inputs):
        raise RuntimeError("part failed")

    dp = DataParallel(["cuda:0", "cuda:1"], ["x"], "y", None)
    synchronized = fake.count("cuStreamSynchronize")
    with pytest.raises(RuntimeError, match="part failed"):
        dp.run([good, bad], {"x": x, "w": w})
    assert fake.count("cuStreamSynchronize") == synchronized + 2  # both GPUs drained
    assert current in made_current[made_current.index(fake.current_of(1)):]
