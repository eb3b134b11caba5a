"""A ZynML CUDA artifact: everything needed to run one compiled program signature on an
NVIDIA GPU with only numpy and cuda-python installed (no MLIR, no IREE compiler).

File layout (a zip archive, `.zynart`):

    manifest.json    {"format": "zynml-cuda-artifact", "version": 1, "chip": "sm_90a",
                      "zynml": "0.1.0", "plan": {...launch plan...}}
    kernels.ptx      every kernel of the program, one PTX module
    kernels.cubin    the same, assembled by ptxas for `chip` (when ptxas was available)
    globals/NAME.npy constant tensors the plan uploads once
"""
from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...cache import atomic_write_bytes

__all__ = ["CudaArtifact", "ArtifactError", "FORMAT", "VERSION"]

FORMAT = "zynml-cuda-artifact"
VERSION = 1


class ArtifactError(ValueError):
    """A file that is not a readable ZynML CUDA artifact."""


@dataclass
class CudaArtifact:
    plan: dict
    ptx: str
    chip: str
    cubin: bytes | None = None
    globals: dict[str, np.ndarray] = field(default_factory=dict)
    zynml_version: str = ""

    def image(self, compute_capability: tuple[int, int] | None = None) -> bytes:
        """What to load: the cubin when it was built for this GPU, else the PTX (which the
        driver compiles for whatever GPU it runs on)."""
        if self.cubin and compute_capability is not None and \
                _chip_matches(self.chip, compute_capability):
            return self.cubin
        return self.ptx.encode()

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            manifest = {"format": FORMAT, "version": VERSION, "chip": self.chip,
                        "zynml": self.zynml_version, "plan": self.plan}
            archive.writestr("manifest.json", json.dumps(manifest, indent=1))
            archive.writestr("kernels.ptx", self.ptx)
            if self.cubin:
                archive.writestr("kernels.cubin", self.cubin)
            for name, array in self.globals.items():
                data = io.BytesIO()
                np.save(data, array, allow_pickle=False)
                archive.writestr(f"globals/{name}.npy", data.getvalue())
        return buffer.getvalue()

    @staticmethod
    def from_bytes(data: bytes, origin: str = "artifact") -> "CudaArtifact":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                manifest = json.loads(archive.read("manifest.json"))
                if manifest.get("format") != FORMAT:
                    raise ArtifactError(f"{origin}: not a ZynML CUDA artifact")
                if manifest.get("version") != VERSION:
                    raise ArtifactError(f"{origin}: artifact version {manifest.get('version')}"
                                        f", this ZynML reads version {VERSION}")
                names = set(archive.namelist())
                cubin = archive.read("kernels.cubin") if "kernels.cubin" in names else None
                globals_ = {}
                for spec in manifest["plan"]["globals"]:
                    raw = archive.read(f"globals/{spec['name']}.npy")
                    globals_[spec["name"]] = np.load(io.BytesIO(raw), allow_pickle=False)
                return CudaArtifact(manifest["plan"], archive.read("kernels.ptx").decode(),
                                    manifest["chip"], cubin, globals_,
                                    manifest.get("zynml", ""))
        except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, ValueError) as err:
            if isinstance(err, ArtifactError):
                raise
            raise ArtifactError(f"{origin}: not a readable ZynML CUDA artifact ({err})") \
                from None

    def save(self, path: str | Path) -> None:
        atomic_write_bytes(Path(path), self.to_bytes())

    @staticmethod
    def load(path: str | Path) -> "CudaArtifact":
        try:
            data = Path(path).read_bytes()
        except OSError as err:
            raise ArtifactError(f"cannot read '{path}': {err.strerror}") from None
        return CudaArtifact.from_bytes(data, str(path))


def _chip_matches(chip: str, capability: tuple[int, int]) -> bool:
    digits = "".join(c for c in chip if c.isdigit())
    return (int(digits[:-1]), int(digits[-1])) == tuple(capability)


def describe(artifact: CudaArtifact) -> dict[str, Any]:
    plan = artifact.plan
    return {"chip": artifact.chip, "inputs": plan["input_names"],
            "outputs": plan["output_names"],
            "kernels": sorted({s["kernel"] for s in launches(plan["body"])})}


def launches(body: list[dict]):
    """Every "launch" step of a launch plan's body, loop bodies and both branches of
    "if" steps included, in order."""
    for step in body:
        if step["op"] == "launch":
            yield step
        elif step["op"] == "for":
            yield from launches(step["body"])
        elif step["op"] == "if":
            yield from launches(step["then"])
            yield from launches(step["else"])
