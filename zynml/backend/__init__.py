"""Backends: compile the linalg-level MLIR that ZynML produces into runnable artifacts.

Today that is IREE: `iree_compile` runs the `iree-compile` executable (never the
`iree.compiler` Python package, which cannot share a process with `mlir`), `targets`
holds each target's flags and runtime driver, and `cache` keeps compiled vmfbs on disk.
"""
from .cache import ArtifactCache, atomic_write_bytes, default_cache_dir
from .iree_compile import (BackendError, compile_to_vmfb, emit_vmfb_file, iree_compile_executable,
                           iree_compile_version)
from .targets import CPU, IREE_TARGETS, IreeTarget, get_target

__all__ = [
    "ArtifactCache", "atomic_write_bytes", "default_cache_dir",
    "BackendError", "compile_to_vmfb", "emit_vmfb_file", "iree_compile_executable",
    "iree_compile_version",
    "CPU", "IREE_TARGETS", "IreeTarget", "get_target",
]
