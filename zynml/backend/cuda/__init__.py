"""ZynML's own CUDA backend: its stages (stages.py) take linalg through gpu -> nvvm -> PTX
(compile.py) to an artifact (zynml/runtime/cuda/artifact.py) whose host code is a launch
plan (launch_plan.py); target.py holds the chip facts, launch_limits.py checks a program
against them."""
from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
from pathlib import Path

from .target import CudaTarget

__all__ = ["CudaTarget", "assemble_cubin"]

log = logging.getLogger(__name__)


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
