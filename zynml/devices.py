"""Device names, what is present, and which backend runs a device.

    parse_device("cuda:1")          -> ("cuda", 1)
    compute_devices()               -> [{"id": "cuda:0", "type": "gpu", "name": ..., ...},
                                        {"id": "cpu", "type": "cpu", "name": ..., "cores": 16}]
    resolve("auto")                 -> Placement("cuda", 0, "native") when a GPU is present,
                                       else Placement("cpu", 0, "iree")

Backends: "native" is ZynML's own CUDA path (zynml/backend/cuda, zynml/runtime/cuda);
"iree" is IREE for every device. The default for a device is the fastest backend for it.
"interpreter" is a device of its own, always present: the `cir` reference interpreter
(zynml/interpreter), which runs a program as written, slowly, checking every index.
"""
from __future__ import annotations

import logging
import os
import platform
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .errors import ZynMLError

__all__ = ["DEVICE_KINDS", "BACKENDS", "parse_device", "Placement", "resolve",
           "compute_devices", "DeviceError"]

log = logging.getLogger(__name__)

# device kind -> backends that can run it, the default first.
DEVICE_KINDS: dict[str, tuple[str, ...]] = {
    "cpu": ("iree",),
    "cuda": ("native", "iree"),
    "vulkan": ("iree",),
    "rocm": ("iree",),
    "metal": ("iree",),
    "interpreter": ("interpreter",),
}
BACKENDS = ("native", "iree", "interpreter")
_HOST_KINDS = ("cpu", "interpreter")  # always present, no device number


class DeviceError(ZynMLError, ValueError):
    """A device or backend name that is malformed, unknown, or not present (a ValueError
    too, as it always was; a ZynMLError, as every user mistake is)."""


def parse_device(name: str) -> tuple[str, int]:
    """"cpu" -> ("cpu", 0); "cuda" or "cuda:0" -> ("cuda", 0); "auto" -> ("auto", 0)."""
    if not isinstance(name, str):
        shown = repr(name) if isinstance(name, (int, float, type(None))) else \
            type(name).__name__  # not the repr of a large array
        raise DeviceError(f"a device is named by a string such as 'cuda:0', not {shown}")
    match = re.fullmatch(r"\s*([a-z]+)(?::(\d+))?\s*", name)
    if not match or (match.group(1) not in DEVICE_KINDS and match.group(1) != "auto"):
        raise DeviceError(f"unknown device '{name}'; devices are "
                          "cpu, cuda:N, vulkan:N, rocm:N, metal:N, interpreter and auto")
    kind, ordinal = match.group(1), int(match.group(2) or 0)
    if kind in _HOST_KINDS + ("auto",) and match.group(2) not in (None, "0"):
        raise DeviceError(f"'{kind}' takes no device number")
    return kind, ordinal


@dataclass(frozen=True)
class Placement:
    """Where a program runs: device kind and number, and the backend that runs it."""
    kind: str
    ordinal: int
    backend: str

    @property
    def device(self) -> str:
        return self.kind if self.kind in _HOST_KINDS else f"{self.kind}:{self.ordinal}"


def resolve(device: str = "auto", backend: str | None = None,
            require_present: bool = True) -> Placement:
    """The placement for a device name and an optional backend. With `require_present`,
    a device that is not here is an error, except "auto", which falls back to the CPU."""
    kind, ordinal = parse_device(device)
    if backend is not None and backend not in BACKENDS:
        raise DeviceError(f"unknown backend '{backend}'; backends: {', '.join(BACKENDS)}")
    if kind == "auto":
        kind, ordinal = "cpu", 0
        if _gpu_count("cuda") > 0 and (backend or "native") in DEVICE_KINDS["cuda"]:
            kind = "cuda"
        else:
            log.debug("device 'auto': no CUDA GPU present, running on the CPU")
    backends = DEVICE_KINDS[kind]
    chosen = backend or backends[0]
    if chosen not in backends:
        raise DeviceError(f"backend '{chosen}' cannot run device '{device}'; "
                          f"it runs on: {', '.join(backends)}")
    if require_present and kind not in _HOST_KINDS and ordinal >= _gpu_count(kind):
        present = ", ".join(["auto"] + [d["id"] for d in compute_devices()])
        raise DeviceError(f"device '{device}' is not available; available devices: {present}")
    return Placement(kind, ordinal, chosen)


def _gpu_count(kind: str) -> int:
    return sum(1 for d in compute_devices() if d["id"].startswith(kind + ":"))


def host_values(queries: dict[str, str]) -> dict[str, Any]:
    """Values of the host a program asks for (`let devices = compute_devices()`)."""
    return {name: compute_devices() for name in queries}


@lru_cache(maxsize=1)
def compute_devices() -> list[dict]:
    """The devices really present: CUDA GPUs (cuda-python), other GPUs IREE's runtime
    drivers report, and the CPU. Each a dict: id, type, name, and memory (bytes) or cores."""
    devices = _cuda_devices()
    for kind, driver in (("vulkan", "vulkan"), ("rocm", "hip"), ("metal", "metal")):
        devices.extend(_iree_devices(kind, driver))
    devices.append({"id": "cpu", "type": "cpu", "name": _cpu_name(),
                    "cores": os.cpu_count() or 1})
    return devices


def _cuda_devices() -> list[dict]:
    try:
        from .runtime.cuda.driver import device_count, get_device
        found = []
        for ordinal in range(device_count()):
            info = get_device(ordinal).info
            found.append({"id": f"cuda:{ordinal}", "type": "gpu", "name": info.name,
                          "memory": info.memory,
                          "compute_capability": "%d.%d" % info.compute_capability})
        return found
    except Exception as err:  # no cuda-python, no driver, no GPU
        log.debug("no CUDA devices: %s", err)
        return []


def _iree_devices(kind: str, driver_name: str) -> list[dict]:
    try:
        import iree.runtime as rt
        if driver_name not in rt.query_available_drivers():
            return []
        infos = rt.get_driver(driver_name).query_available_devices()
    except Exception as err:  # the driver is built in but its library or GPU is missing
        log.debug("no %s devices: %s", kind, err)
        return []
    return [{"id": f"{kind}:{i}", "type": "gpu", "name": info.get("name", kind)}
            for i, info in enumerate(infos)]


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
