"""Runtimes: load compiled artifacts and call them.

`iree_runner` runs IREE vmfb modules through `iree.runtime` (which, unlike
`iree.compiler`, can be imported next to the `mlir` bindings); `cuda/` runs ZynML's own
CUDA artifacts through cuda-python. Each loads on first use, so either can be missing.
"""
import importlib

__all__ = ["DEFAULT_DRIVER", "IreeFunction", "IreeModule", "runtime_config"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module(".iree_runner", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
