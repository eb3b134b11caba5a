"""Run compiled vmfb modules with the IREE runtime, taking and returning numpy arrays.

Why not `iree.runtime.SystemContext`'s function objects: they return DeviceArrays,
pass numpy scalars where the function wants a scalar as 0-d buffers (IREE then fails
with "variant ... is not a value type"), pass a Python int to an f32 parameter as raw
bits (a wrong answer, no error), and spend Python time on DeviceArray wrappers.
`IreeFunction` reads the function's signature once (its `iree.abi.declaration`),
converts each argument as its parameter needs, calls the VM directly and maps results
straight into numpy arrays. Measured on a 2-core x86 machine, a 1024-element f32 add,
numpy in and out: about 25-35 µs a call on local-task (local-sync: 16-20 µs), against
30-37 µs (21-30 µs) for IREE's own function objects plus np.asarray; most of what is
left is IREE's invoke (local-task wakes its worker threads) and two buffer copies in.

Large inputs (64 KiB and up, CPU drivers) are not copied into fresh IREE buffers: that
costs more than the kernel (a 32 MiB f32 `x + x`: 44 ms a call, 33 of them page faults of
the fresh input buffer). An input the compiler marked read-only (the function's
reflection, zynml/backend/iree/read_only.py) is imported as it is when aligned as the
kernels assume (~4-5 ms, the kernel time); others are copied into reused, 64-byte
aligned staging buffers that IREE imports through DLPack (~10 ms a call), or, with
IreeModule(..., borrow_inputs=True), imported as they are when aligned. IreeFunction's
docstring says why.

The IREE instance and device of a driver are created once per process (creating a
local-task device starts a thread pool; a GPU device, a driver context) and shared by
every IreeModule on that driver.
"""
from __future__ import annotations

import math
import os
import re
import threading
import weakref
from pathlib import Path
from typing import Any, Callable

import ml_dtypes
import numpy as np
import iree.runtime as ireert
from iree.runtime.dtypes import map_dtype_to_hal_element_type

from .. import knobs
from ..errors import BackendError

__all__ = ["DEFAULT_DRIVER", "runtime_config", "IreeModule", "IreeFunction"]

DEFAULT_DRIVER = "local-task"

_configs: dict[str, ireert.Config] = {}
_configs_lock = threading.Lock()


def runtime_config(driver: str = DEFAULT_DRIVER) -> ireert.Config:
    """The process-wide IREE VM instance and HAL device of `driver`, created on first use."""
    config = _configs.get(driver)
    if config is not None:
        return config
    with _configs_lock:
        if driver not in _configs:
            threads = knobs.CPU_THREADS.get()
            if threads and driver == "local-task":  # flags are read when the device is made
                ireert.flags.parse_flags(f"--task_topology_max_group_count={threads}")
            try:
                _configs[driver] = ireert.Config(driver)
            except Exception as e:  # IREE raises ValueError/RuntimeError with its status text
                raise BackendError(f"cannot create an IREE device for driver {driver!r}: {e}") from e
        return _configs[driver]


# --------------------------------------------------------------------- signatures

# MLIR element types as numpy dtypes (signless integers are read as signed).
_MLIR_DTYPES = {
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "index": np.int64,
    "si8": np.int8, "si16": np.int16, "si32": np.int32, "si64": np.int64,
    "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64,
}
_TENSOR_RE = re.compile(r"tensor<(?:[0-9?]+x)*([a-z0-9]+)>")


class _Param:
    """One parameter or result: a tensor or a scalar, and its numpy dtype (None: unknown)."""

    __slots__ = ("is_tensor", "dtype")

    def __init__(self, mlir_type: str):
        tensor = _TENSOR_RE.fullmatch(mlir_type)
        self.is_tensor = tensor is not None or mlir_type.startswith(("tensor<", "!hal.buffer"))
        element = tensor.group(1) if tensor else mlir_type
        dtype = _MLIR_DTYPES.get(element)
        self.dtype = np.dtype(dtype) if dtype is not None else None


def _split_top_level(text: str) -> list[str]:
    """`text` split at commas that are not inside <>, () or []."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _parse_declaration(decl: str) -> tuple[list[_Param], list[_Param]] | None:
    """Parameters and results of `sync func @f(%input0: tensor<3xf32>, ...) -> (...)`.

    None when the text is not of that form (then arguments are converted by value).
    """
    m = re.match(r"\s*(?:sync\s+)?func\s+@[^(]*\((.*?)\)\s*(?:->\s*(.*))?$", decl, re.S)
    if m is None:
        return None
    results = (m.group(2) or "").strip()
    if results.startswith("(") and results.endswith(")"):
        results = results[1:-1]

    def types(text: str) -> list[_Param]:
        return [_Param(item.split(":", 1)[-1].strip()) for item in _split_top_level(text)]

    return types(m.group(1)), types(results)


# --------------------------------------------------------------------- conversions

_HOST_VISIBLE = int(ireert.MemoryType.HOST_VISIBLE)
_DEVICE_LOCAL = ireert.MemoryType.DEVICE_LOCAL
_USAGE_DEFAULT = ireert.BufferUsage.DEFAULT
_MAPPING_SCOPED = int(ireert.BufferUsage.MAPPING_SCOPED)
_IMPORT_MEMORY = int(ireert.MemoryType.DEVICE_LOCAL | ireert.MemoryType.HOST_VISIBLE)
_IMPORT_USAGE = int(ireert.BufferUsage.DEFAULT)
_ELEMENT_TYPES: dict[np.dtype, Any] = {}

# Drivers whose buffers are host memory: their inputs can be imported instead of copied.
_HOST_DRIVERS = frozenset({"local-task", "local-sync"})
# IREE's CPU kernels assume 64-byte aligned buffers unless compiled with
# --iree-stream-resource-min-offset-alignment: an imported array at 16 mod 64 (where
# malloc puts large numpy arrays) crashes the process (aligned vector loads; seen with a
# softmax), it does not fail. DLPack imports check this alignment (IREE's heap buffers
# want 64) and tie the array's life to the IREE buffer's; HalAllocator.
# import_host_allocation takes any address but ties it to the Python HalBuffer object
# only (once that is collected the array may be freed under IREE): used only for
# parameters IREE neither keeps nor returns (see IreeFunction).
_ALIGNMENT = 64
# Reflection entries of zynml/backend/iree/read_only.py (not imported: the runtime needs
# only numpy and iree.runtime)
_READ_ONLY_KEY = "zynml.read_only"
_ALIGNMENT_KEY = "zynml.binding_alignment"
# Inputs of at least this size are copied into a reused staging buffer and imported;
# smaller ones into a fresh IREE buffer (allocate_buffer_copy: ~1 µs at 4 KiB, while at
# 32 MiB it costs 27-35 ms, nearly all of it page faults of the fresh allocation).
_STAGING_MIN_BYTES = 1 << 16
_POOL_MAX = 2  # idle staging buffers kept per parameter (more for concurrent calls)
# Copies of at least this size are split over threads (numpy copies without the GIL):
# 32 MiB f32 on the 2-core VM, one thread 6.7 ms, two 3.7 ms.
_PARALLEL_COPY_MIN_BYTES = 4 << 20
_COPY_THREADS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                    else os.cpu_count() or 1)
_copy_executor = None
_copy_executor_lock = threading.Lock()


# Dtypes that numpy exports through no DLPack code (ml_dtypes' bfloat16): imported as
# unsigned integers of their size, then viewed with their element type.
_AS_BITS = {np.dtype(ml_dtypes.bfloat16): np.dtype(np.uint16)}


def _element_type(dtype: np.dtype):
    et = _ELEMENT_TYPES.get(dtype)
    if et is None:
        et = map_dtype_to_hal_element_type(dtype)
        if et is None:
            raise TypeError(f"IREE has no element type for numpy dtype {dtype}")
        _ELEMENT_TYPES[dtype] = et
    return et


def _import_view(device, array: np.ndarray):
    """`array` imported through DLPack as a buffer view of its element type, no copy."""
    bits = _AS_BITS.get(array.dtype)
    if bits is None:
        return device.from_dlpack_capsule(array.__dlpack__())
    view = device.from_dlpack_capsule(array.view(bits).__dlpack__())  # keeps `array` alive
    return ireert.HalBufferView(view.get_buffer(), view.shape, _element_type(array.dtype))


def _aligned_empty(nbytes: int) -> np.ndarray:
    """An uninitialised uint8 array of `nbytes` whose data is _ALIGNMENT-aligned."""
    raw = np.empty(nbytes + _ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % _ALIGNMENT
    return raw[start:start + nbytes]


def _copy(dst: np.ndarray, src: np.ndarray) -> None:
    """np.copyto(dst, src), split along the first axis over threads when it is large."""
    parts = min(_COPY_THREADS, dst.shape[0] if dst.ndim else 1)
    if parts < 2 or dst.nbytes < _PARALLEL_COPY_MIN_BYTES:
        np.copyto(dst, src)
        return
    global _copy_executor
    if _copy_executor is None:
        with _copy_executor_lock:
            if _copy_executor is None:
                from concurrent.futures import ThreadPoolExecutor
                _copy_executor = ThreadPoolExecutor(_COPY_THREADS - 1, "zynml-copy")
    bounds = [dst.shape[0] * i // parts for i in range(parts + 1)]
    futures = [_copy_executor.submit(np.copyto, dst[a:b], src[a:b])
               for a, b in zip(bounds[1:-1], bounds[2:])]
    np.copyto(dst[:bounds[1]], src[:bounds[1]])
    for f in futures:
        f.result()


_DLPACK_OK: dict[np.dtype, bool] = {}


def _dlpack_imports(device, dtype: np.dtype) -> bool:
    """Whether DLPack imports `dtype` arrays as the element type allocate_buffer_copy uses."""
    ok = _DLPACK_OK.get(dtype)
    if ok is None:
        try:
            probe = _aligned_empty(dtype.itemsize).view(dtype)
            view = _import_view(device, probe)
            ok = view.element_type == int(_element_type(dtype))
        except Exception:  # TypeError (no element type), BufferError, IREE errors
            ok = False
        _DLPACK_OK[dtype] = ok
    return ok


# What a tensor parameter leaves behind in a call, for IreeFunction to settle after it.
class _Staged:
    """A staging buffer lent to IREE: back to `param`'s pool if IREE let go of it."""

    __slots__ = ("param", "buffer", "view_ref", "source")

    def __init__(self, param, buffer, view_ref, source):
        self.param, self.buffer, self.view_ref = param, buffer, view_ref
        self.source = source  # the caller's array, when this call probes `param`


class _Borrowed:
    """A caller's array imported as is: results that share its memory must be copied."""

    __slots__ = ("array", "keep")

    def __init__(self, array, keep=None):
        self.array = array
        self.keep = keep  # an import that must outlive the call (see _borrowed_view)


class _TensorParam:
    """Pushes an array argument as a buffer view; scalars and lists become `dtype` arrays.

    Small arrays are copied into a fresh IREE buffer. On CPU drivers large ones are copied
    into one of this parameter's staging buffers (64-byte aligned, reused: no page faults
    after the first call) which IREE imports; with `borrow`, an aligned, C-contiguous,
    writeable, native-endian array is imported as is, once a first call has shown that the
    function leaves this parameter's buffer alone (see IreeFunction).
    """

    __slots__ = ("device", "dtype", "host", "borrow", "alignment", "writes", "pool",
                 "_allocate")

    def __init__(self, device, dtype: np.dtype | None, host: bool, borrow: bool,
                 alignment: int = _ALIGNMENT):
        self.device, self.dtype, self.host, self.borrow = device, dtype, host, borrow
        self.alignment = alignment  # what the kernels assume of an imported buffer
        self.writes: bool | None = None  # does IREE write/keep this input? None: not probed
        self.pool: list[np.ndarray] = []
        self._allocate = device.allocator.allocate_buffer_copy

    def pack(self, inputs, x):
        if not isinstance(x, np.ndarray):
            x = np.asarray(x, dtype=self.dtype)
        if self.host and x.nbytes >= _STAGING_MIN_BYTES:
            dtype = x.dtype if x.dtype.isnative else x.dtype.newbyteorder("=")
            if _dlpack_imports(self.device, dtype):
                return self._import(inputs, x, dtype)
        if not x.flags.c_contiguous or not x.dtype.isnative:  # IREE wants dense, native-endian bytes
            x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
        # (memory_type, allowed_usage, device, buffer, element_type), positional: faster.
        inputs.push_ref(self._allocate(_DEVICE_LOCAL, _USAGE_DEFAULT, self.device, x,
                                       _element_type(x.dtype)).ref)
        return None

    def _import(self, inputs, x: np.ndarray, dtype: np.dtype):
        """x (large) imported: borrowed as it is, or copied into a staging buffer of `dtype`."""
        if (self.borrow and self.writes is False and x.flags.c_contiguous
                and x.dtype.isnative and x.ctypes.data % self.alignment == 0):
            try:
                view, keep = self._borrowed_view(x)
            except (BufferError, ValueError, RuntimeError, TypeError):
                pass  # an export numpy or IREE refuses: staged below
            else:
                inputs.push_ref(view.ref)
                return _Borrowed(x, keep)
        nbytes = x.nbytes
        try:
            buffer = self.pool.pop()  # atomic: concurrent calls each get their own
        except IndexError:
            buffer = None
        if buffer is None or buffer.nbytes != nbytes:
            buffer = _aligned_empty(nbytes)
        staged = buffer.view(dtype).reshape(x.shape)
        _copy(staged, x)  # one pass: also makes x contiguous and native-endian
        inputs.push_ref(_import_view(self.device, staged).ref)
        probe = x if self.borrow and self.writes is None else None
        return _Staged(self, buffer, weakref.ref(staged), probe)

    def _borrowed_view(self, x: np.ndarray):
        """(buffer view of x's own memory, what must live until the call has returned).

        DLPack where x is 64-byte aligned (it ties x's life to IREE's buffer); else, for
        kernels that assume less (`alignment`), import_host_allocation, which accepts any
        address but ties x's life to the Python HalBuffer only: held until the call has
        returned, which suffices for a parameter IREE neither keeps nor returns."""
        if x.ctypes.data % _ALIGNMENT == 0 and x.flags.writeable:
            return _import_view(self.device, x), None
        bits = x.view(_AS_BITS.get(x.dtype, x.dtype)).reshape(-1).view(np.uint8)
        buffer = self.device.allocator.import_host_allocation(bits, _IMPORT_MEMORY, _IMPORT_USAGE)
        return ireert.HalBufferView(buffer, x.shape, _element_type(x.dtype)), buffer


def _scalar_packer(dtype: np.dtype) -> Callable[[Any, Any], None]:
    """Pushes a scalar argument (Python or numpy scalar, 0-d array) as the VM value it needs."""
    if dtype.itemsize == 2 and (dtype.kind == "f" or dtype in _AS_BITS):
        def pack(inputs, x) -> None:  # f16, bf16: the VM takes their bits (push_float: 0)
            inputs.push_int(int(np.asarray(x, dtype).view(np.uint16)))
    elif dtype.kind == "f":
        def pack(inputs, x) -> None:
            inputs.push_float(float(x))
    else:
        def pack(inputs, x) -> None:
            inputs.push_int(int(x))
    return pack


def _dynamic_packer(param: _TensorParam) -> Callable[[Any, Any], Any]:
    """For parameters of unknown type: Python scalars as values, everything else as a buffer."""
    as_tensor = param.pack

    def pack(inputs, x):
        if isinstance(x, float):
            inputs.push_float(x)
        elif isinstance(x, int):  # bool too
            inputs.push_int(int(x))
        else:
            return as_tensor(inputs, x)
        return None

    return pack


def _is_mappable(view) -> bool:
    """Whether the host can read `view`'s memory in place (CPU drivers: yes; GPUs: no)."""
    buffer = view.get_buffer()
    return (buffer.memory_type() & _HOST_VISIBLE == _HOST_VISIBLE
            and buffer.allowed_usage() & _MAPPING_SCOPED == _MAPPING_SCOPED)


def _mapped_array(view, dtype: np.dtype | None) -> np.ndarray:
    """`view`'s memory as an array, without a copy; its base keeps the mapping alive.

    np.frombuffer on the mapping costs 2 µs where MappedMemory.asarray costs 5.
    """
    if dtype is None:
        dtype = ireert.HalElementType.map_to_dtype(view.element_type)
    shape = view.shape
    return np.frombuffer(view.map(), dtype, count=math.prod(shape)).reshape(shape)


# --------------------------------------------------------------------- modules


class IreeFunction:
    """A callable for one function of an IreeModule: numpy in, list of numpy arrays out.

    Arguments: numpy arrays (any layout and byte order), numpy scalars, 0-d arrays and
    Python numbers; a scalar given for a tensor parameter becomes an array of the
    parameter's dtype. Dtypes and shapes are checked by IREE itself. No result shares
    memory with an argument, and arguments are never modified (but see borrow_inputs).

    How arrays get in: below 64 KiB, copied into a fresh IREE buffer. On CPU drivers,
    larger ones are copied (one pass, which also fixes layout and byte order) into a
    64-byte aligned staging buffer of the parameter, which IREE imports without a copy;
    the staging buffer is reused by the next call unless IREE kept it (a result is a view
    of it: it then stays that result's). Copying into warm memory is what saves the time:
    a fresh 32 MiB buffer costs 25-35 ms (page faults) on a 2-core VM, the copy 4-7 ms.
    Why not import the caller's array itself by default: IREE 3.13 writes into input
    buffers in place when the program updates an argument (`tensor.insert_slice` or
    `tensor.insert` into it, even as an intermediate), and IREE's kernels need 64-byte
    aligned data, which numpy's large arrays are not (malloc gives 16 mod 64). With
    IreeModule(..., borrow_inputs=True), aligned, C-contiguous, writeable arrays are
    imported as they are, for parameters that a first (staged) call showed IREE neither
    writes nor keeps; results that would share memory with such an array are copied.
    That first-call check compares bytes, so it cannot see a write of the bytes already
    there: borrow only for functions that do not update their arguments. Parameters the
    compiler proved read-only (reflection `zynml.read_only`: only read by the program,
    never returned) are borrowed that way by default, at the alignment the kernels were
    compiled for (`zynml.binding_alignment`: 16 on ZynML's CPU target, where numpy's
    large arrays are 16 mod 64), the first-call check kept as a second guard.

    Results: always a list. On CPU drivers each array is a zero-copy, read-only view of
    that call's own output buffer (later calls never overwrite it); on GPUs, a copy.
    Signless integers come back as signed dtypes, scalar results as 0-d arrays.
    """

    __slots__ = ("name", "signature", "_context", "_vm_function", "_device", "_host",
                 "_borrow", "_params", "_packers", "_dynamic", "_result_dtypes",
                 "_mappable", "__weakref__")

    def __init__(self, module: "IreeModule", vm_function):
        self.name = vm_function.name
        self.signature: str | None = vm_function.reflection.get("iree.abi.declaration")
        self._context = module._context
        self._vm_function = vm_function
        self._device = module._config.device
        self._host = module.driver in _HOST_DRIVERS
        self._borrow = module.borrow_inputs
        self._mappable: bool | None = None  # learnt from the first buffer returned
        self._params: list[_TensorParam] = []  # every tensor parameter, for release_staging
        self._dynamic: list[Callable[[Any, Any], Any]] = []  # packers when unparsed, by position
        parsed = _parse_declaration(self.signature) if self.signature else None
        # what the compiler told (zynml/backend/iree/read_only.py): parameters IREE only
        # reads, imported without a copy where their arrays are aligned enough
        reflection = vm_function.reflection
        read_only = {int(i) for i in reflection.get(_READ_ONLY_KEY, "").split()}
        alignment = int(reflection.get(_ALIGNMENT_KEY, _ALIGNMENT))
        if parsed is None:
            self._packers = None
            self._result_dtypes = None
        else:
            params, results = parsed
            self._packers = tuple(
                self._tensor_param(p.dtype, i in read_only, alignment).pack if p.is_tensor
                else _scalar_packer(p.dtype) if p.dtype is not None
                else _dynamic_packer(self._tensor_param(None))
                for i, p in enumerate(params))
            self._result_dtypes = tuple(r.dtype for r in results)

    def _tensor_param(self, dtype: np.dtype | None, read_only: bool = False,
                      alignment: int = _ALIGNMENT) -> _TensorParam:
        param = _TensorParam(self._device, dtype, self._host, self._borrow or read_only,
                             max(alignment, 1) if read_only else _ALIGNMENT)
        self._params.append(param)
        return param

    def __repr__(self) -> str:
        return f"<IreeFunction {self.signature or self.name}>"

    def release_staging(self) -> None:
        """Frees the idle staging buffers (they are made again by the next large call)."""
        for param in self._params:
            param.pool.clear()

    def __call__(self, *args) -> list[np.ndarray]:
        packers = self._packers
        if packers is None:
            while len(self._dynamic) < len(args):
                self._dynamic.append(_dynamic_packer(self._tensor_param(None)))
            packers = self._dynamic[:len(args)]
        elif len(args) != len(packers):
            raise TypeError(f"{self.name}() takes {len(packers)} arguments but {len(args)} were given")
        inputs = ireert.VmVariantList(len(args))
        held = None  # what large inputs leave to settle after the call
        try:
            for pack, x in zip(packers, args):
                h = pack(inputs, x)
                if h is not None:
                    if held is None:
                        held = [h]
                    else:
                        held.append(h)
            outputs = ireert.VmVariantList(len(self._result_dtypes) if self._result_dtypes else 1)
            self._context.invoke(self._vm_function, inputs, outputs)
        except BaseException as err:
            if held is not None:
                inputs = None  # drop IREE's references before looking at who holds what
                _settle(held, None)
            if isinstance(err, (RuntimeError, IndexError, ValueError)) and \
                    str(err).startswith("Error invoking function"):
                raise BackendError(_invoke_failure(self.name, str(err)), str(err)) from None
            raise
        n = len(outputs)
        dtypes = self._result_dtypes
        if dtypes is None or len(dtypes) != n:
            dtypes = (None,) * n
        results = [self._to_numpy(outputs.get_variant(i), dtypes[i]) for i in range(n)]
        if held is not None:
            inputs = outputs = None  # now only the results (or module state) hold buffers
            _settle(held, results)
        return results

    def _to_numpy(self, value, dtype: np.dtype | None) -> np.ndarray:
        """A VM result as a numpy array: buffers mapped (CPU) or copied (GPU), scalars 0-d."""
        if not isinstance(value, ireert.VmRef):
            return np.asarray(value, dtype=dtype)
        view = value.deref(ireert.HalBufferView)
        if self._mappable is None:
            self._mappable = _is_mappable(view)
        if self._mappable:
            return _mapped_array(view, dtype)
        return ireert.DeviceArray(self._device, view).to_host()


# IREE's status codes a run can end with, and what they mean to the user
_STATUS_MEANING = {
    "RESOURCE_EXHAUSTED": "out of memory: an array of the program is too large for this "
                          "machine",
    "OUT_OF_RANGE": "a size is negative or too large to allocate",
}


def _invoke_failure(name: str, text: str) -> str:
    """IREE's `Error invoking function: FILE:LINE: STATUS; detail; while ...` as one line
    that says what went wrong first and keeps IREE's words after it."""
    match = re.search(r"\b([A-Z][A-Z_]{3,}); ([^;\n]*)", text)
    if match is None:
        return f"running '{name}' failed in the IREE runtime: {text.splitlines()[0]}"
    status, detail = match.groups()
    meaning = _STATUS_MEANING.get(status, "the IREE runtime failed")
    return f"running '{name}' failed: {meaning} (IREE: {status}; {detail})"


def _same_bytes(a: np.ndarray, b: np.ndarray, chunk: int = 1 << 20) -> bool:
    """Whether two uint8 vectors are equal (in chunks: no temporary as large as them)."""
    return all(np.array_equal(a[i:i + chunk], b[i:i + chunk]) for i in range(0, a.size, chunk))


def _settle(held: list, results: list | None) -> None:
    """After a call: staging buffers IREE let go of go back to their pools, probes are
    judged, and results sharing memory with a borrowed array are copied."""
    for h in held:
        if type(h) is _Staged:
            param = h.param
            # DLPack ties the staged view's life to IREE's buffer: alive means IREE still
            # holds it (a result is a view of it, or the module stored it).
            kept = h.view_ref() is not None
            source = h.source
            if source is not None and results is not None and param.writes is None:
                if source.flags.c_contiguous and source.dtype.isnative:
                    param.writes = kept or not _same_bytes(h.buffer, source.reshape(-1).view(np.uint8))
            if not kept and len(param.pool) < _POOL_MAX:
                param.pool.append(h.buffer)
        elif results is not None:
            array = h.array
            for i, r in enumerate(results):
                if np.may_share_memory(r, array):
                    results[i] = r.copy()


class IreeModule:
    """A vmfb loaded into its own VM context on the shared device of `driver`."""

    def __init__(self, vmfb: bytes, driver: str = DEFAULT_DRIVER, *, borrow_inputs: bool = False):
        """borrow_inputs: import suitable large arrays without a copy (see IreeFunction)."""
        self.driver = driver
        self.borrow_inputs = bool(borrow_inputs)
        self._config = runtime_config(driver)
        try:
            # copy_buffer: the flatbuffer must be aligned, and `vmfb` may be freed later.
            self._vm_module = ireert.VmModule.copy_buffer(self._config.vm_instance, vmfb)
            self._context = ireert.VmContext(
                self._config.vm_instance, [*self._config.default_vm_modules, self._vm_module])
        except (RuntimeError, ValueError) as e:
            raise BackendError(f"cannot load the vmfb on driver {driver!r}: {e}") from e
        self._functions: dict[str, IreeFunction] = {}

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], driver: str = DEFAULT_DRIVER, *,
                  borrow_inputs: bool = False) -> "IreeModule":
        return cls(Path(path).read_bytes(), driver, borrow_inputs=borrow_inputs)

    def __repr__(self) -> str:
        return f"<IreeModule {self._vm_module.name!r} on {self.driver!r}: {', '.join(self.function_names)}>"

    @property
    def function_names(self) -> list[str]:
        """The module's exported functions (not IREE's internal `__init` and the like)."""
        return [n for n in self._vm_module.function_names if not n.startswith("__")]

    def function(self, name: str) -> IreeFunction:
        """The callable of the exported function `name` (created once, then reused)."""
        fn = self._functions.get(name)
        if fn is None:
            vm_function = self._vm_module.lookup_function(name)
            if vm_function is None or name.startswith("__"):
                raise ValueError(f"no function {name!r} in the module; it has: "
                                 f"{', '.join(self.function_names) or '(none)'}")
            fn = self._functions[name] = IreeFunction(self, vm_function)
        return fn
