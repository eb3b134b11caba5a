"""Flash attention's tuned configurations per architecture (kernel-library.md), as data,
and the shared-memory check that says whether one fits a chip.

A config's shared memory is the tiles a thread block keeps there: the Q tile
(block_q x head_dim) and the K and V tiles (block_kv x head_dim each), in the element
type (2 bytes in half precision, 4 in f32). Scores and the output accumulator stay in
registers, as in FlashAttention-2/3.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ZynMLError


@dataclass(frozen=True)
class FlashConfig:
    name: str
    block_q: int
    block_kv: int
    head_dim: int
    use_half: bool

    @property
    def element_bytes(self) -> int:
        return 2 if self.use_half else 4


# kernel-library.md's table: the architecture family -> its tuned tiles.
TUNED_CONFIGS: dict[str, FlashConfig] = {
    "ampere": FlashConfig("ampere", 128, 128, 64, True),     # A100, RTX 30xx
    "hopper": FlashConfig("hopper", 128, 256, 128, True),    # H100 (the spec adds RTX 40xx)
    "rdna3": FlashConfig("rdna3", 64, 64, 64, True),         # AMD
    "apple": FlashConfig("apple", 64, 64, 64, True),         # Apple silicon
    "fallback": FlashConfig("fallback", 32, 32, 64, False),
}


class ConfigError(ZynMLError, ValueError):
    """A flash-attention config that does not fit the chip's shared memory."""


def required_shared_memory(config: FlashConfig) -> int:
    """Bytes of shared memory one thread block of `config` needs: Q + K + V tiles."""
    return (config.block_q + 2 * config.block_kv) * config.head_dim * config.element_bytes


def validate_config(config: FlashConfig, max_shared: int) -> None:
    """Raise a ConfigError naming the config, its need and the limit if it does not fit."""
    need = required_shared_memory(config)
    if need > max_shared:
        raise ConfigError(
            f"flash-attention config '{config.name}' (block_q {config.block_q}, block_kv "
            f"{config.block_kv}, head_dim {config.head_dim}, "
            f"{'half' if config.use_half else 'f32'}) needs {need} bytes of shared memory "
            f"per block; the device allows {max_shared}")


def architecture(kind: str, compute_capability: str | None = None) -> str:
    """The TUNED_CONFIGS key of a device: its kind ("cuda", "rocm", "metal", ...) and,
    for CUDA, its compute capability ("9.0")."""
    if kind == "cuda" and compute_capability:
        major, minor = (int(part) for part in compute_capability.split(".")[:2])
        # the spec files Ada (8.9, RTX 40xx) with Hopper
        return "hopper" if (major, minor) >= (8, 9) else "ampere" if major >= 8 else "fallback"
    return {"rocm": "rdna3", "metal": "apple"}.get(kind, "fallback")


def config_for(kind: str, compute_capability: str | None = None,
               max_shared: int | None = None) -> FlashConfig:
    """The tuned config of a device; one that does not fit `max_shared` falls back down
    the table (hopper -> ampere -> fallback) rather than failing a launch."""
    order = ["hopper", "ampere", "fallback"]
    name = architecture(kind, compute_capability)
    candidates = [name] + [n for n in order[order.index(name) + 1:]] if name in order \
        else [name, "fallback"]
    for candidate in candidates:
        config = TUNED_CONFIGS[candidate]
        if max_shared is None or required_shared_memory(config) <= max_shared:
            return config
    return TUNED_CONFIGS["fallback"]
