"""ZynML's own CUDA backend: linalg -> gpu -> nvvm -> PTX (compile.py), the host code as
a launch plan (launch_plan.py), packed as an artifact (zynml/runtime/cuda/artifact.py)."""
from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
from pathlib import Path

from .target import CudaTarget

__all__ = ["CudaTarget", "build_artifact", "assemble_cubin"]

log = logging.getLogger(__name__)


def build_artifact(linalg_module, target: CudaTarget):
    """linalg-on-tensors module -> CudaArtifact (consumes the module)."""
    from ... import __version__
    from ...runtime.cuda.artifact import CudaArtifact
    from .compile import compile_for_cuda
    kernels = compile_for_cuda(linalg_module, target)
    cubin = assemble_cubin(kernels.ptx, target) if kernels.ptx else None
    return CudaArtifact(kernels.plan, kernels.ptx, target.chip, cubin, kernels.globals,
                        __version__)


def assemble_cubin(ptx: str, target: CudaTarget) -> bytes | None:
    """PTX -> cubin with the CUDA toolkit's ptxas, or None when ptxas is not installed
    (the driver then compiles the PTX when the artifact is loaded)."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        log.debug("ptxas not found: the artifact carries PTX only")
        return None
    with tempfile.TemporaryDirectory(prefix="zynml-ptxas-") as tmp:
        source, binary = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        source.write_text(ptx)
        done = subprocess.run([ptxas, f"-arch={target.chip}", "-O3", str(source), "-o",
                               str(binary)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"ptxas rejected the generated PTX:\n{done.stderr}")
        return binary.read_bytes()
