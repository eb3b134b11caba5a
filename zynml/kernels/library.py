"""Compiling and calling the library's kernels: one `Program` per (kernel, device,
options), compiled on first use and kept for the process; the on-disk cache keeps the
artifacts across processes, and each Program specializes per dtype (and per size where
a kernel's source does not declare the size dynamic with `?`).
"""
from __future__ import annotations

import threading
from typing import Any

from ..api import Program
from ..devices import resolve
from ..errors import ZynMLError
from ..frontend.library import library_names, library_source

_programs: dict[tuple, Program] = {}
_lock = threading.Lock()


def names() -> list[str]:
    """The kernels shipped in the package (zynml/kernels/src/NAME.zyn)."""
    return library_names("kernels")


def source_path(name: str):
    """The `.zyn` file of a library kernel, to read or to copy."""
    path = library_source("kernels", name)
    if not path.is_file():
        raise ZynMLError(f"the library has no kernel '{name}'; it has: {', '.join(names())}")
    return path


def program(name: str, device: str = "auto", **options: Any) -> Program:
    """The compiled Program of kernel `name` for `device` (cached per process).

    Size policy: IREE takes every size dynamic at no cost, so there one compile serves
    every shape; the native CUDA backend keeps its fast strategies for static sizes only
    (docs/language.md §4), so there a kernel compiles per shape except the sizes its
    source declares dynamic (`?rows`). Neither prints the automatic-dynamic note."""
    key = (name, device, tuple(sorted(options.items())))
    with _lock:
        prog = _programs.get(key)
        if prog is None:
            backend = resolve(device, options.get("backend"),
                              options.get("require_device", True)).backend
            options.setdefault("dynamic", backend == "iree")
            prog = _programs[key] = Program(source_path(name), device=device, **options)
    return prog


def device_of(values) -> str:
    """Where a call's inputs live: the CUDA device of the first GPU array among them,
    else "auto" (a GPU when present, as zynml.compile's default)."""
    from ..call_values import is_gpu_array
    for value in values:
        if is_gpu_array(value):
            ordinal = _cuda_ordinal(value)
            return f"cuda:{ordinal}"
    return "auto"


def _cuda_ordinal(value) -> int:
    device = getattr(value, "device", None)
    index = getattr(device, "index", None)  # torch
    if isinstance(index, int):
        return index
    ordinal = getattr(device, "ordinal", None)  # ZynML's DeviceArray
    if isinstance(ordinal, int):
        return ordinal
    dlpack = getattr(value, "__dlpack_device__", None)
    return int(dlpack()[1]) if callable(dlpack) else 0


def call(name: str, pipeline: str, args: dict[str, Any], device: str | None = None,
         **options: Any):
    """Run pipeline `pipeline` of kernel `name` on `args` (by parameter name)."""
    prog = program(name, device or device_of(args.values()), **options)
    return getattr(prog, pipeline)(**args)
