"""Compile MLIR text to an IREE vmfb by running the `iree-compile` executable.

Why a subprocess: the `mlir` Python bindings ZynML builds its IR with and IREE's
`iree.compiler` bindings cannot be loaded into one process (their nanobind symbols
clash), so this module never imports `iree.compiler`; it hands the printed MLIR to
`iree-compile` on stdin and reads the vmfb from stdout.

Compiling takes about a second, so results go through an ArtifactCache keyed by the
MLIR text, the compiler's `--version` output and the flags.
"""
from __future__ import annotations

import functools
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable

from ... import knobs
from ...errors import BackendError, ZynMLError
from ...cache import ArtifactCache, atomic_write_bytes
from .target import IreeTarget

__all__ = [
    "BackendError",
    "iree_compile_executable",
    "iree_compile_version",
    "compile_to_vmfb",
    "emit_vmfb_file",
]

log = logging.getLogger(__name__)

_OUTPUT_FLAGS = ("--output-format=vm-bytecode",)
_MESSAGE_HEAD_LINES = 20  # iree-compile's first lines hold the error; later ones dump IR


def _packaged_binary() -> Path | None:
    """The native `iree-compile` inside the installed iree-base-compiler wheel.

    The wheel's console script (what PATH finds) is a Python wrapper that starts an
    interpreter and imports iree.compiler before running this binary: 0.3 s per
    compile. `find_spec` locates the package without executing it (importing it next
    to `mlir` would crash).
    """
    try:
        spec = importlib.util.find_spec("iree.compiler")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        exe = Path(location) / "_mlir_libs" / ("iree-compile.exe" if os.name == "nt" else "iree-compile")
        if exe.is_file() and os.access(exe, os.X_OK):
            return exe
    return None


@functools.cache
def iree_compile_executable() -> str:
    """The path of `iree-compile`.

    Looked up in order: `$ZYNML_IREE_COMPILE`; the native binary of the installed
    iree-base-compiler package; `iree-compile` on PATH; next to `sys.executable`
    (a virtualenv's bin/ that is not on PATH).
    """
    override = knobs.IREE_COMPILE.get()
    if override is not None:
        found = shutil.which(override)
        if not found:
            raise BackendError(f"${knobs.IREE_COMPILE.name} names {str(override)!r}, which is "
                               "not an executable")
        return found
    packaged = _packaged_binary()
    if packaged is not None:
        return str(packaged)
    on_path = shutil.which("iree-compile")
    if on_path:
        return on_path
    beside = shutil.which("iree-compile", path=str(Path(sys.executable).parent))
    if beside:
        return beside
    raise BackendError(
        "cannot find the `iree-compile` executable: install it with "
        f"`pip install iree-base-compiler==3.13.0`, or set ${knobs.IREE_COMPILE.name} to its path"
    )


@functools.cache
def iree_compile_version() -> str:
    """`iree-compile --version`'s output; run once per process (it is part of cache keys)."""
    exe = iree_compile_executable()
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BackendError(f"`{exe} --version` failed: {_summarize(proc.stderr)}", proc.stderr)
    return proc.stdout.strip()


def _summarize(stderr: str) -> str:
    """The first lines of a tool's stderr (where the error is), noting how many were cut."""
    lines = stderr.strip().splitlines()
    if len(lines) <= _MESSAGE_HEAD_LINES:
        return "\n".join(lines) or "(no output)"
    cut = len(lines) - _MESSAGE_HEAD_LINES
    return "\n".join(lines[:_MESSAGE_HEAD_LINES] + [f"... ({cut} more lines in BackendError.stderr)"])


def _flags(target: IreeTarget, extra_flags: Iterable[str]) -> tuple[str, ...]:
    extra = tuple(extra_flags)
    if isinstance(extra_flags, str) or not all(isinstance(f, str) for f in extra):
        raise TypeError(f"extra_flags must be a sequence of strings, not {extra_flags!r}")
    return _OUTPUT_FLAGS + target.flags + extra


def compile_to_vmfb(mlir_text: str, target: IreeTarget, cache: ArtifactCache | None = None,
                    extra_flags: Iterable[str] = ()) -> bytes:
    """The vmfb (IREE VM bytecode) of `mlir_text` compiled for `target`.

    With a `cache`, an identical earlier compile (same text, compiler and flags) is
    reused without running `iree-compile`. Raises BackendError with the compiler's
    diagnostics when it rejects the module.
    """
    flags = _flags(target, extra_flags)
    key = None
    if cache is not None:
        key = cache.key(mlir_text, iree_compile_version(), *flags)
        cached = cache.get(key)
        if cached is not None:
            return cached
    exe = iree_compile_executable()
    try:
        proc = subprocess.run([exe, "-", *flags, "-o", "-"], input=mlir_text.encode("utf-8"),
                              capture_output=True)
    except OSError as e:
        raise BackendError(f"cannot run iree-compile ({exe}): {e}") from e
    stderr = proc.stderr.decode("utf-8", errors="replace")
    if proc.returncode != 0 or not proc.stdout:
        raise BackendError(f"iree-compile failed: {_summarize(stderr)}", stderr)
    if stderr.strip():
        # Warnings on success matter (e.g. "changed public function signatures").
        log.warning("iree-compile: %s", _summarize(stderr))
    if cache is not None:
        cache.put(key, proc.stdout)
    return proc.stdout


def emit_vmfb_file(mlir_text: str, target: IreeTarget, out_path: str | os.PathLike[str],
                   cache: ArtifactCache | None = None, extra_flags: Iterable[str] = ()) -> Path:
    """Compile `mlir_text` and write the vmfb to `out_path` atomically; returns the path.

    Nothing is written when compilation fails, and an existing file at `out_path` is
    replaced only by a complete one.
    """
    data = compile_to_vmfb(mlir_text, target, cache=cache, extra_flags=extra_flags)
    out = Path(out_path)
    atomic_write_bytes(out, data)
    return out
