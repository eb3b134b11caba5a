"""Loops run in order inside elementwise bodies on the native CUDA backend (marked `gpu`:
CI skips these; they run on the device machine, from artifacts compiled by
tools/gpu_tests.sh): one kernel with the loop inside it (sink-loops-into-generics),
against float64 numpy on fresh random inputs of odd sizes, with poisoned allocations.
The plans are checked without a GPU in tests/passes/test_sink_loops_into_generics.py."""
import numpy as np
import pytest

import zynml
from body_loop_programs import NAMES, case, error_floor
from conftest import assert_close

pytestmark = pytest.mark.gpu


# Shapes and integer inputs specialize: they are parameters, not drawn, so that the
# compile-only half and the GPU run find the same artifacts.
@pytest.mark.parametrize("count", [0, 1, 6])
@pytest.mark.parametrize("size", [1, 37, 1024, 4099])  # 1024: 16-byte chunks
@pytest.mark.parametrize("name", NAMES)
def test_a_body_loop_on_cuda_is_the_body(rng, name, size, count):
    source, inputs, expected = case(name, rng, size, count)
    y = zynml.run(source, device="cuda:0", **inputs)["y"]
    assert y.dtype == np.float32 and np.shape(y) == np.shape(expected)
    assert_close(y, expected, floor=error_floor(name, inputs))


def test_one_dynamic_compile_runs_every_count(rng):
    """dynamic=True: the count (c's length) reaches the kernel at run time; one compile
    serves every size and count, 0 included."""
    prog = zynml.compile(case("size_count", rng, 5)[0], device="cuda:0", dynamic=True)
    prog.artifact(**case("size_count", rng, 5)[1])  # compile-only runs stop here
    for size, count in [(1, 0), (37, 1), (1031, 7), (4099, 3)]:
        _, inputs, expected = case("size_count", rng, size, count)
        assert_close(prog(**inputs)["y"], expected, floor=error_floor("size_count", inputs))
    stats = prog.stats()
    assert stats.specializations == 1 and stats.compiles + stats.disk_hits == 1, stats
