"""Every ZYNML_* environment variable, typed and documented in one table.

    from zynml import knobs
    if knobs.DEBUG.get():
        traceback.print_exc()

`get()` reads the environment each time it is called, never once at import, so a test's
`monkeypatch.setenv` takes effect at once. An unset or empty variable means the default; a
value its type does not accept raises KnobError, which names the variable, the value and
what is accepted. The command-line tools call `validate()` first, so a bad value is a
usage error (exit 1) before any work, not an exception in the middle of a compile.

No other module reads a ZYNML_* variable, and docs/developer-guide.md's table is
`markdown_table()` (`python -m zynml.knobs` prints it): tests/test_knobs.py checks both.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from .errors import ZynMLError

__all__ = [
    "Knob", "KnobError", "KNOBS", "validate", "markdown_table",
    "CACHE_DIR", "CHECK", "CPU_THREADS", "CPU_SYNC_BYTES", "CUDA_POISON", "CUDA_WATCHDOG",
    "DEBUG",
    "DETERMINISTIC", "IREE_COMPILE", "PROGRAMMATIC_LAUNCH",
    "REPRODUCER_DIR", "TF32", "AUTOTUNE", "UKERNELS",
    "LOG", "SPECIALIZATION_LIMIT",
    "FUZZ_SCALE", "FUZZ_SHRINK", "GPU_COMPILE_ONLY", "TEST_CACHE_DIR", "TEST_IREE_GPU",
    "TEST_VULKAN",
]

T = TypeVar("T")


class KnobError(ZynMLError):
    """A ZYNML_* variable holds a value its knob's type does not accept."""


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _bool(text: str) -> bool:
    word = text.lower()
    if word not in _TRUE + _FALSE:
        raise ValueError(word)
    return word in _TRUE


def _words(text: str) -> tuple[str, ...]:
    return tuple(word.strip() for word in text.split(",") if word.strip())


# type -> (parser, which raises ValueError on a bad value; what the type accepts, for errors)
_TYPES: dict[str, tuple[Callable[[str], Any], str]] = {
    "bool": (_bool, "1, 0, true, false, yes, no, on or off (any case)"),
    "int": (int, "an integer"),
    "float": (float, "a number"),
    "path": (lambda text: Path(text).expanduser(), "a path"),
    "str": (str, "any text"),
    "list of str": (_words, "comma-separated words"),
}


@dataclass(frozen=True)
class Knob(Generic[T]):
    """One environment variable: its name, type (a key of _TYPES), default and meaning.

    `read_by` names the files that call `get()` (tests/test_knobs.py checks that it is
    exactly those); `choices`, for str and list knobs, the words accepted (empty: any);
    `minimum`, for int knobs, the smallest value accepted (None: any).
    """

    name: str
    type: str
    default: T
    doc: str
    read_by: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    minimum: int | None = None

    def __post_init__(self):
        assert self.name.startswith("ZYNML_") and self.type in _TYPES, self
        assert not self.choices or self.type in ("str", "list of str"), self
        assert self.minimum is None or self.type == "int", self

    def get(self) -> T:
        """The variable's value now, parsed; the default when it is unset or empty."""
        text = os.environ.get(self.name, "").strip()
        if not text:
            return self.default
        parse, accepted = _TYPES[self.type]
        try:
            value = parse(text)
        except ValueError:
            raise self._error(text, accepted) from None
        words = value if isinstance(value, tuple) else (value,)
        if self.minimum is not None and value < self.minimum:
            raise self._error(text, f"an integer of at least {self.minimum}")
        if self.choices and not set(words) <= set(self.choices):
            raise self._error(text, ("one" if self.type == "str" else "comma-separated words")
                              + " of: " + ", ".join(self.choices))
        return value

    def _error(self, text: str, accepted: str) -> KnobError:
        return KnobError(f"environment variable {self.name}={text!r} is not a valid "
                         f"{self.type}: expected {accepted}, or leave it unset")

    @property
    def default_text(self) -> str:
        """The default as the docs table shows it."""
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        if isinstance(self.default, tuple):
            return ",".join(self.default) or "empty"
        return str(self.default)


# ---------------------------------------------------------------------------- the table

CACHE_DIR: Knob[Path | None] = Knob(
    "ZYNML_CACHE_DIR", "path", None,
    "The folder of the compiled-artifact cache; unset: `$XDG_CACHE_HOME/zynml`, "
    "else `~/.cache/zynml`",
    read_by=("zynml/cache.py", "tests/autotune/test_tuner.py"))
CHECK: Knob[bool] = Knob(
    "ZYNML_CHECK", "bool", False,
    "Checked mode for programs that do not choose (`checked=` of `zynml.compile`/`run`): "
    "out-of-range reads and integer division by zero at run time are located errors "
    "(docs/language.md, checked mode)",
    read_by=("zynml/api.py",))
CPU_THREADS: Knob[int] = Knob(
    "ZYNML_CPU_THREADS", "int", 0,
    "Worker threads of the CPU backend (IREE's local-task device); 0: one per core. Read "
    "once, when the process first runs a program on the CPU",
    read_by=("zynml/runtime/iree_runner.py",), minimum=0)
CPU_SYNC_BYTES: Knob[int] = Knob(
    "ZYNML_CPU_SYNC_BYTES", "int", 128 << 10,
    "CPU calls that move at most this many bytes (inputs and results) run on the caller's "
    "thread (IREE's local-sync device), larger ones on the worker threads; 0: all on the "
    "workers (zynml/runtime/cpu_routing.py says why)",
    read_by=("zynml/runtime/cpu_routing.py",), minimum=0)
DETERMINISTIC: Knob[bool] = Knob(
    "ZYNML_DETERMINISTIC", "bool", False,
    "Deterministic mode for programs that do not choose (`deterministic=` of "
    "`zynml.compile`/`run`, `--deterministic`): scatters give the same bits run to run "
    "(on native CUDA, sorted segments instead of atomics; docs/language.md, scatters)",
    read_by=("zynml/api.py",))
TF32: Knob[bool] = Knob(
    "ZYNML_TF32", "bool", False,
    "f32 matrix products on TF32 tensor cores for programs that do not choose (`tf32=` "
    "of `zynml.compile`, `--tf32`): operands rounded to 10-bit mantissas, as PyTorch's "
    "allow_tf32 (native CUDA on sm_90a; elsewhere f32)",
    read_by=("zynml/api.py",))
CUDA_POISON: Knob[bool] = Knob(
    "ZYNML_CUDA_POISON", "bool", False,
    "Fill every native CUDA allocation with 0xFF bytes (NaN, -1), so that an element no "
    "kernel wrote cannot pass for a result (this also turns the fast launch path off); "
    "the tests set it on GPU hosts",
    read_by=("zynml/runtime/cuda/executor.py",))
CUDA_WATCHDOG: Knob[float] = Knob(
    "ZYNML_CUDA_WATCHDOG", "float", 0.0,
    "Seconds a native CUDA call may take, for finding a faulting or hanging kernel: above "
    "0, each call waits for its kernels (calls no longer overlap the GPU's work) and a "
    "fault, or kernels still running after this long, is an error naming that call's "
    "kernels; 0: off",
    read_by=("zynml/runtime/cuda/executor.py",))
PROGRAMMATIC_LAUNCH: Knob[bool] = Knob(
    "ZYNML_PROGRAMMATIC_LAUNCH", "bool", True,
    "Native CUDA on sm_90 and later: compile kernels that wait for the kernel before "
    "them first and let the next one launch as they end (programmatic dependent launch, "
    "griddepcontrol), and launch such kernels so; 0 when compiling: kernels as before; "
    "0 when they run: they launch one after the other",
    read_by=("zynml/api.py", "zynml/runtime/cuda/executor.py"))
DEBUG: Knob[bool] = Knob(
    "ZYNML_DEBUG", "bool", False,
    "Show the Python traceback of an internal error (a bug) in `zynml`, `zynml-opt` and "
    "Python passes",
    read_by=("zynml/cli/common.py", "zynml/cli/opt.py", "passes/pipeline.py"))
IREE_COMPILE: Knob[Path | None] = Knob(
    "ZYNML_IREE_COMPILE", "path", None,
    "The `iree-compile` to run (a path, or a name on `PATH`); unset: the one in the "
    "iree-base-compiler package, else `iree-compile` on `PATH` or beside `python`",
    read_by=("zynml/backend/iree/compile.py",))
REPRODUCER_DIR: Knob[Path | None] = Knob(
    "ZYNML_REPRODUCER_DIR", "path", None,
    "When a pass fails, `zynml-opt` saves the pipeline's input to a new file in this "
    "folder, as `--mlir-pass-pipeline-crash-reproducer=FILE` does",
    read_by=("zynml/cli/opt.py",))
UKERNELS: Knob[bool] = Knob(
    "ZYNML_UKERNELS", "bool", True,
    "Whether library calls on NVIDIA GPUs use the CUDA backend's hand-built kernels "
    "(zynml/backend/cuda/ukernels/) where one applies; 0: the library's ZynML source "
    "everywhere",
    read_by=("zynml/kernels/attention_backward.py",))
AUTOTUNE: Knob[bool] = Knob(
    "ZYNML_AUTOTUNE", "bool", True,
    "Whether native CUDA compiles use the autotuning database (`autotune.json` in the "
    "artifact cache folder, which `zynml tune` writes) for programs that set no strategy "
    "params",
    read_by=("zynml/compiler.py",))
LOG: Knob[tuple[str, ...]] = Knob(
    "ZYNML_LOG", "list of str", (),
    "Log topics to print on stderr, comma-separated: `recompiles` says why each compile "
    "of a Program happened (which input changed and how; the logger `zynml.recompiles`)",
    read_by=("zynml/specialize.py",), choices=("recompiles",))
SPECIALIZATION_LIMIT: Knob[int] = Knob(
    "ZYNML_SPECIALIZATION_LIMIT", "int", 8,
    "How many executables (one per input signature) a Program compiles before it warns "
    "once and compiles every size not pinned static as dynamic (a Program compiled with "
    "`dynamic=False` has no cap)",
    read_by=("zynml/specialize.py",))
# Read by the tests only (tools/gpu_tests.sh sets them).
FUZZ_SCALE: Knob[float] = Knob(
    "ZYNML_FUZZ_SCALE", "float", 1.0,
    "Tests: how many inputs the fuzz tests try, as a multiple of the usual (10: a longer "
    "hunt)",
    read_by=("tests/frontend/test_frontend_fuzz.py", "tests/frontend/test_parser_fuzz.py",
             "tests/test_differential.py", "tests/test_mutation_fuzz.py",
             "tests/cli/test_cli_fuzz.py", "tests/cli/test_opt_fuzz.py",
             "tests/backend/test_cache_fuzz.py"))
FUZZ_SHRINK: Knob[bool] = Knob(
    "ZYNML_FUZZ_SHRINK", "bool", False,
    "Tests: let hypothesis shrink a failing differential-test program (each smaller "
    "program recompiles, about a second each)",
    read_by=("tests/test_differential.py",))
GPU_COMPILE_ONLY: Knob[bool] = Knob(
    "ZYNML_GPU_COMPILE_ONLY", "bool", False,
    "Tests, on a machine without a GPU: run the GPU tests as far as compiling (into "
    "`ZYNML_TEST_CACHE_DIR`) and skip where they would touch the GPU",
    read_by=("tests/conftest.py",))
TEST_CACHE_DIR: Knob[Path | None] = Knob(
    "ZYNML_TEST_CACHE_DIR", "path", None,
    "Tests: the artifact cache to use (a GPU run's, compiled beforehand); unset: a new "
    "empty one per session",
    read_by=("tests/conftest.py",))
TEST_IREE_GPU: Knob[bool] = Knob(
    "ZYNML_TEST_IREE_GPU", "bool", False,
    "Tests: also run the spec examples on IREE's CUDA target",
    read_by=("tests/test_spec_examples.py",))
TEST_VULKAN: Knob[bool] = Knob(
    "ZYNML_TEST_VULKAN", "bool", False,
    "Tests: also run the spec examples on IREE's Vulkan target",
    read_by=("tests/test_spec_examples.py",))

KNOBS: tuple[Knob, ...] = (CACHE_DIR, CHECK, CPU_THREADS, CPU_SYNC_BYTES, CUDA_POISON,
                           CUDA_WATCHDOG, DEBUG,
                           DETERMINISTIC, IREE_COMPILE, PROGRAMMATIC_LAUNCH, REPRODUCER_DIR, TF32,
                           AUTOTUNE, UKERNELS, LOG, SPECIALIZATION_LIMIT,
                           FUZZ_SCALE, FUZZ_SHRINK,
                           GPU_COMPILE_ONLY, TEST_CACHE_DIR, TEST_IREE_GPU, TEST_VULKAN)


def validate() -> None:
    """Read every knob: a bad value raises its KnobError now rather than mid-run."""
    for knob in KNOBS:
        knob.get()


def markdown_table() -> str:
    """The table of docs/developer-guide.md's "Environment variables" section."""
    rows = ["| Variable | Type | Default | Meaning | Read by |", "|---|---|---|---|---|"]
    for knob in KNOBS:
        readers = ", ".join(f"`{path}`" for path in knob.read_by) or "nothing yet"
        words = ", ".join(f"`{word}`" for word in knob.choices)
        kind = f"{knob.type}: {words}" if words else knob.type
        if knob.minimum is not None:
            kind += f" >= {knob.minimum}"
        rows.append(f"| `{knob.name}` | {kind} | {knob.default_text} | {knob.doc} "
                    f"| {readers} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
