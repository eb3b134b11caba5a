"""`@device("...")` on a block that differs from the program's device: the program runs
in segments, one per run of consecutive blocks on the same device.

    config { compute_device: "cuda:0" }
    let a = compute(x) { ... }                      # segment 1: cuda:0
    let b = compute(a) @device("cpu") { ... }       # segment 2: cpu
    let c = compute(b, x) { ... }                   # segment 3: cuda:0

Each segment is a Program of its own made from the blocks' source text (so errors keep
their lines): its inputs are the names it reads (program inputs or earlier results), its
outputs every value it binds. Values cross between segments as arrays (a GPU result read
by the CPU is copied to the host, and back). Programs of compute blocks only; a program
with pipelines, records or whole-value builtins gets a located error.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ZynMLError
from .frontend import ast

__all__ = ["Segment", "plan_segments"]


@dataclass
class Segment:
    device: str
    source: str
    targets: list[str]


def block_device(step) -> str | None:
    """The device a `@device("...")` names on this step's block (one name), or None."""
    kernel = step.kernel
    annotation = kernel.annotations.get("device") if kernel is not None else None
    if annotation is None or len(annotation.args) != 1 or \
            not isinstance(annotation.args[0], ast.StringLit):
        return None
    return annotation.args[0].value


def plan_segments(program, resolve_device) -> list[Segment] | None:
    """Segments of `program` (a zynml.Program) when a block asks for another device than
    the program's, else None. `resolve_device(name, loc)` gives a device's canonical id."""
    checked = program.generic
    own = program.device
    devices = []
    for step in checked.steps:
        named = block_device(step)
        devices.append(resolve_device(named, step.loc) if named else own)
    if all(d == own for d in devices):
        return None
    statements = program.ast.body
    first_bad = next((s for s in checked.steps if s.kernel is None or s.pipes), None)
    if first_bad is not None or program.ast.pipelines or len(statements) != len(checked.steps):
        loc = first_bad.loc if first_bad is not None else checked.steps[0].loc
        raise ZynMLError("blocks on different devices work in programs made of compute "
                         "blocks (no pipelines, records, splits or `|>`)", loc)
    lines = program.source.text.splitlines(keepends=True)
    starts = [s.loc.line - 1 for s in statements] + [len(lines)]
    segments: list[Segment] = []
    for index, (step, device) in enumerate(zip(checked.steps, devices)):
        text = "".join(lines[starts[index]:starts[index + 1]])
        # blank lines keep the block on its original line numbers in messages
        padding = "\n" * starts[index] if not segments or segments[-1].device != device \
            else ""
        if segments and segments[-1].device == device:
            segments[-1].source += text
            segments[-1].targets.append(step.target)
        else:
            segments.append(Segment(device, padding + text, [step.target]))
    return segments


def run_segments(parts: list, inputs: dict[str, Any], outputs: list[str]) -> dict[str, Any]:
    """Run the segments' Programs in order, feeding each the values it reads."""
    values = dict(inputs)
    for part in parts:
        values.update(part(**{name: values[name] for name in part.inputs}))
    return {name: values[name] for name in outputs}
