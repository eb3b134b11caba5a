"""What the ZynML command-line tools share: how they report usage errors, internal errors
and notes.

Exit codes: 0 success; 1 any mistake of the user's (a located error in the program or the
input, or a usage error in the arguments or the environment: `PROG: error: ...`); 2 only
a bug in the tool itself (`PROG: internal error: ...`). argparse's own exit code for a bad
argument, 2, would say "bug": `ArgumentParser` reports through UsageError instead.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import warnings

from .. import knobs
from ..errors import ZynMLNote

__all__ = ["UsageError", "FileSystemError", "ArgumentParser", "report_usage", "internal_error",
           "report_os_error", "bad_knob",
           "printed_notes"]


class UsageError(Exception):
    """A mistake in the command's arguments or environment: `PROG: error: ...`, exit 1.
    `usage`: the command's usage line(s), printed first for mistakes in the arguments."""

    def __init__(self, message: str, usage: str | None = None, prog: str | None = None):
        super().__init__(message)
        self.usage, self.prog = usage, prog


class FileSystemError(UsageError):
    """The file system refused (a folder in the way, a full disk, a size limit, a file
    that is no array): a usage error too, but not one of the arguments' spelling, so no
    usage line."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, whose errors raise UsageError (exit 1) instead of exiting with 2.
    Subparsers made by `add_subparsers` are of the same class, so theirs do too."""

    def error(self, message: str):
        raise UsageError(message, self.format_usage(), self.prog)


def report_usage(prog: str, err: UsageError) -> int:
    """Print a usage error (after the usage line when it has one); exit code 1."""
    if err.usage:
        print(err.usage.rstrip("\n"), file=sys.stderr)
    text = str(err)
    located = text.startswith("<") or ": error: " in text  # already `WHERE: error: ...`
    print(text if located else f"{err.prog or prog}: error: {text}", file=sys.stderr)
    return 1


def internal_error(prog: str, err: Exception) -> int:
    """Report a bug in the tool itself: one line, exit code 2; re-raise in debug mode."""
    if knobs.DEBUG.get():
        raise err
    print(f"{prog}: internal error: {type(err).__name__}: {err} (set {knobs.DEBUG.name}=1 "
          "for the Python traceback)", file=sys.stderr)
    return 2


def report_os_error(prog: str, err: OSError) -> int:
    """The file system refused (a full disk, a limit, a fault): the path and the reason."""
    where = f" '{err.filename}'" if err.filename else ""
    print(f"{prog}: error: cannot read or write{where}: {err.strerror or err}",
          file=sys.stderr)
    return 1


def bad_knob(prog: str, err: knobs.KnobError) -> int:
    """Report a ZYNML_* variable that holds a bad value: a usage error, exit code 1."""
    print(f"{prog}: error: {err.message}", file=sys.stderr)
    return 1


@contextlib.contextmanager
def printed_notes(prog: str):
    """Within: a ZynMLNote prints on stderr as the compiler note it is (`FILE:LINE:COL:
    note: ...` or `note: ...`), every one of them; any other warning as `PROG: warning:
    ...`. Never Python's form, with a line of code under it. The previous warning
    settings come back on exit (main() may run in-process, in tests)."""
    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if issubclass(category, ZynMLNote):
            print(text if "note: " in text else f"note: {text}", file=sys.stderr)
        else:
            print(f"{prog}: warning: {text}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("always", ZynMLNote)
        warnings.showwarning = show
        yield
