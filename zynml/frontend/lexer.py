"""ZynML lexer: source text -> tokens, with Python-style INDENT / DEDENT / NEWLINE.

Layout rules (the spec's programs are indentation based, even inside `{ ... }`):

* A physical line is split with `str.splitlines()`, the same splitting `SourceFile.line`
  uses, so every reported line:col points at the line a diagnostic prints.
* Blank lines and lines holding only a `// comment` produce no tokens at all.
* Newlines and indentation are *significant* when no bracket is open or when the innermost
  open bracket is `{` (a compute or config body). Inside `(` and `[` physical lines are
  joined, as in Python. So

      let y = compute(x) {          ->  ... `{` NEWLINE
          for i in 0..n:            ->  INDENT `for` ... `:` NEWLINE
              out[i] = x[i]         ->  INDENT ... NEWLINE
      } |> sqrt()                   ->  DEDENT DEDENT `}` `|>` ... NEWLINE

  and a one-line body `compute(b) @async { ... }` inside `[ ... ]` needs nothing special.
* A multi-line `{` body is closed by a `}` at the indentation of the line that opened the
  `{` (more tokens may follow it on that line). A `{` opened on a continuation line inside
  `( ... )` takes that physical line's indentation as its base; the lexer keeps it on the
  indentation stack as a *silent* level, one that produces no INDENT/DEDENT tokens.
* Tabs in the indentation of a significant line are rejected (one error per file): their
  width is ambiguous. For recovery a tab counts as 4 columns. Elsewhere a tab is
  whitespace.

Errors do not stop the lexer: each is reported (at most one per line) and an ERROR token
takes the place of the bad text, so the parser skips that statement without reporting a
second, derived error. `tokenize` raises a ZynMLError carrying them all. Bad layout is
repaired so that one mistake gives one error, not a cascade:

* a line that starts with a statement keyword (`let`, `for`, ...) while `(` or `[` is
  open ends the logical line there (the bracket was never closed);
* a one-line `{ ...` still open at the end of its line is dropped (never closed);
* a dedent to a width between two open levels moves the inner level to that width;
* a single line less indented than the lines around it stays in its block, and a line
  that should have been indented after a `:` or `{` line starts that block
  (recover_misindented_line: it looks at the next lines).

None of these repairs applies to a valid program.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import DiagnosticSink, SourceFile, SourceLocation

__all__ = ["Token", "tokenize", "KEYWORDS", "SOFT_KEYWORDS", "UNITS", "MAX_INT"]

# The largest integer literal: integers are 64-bit (i64, and index on 64-bit targets).
MAX_INT = 2 ** 63 - 1

# Reserved everywhere. `inf` is lexed as a FLOAT token.
KEYWORDS = frozenset({
    "let", "for", "in", "if", "else", "yield", "return", "compute", "pipeline", "config",
    "await", "and", "or", "not", "true", "false",
})
# Keywords only in one position; lexed as NAME and recognised by the parser:
# `var x = ...` / `shared var x[..]` at the start of a statement, `step` after a range's
# upper bound, `timeout` after an awaited value. Everywhere else they are plain names
# (the spec's layer norm uses `var` as a variable: `var var = 0.0`, `var += d * d`).
SOFT_KEYWORDS = frozenset({"var", "shared", "step", "timeout"})

UNITS = frozenset({"ms", "s", "us", "B", "KB", "MB", "GB"})

# Words that can only begin a statement. A line starting with one while `(` or `[` is
# still open means that bracket was never closed: the lexer ends the logical line there
# so the parser reports the unclosed bracket instead of swallowing the rest of the file.
_STATEMENT_STARTERS = frozenset({
    "let", "for", "if", "else", "pipeline", "config", "return", "yield",
})

_OPERATORS_3 = frozenset({"..."})
_OPERATORS_2 = frozenset({"|>", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "->", ".."})
_OPERATORS_1 = frozenset("+-*/%^@<>=()[]{},:.?")
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_HINTS = {
    "|": " (did you mean '|>'?)",
    "!": " (did you mean '!=' or 'not'?)",
    "#": " (comments start with '//')",
    ";": " (statements end at the end of the line)",
}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_SUFFIX = re.compile(r"[A-Za-z0-9_]*")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"'}

TAB_WIDTH = 4
_LOOKAHEAD_LINES = 200  # how far indentation error recovery looks ahead


@dataclass(frozen=True, slots=True)
class Token:
    """One token. `kind` is "NAME", "INT", "FLOAT", "STRING", "UNIT", "NEWLINE", "INDENT",
    "DEDENT", "EOF", "ERROR", or, for keywords and punctuation, the text itself ("let",
    "|>", "(", ...). `value` is the literal's value (int, float, str, or (float, unit))."""

    kind: str
    text: str
    value: Any
    loc: SourceLocation

    def describe(self) -> str:
        """How an error message names this token."""
        if self.kind in _DESCRIPTIONS:
            return _DESCRIPTIONS[self.kind]
        if self.kind == "NAME":
            return f"name '{self.text}'"
        if self.kind in ("INT", "FLOAT", "UNIT"):
            return f"number '{self.text}'"
        if self.kind == "STRING":
            return "string literal"
        return f"'{self.text}'"


_DESCRIPTIONS = {
    "NEWLINE": "end of line", "INDENT": "indented line", "DEDENT": "a less indented line",
    "EOF": "end of file", "ERROR": "invalid token",
}


class Reporter:
    """Collects errors for one parse: at most one per source line (the first one found on a
    line is the real one; later ones on that line are usually its consequences)."""

    def __init__(self, max_errors: int = 50):
        self.sink = DiagnosticSink()
        self.lines: set[int] = set()
        self.max_errors = max_errors

    def error(self, message: str, loc: SourceLocation) -> bool:
        """Record an error; False if it was dropped (its line already has one, or too many)."""
        if loc.line in self.lines or self.full:
            return False
        self.lines.add(loc.line)
        self.sink.error(message, loc)
        return True

    @property
    def full(self) -> bool:
        return len(self.sink.diagnostics) >= self.max_errors

    def raise_if_any(self) -> None:
        """Raise one ZynMLError carrying every error, in source order."""
        self.sink.diagnostics.sort(key=lambda d: (d.loc.line, d.loc.col) if d.loc else (0, 0))
        self.sink.raise_if_any()


def _opens_block(line: str, start: int) -> bool:
    """Does this line end with `:` or `{`, or leave a bracket open? A quick look at the
    text (skipping strings and comments), used only to guide indentation error recovery."""
    depth, last, i, n = 0, "", start, len(line)
    while i < n:
        c = line[i]
        if c == '"':
            i += 1
            while i < n and line[i] != '"':
                i += 2 if line[i] == "\\" else 1
        elif c == "/" and line.startswith("//", i):
            break
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)
        if c not in " \t":
            last = c
        i += 1
    return depth > 0 or last in (":", "{")


@dataclass
class _Frame:
    """An open bracket. For `{`, `depth` is the indentation-stack length its body starts
    from (its base level is `indents[depth - 1]`)."""

    char: str
    depth: int
    line: int
    token_index: int  # where the opener's token is in the token list
    silent_base: bool = False  # `{` pushed a silent level for its continuation-line base
    multiline: bool = False  # `{` saw a NEWLINE: it must be closed by an aligned `}`

    def is_open_one_line_body(self, lineno: int) -> bool:
        """A `{` opened on line `lineno` with no NEWLINE since (a one-line body so far)."""
        return self.char == "{" and self.line == lineno and not self.multiline


def tokenize(src: SourceFile) -> list[Token]:
    """Tokenize a whole file; raises ZynMLError (with every lexical error) on bad input."""
    reporter = Reporter()
    tokens = lex(src, reporter)
    reporter.raise_if_any()
    return tokens


def lex(src: SourceFile, reporter: Reporter) -> list[Token]:
    """Tokenize, reporting errors to `reporter` and continuing (ERROR tokens mark them)."""
    return _Lexer(src, reporter.error).run()


class _Lexer:
    def __init__(self, src: SourceFile, report: Callable[[str, SourceLocation], bool]):
        self.src = src
        self.report = report
        self.tokens: list[Token] = []
        self.indents = [0]  # indentation widths of the open blocks
        self.silent = [False]  # parallel to `indents`: level makes no INDENT/DEDENT
        self.frames: list[_Frame] = []
        self.pending = False  # tokens emitted since the last NEWLINE
        self.last_end: tuple[int, int] = (1, 1)  # just past the last token
        self.line_width = 0  # indentation width of the current physical line
        self.tab_reported = False
        self.block_expected = False  # the last logical line ended with `:` or `{`
        self.lines: list[str] = []

    # ------------------------------------------------------------------ driver

    def run(self) -> list[Token]:
        self.lines = lines = self.src.text.splitlines()
        for lineno, line in enumerate(lines, 1):
            self.lex_line(lineno, line)
        end = (len(lines), len(lines[-1]) + 1) if lines else (1, 1)
        if self.pending:
            self.newline()
        for silent in reversed(self.silent[1:]):
            if not silent:
                self.emit("DEDENT", "", None, *end)
        self.emit("EOF", "", None, *end)
        return self.tokens

    def lex_line(self, lineno: int, line: str) -> None:
        start, width, tab_at = self.measure_indent(line)
        if start == len(line) or line.startswith("//", start):
            return  # blank or comment-only line
        self.line_width = width
        if not self.significant() and self.starts_statement(line, start):
            self.close_unclosed_brackets()
        if self.significant():
            if tab_at is not None and not self.tab_reported:
                self.tab_reported = True
                self.report("tab in indentation; indent with spaces", self.loc(lineno, tab_at + 1))
            self.indentation(lineno, line, start, width)
        self.scan(lineno, line, start)
        self.drop_unclosed_one_line_bodies(lineno)
        if self.pending and self.significant():
            self.newline()

    # ------------------------------------------------------------------ layout

    def significant(self) -> bool:
        return not self.frames or self.frames[-1].char == "{"

    @staticmethod
    def measure_indent(line: str) -> tuple[int, int, int | None]:
        """(index of the first non-blank char, indentation width, index of a tab or None)."""
        width, tab_at = 0, None
        for i, c in enumerate(line):
            if c == " ":
                width += 1
            elif c == "\t":
                width += TAB_WIDTH
                tab_at = i if tab_at is None else tab_at
            else:
                return i, width, tab_at
        return len(line), width, tab_at

    @staticmethod
    def starts_statement(line: str, start: int) -> bool:
        m = _IDENT.match(line, start)
        return m is not None and m.group() in _STATEMENT_STARTERS

    def close_unclosed_brackets(self) -> None:
        """A statement keyword begins this line inside `(`/`[`: they were never closed.
        End the logical line here; the parser reports the bracket at the NEWLINE."""
        while self.frames and self.frames[-1].char != "{":
            self.pop_frame()
        if self.pending:
            self.newline()

    def indentation(self, lineno: int, line: str, start: int, width: int) -> None:
        """Emit INDENT/DEDENT for a significant line of indentation `width`."""
        loc = self.loc(lineno, start + 1)
        if width > self.indents[-1]:
            self.push_level(width, loc)
            return
        first = line[start]
        if first != "}" and self.recover_misindented_line(lineno, line, start, width, loc):
            return
        if width == self.indents[-1]:
            return
        # A line less indented than the `{` block it sits in means that `{` was never
        # closed (the parser reports it). A `}` there is just misplaced: clamp it and let
        # the `}` check report it.
        while self.frames:
            frame = self.frames[-1]
            if frame.char == "{" and (width >= self.indents[frame.depth - 1] or first == "}"):
                break
            self.pop_frame()
        floor = self.frames[-1].depth if self.frames else 1
        while len(self.indents) > floor and self.indents[-1] > width:
            if self.indents[-2] < width:
                # Between two levels: no block was ever opened at this width. Recover by
                # moving the inner block to this width (the line continues that block).
                self.report("unindent does not match any outer indentation level", loc)
                self.indents[-1] = width
                return
            self.pop_level(loc)

    def recover_misindented_line(self, lineno: int, line: str, start: int, width: int,
                                 loc: SourceLocation) -> bool:
        """Error recovery for one line, not deeper than the current block, whose indentation
        disagrees with the lines after it. Returns True if it reported and handled it.

        * Just after a line ending in `:` or `{`, a line that opens no block, followed by
          a deeper line: it was meant to start that block, at the next line's level.
        * A dedented line followed by a line back at an open block's level: it is a single
          misplaced line; keep it in the current block (dedenting would make the next line
          an "unexpected indentation"). For a line that opens a block, the line that counts
          is the first one after its body; and the width must be invalid, as a valid
          dedent followed by a block's body is a valid program.

        Each turns one misplaced line into one error instead of a cascade. None of these
        situations occurs in a valid program, so they never change one.
        """
        top = self.indents[-1]
        if self.block_expected:
            if _opens_block(line, start):
                return False
            next_width = self.next_width(lineno)
            if next_width is None or next_width <= top:
                return False
            self.report("expected an indented block", loc)
            self.push_level(next_width, loc)
            return True
        if width == top:
            return False
        valid = self.is_valid_dedent(width)
        opens = _opens_block(line, start)
        if opens and valid:
            return False
        next_width = self.next_width(lineno, at_most=top if opens else None)
        if next_width is None or next_width <= width or not self.is_valid_dedent(next_width):
            return False
        self.report("this line is less indented than the lines around it" if valid
                    else "unindent does not match any outer indentation level", loc)
        return True

    def is_valid_dedent(self, width: int) -> bool:
        floor = self.frames[-1].depth if self.frames else 1
        return width in self.indents[floor - 1:]

    def next_width(self, lineno: int, at_most: int | None = None) -> int | None:
        """Indentation width of the next non-blank, non-comment line (with `at_most`, of
        the next one no deeper than that), looking a bounded number of lines ahead."""
        for line in self.lines[lineno:lineno + _LOOKAHEAD_LINES]:  # lineno is 1-based
            start, width, _ = self.measure_indent(line)
            if start < len(line) and not line.startswith("//", start):
                if at_most is None or width <= at_most:
                    return width
        return None

    def drop_unclosed_one_line_bodies(self, lineno: int) -> None:
        """A `{` followed by tokens on its own line is a one-line body, which must close on
        that line. Still open at the line's end, it never will: drop it (the parser reports
        the missing `}`) so the next lines are not taken as its body."""
        while self.frames:
            frame = self.frames[-1]
            body_is_empty = frame.token_index == len(self.tokens) - 1  # `{` ends the line
            if body_is_empty or not frame.is_open_one_line_body(lineno):
                return
            self.pop_frame()

    def pop_frame(self) -> None:
        """Drop the innermost bracket, and the silent base level of a `{` if it is on top
        (a multi-line body's inner levels are popped by the dedent that ends it)."""
        frame = self.frames.pop()
        if frame.silent_base and len(self.indents) == frame.depth:
            self.indents.pop()
            self.silent.pop()

    def push_level(self, width: int, loc: SourceLocation) -> None:
        self.indents.append(width)
        self.silent.append(False)
        self.tokens.append(Token("INDENT", "", None, loc))

    def pop_level(self, loc: SourceLocation) -> None:
        self.indents.pop()
        if not self.silent.pop():
            self.tokens.append(Token("DEDENT", "", None, loc))

    def newline(self) -> None:
        self.block_expected = self.tokens[-1].kind in (":", "{")
        self.tokens.append(Token("NEWLINE", "", None, self.loc(*self.last_end)))
        self.pending = False
        if self.frames:
            self.frames[-1].multiline = True

    # ------------------------------------------------------------------ tokens

    def loc(self, line: int, col: int) -> SourceLocation:
        return SourceLocation(self.src, line, col)

    def emit(self, kind: str, text: str, value: Any, lineno: int, col: int) -> None:
        self.tokens.append(Token(kind, text, value, self.loc(lineno, col)))
        if kind not in ("DEDENT", "EOF"):
            self.pending = True
            self.last_end = (lineno, col + len(text))

    def error(self, message: str, text: str, lineno: int, col: int) -> None:
        self.report(message, self.loc(lineno, col))
        self.emit("ERROR", text, None, lineno, col)

    def scan(self, lineno: int, line: str, start: int) -> None:
        """Tokenize one physical line from `start` (its first non-blank character)."""
        i, n = start, len(line)
        while i < n:
            c = line[i]
            if c == " " or c == "\t":
                i += 1
            elif c == "/" and line.startswith("//", i):
                return
            elif c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z"):
                i = self.identifier(lineno, line, i)
            elif "0" <= c <= "9":
                i = self.number(lineno, line, i)
            elif c == '"':
                i = self.string(lineno, line, i)
            else:
                i = self.operator(lineno, line, i, first_on_line=(i == start))

    def identifier(self, lineno: int, line: str, i: int) -> int:
        text = _IDENT.match(line, i).group()
        if text in KEYWORDS:
            self.emit(text, text, None, lineno, i + 1)
        elif text == "inf":
            self.emit("FLOAT", text, math.inf, lineno, i + 1)
        else:
            self.emit("NAME", text, text, lineno, i + 1)
        return i + len(text)

    def number(self, lineno: int, line: str, i: int) -> int:
        """`42`, `0.5`, `1e-6`, `2.5e3`, and with a unit suffix `1000ms`, `1GB`.
        A `.` belongs to the number only when a digit follows, so `0..n` is `0` `..` `n`."""
        m = _NUMBER.match(line, i)
        digits = m.group()
        suffix = _SUFFIX.match(line, m.end()).group()
        text = digits + suffix
        is_float = m.group(1) is not None or m.group(2) is not None
        if suffix and suffix not in UNITS:
            units = ", ".join(sorted(UNITS))
            self.error(f"invalid suffix '{suffix}' on number (units are {units})",
                       text, lineno, i + 1)
        elif suffix:
            self.emit("UNIT", text, (float(digits), suffix), lineno, i + 1)
        elif is_float:
            self.emit("FLOAT", text, float(digits), lineno, i + 1)
        else:
            try:
                value = int(digits)
            except ValueError:  # beyond Python's int-from-string digit limit
                self.error("integer literal is too long", text, lineno, i + 1)
            else:
                if value > MAX_INT:  # every integer the compiler builds fits in 64 bits
                    shown = text if len(text) <= 24 else text[:20] + "..."
                    self.error(f"integer literal {shown} is out of range: integers have 64 "
                               f"bits (at most {MAX_INT}); write a float such as 1e20 for a "
                               "larger number", text, lineno, i + 1)
                else:
                    self.emit("INT", text, value, lineno, i + 1)
        return i + len(text)

    def string(self, lineno: int, line: str, i: int) -> int:
        """A double-quoted string on one line, with escapes \\n \\t \\r \\0 \\\\ \\"."""
        chars: list[str] = []
        bad_escape = None
        j = i + 1
        while j < len(line) and line[j] != '"':
            if line[j] == "\\" and j + 1 < len(line):
                escaped = _ESCAPES.get(line[j + 1])
                if escaped is None and bad_escape is None:
                    bad_escape = j
                chars.append(escaped or "")
                j += 2
            else:
                chars.append(line[j])
                j += 1
        if j >= len(line):
            self.error("unterminated string literal", line[i:], lineno, i + 1)
            return len(line)
        text = line[i:j + 1]
        if bad_escape is not None:
            self.report(f"invalid escape sequence '{line[bad_escape:bad_escape + 2]}'",
                        self.loc(lineno, bad_escape + 1))
            self.emit("ERROR", text, None, lineno, i + 1)
        else:
            self.emit("STRING", text, "".join(chars), lineno, i + 1)
        return j + 1

    def operator(self, lineno: int, line: str, i: int, first_on_line: bool) -> int:
        for size, table in ((3, _OPERATORS_3), (2, _OPERATORS_2), (1, _OPERATORS_1)):
            text = line[i:i + size]
            if text in table:
                break
        else:
            c = line[i]
            shown = repr(c) if c.isprintable() else f"U+{ord(c):04X}"
            self.error(f"unexpected character {shown}{_HINTS.get(c, '')}", c, lineno, i + 1)
            return i + 1
        if text in _OPENERS:
            self.open_bracket(text, lineno)
        elif text in _CLOSERS:
            self.close_bracket(text, lineno, i + 1, first_on_line)
        self.emit(text, text, None, lineno, i + 1)
        return i + len(text)

    # ------------------------------------------------------------------ brackets

    def open_bracket(self, char: str, lineno: int) -> None:
        silent_base = False
        if char == "{" and self.line_width > self.indents[-1]:
            # `{` on a continuation line inside ( ): its body is indented relative to
            # this physical line, so make the line's width the (silent) base level.
            self.indents.append(self.line_width)
            self.silent.append(True)
            silent_base = True
        self.frames.append(_Frame(char, len(self.indents), lineno, len(self.tokens), silent_base))

    def close_bracket(self, char: str, lineno: int, col: int, first_on_line: bool) -> None:
        """Pop the matching frame. Brackets left open inside it are dropped (the parser
        reports them). A closer that matches nothing is left for the parser to report."""
        opener = _CLOSERS[char]
        for k in range(len(self.frames) - 1, -1, -1):
            frame = self.frames[k]
            if frame.char == opener:
                break
            if frame.char == "{" and not frame.is_open_one_line_body(lineno):
                return  # `)` / `]` never closes across a multi-line `{` body
        else:
            return
        while len(self.frames) > k + 1:
            self.pop_frame()
        if char == "}":
            self.close_body(self.frames[-1], lineno, col, first_on_line)
        self.pop_frame()

    def close_body(self, frame: _Frame, lineno: int, col: int, first_on_line: bool) -> None:
        """Before a `}`: end the body's last line and its indented blocks."""
        if frame.multiline:
            base = self.indents[frame.depth - 1]
            if not (first_on_line and self.line_width == base):
                self.report("'}' closing a multi-line block must start its own line, "
                            f"at the indentation of the line with the '{{' ({base} spaces)",
                            self.loc(lineno, col))
        if self.pending and frame.multiline:
            self.newline()
        loc = self.loc(lineno, col)
        while len(self.indents) > frame.depth:
            self.pop_level(loc)
