"""The CUDA target's chip facts and its validated options (zynml/backend/cuda/target.py)."""
import dataclasses

import pytest

from zynml.backend.cuda.strategies import REGISTRY, get_strategy
from zynml.backend.cuda.target import CHIPS, FEATURES, CudaTarget, params_text


@pytest.mark.parametrize("chip", sorted(CHIPS))
def test_every_chip_has_consistent_facts(chip):
    facts = CHIPS[chip]
    assert facts.name == chip and set(facts.features) <= set(FEATURES)
    major, minor = facts.compute_capability
    assert chip.startswith(f"sm_{major}{minor}")
    assert 0 < facts.max_static_shared_per_block <= facts.max_shared_per_block
    # wgmma and setmaxnreg are in the sm_90a-style targets' PTX only
    if "wgmma" in facts.features or "setmaxnreg" in facts.features:
        assert chip.endswith("a")
    # every chip newer than another has what the older one has, Blackwell's lack of
    # wgmma aside (a feature of sm_90a alone)
    for other in CHIPS.values():
        if other.compute_capability < facts.compute_capability and not other.name.endswith("a"):
            assert set(other.features) <= set(facts.features), (other.name, chip)


def test_shared_memory_per_block_is_the_programming_guide_s():
    assert {c: CHIPS[c].max_shared_per_block for c in ("sm_80", "sm_86", "sm_89", "sm_90a",
                                                      "sm_120")} == {
        "sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90a": 232448, "sm_120": 101376}


def test_params_text_is_canonical():
    assert params_text("pointwise.vectors=2;matmul.tile_m=64;pointwise.vectors=4") == \
        "matmul.tile_m=64;pointwise.vectors=4"
    assert params_text({"matmul_wgmma": {"persistent": False, "stages": 3}}) == \
        "matmul_wgmma.persistent=false;matmul_wgmma.stages=3"
    assert params_text({"attention_wgmma@1x2f16": {"stages": 2}}) == \
        "attention_wgmma@1x2f16.stages=2"
    assert CudaTarget(params="b.x=1;a.y=2").params == CudaTarget(params="a.y=2;b.x=1").params
    for bad in ("pointwise", "pointwise.vectors", "a b.c=1", "x.y=1,z.w=2", "x.y=1=2"):
        with pytest.raises(ValueError, match="bad params entry"):
            CudaTarget(params=bad)


def _changed(field: dataclasses.Field, value):
    if isinstance(value, bool):
        return not value
    return value + 1


def test_every_params_field_of_every_strategy_changes_the_cache_key():
    """What tunes a kernel is part of the artifact cache key: each field of each
    strategy's Params, set to another value, gives a key of its own."""
    default = CudaTarget().cache_key()
    keys = {default}
    for entry in REGISTRY:
        params = get_strategy(entry.name).Params()
        for field in dataclasses.fields(params):
            value = _changed(field, getattr(params, field.name))
            key = CudaTarget(params={entry.name: {field.name: value}}).cache_key()
            assert key not in keys, (entry.name, field.name)
            keys.add(key)
    assert len(keys) > 60  # every strategy's fields were seen


def test_chip_and_level_are_in_the_cache_key():
    keys = {CudaTarget(c, o).cache_key() for c in ("sm_80", "sm_90a") for o in (0, 3)}
    assert len(keys) == 4
