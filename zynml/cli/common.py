"""What the ZynML command-line tools share."""
from __future__ import annotations

import os
import sys

# Set to 1 to see the Python traceback of an internal error (a compiler bug).
DEBUG_ENV = "ZYNML_DEBUG"


def internal_error(prog: str, err: Exception) -> int:
    """Report a bug in the tool itself: one line, exit code 2; re-raise in debug mode."""
    if os.environ.get(DEBUG_ENV):
        raise err
    print(f"{prog}: internal error: {type(err).__name__}: {err} (set {DEBUG_ENV}=1 for the "
          "Python traceback)", file=sys.stderr)
    return 2
