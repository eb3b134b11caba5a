"""Robustness of the whole front end: parse + check (+ cir generation for what checks)
fail only with ZynMLError, whatever the program, and never hang.

The parser's own fuzzing (test_parser_fuzz.py) mostly produces programs that do not
parse; these properties mutate *valid* programs at the token and line level, so the
checker and cirgen see programs that parse but are wrong in every way. With the parser's
properties, a test run feeds the front end well over 10,000 inputs. Inputs that ever broke
it are kept in REGRESSIONS.
"""
import re
from pathlib import Path


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zynml import compiler, knobs
from zynml.errors import ZynMLError
from zynml.frontend.types import F32, TensorType

ROOT = Path(__file__).resolve().parents[1] / "programs"
SEEDS = sorted(ROOT.glob("examples/*.zyn")) + sorted(ROOT.glob("transformer/*.zyn"))
PROGRAMS = [p.read_text() for p in SEEDS]
# rope_spec_verbatim.zyn is the spec's RoPE, which is wrong on purpose (a float index).
VALID = [p.read_text() for p in SEEDS if "verbatim" not in p.name]
SCALE = knobs.FUZZ_SCALE.get()
SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))

TOKEN = re.compile(r"\w+|\d+\.\d+|\.\.|[-+*/%^@<>=!]=?|[()\[\]{},:]|\n|[ ]+|.")
REPLACEMENTS = ["x", "out", "i", "j", "len", "0", "1", "1.5", "-inf", "true", "+", "*", "/",
                "(", ")", "[", "]", ",", ":", "..", "=", "+=", "yield", "for", "in", "let",
                "var", "if", "else", "and", "not", "reduce", "dot", "max", "exp", "@kernel",
                "matmul", "elementwise", "reduce(+)", "reduce(argmax)", "axis=1", "step 2",
                "shared var", "barrier()", "compute", "await", "model.layers[0]", "x[i]",
                "out[i, j]", "sqrt(n)", "inf", "  ", "\n", "    ",
                # tile statements (frontend/tiles.py)
                "x[0:4]", "x[i:i+4]", "out[i:i+4]", "@", "transpose", "row_max", "row_sum",
                "zeros(4, 2)", "step 4", "a:b", ":"]

REGRESSIONS = [
    # whole-tensor `out = ...` with a scalar value
    "let y = compute(x) {\n    @kernel fused\n    out = 1.0\n}\n",
    # tensor local used as a scalar
    "let y = compute(x) {\n    @kernel fused\n    let t = x * 2.0\n    for i in 0..n:\n"
    "        out[i] = t\n}\n",
    # reduce() of a scalar
    "let y = compute(x) {\n    @kernel fused\n    let m = reduce(max, 1.0)\n    out = x\n}\n",
    # dot of a non-row
    "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
    "        out[i] = dot(x, x)\n}\n",
    # await of a non-future, any of a non-list
    "let y = await x\n",
    "let (a, b) = await any(x)\n",
    # a call without arguments next to a tile var (frontend/tiles.py)
    "let y = compute(x) {\n    @kernel fused\n    for i in 0..n step 4:\n"
    "        var l = x[i:i+4]\n        l = l + f()\n        out[i:i+4] = l\n}\n",
    # assigning a whole-tensor let (found by this fuzzer in CI)
    "let y = compute(x) {\n    @kernel fused\n    let t = x - 1.0\n    t = x - 2.0\n"
    "    out = t\n}\n",
    # split of an unknown value
    "pipeline p(x: tensor[n]) -> tensor[n]:\n    let (a, b) = split(q, 2)\n    return a\n",
]


def _tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _front_end(text: str, with_cir: bool = False) -> None:
    try:
        src, program = compiler.parse_source(text)
        checked = compiler.check_program(src, program)
        if with_cir:
            compiler.to_cir(checked)
    except ZynMLError:
        pass


@st.composite
def mutated_program(draw):
    tokens = _tokens(draw(st.sampled_from(PROGRAMS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["replace", "delete", "insert", "duplicate", "swap"]))
        i = draw(st.integers(0, len(tokens) - 1))
        if kind == "replace":
            tokens[i] = draw(st.sampled_from(REPLACEMENTS))
        elif kind == "delete":
            del tokens[i:i + draw(st.integers(1, 3))]
        elif kind == "insert":
            tokens.insert(i, draw(st.sampled_from(REPLACEMENTS)))
        elif kind == "duplicate":
            j = draw(st.integers(i, min(len(tokens), i + 12)))
            tokens[i:i] = tokens[i:j]
        else:
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        if not tokens:
            tokens = ["x"]
    return "".join(tokens)


@st.composite
def line_shuffled_program(draw):
    lines = draw(st.sampled_from(PROGRAMS)).splitlines()
    n = len(lines)
    for _ in range(draw(st.integers(1, 3))):
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        op = draw(st.sampled_from(["move", "drop", "copy", "dedent", "indent"]))
        if op == "move":
            lines.insert(j, lines.pop(i))
        elif op == "drop":
            lines[i] = ""
        elif op == "copy":
            lines.insert(j, lines[i])
        elif op == "dedent":
            lines[i] = lines[i][4:]
        else:
            lines[i] = "    " + lines[i]
    return "\n".join(lines) + "\n"


@settings(max_examples=int(3500 * SCALE), **SETTINGS)
@given(mutated_program())
def test_token_mutations_fail_only_with_zynml_errors(text):
    _front_end(text)


@settings(max_examples=int(1500 * SCALE), **SETTINGS)
@given(line_shuffled_program())
def test_line_mutations_fail_only_with_zynml_errors(text):
    _front_end(text)


@settings(max_examples=int(300 * SCALE), **SETTINGS)
@given(mutated_program())
def test_cir_generation_fails_only_with_zynml_errors(text):
    _front_end(text, with_cir=True)


@settings(max_examples=int(300 * SCALE), **SETTINGS)
@given(st.sampled_from(VALID), st.lists(st.integers(1, 4), min_size=0, max_size=4))
def test_specialization_fails_only_with_zynml_errors(text, shape):
    """Every example checked against inputs of arbitrary ranks and shapes."""
    src, program = compiler.parse_source(text)
    generic = compiler.check_program(src, program)
    signature = {name: TensorType(F32, tuple(shape)) if shape else F32
                 for name in generic.inputs}
    scalars = {name: 3 for name, t in generic.inputs.items() if not hasattr(t, "shape")}
    try:
        checked = compiler.check_program(src, program, signature, scalars, records={})
        compiler.to_cir(checked)
    except ZynMLError:
        pass


@pytest.mark.parametrize("text", REGRESSIONS)
def test_regressions(text):
    _front_end(text, with_cir=True)


def test_examples_are_valid():
    """The seeds themselves check cleanly (else the mutations test little)."""
    for text in VALID:
        src, program = compiler.parse_source(text)
        compiler.check_program(src, program)



