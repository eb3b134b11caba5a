"""Diagnostics for `zynml-opt`: one located form for MLIR's and ZynML's, rendering, and
mlir-opt's `--verify-diagnostics` check.

Every error reaches the user as `FILE:LINE:COL: error: message`, then the source line and
a caret when the file is one zynml-opt read; notes follow their error.

`--verify-diagnostics` reads `expected-*` comments from the input, as mlir-opt does:

    %x = foo  // expected-error {{unknown}}         on this line
    // expected-error@+1 {{unknown}}                  N lines below (@-N: above)
    // expected-note@below {{defined here}}           the next line that holds no
    // expected-warning@above {{...}}                 designator (previous for @above)
    // expected-error@unknown {{...}}                 a diagnostic with no location
    // expected-error-re {{value {{[0-9]+}} is}}      {{...}} inside is a regex

A diagnostic matches an expectation of its severity on its line whose text is a substring
of the message. `check_expected` returns what does not match, as errors located like
mlir-opt's: `unexpected error: ...` at the diagnostic, `expected error "..." was not
produced` at the comment.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

from mlir import ir

from ..errors import ZynMLError

__all__ = ["Diagnostic", "Expected", "from_mlir", "from_zynml", "without_op_notes", "render",
           "parse_expected", "check_expected"]

SEVERITIES = ("error", "warning", "note", "remark")


@dataclass
class Diagnostic:
    """One diagnostic; `file` is None for an unknown location."""

    severity: str
    message: str
    file: Optional[str] = None
    line: int = 0
    col: int = 0
    notes: list["Diagnostic"] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}:{self.col}" if self.file is not None \
            else "<unknown>:0:0"

    def flatten(self) -> list["Diagnostic"]:
        """This diagnostic, then its notes (each one is checked on its own)."""
        return [self] + [d for n in self.notes for d in n.flatten()]


# ------------------------------------------------------------------------ conversion

_MLIR_SEVERITY = {"ERROR": "error", "WARNING": "warning", "NOTE": "note", "REMARK": "remark"}


def _file_location(loc: ir.Location) -> Optional[ir.Location]:
    """The file:line:col location MLIR would show for `loc` (like SourceMgrDiagnostic-
    Handler: a name's child, a call site's callee, a fused location's first file one)."""
    if loc.is_a_file():
        return loc
    if loc.is_a_name():
        return _file_location(loc.child_loc)
    if loc.is_a_callsite():
        return _file_location(loc.callee)
    if loc.is_a_fused():
        for part in loc.locations:
            found = _file_location(part)
            if found is not None:
                return found
    return None


def from_mlir(diagnostic, rename: dict[str, str], severity: Optional[str] = None) -> Diagnostic:
    """An MLIR Diagnostic (from a handler) or DiagnosticInfo (from an MLIRError).

    `rename` maps buffer names to the names users see: text parsed from a string is
    named "-" by MLIR, shown as the input's path.
    """
    if severity is None:
        severity = _MLIR_SEVERITY.get(str(diagnostic.severity).rsplit(".", 1)[-1], "error")
    loc = _file_location(diagnostic.location)
    notes = [from_mlir(n, rename, "note") for n in diagnostic.notes]
    if loc is None:
        return Diagnostic(severity, diagnostic.message, notes=notes)
    return Diagnostic(severity, diagnostic.message, rename.get(loc.filename, loc.filename),
                      loc.start_line, loc.start_col, notes)


def from_zynml(err: ZynMLError) -> list[Diagnostic]:
    """A ZynML front-end error: its errors, each with the notes that follow it."""
    result: list[Diagnostic] = []
    for d in err.diagnostics:
        diag = Diagnostic(d.severity, d.message) if d.loc is None else \
            Diagnostic(d.severity, d.message, d.loc.file.name, d.loc.line, d.loc.col)
        if d.severity == "note" and result:
            result[-1].notes.append(diag)
        else:
            result.append(diag)
    return result


def without_op_notes(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Drop the "see current operation: ..." notes MLIR attaches to verifier errors
    (mlir-opt turns them off under --verify-diagnostics)."""
    for d in diagnostics:
        d.notes = without_op_notes([n for n in d.notes
                                    if not n.message.startswith("see current operation:")])
    return diagnostics


# ------------------------------------------------------------------------ rendering


def render(diagnostic: Diagnostic, sources: dict[str, str]) -> str:
    """`FILE:LINE:COL: severity: message`, the source line and a caret when `sources`
    (file name -> text) holds the file, then the notes the same way."""
    lines = [f"{diagnostic.where}: {diagnostic.severity}: {diagnostic.message}"]
    text = sources.get(diagnostic.file) if diagnostic.file is not None else None
    if text is not None and diagnostic.line >= 1:
        source_lines = text.splitlines()
        if diagnostic.line <= len(source_lines):
            line = source_lines[diagnostic.line - 1].expandtabs(1)
            lines += [line, " " * max(diagnostic.col - 1, 0) + "^"]
    lines += [render(n, sources) for n in diagnostic.notes]
    return "\n".join(lines)


# ------------------------------------------------------------------------ expectations

_EXPECTED = re.compile(r"expected-(error|note|remark|warning)(-re)?"
                       r" *(?:@([+-][0-9]+|above|below|unknown))? *\{\{(.*)\}\}\s*$")


@dataclass
class Expected:
    """One `expected-*` comment: where it is, which line it designates, what it wants."""

    severity: str
    text: str
    regex: Optional[re.Pattern]
    file: str
    line: Optional[int]  # the designated line; None for @unknown
    comment_line: int
    comment_col: int
    matched: bool = False

    def matches(self, message: str) -> bool:
        return bool(self.regex.search(message)) if self.regex is not None \
            else self.text in message


def _regex(text: str) -> re.Pattern:
    """`-re` text: literal except `{{regex}}` parts."""
    parts, pos = [], 0
    for m in re.finditer(r"\{\{(.*?)\}\}", text):
        parts += [re.escape(text[pos:m.start()]), f"(?:{m.group(1)})"]
        pos = m.end()
    parts.append(re.escape(text[pos:]))
    return re.compile("".join(parts))


def parse_expected(text: str, file: str) -> list[Expected]:
    """The `expected-*` comments of `text` (line numbers are lines of `text`).

    Raises ValueError (with the line) for a comment whose designated line does not exist,
    or whose `-re` text is no regex.
    """
    lines = text.splitlines()
    found: list[Expected] = []
    designator_lines: set[int] = set()
    for number, line in enumerate(lines, start=1):
        m = _EXPECTED.search(line)
        if m is None:
            continue
        severity, is_re, offset, message = m.groups()
        start = m.start()
        comment = line.rfind("//", 0, start)
        if comment >= 0 and not line[:comment].strip():
            designator_lines.add(number)
        designated: Optional[int] = number
        if offset in ("above", "below"):
            designated = -1 if offset == "above" else -2  # resolved below
        elif offset == "unknown":
            designated = None
        elif offset:
            designated = number + int(offset)
        try:
            regex = _regex(message) if is_re else None
        except re.error as err:  # mlir-opt: "invalid regex" at the comment, not a crash
            raise ValueError(f"{file}:{number}:{start + 1}: error: invalid regex in "
                             f"expected-{severity}-re: {err}") from None
        found.append(Expected(severity, message, regex, file, designated, number,
                              start + 1))
    for e in found:
        if e.line in (-1, -2):
            step = -1 if e.line == -1 else 1
            target = e.comment_line + step
            while target in designator_lines:
                target += step
            e.line = target
        if e.line is not None and not 1 <= e.line <= len(lines):
            raise ValueError(f"{file}:{e.comment_line}:{e.comment_col}: error: "
                             f"expected-{e.severity} designates line {e.line}, which is "
                             "outside the file")
    return found


def check_expected(diagnostics: Iterable[Diagnostic],
                   expected: list[Expected]) -> list[Diagnostic]:
    """Errors for every diagnostic no expectation matches and every expectation nothing
    matched. An empty list means the diagnostics are exactly the expected ones."""
    problems: list[Diagnostic] = []
    for diag in (d for top in diagnostics for d in top.flatten()):
        near_miss = None
        for e in expected:
            in_place = (e.line is None and diag.file is None) or \
                (e.line is not None and e.file == diag.file and e.line == diag.line)
            if in_place and e.matches(diag.message):
                if e.severity == diag.severity:
                    e.matched = True
                    break
                near_miss = e
        else:
            if near_miss is not None:
                near_miss.matched = True
                problems.append(Diagnostic(
                    "error", f"'{diag.severity}' diagnostic emitted when expecting a "
                             f"'{near_miss.severity}'", near_miss.file,
                    near_miss.comment_line, near_miss.comment_col))
            else:
                problems.append(Diagnostic("error", f"unexpected {diag.severity}: "
                                                    f"{diag.message}",
                                           diag.file, diag.line, diag.col))
    for e in expected:
        if not e.matched:
            problems.append(Diagnostic("error", f'expected {e.severity} "{e.text}" was not '
                                                "produced", e.file, e.comment_line,
                                       e.comment_col))
    return problems
