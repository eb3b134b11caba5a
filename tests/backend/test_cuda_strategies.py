"""The strategy registry, and every strategy's configs on every chip of the target table:
each config either fits the chip (its shared memory and instructions) or the strategy
declines the kernel (zynml/backend/cuda/strategies/)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.backend.cuda.compile import lower_to_gpu
from zynml.backend.cuda.strategies import (REGISTRY, get_strategy, group_strategies,
                                           single_strategies, strategy_names)
from zynml.backend.cuda.target import CHIPS, FEATURES, CudaTarget

EXAMPLES = Path(__file__).resolve().parents[1] / "programs" / "examples"
PROGRAMS = EXAMPLES.parent


def test_the_registry_is_the_one_table_of_strategies():
    assert strategy_names() == [entry.name for entry in REGISTRY]
    assert strategy_names()[-1] == "pointwise"  # matches everything: last
    for entry in REGISTRY:
        module = get_strategy(entry.name)
        assert module.NAME == entry.name
        assert dataclasses.is_dataclass(module.Params)
        assert module.Params.__dataclass_params__.frozen
        assert set(getattr(module, "REQUIRES", ())) <= set(FEATURES)
        assert entry.groups == hasattr(module, "find_groups")
        assert entry.single == hasattr(module, "matches") or entry.groups
        assert entry.groups or entry.single


def test_an_unknown_strategy_names_the_ones_that_exist():
    with pytest.raises(KeyError) as err:
        get_strategy("pointwize")
    assert "unknown GPU strategy 'pointwize'; strategies: attention_decode_mma, " \
        "attention_decode, attention_wgmma," in str(err.value)
    assert "pointwise" in str(err.value)


def test_strategies_a_chip_lacks_the_instructions_for_are_not_offered():
    on_sm75 = {m.NAME for m in group_strategies(CudaTarget("sm_75")) +
               single_strategies(CudaTarget("sm_75"))}
    assert {"attention_wgmma", "matmul_wgmma", "attention_tensor_core",
            "attention_simt_tiled"}.isdisjoint(on_sm75)
    assert {"attention", "matmul_tensor_core", "pointwise"} <= on_sm75
    on_sm90a = {m.NAME for m in single_strategies(CudaTarget("sm_90a"))}
    assert "matmul_wgmma" in on_sm90a
    on_sm100a = {m.NAME for m in single_strategies(CudaTarget("sm_100a"))}
    assert "matmul_wgmma" not in on_sm100a  # Blackwell has no wgmma


# --------------------------------------------------------------------------- chip walk

def _attention(d, dtype, source="attention_no_mask.zyn", rows=70):
    shape = (1, 2, rows, d)
    return PROGRAMS / source, {n: np.ones(shape, dtype) for n in "QKV"}


# A program each strategy takes on a chip that has what it needs, with its default
# params; the walk then compiles it with each config of the strategy on every chip.
PROGRAMS_OF = {
    "attention_wgmma": [_attention(64, np.float16), _attention(128, np.float16)],
    "attention_tensor_core": [_attention(64, np.float16, rows=33),
                              _attention(128, np.float16, rows=33)],
    "attention_simt_tiled": [_attention(64, np.float32), _attention(128, np.float32)],
    "attention": [_attention(64, np.float64)],
    "matmul_wgmma": [(EXAMPLES / "matmul.zyn", {"A": np.ones((256, 128), np.float16),
                                                "B": np.ones((128, 256), np.float16)})],
    "matmul_tensor_core": [(EXAMPLES / "matmul.zyn", {"A": np.ones((128, 64), np.float16),
                                                      "B": np.ones((64, 128), np.float16)})],
    "matmul": [(EXAMPLES / "matmul.zyn", {"A": np.ones((128, 40), np.float32),
                                          "B": np.ones((40, 128), np.float32)})],
    "implicit_gemm_mma": [(EXAMPLES / "conv2d.zyn", dict(
        input=np.ones((2, 32, 16, 16), np.float16), kernel=np.ones((64, 32, 3, 3), np.float16),
        bias=np.ones(64, np.float16), in_h=16, in_w=16, out_h=16, out_w=16))],
    "implicit_gemm": [(EXAMPLES / "conv2d.zyn", dict(
        input=np.ones((2, 8, 12, 12), np.float32), kernel=np.ones((64, 8, 3, 3), np.float32),
        bias=np.ones(64, np.float32), in_h=12, in_w=12, out_h=12, out_w=12))],
    "row_fused": [(EXAMPLES / "layer_norm.zyn", dict(
        x=np.ones((64, 4099), np.float32), gamma=np.ones(4099, np.float32),
        beta=np.ones(4099, np.float32), eps=1e-5))],
    "row_reduce": [(EXAMPLES / "row_sums.zyn", None)],
    "pointwise": [(EXAMPLES / "gelu.zyn", {"x": np.ones(4096, np.float32)})],
}


def _configs(module) -> list:
    """Every Params set the strategy may build with: CONFIGS (bare or under head-dim
    bounds), else its defaults."""
    configs = getattr(module, "CONFIGS", None)
    if configs is None:
        return [getattr(module, "DEFAULT_PARAMS", None) or module.Params()]
    return [c[1] if isinstance(c, tuple) else c for c in configs]


def _chip_classes() -> list[str]:
    """One chip per distinct set of facts (the others would repeat its outcome)."""
    seen, chips = set(), []
    for name, chip in CHIPS.items():
        key = (chip.max_shared_per_block, chip.max_static_shared_per_block,
               frozenset(chip.features))
        if key not in seen:
            seen.add(key)
            chips.append(name)
    return chips


def _inputs(path, inputs):
    if inputs is not None:
        return inputs
    # row_sums: 3 long rows, which row_fused leaves to row_reduce (few rows, many points)
    return {"matrix": np.ones((3, 400000), np.float32)}


def _kernels_for(path, inputs, target) -> list[dict]:
    """Compile to the gpu stage for `target`: each launch's strategy, dynamic shared
    bytes and the static shared bytes its kernel declares."""
    from mlir import ir
    prog = zynml.compile(path, device="cuda", require_device=False)
    module = prog.stage_module(inputs, upto="linalg")
    lower_to_gpu(module, target)
    static: dict[str, int] = {}
    launches = []
    for op in module.body.operations:
        op = op.operation
        if op.name == "gpu.module":
            for inner in op.regions[0].blocks[0].operations:
                inner = inner.operation
                if inner.name == "memref.global" and "workgroup" in str(inner.attributes["type"]):
                    memref = ir.MemRefType(ir.TypeAttr(inner.attributes["type"]).value)
                    name = ir.StringAttr(inner.attributes["sym_name"]).value
                    size = memref.element_type.width // 8 * int(np.prod(memref.shape))
                    static[name] = size
    for func in module.body.operations:
        if func.operation.name != "func.func":
            continue
        for op in func.operation.regions[0].blocks[0].operations:
            op = op.operation
            if op.name != "gpu.launch_func":
                continue
            kernel = str(op.attributes["kernel"]).split("::@")[-1]
            size = op.opview.dynamicSharedMemorySize
            dynamic = 0 if size is None else \
                ir.IntegerAttr(size.owner.attributes["value"]).value
            launches.append({
                "strategy": ir.StringAttr(op.attributes["zynml.strategy"]).value,
                "dynamic": dynamic,
                "static": sum(v for n, v in static.items() if n.startswith(kernel + "_")),
            })
    return launches


CASES = [(name, index, k, chip) for name, programs in PROGRAMS_OF.items()
         for index in range(len(programs))
         for k in range(len(_configs(get_strategy(name)))) for chip in _chip_classes()]


@pytest.mark.parametrize("strategy,program,config,chip", CASES)
def test_each_config_fits_its_chip_or_the_strategy_declines(strategy, program, config, chip):
    module = get_strategy(strategy)
    path, inputs = PROGRAMS_OF[strategy][program]
    params = _configs(module)[config]
    fields = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    target = CudaTarget(chip, params={strategy: fields})
    facts = target.facts
    kernels = _kernels_for(path, _inputs(path, inputs), target)
    assert kernels
    for kernel in kernels:
        taker = get_strategy(kernel["strategy"])
        assert target.has(getattr(taker, "REQUIRES", ())), kernel
        assert kernel["static"] <= facts.max_static_shared_per_block, kernel
        assert kernel["static"] + kernel["dynamic"] <= facts.max_shared_per_block, kernel


def test_the_walk_sees_each_strategy_take_its_program():
    """On sm_90a (sm_90 for the Ampere-style kernels wgmma would take) with its own
    params, each strategy takes the program the walk gives it: the walk is not vacuous."""
    for strategy, programs in PROGRAMS_OF.items():
        chip = "sm_90" if strategy in ("attention_tensor_core", "matmul_tensor_core") \
            else "sm_90a"
        for path, inputs in programs:
            taken = {k["strategy"] for k in _kernels_for(path, _inputs(path, inputs),
                                                         CudaTarget(chip))}
            assert strategy in taken, (strategy, path.name, taken)


@pytest.mark.parametrize("chip,block_m", [("sm_90a", 128), ("sm_80", 64), ("sm_86", 32),
                                          ("sm_89", 32), ("sm_120", 32)])
def test_f32_attention_at_head_dim_128_fits_every_chip(chip, block_m):
    """attention_simt_tiled's 128-row tiles at head dim 128 take 165 KB: sm_80 (163 KB)
    takes 64 rows, the 99 KB chips 32 rows (its CONFIGS' fallbacks)."""
    from zynml.backend.cuda.strategies.attention_simt_tiled import Params
    path, inputs = _attention(128, np.float32)
    target = CudaTarget(chip)
    [kernel] = _kernels_for(path, inputs, target)
    assert kernel["strategy"] == "attention_simt_tiled"
    assert kernel["dynamic"] == Params(block_m=block_m).shared_bytes(128, 128)
    assert kernel["dynamic"] <= target.max_shared_per_block


def test_every_strategy_has_a_search_space_of_its_own_fields():
    """What `zynml tune` tries (tuning.SEARCH): sets of real fields, each a valid Params
    over the defaults, none repeated (the tuner adds the strategy's own choice, {})."""
    from zynml.backend.cuda.strategies.tuning import SEARCH
    assert set(SEARCH) == set(strategy_names())
    for name, sets in SEARCH.items():
        params = get_strategy(name).Params()
        assert sets and all(sets), name
        assert len({tuple(sorted(s.items())) for s in sets}) == len(sets), name
        for fields in sets:
            dataclasses.replace(params, **fields)  # raises on a bad field or combination
