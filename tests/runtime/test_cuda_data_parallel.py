"""@parallel(data) on GPUs, queued from the calling thread (zynml/runtime/cuda/data_parallel.py),
on a fake of four GPUs whose streams run later: each context's copies, kernels and frees
wait in its queue until a cuStreamSynchronize there (or a copy into pageable memory,
which the real driver makes wait too). A copy from page-locked memory must find the same
bytes when it is queued and when it runs (the DMA reads it somewhere in between), and a
copy into it lands only when its queue runs: reading staging early, or reusing it before
a GPU is done, gives wrong values or a recorded error."""
import collections
import ctypes
import threading

import numpy as np
import pytest

import zynml
from conftest import assert_close
from zynml.parallel import DataParallel
from zynml.runtime.cuda import data_parallel, driver
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.device_array import DeviceArray
from zynml.runtime.cuda.driver import get_device

from .test_cuda_executor import (FakeCuda, decode_params, fake_libcuda, kernel_argument,
                                 Launch)

GPUS = 4
SOURCE = f"""
let y = compute(x, w) @device([{", ".join(f'"cuda:{i}"' for i in range(GPUS))}]) @parallel(data) {{
    @kernel elementwise
    for b in 0..batch, i in 0..n:
        out[b, i] = x[b, i] * w[i]
}}
"""


class QueuedFake(FakeCuda):
    """FakeCuda with streams that run when waited for, and page-locked host memory."""

    def __init__(self, device_count):
        self._thread = threading.local()  # each thread has its current context
        super().__init__(device_count)
        self.queues = collections.defaultdict(list)  # context -> work not run yet
        self.host = {}    # page-locked allocations: address -> ctypes buffer
        self.sources = []  # host addresses of the copies to a GPU, in order
        for name in ("cuMemHostAlloc", "cuMemFreeHost"):
            setattr(self.driver, name, self._recorded(name, getattr(self, "_" + name)))

    @property
    def current(self):
        return getattr(self._thread, "context", None)

    @current.setter
    def current(self, context):
        self._thread.context = context

    def _later(self, work, kind="work"):
        self.queues[self.current].append((kind, work))

    def _drain(self):
        queue = self.queues[self.current]
        while queue:
            queue.pop(0)[1]()

    def pending(self):
        """The queued work of every GPU but frees."""
        return [kind for queue in self.queues.values() for kind, _ in queue if kind != "free"]

    def page_locked(self, address, nbytes=1):
        return any(base <= address and address + nbytes <= base + len(buffer)
                   for base, buffer in self.host.items())

    def _cuPointerGetAttribute(self, attribute, pointer):
        self.calls.append(("cuPointerGetAttribute", (attribute, pointer)))
        return (0, "CU_MEMORYTYPE_HOST") if self.page_locked(pointer) else (1,)

    def _cuMemHostAlloc(self, nbytes, flags):
        if not flags & 1:  # CU_MEMHOSTALLOC_PORTABLE: else page-locked for one GPU only
            self.errors.append(f"page-locked memory for the current context only ({flags})")
        buffer = (ctypes.c_ubyte * nbytes)()
        ctypes.memset(buffer, 0xAB, nbytes)  # garbage until written
        self.host[ctypes.addressof(buffer)] = buffer
        return ctypes.addressof(buffer)

    def _cuMemFreeHost(self, address):
        if address not in self.host:
            self.errors.append(f"cuMemFreeHost of {address:#x}, not page-locked memory")
        self.host.pop(address, None)

    def _cuMemcpyHtoDAsync(self, dst, host, nbytes, stream):
        self.sources.append(host)
        queued = ctypes.string_at(host, nbytes)
        if not self.page_locked(host, nbytes):  # pageable: the driver has copied it
            self._later(lambda: self.write(dst, queued))
            return

        def dma():
            if not self.page_locked(host, nbytes):
                self.errors.append("a queued copy from freed page-locked memory")
            elif ctypes.string_at(host, nbytes) != queued:
                self.errors.append("page-locked memory changed while a copy from it "
                                   "was queued")
            self.write(dst, queued)
        self._later(dma)

    def _cuMemcpyDtoHAsync(self, host, src, nbytes, stream):
        copy = lambda: FakeCuda._cuMemcpyDtoHAsync(self, host, src, nbytes, stream)  # noqa: E731
        if self.page_locked(host, nbytes):
            self._later(copy)
        else:
            self._drain()
            copy()

    def _cuMemcpyDtoDAsync(self, dst, src, nbytes, stream):
        self._later(lambda: FakeCuda._cuMemcpyDtoDAsync(self, dst, src, nbytes, stream))

    def _cuMemFreeAsync(self, address, stream):
        self._later(lambda: FakeCuda._cuMemFreeAsync(self, address, stream), "free")

    def _cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        args = decode_params(params, self.kinds[function.name])  # the block is the caller's
        self.launches.append(Launch(function.name, (gx, gy, gz), (bx, by, bz), shared,
                                    params, args))
        if function.name in self.kernels:
            self._later(lambda: self.kernels[function.name](self, args))

    def _cuStreamSynchronize(self, stream):
        self._drain()


@pytest.fixture(params=["bindings", "ctypes"])
def queued(monkeypatch, request):
    """QueuedFake of four GPUs in place of cuda-python and libcuda (as test_cuda_executor's
    `fake`), and fresh staging."""
    monkeypatch.delenv("ZYNML_CUDA_POISON", raising=False)
    cuda = QueuedFake(GPUS)
    monkeypatch.setattr(driver, "_DRIVER", [cuda.driver])
    monkeypatch.setattr(driver, "_initialized", False)
    monkeypatch.setattr(driver, "_devices", {})
    lib = fake_libcuda(cuda) if request.param == "ctypes" else None
    monkeypatch.setattr(driver, "_hot_calls",
                        lambda: driver._HotCalls(lib) if lib is not None else None)
    for arena in ("_INPUTS", "_OUTPUTS"):
        monkeypatch.setattr(data_parallel, arena, data_parallel.PinnedArena())
    monkeypatch.setattr(data_parallel, "_LAST", [])
    yield cuda
    assert cuda.errors == []


def program(queued):
    """SOURCE over the fake's GPUs, its kernel run as numpy when its queue runs."""
    prog = zynml.compile(SOURCE, device="cuda:0", require_device=False)
    example = {"x": np.zeros((3, 7), np.float32), "w": np.zeros(7, np.float32)}
    for step in launches(prog._device_parts()[0].artifact(**example).plan["body"]):
        queued.kinds[step["kernel"]] = step["arg_kinds"]

        def multiply(fake, args):
            x, w, out = [kernel_argument(fake, a) for a in args]
            out[...] = x * w
        queued.kernels[step["kernel"]] = multiply
    return prog


@pytest.mark.filterwarnings("ignore:.*took a second value")  # each batch's chunk sizes
def test_every_gpu_is_queued_before_any_is_waited_for(queued, rng):
    prog = program(queued)
    for batch in (13, 13, 6):  # a second call reuses staging; another size grows nothing
        x, w = rng.standard_normal((batch, 7)), rng.standard_normal(7)
        mark = queued.mark()
        y = prog(x=x.astype(np.float32), w=w.astype(np.float32))["y"]
        assert_close(y, x.astype(np.float32).astype(np.float64) * w.astype(np.float32))
        order = [name for name, _ in queued.since(mark).calls
                 if name in ("cuLaunchKernel", "cuStreamSynchronize")]
        assert order == ["cuLaunchKernel"] * GPUS + ["cuStreamSynchronize"] * GPUS, order
    assert queued.count("cuMemHostAlloc") == 2  # inputs' staging and outputs', once
    assert queued.pending() == []


@pytest.mark.filterwarnings("ignore:.*took a second value")
def test_calls_of_one_signature_reuse_where_their_inputs_go(queued, rng):
    prog = program(queued)
    inputs_bytes = []  # each call's allocations of a GPU buffer of inputs (w and rows)
    for batch in (13, 13, 6, 13):
        x, w = rng.standard_normal((batch, 7)), rng.standard_normal(7)
        mark = queued.mark()
        y = prog(x=x.astype(np.float32), w=w.astype(np.float32))["y"]
        assert_close(y, x.astype(np.float32).astype(np.float64) * w.astype(np.float32))
        inputs_bytes.append([n for _, n in queued.since(mark).allocs if n > 256])
    rows = [np.linspace(0, b, GPUS + 1).round().astype(int) for b in (13, 6)]
    on_gpu = [[256 + 28 * int(r) for r in np.diff(bounds)] for bounds in rows]
    assert inputs_bytes == [on_gpu[0], [], on_gpu[1], on_gpu[0]]


def test_page_locked_inputs_are_copied_from_where_they_are(queued, rng):
    prog = program(queued)
    x = zynml.allocate((13, 7), "float32", pinned=True)
    x[...] = rng.standard_normal((13, 7))
    w = rng.standard_normal(7).astype(np.float32)  # pageable: staged
    for _ in range(2):
        mark = len(queued.sources)
        y = prog(x=x, w=w)["y"]
        assert_close(y, np.asarray(x, np.float64) * w)
        bounds = np.linspace(0, 13, GPUS + 1).round().astype(int)[:-1]
        rows = [x.ctypes.data + 28 * int(start) for start in bounds]
        sources = queued.sources[mark:]
        assert sources[1::2] == rows  # each GPU's rows from x itself, after w
        assert not any(x.ctypes.data <= a < x.ctypes.data + x.nbytes for a in sources[::2])
        x[...] = rng.standard_normal((13, 7))


def test_each_gpu_gets_its_rows_in_its_own_context(queued, rng):
    prog = program(queued)
    prog(x=rng.standard_normal((9, 7)).astype(np.float32),
         w=rng.standard_normal(7).astype(np.float32))  # compiles each chunk size
    contexts = []
    launch = queued.driver.cuLaunchKernel

    def recording(*args):
        contexts.append(queued.current)
        return launch(*args)
    queued.driver.cuLaunchKernel = recording
    mark = queued.mark()
    prog(x=rng.standard_normal((9, 7)).astype(np.float32),
         w=rng.standard_normal(7).astype(np.float32))
    assert contexts == [get_device(i).context for i in range(GPUS)]
    rows = [launch.args[0].sizes[0] for launch in queued.since(mark).launches]
    assert rows == [2, 2, 3, 2]  # np.linspace(0, 9, 5).round()


def copying_part(fake, fail=False):
    """A stand-in for one GPU's Program: y = x * 2 as queued work on x's GPU."""
    def part(x, w):
        if fail:
            raise zynml.ZynMLError("this chunk failed")
        out = DeviceArray.empty(x.shape, x.dtype, x.device)

        def double():
            data = np.frombuffer(fake.read(x.ptr, x.nbytes), x.dtype) * 2
            fake.write(out.ptr, data.tobytes())
        fake._later(double)
        return {"y": out}
    return part


def test_a_failing_chunk_waits_for_the_gpus_it_queued_then_raises(queued, rng):
    x, w = rng.standard_normal((8, 3)).astype(np.float32), np.ones(3, np.float32)
    split = DataParallel([f"cuda:{i}" for i in range(GPUS)], ["x"], "y", None)
    parts = [copying_part(queued), copying_part(queued), copying_part(queued, fail=True), copying_part(queued)]
    with pytest.raises(zynml.ZynMLError, match="this chunk failed"):
        split.run(parts, {"x": x, "w": w})
    assert queued.pending() == []  # nothing left reading staging
    assert not data_parallel._INPUTS.lock.locked()
    assert_close(split.run([copying_part(queued)] * GPUS, {"x": x, "w": w})["y"], 2.0 * x)


def test_calls_it_does_not_serve_go_to_the_devices_threads(queued, rng, monkeypatch):
    x, w = rng.standard_normal((8, 3)).astype(np.float32), np.ones(3, np.float32)
    chunks = [(f"cuda:{i}", copying_part(queued), 2 * i, 2 * i + 2) for i in range(GPUS)]
    serve = lambda inputs: data_parallel.run_queued(chunks, inputs, ["x"], "y")  # noqa: E731
    assert serve({"x": x, "w": DeviceArray.from_numpy(w, get_device(0))}) is None
    with data_parallel._INPUTS.lock:  # another thread's call holds staging
        assert serve({"x": x, "w": w}) is None
    monkeypatch.setattr(data_parallel, "MAX_STAGED_BYTES", x.nbytes)  # x, w: more
    assert serve({"x": x, "w": w}) is None
    assert queued.count("cuMemHostAlloc") == 0
    split = DataParallel([f"cuda:{i}" for i in range(GPUS)], ["x"], "y", None)
    assert_close(split.run([copying_part(queued)] * GPUS, {"x": x, "w": w})["y"], 2.0 * x)


def test_a_result_too_large_to_stage_is_copied_out_directly(queued, rng, monkeypatch):
    x, w = rng.standard_normal((8, 64)).astype(np.float32), np.ones(1, np.float32)
    staged_x = data_parallel.PinnedArena.room([(w.dtype, w.shape)] + [(x.dtype, (2, 64))] * 4)
    monkeypatch.setattr(data_parallel, "MAX_STAGED_BYTES", staged_x)  # x fits, y not
    split = DataParallel([f"cuda:{i}" for i in range(GPUS)], ["x"], "y", None)

    def widening(x, w):  # y = [x, x]: twice x's bytes
        out = DeviceArray.empty((x.shape[0], 2 * x.shape[1]), x.dtype, x.device)

        def both():
            data = np.frombuffer(queued.read(x.ptr, x.nbytes), x.dtype).reshape(x.shape)
            queued.write(out.ptr, np.concatenate([data, data], axis=1).tobytes())
        queued._later(both)
        return {"y": out}
    y = split.run([widening] * GPUS, {"x": x, "w": w})["y"]
    assert_close(y, np.concatenate([x, x], axis=1))
    assert queued.count("cuMemHostAlloc") == 1  # the inputs' staging only
