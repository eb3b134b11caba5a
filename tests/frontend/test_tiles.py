"""Tile statements (zynml/frontend/tiles.py): the rewriting into element form, the values
it computes on the CPU against float64 numpy, and every misuse as a located error.
The spec's flash attention and its variants are run in tests/test_spec_examples.py."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from conftest import assert_close
from zynml.compiler import check_program, parse_source
from zynml.frontend import ast

EXAMPLES = Path(__file__).resolve().parents[1] / "programs" / "examples"


def kernel(body: str, inputs: str = "x") -> str:
    """A compute block around `body` (indented by 4)."""
    lines = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return f"let y = compute({inputs}) {{\n    @kernel fused\n{lines}\n}}\n"


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def run(src: str, **inputs):
    return zynml.compile(src)(**inputs)["y"]


# ---------------------------------------------------------------------------- values

def test_elementwise_tiles_with_a_partial_last_tile(rng):
    src = kernel("for i in 0..n step 4:\n    out[i:i+4] = exp(x[i:i+4]) * 2.0 - x[i:i+4]")
    for n in (1, 4, 13):
        x = f32(rng, n)
        assert_close(run(src, x=x), np.exp(x.astype(np.float64)) * 2 - x)


def test_rows_of_a_matrix_as_tiles_with_row_statistics(rng):
    """A rank-1 tile next to a rank-2 one is one value per row (softmax by tiles)."""
    src = kernel("for i in 0..rows step 8:\n"
                 "    let t = x[i:i+8]\n"
                 "    let e = exp(t - row_max(t))\n"
                 "    out[i:i+8] = e / row_sum(e)")
    x = f32(rng, 19, 7)
    e = np.exp(x - x.max(axis=1, keepdims=True).astype(np.float64))
    assert_close(run(src, x=x), e / e.sum(axis=1, keepdims=True))


def test_row_min_transpose_and_a_constant_start(rng):
    src = kernel("out[0:3] = row_min(transpose(x[0:5, 0:3])) + row_sum(zeros(3, 2))")
    x = f32(rng, 6, 4)
    assert_close(run(src, x=x), x[:5, :3].astype(np.float64).min(axis=0))


def test_a_partial_key_tile_is_left_out_of_reductions(rng):
    """Keys 0..9 in tiles of 4: the last tile has 2 rows, and neither row_max nor '@'
    may read past them (a clamped read would count key 9 twice)."""
    src = kernel("for i in 0..n step 2:\n"
                 "    var acc = zeros(2, d)\n"
                 "    for j in 0..m step 4:\n"
                 "        acc = acc + q[i:i+2] @ transpose(k[j:j+4]) @ k[j:j+4]\n"
                 "    out[i:i+2] = acc", inputs="q, k")
    q, k = f32(rng, 5, 3), f32(rng, 10, 3)
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    assert_close(run(src, q=q, k=k), q64 @ k64.T @ k64)


def test_a_tile_let_is_substituted_where_a_var_it_reads_is_still_current(rng):
    """P reads m_new (per point) and is read across its columns: substituted, not kept."""
    src = kernel("for i in 0..n step 4:\n"
                 "    var m = -inf\n"
                 "    var l = 0.0\n"
                 "    for j in 0..n step 4:\n"
                 "        let S = x[i:i+4] @ transpose(x[j:j+4])\n"
                 "        let m_new = max(m, row_max(S))\n"
                 "        let P = exp(S - m_new)\n"
                 "        l = exp(m - m_new) * l + row_sum(P)\n"
                 "        m = m_new\n"
                 "    out[i:i+4] = m + log(l)")
    x = f32(rng, 7, 3)
    s = x.astype(np.float64) @ x.T.astype(np.float64)
    top = s.max(axis=1)
    assert_close(run(src, x=x), top + np.log(np.exp(s - top[:, None]).sum(axis=1)))


def test_the_rewritten_body_has_no_tiles_and_keeps_one_state_per_point():
    """O(n) memory: the online softmax's m, l and o are scalars per point, carried through
    the key loop; nothing of size seq x seq is allocated."""
    src, program = parse_source(EXAMPLES / "flash_attention.zyn")
    checked = check_program(src, program)
    body = checked.steps[0].kernel.body

    def walk(x):
        if isinstance(x, list):
            for item in x:
                yield from walk(item)
        elif isinstance(x, ast.Node):
            yield x
            for value in vars(x).values():
                if isinstance(value, (ast.Node, list)):
                    yield from walk(value)
    nodes = list(walk(body))
    assert not any(isinstance(n, ast.Slice) for n in nodes)
    assert not any(isinstance(n, ast.SharedVar) for n in nodes)
    assert not any(isinstance(n, ast.Binary) and n.op == "@" for n in nodes)
    carried = {n.name for n in nodes if isinstance(n, ast.Var)}
    assert {"m", "l", "o"} <= carried


# ---------------------------------------------------------------------------- errors

ERRORS = {
    "a tile outside a loop that writes one": (
        kernel("for i in 0..n:\n    let t = x[0:4]\n    out[i] = x[i]"),
        "4:19", "tiles (slices, '@', zeros, transpose, row_max, row_sum) are used in a loop "
                "whose body writes a tile of 'out'"),
    "step and tile length differ": (
        kernel("for i in 0..n step 8:\n    out[i:i+4] = x[i:i+4]"),
        "4:13", "the loop over 'i' steps by 8 but the tile of 'out' it writes has 4 rows"),
    "a tile write at another loop's variable": (
        kernel("for j in 0..n step 4, i in 0..n:\n    out[j:j+4] = x[j:j+4]"),
        "4:13", "a tile write of 'out' starts at a constant, or at the variable of the loop"),
    "a var read across its rows": (
        kernel("for i in 0..n step 4:\n    var o = zeros(4, 3)\n"
               "    o = transpose(o)\n    out[i:i+4] = o"),
        "5:23", "'o' is a 'var': it holds one element per element of the written tile"),
    "inner dimensions of @ differ": (
        kernel("out[0:4] = row_sum(zeros(4, 3) @ zeros(5, 2))"),
        "3:24", "the inner dimensions of '@' differ: 3 and 5"),
    "@ of a rank-1 tile": (
        kernel("out[0:4] = zeros(4) @ zeros(4, 2)"),
        "3:16", "the left operand of '@' must be a tile of rank 2, got rank 1"),
    "a slice of a local": (
        kernel("for i in 0..n step 4:\n    let t = 2.0\n    out[i:i+4] = t[i:i+4]"),
        "5:22", "only a tensor input can be sliced; 't' is not one"),
    "a tile into a var declared outside": (
        kernel("var o = 0.0\nfor i in 0..n step 4:\n    o = x[i:i+4]\n    out[i:i+4] = x[i:i+4]"),
        "5:9", "'o' is declared outside the loop that writes a tile of 'out'"),
    "two tile writes in one loop": (
        kernel("for i in 0..n step 4:\n    out[i:i+4] = x[i:i+4]\n    out[i:i+4] = x[i:i+4]"),
        "5:9", "a loop writes two tiles of 'out'"),
    "element and tile writes in one loop": (
        kernel("for i in 0..n step 4:\n    out[i] = x[i]\n    out[i:i+4] = x[i:i+4]"),
        "4:9", "'out' is written both as a tile and by element in one loop"),
    "indexing a tile": (
        kernel("for i in 0..n step 4:\n    let t = x[i:i+4]\n    out[i:i+4] = t[0] + t"),
        "5:22", "a tile cannot be indexed"),
    "a changed var read through a tile let": (
        kernel("for i in 0..n step 4:\n    var m = zeros(4)\n"
               "    let P = x[i:i+4] @ transpose(x[0:4]) - m\n    m = row_max(P)\n"
               "    out[i:i+4] = row_sum(P)"),
        "7:30", "the tile 'P' (at 5:9) reads the var 'm', which changes before this use"),
    "an empty slice": (
        kernel("out[0:4] = row_sum(x[0:4, 3:3])"),
        "3:31", "an empty slice: its length is 0"),
    "transpose of a rank-1 tile": (
        kernel("out[0:4] = transpose(zeros(4))"),
        "3:26", "'transpose' needs a tile of rank 2, got rank 1"),
    "a tile in a loop bound": (
        kernel("for i in 0..n step 4:\n    var s = zeros(4)\n"
               "    for j in 0..row_sum(x[i:i+4]):\n        s = s + 1.0\n    out[i:i+4] = s"),
        "5:21", "a loop bound must be a number, not a tile"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_located_tile_errors(name, tmp_path):
    text, where, message = ERRORS[name]
    path = tmp_path / "prog.zyn"
    path.write_text(text)
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(path)(x=np.ones((8, 8), np.float32))
    assert str(err.value).startswith(f"{path}:{where}: error: {message}"), str(err.value)


def test_an_unequal_inner_dimension_is_found_at_the_call(rng, tmp_path):
    """Q's and K's head dimensions name one extent of '@': both bind it."""
    path = tmp_path / "attn.zyn"
    path.write_text(kernel("for i in 0..n step 4:\n"
                           "    out[i:i+4] = q[i:i+4] @ transpose(k[0:4])", inputs="q, k"))
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(path)(q=f32(rng, 8, 3), k=f32(rng, 4, 5))
    assert "is bound two ways" in str(err.value) and str(err.value).startswith(f"{path}:")


def test_extents_named_differently_are_compared_at_the_call(rng, tmp_path):
    """x[:, 0:2] has x's rows; the written tile has 2: equal only when x has 2 rows."""
    path = tmp_path / "rows.zyn"
    path.write_text(kernel("out[0:2] = row_sum(x[:, 0:2])"))
    x = f32(rng, 2, 3)
    assert_close(zynml.compile(path)(x=x)["y"], x[:, :2].astype(np.float64).sum(axis=1))
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(path)(x=f32(rng, 3, 3))
    assert str(err.value).startswith(
        f"{path}:3:16: error: the written value and the tile of 'out' (dimension 0) differ: "
        "2 and x.shape[0] = 3")


def test_a_written_tile_that_reads_past_its_input_is_an_error(rng, tmp_path):
    path = tmp_path / "past.zyn"
    path.write_text(kernel("out[0:4] = x[0:4] * 2.0"))
    x = f32(rng, 4)
    assert_close(zynml.compile(path)(x=x)["y"], x.astype(np.float64) * 2)
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(path)(x=f32(rng, 3))
    assert str(err.value).startswith(
        f"{path}:3:16: error: the written tile (dimension 0) reads past the end of an input: "
        "index 3 is not below x.shape[0] = 3")


def test_a_written_tile_at_a_loop_dependent_start_is_refused(rng, tmp_path):
    """Whether x[j:j+4] stays inside x depends on j: refused before running."""
    path = tmp_path / "loop.zyn"
    path.write_text(kernel("for j in 0..3:\n    out[0:4] = x[j:j+4]"))
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(path)(x=f32(rng, 8))
    assert str(err.value).startswith(
        f"{path}:4:20: error: the written tile (dimension 0) reads past the end of an input: "
        "cannot tell before running whether index j + 4 - 1 < x.shape[0] = 8")
