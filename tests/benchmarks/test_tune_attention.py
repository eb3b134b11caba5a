"""benchmarks/tune_attention.py's table, without a GPU: every strategy's module loads,
every set of its grid is a `Params` of it, every case's program exists."""
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import tune_attention  # noqa: E402  (benchmarks/ is no package)


@pytest.mark.parametrize("name", sorted(tune_attention.STRATEGIES))
def test_strategy_table(name):
    strategy = tune_attention.STRATEGIES[name]
    module = tune_attention._strategy_module(name)
    assert module.NAME == name
    assert strategy.grid and strategy.cases
    for values in strategy.grid:
        module.Params(**values)
    for source, shape, dtype in strategy.cases.values():
        assert (tune_attention.EXAMPLES / source).is_file()
        assert len(shape) == 4 and dtype in ("float16", "float32", "bfloat16", "float64")


def test_use_replaces_params_for_or_the_default():
    """_use replaces params_for where the strategy has one, DEFAULT_PARAMS otherwise."""
    class Module:
        DEFAULT_PARAMS = "default"
    tune_attention._use(Module, "set")
    assert Module.DEFAULT_PARAMS == "set"

    class WithConfigs:
        @staticmethod
        def params_for(d, e):
            return "config"
    tune_attention._use(WithConfigs, "set")
    assert WithConfigs.params_for(64, 64) == "set"


def test_case_filter_keeps_the_cases_whose_name_holds_the_text():
    cases = tune_attention._cases("attention_wgmma", "bert")
    assert set(cases) == {"bert d64", "bert d64 mask"}
    assert tune_attention._cases("attention_wgmma", "") == \
        tune_attention.STRATEGIES["attention_wgmma"].cases
