"""The native CUDA runtime's logic without a GPU (zynml/runtime/cuda/executor.py,
driver.py): a fake `cuda.bindings.driver` records every call, keeps device memory as host
bytes, and runs the kernels of hand-written plans as numpy code on the memref
descriptors it is given. The plans' fast path (`_FlatPlan`) and interpreter (`run_plan`)
must issue the same launches; descriptors, allocations, frees, copies, loops, scalar
arithmetic, poisoning and error reporting are checked call by call. Every test runs twice:
with the hot calls (allocate, free, launch) through cuda-python, and through ctypes into C
function pointers that lead to the same fake (`fake_libcuda`), as they reach libcuda."""
import ctypes
import functools
import gc
import itertools
import secrets
import struct
import types
from collections import namedtuple
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import zynml
from conftest import assert_close
from zynml.runtime.cuda import driver
from zynml.runtime.cuda.device_array import DeviceArray
from zynml.runtime.cuda.driver import CudaError, ctype_of, get_device
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.executor import PlanExecutor

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "programs" / "examples"

Desc = namedtuple("Desc", "allocated aligned offset sizes strides")
Launch = namedtuple("Launch", "kernel grid block shared params_address args")

BASE = 0x7F00_0000_0000
SPACING = 1 << 32  # each allocation on a 4 GiB boundary: an address names its allocation
# Addresses are never reused, not even by the next test's fake: an array an earlier test
# left alive (say, in a failure's traceback) may be freed during a later one.
_ADDRESSES = itertools.count()


class FakeFunction:
    def __init__(self, module, name):
        self.module, self.name = module, name

    def __int__(self):  # the raw CUfunction handle the ctypes path passes
        return id(self)

    def __repr__(self):
        return f"<fake CUfunction {self.name}>"


class FakeCuda:
    """The cuda-python calls the runtime makes. Each returns (status, *values) with
    status 0 for success, like cuda-python; `fail[call] = status` makes a call fail."""

    ATTRIBUTES = {"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 9,
                  "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": 0,
                  "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": 132,
                  "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448}
    ERRORS = {700: b"CUDA_ERROR_ILLEGAL_ADDRESS", 2: b"CUDA_ERROR_OUT_OF_MEMORY",
              100: b"CUDA_ERROR_NO_DEVICE", 500: b"CUDA_ERROR_NOT_FOUND"}

    def __init__(self, device_count=1):
        self.device_count = device_count
        self.calls = []       # (call name, args)
        self.fail = {}        # call name -> status it returns
        self.memory = {}      # live allocation base -> bytearray
        self.ever = set()     # every address this fake handed out
        self.allocs = []      # (address, nbytes), in order
        self.frees = []       # addresses, in order
        self.launches = []    # Launch, params decoded when launched
        self.copies = []      # (dst, src, nbytes)
        self.memsets = []     # (ptr, byte, nbytes)
        self.uploads = []     # (dst, bytes)
        self.attributes = []  # cuFuncSetAttribute (function name, attribute, value)
        self.launch_attributes = []  # cuLaunchKernelEx's: (kernel, [(id, value)])
        self.errors = []      # what a correct runtime never does (use after free, ...)
        self.kinds = {}       # kernel name -> arg kinds, to decode parameter blocks
        self.kernels = {}     # kernel name -> fn(fake, args): its effect on memory
        names = ["cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
                 "cuCtxSetCurrent", "cuCtxGetCurrent", "cuDeviceGetDefaultMemPool", "cuMemPoolSetAttribute",
                 "cuDeviceGetName", "cuDeviceTotalMem", "cuDeviceGetAttribute",
                 "cuMemAllocAsync", "cuMemFreeAsync", "cuMemcpyHtoDAsync",
                 "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemsetD8Async",
                 "cuStreamSynchronize", "cuModuleLoadData", "cuModuleGetFunction",
                 "cuLaunchKernel", "cuFuncSetAttribute", "cuTensorMapEncodeTiled",
                 "cuMemHostAlloc", "cuMemFreeHost"]
        calls = {name: self._recorded(name, getattr(self, "_" + name)) for name in names}
        self.pinned = set()   # host addresses the fake driver knows as page-locked
        self.host_allocs = {}  # cuMemHostAlloc'd: address -> ctypes buffer
        self.host_ever = {}    # every cuMemHostAlloc: address -> nbytes
        calls["cuPointerGetAttribute"] = self._cuPointerGetAttribute
        self.functions = {}   # handle -> FakeFunction
        identity = lambda value: value  # noqa: E731
        self.driver = types.SimpleNamespace(
            CUresult=_CUresult,
            CUpointer_attribute=_names_namespace(["CU_POINTER_ATTRIBUTE_MEMORY_TYPE"]),
            CUdevice_attribute=_names_namespace(list(self.ATTRIBUTES)),
            CUmemPool_attribute=_names_namespace(["CU_MEMPOOL_ATTR_RELEASE_THRESHOLD"]),
            CUfunction_attribute=_names_namespace(
                ["CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"]),
            CUtensorMapDataType=_names_namespace(
                [f"CU_TENSOR_MAP_DATA_TYPE_{t}" for t in ("FLOAT16", "BFLOAT16", "FLOAT32")]),
            CUtensorMapInterleave=_names_namespace(["CU_TENSOR_MAP_INTERLEAVE_NONE"]),
            CUtensorMapSwizzle=_names_namespace(
                [f"CU_TENSOR_MAP_SWIZZLE_{s}" for s in ("NONE", "32B", "64B", "128B")]),
            CUtensorMapL2promotion=_names_namespace(["CU_TENSOR_MAP_L2_PROMOTION_L2_256B"]),
            CUtensorMapFloatOOBfill=_names_namespace(["CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"]),
            CUstream=identity, CUdeviceptr=identity, cuuint64_t=identity, cuuint32_t=identity,
            cuGetErrorName=lambda status: (0, self.ERRORS.get(int(status), b"CUDA_ERROR_UNKNOWN")),
            **calls)

    def _recorded(self, name, fn):
        def call(*args):
            self.calls.append((name, args))
            if name in self.fail:
                return (self.fail[name],)
            result = fn(*args)
            return (0,) if result is None else (0, result)
        return call

    def count(self, name):
        return sum(1 for call, _ in self.calls if call == name)

    def mark(self):
        """A point in the log: what comes after it is `since(mark)`."""
        return (len(self.calls), len(self.allocs), len(self.frees), len(self.launches),
                len(self.copies), len(self.memsets))

    def since(self, mark):
        calls, allocs, frees, launches, copies, memsets = mark
        return types.SimpleNamespace(calls=self.calls[calls:], allocs=self.allocs[allocs:],
                                     frees=self.frees[frees:],
                                     launches=self.launches[launches:],
                                     copies=self.copies[copies:],
                                     memsets=self.memsets[memsets:])

    # ------------------------------------------------------------------ memory

    def owner(self, address):
        """(base, bytearray) of the live allocation holding `address`."""
        base = BASE + (address - BASE) // SPACING * SPACING
        if base not in self.memory or not 0 <= address - base < max(len(self.memory[base]), 1):
            raise AssertionError(f"address {address:#x} is in no live allocation")
        return base, self.memory[base]

    def read(self, address, nbytes):
        base, mem = self.owner(address)
        return bytes(mem[address - base:address - base + nbytes])

    def write(self, address, data):
        base, mem = self.owner(address)
        start = address - base
        if start + len(data) > len(mem):
            raise AssertionError(f"write of {len(data)} bytes past the end of {base:#x}")
        mem[start:start + len(data)] = data

    def array(self, desc, dtype):
        """A numpy view of device memory through a memref descriptor."""
        dtype = np.dtype(dtype)
        base, mem = self.owner(desc.aligned)
        return np.ndarray(desc.sizes, dtype, buffer=mem,
                          offset=desc.aligned - base + desc.offset * dtype.itemsize,
                          strides=tuple(s * dtype.itemsize for s in desc.strides))

    # ------------------------------------------------------------------ the calls

    def _cuInit(self, flags):
        assert flags == 0

    def _cuDeviceGetCount(self):
        return self.device_count

    def _cuDeviceGet(self, ordinal):
        return ("device", ordinal)

    def _cuDevicePrimaryCtxRetain(self, handle):
        return 0xC0_0000 + handle[1]  # an address, as libcuda's handles are

    def current_of(self, ordinal):
        """Device `ordinal`'s context handle (what cuDevicePrimaryCtxRetain gave)."""
        return self._cuDevicePrimaryCtxRetain(self._cuDeviceGet(ordinal))

    def _cuCtxSetCurrent(self, context):
        self.current = context

    def _cuCtxGetCurrent(self):
        return getattr(self, "current", None)

    def _cuDeviceGetDefaultMemPool(self, handle):
        return ("pool", handle)

    def _cuMemPoolSetAttribute(self, pool, attribute, value):
        pass

    def _cuDeviceGetName(self, length, handle):
        return b"Fake H100 80GB HBM3".ljust(length, b"\0")

    def _cuDeviceTotalMem(self, handle):
        return 80 * 2 ** 30

    def _cuDeviceGetAttribute(self, attribute, handle):
        return self.ATTRIBUTES[attribute]

    def _cuMemAllocAsync(self, nbytes, stream):
        if nbytes < 1:
            self.errors.append(f"cuMemAllocAsync of {nbytes} bytes")
        address = BASE + next(_ADDRESSES) * SPACING
        self.ever.add(address)
        self.allocs.append((address, nbytes))
        self.memory[address] = bytearray(b"\xAB" * nbytes)  # garbage until written
        return address

    def _cuMemFreeAsync(self, address, stream):
        if address not in self.ever:
            return  # an earlier test's array, collected now: not this test's business
        if address not in self.memory:
            self.errors.append(f"free of {address:#x}, not a live allocation")
        self.memory.pop(address, None)
        self.frees.append(address)

    def _cuPointerGetAttribute(self, attribute, pointer):
        """Host memory of the driver's (pinned) is known; other addresses are
        CUDA_ERROR_INVALID_VALUE (1), as pageable memory is."""
        self.calls.append(("cuPointerGetAttribute", (attribute, pointer)))
        known = pointer in self.pinned or any(
            base <= pointer < base + len(buffer) for base, buffer in self.host_allocs.items())
        return (0, "CU_MEMORYTYPE_HOST") if known else (1,)

    def _cuMemHostAlloc(self, nbytes, flags):
        """Page-locked host memory: a ctypes buffer, known to cuPointerGetAttribute."""
        buffer = ctypes.create_string_buffer(nbytes)
        self.host_allocs[ctypes.addressof(buffer)] = buffer
        self.host_ever[ctypes.addressof(buffer)] = nbytes
        return ctypes.addressof(buffer)

    def _cuMemFreeHost(self, address):
        self.host_allocs.pop(int(address), None)

    def _cuMemcpyHtoDAsync(self, dst, host, nbytes, stream):
        data = ctypes.string_at(host, nbytes)
        self.uploads.append((dst, data))
        self.write(dst, data)

    def _cuMemcpyDtoHAsync(self, host, src, nbytes, stream):
        ctypes.memmove(host, self.read(src, nbytes), nbytes)

    def _cuMemcpyDtoDAsync(self, dst, src, nbytes, stream):
        self.copies.append((dst, src, nbytes))
        self.write(dst, self.read(src, nbytes))

    def _cuMemsetD8Async(self, ptr, byte, nbytes, stream):
        self.memsets.append((ptr, byte, nbytes))
        self.write(ptr, bytes([byte]) * nbytes)

    def _cuStreamSynchronize(self, stream):
        pass

    def _cuModuleLoadData(self, image):
        return ("module", bytes(image))

    def _cuModuleGetFunction(self, module, name):
        assert isinstance(name, bytes)
        function = FakeFunction(module, name.decode())
        self.functions[int(function)] = function
        return function

    def _cuFuncSetAttribute(self, function, attribute, value):
        self.attributes.append((function.name, attribute, value))

    def _cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert extra == 0
        args = decode_params(params, self.kinds[function.name])
        for arg in args:
            if isinstance(arg, Desc):
                try:
                    self.owner(arg.aligned)
                except AssertionError as err:
                    self.errors.append(f"{function.name}: {err}")
        launch = Launch(function.name, (gx, gy, gz), (bx, by, bz), shared, params, args)
        self.launches.append(launch)
        if function.name in self.kernels:
            self.kernels[function.name](self, args)


    def _cuTensorMapEncodeTiled(self, dtype, rank, address, dims, strides, box,
                                element_strides, interleave, swizzle, l2, oob):
        """A descriptor whose 16 words say what it was made from (tensor_map_fields
        reads them back), as the kernel would find it in device memory."""
        assert rank == len(dims) == len(box) == len(strides) + 1 <= 5
        assert list(element_strides) == [1] * rank
        code = {"CU_TENSOR_MAP_SWIZZLE_NONE": 0, "CU_TENSOR_MAP_SWIZZLE_128B": 128}[swizzle]
        words = [address, rank, code, len(self.allocs)] + list(dims) + list(strides) + list(box)
        return types.SimpleNamespace(opaque=words + [0] * (16 - len(words)))


def tensor_map_fields(fake, address):
    """(tensor address, sizes, byte strides, box, swizzle) of the descriptor at `address`,
    in CUDA's innermost-first order."""
    words = struct.unpack("<16Q", fake.read(address, 128))
    base, rank, swizzle = words[0], words[1], words[2]
    dims = words[4:4 + rank]
    strides = words[4 + rank:4 + 2 * rank - 1]
    box = words[4 + 2 * rank - 1:4 + 3 * rank - 1]
    return base, dims, strides, box, swizzle


class _CUresult(int):
    CUDA_SUCCESS = 0


def _names_namespace(names):
    return types.SimpleNamespace(**{name: name for name in names})


def fake_libcuda(fake, with_ex=True):
    """libcuda's hot entry points (driver._HotCalls) as C function pointers into `fake`'s
    recorded calls: ZynML's ctypes calls cross a real C ABI, each argument as libcuda
    would get it. An exception in the fake becomes a failed call and an error."""
    keep = []

    def c_function(fn, *argtypes):
        def guarded(*args):
            try:
                return fn(*args)
            except Exception as err:  # ctypes would print it and return garbage
                fake.errors.append(f"{fn.__name__}: {err!r}")
                return 999
        callback = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(guarded)
        keep.append(callback)
        function = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.cast(callback, ctypes.c_void_p).value)
        function.argtypes = None  # as ctypes.CDLL gives them
        return function

    def alloc(slot, nbytes, stream):
        status, *address = fake.driver.cuMemAllocAsync(nbytes, stream or 0)
        if status == 0:
            slot[0] = address[0]
        return status

    def free(ptr, stream):
        return fake.driver.cuMemFreeAsync(ptr, stream or 0)[0]

    def launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        return fake.driver.cuLaunchKernel(fake.functions[function], gx, gy, gz, bx, by, bz,
                                          shared, stream or 0, params, extra or 0)[0]

    def launch_ex(config, function, params, extra):
        c = config.contents
        attributes = ctypes.cast(c.attrs, ctypes.POINTER(driver._LaunchAttribute))
        given = [(attributes[i].id, attributes[i].value) for i in range(c.num_attrs)]
        if (c.attrs is None) != (c.num_attrs == 0) or any(
                name != driver.PROGRAMMATIC_STREAM_SERIALIZATION for name, _ in given):
            fake.errors.append(f"launch attributes {given}")
        fake.launch_attributes.append((fake.functions[function].name, given))
        return launch(function, *c.grid, *c.block, c.shared_bytes, c.stream, params, extra)

    def get_current(slot):
        slot[0] = getattr(fake, "current", None) or 0
        fake.calls.append(("cuCtxGetCurrent (ctypes)", ()))
        return 0

    void, uint = ctypes.c_void_p, ctypes.c_uint
    lib = types.SimpleNamespace(
        cuCtxGetCurrent=c_function(get_current, ctypes.POINTER(ctypes.c_void_p)),
        cuMemAllocAsync=c_function(alloc, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                                   void),
        cuMemFreeAsync=c_function(free, ctypes.c_uint64, void),
        cuLaunchKernel=c_function(launch, void, *[uint] * 7, void, void, void), keep=keep)
    if with_ex:
        lib.cuLaunchKernelEx = c_function(launch_ex, ctypes.POINTER(driver._LaunchConfig),
                                          void, void, void)
    return lib


def decode_params(address, kinds):
    """The values a kernel would read from a cuLaunchKernel parameter block: `address`
    is a void*[] whose entries point at each parameter (64-bit descriptor fields)."""
    n = sum(3 + 2 * int(k.split(":")[1]) if k.startswith("memref:") else 1 for k in kinds)
    pointers = (ctypes.c_void_p * max(n, 1)).from_address(address)
    out, i = [], 0
    for kind in kinds:
        if kind.startswith("memref:"):
            rank = int(kind.split(":")[1])
            fields = [ctypes.c_uint64.from_address(pointers[i + k]).value
                      for k in range(3 + 2 * rank)]
            out.append(Desc(fields[0], fields[1], fields[2], tuple(fields[3:3 + rank]),
                            tuple(fields[3 + rank:])))
            i += 3 + 2 * rank
        else:
            out.append(ctype_of(kind).from_address(pointers[i]).value)
            i += 1
    return out


@pytest.fixture(params=["bindings", "ctypes"])
def fake(monkeypatch, request):
    """The fake driver in place of cuda-python and libcuda, and no device or init state
    cached; the hot calls through cuda-python, or through ctypes (cuLaunchKernelEx)."""
    monkeypatch.delenv("ZYNML_CUDA_POISON", raising=False)  # conftest sets it on GPU hosts
    cuda = FakeCuda()
    cuda.path = request.param
    monkeypatch.setattr(driver, "_DRIVER", [cuda.driver])
    monkeypatch.setattr(driver, "_initialized", False)
    monkeypatch.setattr(driver, "_devices", {})
    lib = fake_libcuda(cuda) if request.param == "ctypes" else None
    monkeypatch.setattr(driver, "_hot_calls",
                        lambda: driver._HotCalls(lib) if lib is not None else None)
    yield cuda
    gc.collect()  # this test's buffers free into the fake, not into the real driver
    assert cuda.errors == []


def executor_for(fake, plan, globals_=None, image=b"//ptx", ordinal=0):
    for step in launches(plan["body"]):
        fake.kinds[step["kernel"]] = step["arg_kinds"]
    return PlanExecutor(plan, image, globals_ or {}, get_device(ordinal))


def upload(array):
    return DeviceArray.from_numpy(array, get_device(0))


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def tensor(shape, dtype="float32"):
    return {"kind": "tensor", "shape": list(shape), "dtype": dtype}


def plan_of(inputs, body, outputs, globals_=()):
    return {"version": 1, "input_names": [f"in{i}" for i in range(len(inputs))],
            "output_names": [f"out{i}" for i in range(len(outputs))], "inputs": list(inputs),
            "outputs": list(outputs), "globals": list(globals_), "body": body}


def launch(kernel, args, kinds, grid=(1, 1, 1), block=(32, 1, 1), shared=0):
    return {"op": "launch", "kernel": kernel, "grid": list(grid), "block": list(block),
            "shared_bytes": shared, "args": list(args), "arg_kinds": list(kinds)}


def canonical(launches):
    """Launches with each buffer address replaced by the order it was first seen in: two
    runs that use their buffers the same way compare equal."""
    labels = {}
    out = []
    for item in launches:
        args = []
        for arg in item.args:
            if isinstance(arg, Desc):
                if arg.allocated != arg.aligned:
                    args.append(("allocated != aligned", arg))
                    continue
                label = labels.setdefault(arg.aligned, len(labels))
                args.append((label, arg.offset, arg.sizes, arg.strides))
            else:
                args.append(arg)
        out.append((item.kernel, item.grid, item.block, item.shared, tuple(args)))
    return out


# ============================================================================ the fake kernels

def k_add_row(fake, args):  # out[i, j] = a[i, j] + b[j]
    a, b, out = (fake.array(d, np.float32) for d in args)
    out[...] = a + b


def k_scale(fake, args):  # out = 2 * a
    a, out = (fake.array(d, np.float32) for d in args)
    out[...] = 2 * a


def k_zero(fake, args):
    fake.array(args[0], np.float32)[...] = 0


def k_times_iv(fake, args):  # out = a * iv
    a, out = (fake.array(d, np.float32) for d in args[:2])
    out[...] = a * np.float32(args[2])


# ============================================================================ the driver layer

def test_a_second_device_leaves_the_current_context_as_it_was(fake):
    """Listing the GPUs (zynml.compute_devices makes a Device of each) must not send the
    thread's next cuda:0 work to cuda:1's context; loading a module makes its own
    device's context current."""
    fake.device_count = 2
    first = get_device(0)
    assert fake.current == first.context
    second = get_device(1)
    assert second.context != first.context and fake.current == first.context
    second.load_module(b"// ptx\0")
    assert fake.current == second.context



def test_device_reads_its_info_through_the_driver(fake):
    device = get_device(0)
    assert device.info.name == "Fake H100 80GB HBM3"
    assert device.info.memory == 80 * 2 ** 30
    assert device.info.compute_capability == (9, 0)
    assert device.info.multiprocessors == 132
    assert device.info.max_shared_per_block == 232448
    assert get_device(0) is device  # one Device per ordinal
    assert fake.count("cuInit") == 1 and fake.count("cuDevicePrimaryCtxRetain") == 1
    (_, (pool, attribute, threshold)), = [c for c in fake.calls
                                         if c[0] == "cuMemPoolSetAttribute"]
    assert attribute == "CU_MEMPOOL_ATTR_RELEASE_THRESHOLD" and threshold == 2 ** 64 - 1
    assert driver.device_count() == 1 and driver.driver_available()


def test_a_missing_ordinal_is_a_cuda_error(fake):
    with pytest.raises(CudaError, match="no CUDA device 3: 1 present"):
        get_device(3)


def test_no_driver_means_no_devices(fake):
    fake.fail["cuInit"] = 100
    assert not driver.driver_available()
    assert driver.device_count() == 0
    with pytest.raises(CudaError, match="cuInit failed: CUDA_ERROR_NO_DEVICE"):
        get_device(0)


def test_ptx_images_are_nul_terminated_and_cubins_are_not(fake):
    device = get_device(0)
    device.load_module(b"//ptx text")
    device.load_module(b"\x7fELF\x02binary")
    device.load_module(b"//already\0")
    images = [args[0] for call, args in fake.calls if call == "cuModuleLoadData"]
    assert images == [b"//ptx text\0", b"\x7fELF\x02binary", b"//already\0"]


def test_device_array_round_trip_through_the_fake(fake, rng):
    host = f32(rng, 7, 13)
    array = upload(host)
    assert array.shape == (7, 13) and array.dtype == np.float32 and array.nbytes == 364
    assert fake.allocs[-1] == (array.ptr, 364)
    np.testing.assert_array_equal(array.numpy(), host)
    ptr = array.ptr
    del array
    gc.collect()
    assert fake.frees == [ptr]


def test_an_upload_from_pageable_memory_does_not_wait_for_the_gpu(fake, rng):
    """The driver stages pageable memory before cuMemcpyHtoDAsync returns, so the host
    may reuse it at once: no wait for the queued work (a training step uploads token
    ids a dozen times). Pinned memory is read when the copy runs: that upload waits."""
    pageable, pinned = f32(rng, 5, 3), f32(rng, 11)
    fake.pinned.add(pinned.ctypes.data)
    before = fake.count("cuStreamSynchronize")
    np.testing.assert_array_equal(upload(pageable).numpy(), pageable)
    # the download waits (once); the upload did not
    assert fake.count("cuStreamSynchronize") == before + 1
    np.testing.assert_array_equal(upload(pinned).numpy(), pinned)
    assert fake.count("cuStreamSynchronize") == before + 3


# ============================================================================ a flat plan

def flat_plan():
    """t = x + v (a temporary); out[0:4] = t[1:5] (a copy of views); out[4] = 2 * t[0]."""
    return plan_of(
        [tensor((5, 7)), tensor((7,))],
        [{"op": "alloc", "result": "%0", "shape": [5, 7], "dtype": "float32"},
         launch("k_add_row", ["%in0", "%in1", "%0"], ["memref:2", "memref:1", "memref:2"],
                grid=(5, 1, 1), block=(7, 1, 1)),
         {"op": "alloc", "result": "%1", "shape": [5, 7], "dtype": "float32"},
         {"op": "view", "result": "%2", "source": "%0", "offset": 7, "sizes": [4, 7],
          "strides": [7, 1], "absolute": True},
         {"op": "view", "result": "%3", "source": "%1", "offset": 0, "sizes": [4, 7],
          "strides": [7, 1], "absolute": True},
         {"op": "copy", "source": "%2", "target": "%3"},
         {"op": "view", "result": "%4", "source": "%1", "offset": 28, "sizes": [1, 7],
          "strides": [7, 1], "absolute": True},
         {"op": "view", "result": "%5", "source": "%0", "offset": 0, "sizes": [1, 7],
          "strides": [7, 1], "absolute": True},
         launch("k_scale", ["%5", "%4"], ["memref:2", "memref:2"], grid=(1, 1, 1),
                block=(7, 1, 1))],
        [dict(tensor((5, 7)), value="%1")])


def flat_reference(x, v):
    t = x.astype(np.float64) + v.astype(np.float64)
    return np.concatenate([t[1:5], 2 * t[0:1]])


@pytest.fixture
def flat(fake, rng):
    fake.kernels.update(k_add_row=k_add_row, k_scale=k_scale)
    x, v = f32(rng, 5, 7), f32(rng, 7)
    executor = executor_for(fake, flat_plan())
    return types.SimpleNamespace(executor=executor, x=x, v=v, inputs=[upload(x), upload(v)])


def test_flat_plan_takes_the_fast_path_and_computes(flat, fake):
    assert flat.executor.flat is not None
    mark = fake.mark()
    out, = flat.executor(flat.inputs)
    assert isinstance(out, DeviceArray)
    assert out.shape == (5, 7) and out.dtype == np.float32
    assert_close(out.numpy(), flat_reference(flat.x, flat.v))
    log = fake.since(mark)
    assert [item.kernel for item in log.launches] == ["k_add_row", "k_scale"]
    # one arena for the temporary, one allocation for the output, and nothing else
    assert [nbytes for _, nbytes in log.allocs] == [256, 140]
    arena, output = (address for address, _ in log.allocs)
    assert out.ptr == output
    assert log.frees == [arena]  # the arena, right after the launches


def test_fast_path_and_interpreter_issue_the_samelaunches(flat, fake, rng):
    mark = fake.mark()
    fast_out, = flat.executor(flat.inputs)
    fast = fake.since(mark)
    mark = fake.mark()
    slow_out, = flat.executor.run_plan(flat.inputs)
    slow = fake.since(mark)
    assert [(i.kernel, i.grid, i.block, i.shared) for i in fast.launches] == \
        [("k_add_row", (5, 1, 1), (7, 1, 1), 0), ("k_scale", (1, 1, 1), (7, 1, 1), 0)]
    assert canonical(fast.launches) == canonical(slow.launches)
    assert len(fast.copies) == len(slow.copies) == 1
    np.testing.assert_array_equal(fast_out.numpy(), slow_out.numpy())
    assert_close(slow_out.numpy(), flat_reference(flat.x, flat.v))
    # the interpreter: one allocation per alloc step; the temporary is freed once the
    # plan has run, the output when its DeviceArray goes
    assert sorted(nbytes for _, nbytes in slow.allocs) == [140, 140]
    temporary = next(a for a, _ in slow.allocs if a != slow_out.ptr)
    gc.collect()
    assert temporary in fake.frees and slow_out.ptr not in fake.frees
    ptr = slow_out.ptr
    del slow_out
    gc.collect()
    assert ptr in fake.frees


def test_descriptors_of_the_flat_plan(flat, fake):
    mark = fake.mark()
    out, = flat.executor(flat.inputs)
    log = fake.since(mark)
    x, v = flat.inputs
    arena = log.allocs[0][0]
    add, scale = log.launches
    assert add.args == [Desc(x.ptr, x.ptr, 0, (5, 7), (7, 1)),
                        Desc(v.ptr, v.ptr, 0, (7,), (1,)),
                        Desc(arena, arena, 0, (5, 7), (7, 1))]
    assert scale.args == [Desc(arena, arena, 0, (1, 7), (7, 1)),
                          Desc(out.ptr, out.ptr, 28, (1, 7), (7, 1))]
    (dst, src, nbytes), = log.copies
    assert (dst, src, nbytes) == (out.ptr, arena + 7 * 4, 4 * 7 * 4)


@pytest.mark.parametrize("grid,per_multiprocessor,launched", [
    (5000, 4, 528),   # 4 blocks on each of the fake's 132 multiprocessors
    (100, 4, 100),    # fewer blocks than that: as planned
    (5000, 0, 5000),  # no cap
])
def test_grid_stride_kernels_get_a_grid_per_multiprocessor(fake, rng, grid,
                                                           per_multiprocessor, launched):
    """A launch step's "blocks_per_multiprocessor" caps its grid's x at that many blocks
    per multiprocessor of the device, on the fast path and in the interpreter."""
    fake.kernels.update(k_scale=k_scale)
    step = launch("k_scale", ["%in0", "%0"], ["memref:1", "memref:1"], grid=(grid, 1, 1))
    if per_multiprocessor:
        step["blocks_per_multiprocessor"] = per_multiprocessor
    plan = plan_of([tensor((9,))],
                   [{"op": "alloc", "result": "%0", "shape": [9], "dtype": "float32"}, step],
                   [dict(tensor((9,)), value="%0")])
    executor = executor_for(fake, plan)
    assert executor.flat is not None
    x = f32(rng, 9)
    for run in (executor, executor.run_plan):
        mark = fake.mark()
        out, = run([upload(x)])
        [launched_step] = fake.since(mark).launches
        assert launched_step.grid == (launched, 1, 1)
        assert_close(out.numpy(), 2 * x.astype(np.float64))


def test_the_interpreter_gives_views_their_offsets(flat, fake):
    mark = fake.mark()
    out, = flat.executor.run_plan(flat.inputs)
    log = fake.since(mark)
    temporary = next(a for a, _ in log.allocs if a != out.ptr)
    assert log.launches[1].args == [Desc(temporary, temporary, 0, (1, 7), (7, 1)),
                                    Desc(out.ptr, out.ptr, 28, (1, 7), (7, 1))]
    assert log.copies == [(out.ptr, temporary + 28, 112)]


def test_each_fast_call_patches_in_its_own_buffers(flat, fake, rng):
    first, = flat.executor(flat.inputs)
    x2, v2 = f32(rng, 5, 7), f32(rng, 7)
    inputs2 = [upload(x2), upload(v2)]
    mark = fake.mark()
    second, = flat.executor(inputs2)
    log = fake.since(mark)
    assert second.ptr != first.ptr  # the first result is still alive and untouched
    add, scale = log.launches
    assert add.args[0].aligned == inputs2[0].ptr and add.args[1].aligned == inputs2[1].ptr
    assert scale.args[1].aligned == second.ptr
    assert_close(first.numpy(), flat_reference(flat.x, flat.v))
    assert_close(second.numpy(), flat_reference(x2, v2))


def test_kernels_are_looked_up_once(flat, fake):
    for _ in range(3):
        flat.executor(flat.inputs)
    flat.executor.run_plan(flat.inputs)
    names = sorted(args[1] for call, args in fake.calls if call == "cuModuleGetFunction")
    assert names == [b"k_add_row", b"k_scale"]  # the module keeps what it looked up


# ============================================================================ real plans

@functools.lru_cache(maxsize=None)
def example_plan(path, **shapes):
    seed = secrets.randbits(32)
    print(f"example inputs seed {seed}")
    rng = np.random.default_rng(seed)
    inputs = {n: (rng.standard_normal(s).astype(np.float32) if isinstance(s, tuple) else s)
              for n, s in shapes.items()}
    prog = zynml.compile(path, device="cuda", require_device=False)
    return prog.artifact(**inputs).plan


# the even and odd lanes written by two loops (one loop's two stores would be one:
# cir-join-stores), each a strided view of the output
STRIDED_LANES = """
let y = compute(x, cos_cache, sin_cache) {
    @kernel fused
    for b in 0..batch, h in 0..heads, s in 0..seq:
        for d in 0..head_dim / 2:
            out[b, h, s, d * 2] = x[b, h, s, d * 2] * cos_cache[s, d]
        for d in 0..head_dim / 2:
            out[b, h, s, d * 2 + 1] = x[b, h, s, d * 2 + 1] * sin_cache[s, d]
}
"""

REAL_PLANS = {
    "softmax": (ROOT / "examples" / "softmax.zyn", dict(x=(37, 129))),
    "layer_norm": (EXAMPLES / "layer_norm.zyn",
                   dict(x=(5, 13), gamma=(13,), beta=(13,), eps=1e-5)),
    "lanes": (STRIDED_LANES, dict(x=(2, 3, 5, 8), cos_cache=(5, 4), sin_cache=(5, 4),
                                  head_dim=8)),
}


def static_views(plan):
    """value -> (root, offset, sizes, strides, dtype) of a plan without loops, read off
    the plan format (launch_plan.py's docstring)."""
    env = {}
    for i, spec in enumerate(plan["inputs"]):
        if spec["kind"] == "tensor":  # scalars (eps) are kernel parameters, by value
            env[f"%in{i}"] = (f"%in{i}", 0, tuple(spec["shape"]),
                              _row_major(spec["shape"]), spec["dtype"])
    for step in plan["body"]:
        if step["op"] == "alloc":
            env[step["result"]] = (step["result"], 0, tuple(step["shape"]),
                                   _row_major(step["shape"]), step["dtype"])
        elif step["op"] == "view":
            root, offset, _, _, dtype = env[step["source"]]
            offset = step["offset"] if step.get("absolute") else offset + step["offset"]
            env[step["result"]] = (root, offset, tuple(step["sizes"]),
                                   tuple(step["strides"]), dtype)
    return env


def _row_major(shape):
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def real_inputs(plan, rng):
    """A device array per tensor input, a number (as the fast path gets it) per scalar."""
    return [upload(rng.standard_normal(spec["shape"]).astype(spec["dtype"]))
            if spec["kind"] == "tensor" else np.asarray(
                rng.uniform(0.5, 2.0)).astype(spec["dtype"]).item()
            for spec in plan["inputs"]]


@pytest.mark.parametrize("name", sorted(REAL_PLANS))
def test_real_plan_fast_and_interpreted(fake, rng, name):
    path, shapes = REAL_PLANS[name]
    plan = example_plan(path, **shapes)
    executor = executor_for(fake, plan)
    assert executor.flat is not None, "a compiled plan without loops takes the fast path"
    inputs = real_inputs(plan, rng)
    mark = fake.mark()
    fast_out = executor(inputs)
    fast = fake.since(mark)
    mark = fake.mark()
    slow_out = executor.run_plan(inputs)
    slow = fake.since(mark)
    steps = list(launches(plan["body"]))
    expected = [(s["kernel"], tuple(s["grid"]), tuple(s["block"]), s["shared_bytes"])
                for s in steps]
    assert [(i.kernel, i.grid, i.block, i.shared) for i in fast.launches] == expected
    assert canonical(fast.launches) == canonical(slow.launches)
    assert len(fast.copies) == len(slow.copies) == sum(s["op"] == "copy" for s in plan["body"])
    assert len(fast_out) == len(slow_out) == len(plan["outputs"])
    for out, spec in zip(fast_out + slow_out, plan["outputs"] * 2):
        assert isinstance(out, DeviceArray)
        assert list(out.shape) == spec["shape"] and out.dtype == np.dtype(spec["dtype"])

    # every descriptor is what the plan says: the root's address, the view's layout
    views = static_views(plan)
    roots = {f"%in{i}": a.ptr for i, a in enumerate(inputs) if isinstance(a, DeviceArray)}
    roots.update({spec["value"]: out.ptr for spec, out in zip(plan["outputs"], fast_out)})
    for step, item in zip(steps, fast.launches):
        for ref, arg in zip(step["args"], item.args):
            if ref not in views:  # a scalar input, by value: the number given
                number = inputs[int(ref[3:])]
                assert arg == np.asarray(number).astype(plan["inputs"][int(ref[3:])]["dtype"])
                continue
            root, offset, sizes, strides, _ = views[ref]
            assert arg.allocated == arg.aligned
            assert (arg.offset, arg.sizes, arg.strides) == (offset, sizes, strides), ref
            if root in roots:
                assert arg.aligned == roots[root], ref
            roots.setdefault(root, arg.aligned)
    assert len(set(roots.values())) == len(roots)  # no two roots share memory

    # temporaries: one arena, 256-byte aligned slots in it, freed after the launches;
    # outputs: an allocation each, of exactly their size, not freed
    output_roots = {spec["value"] for spec in plan["outputs"]}
    temps = {r for r in roots if r not in output_roots and not r.startswith("%in")}
    sizes = {s["result"]: int(np.prod(s["shape"])) * np.dtype(s["dtype"]).itemsize
             for s in plan["body"] if s["op"] == "alloc"}
    alloc_sizes = dict(fast.allocs)
    for out in fast_out:
        assert alloc_sizes[out.ptr] == out.nbytes
    if temps:
        arena = next(a for a, _ in fast.allocs if a not in {o.ptr for o in fast_out})
        assert len(fast.allocs) == len(fast_out) + 1
        assert alloc_sizes[arena] == sum(-(-sizes[t] // 256) * 256 for t in temps)
        assert all((roots[t] - arena) % 256 == 0 and
                   0 <= roots[t] - arena < alloc_sizes[arena] for t in temps)
        assert fast.frees == [arena]
    else:
        assert len(fast.allocs) == len(fast_out) and fast.frees == []


def test_real_plan_with_views_at_an_offset(fake, rng):
    """The even and odd lanes of the output are written through strided views; the odd
    view starts one element in."""
    plan = example_plan(REAL_PLANS["lanes"][0], **REAL_PLANS["lanes"][1])
    executor = executor_for(fake, plan)
    mark = fake.mark()
    out, = executor(real_inputs(plan, rng))
    odd = [i for i in fake.since(mark).launches
           if any(isinstance(a, Desc) and a.offset == 1 for a in i.args)]
    assert odd, "no launch on the odd lanes"
    desc = next(a for a in odd[0].args if isinstance(a, Desc) and a.offset == 1)
    assert desc.aligned == out.ptr and desc.sizes == (2, 3, 5, 4)
    assert desc.strides == (120, 40, 8, 2)


# ============================================================================ loops, scalars

def loop_plan():
    """out = 0; for iv in 0, 2, 4: out[iv + 1] = x[iv] * iv; also returns the trip count."""
    body = [
        {"op": "scalar", "result": "%3", "fn": "addi", "args": ["%1", 1]},
        {"op": "view", "result": "%4", "source": "%in0", "offsets": ["%1", 0], "sizes": [4],
         "strides": [1], "source_strides": [4, 1]},
        {"op": "view", "result": "%5", "source": "%0", "offsets": ["%3", 0], "sizes": [4],
         "strides": [1], "source_strides": [4, 1]},
        launch("k_times_iv", ["%4", "%5", "%1"], ["memref:1", "memref:1", "int64"]),
        {"op": "scalar", "result": "%6", "fn": "addi", "args": ["%2", 1]},
    ]
    return plan_of(
        [tensor((6, 4))],
        [{"op": "alloc", "result": "%0", "shape": [6, 4], "dtype": "float32"},
         launch("k_zero", ["%0"], ["memref:2"]),
         {"op": "for", "lower": 0, "upper": 6, "step": 2, "iv": "%1", "inits": [0],
          "iter_args": ["%2"], "body": body, "yields": ["%6"], "results": ["%7"]}],
        [dict(tensor((6, 4)), value="%0"), {"kind": "scalar", "dtype": "int64", "value": "%7"}])


def test_for_loop_runs_its_body_with_the_iv(fake, rng):
    fake.kernels.update(k_zero=k_zero, k_times_iv=k_times_iv)
    executor = executor_for(fake, loop_plan())
    assert executor.flat is None  # loops: the interpreter
    x = f32(rng, 6, 4)
    array = upload(x)
    mark = fake.mark()
    out, trips = executor([array])
    log = fake.since(mark)
    assert trips == 3
    body = [i for i in log.launches if i.kernel == "k_times_iv"]
    assert [i.args[2] for i in body] == [0, 2, 4]
    assert [i.args[0] for i in body] == [Desc(array.ptr, array.ptr, 4 * iv, (4,), (1,))
                                         for iv in (0, 2, 4)]
    assert [i.args[1] for i in body] == [Desc(out.ptr, out.ptr, 4 * (iv + 1), (4,), (1,))
                                         for iv in (0, 2, 4)]
    expected = np.zeros((6, 4))
    for iv in (0, 2, 4):
        expected[iv + 1] = x[iv].astype(np.float64) * iv
    assert_close(out.numpy(), expected)


def test_empty_loop_and_empty_grid(fake, rng):
    plan = loop_plan()
    plan["body"][2]["upper"] = 0  # no trips: the results are the inits
    plan["body"][1]["grid"] = [0, 1, 1]  # nothing to zero
    executor = executor_for(fake, plan)
    mark = fake.mark()
    out, trips = executor([upload(f32(rng, 6, 4))])
    assert trips == 0
    assert fake.since(mark).launches == []


def scalar_plan():
    fns = [("addi", ["%in0", "%in1"]), ("subi", ["%in0", "%in1"]), ("muli", ["%in0", "%in1"]),
           ("divsi", ["%in0", "%in1"]), ("remsi", ["%in0", "%in1"]),
           ("floordivsi", ["%in0", "%in1"]), ("ceildivsi", ["%in0", "%in1"]),
           ("maxsi", ["%in0", "%in1"]), ("minsi", ["%in0", "%in1"]), ("copy", ["%in0"]),
           ("muli", ["%0", -3])]
    body = [{"op": "scalar", "result": f"%{i}", "fn": fn, "args": args}
            for i, (fn, args) in enumerate(fns)]
    return plan_of([{"kind": "scalar", "dtype": "int64"}] * 2, body,
                   [{"kind": "scalar", "dtype": "int64", "value": f"%{i}"}
                    for i in range(len(fns))])


def _trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def scalar_reference(a, b):
    """MLIR's arith semantics on i64: divsi truncates, remsi takes the dividend's sign,
    floordivsi rounds down, ceildivsi up."""
    floor = a // b
    ceil = floor + (1 if floor * b != a else 0)
    return [a + b, a - b, a * b, _trunc_div(a, b), a - _trunc_div(a, b) * b, floor, ceil,
            max(a, b), min(a, b), a, (a + b) * -3]


def test_scalar_steps(fake, rng):
    executor = executor_for(fake, scalar_plan())
    assert executor.flat is None
    fixed = [(-7, 2), (7, -2), (-7, -2), (7, 2), (-8, 2), (0, -5), (6, 3), (-1, 7)]
    drawn = [(int(a), int(b) or 1) for a, b in rng.integers(-10 ** 6, 10 ** 6, (50, 2))]
    for a, b in fixed + drawn:
        assert executor.run_plan([a, b]) == scalar_reference(a, b), (a, b)
    # the textbook cases
    assert executor.run_plan([-7, 2])[3:7] == [-3, -1, -4, -3]
    assert fake.launches == []


def test_scalar_division_is_exact_for_large_values(fake):
    executor = executor_for(fake, scalar_plan())
    for a, b in [(2 ** 53 + 1, 1), (2 ** 60 + 3, 7), (-(2 ** 62) - 5, 3)]:
        assert executor.run_plan([a, b]) == scalar_reference(a, b), (a, b)


# ============================================================================ copies

def copy_plan(sizes, strides, offset):
    return plan_of(
        [tensor((3, 10))],
        [{"op": "alloc", "result": "%0", "shape": list(sizes), "dtype": "float32"},
         {"op": "view", "result": "%1", "source": "%in0", "offset": offset,
          "sizes": list(sizes), "strides": list(strides), "absolute": True},
         {"op": "copy", "source": "%1", "target": "%0"}],
        [dict(tensor(sizes), value="%0")])


@pytest.mark.parametrize("path", ["fast", "interpreter"])
def test_contiguous_copy_is_one_memcpy(fake, rng, path):
    executor = executor_for(fake, copy_plan((2, 10), (10, 1), 10))
    x = f32(rng, 3, 10)
    array = upload(x)
    mark = fake.mark()
    out, = executor([array]) if path == "fast" else executor.run_plan([array])
    log = fake.since(mark)
    assert log.launches == []
    assert log.copies == [(out.ptr, array.ptr + 40, 80)]
    np.testing.assert_array_equal(out.numpy(), x[1:3])


@pytest.mark.parametrize("path", ["fast", "interpreter"])
def test_copies_between_views_at_offsets(fake, rng, path):
    """out[1] = x[2] through a view of a view (its offset relative to its source's);
    out[0] = x[0]."""
    row = {"sizes": [1, 10], "strides": [10, 1]}
    plan = plan_of(
        [tensor((3, 10))],
        [{"op": "alloc", "result": "%0", "shape": [2, 10], "dtype": "float32"},
         {"op": "view", "result": "%1", "source": "%in0", "offset": 10, "sizes": [2, 10],
          "strides": [10, 1], "absolute": True},
         dict(op="view", result="%2", source="%1", offset=10, **row),
         dict(op="view", result="%3", source="%0", offset=10, absolute=True, **row),
         {"op": "copy", "source": "%2", "target": "%3"},
         dict(op="view", result="%4", source="%in0", offset=0, absolute=True, **row),
         dict(op="view", result="%5", source="%0", offset=0, absolute=True, **row),
         {"op": "copy", "source": "%4", "target": "%5"}],
        [dict(tensor((2, 10)), value="%0")])
    executor = executor_for(fake, plan)
    assert executor.flat is not None
    x = f32(rng, 3, 10)
    array = upload(x)
    mark = fake.mark()
    out, = executor([array]) if path == "fast" else executor.run_plan([array])
    assert fake.since(mark).copies == [(out.ptr + 40, array.ptr + 80, 40),
                                       (out.ptr, array.ptr, 40)]
    np.testing.assert_array_equal(out.numpy(), x[[0, 2]])


def test_strided_copy_raises_in_the_interpreter(fake, rng):
    executor = executor_for(fake, copy_plan((3, 5), (10, 1), 0))
    with pytest.raises(RuntimeError, match="strided copy"):
        executor.run_plan([upload(f32(rng, 3, 10))])


def test_strided_copy_raises_on_the_fast_path_too(fake, rng):
    executor = executor_for(fake, copy_plan((3, 5), (10, 1), 0))
    x = f32(rng, 3, 10)
    try:
        out, = executor([upload(x)])
    except RuntimeError as err:
        assert "strided copy" in str(err)
    else:
        np.testing.assert_array_equal(out.numpy(), x[:, :5])


# ============================================================================ outputs

@pytest.mark.parametrize("path", ["fast", "interpreted"])
def test_an_input_returned_as_output_is_copied(fake, rng, path):
    """An output that is an input's buffer (returned as it is, or written by a kernel
    that accumulated into it) is the caller's copy, on either path."""
    plan = plan_of([tensor((4, 3))], [], [dict(tensor((4, 3)), value="%in0")])
    executor = executor_for(fake, plan)
    assert executor.flat is not None
    x = f32(rng, 4, 3)
    array = upload(x)
    mark = fake.mark()
    out, = executor([array]) if path == "fast" else executor.run_plan([array])
    log = fake.since(mark)
    assert out.ptr != array.ptr
    assert log.copies == [(out.ptr, array.ptr, 48)]
    np.testing.assert_array_equal(out.numpy(), x)


def test_an_input_updated_in_place_is_returned_itself(fake, rng):
    """`compute(mut x)` written in x's buffer (zynml/backend/cuda/inplace.py): the plan
    marks the output `updates`, and the caller gets its own array back, with no copy."""
    plan = plan_of([tensor((4, 3))], [], [dict(tensor((4, 3)), value="%in0", updates=0)])
    executor = executor_for(fake, plan)
    array = upload(f32(rng, 4, 3))
    mark = fake.mark()
    out, = executor([array])
    assert out is array and fake.since(mark).copies == []


def test_globals_upload_once_and_outputs_of_them_are_copies(fake, rng):
    data = f32(rng, 9)
    plan = plan_of(
        [tensor((9,))],
        [{"op": "global", "result": "%0", "name": "g0"},
         {"op": "alloc", "result": "%1", "shape": [9], "dtype": "float32"},
         launch("k_add", ["%in0", "%0", "%1"], ["memref:1"] * 3)],
        [dict(tensor((9,)), value="%1"), dict(tensor((9,)), value="%0")],
        globals_=[{"name": "g0", "shape": [9], "dtype": "float32"}])

    def k_add(fake, args):
        a, b, out = (fake.array(d, np.float32) for d in args)
        out[...] = a + b
    fake.kernels["k_add"] = k_add
    mark = fake.mark()
    executor = executor_for(fake, plan, {"g0": data})
    (global_ptr, uploaded), = fake.uploads
    assert uploaded == data.tobytes()
    x = f32(rng, 9)
    array = upload(x)
    for _ in range(2):
        total, copy = executor([array])
        item = fake.since(mark).launches[-1]
        assert item.args[1] == Desc(global_ptr, global_ptr, 0, (9,), (1,))
        assert_close(total.numpy(), x.astype(np.float64) + data.astype(np.float64))
        assert copy.ptr != global_ptr
        np.testing.assert_array_equal(copy.numpy(), data)
    assert len(fake.uploads) == 2  # the global once, the input once


# ============================================================================ poison, shared

def test_poison_disables_the_fast_path_and_fills_allocations(fake, rng, monkeypatch):
    monkeypatch.setenv("ZYNML_CUDA_POISON", "1")
    fake.kernels.update(k_add_row=k_add_row, k_scale=k_scale)
    executor = executor_for(fake, flat_plan())
    assert executor.poison and executor.flat is None
    x, v = f32(rng, 5, 7), f32(rng, 7)
    inputs = [upload(x), upload(v)]
    mark = fake.mark()
    out, = executor(inputs)
    log = fake.since(mark)
    assert len(log.allocs) == 2
    assert sorted(log.memsets) == sorted((address, 0xFF, nbytes)
                                         for address, nbytes in log.allocs)
    assert_close(out.numpy(), flat_reference(x, v))


def test_poisoned_memory_shows_what_no_kernel_wrote(fake, rng, monkeypatch):
    monkeypatch.setenv("ZYNML_CUDA_POISON", "1")
    plan = plan_of([tensor((3,))], [{"op": "alloc", "result": "%0", "shape": [3],
                                     "dtype": "float32"}], [dict(tensor((3,)), value="%0")])
    out, = executor_for(fake, plan)([upload(f32(rng, 3))])
    assert np.isnan(out.numpy()).all()


@pytest.mark.parametrize("path", ["fast", "interpreter"])
def test_large_shared_memory_is_opted_into_once(fake, rng, path):
    plan = plan_of([tensor((4,))],
                   [{"op": "alloc", "result": "%0", "shape": [4], "dtype": "float32"},
                    launch("k_big", ["%in0", "%0"], ["memref:1"] * 2, shared=100 * 1024),
                    launch("k_small", ["%in0", "%0"], ["memref:1"] * 2, shared=1024)],
                   [dict(tensor((4,)), value="%0")])
    executor = executor_for(fake, plan)
    array = upload(f32(rng, 4))
    expected = ("k_big", "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 100 * 1024)
    run = executor.__call__ if path == "fast" else executor.run_plan
    run([array])
    assert set(fake.attributes) == {expected}  # k_small's 1 KiB needs no opt-in
    settings = len(fake.attributes)
    run([array])
    assert len(fake.attributes) == settings  # not again per call
    assert [i.shared for i in fake.launches] == [100 * 1024, 1024] * 2


def test_shared_bytes_may_be_a_plan_value(fake, rng):
    body = [{"op": "scalar", "result": "%2", "fn": "muli", "args": ["%1", 1024]},
            launch("k_dyn", ["%in0"], ["memref:1"], shared="%2")]
    plan = plan_of([tensor((4,))],
                   [{"op": "for", "lower": 1, "upper": 4, "step": 1, "iv": "%1", "inits": [],
                     "iter_args": [], "body": body, "yields": [], "results": []}], [])
    executor = executor_for(fake, plan)
    executor([upload(f32(rng, 4))])
    assert [i.shared for i in fake.launches] == [1024, 2048, 3072]


def tensor_map_plan():
    """k_tma(map of x, map of x's rows 2.., out): descriptors of an input and of a view
    of it at an offset, passed as pointers."""
    return plan_of(
        [tensor((6, 8), "float16")],
        [{"op": "alloc", "result": "%0", "shape": [6, 8], "dtype": "float16"},
         {"op": "view", "result": "%1", "source": "%in0", "offset": 16, "sizes": [4, 8],
          "strides": [8, 1], "absolute": True},
         {"op": "tensor_map", "result": "%2", "source": "%in0", "box": [2, 8], "swizzle": 128},
         {"op": "tensor_map", "result": "%3", "source": "%1", "box": [4, 8], "swizzle": 0},
         launch("k_tma", ["%2", "%3", "%0"], ["pointer", "pointer", "memref:2"])],
        [dict(tensor((6, 8), "float16"), value="%0")])


@pytest.mark.parametrize("path", ["fast", "interpreter"])
def test_tensor_maps_are_encoded_once_per_buffer(fake, rng, path):
    executor = executor_for(fake, tensor_map_plan())
    assert executor.flat is not None  # tensor maps keep a plan on the fast path
    run = executor.__call__ if path == "fast" else executor.run_plan
    x, y = (upload(f32(rng, 6, 8).astype(np.float16)) for _ in range(2))
    run([x])
    first = fake.launches[-1].args[:2]
    assert tensor_map_fields(fake, first[0]) == (x.ptr, (8, 6), (16,), (8, 2), 128)
    assert tensor_map_fields(fake, first[1]) == (x.ptr + 32, (8, 4), (16,), (8, 4), 0)
    encodes = fake.count("cuTensorMapEncodeTiled")
    assert encodes == 2
    run([x])  # the same buffer: the same descriptors, not encoded or uploaded again
    assert fake.launches[-1].args[:2] == first
    assert fake.count("cuTensorMapEncodeTiled") == encodes
    run([y])  # another buffer: its own descriptors
    second = fake.launches[-1].args[:2]
    assert set(second).isdisjoint(first)
    assert tensor_map_fields(fake, second[0])[0] == y.ptr
    assert tensor_map_fields(fake, second[1])[0] == y.ptr + 32
    assert fake.count("cuTensorMapEncodeTiled") == encodes + 2


def test_fast_path_and_interpreter_share_the_descriptors(fake, rng):
    executor = executor_for(fake, tensor_map_plan())
    x = upload(f32(rng, 6, 8).astype(np.float16))
    executor([x])
    executor.run_plan([x])
    fast, slow = fake.launches[-2:]
    assert fast.args[:2] == slow.args[:2]
    assert fake.count("cuTensorMapEncodeTiled") == 2


def test_a_step_this_runtime_does_not_know_is_a_clear_error(fake, rng):
    plan = plan_of([tensor((4,))], [{"op": "from_the_future", "result": "%0"}], [])
    executor = executor_for(fake, plan)
    with pytest.raises(RuntimeError, match="cannot run launch-plan steps 'from_the_future'"):
        executor([upload(f32(rng, 4))])


def test_a_tensor_map_of_an_unaligned_view_is_a_clear_error(fake, rng):
    plan = tensor_map_plan()
    plan["body"][1]["offset"] = 3  # rows from element 3: 6 bytes in
    executor = executor_for(fake, plan)
    with pytest.raises(CudaError, match="16-byte aligned rows"):
        executor([upload(f32(rng, 6, 8).astype(np.float16))])
    assert fake.count("cuTensorMapEncodeTiled") == 1  # the aligned one only


def test_past_the_limit_kept_descriptors_are_freed(fake, rng, monkeypatch):
    from zynml.runtime.cuda.tensor_maps import TensorMaps
    monkeypatch.setattr(TensorMaps, "LIMIT", 2)
    executor = executor_for(fake, tensor_map_plan())
    x, y = (upload(f32(rng, 6, 8).astype(np.float16)) for _ in range(2))
    executor([x])
    kept = set(fake.launches[-1].args[:2])
    executor([y])  # two more would make four: the first two go (stream-ordered frees)
    assert kept <= set(fake.frees)
    executor([x])  # made again, and correct
    assert tensor_map_fields(fake, fake.launches[-1].args[0])[0] == x.ptr


# ============================================================================ errors

@pytest.mark.parametrize("path", ["fast", "interpreter"])
def test_a_failing_launch_is_a_cuda_error_naming_call_and_error(flat, fake, path):
    fake.fail["cuLaunchKernel"] = 700
    with pytest.raises(CudaError) as err:
        flat.executor(flat.inputs) if path == "fast" else flat.executor.run_plan(flat.inputs)
    call = "cuLaunchKernelEx" if fake.path == "ctypes" else "cuLaunchKernel"
    assert str(err.value) == f"{call} failed: CUDA_ERROR_ILLEGAL_ADDRESS"


def test_a_missing_kernel_is_a_cuda_error(fake):
    fake.fail["cuModuleGetFunction"] = 500
    with pytest.raises(CudaError, match=r"cuModuleGetFunction\(k_add_row\) failed: "
                                        "CUDA_ERROR_NOT_FOUND"):
        executor_for(fake, flat_plan())  # the fast path looks its kernels up at once


def test_out_of_memory_is_a_cuda_error(flat, fake):
    fake.fail["cuMemAllocAsync"] = 2
    with pytest.raises(CudaError, match="cuMemAllocAsync failed: CUDA_ERROR_OUT_OF_MEMORY"):
        flat.executor(flat.inputs)


# ============================================================================ the hot calls

def test_the_hot_calls_take_the_path_asked_for(flat, fake):
    hot = get_device(0)._hot
    assert (hot is not None) == (fake.path == "ctypes")
    assert hot is None or hot.launch_name == "cuLaunchKernelEx"
    flat.executor(flat.inputs)
    assert fake.count("cuLaunchKernel") == 2


def test_cuLaunchKernel_where_the_driver_has_no_Ex(fake, rng, monkeypatch):
    lib = fake_libcuda(fake, with_ex=False)
    monkeypatch.setattr(driver, "_hot_calls", lambda: driver._HotCalls(lib))
    fake.kernels.update(k_add_row=k_add_row, k_scale=k_scale)
    executor = executor_for(fake, flat_plan())
    assert get_device(0)._hot.launch_name == "cuLaunchKernel"
    x, v = f32(rng, 5, 7), f32(rng, 7)
    out, = executor([upload(x), upload(v)])
    assert_close(out.numpy(), flat_reference(x, v))
    fake.fail["cuLaunchKernel"] = 700
    with pytest.raises(CudaError, match="^cuLaunchKernel failed: CUDA_ERROR_ILLEGAL_ADDRESS"):
        executor([upload(x), upload(v)])


# ============================================================================ result buffers

def test_live_results_never_share_memory(flat, fake, rng):
    """Results dropped along the way are reused; the live ones keep their contents."""
    live = []
    for k in range(12):
        x, v = f32(rng, 5, 7), f32(rng, 7)
        out, = flat.executor([upload(x), upload(v)])
        live.append((out, flat_reference(x, v)))
        if k % 3 == 2:
            del live[k % 2]
    assert len({out.ptr for out, _ in live}) == len(live)
    for out, expected in live:
        assert_close(out.numpy(), expected)


def test_a_dropped_result_is_reused_without_the_driver(flat, fake):
    out, = flat.executor(flat.inputs)
    ptr = out.ptr
    del out
    mark = fake.mark()
    again, = flat.executor(flat.inputs)
    log = fake.since(mark)
    assert again.ptr == ptr
    arena, = log.allocs  # no allocation for the output
    assert arena[1] == 256 and log.frees == [arena[0]]
    assert_close(again.numpy(), flat_reference(flat.x, flat.v))


def test_results_live_while_a_cycle_holds_them(flat, fake):
    out, = flat.executor(flat.inputs)
    ptr = out.ptr
    cycle = [out]
    cycle.append(cycle)
    del out
    for _ in range(3):
        other, = flat.executor(flat.inputs)
        assert other.ptr != ptr
    del cycle, other
    gc.collect()
    again, = flat.executor(flat.inputs)
    assert again.ptr == ptr  # collected with its cycle, then reused


def test_few_buffers_are_kept_per_size(flat, fake):
    keep = driver.Device.KEEP_PER_SIZE
    results = [flat.executor(flat.inputs)[0] for _ in range(keep + 2)]
    ptrs = {out.ptr for out in results}
    mark = fake.mark()
    del results
    freed = fake.since(mark).frees
    assert len(freed) == 2 and set(freed) <= ptrs
    mark = fake.mark()
    again = [flat.executor(flat.inputs)[0] for _ in range(keep + 1)]
    outputs = [a for a, n in fake.since(mark).allocs if n == 140]
    assert {a.ptr for a in again[:keep]} == ptrs - set(freed)
    assert outputs == [again[keep].ptr]  # the kept ones used up: the driver again


def test_big_results_go_back_to_the_driver(fake, rng, monkeypatch):
    monkeypatch.setattr(driver.Device, "KEEP_MAX_BYTES", 139)  # the output has 140
    fake.kernels.update(k_add_row=k_add_row, k_scale=k_scale)
    executor = executor_for(fake, flat_plan())
    out, = executor([upload(f32(rng, 5, 7)), upload(f32(rng, 7))])
    ptr = out.ptr
    del out
    assert fake.frees[-1] == ptr


def test_out_of_memory_frees_the_kept_buffers_and_tries_again(flat, fake, monkeypatch):
    results = [flat.executor(flat.inputs)[0] for _ in range(2)]
    kept = {out.ptr for out in results}
    del results
    allocate = fake.driver.cuMemAllocAsync
    failures = []

    def once(nbytes, stream):
        if not failures:
            failures.append(nbytes)
            return (2,)
        return allocate(nbytes, stream)
    monkeypatch.setattr(fake.driver, "cuMemAllocAsync", once)
    device = get_device(0)
    mark = fake.mark()
    ptr = device.buffers(4096).take()
    log = fake.since(mark)
    assert failures == [4096] and set(log.frees) == kept and log.allocs == [(ptr, 4096)]
    assert not any(found.kept for found in device._bins.values())


def test_a_failed_call_keeps_its_output_buffer_for_reuse(flat, fake):
    fake.fail["cuLaunchKernel"] = 700
    mark = fake.mark()
    with pytest.raises(CudaError):
        flat.executor(flat.inputs)
    arena, output = (a for a, _ in fake.since(mark).allocs)
    assert fake.since(mark).frees == [arena]
    del fake.fail["cuLaunchKernel"]
    out, = flat.executor(flat.inputs)
    assert out.ptr == output
    assert_close(out.numpy(), flat_reference(flat.x, flat.v))


# ============================================================================ Program calls

SUB_SCALED = """
let z = compute(x, y) {
    @kernel elementwise
    for i in 0..n:
        out[i] = (x[i] - y[i]) * scale
}
"""

DIFF_PIPELINE = """
pipeline diff(x: tensor[n], y: tensor[n]) -> tensor[n]:
    let d = compute(x, y) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] - y[i]
    }
    return d
"""

SECOND_HALF = """
let z = compute(x) {
    @kernel elementwise
    for i in 0..half:
        out[i] = x[i + half]
}
"""


def k_sub_scaled(x, y, out, scale):
    out[...] = (x - y) * scale


def k_diff(x, y, out):
    out[...] = x - y


def k_second_half(x, out):
    out[...] = x[len(out):2 * len(out)]


def program_on_fake(fake, source, kernel, pipeline=None, **example):
    """A Program for cuda:0 that `fake` runs: each kernel of its plan for `example`'s
    signature is `kernel` on numpy views of its (float32) arguments."""
    prog = zynml.compile(source, device="cuda:0", require_device=False)
    target = getattr(prog, pipeline)._program if pipeline else prog
    for step in launches(target.artifact(**example).plan["body"]):
        fake.kinds[step["kernel"]] = step["arg_kinds"]
        fake.kernels[step["kernel"]] = \
            lambda fake, args: kernel(*[kernel_argument(fake, d) for d in args])
    return prog


def kernel_argument(fake, arg):
    """A (float32) numpy view of a memref argument, a 0-d array of a by-value scalar."""
    if isinstance(arg, Desc):
        return fake.array(arg, np.float32)
    return np.asarray(arg, np.float32 if isinstance(arg, float) else None)


class TorchLike:
    """What ZynML reads of a CUDA torch.Tensor, over a DeviceArray of the fake."""
    is_cuda = True

    def __init__(self, array, contiguous=True):
        self.array, self.contiguous = array, contiguous
        self.shape, self.dtype = array.shape, ("torch", array.dtype.name)

    def data_ptr(self):
        return self.array.ptr

    def is_contiguous(self):
        return self.contiguous

    @property
    def __cuda_array_interface__(self):
        iface = dict(self.array.__cuda_array_interface__)
        if not self.contiguous:
            iface["strides"] = (2 * self.array.dtype.itemsize,) * self.array.ndim
        return iface


class InterfaceOnly:
    """A CuPy-like array: only __cuda_array_interface__."""

    def __init__(self, array):
        self.array = array

    @property
    def __cuda_array_interface__(self):
        return self.array.__cuda_array_interface__


class Checked(Exception):
    """A call went through Program's checks (not the fast path)."""


@pytest.fixture
def checked_calls(monkeypatch):
    """The names of each call that went through Program's checks."""
    calls = []
    run = zynml.api.Program._run

    def spy(self, inputs):
        calls.append(list(inputs))
        return run(self, inputs)
    monkeypatch.setattr(zynml.api.Program, "_run", spy)
    return calls


def sub_scaled(fake, n=100):
    example = dict(x=np.zeros(n, np.float32), y=np.zeros(n, np.float32), scale=0.5)
    return program_on_fake(fake, SUB_SCALED, k_sub_scaled, **example)


def test_program_calls_skip_the_checks_after_the_first(fake, rng, checked_calls):
    prog = sub_scaled(fake)
    results = []
    for _ in range(4):
        x, y = f32(rng, 100), f32(rng, 100)
        xs, ys = upload(x), upload(y)
        before = fake.read(xs.ptr, 400), fake.read(ys.ptr, 400)
        out = prog(x=TorchLike(xs), y=TorchLike(ys), scale=0.5)["z"]
        assert isinstance(out, DeviceArray) and out.shape == (100,)
        assert out.dtype == np.float32
        assert (fake.read(xs.ptr, 400), fake.read(ys.ptr, 400)) == before  # not written
        results.append((out, (x.astype(np.float64) - y) * 0.5))
    assert checked_calls == [["x", "y", "scale"]]
    assert len({out.ptr for out, _ in results}) == 4
    for out, expected in results:
        assert_close(out.numpy(), expected)


def test_inputs_off_16_bytes_are_copied_to_aligned_buffers(fake, rng, checked_calls):
    """Kernels may read 16 bytes at a time (cp.async, TMA): an input view that starts
    elsewhere goes through the checks, which copy it; aligned inputs are used in place."""
    prog = sub_scaled(fake)
    x, y = f32(rng, 101), f32(rng, 100)
    xs, ys = upload(x), upload(y)
    shifted = DeviceArray(get_device(0), xs.ptr + 4, (100,), "float32", owner=xs)
    # an aligned call of the same signature first: its fast path must still refuse the view
    prog(x=TorchLike(upload(x[1:].copy())), y=TorchLike(ys), scale=0.5)
    for _ in range(2):
        mark = fake.mark()
        out = prog(x=TorchLike(shifted), y=TorchLike(ys), scale=0.5)["z"]
        log = fake.since(mark)
        [launch_] = log.launches
        assert launch_.args[0].aligned % 16 == 0 and launch_.args[0].aligned != shifted.ptr
        assert launch_.args[1].aligned == ys.ptr
        assert (launch_.args[0].aligned, shifted.ptr, 400) in log.copies
        assert_close(out.numpy(), (x[1:].astype(np.float64) - y) * 0.5)
    assert len(checked_calls) == 3  # the shifted view never on the fast path


def test_a_call_of_another_signature_is_checked(fake, rng, checked_calls, monkeypatch):
    prog = sub_scaled(fake)
    x, y = upload(f32(rng, 100)), upload(f32(rng, 100))
    prog(x=TorchLike(x), y=TorchLike(y), scale=0.5)

    def checked(self, inputs):
        raise Checked()
    monkeypatch.setattr(zynml.api.Program, "_run", checked)
    prog(x=TorchLike(x), y=TorchLike(y), scale=0.25)  # the same signature: no checks
    others = [
        dict(x=TorchLike(x), y=TorchLike(upload(f32(rng, 50))), scale=0.5),         # shape
        dict(x=TorchLike(x), y=TorchLike(upload(f32(rng, 10, 10))), scale=0.5),     # rank
        dict(x=TorchLike(x), y=TorchLike(upload(rng.standard_normal(100))),
             scale=0.5),                                                             # dtype
        dict(x=TorchLike(x), y=TorchLike(y, contiguous=False), scale=0.5),
        dict(x=TorchLike(x), y=np.zeros(100, np.float32), scale=0.5),                # host
        dict(x=TorchLike(x), y=TorchLike(y), scale=1),                               # int
        dict(x=TorchLike(x), y=TorchLike(y), scale=np.float64(0.5)),
        dict(x=TorchLike(x), y=TorchLike(y)),                                        # missing
        dict(x=TorchLike(x), y=TorchLike(y), scale=0.5, w=TorchLike(y)),             # unknown
        dict(x=TorchLike(x), w=TorchLike(y), scale=0.5),                             # renamed
    ]
    for inputs in others:
        with pytest.raises(Checked):
            prog(**inputs)


def test_alternating_signatures_each_go_to_their_own_plan(fake, rng, checked_calls):
    """The signature called last is tried first; another one still finds its own."""
    prog = sub_scaled(fake, n=100)
    sub_scaled(fake, n=60)
    for n in (100, 60, 100, 60, 60, 100):
        x, y = f32(rng, n), f32(rng, n)
        out = prog(x=TorchLike(upload(x)), y=InterfaceOnly(upload(y)), scale=0.5)["z"]
        assert out.shape == (n,)
        assert_close(out.numpy(), (x.astype(np.float64) - y) * 0.5)
    assert len(checked_calls) == 2


def test_a_non_contiguous_tensor_is_still_an_error(fake, rng):
    prog = sub_scaled(fake)
    x, y = upload(f32(rng, 100)), upload(f32(rng, 100))
    prog(x=TorchLike(x), y=TorchLike(y), scale=0.5)
    with pytest.raises(ValueError, match="C-contiguous"):
        prog(x=TorchLike(x), y=TorchLike(y, contiguous=False), scale=0.5)


def test_integer_inputs_are_part_of_the_signature(fake, rng, checked_calls):
    prog = program_on_fake(fake, SECOND_HALF, k_second_half,
                           x=np.zeros(100, np.float32), half=50)
    program_on_fake(fake, SECOND_HALF, k_second_half, x=np.zeros(100, np.float32), half=20)
    x = f32(rng, 100)
    xs = upload(x)
    for half in (50, 20, 50, 20):
        out = prog(x=TorchLike(xs), half=half)["z"]
        np.testing.assert_array_equal(out.numpy(), x[half:2 * half])
    assert checked_calls == [["x", "half"]] * 2


def test_inputs_by_name_in_any_order(fake, rng, checked_calls):
    prog = sub_scaled(fake)
    for _ in range(2):
        for order in (("x", "y", "scale"), ("scale", "y", "x")):
            x, y = f32(rng, 100), f32(rng, 100)
            values = dict(x=TorchLike(upload(x)), y=TorchLike(upload(y)), scale=2.0)
            out = prog(**{name: values[name] for name in order})["z"]
            assert_close(out.numpy(), (x.astype(np.float64) - y) * 2)
    assert checked_calls == [["x", "y", "scale"], ["scale", "y", "x"]]


def test_float_inputs_are_kernel_parameters_never_uploaded(fake, rng):
    """A float given as a number is a kernel parameter, by value: no copy to the device,
    on the checked path or the fast one, whatever the number (signed zeros kept)."""
    prog = sub_scaled(fake)
    x, y = f32(rng, 100), f32(rng, 100)
    xs, ys = TorchLike(upload(x)), TorchLike(upload(y))
    uploads = len(fake.uploads)
    for scale in (0.75, 0.75, 3.0, -0.0, 0.0, -1.5, 1e-30):
        mark = fake.mark()
        out = prog(x=xs, y=ys, scale=scale)["z"].numpy()
        [launch_] = fake.since(mark).launches
        assert launch_.args[-1] == np.float32(scale)
        expected = (x - y) * np.float32(scale)
        assert_close(out, expected)
        np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))
    assert len(fake.uploads) == uploads


def test_pipelines_take_the_fast_path(fake, rng, checked_calls):
    prog = program_on_fake(fake, DIFF_PIPELINE, k_diff, pipeline="diff",
                           x=np.zeros(64, np.float32), y=np.zeros(64, np.float32))
    for call in range(4):
        x, y = f32(rng, 64), f32(rng, 64)
        xs, ys = TorchLike(upload(x)), TorchLike(upload(y))
        out = prog.diff(x=xs, y=ys) if call % 2 else prog.diff(xs, ys)
        assert isinstance(out, DeviceArray)
        assert_close(out.numpy(), x.astype(np.float64) - y)
    assert checked_calls == [["x", "y"]]


def test_device_arrays_and_interface_arrays_take_the_fast_path(fake, rng, checked_calls):
    prog = sub_scaled(fake)
    x, y = f32(rng, 100), f32(rng, 100)
    xs, ys = upload(x), upload(y)
    expected = x.astype(np.float64)
    for _ in range(2):
        out = prog(x=InterfaceOnly(xs), y=InterfaceOnly(ys), scale=1.0)["z"]
        chained = prog(x=out, y=ys, scale=1.0)["z"]  # a result as the next input
        assert_close(chained.numpy(), expected - 2 * y)
    assert [len(names) for names in checked_calls] == [3, 3]


def test_without_the_flat_plan_calls_still_skip_the_checks(fake, rng, checked_calls,
                                                           monkeypatch):
    monkeypatch.setenv("ZYNML_CUDA_POISON", "1")  # the interpreter runs every plan
    prog = sub_scaled(fake)
    for _ in range(3):
        x, y = f32(rng, 100), f32(rng, 100)
        out = prog(x=TorchLike(upload(x)), y=TorchLike(upload(y)), scale=0.5)["z"]
        assert_close(out.numpy(), (x.astype(np.float64) - y) * 0.5)
    assert len(checked_calls) == 1
    executable, = prog._executables.values()
    assert executable.function.executor.flat is None


@pytest.mark.gpu
def test_the_fast_path_on_the_gpu(rng, monkeypatch):
    """With the real driver (tools/gpu_tests.sh runs the interpreter only, poisoned):
    cuLaunchKernelEx with a prebuilt config, results from the bins, live ones apart, a
    dropped one reused, float inputs uploaded as they change."""
    monkeypatch.delenv("ZYNML_CUDA_POISON", raising=False)  # it turns the fast path off
    prog = zynml.compile(SUB_SCALED, device="cuda:0")
    x, y = f32(rng, 1000), f32(rng, 1000)
    prog.artifact(x=x, y=y, scale=0.5)  # compile-only runs stop at the next line
    xs, ys = DeviceArray.from_numpy(x), DeviceArray.from_numpy(y)
    scales = [0.5, 2.0, -1.0, 2.0]
    results = [prog(x=xs, y=InterfaceOnly(ys), scale=s)["z"] for s in scales]
    executable, = prog._executables.values()
    assert executable.function.executor.flat is not None
    assert executable.function.device._hot.launch_name == "cuLaunchKernelEx"
    assert len({out.ptr for out in results}) == len(results)
    for out, scale in zip(results, scales):
        assert_close(out.numpy(), (x.astype(np.float64) - y) * scale)
    ptr = results.pop(0).ptr
    again = prog(x=xs, y=InterfaceOnly(ys), scale=3.0)["z"]
    assert again.ptr == ptr
    assert_close(again.numpy(), (x.astype(np.float64) - y) * 3)
    assert_close(results[0].numpy(), (x.astype(np.float64) - y) * 2)


# ============================================================================ bfloat16
# numpy bf16 (ml_dtypes) in and out; GPU bf16 tensors through DLPack, since
# __cuda_array_interface__ cannot name bfloat16 (PyTorch < 2.5 raises, 2.5 says "<f2",
# later "<V2").

BF16 = np.dtype(ml_dtypes.bfloat16)

DOUBLE_MINUS = """
let z = compute(x, y) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0 - y[i]
}
"""


def k_double_minus(fake, args):
    x, y, out = (fake.array(d, BF16) for d in args)
    out[...] = (x.astype(np.float32) * 2 - y.astype(np.float32)).astype(BF16)


def bf16_program(fake, n=37):
    example = dict(x=np.zeros(n, BF16), y=np.zeros(n, BF16))
    prog = zynml.compile(DOUBLE_MINUS, device="cuda:0", require_device=False)
    for step in launches(prog.artifact(**example).plan["body"]):
        fake.kinds[step["kernel"]] = step["arg_kinds"]
        fake.kernels[step["kernel"]] = k_double_minus
    return prog


def bf16(rng, n):
    return (rng.uniform(0.5, 2, n) * rng.choice([-1, 1], n)).astype(BF16)


def expected_double_minus(x, y):
    return (x.astype(np.float32) * 2 - y.astype(np.float32)).astype(BF16)


_capsule_pointer = ctypes.PyDLL(None).PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class TorchBf16Like(TorchLike):
    """What ZynML reads of a CUDA torch.bfloat16 tensor over a DeviceArray of the fake:
    its __cuda_array_interface__ as PyTorch `version` gives it, and DLPack."""

    def __init__(self, array, version, device_id=0, contiguous=True):
        super().__init__(array, contiguous)
        self.dtype, self.version, self.device_id = "torch.bfloat16", version, device_id
        self.streams = []  # the `stream` of each __dlpack__ call

    @property
    def __cuda_array_interface__(self):
        if self.version < (2, 5):
            raise KeyError("torch.bfloat16")  # not an AttributeError: hasattr() raises too
        typestr = "<f2" if self.version < (2, 6) else "<V2"
        return {"shape": self.shape, "typestr": typestr, "data": (self.array.ptr, False),
                "version": 2, "strides": None}

    def __dlpack__(self, stream=None):
        from zynml.runtime.cuda import dlpack
        self.streams.append(stream)
        capsule = dlpack.to_dlpack_capsule(self.array)
        tensor = dlpack._DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
        tensor.dl_tensor.device.device_id = self.device_id
        if not self.contiguous:
            self._strides = (ctypes.c_int64 * 1)(2)
            tensor.dl_tensor.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        return capsule

    def __dlpack_device__(self):
        return (2, self.device_id)


def test_bf16_numpy_in_and_out(fake, rng):
    prog = bf16_program(fake)
    for _ in range(2):
        x, y = bf16(rng, 37), bf16(rng, 37)
        z = prog(x=x, y=y)["z"]
        assert type(z) is np.ndarray and z.dtype == BF16
        np.testing.assert_array_equal(z.view(np.uint16),
                                      expected_double_minus(x, y).view(np.uint16))


def test_bf16_device_arrays_speak_dlpack_only(fake, rng):
    from zynml.runtime.cuda.device_array import gpu_array_spec, is_gpu_array
    x = bf16(rng, 5)
    array = upload(x)
    assert array.dtype == BF16 and array._dtype_name == "bfloat16"
    assert not hasattr(array, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="DLPack"):
        array.__cuda_array_interface__
    assert is_gpu_array(array) and gpu_array_spec(array) == ((5,), BF16)
    np.testing.assert_array_equal(array.numpy().view(np.uint16), x.view(np.uint16))


@pytest.mark.parametrize("version", [(2, 4), (2, 5), (2, 6)])
def test_bf16_torch_tensors_come_in_through_dlpack(fake, rng, checked_calls, version):
    """Whatever the interface says (nothing, float16's "<f2", "<V2"), the data is read as
    bf16 through DLPack, ordered on the legacy default stream (stream=1); the second call
    takes the fast path."""
    prog = bf16_program(fake)
    x, y = bf16(rng, 37), bf16(rng, 37)
    xs, ys = TorchBf16Like(upload(x), version), TorchBf16Like(upload(y), version)
    for _ in range(2):
        z = prog(x=xs, y=ys)["z"]
        assert isinstance(z, DeviceArray) and z.dtype == BF16
        np.testing.assert_array_equal(z.numpy().view(np.uint16),
                                      expected_double_minus(x, y).view(np.uint16))
    assert checked_calls == [["x", "y"]]
    assert xs.streams and set(xs.streams) == {1}


class InterfaceBf16Like:
    """A bf16 array of a library that is not torch (no data_ptr): its interface says
    float16's "<f2" as PyTorch 2.5 does, its `dtype` says bfloat16."""
    dtype = "bfloat16"

    def __init__(self, array):
        self.inner = TorchBf16Like(array, (2, 5))

    @property
    def __cuda_array_interface__(self):
        return self.inner.__cuda_array_interface__

    def __dlpack__(self, stream=None):
        return self.inner.__dlpack__(stream)

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


def test_a_bf16_call_leaves_no_fast_path_for_float16_arrays(fake, rng, checked_calls):
    """Were a bf16 array keyed by its interface's "<f2", a float16 array of the same shape
    would take the bf16 call's fast path: it is checked (and compiled) instead."""
    prog = bf16_program(fake)
    x, y = bf16(rng, 37), bf16(rng, 37)
    z = prog(x=InterfaceBf16Like(upload(x)), y=InterfaceBf16Like(upload(y)))["z"]
    np.testing.assert_array_equal(z.numpy().view(np.uint16),
                                  expected_double_minus(x, y).view(np.uint16))
    halves = [InterfaceOnly(upload(v.astype(np.float16))) for v in (x, y)]
    z = prog(x=halves[0], y=halves[1])["z"]  # (the fake runs its bf16 kernel on it: values
    assert z.dtype == np.float16              # are not the point, the signature is)
    assert len(checked_calls) == 2


@pytest.mark.parametrize("device_id,contiguous,message", [
    (1, True, "on cuda:1 given to a program on cuda:0"), (0, False, "C-contiguous")])
def test_bf16_dlpack_tensors_must_be_on_the_device_and_contiguous(fake, rng, device_id,
                                                                   contiguous, message):
    prog = bf16_program(fake)
    x, y = bf16(rng, 37), bf16(rng, 37)
    bad = TorchBf16Like(upload(x), (2, 6), device_id=device_id, contiguous=contiguous)
    with pytest.raises(ValueError, match=message):
        prog(x=bad, y=TorchBf16Like(upload(y), (2, 6)))
