"""Lexer tests: token kinds and values, layout (NEWLINE/INDENT/DEDENT, brackets), errors."""
import math
from pathlib import Path

import pytest

from zynml.errors import SourceFile, ZynMLError
from zynml.frontend.lexer import tokenize

SPEC_DIR = Path(__file__).resolve().parents[1] / "programs" / "spec"


def toks(text: str) -> list:
    return tokenize(SourceFile("t.zyn", text))


def kinds(text: str) -> list[str]:
    return [t.kind for t in toks(text)]


def lex_error(text: str) -> ZynMLError:
    with pytest.raises(ZynMLError) as info:
        tokenize(SourceFile("t.zyn", text))
    return info.value


# ----------------------------------------------------------------------------- literals


@pytest.mark.parametrize("text, kind, value", [
    ("42", "INT", 42),
    ("0.0", "FLOAT", 0.0),
    ("1e-6", "FLOAT", 1e-6),
    ("0.00001", "FLOAT", 0.00001),
    ("2.5e3", "FLOAT", 2500.0),
    ("0.7978845608", "FLOAT", 0.7978845608),
    ("inf", "FLOAT", math.inf),
    ("1000ms", "UNIT", (1000.0, "ms")),
    ("5s", "UNIT", (5.0, "s")),
    ("1GB", "UNIT", (1.0, "GB")),
    ("512MB", "UNIT", (512.0, "MB")),
    ("1.5us", "UNIT", (1.5, "us")),
    ('"cuda:0"', "STRING", "cuda:0"),
    (r'"a\"b\\c\n"', "STRING", 'a"b\\c\n'),
    ("weights", "NAME", "weights"),
])
def test_literal_tokens(text, kind, value):
    tok = toks(text)[0]
    assert (tok.kind, tok.value) == (kind, value)
    assert tok.text == text


def test_range_dots_are_not_a_float():
    assert [(t.kind, t.text) for t in toks("0..len")][:3] == [
        ("INT", "0"), ("..", ".."), ("NAME", "len")]
    assert kinds("0.5..n")[:3] == ["FLOAT", "..", "NAME"]
    assert kinds("...")[0] == "..."


def test_keywords_and_soft_keywords():
    assert kinds("let for in if else yield return compute pipeline config await and or "
                 "not true false")[:16] == [
        "let", "for", "in", "if", "else", "yield", "return", "compute", "pipeline",
        "config", "await", "and", "or", "not", "true", "false"]
    # `var`, `shared`, `step`, `timeout` are names; the parser gives them meaning by position.
    assert kinds("var shared step timeout")[:4] == ["NAME"] * 4


def test_operators_longest_match():
    text = "|> == != <= >= += -= *= /= -> .. ... + - * / % ^ @ < > = ( ) [ ] , : ."
    expected = text.split()
    assert [t.kind for t in toks(text)][:len(expected)] == expected


# ----------------------------------------------------------------------------- layout


def test_compute_body_layout():
    text = ("let y = compute(x) {\n"
            "    @kernel elementwise\n"
            "    for i in 0..n:\n"
            "        out[i] = x[i]\n"
            "} |> sqrt()\n")
    assert kinds(text) == [
        "let", "NAME", "=", "compute", "(", "NAME", ")", "{", "NEWLINE",
        "INDENT", "@", "NAME", "NAME", "NEWLINE",
        "for", "NAME", "in", "INT", "..", "NAME", ":", "NEWLINE",
        "INDENT", "NAME", "[", "NAME", "]", "=", "NAME", "[", "NAME", "]", "NEWLINE",
        "DEDENT", "DEDENT", "}", "|>", "NAME", "(", ")", "NEWLINE", "EOF"]


def test_layout_token_locations():
    tokens = toks("for i in 0..n:\n    out = x  // note\nlet z = 1\n")
    newline = next(t for t in tokens if t.kind == "NEWLINE")
    assert (newline.loc.line, newline.loc.col) == (1, 15)  # just past the ':'
    indent = next(t for t in tokens if t.kind == "INDENT")
    assert (indent.loc.line, indent.loc.col) == (2, 5)
    second_newline = [t for t in tokens if t.kind == "NEWLINE"][1]
    assert (second_newline.loc.line, second_newline.loc.col) == (2, 12)  # before the comment
    dedent = next(t for t in tokens if t.kind == "DEDENT")
    assert (dedent.loc.line, dedent.loc.col) == (3, 1)


def test_blank_and_comment_lines_make_no_tokens():
    assert kinds("\n   \n// only a comment\n      // indented comment\nx\n\n") == [
        "NAME", "NEWLINE", "EOF"]
    assert kinds("") == ["EOF"]


def test_newlines_inside_parens_and_brackets_are_joined():
    text = "let a = f(1,\n        2,\n  3)\nlet b = [\n    1,\n]\n"
    assert kinds(text) == [
        "let", "NAME", "=", "NAME", "(", "INT", ",", "INT", ",", "INT", ")", "NEWLINE",
        "let", "NAME", "=", "[", "INT", ",", "]", "NEWLINE", "EOF"]


def test_one_line_brace_body_inside_brackets():
    text = "let fs = [\n    compute(b) @async { ... },\n]\n"
    assert kinds(text) == [
        "let", "NAME", "=", "[", "compute", "(", "NAME", ")", "@", "NAME", "{", "...", "}",
        ",", "]", "NEWLINE", "EOF"]


def test_multiline_brace_body_on_continuation_line():
    """A `{` on a continuation line inside ( ) takes that line's indentation as its base."""
    text = ("let r = foo(\n"
            "        a,\n"
            "        compute(x) {\n"
            "            out = x\n"
            "        })\n"
            "let q = 1\n")
    assert kinds(text) == [
        "let", "NAME", "=", "NAME", "(", "NAME", ",", "compute", "(", "NAME", ")", "{",
        "NEWLINE", "INDENT", "NAME", "=", "NAME", "NEWLINE", "DEDENT", "}", ")", "NEWLINE",
        "let", "NAME", "=", "INT", "NEWLINE", "EOF"]


def test_eof_closes_open_blocks():
    assert kinds("pipeline p():\n    for i in 0..n:\n        x = 1")[-5:] == [
        "INT", "NEWLINE", "DEDENT", "DEDENT", "EOF"]


def test_statement_keyword_ends_an_unclosed_bracket():
    """`let` can never be inside ( ): the lexer ends the logical line so the parser can
    report the unclosed bracket instead of swallowing the rest of the file."""
    assert kinds("let a = f(1\nlet b = 2\n") == [
        "let", "NAME", "=", "NAME", "(", "INT", "NEWLINE",
        "let", "NAME", "=", "INT", "NEWLINE", "EOF"]


@pytest.mark.parametrize("path", sorted(SPEC_DIR.glob("*.zyn")), ids=lambda p: p.name)
def test_spec_programs_have_balanced_layout(path):
    tokens = tokenize(SourceFile(path.name, path.read_text()))
    assert sum(t.kind == "INDENT" for t in tokens) == sum(t.kind == "DEDENT" for t in tokens)
    assert sum(t.kind == "{" for t in tokens) == sum(t.kind == "}" for t in tokens)
    assert tokens[-1].kind == "EOF"


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("text, where, message", [
    ('let s = "cuda:0\n', "t.zyn:1:9:", "unterminated string literal"),
    ("let x = 1 $ 2\n", "t.zyn:1:11:", "unexpected character '$'"),
    ("let x = a | b\n", "t.zyn:1:11:", "did you mean '|>'"),
    ("let t = 10xyz\n", "t.zyn:1:9:", "invalid suffix 'xyz'"),
    ("let t = 1e\n", "t.zyn:1:9:", "invalid suffix 'e'"),
    ('let s = "a\\qb"\n', "t.zyn:1:11:", "invalid escape sequence '\\q'"),
    ("let n = " + "9" * 5000 + "\n", "t.zyn:1:9:", "integer literal is too long"),
    ("pipeline p():\n\tlet a = 1\n", "t.zyn:2:1:", "tab in indentation"),
    ("pipeline p():\n        a = 1\n    b = 2\n", "t.zyn:3:5:",
     "unindent does not match any outer indentation level"),
    ("let y = compute(x) {\n    out = x }\n", "t.zyn:2:13:", "'}' closing a multi-line block"),
    ("let y = compute(x) {\n    out = x\n    }\n", "t.zyn:3:5:", "'}' closing a multi-line block"),
])
def test_lexical_errors_are_located(text, where, message):
    err = lex_error(text)
    assert str(err).startswith(where + " error: ")
    assert message in err.message


def test_several_lexical_errors_one_per_line():
    err = lex_error('let a = "x\nlet b = 1 $ $ $\nlet c = 2\nlet d = 3 #\n')
    assert [(d.loc.line, d.loc.col) for d in err.errors] == [(1, 9), (2, 11), (4, 11)]


def test_tab_between_tokens_is_whitespace():
    assert kinds("let\tx =\t1\n") == ["let", "NAME", "=", "INT", "NEWLINE", "EOF"]


def test_other_line_breaks_follow_splitlines():
    """Line numbers agree with SourceFile.line (str.splitlines) for \\r\\n, \\r, \\x0c, ..."""
    src = SourceFile("t.zyn", "let a = 1\r\nlet b = 2\rlet c = 3\x0clet d = $\n")
    with pytest.raises(ZynMLError) as info:
        tokenize(src)
    loc = info.value.loc
    assert (loc.line, loc.col) == (4, 9)
    assert src.line(4) == "let d = $"
