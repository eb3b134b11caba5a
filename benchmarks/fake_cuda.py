"""A CUDA driver that does nothing, for timing ZynML's Python without a GPU
(benchmarks/call_overhead.py, train_gpt.py --fake-driver).

cuda-python's `driver` module and libcuda's hot entry points (allocate, free, launch) as
no-ops: a launch does nothing, an allocation returns the next fake address, a copy to
the host leaves the host buffer as it was. `FakeCuda().install()` puts it in place of the
real driver for zynml.runtime.cuda; `counts` tells how many allocations, frees and
launches were made. With a C compiler the hot entry points are C functions called
through ctypes, so that a fake call pays ctypes' own cost as a real one does.
"""
from __future__ import annotations

import itertools
import types

# libcuda's hot entry points as C no-ops, so that a fake call pays ctypes' own cost
_FAKE_LIBCUDA = r"""
#include <stddef.h>
#include <stdint.h>
uint64_t zynml_fake_counts[3];  /* alloc, free, launch */
static uint64_t next_address = 0x7f0000000000ull;
int cuMemAllocAsync(uint64_t *ptr, size_t nbytes, void *stream) {
    zynml_fake_counts[0]++; *ptr = next_address; next_address += 1ull << 32; return 0; }
int cuMemFreeAsync(uint64_t ptr, void *stream) { zynml_fake_counts[1]++; return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                   void **extra) { zynml_fake_counts[2]++; return 0; }
int cuLaunchKernelEx(const void *config, void *f, void **params, void **extra) {
    zynml_fake_counts[2]++; return 0; }
"""


def _compiled_fake_libcuda():
    """The C no-ops above as a loaded library, or None without a C compiler."""
    import ctypes
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        return None
    with tempfile.TemporaryDirectory(prefix="zynml-fake-libcuda-") as name:
        folder = Path(name)
        (folder / "fake.c").write_text(_FAKE_LIBCUDA)
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o",
                               str(folder / "fake.so"), str(folder / "fake.c")],
                              capture_output=True)
        if done.returncode != 0:
            return None
        lib = ctypes.CDLL(str(folder / "fake.so"))  # stays mapped once the file goes
    counts = (ctypes.c_uint64 * 3).in_dll(lib, "zynml_fake_counts")
    return lib, counts


class _AnyName:
    """An enum of cuda-python's whose every member is its own name."""

    def __getattr__(self, name: str) -> str:
        return name


class FakeCuda:
    """cuda-python's `driver` module and libcuda's hot entry points, doing nothing."""

    def __init__(self):
        self.addresses = itertools.count(0x7F00_0000_0000, 1 << 32)
        ok = (0,)

        def value(v):
            return lambda *args: (0, v)

        names = types.SimpleNamespace
        self.driver = names(
            CUresult=names(CUDA_SUCCESS=0),
            CUdevice_attribute=names(
                CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR=9,
                CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR=0,
                CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT=132,
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=232448),
            CUmemPool_attribute=names(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD=0),
            CUfunction_attribute=names(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=0),
            CUstream=lambda v: v, CUdeviceptr=lambda v: v, cuuint64_t=lambda v: v,
            cuGetErrorName=value(b"CUDA_ERROR_UNKNOWN"),
            cuInit=lambda flags: ok, cuDeviceGetCount=value(1), cuDeviceGet=value(0),
            cuDevicePrimaryCtxRetain=value("context"), cuCtxSetCurrent=lambda c: ok,
            cuCtxGetCurrent=value(None),
            cuDeviceGetDefaultMemPool=value("pool"), cuMemPoolSetAttribute=lambda *a: ok,
            cuDeviceGetName=value(b"fake GPU"), cuDeviceTotalMem=value(80 << 30),
            cuDeviceGetAttribute=lambda attribute, handle: (0, attribute),
            cuModuleLoadData=value("module"), cuModuleGetFunction=value(1),
            cuFuncSetAttribute=lambda *a: ok,
            cuMemAllocAsync=lambda nbytes, stream: (0, next(self.addresses)),
            cuMemFreeAsync=lambda *a: ok, cuLaunchKernel=lambda *a: ok,
            cuMemcpyHtoDAsync=lambda *a: ok, cuMemcpyDtoHAsync=lambda *a: ok,
            cuMemcpyDtoDAsync=lambda *a: ok, cuMemsetD8Async=lambda *a: ok,
            cuStreamSynchronize=lambda *a: ok, cuStreamCreate=value("stream"),
            cuStreamDestroy=lambda *a: ok,
            CUstream_flags=names(CU_STREAM_DEFAULT=0, CU_STREAM_NON_BLOCKING=1),
            CUevent_flags=names(CU_EVENT_DEFAULT=0, CU_EVENT_DISABLE_TIMING=2),
            cuEventCreate=value("event"),
            CUpointer_attribute=_AnyName(), cuPointerGetAttribute=lambda *a: (1, None),
            cuEventRecord=lambda *a: ok, cuEventSynchronize=lambda *a: ok,
            cuEventElapsedTime=value(0.0), cuEventDestroy=lambda *a: ok,
            # TMA descriptors (the wgmma kernels' operands): 128 bytes of zeros
            cuuint32_t=lambda v: v, cuTensorMapEncodeTiled=value(names(opaque=[0] * 16)),
            CUtensorMapDataType=_AnyName(), CUtensorMapInterleave=_AnyName(),
            CUtensorMapSwizzle=_AnyName(), CUtensorMapL2promotion=_AnyName(),
            CUtensorMapFloatOOBfill=_AnyName())
        compiled = _compiled_fake_libcuda()
        if compiled is not None:
            self.lib, self._counts = compiled
            self.kind = "C no-ops through ctypes"
        else:
            self.lib = self._python_libcuda()
            self.kind = "Python no-ops (no C compiler: ctypes' cost not counted)"

    def _python_libcuda(self):
        counts, addresses = [0, 0, 0], self.addresses

        def cuMemAllocAsync(slot, nbytes, stream):
            counts[0] += 1
            slot._obj.value = next(addresses)  # slot: ctypes.byref(c_uint64)
            return 0

        def cuMemFreeAsync(ptr, stream):
            counts[1] += 1
            return 0

        def cuLaunchKernelEx(*args):
            counts[2] += 1
            return 0
        self._counts = counts
        return types.SimpleNamespace(cuMemAllocAsync=cuMemAllocAsync,
                                     cuMemFreeAsync=cuMemFreeAsync,
                                     cuLaunchKernelEx=cuLaunchKernelEx)

    @property
    def counts(self) -> dict[str, int]:
        return dict(zip(("alloc", "free", "launch"), self._counts))

    def install(self) -> None:
        from zynml.runtime.cuda import driver
        driver._DRIVER[:] = [self.driver]
        driver._initialized = False
        driver._devices.clear()
        driver._hot_calls = lambda: driver._HotCalls(self.lib)
