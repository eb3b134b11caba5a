"""User-facing diagnostics: every mistake in a ZynML program becomes a ZynMLError.

A diagnostic reads like a compiler's:

    prog.zyn:3:14: error: unknown name 'y'
        out[i] = y[i]
                 ^

Internal invariants may still assert; anything a user can cause is a ZynMLError.
"""
from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field

__all__ = ["SourceLocation", "Diagnostic", "ZynMLError", "SourceFile", "BackendError",
           "ZynMLNote", "note"]


@dataclass(frozen=True)
class SourceFile:
    """A program's text and the name diagnostics show for it (`<string>` or a path).
    `uses`: the library sources it takes pipelines from (`use kernels.NAME`), which are
    part of what it compiles to (the cache key reads them)."""

    name: str
    text: str
    uses: tuple["SourceFile", ...] = field(default=(), compare=False, repr=False)

    def line(self, number: int) -> str:
        lines = self.text.splitlines()
        return lines[number - 1] if 1 <= number <= len(lines) else ""


@dataclass(frozen=True)
class SourceLocation:
    """1-based line and column in a SourceFile."""

    file: SourceFile
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file.name}:{self.line}:{self.col}"

    def __repr__(self) -> str:
        return f"<{self}>"


@dataclass(frozen=True)
class Diagnostic:
    severity: str  # "error" | "note"
    message: str
    loc: SourceLocation | None

    def render(self) -> str:
        if self.loc is None:
            return f"{self.severity}: {self.message}"  # nothing in the source to point at
        head = f"{self.loc}: {self.severity}: {self.message}"
        if not self.loc.file.text:  # e.g. a file that could not be read
            return head
        text = self.loc.file.line(self.loc.line).expandtabs(1)
        caret = " " * (self.loc.col - 1) + "^"
        return f"{head}\n{text}\n{caret}"


class ZynMLError(Exception):
    """Base class of every user-facing ZynML error.

    `str(err)` starts with `FILE:LINE:COL: error:` followed by the source line and a caret;
    further errors (several syntax errors in one run) and notes follow on later lines.
    """

    def __init__(self, message: str, loc: SourceLocation | None = None,
                 notes: list[tuple[str, SourceLocation | None]] | None = None,
                 more: list[Diagnostic] | None = None):
        self.diagnostics: list[Diagnostic] = [Diagnostic("error", message, loc)]
        self.diagnostics += [Diagnostic("note", m, l) for m, l in (notes or [])]
        self.diagnostics += list(more or [])
        self.message = message
        self.loc = loc
        super().__init__(self.render())

    @classmethod
    def from_diagnostics(cls, diagnostics: list[Diagnostic]) -> "ZynMLError":
        first, rest = diagnostics[0], diagnostics[1:]
        return cls(first.message, first.loc, more=rest)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


@dataclass
class DiagnosticSink:
    """Collects errors so one run can report several (parser recovery)."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def error(self, message: str, loc: SourceLocation | None) -> None:
        self.diagnostics.append(Diagnostic("error", message, loc))

    def raise_if_any(self) -> None:
        if self.diagnostics:
            raise ZynMLError.from_diagnostics(self.diagnostics)


class BackendError(ZynMLError):
    """A failure below the ZynML source level (the IREE toolchain), so no source location.

    Renders as `error: <message>` instead of ZynMLError's `<unknown>:0:0: error: ...`.
    `stderr` keeps the tool's whole diagnostic output.
    """

    def __init__(self, message: str, stderr: str = ""):
        self.stderr = stderr
        super().__init__(message)

    def render(self) -> str:
        return "\n".join(
            d.render() if d.loc is not None else f"{d.severity}: {d.message}"
            for d in self.diagnostics
        )


class ZynMLNote(UserWarning):
    """A remark about how a program was compiled (e.g. a kind lowered generically)."""


def note(message: str) -> None:
    """Warn a ZynMLNote, `FILE:LINE:COL: note: ...` or `note: ...`, attributed to the first
    caller outside ZynML: Python then shows the user's line under it, not ZynML's own
    (and the CLIs print it as it is: zynml/cli/common.py)."""
    level, frame = 1, sys._getframe(0)
    while frame is not None and \
            frame.f_globals.get("__name__", "").partition(".")[0] == "zynml":
        frame, level = frame.f_back, level + 1
    warnings.warn(message, ZynMLNote, stacklevel=level)
