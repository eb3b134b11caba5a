"""Run a function in a forked child, so that MLIR aborting kills the child, not the tool.

MLIR's C++ parser, verifier and passes end the process on some inputs instead of
reporting an error: `LLVM ERROR: ...` and abort() (a `tensor<99999999999xf32>` that a
SmallVector cannot hold), a failed assertion (`array<index: 1>`), now and then a
segfault. No Python code can catch that in-process. So zynml-opt handles each input chunk
in a child made by fork() (MLIR is already loaded, so this costs about 10 ms a chunk on a
2-core machine: the fork and the pages the child copies on write; a fresh subprocess
would cost a second of Python and MLIR start-up). The child sends back what the function
returned, or the exception it raised, pickled through a pipe; what MLIR printed on the
child's stderr (IR dumps, timings) is kept in a file and passed on. When the child dies
instead, `isolated` raises Crashed with the signal and the line of MLIR's message that
says why.

Where there is no fork() the function runs in-process, as before.
"""
from __future__ import annotations

import faulthandler
import io
import os
import pickle
import re
import signal
import sys
import tempfile
import traceback

__all__ = ["isolated", "Crashed"]


class Crashed(Exception):
    """The child died (a signal, or an exit before it answered): MLIR aborted."""

    def __init__(self, how: str, why: str, stderr: str):
        super().__init__(f"{how}: {why}" if why else how)
        self.how, self.why, self.stderr = how, why, stderr


def isolated(fn, *args):
    """fn(*args) in a forked child: its result, or its exception raised here."""
    if not hasattr(os, "fork"):
        return fn(*args)
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryFile() as err_file:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            _child(fn, args, read_fd, write_fd, err_file.fileno())
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        err_file.seek(0)
        stderr = err_file.read().decode("utf-8", errors="replace")
    if os.WIFSIGNALED(status) or not data:
        raise Crashed(_how(status), _why(stderr), stderr)
    if stderr:
        sys.stderr.write(stderr)
        sys.stderr.flush()
    kind, value, child_traceback = pickle.loads(data)
    if kind == "raise":
        if child_traceback:
            value.add_note(f"in zynml-opt's child process:\n{child_traceback}")
        raise value
    return value


def _child(fn, args, read_fd: int, write_fd: int, err_fd: int) -> None:
    try:
        os.close(read_fd)
        os.dup2(err_fd, 2)  # what MLIR writes on stderr (dumps, timing, its last words)
        faulthandler.disable()  # an abort here is reported by the parent, in its words
        # Python's own stderr writes (a pass's traceback with ZYNML_DEBUG) go there too,
        # even where sys.stderr was replaced (tests capture it): the parent passes it on
        sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False),
                                      line_buffering=True)
        try:
            outcome = ("ok", fn(*args), "")
        except BaseException as err:
            outcome = ("raise", err, traceback.format_exc())
        try:
            data = pickle.dumps(outcome)
        except Exception:  # an exception holding MLIR objects: keep its words only
            data = pickle.dumps(("raise", RuntimeError(f"{type(outcome[1]).__name__}: "
                                                       f"{outcome[1]}"), outcome[2]))
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(data)
        sys.stderr.flush()
    finally:
        os._exit(0)  # no atexit handlers, no buffers of the parent flushed twice


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"MLIR crashed ({name})"
    return f"MLIR exited with status {os.WEXITSTATUS(status)}"


def _why(stderr: str) -> str:
    """The line of MLIR's last words that says why: an LLVM ERROR or a failed assertion."""
    for line in stderr.splitlines():
        if "LLVM ERROR:" in line:
            return line.split("LLVM ERROR:", 1)[1].strip()
        assertion = re.search(r"Assertion `(.*)' failed", line)
        if assertion:
            where = re.search(r"([\w.]+\.(?:cpp|h)):(\d+)", line)
            return f"assertion {assertion.group(1)} failed" + \
                (f" ({where.group(1)}:{where.group(2)})" if where else "")
    return ""
