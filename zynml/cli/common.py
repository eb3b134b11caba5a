"""What the ZynML command-line tools share."""
from __future__ import annotations

import sys

from .. import knobs


def internal_error(prog: str, err: Exception) -> int:
    """Report a bug in the tool itself: one line, exit code 2; re-raise in debug mode."""
    if knobs.DEBUG.get():
        raise err
    print(f"{prog}: internal error: {type(err).__name__}: {err} (set {knobs.DEBUG.name}=1 "
          "for the Python traceback)", file=sys.stderr)
    return 2


def bad_knob(prog: str, err: knobs.KnobError) -> int:
    """Report a ZYNML_* variable that holds a bad value: a usage error, exit code 1."""
    print(f"{prog}: error: {err.message}", file=sys.stderr)
    return 1
