"""The tune tables built on benchmarks/tune_cases.py, without a GPU: every case is a row
of gpu_vs_torch.py and every set a `Params` of its strategy."""
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import tune_cases  # noqa: E402  (benchmarks/ is no package)
import tune_gemm_f32  # noqa: E402
import tune_memory_bound  # noqa: E402

TABLES = {"memory_bound": tune_memory_bound.STRATEGIES, "gemm_f32": tune_gemm_f32.STRATEGIES}


@pytest.mark.parametrize("table,strategy", [(t, s) for t, table in TABLES.items()
                                            for s in table])
def test_table_entries(table, strategy):
    cases, sets = TABLES[table][strategy]
    module = tune_cases.strategy_module(strategy)
    assert module.NAME == strategy and cases and sets
    for name in cases:
        assert tune_cases.case(name).name == name
    for values in sets:
        module.Params(**values)


def test_grid_is_every_combination():
    assert tune_cases.grid(a=(1, 2), b=(3,)) == ({"a": 1, "b": 3}, {"a": 2, "b": 3})


def test_gemm_f32_swaps_the_params_each_strategy_reads():
    class WithDefault:
        Params = dict
        DEFAULT_PARAMS = None

    class WithConfigs:
        Params = dict
        CONFIGS = ()
    tune_gemm_f32._use(WithDefault, {"tile_k": 16})
    tune_gemm_f32._use(WithConfigs, {"tile_k": 16})
    assert WithDefault.DEFAULT_PARAMS == {"tile_k": 16}
    assert WithConfigs.CONFIGS == ({"tile_k": 16},)
