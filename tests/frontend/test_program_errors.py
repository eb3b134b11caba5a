"""Located errors of the program level: pipelines, split/reshape, records, config, awaits,
annotations. Each is checked at its exact LINE:COL."""
import numpy as np
import pytest

import zynml
from conftest import assert_compile_error

PIPELINE = """pipeline p(x: tensor[n, m]) -> tensor[n, m]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n, j in 0..m:
            out[i, j] = x[i, j]
    }
"""
COPY = """pipeline p(x: tensor[n]) -> tensor[n]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i]
    }
"""
ASYNC = """let f = compute(x) @async {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i]
}
"""

COMPILE_ERRORS = {
    "split into more parts than names": (
        PIPELINE + "    let (a, b) = split(y, 3, axis=-1)\n    return a\n",
        "7:5", "split into 3 parts is bound to 2 names"),
    "split axis out of range": (
        PIPELINE + "    let (a, b) = split(y, 2, axis=5)\n    return a\n",
        "7:18", "axis 5 is out of range for rank 2"),
    "pipeline without return": (COPY, "1:1", "pipeline 'p' has no 'return'"),
    "pipeline's update in place not returned": (
        COPY + "    compute(mut x) {\n        @kernel elementwise\n        for i in 0..n:\n"
        "            x[i] = x[i] + 1.0\n    }\n    return y\n", "7:17",
        "pipeline 'p' updates its parameter 'x' in place ('mut') but does not return it, "
        "so the update is lost: add 'x' to its 'return'"),
    "unknown parameter type": ("pipeline p(x: matrix) -> tensor[n]:\n    return x\n",
                               "1:15", "unknown parameter type 'matrix'"),
    "pipeline defined twice": ("pipeline p(x: int) -> int:\n    return x\n"
                               "pipeline p(x: int) -> int:\n    return x\n",
                               "3:1", "pipeline 'p' is defined twice"),
    "pipeline call arity": (COPY + "    return y\nlet z = p(a, b)\n", "8:9",
                            "pipeline 'p' takes 1 arguments, got 2"),
    "unknown config key": ('config {\n    speed: "fast"\n}\n', "2:5",
                           "unknown config key 'speed'"),
    "timeout without a duration": (ASYNC + "let r = await f timeout 5 else 0.0\n", "6:25",
                                   "a timeout is a duration such as 1000ms"),
    "unknown annotation": ("let y = compute(x) {\n    @kernel elementwise\n    @foo(1)\n"
                           "    for i in 0..n:\n        out[i] = x[i]\n}\n", "3:5",
                           "unknown annotation '@foo'"),
    "workgroup of four sizes": ("let y = compute(x) {\n    @kernel elementwise\n"
                                "    @workgroup(1, 2, 3, 4)\n    for i in 0..n:\n"
                                "        out[i] = x[i]\n}\n", "3:5",
                                "@workgroup takes 1 to 3 integer sizes"),
    "await all of a non-list": (ASYNC + "let r = await all(f)\n", "6:15",
                                "'all' takes a list of futures"),
}


@pytest.mark.parametrize("name", sorted(COMPILE_ERRORS))
def test_program_level_error(name):
    source, where, message = COMPILE_ERRORS[name]
    assert_compile_error(source, where, message)


def test_reshape_to_another_size_at_the_call():
    prog = zynml.compile(PIPELINE + "    let r = reshape(y, [5, 5])\n    return r\n")
    with pytest.raises(zynml.ZynMLError) as info:
        prog.p(np.ones((2, 3), np.float32))
    assert str(info.value).startswith(
        "<string>:7:13: error: cannot reshape 'y' of shape [2, 3] to [5, 5]")


def test_missing_record_member_at_the_call():
    prog = zynml.compile("""pipeline p(x: tensor[n]) -> tensor[n]:
    let w = model.layers[0]
    let y = compute(x, w.scale) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] * w.scale[i]
    }
    return y
""")
    with pytest.raises(zynml.ZynMLError) as info:
        prog.p(np.ones(3, np.float32), model={"layers": [{"bias": np.ones(3)}]})
    assert str(info.value).startswith("<string>:2:13: error: 'model.layers[0]' has no member "
                                      ".scale")


def test_missing_record_at_the_call():
    prog = zynml.compile("pipeline p(x: tensor[n]) -> tensor[n]:\n    let w = model.w\n"
                         "    let y = compute(x, w) {\n        @kernel elementwise\n"
                         "        for i in 0..n:\n            out[i] = x[i] * w[i]\n    }\n"
                         "    return y\n")
    with pytest.raises(zynml.ZynMLError) as info:
        prog.p(np.ones(3, np.float32))
    assert "missing input 'model' (a record)" in str(info.value)
    assert str(info.value).startswith("<string>:")
