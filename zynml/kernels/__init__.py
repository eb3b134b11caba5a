"""ZynML's kernel library: kernels written in the ZynML language (zynml/kernels/src), so
the compiler serves its own library.

Python calls a kernel as a function (`zynml.kernels.swiglu(gate, up)`), on the device
its inputs live on (or `device=`); a ZynML program calls it as one of its pipelines
after `use kernels.swiglu`. Each kernel compiles on first use per device and dtype and
is cached on disk; sizes its source declares dynamic (`tensor[?rows, d]`) compile once.
"""
from __future__ import annotations

from typing import Any

from .configs import (TUNED_CONFIGS, ConfigError, FlashConfig, config_for,
                      required_shared_memory, validate_config)
from .library import call, names, program, source_path
from . import attention, basic, decode, fused, losses, qkv_attention, training
from .attention import *  # noqa: F401,F403  (each module's __all__)
from .basic import *  # noqa: F401,F403
from .decode import *  # noqa: F401,F403
from .fused import *  # noqa: F401,F403
from .losses import *  # noqa: F401,F403
from .qkv_attention import *  # noqa: F401,F403
from .training import *  # noqa: F401,F403

__all__ = ["TUNED_CONFIGS", "FlashConfig", "ConfigError", "config_for",
           "required_shared_memory", "validate_config", "names", "program", "source_path",
           "swiglu", *attention.__all__, *basic.__all__, *decode.__all__, *fused.__all__,
           *losses.__all__, *qkv_attention.__all__, *training.__all__]


def swiglu(gate: Any, up: Any, *, device: str | None = None):
    """silu(gate) * up, elementwise over [rows, d]."""
    return call("swiglu", "swiglu", {"gate": gate, "up": up}, device)
