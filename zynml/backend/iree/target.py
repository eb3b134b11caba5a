"""What each IREE target needs, as data: the `iree-compile` flags and the runtime driver.

Why data: adding a target is one entry in `IREE_TARGETS`, and the flags take part in the
artifact cache key (`cache_key()`; compile.py), so changing a target's flags recompiles.

Every entry's flags were checked with IREE 3.13's `iree-compile` on a small linalg
module; only `cpu` is run by the tests (CI has no GPU). The CPU flags were measured on
a 2-core x86 machine (AVX-512), 1024x1024 f32 `linalg.matmul`, median of 30 calls:
plain 72 ms, `--iree-llvmcpu-enable-ukernels=all` 73 ms, `--iree-opt-data-tiling`
24 ms (numpy/OpenBLAS: 14 ms); at 512x512: 5.2 ms, 4.8 ms, 3.5 ms (numpy 1.8 ms).
Ukernels gave nothing on top of data tiling, so only data tiling is kept.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

__all__ = ["IreeTarget", "for_module", "F64_LIBM_OPS", "CPU", "CUDA", "ROCM", "VULKAN", "METAL", "IREE_TARGETS", "get_target"]


@dataclass(frozen=True)
class IreeTarget:
    """One IREE compilation target.

    name:   the target's name as IREE spells it (e.g. "llvm-cpu"), for messages.
    device: the IREE runtime driver that runs its vmfb (e.g. "local-task", "cuda").
    flags:  the `iree-compile` flags selecting and tuning it, each `--name[=value]`.
    f64:    whether it computes f64 as f64 (IREE's SPIR-V targets demote it to f32, so
            ZynML refuses f64 programs there rather than change their precision).
    """

    name: str
    device: str
    flags: tuple[str, ...] = ()
    f64: bool = True

    def __post_init__(self) -> None:
        for field_name in ("name", "device"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"IreeTarget.{field_name} must be a non-empty string, not {value!r}")
        if isinstance(self.flags, str):
            # A lone string would otherwise be split into one-character "flags".
            raise ValueError(f"IreeTarget.flags must be a sequence of flags, not the string {self.flags!r}")
        flags = tuple(self.flags)  # accept a list, keep the dataclass hashable
        for flag in flags:
            if not isinstance(flag, str) or not flag.startswith("--") or any(c.isspace() for c in flag):
                raise ValueError(f"bad iree-compile flag {flag!r}: expected '--name' or '--name=value'")
        object.__setattr__(self, "flags", flags)

    def cache_key(self) -> str:
        """What decides the vmfb (with the program): the target and its flags."""
        return f"iree:{self.name}:{self.device}:" + " ".join(self.flags)

    def binding_alignment(self) -> int:
        """The byte alignment its kernels assume of every buffer they are given."""
        for flag in self.flags:
            if flag.startswith(_MIN_OFFSET_ALIGNMENT + "="):
                return int(flag.split("=", 1)[1])
        return 64  # IREE's default

    def with_flags(self, *extra: str) -> "IreeTarget":
        """This target with `extra` flags appended (validated like the others)."""
        return dataclasses.replace(self, flags=self.flags + tuple(extra))


_MIN_OFFSET_ALIGNMENT = "--iree-stream-resource-min-offset-alignment"

CPU = IreeTarget("llvm-cpu", "local-task", (
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
    # Pack matmul operands into cache-friendly tiles: 3x faster at 1024^2 (see above).
    "--iree-opt-data-tiling",
    # Let a float reduction keep several partial sums (vector lanes) and add them at
    # the end, as numpy's pairwise sums do, instead of one serial chain: a row sum of
    # 4096 x 2048 f32 3.22 -> 1.66 ms on one thread (numpy 1.95; docs/performance.md,
    # Session 39). IREE 3.13 leaves it off.
    "--iree-llvmcpu-reassociate-fp-reductions=true",
    # IREE demotes f64 to f32 by default; ZynML means f64 when it says f64, and
    # llvm-cpu runs f64 natively.
    "--iree-input-demote-f64-to-f32=false",
    # Kernels that assume 16-byte aligned buffers, not IREE's 64: numpy's large arrays
    # are 16 mod 64 (malloc), and an input the program only reads is then handed to IREE
    # without a copy (zynml/runtime/iree_runner.py; a 32 MiB row sum's copy cost more
    # than its kernel). A 64-aligned kernel given such a buffer crashes the process.
    f"{_MIN_OFFSET_ALIGNMENT}=16",
))

# GPU targets. IREE 3.13 rejects sm_90 ("missing GPU target"); sm_80 code also runs on
# newer GPUs (checked: the CUDA entry's vmfbs ran correctly on an H200, f64 included).
# rocm, vulkan and metal are compile-checked only. Metal has no f64; Vulkan's depends
# on the device, so those two keep IREE's default f64 -> f32 demotion.
CUDA = IreeTarget("cuda", "cuda", ("--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80",
                                   "--iree-input-demote-f64-to-f32=false"))
ROCM = IreeTarget("rocm", "hip", ("--iree-hal-target-device=hip", "--iree-rocm-target=gfx942",
                                  "--iree-input-demote-f64-to-f32=false"))
VULKAN = IreeTarget("vulkan-spirv", "vulkan", ("--iree-hal-target-device=vulkan",), f64=False)
METAL = IreeTarget("metal-spirv", "metal", ("--iree-hal-target-device=metal",), f64=False)

IREE_TARGETS: dict[str, IreeTarget] = {
    "cpu": CPU,
    "cuda": CUDA,
    "rocm": ROCM,
    "vulkan": VULKAN,
    "metal": METAL,
}


def get_target(name: str) -> IreeTarget:
    """The registered target called `name` (a key of IREE_TARGETS)."""
    try:
        return IREE_TARGETS[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(IREE_TARGETS))
        raise ValueError(f"unknown IREE target {name!r}; known targets: {known}") from None


# IREE's embedded ELF runtime has no f64 versions of these libm functions ("undefined
# symbol: tanh" at link time, measured with IREE 3.13); a module using them on f64 is
# linked as a system library instead, which resolves them from the host's libm.
F64_LIBM_OPS = ("tanh", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "erf")
_F64_LIBM = re.compile(r"\bmath\.(" + "|".join(F64_LIBM_OPS) + r")\b[^\n]*:\s*f64\s*$",
                       re.MULTILINE)


def for_module(target: IreeTarget, mlir_text: str) -> IreeTarget:
    """`target`, adjusted to what the module needs (see F64_LIBM_OPS)."""
    if target.name == "llvm-cpu" and _F64_LIBM.search(mlir_text):
        return target.with_flags("--iree-llvmcpu-link-embedded=false")
    return target
