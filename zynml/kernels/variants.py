"""Library kernels with constants written in: a source of zynml/kernels/src whose
constants the compiler must see as constants (attention's GQA group `h / 1` and its
scale `/ sqrt(d)`: cir-raise-attention only raises a body whose group and scale are
numbers) is compiled with those constants replaced, one Program per (kernel,
replacements, device), kept for the process (the on-disk cache keeps the artifacts).

Sizes are pinned static (`dynamic=False`): the attention sources read K at `h / group`,
which cir-raise-attention raises only with static heads, and the other kernels keep
their fastest forms at static sizes; a new shape compiles once and is then a cache hit.
Run-time integers such as a KV cache's `cache_start` are not sizes and never recompile.
"""
from __future__ import annotations

import threading

from ..api import Program
from ..errors import ZynMLError
from .library import source_path

_programs: dict[tuple, Program] = {}
_lock = threading.Lock()


def variant_source(name: str, replacements: tuple[tuple[str, str], ...]) -> str:
    """The text of kernel `name` with each `old` replaced by `new` (every `old` must occur:
    a kernel edited out of step with its caller fails loudly, not silently slow)."""
    text = source_path(name).read_text()
    for old, new in replacements:
        if old not in text:
            raise ZynMLError(f"kernel '{name}' has no '{old}' to replace")
        text = text.replace(old, new)
    return text


def variant(name: str, replacements: tuple[tuple[str, str], ...], device: str,
            params: str = "") -> Program:
    """The Program of kernel `name` with `replacements`, for `device`; `params`: CUDA
    strategy parameters (zynml.compile's)."""
    key = (name, replacements, device, params)
    with _lock:
        prog = _programs.get(key)
        if prog is None:
            prog = _programs[key] = Program(variant_source(name, replacements), device=device,
                                            params=params, dynamic=False)
    return prog
