"""Dynamic sizes on the CPU (zynml/specialize.py): one compile serves every size, the
automatic policy, pinned sizes, the recompile log, the specialization cap."""
import logging
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import zynml
from conftest import assert_close, attention_reference
from zynml.errors import ZynMLError, ZynMLNote

PROGRAMS = Path(__file__).resolve().parent / "programs"
# 1, primes, non-multiples of every tile, a large one (the last: 4099 = 2^12 + 3)
SIZES = [1, 2, 7, 31, 97, 127, 4099]

ELEMENTWISE = """
let y = compute(x, z) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * z[i] + 1.5
}
"""
ROW_SUMS = """
let s = compute(m) {
    @kernel reduce(+, axis=1)
    for i in 0..rows, j in 0..cols:
        yield m[i, j]
}
let total = compute(m) {
    @kernel reduce(max)
    for i in 0..rows, j in 0..cols:
        yield m[i, j]
}
"""
MATMUL = (PROGRAMS / "examples" / "matmul.zyn").read_text()


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def one_compile(prog):
    stats = prog.stats()
    assert stats.specializations == 1 and stats.compiles + stats.disk_hits == 1, stats
    assert stats.memory_hits == stats.calls - 1, stats


def test_elementwise_one_compile_every_size(rng):
    prog = zynml.compile(ELEMENTWISE, device="cpu", dynamic=["n"])
    for n in SIZES + [3]:
        x, z = f32(rng, n), f32(rng, n)
        assert_close(prog(x=x, z=z)["y"], x.astype(np.float64) * z + 1.5)
    one_compile(prog)
    assert prog.stats().dynamic == ("n",)


def test_reductions_one_compile(rng):
    prog = zynml.compile(ROW_SUMS, device="cpu", dynamic=True)
    for rows, cols in [(1, 1), (7, 31), (97, 2), (3, 4099)]:
        m = f32(rng, rows, cols)
        out = prog(m=m)
        # against the sum of magnitudes: a sum that cancels keeps only f32's error in it
        assert_close(out["s"], m.astype(np.float64).sum(axis=1),
                     floor=np.abs(m).sum(axis=1).max())
        assert_close(out["total"], m.max())
    one_compile(prog)


def test_matmul_one_compile(rng):
    prog = zynml.compile(MATMUL, device="cpu", dynamic=True)
    for m, k, n in [(1, 1, 1), (7, 31, 2), (97, 13, 127), (257, 129, 65)]:
        a, b = f32(rng, m, k), f32(rng, k, n)
        assert_close(prog(A=a, B=b)["C"], a.astype(np.float64) @ b)
    one_compile(prog)


def test_softmax_pipeline_one_compile(rng):
    prog = zynml.compile(PROGRAMS / "softmax_pipeline.zyn", device="cpu", dynamic=True)
    for rows, cols in [(1, 1), (2, 7), (31, 97), (5, 4099)]:
        x = f32(rng, rows, cols).astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        assert_close(prog.softmax(x.astype(np.float32)), e / e.sum(axis=1, keepdims=True))
    one_compile(prog.pipeline("softmax"))


def test_layernorm_one_compile(rng):
    prog = zynml.compile(PROGRAMS / "bias_residual_layernorm.zyn", device="cpu",
                         dynamic=True)
    for batch, seq, hidden in [(1, 1, 2), (2, 7, 31), (3, 5, 97)]:
        x, res = f32(rng, batch, seq, hidden), f32(rng, batch, seq, hidden)
        bias, w, b = f32(rng, hidden), f32(rng, hidden), f32(rng, hidden)
        v = x.astype(np.float64) + bias + res
        mean, var = v.mean(-1, keepdims=True), v.var(-1, keepdims=True)
        out = prog(x=x, bias=bias, residual=res, ln_weight=w, ln_bias=b)["normed"]
        assert_close(out, (v - mean) / np.sqrt(var + 1e-12) * w + b, rtol=1e-4)
    one_compile(prog)


# (the causal example compiles too, but iree-compile takes a minute on it when every size
# is dynamic: too slow for CI)
@pytest.mark.parametrize("name", ["attention_no_mask.zyn"])
def test_attention_one_compile(rng, name):
    prog = zynml.compile(PROGRAMS / name, device="cpu", dynamic=True)
    for batch, heads, seq, dim in [(1, 1, 1, 1), (2, 3, 7, 5), (1, 2, 31, 16)]:
        q, k, v = (f32(rng, batch, heads, seq, dim) for _ in range(3))
        mask = np.tril(np.ones((seq, seq), bool)) if "causal" in name else None
        assert_close(prog(Q=q, K=k, V=v)["attn"], attention_reference(q, k, v, mask),
                     rtol=1e-4)
    one_compile(prog)


def test_emit_keeps_declared_sizes_dynamic():
    prog = zynml.compile(MATMUL, device="cpu", dynamic=["A.shape[0]"])  # that is 'M'
    text = prog.emit("linalg", {"A": np.ones((3, 4), np.float32),
                                "B": np.ones((4, 5), np.float32)})
    assert "(%arg0: tensor<?x4xf32>, %arg1: tensor<4x5xf32>) -> tensor<?x5xf32>" in text


def test_a_dynamic_compile_shows_question_marks():
    prog = zynml.compile(MATMUL, device="cpu", dynamic=["M"], static=["N"])
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    general = prog._shapes.generalize(prog._signature({"A": a, "B": b})[1])
    assert str(general["A"]) == "tensor[?, 4] of f32" and str(general["B"]) == \
        "tensor[4, 5] of f32"


# ---------------------------------------------------------------------- the policy

def test_a_second_value_makes_a_size_dynamic_with_one_note(rng):
    prog = zynml.compile(ELEMENTWISE, device="cpu")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for n in [5, 5, 6, 7, 1, 4099]:
            x, z = f32(rng, n), f32(rng, n)
            assert_close(prog(x=x, z=z)["y"], x.astype(np.float64) * z + 1.5)
    notes = [str(w.message) for w in seen if issubclass(w.category, ZynMLNote)]
    assert len(notes) == 1 and "'n' (6 after 5)" in notes[0] and "dynamic" in notes[0]
    stats = prog.stats()
    assert stats.specializations == 2 and stats.dynamic == ("n",), stats
    assert stats.memory_hits == 4, stats


def test_a_pinned_size_stays_static(rng):
    prog = zynml.compile(MATMUL, device="cpu", static=["K"])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for m, k, n in [(2, 3, 4), (5, 3, 7), (6, 3, 8), (6, 4, 8), (9, 4, 2)]:
            a, b = f32(rng, m, k), f32(rng, k, n)
            assert_close(prog(A=a, B=b)["C"], a.astype(np.float64) @ b)
    notes = [str(w.message) for w in seen if issubclass(w.category, ZynMLNote)]
    assert len(notes) == 1 and "'K'" not in notes[0], notes
    # static 3, then (M, N) dynamic at K=3, then K=4 once: three executables
    assert prog.stats().specializations == 3 and prog.stats().dynamic == ("M", "N")


def test_dynamic_false_specializes_every_size_silently(rng):
    prog = zynml.compile(ELEMENTWISE, device="cpu", dynamic=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZynMLNote)
        for n in [2, 3]:
            prog(x=f32(rng, n), z=f32(rng, n))
    assert prog.stats().specializations == 2 and prog.stats().dynamic == ()


def test_a_size_that_breaks_a_relation_is_the_error_of_today(rng):
    prog = zynml.compile(MATMUL, device="cpu", dynamic=True)
    prog(A=f32(rng, 2, 3), B=f32(rng, 3, 4))
    with pytest.raises(ZynMLError, match="size 'K' is bound two ways"):
        prog(A=f32(rng, 2, 3), B=f32(rng, 5, 4))
    assert prog.stats().specializations == 1


def test_bad_size_names_are_errors():
    with pytest.raises(ZynMLError, match="names 'q'.*its sizes: K, M, N"):
        zynml.compile(MATMUL, device="cpu", dynamic=["q"])
    with pytest.raises(ZynMLError, match="takes a list of size names"):
        zynml.compile(MATMUL, device="cpu", static="K")
    with pytest.raises(ZynMLError, match="both dynamic and static"):
        zynml.compile(MATMUL, device="cpu", dynamic=["K"], static=["K"])
    zynml.compile(MATMUL, device="cpu", dynamic=["A.shape[0]"])  # a dimension's name


def test_an_input_dimension_no_size_names(rng):
    src = """
let y = compute(x, w) {
    @kernel conv1d
    for o in 0..out_len:
        var s = 0.0
        for k in 0..taps:
            s += x[o + k] * w[k]
        out[o] = s
}
"""
    prog = zynml.compile(src, device="cpu", dynamic=["x.shape[0]", "taps"])
    for size, taps in [(9, 3), (31, 7), (10, 1)]:
        x, w = f32(rng, size), f32(rng, taps)
        expected = np.convolve(x.astype(np.float64), w[::-1], mode="valid")[:4]
        assert_close(prog(x=x, w=w, out_len=4)["y"], expected)
    one_compile(prog)


def test_declared_in_the_source(rng):
    src = """
pipeline scale(x: tensor[?rows, d], s: float) -> tensor[rows, d]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..rows, j in 0..d:
            out[i, j] = x[i, j] * s
    }
    return y
"""
    prog = zynml.compile(src, device="cpu")
    for rows in [1, 7, 97]:
        x = f32(rng, rows, 3)
        assert_close(prog.scale(x, 2.0), x.astype(np.float64) * 2)
    one_compile(prog.pipeline("scale"))
    assert prog.pipeline("scale").stats().dynamic == ("rows",)


SPLIT = """
pipeline parts(t: tensor[n, w]) -> tensor[n, half]:
    let (lo, hi) = split(t, 2, axis=1)
    let y = compute(lo, hi) {
        @kernel elementwise
        for i in 0..n, j in 0..half:
            out[i, j] = lo[i, j] - hi[i, j]
    }
    return y
"""


def test_a_size_declared_dynamic_where_a_static_one_is_needed(rng):
    prog = zynml.compile(SPLIT, device="cpu", dynamic=["w"])
    with pytest.raises(ZynMLError) as err:
        prog.parts(f32(rng, 3, 4))
    assert str(err.value).startswith("<string>:3:5: error: size 'w' cannot be dynamic "
                                     "here (it is declared dynamic): split needs")


def test_an_automatic_size_falls_back_to_static_with_a_note(rng):
    prog = zynml.compile(SPLIT, device="cpu")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for n, w in [(3, 4), (3, 6), (3, 2), (5, 2)]:
            t = f32(rng, n, w)
            assert_close(prog.parts(t), t[:, :w // 2].astype(np.float64) - t[:, w // 2:])
    notes = [str(w.message) for w in seen if issubclass(w.category, ZynMLNote)]
    assert len(notes) == 2, notes
    assert "size 'w' compiled static for each value: it cannot be dynamic here (split" \
        in notes[0] and "size 'n' compiled static" in notes[1]
    assert prog.pipeline("parts").stats().specializations == 4


# ---------------------------------------------------------------------- log and cap

def test_the_recompile_log(rng, caplog):
    prog = zynml.compile(ELEMENTWISE, device="cpu")
    with caplog.at_level(logging.INFO, logger="zynml.recompiles"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", ZynMLNote)
        for n in [127, 127, 128, 129]:
            prog(x=f32(rng, n), z=f32(rng, n))
    lines = [r.getMessage() for r in caplog.records if r.name == "zynml.recompiles"]
    assert lines == [
        "compile 1 (first call): x: tensor[127] of f32, z: tensor[127] of f32",
        "compile 2: x.shape[0] (size 'n'): 127 -> 128, compiled dynamic; "
        "z.shape[0] (size 'n'): 127 -> 128, compiled dynamic"], lines


def test_zynml_log_prints_on_stderr(rng, monkeypatch, capsys):
    monkeypatch.setenv("ZYNML_LOG", "recompiles")
    prog = zynml.compile(ELEMENTWISE, device="cpu", static=["n"])
    for n in [3, 4]:
        prog(x=f32(rng, n), z=f32(rng, n))
    err = capsys.readouterr().err
    assert "zynml.recompiles: x.shape[0] (size 'n'): 3 -> 4, compiled static" in \
        err.replace("compile 2: ", "zynml.recompiles: "), err


def test_dynamic_false_keeps_every_size_static_past_the_cap(rng, monkeypatch):
    monkeypatch.setenv("ZYNML_SPECIALIZATION_LIMIT", "3")
    prog = zynml.compile(ELEMENTWISE, device="cpu", dynamic=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for n in [2, 3, 4, 5, 6]:
            x, z = f32(rng, n), f32(rng, n)
            assert_close(prog(x=x, z=z)["y"], x.astype(np.float64) * z + 1.5)
    assert not [w for w in seen if issubclass(w.category, ZynMLNote)]
    assert prog.stats().specializations == 5 and prog.stats().dynamic == ()


def test_the_specialization_cap(rng, monkeypatch):
    """On native CUDA the automatic policy keeps sizes static (each value compiles); at
    ZYNML_SPECIALIZATION_LIMIT executables the program notes it once and compiles the
    sizes dynamic from then on. (Compiled here without a GPU: compile_only.py.)"""
    from zynml.compile_only import cpu_values_cuda_artifacts
    monkeypatch.setenv("ZYNML_SPECIALIZATION_LIMIT", "3")
    with cpu_values_cuda_artifacts(), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        prog = zynml.compile(ELEMENTWISE, device="cuda:0")
        for n in [2, 3, 4, 5, 6, 7, 8]:
            x, z = f32(rng, n), f32(rng, n)
            assert_close(prog(x=x, z=z)["y"], x.astype(np.float64) * z + 1.5)
    notes = [str(w.message) for w in seen if issubclass(w.category, ZynMLNote)
             and "SPECIALIZATION" in str(w.message)]
    assert len(notes) == 1 and "ZYNML_SPECIALIZATION_LIMIT=3" in notes[0], notes
    assert prog.stats().specializations == 4 and prog.stats().dynamic == ("n",)


def test_disk_hits_are_counted(rng):
    first = zynml.compile(ELEMENTWISE, device="cpu", dynamic=True)
    first(x=f32(rng, 3), z=f32(rng, 3))
    again = zynml.compile(ELEMENTWISE, device="cpu", dynamic=True)
    again(x=f32(rng, 11), z=f32(rng, 11))
    assert again.stats().disk_hits == 1 and again.stats().compiles == 0


def test_the_native_cuda_backend_compiles_sizes_dynamic_when_asked(rng):
    """A size declared dynamic compiles with run-time extents (compiled here, no GPU
    needed); a second value of a size not asked for compiles static again, with one note
    (the native backend's dynamic kernels are slower for some loop nests)."""
    prog = zynml.compile(MATMUL, device="cuda", require_device=False, dynamic=["M"])
    gpu = prog.emit("gpu", {"A": np.ones((3, 4), np.float32), "B": np.ones((4, 5),
                                                                          np.float32)})
    assert "memref<?x4xf32>" in gpu and "memref.dim" in gpu
    prog = zynml.compile(MATMUL, device="cuda", require_device=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for m in (3, 5, 7):  # the key a call of these shapes takes (no GPU to call)
            shapes = {"A": np.ones((m, 4), np.float32), "B": np.ones((4, 5), np.float32)}
            general = prog._shapes.generalize(prog._signature(shapes)[1])
            assert general["A"].shape == (m, 4), general
    notes = [str(w.message) for w in seen if issubclass(w.category, ZynMLNote)]
    assert len(notes) == 1 and "the native CUDA backend makes a size dynamic only when " \
        "asked" in notes[0], notes
    assert prog.stats().dynamic == ()


def test_tile_level_bodies_stay_static(rng):
    """The spec's tile-level flash attention needs static sizes (its tiles' extents are
    checked per call): a second size compiles again, with one note; declared dynamic, a
    located error naming the size."""
    source = PROGRAMS / "examples" / "flash_attention.zyn"
    prog = zynml.compile(source, device="cpu")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for seq, dim in [(3, 4), (65, 5)]:
            q, k, v = (f32(rng, 1, 2, seq, dim) for _ in range(3))
            assert_close(prog(Q=q, K=k, V=v)["attn"], attention_reference(q, k, v))
    notes = [str(w.message) for w in seen if issubclass(w.category, ZynMLNote)]
    assert len(notes) == 1 and "tile-level bodies (docs/language.md §3) need static " \
        "sizes, so each new value compiles again" in notes[0], notes
    assert prog.stats().specializations == 2 and prog.stats().dynamic == ()
    size = next(iter(prog.generic.sizes))
    with pytest.raises(ZynMLError, match=re.escape(f"size '{size}' is declared dynamic, but "
                                                   "this block's tile-level body needs")):
        zynml.compile(source, device="cpu", dynamic=[size])


def test_a_dynamic_matmul_reads_its_inputs_whole():
    """K binds A's dimension 1 and B's dimension 0, which the call checks equal: the
    lowering reads both inputs whole, as linalg.matmul of the arguments (a slice of B
    sized by A's dimension hides that from IREE, whose data tiling then refuses the
    matmul: 5x slower at 1024^2)."""
    prog = zynml.compile(MATMUL, device="cpu", dynamic=True)
    linalg = prog.emit("linalg")
    assert "cir.equal_dims" in linalg and "tensor.extract_slice" not in linalg
    assert re.search(r"linalg\.matmul ins\(%arg0, %arg1 ", linalg), linalg
