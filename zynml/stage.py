"""What a stages table is made of, in the spirit of Triton's `add_stages`.

A backend (zynml/backend/<name>/stages.py) is one `Backend`: its ordered table of
`Stage`s plus the few facts the driver needs around them. The driver (zynml/compiler.py)
puts the shared front stages (ast, cir, linalg) before a backend's table and runs it up
to the stage asked for; `zynml compile --emit NAME` shows what stage NAME made and
`--save-temps DIR` writes what every stage made as DIR/NAME.EXT. So each stage is named
once, in its table, and the CLI, the build and the dumps read the tables.

    Stage("ptx", to_ptx, Output("ptx"), inputs=("nvvm",))

MLIR stages change one module in place (cir becomes linalg, linalg becomes gpu...). That
is safe because stages run in table order, a dump is written as soon as its stage has
run, and only the last stage's output is returned; a stage that only looks at a module
that later stages go on from (the launch plan, the LLVM IR) must leave it as it was.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Output", "Stage", "Backend", "Compilation", "TEXT_MLIR"]


@dataclass(frozen=True)
class Output:
    """How a stage's output is shown. `show` turns it into text (printed on stdout, or
    written with -o) or, for a `binary` stage, bytes (written only with -o); None when
    there is nothing to show, for the reason `none_means` gives. `ext` names the file
    `--save-temps` writes."""

    ext: str
    binary: bool = False
    show: Callable[[Any], str | bytes | None] = str
    none_means: str = ""


TEXT_MLIR = Output("mlir")


@dataclass(frozen=True)
class Stage:
    """One arrow: `run(*outputs of inputs, compilation)` makes this stage's output.

    inputs: the stages whose outputs `run` takes, in order; None (the usual case): the
    stage above it in the table; () for a stage that starts from the Compilation itself.
    """

    name: str
    run: Callable[..., Any]
    output: Output
    inputs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Backend:
    """A backend as the driver sees it.

    name:          the backend a Placement names ("iree", "native").
    stages:        its stages in the order they run; the last makes the artifact that
                   the runtime loads and the cache keeps.
    load:          the artifact from the bytes its last stage's `show` gave (the cache).
    check:         check(checked, target, placement, signature) refuses, with a located
                   ZynMLError, a program the target cannot run (signature: None for the
                   shape-generic program `zynml.compile` checks).
    shape_generic: whether it compiles a program without input shapes.
    emit_device:   the device `--device auto` means when one of its stages is asked for.
    wrong_backend: the error when one of its stages is asked of a program another
                   backend compiles ({stage}, {device}, {backend} filled in).
    """

    name: str
    stages: tuple[Stage, ...]
    load: Callable[[bytes], Any]
    check: Callable[..., None]
    shape_generic: bool
    emit_device: str | None
    wrong_backend: str

    def __post_init__(self) -> None:
        names = [s.name for s in self.stages]
        assert len(set(names)) == len(names), f"stage named twice in {names}"


@dataclass
class Compilation:
    """What the stages of one compilation read besides their inputs: the program's
    source (for the ast stage and for locating errors), its typed AST, the backend and its
    target, and the cache `iree-compile` keeps its own results in. `checks`: checked mode
    (zynml/checks.py); the linalg stage then leaves the program's check table in
    `check_table`."""

    backend: Backend
    target: Any
    source: Any = None  # SourceFile
    checked: Any = None  # CheckedProgram
    cache: Any = None  # ArtifactCache
    checks: bool = False
    check_table: Any = None  # list[zynml.checks.Check], once the linalg stage has run
