"""`@async` computes that run while the program goes on, and `await` that waits.

A program with futures runs in parts, made from its statements' source text (so errors
keep their lines, as zynml/segments.py does for `@device`):

    let f = compute(x) @async { ... }     # submitted: a Program of this block, its future
    let fs = [compute(x) @async {...},    # one submitted Program per element
              compute(x) @async {...}]
    let y = compute(x) { ... }            # runs of plain statements: one Program, called
    let v = await f                       # the host waits for f only
    let vs = await all(fs)                # for all of them, in order
    let (r, i) = await any(fs)            # for the first to complete: its value and index
    let s = await f timeout 10ms else y   # y if f has not completed within 10 ms

Each future is `Program.submit`'s (zynml/futures.py): on native CUDA the block goes to a
stream of its own and the future is a CUDA event after its launches (on an H100 the
blocks overlap from a program's second call on; its first call in a fresh process ran
them one after the other, 2026-11-27, cause not found); elsewhere the block runs on a
thread pool. A timeout leaves the work running. A plain statement that reads a
future waits for it first. Programs with pipelines, records, `mut` inputs or host values
keep the one-invocation meaning (docs/language.md §7): every future has completed when
the program returns.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .frontend import ast
from .frontend.types import to_numpy

__all__ = ["plan_async", "AsyncPlan"]

SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass
class _Part:
    kind: str  # "run" (call), "submit" (a future), "await", "all", "any"
    program: Any = None  # run, submit: a zynml.Program
    targets: list[str] = field(default_factory=list)  # what the part binds
    output: str = ""  # submit: the Program's output that is the future's value
    futures: list[str] = field(default_factory=list)  # await, all, any: what is awaited
    timeout: float | None = None  # await: seconds
    default: Any = None  # await: an ast.Name or a literal's value


@dataclass
class AsyncPlan:
    parts: list[_Part]
    outputs: list[str]  # the program's outputs, in order
    future_values: dict[str, str]  # future name -> its Program's output name

    def run(self, inputs: dict[str, Any]) -> dict[str, Any]:
        from .futures import submit
        values: dict[str, Any] = dict(inputs)
        futures: dict[str, Any] = {}
        for part in self.parts:
            if part.kind == "submit":
                futures[part.targets[0]] = submit(
                    part.program, self._read(part.program.inputs, values, futures))
            elif part.kind == "run":
                values.update(part.program(self._read(part.program.inputs, values, futures)))
            else:
                self._await(part, values, futures)
        return {name: values[name] if name in values else self._value(name, futures)
                for name in self.outputs}

    def _value(self, name: str, futures: dict[str, Any], timeout=None) -> Any:
        return futures[name].result(timeout)[self.future_values[name]]

    def _read(self, names, values: dict[str, Any], futures: dict[str, Any]) -> dict:
        """A part's inputs; a future read by a plain statement is waited for."""
        return {name: values[name] if name in values else self._value(name, futures)
                for name in names}

    def _await(self, part: _Part, values: dict[str, Any], futures: dict[str, Any]) -> None:
        from .futures import wait_all, wait_any
        awaited = [futures[name] for name in part.futures]
        if part.kind == "all":
            results = wait_all(awaited)
            values[part.targets[0]] = [r[self.future_values[n]] for r, n in
                                       zip(results, part.futures)]
        elif part.kind == "any":
            result, index = wait_any(awaited)
            values[part.targets[0]] = result[self.future_values[part.futures[index]]]
            values[part.targets[1]] = np.int64(index)
        else:
            try:
                values[part.targets[0]] = self._value(part.futures[0], futures, part.timeout)
            except TimeoutError:  # the work goes on; its value is not waited for
                default = part.default
                values[part.targets[0]] = values[default.id] if \
                    isinstance(default, ast.Name) else default


def plan_async(program) -> AsyncPlan | None:
    """The parts of `program` (a zynml.Program) when it has `@async` computes it can
    run as futures, else None (module docstring)."""
    checked = program.generic
    future_steps = {step.target: step for step in checked.steps if step.params.get("future")}
    if not future_steps or program.ast.pipelines or checked.record_roots or \
            checked.mutated or checked.host_values:
        return None
    statements = program.ast.body
    if not all(isinstance(s, ast.Let) for s in statements) or \
            any(a.loc.line >= b.loc.line for a, b in zip(statements, statements[1:])):
        return None
    lines = program.source.text.splitlines(keepends=True)
    starts = [s.loc.line - 1 for s in statements] + [len(lines)]
    make = _Maker(program)
    parts: list[_Part] = []
    future_values: dict[str, str] = {}
    run_text = ""  # plain statements not yet made into a part
    for index, stmt in enumerate(statements):
        text = "".join(lines[starts[index]:starts[index + 1]])
        padding = "\n" * starts[index]  # the statement keeps its line in messages
        value = stmt.value
        if isinstance(value, (ast.Compute, ast.ListExpr, ast.Await)) and \
                (isinstance(value, ast.Await) or _futures_of(stmt, future_steps)):
            if run_text:
                parts.append(make.run(run_text))
                run_text = ""
        else:
            run_text += (padding if not run_text else "") + text
            continue
        if isinstance(value, ast.Compute):
            name = stmt.targets[0]
            future_values[name] = name
            parts.append(make.submit(padding + _without_async(text), name, name))
        elif isinstance(value, ast.ListExpr):
            for k, element in enumerate(_element_texts(text, stmt)):
                name, output = f"{stmt.targets[0]}[{k}]", f"zynml_future_{k}"
                future_values[name] = output
                parts.append(make.submit(padding + f"let {output} = " +
                                         _without_async(element), name, output))
        else:
            parts.append(_await_part(stmt, value, future_steps))
    if run_text:
        parts.append(make.run(run_text))
    return AsyncPlan(parts, list(checked.outputs), future_values)


class _Maker:
    """Programs of parts, compiled as `program` is (device, target, options)."""

    def __init__(self, program):
        self.program = program

    def _program(self, text: str):
        p = self.program
        return type(p)(text, p.device, p.backend, **p.derived_options())

    def run(self, text: str) -> _Part:
        return _Part("run", self._program(text))

    def submit(self, text: str, name: str, output: str) -> _Part:
        return _Part("submit", self._program(text), [name], output)


def _futures_of(stmt: ast.Let, future_steps: dict) -> bool:
    return stmt.targets[0] in future_steps or f"{stmt.targets[0]}[0]" in future_steps


def _without_async(text: str) -> str:
    """The block as a plain compute: `@async` blanked (columns stay where they were)."""
    return text.replace("@async", " " * len("@async"), 1)


def _element_texts(text: str, stmt: ast.Let) -> list[str]:
    """The source of each compute of `let fs = [compute ..., compute ...]`."""
    line0 = stmt.loc.line
    lines = text.splitlines(keepends=True)

    def offset(loc) -> int:
        return sum(len(line) for line in lines[:loc.line - line0]) + loc.col - 1
    starts = [offset(e.loc) for e in stmt.value.elts] + [text.rindex("]")]
    texts = []
    for element, a, b in zip(stmt.value.elts, starts, starts[1:]):
        # dedented by the element's column: its lines keep their indentation relative
        # to its first line, which becomes a `let` at column 1
        first, *rest = text[a:b].rstrip().rstrip(",").split("\n")
        cut = element.loc.col - 1
        rest = [line[min(cut, len(line) - len(line.lstrip(" "))):] for line in rest]
        texts.append("\n".join([first, *rest]) + "\n")
    return texts


def _await_part(stmt: ast.Let, node: ast.Await, future_steps: dict) -> _Part:
    inner = node.value
    if isinstance(inner, ast.Call):  # all(fs), any(fs): the checker made their steps
        names = sorted((n for n in future_steps if n.startswith(inner.args[0].id + "[")),
                       key=lambda n: int(n[n.index("[") + 1:-1]))
        return _Part(inner.func.id, targets=list(stmt.targets), futures=names)
    timeout = default = None
    if node.timeout is not None:
        timeout = node.timeout.value * SECONDS[node.timeout.unit]
        default = node.default
        if not isinstance(default, ast.Name):  # a number of the future's type
            dtype = to_numpy(future_steps[inner.id].ty)
            default = dtype.type(default.value)
    return _Part("await", targets=list(stmt.targets), futures=[inner.id], timeout=timeout,
                 default=default)
