"""`use kernels.NAME`: a library source's pipelines join the program's."""
from __future__ import annotations

import numpy as np
import pytest

import zynml
from zynml import compiler
from zynml.errors import ZynMLError


def test_used_pipeline_runs_as_the_programs_own():
    rng = np.random.default_rng()
    gate, up = rng.standard_normal((2, 7, 13)).astype(np.float32)
    out = zynml.run("use kernels.swiglu\nlet z = swiglu(a, b)\n", a=gate, b=up, device="cpu")
    g = gate.astype(np.float64)
    np.testing.assert_allclose(out["z"], g / (1 + np.exp(-g)) * up, rtol=1e-5, atol=1e-6)


def test_library_text_is_part_of_the_cache_key(tmp_path, monkeypatch):
    """Editing a used library source must not reuse artifacts built from the old one."""
    from zynml.frontend import library
    (tmp_path / "twice.zyn").write_text(
        "pipeline twice(x: tensor[n]) -> tensor[n]:\n"
        "    let y = compute(x) {\n        @kernel elementwise\n        for i in 0..n:\n"
        "            out[i] = x[i] * 2.0\n    }\n    return y\n")
    monkeypatch.setitem(library.LIBRARIES, "kernels", tmp_path)
    src, _ = compiler.parse_source("use kernels.twice\nlet z = twice(a)\n")
    assert [used.name for used in src.uses] == [str(tmp_path / "twice.zyn")]
    edited = (tmp_path / "twice.zyn").read_text().replace("2.0", "3.0")
    (tmp_path / "twice.zyn").write_text(edited)
    src2, _ = compiler.parse_source("use kernels.twice\nlet z = twice(a)\n")
    assert src.text == src2.text and src.uses[0].text != src2.uses[0].text
    backend, target = compiler.BACKENDS["iree"], zynml.compile(
        "use kernels.twice\nlet z = twice(a)\n", device="cpu").target
    keys = {compiler.artifact_key(backend, s, "", {}, {}, target) for s in (src, src2)}
    assert len(keys) == 2


@pytest.mark.parametrize("line, message", [
    ("use kernels.no_such", "the library has no kernel 'no_such'; it has: "),
    ("use stdlib.swiglu", "unknown library 'stdlib'"),
    ("use kernels", "'use kernels' names no kernel"),
])
def test_bad_use_is_a_located_error(line, message):
    with pytest.raises(ZynMLError) as err:
        zynml.compile(f"{line}\nlet z = compute(a) {{ @kernel elementwise for i in 0..n: "
                      f"out[i] = a[i] }}\n", device="cpu")
    text = str(err.value)
    assert message in text and "<string>:1:1: error:" in text and "^" in text


def test_pipeline_defined_twice_is_a_located_error():
    src = ("use kernels.swiglu\n"
           "pipeline swiglu(a: tensor[n]) -> tensor[n]:\n"
           "    let y = compute(a) { @kernel elementwise for i in 0..n: out[i] = a[i] }\n"
           "    return y\n")
    with pytest.raises(ZynMLError, match=r"<string>:2:1: error: pipeline 'swiglu' is "
                                         r"defined here and in kernels.swiglu"):
        zynml.compile(src, device="cpu")


def test_use_is_a_name_elsewhere():
    """`use` is a keyword only at the start of a top-level line followed by a name."""
    out = zynml.run("let use = compute(x) { @kernel elementwise for i in 0..n: "
                    "out[i] = x[i] + 1.0 }\n", x=np.float32([1.5, -2.0]), device="cpu")
    np.testing.assert_array_equal(out["use"], [2.5, -1.0])
