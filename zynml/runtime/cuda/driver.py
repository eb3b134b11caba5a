"""The few CUDA driver calls ZynML makes, through cuda-python (`cuda.bindings.driver`).

Every call's status is checked: a failure raises `CudaError` naming the call and CUDA's
error name. One `Device` per GPU ordinal holds the primary context, the stream ZynML
launches on (the legacy default stream, so that work of PyTorch and CuPy on their default
streams is ordered with ours), the stream-ordered memory pool it allocates from, and bins
of freed result buffers kept for reuse (`Device.buffers`). The legacy default stream, and
where an allocation, copy or free goes, are those of the thread's current context, so
each of a Device's calls makes its context current first (a free, which a finalizer may
make in the middle of another GPU's work, puts the previous one back).
"""
from __future__ import annotations

import ctypes
import re
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


__all__ = ["CudaError", "Device", "BufferBin", "get_device", "device_count",
           "driver_available", "KernelModule"]


class CudaError(RuntimeError):
    """A CUDA driver call failed, or no driver/GPU is present."""


_DRIVER: list = []


def _driver():
    if not _DRIVER:
        try:
            from cuda.bindings import driver
        except ImportError as err:
            raise CudaError("the native CUDA backend needs cuda-python "
                            "(pip install 'zynml[cuda]' or cuda-bindings)") from err
        _DRIVER.append(driver)
    return _DRIVER[0]


def check(result, call: str = "CUDA call"):
    """cuda-python returns (status, *values): raise on a bad status, return the values."""
    driver = _driver()
    status, *values = result if isinstance(result, tuple) else (result,)
    if status != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(status)
        text = name.decode() if isinstance(name, bytes) else str(status)
        raise CudaError(f"{call} failed: {text}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


_NOT_READY = 600  # CUDA_ERROR_NOT_READY: an event whose work has not finished

_init_lock = threading.Lock()
_initialized = False


def _init() -> None:
    global _initialized
    with _init_lock:
        if _initialized:
            return
        driver = _driver()
        try:
            check(driver.cuInit(0), "cuInit")
        except CudaError:
            raise
        except Exception as err:  # the driver library itself is missing
            raise CudaError(f"no CUDA driver: {err}") from None
        _initialized = True


def driver_available() -> bool:
    try:
        _init()
        return True
    except CudaError:
        return False


def device_count() -> int:
    if not driver_available():
        return 0
    return check(_driver().cuDeviceGetCount(), "cuDeviceGetCount")


@dataclass
class DeviceInfo:
    ordinal: int
    name: str
    memory: int
    compute_capability: tuple[int, int]
    multiprocessors: int
    max_shared_per_block: int


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h)."""
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared_bytes", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute (cuda.h): an id and a 64-byte value, here an int."""
    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_char * 4),
                ("value", ctypes.c_int), ("rest", ctypes.c_char * 60)]


# CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: the kernel may start before the
# one ahead of it in the stream has finished (it waits for it: griddepcontrol.wait)
PROGRAMMATIC_STREAM_SERIALIZATION = 6
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(")


def kernels_that_wait(ptx: str) -> frozenset[str]:
    """The kernels of `ptx` that wait for the kernel before them (griddepcontrol.wait;
    passes/gpu_kernels_wait_on_predecessor.py puts it first in each kernel)."""
    entries = list(_ENTRY.finditer(ptx))
    ends = [entry.start() for entry in entries[1:]] + [len(ptx)]
    return frozenset(entry.group(1) for entry, end in zip(entries, ends)
                     if "griddepcontrol.wait" in ptx[entry.end():end])


class _HotCalls:
    """libcuda's per-call entry points (allocate, free, launch) through ctypes: a ctypes
    call costs about a microsecond, cuda-python's wrappers several. Everything else, and
    any machine where libcuda cannot be opened this way, goes through cuda-python.

    A launch takes arguments converted once (`launch_args`) and no argtypes: ctypes then
    passes them as they are, where argtypes would convert eleven Python ints per call
    (about twice the cost). cuLaunchKernelEx (CUDA 12) takes four of them."""

    def __init__(self, lib):
        self.alloc = lib.cuMemAllocAsync
        self.alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                               ctypes.c_void_p]
        self.free = lib.cuMemFreeAsync
        self.free.argtypes = [ctypes.c_uint64, ctypes.c_void_p]
        # asked before each of a device's calls (Device.make_current): a thousand times a
        # training step; optional, as the test drivers' libraries may not have it
        self.get_current = getattr(lib, "cuCtxGetCurrent", None)
        if self.get_current is not None:
            self.get_current.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
            self.get_current.restype = ctypes.c_int
        launch_ex = getattr(lib, "cuLaunchKernelEx", None)
        self.launch = launch_ex if launch_ex is not None else lib.cuLaunchKernel
        self.launch_name = "cuLaunchKernelEx" if launch_ex is not None else "cuLaunchKernel"
        for function in (self.alloc, self.free, self.launch):
            function.restype = ctypes.c_int

    def launch_args(self, handle: int, grid, block, shared_bytes: int,
                    params_address: int, stream: Any = None,
                    programmatic: bool = False) -> tuple:
        """The arguments of `self.launch` on `stream` (None: the legacy default stream),
        as ctypes values; `programmatic`: the kernel may start while the one before it
        runs (cuLaunchKernelEx only; it must wait for it: kernels_that_wait)."""
        function, params = ctypes.c_void_p(handle), ctypes.c_void_p(params_address)
        queue = ctypes.c_void_p(_raw(stream))
        if self.launch_name == "cuLaunchKernelEx":
            config = _LaunchConfig((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block),
                                   shared_bytes, queue, None, 0)
            if programmatic:
                attributes = (_LaunchAttribute * 1)()
                attributes[0].id = PROGRAMMATIC_STREAM_SERIALIZATION
                attributes[0].value = 1
                config.attrs = ctypes.cast(attributes, ctypes.c_void_p)
                config.num_attrs = 1
                config.keep = attributes  # lives as long as the config
            return (ctypes.byref(config), function, params, None)  # byref keeps config
        dims = [ctypes.c_uint(v) for v in (*grid, *block, shared_bytes)]
        return (function, *dims, queue, params, None)


def _hot_calls():
    try:
        return _HotCalls(ctypes.CDLL("libcuda.so.1"))  # the library cuda-python loaded
    except (OSError, AttributeError):
        return None


def _raw(stream: Any) -> int | None:
    """A CUstream as the address ctypes passes (None: the legacy default stream)."""
    return None if stream is None else int(stream) or None


def _raise_status(status: int, call: str):
    driver = _driver()
    check((driver.CUresult(status),), call)


class Device:
    """One GPU: context, stream, memory pool and the modules loaded on it."""

    def __init__(self, ordinal: int):
        _init()
        driver = _driver()
        count = check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if not 0 <= ordinal < count:
            raise CudaError(f"no CUDA device {ordinal}: {count} present")
        self.ordinal = ordinal
        self.handle = check(driver.cuDeviceGet(ordinal), "cuDeviceGet")
        self.context = check(driver.cuDevicePrimaryCtxRetain(self.handle),
                             "cuDevicePrimaryCtxRetain")
        # A thread's work goes to its current context. The first Device becomes current;
        # a later one (listing the GPUs, zynml.compute_devices) leaves the current one as
        # it was: taking it would send the thread's next cuda:0 allocations, copies and
        # launches to this GPU's context, on cuda:0's pointers (CUDA_ERROR_ILLEGAL_ADDRESS,
        # seen on two GPUs). Work for another GPU makes that one current (make_current:
        # parallel.py's device threads, streams, the executor).
        self._hot = None  # set below; make_current asks through cuda-python until then
        self._context_address = _address(self.context)
        previous = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
        self.make_current()
        self.stream = driver.CUstream(0)
        pool = check(driver.cuDeviceGetDefaultMemPool(self.handle), "cuDeviceGetDefaultMemPool")
        # Keep freed memory in the pool: allocation per call then costs no driver trip.
        threshold = driver.cuuint64_t(2 ** 64 - 1)
        check(driver.cuMemPoolSetAttribute(
            pool, driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, threshold),
            "cuMemPoolSetAttribute")
        self.info = self._read_info()
        # the legacy default stream is the null handle for libcuda
        self._hot = _hot_calls() if int(self.stream) == 0 else None
        self._bins: dict[int, BufferBin] = {}  # by size in bytes
        if not _is_null(previous):
            check(driver.cuCtxSetCurrent(previous), "cuCtxSetCurrent")

    def _read_info(self) -> DeviceInfo:
        driver = _driver()
        attr = driver.CUdevice_attribute

        def get(a):
            return check(driver.cuDeviceGetAttribute(a, self.handle), "cuDeviceGetAttribute")

        name = check(driver.cuDeviceGetName(256, self.handle), "cuDeviceGetName")
        return DeviceInfo(
            ordinal=self.ordinal,
            name=name.split(b"\0", 1)[0].decode(errors="replace"),
            memory=check(driver.cuDeviceTotalMem(self.handle), "cuDeviceTotalMem"),
            compute_capability=(get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                                get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
            multiprocessors=get(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            max_shared_per_block=get(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        )

    def make_current(self) -> Any:
        """Make this device's context the calling thread's current one, unless it is;
        returns the context it replaced (None when it was current already). The legacy
        default stream, and the memory an allocation, free or copy on it goes to, are
        the current context's: so each of this device's calls below does this first.
        Another GPU's work, or another library (torch.cuda.set_device), may have made
        another context current since."""
        hot = self._hot
        if hot is not None and hot.get_current is not None and \
                self._context_address is not None:
            found = ctypes.c_void_p()  # one per call: the call releases the GIL
            if hot.get_current(ctypes.byref(found)) == 0 and \
                    found.value == self._context_address:
                return None
        driver = _driver()
        current = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if _same_context(current, self.context):
            return None
        check(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        return current

    # ------------------------------------------------------------------ memory

    def alloc(self, nbytes: int, stream: Any = None) -> int:
        """Device memory from the stream-ordered pool (at least one byte), ordered on
        `stream` (a CUstream of this device; None: the legacy default stream)."""
        self.make_current()
        return self.alloc_in_current(nbytes, stream)

    def alloc_in_current(self, nbytes: int, stream: Any = None) -> int:
        """`alloc` for a caller that has made this device current (the fast path's
        `run`, which does once per call)."""
        if self._hot is not None:
            slot = ctypes.c_uint64()  # one per call: the call releases the GIL
            status = self._hot.alloc(ctypes.byref(slot), max(nbytes, 1), _raw(stream))
            if status:
                _raise_status(status, "cuMemAllocAsync")
            return slot.value
        driver = _driver()
        ptr = check(driver.cuMemAllocAsync(max(nbytes, 1), self._on(stream)),
                    "cuMemAllocAsync")
        return int(ptr)

    def free(self, ptr: int, stream: Any = None) -> None:
        """Stream-ordered free on this device's stream (another GPU's would not wait for
        this one's kernels). A finalizer may call this in the middle of another device's
        work, so the thread's current context is put back afterwards."""
        replaced = self.make_current()
        try:
            self.free_in_current(ptr, stream)
        finally:
            if replaced is not None and not _is_null(replaced):
                check(_driver().cuCtxSetCurrent(replaced), "cuCtxSetCurrent")

    def free_in_current(self, ptr: int, stream: Any = None) -> None:
        """`free` for a caller that has made this device current (the fast path's `run`)."""
        if self._hot is not None:
            status = self._hot.free(ptr, _raw(stream))
            if status:
                _raise_status(status, "cuMemFreeAsync")
            return
        driver = _driver()
        check(driver.cuMemFreeAsync(driver.CUdeviceptr(ptr), self._on(stream)),
              "cuMemFreeAsync")

    def _on(self, stream: Any):
        """The stream handle for the bindings: `stream`, or ZynML's default."""
        return self.stream if stream is None else stream

    # The per-call fast path's results take their buffers from a bin of their size and
    # give them back when their arrays go: no driver call in a steady loop. Reuse is
    # stream-ordered as cuMemFreeAsync is, since all of ZynML's work is on
    # `self.stream`. A few small buffers per size; `release_kept` frees them all.
    KEEP_PER_SIZE = 4
    KEEP_MAX_BYTES = 16 << 20

    def buffers(self, nbytes: int) -> "BufferBin":
        found = self._bins.get(nbytes)
        if found is None:
            found = self._bins.setdefault(nbytes, BufferBin(self, nbytes))
        return found

    def release_kept(self) -> None:
        for found in list(self._bins.values()):
            found.release()

    def copy_to_device(self, dst: int, host_ptr: int, nbytes: int) -> None:
        if nbytes:
            self.make_current()
            check(_driver().cuMemcpyHtoDAsync(dst, host_ptr, nbytes, self.stream),
                  "cuMemcpyHtoDAsync")

    def is_page_locked(self, host_ptr: int) -> bool:
        """Whether CUDA knows `host_ptr` as host memory of its own (cuMemHostAlloc'd or
        registered, "pinned"). An async copy from pinned memory reads it when the copy
        runs; one from pageable memory has copied it into a staging buffer when the call
        returns, without waiting for the stream (the driver API's "API synchronization
        behavior"). Any answer but "unknown pointer" counts as pinned."""
        driver = _driver()
        attribute = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
        status = driver.cuPointerGetAttribute(attribute, host_ptr)[0]
        return status == driver.CUresult.CUDA_SUCCESS

    def copy_to_host(self, host_ptr: int, src: int, nbytes: int, stream: Any = None) -> None:
        if nbytes:
            self.make_current()
            check(_driver().cuMemcpyDtoHAsync(host_ptr, src, nbytes, self._on(stream)),
                  "cuMemcpyDtoHAsync")

    def copy_on_device(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        if nbytes:
            self.make_current()
            check(_driver().cuMemcpyDtoDAsync(dst, src, nbytes, self._on(stream)),
                  "cuMemcpyDtoDAsync")

    def fill_bytes(self, ptr: int, byte: int, nbytes: int, stream: Any = None) -> None:
        if nbytes:
            self.make_current()
            check(_driver().cuMemsetD8Async(ptr, byte, nbytes, self._on(stream)),
                  "cuMemsetD8Async")

    def synchronize(self) -> None:
        self.make_current()  # the legacy stream waited for is the current context's
        check(_driver().cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    def finish_within(self, seconds: float, what: str) -> None:
        """Wait for the work queued so far on this device's stream, at most `seconds`
        (ZYNML_CUDA_WATCHDOG's check after each call): a fault, or work still running
        then, is a CudaError naming `what` instead of an error at some later call or a
        process that never returns."""
        self.make_current()
        driver = _driver()
        event = check(driver.cuEventCreate(0), "cuEventCreate")
        try:
            check(driver.cuEventRecord(event, self.stream), "cuEventRecord")
            deadline = time.monotonic() + seconds
            while True:
                status = driver.cuEventQuery(event)[0]
                if int(status) != _NOT_READY:
                    check((status,), what)
                    return
                if time.monotonic() > deadline:
                    raise CudaError(f"{what} had not finished after {seconds:g} s "
                                    "(ZYNML_CUDA_WATCHDOG): a kernel that does not end, "
                                    "a bug in the code ZynML generated; it is still running")
                time.sleep(0.0005)
        finally:
            driver.cuEventDestroy(event)

    def time_ms(self, run, calls: int) -> float:
        """Milliseconds of GPU time per call of `calls` back-to-back calls of `run`,
        between two CUDA events on ZynML's stream. The GPU stays busy while Python queues
        the next call, so the launch cost is hidden unless the kernels are shorter."""
        self.make_current()
        driver = _driver()
        start = check(driver.cuEventCreate(0), "cuEventCreate")
        end = check(driver.cuEventCreate(0), "cuEventCreate")
        try:
            check(driver.cuEventRecord(start, self.stream), "cuEventRecord")
            for _ in range(calls):
                run()
            check(driver.cuEventRecord(end, self.stream), "cuEventRecord")
            check(driver.cuEventSynchronize(end), "cuEventSynchronize")
            return check(driver.cuEventElapsedTime(start, end), "cuEventElapsedTime") / calls
        finally:
            for event in (start, end):
                driver.cuEventDestroy(event)

    # ------------------------------------------------------------------ kernels

    def load_module(self, image: bytes, ptx: str = "",
                    programmatic: bool = False) -> "KernelModule":
        return KernelModule(self, image, ptx, programmatic)


class BufferBin:
    """Freed buffers of one size (`Device.buffers`), kept for the next allocation of it."""

    def __init__(self, device: Device, nbytes: int):
        self.device, self.nbytes = device, nbytes
        self.limit = device.KEEP_PER_SIZE if nbytes <= device.KEEP_MAX_BYTES else 0
        self.kept: list[int] = []

    def take(self) -> int:
        if self.kept:
            try:
                return self.kept.pop()
            except IndexError:  # another thread took the last one
                pass
        device = self.device
        try:
            return device.alloc(self.nbytes)
        except CudaError:
            if not any(found.kept for found in device._bins.values()):
                raise
            device.release_kept()  # out of memory, maybe: again without the kept ones
            return device.alloc(self.nbytes)

    def give(self, ptr: int) -> None:
        """`ptr`, from `take`, is free."""
        if len(self.kept) < self.limit:
            self.kept.append(ptr)
        else:
            self.device.free(ptr)

    def release(self) -> None:
        while self.kept:
            try:
                ptr = self.kept.pop()
            except IndexError:
                break
            self.device.free(ptr)


class KernelModule:
    """A loaded PTX or cubin image and its kernels, by name.

    With `programmatic`, the kernels that wait for the kernel before them (found in
    `ptx`, else in `image` where it is PTX: kernels_that_wait) launch with programmatic
    stream serialization: they may start while that kernel still runs."""

    def __init__(self, device: Device, image: bytes, ptx: str = "",
                 programmatic: bool = False):
        driver = _driver()
        self.device = device
        if not image.endswith(b"\0") and image.lstrip().startswith(b"//"):
            image = image + b"\0"  # PTX text must be NUL-terminated
        device.make_current()  # a module loads into the thread's current context
        self.handle = check(driver.cuModuleLoadData(image), "cuModuleLoadData")
        self._functions: dict[str, object] = {}
        self._handles: dict[int, int] = {}  # id(CUfunction) -> its raw pointer, for ctypes
        if programmatic and not ptx and image.lstrip().startswith(b"//"):
            ptx = image.decode(errors="replace")
        self._waiting = kernels_that_wait(ptx) if programmatic else frozenset()
        self._programmatic: set[int] = set()  # id(CUfunction) of the waiting kernels

    def function(self, name: str):
        if name not in self._functions:
            function = check(_driver().cuModuleGetFunction(self.handle, name.encode()),
                             f"cuModuleGetFunction({name})")
            self._functions[name] = function
            if self.device._hot is not None:
                self._handles[id(function)] = int(function)
            if name in self._waiting:
                self._programmatic.add(id(function))
        return self._functions[name]

    def launcher(self, function, grid, block, shared_bytes: int,
                 params_address: int, stream: Any = None) -> tuple:
        """(call, args): `call(*args)` launches `function` with the parameter block at
        `params_address` on `stream` (None: the legacy default stream) and returns CUDA's
        status (0: success); `raise_launch_error` turns another into a CudaError. For
        launches repeated with the same block."""
        hot = self.device._hot
        if hot is None:
            return self._launch_through_bindings, (function, tuple(grid), tuple(block),
                                                   shared_bytes, params_address, stream)
        return hot.launch, hot.launch_args(self._handles[id(function)], grid, block,
                                           shared_bytes, params_address, stream,
                                           id(function) in self._programmatic)

    def raise_launch_error(self, status: int):
        hot = self.device._hot
        _raise_status(status, hot.launch_name if hot is not None else "cuLaunchKernel")

    def launch(self, function, grid, block, shared_bytes: int, params_address: int,
               stream: Any = None) -> None:
        call, args = self.launcher(function, grid, block, shared_bytes, params_address,
                                   stream)
        status = call(*args)
        if status:
            self.raise_launch_error(status)

    def _launch_through_bindings(self, function, grid, block, shared_bytes: int,
                                 params_address: int, stream: Any = None) -> int:
        check(_driver().cuLaunchKernel(function, *grid, *block, shared_bytes,
                                       self.device._on(stream), params_address, 0),
              "cuLaunchKernel")
        return 0

    def set_max_shared(self, function, nbytes: int) -> None:
        driver = _driver()
        attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(driver.cuFuncSetAttribute(function, attribute, nbytes), "cuFuncSetAttribute")


_devices: dict[int, Device] = {}
_devices_lock = threading.Lock()


def _same_context(a, b) -> bool:
    """Whether two CUcontext handles are one context (a test driver's may be any value)."""
    try:
        return int(a) == int(b)
    except TypeError:
        return a == b


def _address(context) -> int | None:
    """A CUcontext handle as the address libcuda hands out (None: a test driver's
    handle that is no address)."""
    try:
        return int(context) or None
    except (TypeError, ValueError):
        return None


def _is_null(context) -> bool:
    """Whether cuCtxGetCurrent found no context current."""
    try:
        return context is None or int(context) == 0
    except TypeError:  # a test driver's handle
        return False


def get_device(ordinal: int = 0) -> Device:
    with _devices_lock:
        if ordinal not in _devices:
            _devices[ordinal] = Device(ordinal)
        return _devices[ordinal]


@lru_cache(maxsize=None)
def ctype_of(dtype: str):
    """The ctypes type a kernel parameter of this plan dtype is passed as."""
    return {"float16": ctypes.c_uint16, "bfloat16": ctypes.c_uint16,
            "float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_uint8,
            "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
            "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
            "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
            "pointer": ctypes.c_uint64}[dtype]
