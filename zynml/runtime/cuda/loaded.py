"""`zynml.load(path)`: a saved CUDA artifact as a callable with inputs by name."""
from __future__ import annotations

import os
from typing import Any, Union

import numpy as np

from ...checks import OUTPUT_NAME, loaded_checks
from ...devices import parse_device
from .artifact import CudaArtifact, describe
from .device_array import DeviceArray
from .function import CudaFunction, named_call

__all__ = ["LoadedProgram"]


class LoadedProgram:
    checked = None  # a checks.CheckedFunction around `function` for a checked artifact

    def __init__(self, path: Union[str, os.PathLike], device: str = "cuda:0"):
        kind, ordinal = parse_device(device)
        if kind != "cuda":
            raise ValueError(f"a CUDA artifact runs on 'cuda:N', not '{device}'")
        self.path = str(path)
        self.artifact = CudaArtifact.load(path)
        self.function = CudaFunction(self.artifact, ordinal)
        saved = self.artifact.plan.get("checks")  # checked mode: raise what a call raises
        self.checked = loaded_checks(self.function, saved) if saved is not None else None

    @property
    def inputs(self) -> list[str]:
        return list(self.artifact.plan["input_names"])

    @property
    def outputs(self) -> list[str]:
        names = list(self.artifact.plan["output_names"])
        return names[:-1] if self.checked is not None and names[-1:] == [OUTPUT_NAME] \
            else names

    def __call__(self, **inputs: Any) -> dict[str, Any]:
        if self.checked is None:
            results = named_call(self.function, inputs)
        else:
            results = named_call(self.function, inputs, self.checked, self.outputs)
        for name in self.artifact.plan.get("bool_outputs", ()):  # 0-d i8 at the boundary
            value = results[name]
            if isinstance(value, np.ndarray):
                results[name] = np.bool_(value.reshape(())[()])
            elif isinstance(value, DeviceArray):  # stays on the GPU, read as bool
                results[name] = value.view(np.bool_)
        return results

    def __repr__(self) -> str:
        info = describe(self.artifact)
        return (f"<zynml.LoadedProgram {self.path} chip={info['chip']} inputs={info['inputs']} "
                f"outputs={info['outputs']} kernels={len(info['kernels'])}>")
