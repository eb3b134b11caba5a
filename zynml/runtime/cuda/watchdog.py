"""ZYNML_CUDA_WATCHDOG: a native CUDA call that waits for its own kernels.

Kernels run asynchronously, so a faulting kernel is reported by some later call and one
that never ends hangs the process in its next wait. With the knob above 0, the
executor wraps each call's `run` (the fast path's and the interpreter's) so that it then
waits for the device, at most that many seconds, and a fault or a hang becomes a
CudaError naming the call's kernels and strategies (Device.finish_within)."""
from __future__ import annotations

from typing import Any, Callable

from .artifact import launches

__all__ = ["watched"]


def watched(run: Callable[[Any], Any], device, plan: dict, seconds: float):
    """`run` (inputs -> outputs) followed by a wait of at most `seconds` for the device."""
    kernels = ", ".join(f"{step['kernel']} ({step.get('strategy', 'kernel')})"
                        for step in launches(plan["body"])) or "no kernel"

    def run_and_wait(inputs):
        results = run(inputs)
        device.finish_within(seconds, f"the kernels of this call: {kernels}")
        return results
    return run_and_wait
