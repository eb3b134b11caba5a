"""compute-device-api.md's device object: `zynml.Device` (device.py), its operations
(ops.py, training.py), the elementwise closures' tracing and math functions (tracing.py,
exposed as `zynml.exp`, `zynml.where`, ...). docs/device-api.md is the user's page."""
from .checks import DeviceAPIError
from .device import Device
from .tracing import BUILTINS, Expr

__all__ = ["Device", "DeviceAPIError", "Expr", "BUILTINS"]
