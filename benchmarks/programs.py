"""ZynML programs that more than one benchmark runs (each imports them by name)."""
from pathlib import Path

_PROGRAMS = Path(__file__).resolve().parent.parent / "tests" / "programs"

# Row softmax as four blocks (two reductions, two maps), as a user would write it first;
# the tests run the same file.
SOFTMAX = (_PROGRAMS / "softmax_pipeline.zyn").read_text()
