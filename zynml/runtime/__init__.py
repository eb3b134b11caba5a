"""Runtimes: load compiled artifacts and call them with numpy arrays.

`iree_runner` uses the `iree.runtime` package, which (unlike `iree.compiler`) can be
imported next to the `mlir` bindings.
"""
from .iree_runner import DEFAULT_DRIVER, IreeFunction, IreeModule, runtime_config

__all__ = ["DEFAULT_DRIVER", "IreeFunction", "IreeModule", "runtime_config"]
