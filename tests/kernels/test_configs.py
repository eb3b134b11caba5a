"""Flash attention's tuned configurations (kernel-library.md) and the shared-memory check."""
from __future__ import annotations

import pytest

from zynml import ZynMLError
from zynml.kernels import (TUNED_CONFIGS, ConfigError, config_for, required_shared_memory,
                           validate_config)


def test_table_is_the_specs():
    rows = {name: (c.block_q, c.block_kv, c.head_dim, c.use_half)
            for name, c in TUNED_CONFIGS.items()}
    assert rows == {"ampere": (128, 128, 64, True), "hopper": (128, 256, 128, True),
                    "rdna3": (64, 64, 64, True), "apple": (64, 64, 64, True),
                    "fallback": (32, 32, 64, False)}


def test_shared_memory_is_q_k_v_tiles():
    assert required_shared_memory(TUNED_CONFIGS["hopper"]) == (128 + 2 * 256) * 128 * 2
    assert required_shared_memory(TUNED_CONFIGS["fallback"]) == (32 + 2 * 32) * 64 * 4


def test_config_that_does_not_fit_names_config_need_and_limit():
    with pytest.raises(ConfigError) as err:
        validate_config(TUNED_CONFIGS["hopper"], 101376)  # an RTX 4090's block limit
    assert isinstance(err.value, ZynMLError)
    assert "'hopper'" in str(err.value) and "163840" in str(err.value) \
        and "101376" in str(err.value)
    validate_config(TUNED_CONFIGS["hopper"], 232448)  # an H100's: fits


@pytest.mark.parametrize("kind, cc, limit, expected", [
    ("cuda", "9.0", 232448, "hopper"), ("cuda", "8.0", 166912, "ampere"),
    ("cuda", "8.9", 101376, "ampere"),  # the spec's hopper row does not fit Ada's limit
    ("cuda", "7.5", 65536, "fallback"), ("rocm", None, None, "rdna3"),
    ("metal", None, None, "apple"), ("cpu", None, None, "fallback"),
])
def test_config_per_device(kind, cc, limit, expected):
    assert config_for(kind, cc, limit).name == expected
