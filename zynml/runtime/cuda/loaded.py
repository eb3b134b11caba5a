"""`zynml.load(path)`: a saved CUDA artifact as a callable with inputs by name."""
from __future__ import annotations

import os
from typing import Any, Union

import numpy as np

from ...devices import parse_device
from .artifact import CudaArtifact, describe
from .function import CudaFunction, named_call

__all__ = ["LoadedProgram"]


class LoadedProgram:
    def __init__(self, path: Union[str, os.PathLike], device: str = "cuda:0"):
        kind, ordinal = parse_device(device)
        if kind != "cuda":
            raise ValueError(f"a CUDA artifact runs on 'cuda:N', not '{device}'")
        self.path = str(path)
        self.artifact = CudaArtifact.load(path)
        self.function = CudaFunction(self.artifact, ordinal)

    @property
    def inputs(self) -> list[str]:
        return list(self.artifact.plan["input_names"])

    @property
    def outputs(self) -> list[str]:
        return list(self.artifact.plan["output_names"])

    def __call__(self, **inputs: Any) -> dict[str, Any]:
        results = named_call(self.function, inputs)
        for name in self.artifact.plan.get("bool_outputs", ()):  # 0-d i8 at the boundary
            value = results[name]
            if isinstance(value, np.ndarray):
                results[name] = np.bool_(value.reshape(())[()])
        return results

    def __repr__(self) -> str:
        info = describe(self.artifact)
        return (f"<zynml.LoadedProgram {self.path} chip={info['chip']} inputs={info['inputs']} "
                f"outputs={info['outputs']} kernels={len(info['kernels'])}>")
