"""The GPU tests' device: cuda:0, or under ZYNML_GPU_COMPILE_ONLY (no GPU) Programs that
compile their artifacts and give the CPU's values (zynml/compile_only.py), with the
parameters kept in numpy (the test module's `on_device` does nothing; the Trainer's flat
buffers follow the parameters: numpy)."""
import pytest

from conftest import COMPILE_ONLY
from zynml.compile_only import cpu_values_cuda_artifacts


@pytest.fixture
def device(request, monkeypatch):
    if not COMPILE_ONLY:
        yield "cuda:0"
        return
    monkeypatch.setattr(request.module, "on_device", lambda params, device: params)
    with cpu_values_cuda_artifacts():
        yield "cuda:0"
