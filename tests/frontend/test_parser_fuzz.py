"""Robustness: for ANY input, `parse` returns a Program or raises ZynMLError (with
in-bounds locations), never another exception, never a hang.

Two hypothesis properties run together about 10,000 inputs per test run (6,000 token
soups + 4,000 mutated spec programs; set ZYNML_FUZZ_SCALE=10 for a longer hunt). A
falsifying example that hypothesis prints belongs in REGRESSIONS, checked on every run.
"""
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zynml import knobs
from zynml.errors import SourceFile, ZynMLError
from zynml.frontend import ast
from zynml.frontend.parser import parse

SPEC_DIR = Path(__file__).resolve().parents[1] / "programs" / "spec"
SPEC_TEXTS = [p.read_text() for p in sorted(SPEC_DIR.glob("*.zyn"))]

SCALE = knobs.FUZZ_SCALE.get()
SOUP_EXAMPLES = int(6000 * SCALE)
MUTATION_EXAMPLES = int(4000 * SCALE)
FUZZ_SETTINGS = dict(
    deadline=None,
    derandomize=False,
    database=None,  # failures are copied into REGRESSIONS instead
    suppress_health_check=list(HealthCheck),
)
# One parse of any fuzz input must finish well within this (the largest spec program
# parses in ~10 ms): a guard against hangs and super-linear behaviour.
MAX_SECONDS_PER_PARSE = 10.0

# Inputs that broke the parser, or would without its guards (nesting limit, int digit
# limit, layout recovery), checked on every run. Fuzzing (~200,000 inputs so far) has not
# found another; add any it finds here.
REGRESSIONS = [
    "let x = " + "(" * 5000,
    "let x = " + "[" * 5000,
    "let x = " + "-" * 5000 + "1",
    "let x = " + "not " * 5000 + "a",
    "let x = " + "await " * 5000 + "a",
    "let x = " + "a ^ " * 5000 + "a",
    "let x = " + "compute(a) { " * 3000,
    "let x = a" + "[b" * 5000,
    "let x = " + "f(" * 5000,
    "".join("    " * i + f"for i{i} in 0..n:\n" for i in range(1000)),
    "".join("    " * i + "if c:\n" for i in range(1000)),
    "{" * 5000 + "\n" + "}" * 5000,
    ")" * 100 + "]" * 100 + "}" * 100,
    "let n = " + "9" * 10000,
    "let x = 1" + " + 1" * 20000,
    "let x = a" + ".b" * 20000,
    "let s = \"" + "x" * 100000 + "\"",
    "\t\tlet\n\t}\n\t\t\t(",
    "let y = compute(x) {\n    out = x\n  }\n",
    "let y = compute(x) {\n  for i in 0..n:\n      x = 1\n    y = 2\n}\n",
    "foo(\n    compute(x) {\n        out = x\n    }\n  )\n",
    "foo(\n    compute(x) {\nlet z = 1\n",
    "compute(x) {\n}\n}\n}\n",
    "config {\n    a:\n}\n",
    "pipeline p(\n",
    "if a:\nelse:\n",
    "else if",
    "@kernel\n",
    "let (a, b",
    "...\n    ...\n...",
    "\x00\x01\x02",
    "let a = 1\r\nlet b = \x0c2\x1c\x1d\x1e\x85\u2028\u2029",
]

PIECES = [
    # keywords and soft keywords
    "let ", "for ", " in ", "if ", "else", "else if ", "yield ", "return", "compute",
    "pipeline ", "config ", "await ", " and ", " or ", "not ", "true", "false", "var ",
    "shared ", " step ", " timeout ", "inf",
    # names and literals
    "x", "out", "data", "i", "j", "n", "reduce", "max", "argmax", "sqrt", "weights.w",
    "0", "42", "1.5", "1e-6", "2.5e3", "1000ms", "1GB", "7xyz", '"cuda:0"', '"', '"a\\q"',
    # operators and punctuation
    "+", "-", "*", "/", "%", "^", "@", "|>", "==", "!=", "<", "<=", ">", ">=", "=", "+=",
    "-=", "*=", "/=", "->", "..", "...", ".", ",", ":", "(", ")", "[", "]", "{", "}",
    # annotations
    "@kernel ", "@kernel reduce(+, axis=1)", "@device(\"cpu\")", "@async ", "@workgroup(16)",
    # layout and trivia
    " ", "\n", "\n    ", "\n        ", "\n  ", "\t", "// c\n", "$", "#", "\r\n",
]


def check(text: str) -> None:
    """The property: a Program, or a ZynMLError whose locations all lie in the file."""
    src = SourceFile("fuzz.zyn", text)
    start = time.perf_counter()
    try:
        result = parse(src)
    except ZynMLError as err:
        assert err.errors, "a ZynMLError without any error diagnostic"
        lines = text.splitlines() or [""]
        for diag in err.diagnostics:
            loc = diag.loc
            assert loc is not None and 1 <= loc.line <= len(lines), (diag, len(lines))
            assert 1 <= loc.col <= len(lines[loc.line - 1]) + 1, diag
        str(err)  # rendering must work too
    else:
        assert isinstance(result, ast.Program)
    assert time.perf_counter() - start < MAX_SECONDS_PER_PARSE


# Both strategies decode a plain byte string: hypothesis draws (and shrinks) one binary
# value far faster than a list of structured choices, which keeps 10,000 runs cheap.


def soup_from_bytes(data: bytes) -> str:
    """Grammar-ish token soup: each byte picks a piece, or (from 240 up) is a raw char."""
    return "".join(PIECES[b % len(PIECES)] if b < 240 else chr(b - 240 + 0x7F) for b in data)


def edits_from_bytes(data: bytes) -> list:
    """Six bytes per edit: kind, position (2 bytes), length, payload choice (2 bytes)."""
    edits = []
    for i in range(0, len(data) - 5, 6):
        kind, hi, lo, length, pick, raw = data[i:i + 6]
        payload = PIECES[pick % len(PIECES)] if raw & 1 else chr(pick)  # chr: any latin-1
        edits.append((EDIT_KINDS[kind % 4], hi << 8 | lo, length % 41, payload))
    return edits


EDIT_KINDS = ["delete", "insert", "replace", "duplicate"]


def mutate(text: str, edits: list) -> str:
    """Apply (kind, position, length, payload) edits; positions scale to the text."""
    for kind, pos, length, payload in edits:
        pos = pos * (len(text) + 1) >> 16
        end = min(pos + length, len(text))
        if kind == "delete":
            text = text[:pos] + text[end:]
        elif kind == "insert":
            text = text[:pos] + payload + text[pos:]
        elif kind == "replace":
            text = text[:pos] + payload + text[end:]
        else:
            text = text[:end] + text[pos:end] + text[end:]
    return text


@settings(max_examples=SOUP_EXAMPLES, **FUZZ_SETTINGS)
@given(st.binary(max_size=80).map(soup_from_bytes))
def test_token_soup_never_crashes(text):
    check(text)


@settings(max_examples=MUTATION_EXAMPLES, **FUZZ_SETTINGS)
@given(st.sampled_from(SPEC_TEXTS), st.binary(min_size=6, max_size=36), st.integers(0, 3))
def test_mutated_spec_programs_never_crash(text, edit_bytes, truncate):
    edits = edits_from_bytes(edit_bytes)
    text = mutate(text, edits)
    if truncate == 0:  # a truncated program: cut where the first edit was
        text = text[:edits[0][1] * (len(text) + 1) >> 16]
    check(text)


@pytest.mark.parametrize("text", REGRESSIONS, ids=range(len(REGRESSIONS)))
def test_regressions(text):
    check(text)


def test_deep_nesting_is_a_zynml_error():
    with pytest.raises(ZynMLError) as info:
        parse(SourceFile("deep.zyn", "let x = " + "(" * 5000))
    assert "nesting too deep" in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (1, 209)  # the 201st level


def test_very_long_line_parses():
    text = "let x = " + " + ".join(f"a{i}" for i in range(20000)) + "\n"
    (stmt,) = parse(SourceFile("long.zyn", text)).body
    assert isinstance(stmt.value, ast.Binary) and stmt.value.right.id == "a19999"
