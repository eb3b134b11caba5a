"""RoutedFunction (zynml/runtime/cpu_routing.py): small CPU calls run inline on IREE's
local-sync device, large ones on local-task's workers, with the same results."""
from __future__ import annotations

import concurrent.futures
from pathlib import Path

import numpy as np
import pytest

import zynml
from conftest import assert_close
from zynml.runtime.cpu_routing import RoutedFunction
from zynml.runtime.iree_runner import IreeFunction

CHAIN = Path(__file__).parents[1] / "programs" / "tanh_relu_chain.zyn"

ROW_SUMS = """
pipeline row_sums(m: tensor[r, c]) -> tensor[r]:
    let s = compute(m) {
        @kernel reduce(+, axis=1)
        for i in 0..r, j in 0..c:
            yield m[i, j]
    }
    return s
"""


def _function(program) -> RoutedFunction:
    (executable,) = program._program._shapes.executables.values()
    return executable.function


def _chain_reference(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    return np.tanh(x * 2.0 + y) * 0.5 + np.maximum(x - y, 0.0)


def _scale(x, y):
    """The chain's f32 error is absolute where 2x + y cancels: on the inputs' scale."""
    return np.abs(x).max() + np.abs(y).max()


@pytest.mark.parametrize("n", [1, 7, 1009])
def test_small_calls_run_inline_and_match_the_reference(rng, n):
    chain = zynml.compile(CHAIN, device="cpu", static=["n"]).chain
    for _ in range(3):
        x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        assert_close(chain(x, y), _chain_reference(x, y), floor=_scale(x, y))
    function = _function(chain)
    assert isinstance(function, RoutedFunction)
    assert function.route(x, y) == "local-sync"


def test_the_route_follows_the_bytes_a_call_moves(rng, monkeypatch):
    """3 arrays of 401 f32 move 4812 bytes: inline under a 5000-byte limit, on the
    workers under 4000. Each shape set keeps the route its first call chose."""
    monkeypatch.setenv("ZYNML_CPU_SYNC_BYTES", "5000")
    chain = zynml.compile(CHAIN, device="cpu", dynamic=["n"]).chain
    small = [rng.standard_normal(401).astype(np.float32) for _ in range(2)]
    large = [rng.standard_normal(421).astype(np.float32) for _ in range(2)]
    for pair in (small, large):
        assert_close(chain(*pair), _chain_reference(*pair), floor=_scale(*pair))
    function = _function(chain)
    assert (function.route(*small), function.route(*large)) == ("local-sync", "local-task")
    assert function.route(*(a[:3] for a in small)) is None  # not called at that shape yet


def test_both_devices_give_the_same_bits(rng, monkeypatch):
    """The split of the work into workgroups is compiled in: a reduction's bits do not
    depend on which device ran it."""
    m = rng.standard_normal((37, 1013)).astype(np.float32)
    results = {}
    for limit, driver in (("1", "local-task"), (str(1 << 30), "local-sync")):
        monkeypatch.setenv("ZYNML_CPU_SYNC_BYTES", limit)
        program = zynml.compile(ROW_SUMS, device="cpu").row_sums
        program(m)  # the first call of a shape runs on local-task and fixes its route
        results[driver] = program(m)
        assert _function(program).route(m) == driver
    np.testing.assert_array_equal(results["local-task"], results["local-sync"])
    assert_close(results["local-sync"], m.astype(np.float64).sum(axis=1),
                 floor=np.abs(m.astype(np.float64)).sum(axis=1).max())


def test_zero_turns_routing_off(rng, monkeypatch):
    monkeypatch.setenv("ZYNML_CPU_SYNC_BYTES", "0")
    chain = zynml.compile(CHAIN, device="cpu").chain
    x = rng.standard_normal(5).astype(np.float32)
    chain(x, x)
    assert type(_function(chain)) is IreeFunction


def test_bad_limit_is_a_knob_error(monkeypatch):
    monkeypatch.setenv("ZYNML_CPU_SYNC_BYTES", "-1")
    chain = zynml.compile(CHAIN, device="cpu").chain
    with pytest.raises(zynml.ZynMLError, match="ZYNML_CPU_SYNC_BYTES"):
        chain(np.ones(3, np.float32), np.ones(3, np.float32))


def test_inline_calls_from_many_threads(rng):
    chain = zynml.compile(CHAIN, device="cpu", dynamic=["n"]).chain
    pairs = [[rng.standard_normal(n).astype(np.float32) for _ in range(2)]
             for n in (3, 17, 3, 101, 17, 3, 257, 101)]
    chain(*pairs[0])
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda p: chain(*p), pairs * 8))
    for (x, y), out in zip(pairs * 8, outs):
        assert_close(out, _chain_reference(x, y), floor=_scale(x, y))
