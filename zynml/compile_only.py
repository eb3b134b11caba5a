"""Filling an artifact cache for a GPU machine that has no compiler.

The device machines run CUDA artifacts from a cache compiled elsewhere (they have no
MLIR). A test or benchmark whose work is a chain of calls, each the input of the next
(a training step), cannot be compiled by calling it once: the values of every call are
needed to make the next. `cpu_values_cuda_artifacts()` runs such a chain where there is
no GPU: each call of a native CUDA Program compiles that Program's artifact for the
call's shapes and dtypes (into the cache, as a GPU run would look it up), then runs the
same program on the CPU for the values the chain goes on with.

Each call compiles what a GPU call would: through the Program's specializations, so
that the same policies (a size's second value, the ZYNML_SPECIALIZATION_LIMIT cap) pick
the same signatures here as on the GPU machine, whose cache lookups must then hit.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import numpy as np

from .api import Program, _merge_inputs


class DeviceScalar:
    """A 0-d result as a GPU run has it, a 0-d DeviceArray: passed to the next call, it
    compiles as a scalar read on the device (`NAME@device`), not as one by value. Its
    value is the CPU's."""

    def __init__(self, value):
        self.value = np.asarray(value)
        self.shape, self.dtype, self.ndim = (), self.value.dtype, 0

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (), "typestr": self.value.dtype.str, "data": (0, False),
                "version": 3, "strides": None}

    def __array__(self, dtype=None, copy=None):
        return self.value if dtype is None else self.value.astype(dtype)

    def __float__(self) -> float:
        return float(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def reshape(self, *shape):
        """As a 0-d DeviceArray's reshape (one element seen as [1]): the CPU's values, a
        numpy array, which compiles as the GPU array it stands for."""
        return self.value.reshape(*shape)


@contextlib.contextmanager
def cpu_values_cuda_artifacts(gpu_results: bool = True) -> Iterator[None]:
    """Within the block, calling a native CUDA Program compiles and caches its artifact
    and returns what the program gives on the CPU (numpy arrays); `cuda:0` counts as
    present, so Programs for it can be made. `gpu_results`: the GPU run this stands for
    passes GPU arrays, so its 0-d results are 0-d GPU arrays (DeviceScalar here)."""
    from . import devices
    from .runtime.cuda import function
    original, gpu_count = Program.__call__, devices._gpu_count
    cuda_function = function.CudaFunction
    twins: dict[int, Program] = {}

    def compile_then_run_on_cpu(self, inputs=None, /, **named):
        if self.backend != "native":
            return original(self, inputs, **named)
        inputs = _merge_inputs(inputs, named)
        self._executable_for(inputs)  # what a GPU call compiles; loading it is a no-op here
        twin = twins.get(id(self))
        if twin is None:
            twin = twins[id(self)] = _cpu_twin(self)
        outputs = original(twin, {name: value.value if isinstance(value, DeviceScalar)
                                  else value for name, value in inputs.items()})
        if not gpu_results:
            return outputs
        return {name: DeviceScalar(value) if np.ndim(value) == 0 else value
                for name, value in outputs.items()}

    Program.__call__ = compile_then_run_on_cpu
    function.CudaFunction = _ArtifactOnly
    devices._gpu_count = lambda kind: max(1, gpu_count(kind)) if kind == "cuda" \
        else gpu_count(kind)
    try:
        yield
    finally:
        Program.__call__, devices._gpu_count = original, gpu_count
        function.CudaFunction = cuda_function


class ArtifactOnlyCall(RuntimeError):
    """A CUDA artifact called inside cpu_values_cuda_artifacts, where artifacts are built
    but nothing runs: a caller with a form that runs anywhere (a ukernel's library
    kernel, zynml/kernels/attention_backward.py) goes on with that form."""


class _ArtifactOnly:
    """What a Program's build loads its CUDA artifact into here: nothing (no driver)."""

    def __init__(self, artifact, ordinal: int = 0):
        self.artifact = artifact

    def __call__(self, *args):
        raise ArtifactOnlyCall("a CUDA artifact cannot run inside "
                               "cpu_values_cuda_artifacts")




def _cpu_twin(program: Program) -> Program:
    """The same program (or pipeline of it) compiled for the CPU."""
    source = program.source
    text_or_path = Path(source.name) if source.name.endswith(".zyn") else source.text
    # the program's own size policy: a library kernel pinned static (the attention
    # variants) runs here as it does on the CPU; IREE's dynamic attention at GPT-2's
    # sizes asks for more memory than a small machine has
    twin = Program(text_or_path, device="cpu", dynamic=program._dynamic is not False)
    return twin.pipeline(program._pipeline.name) if program._pipeline is not None else twin
