"""ZynML's own CUDA target: the facts of each NVIDIA chip as data, and the validated
options of one compilation (the native backend's `IreeTarget`).

    CudaTarget()                      sm_90a (H100/H200), PTX ISA 8.3, LLVM -O3
    CudaTarget("sm_80")               A100
    CudaTarget.parse("sm_89")         from a command-line `--target`
    CudaTarget("sm_90a", params="matmul_wgmma.stages=3")   strategy parameters chosen
                                      (strategies/tuning.py says how they apply)

`CHIPS` is what the strategies decide with: a strategy lists the instructions it needs
(`REQUIRES`, names from `FEATURES`) and checks the shared memory its tiles take against
`max_shared_per_block`, so a kernel that could not launch on a chip is declined when it
is compiled, by the code that chooses it. The numbers are the CUDA programming guide's
("Technical Specifications per Compute Capability", "PTX ISA" release notes): each chip
needs at least the PTX ISA that introduced it, and the CUDA 13 toolkit and driver accept
up to 9.0.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Chip", "CHIPS", "FEATURES", "CudaTarget", "DEFAULT_CHIP", "PTX_ISA",
           "MAX_THREADS_PER_BLOCK", "params_text"]

DEFAULT_CHIP = "sm_90a"
MAX_THREADS_PER_BLOCK = 1024

# The instructions strategies ask for, and the first chips that have them.
FEATURES = {
    "wmma": "warp-level matrix products, f16 (wmma.mma; sm_70)",
    "ldmatrix": "shared-memory fragment loads (ldmatrix; sm_75)",
    "mma_sync": "mma.sync.m16n8k16 on f16/bf16 with f32 accumulators (sm_80)",
    "cp_async": "asynchronous global -> shared copies (cp.async; sm_80)",
    "tma": "tensor-memory-accelerator tile copies, mbarrier transaction counts "
           "(cp.async.bulk.tensor; sm_90)",
    "clusters": "thread-block clusters and distributed shared memory (sm_90)",
    "wgmma": "warpgroup matrix products (wgmma.mma_async; sm_90a only)",
    "setmaxnreg": "per-warpgroup register reallocation (setmaxnreg; sm_90a, sm_100a)",
    "griddepcontrol": "programmatic dependent launch: a kernel is launched before the "
                      "one ahead of it has ended and waits for it (griddepcontrol; sm_90)",
}


@dataclass(frozen=True)
class Chip:
    """What one NVIDIA architecture offers a kernel."""

    name: str                  # "sm_90a": the PTX target
    ptx_isa: int               # the PTX ISA it needs, times ten (80: ISA 8.0)
    max_shared_per_block: int  # bytes of shared memory one block may opt into
    features: frozenset = field(default_factory=frozenset)  # names from FEATURES
    max_static_shared_per_block: int = 49152  # of it, declared in the kernel
    registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    max_threads_per_block: int = MAX_THREADS_PER_BLOCK
    # multiprocessors of the architecture's largest part (H100 SXM and H200: 132), what
    # tile and split choices plan their waves for; a smaller part runs the same kernels
    # correctly, in more rounds (gemm_waves.py)
    multiprocessors: int = 132

    def __post_init__(self) -> None:
        unknown = set(self.features) - set(FEATURES)
        assert not unknown, f"{self.name}: unknown features {sorted(unknown)}"

    @property
    def compute_capability(self) -> tuple[int, int]:
        digits = re.sub(r"\D", "", self.name)
        return int(digits[:-1]), int(digits[-1])


_VOLTA = frozenset({"wmma"})
_TURING = _VOLTA | {"ldmatrix"}
_AMPERE = _TURING | {"mma_sync", "cp_async"}
_HOPPER = _AMPERE | {"tma", "clusters", "griddepcontrol"}

CHIPS: dict[str, Chip] = {chip.name: chip for chip in (
    Chip("sm_70", 60, 98304, _VOLTA, multiprocessors=80),           # V100
    Chip("sm_75", 63, 65536, _TURING, multiprocessors=72),          # Titan RTX
    Chip("sm_80", 70, 166912, _AMPERE, multiprocessors=108),        # A100
    Chip("sm_86", 71, 101376, _AMPERE, multiprocessors=84),         # RTX A6000
    Chip("sm_87", 74, 166912, _AMPERE, multiprocessors=16),         # Jetson AGX Orin
    Chip("sm_89", 78, 101376, _AMPERE, multiprocessors=128),        # RTX 4090
    Chip("sm_90", 78, 232448, _HOPPER),
    # ISA 8.3: the fence before a TMA descriptor is read (strategies/hopper.py)
    Chip("sm_90a", 83, 232448, _HOPPER | {"wgmma", "setmaxnreg"}),
    # Blackwell: no wgmma (its tensor cores are driven by tcgen05, which ZynML does not
    # emit yet), so it takes the sm_80/sm_90 kernels.
    Chip("sm_100", 86, 232448, _HOPPER, multiprocessors=148),       # B200
    Chip("sm_100a", 86, 232448, _HOPPER | {"setmaxnreg"}, multiprocessors=148),
    Chip("sm_120", 87, 101376, _HOPPER, multiprocessors=170),       # RTX 5090
    Chip("sm_120a", 87, 101376, _HOPPER, multiprocessors=170),
)}

PTX_ISA = {name: chip.ptx_isa for name, chip in CHIPS.items()}

# One entry of the params option: STRATEGY[@PROBLEM].FIELD=VALUE (strategies/tuning.py)
_PARAM_ENTRY = re.compile(r"([a-z_0-9]+(?:@[A-Za-z0-9_+\-]+)?\.[a-z_0-9]+)=([A-Za-z0-9_.\-]+)")


def params_text(params) -> str:
    """Strategy parameters as the canonical text of linalg-to-gpu-kernels' `params`
    option: entries sorted, the last of a repeated one kept, so two spellings of one
    choice give one cache key. `params` is that text (entries joined by ';') or a
    mapping {strategy: {field: value}}. Only the syntax is checked here (this runs
    where no compiler is installed); the pass checks names and types."""
    if isinstance(params, dict):
        params = ";".join(f"{strategy}.{name}={_param_value(value)}"
                          for strategy, fields in params.items() for name, value in fields.items())
    if not isinstance(params, str):
        raise ValueError(f"strategy params must be text or a dict, not {type(params).__name__}")
    kept = {}
    for item in filter(None, params.split(";")):
        match = _PARAM_ENTRY.fullmatch(item.strip())
        if match is None:
            raise ValueError(f"bad params entry '{item}': expected "
                             "STRATEGY[@PROBLEM].FIELD=VALUE")
        kept[match.group(1)] = match.group(2)
    return ";".join(f"{key}={kept[key]}" for key in sorted(kept))


def _param_value(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class CudaTarget:
    """chip: an NVIDIA architecture (`sm_90a`); opt_level: LLVM's -O for the kernels;
    params: strategy parameters chosen for this compilation (params_text; empty: each
    strategy's own choice); deterministic: scatters give the same bits run to run
    (sorted segments instead of atomics: scatter.py); wait_on_predecessor: kernels
    wait for the kernel before them first and let the next launch as they end, where
    the chip has griddepcontrol (passes/gpu_kernels_wait_on_predecessor.py); tf32: f32
    matrix products may round their operands to TF32 (10-bit mantissas) on the tensor
    cores, as PyTorch's `allow_tf32` (where the chip has wgmma: tf32_operands.py)."""

    chip: str = DEFAULT_CHIP
    opt_level: int = 3
    params: str = ""  # or a dict, made text by __post_init__
    deterministic: bool = False
    wait_on_predecessor: bool = False
    tf32: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.chip, str) or self.chip not in CHIPS:
            raise ValueError(f"unknown CUDA target {self.chip!r}; known: {', '.join(CHIPS)}")
        if self.opt_level not in (0, 1, 2, 3):
            raise ValueError(f"CudaTarget.opt_level must be 0..3, not {self.opt_level!r}")
        for name in ("deterministic", "wait_on_predecessor", "tf32"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"CudaTarget.{name} must be True or False, not "
                                 f"{getattr(self, name)!r}")
        object.__setattr__(self, "params", params_text(self.params))

    @staticmethod
    def parse(text: str) -> "CudaTarget":
        match = re.fullmatch(r"(sm_\d+a?)", text.strip())
        if not match:
            raise ValueError(f"bad CUDA target '{text}': expected e.g. sm_90a, sm_80")
        return CudaTarget(match.group(1))

    @property
    def facts(self) -> Chip:
        return CHIPS[self.chip]

    @property
    def ptx_features(self) -> str:
        return f"+ptx{self.facts.ptx_isa}"

    @property
    def compute_capability(self) -> tuple[int, int]:
        return self.facts.compute_capability

    @property
    def max_shared_per_block(self) -> int:
        return self.facts.max_shared_per_block

    def has(self, features) -> bool:
        """Whether the chip has every instruction named in `features`."""
        return set(features) <= self.facts.features

    @property
    def pass_options(self) -> str:
        """linalg-to-gpu-kernels' options for this target."""
        return f"chip={self.chip}" + (f" params={self.params}" if self.params else "") + \
            (" deterministic=true" if self.deterministic else "") + \
            (" tf32=true" if self.tf32 else "")

    def cache_key(self) -> str:
        return f"cuda:{self.chip}:O{self.opt_level}" + \
            (f":{self.params}" if self.params else "") + \
            (":deterministic" if self.deterministic else "") + \
            (":wait-on-predecessor" if self.waits_on_predecessor else "") + \
            (":tf32" if self.tf32 else "")

    @property
    def waits_on_predecessor(self) -> bool:
        """Whether this compilation's kernels wait on the kernel before them."""
        return self.wait_on_predecessor and self.has({"griddepcontrol"})
