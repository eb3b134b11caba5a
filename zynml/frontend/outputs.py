"""Blocks with several outputs: `let (p2, m2) = compute(p, g) { ... out.p2[i] = ...;
out.m2[i] = ... }` (docs/language.md §2).

The names of the `let` name the outputs; the body writes each as `out.NAME[...]`, and
every output's shape and dtype come from its own writes, as `out`'s do. The body checker
(body_checker.py) calls these helpers: `output_target` turns `out.NAME[...]` into a write
of that output's symbol, and `check_outputs` checks each output once the body is checked.
"""
from __future__ import annotations

from . import ast
from .symbols import Step
from ..errors import ZynMLError

__all__ = ["OUTPUTS_NAMESPACE", "several_outputs", "output_target", "unknown_output", "check_outputs",
           "check_output_names"]

# The kind of the symbol `out` in a block of several outputs: not writable itself.
OUTPUTS_NAMESPACE = "outputs"


def _names(checker) -> str:
    return ", ".join(checker.output_names)


def _err(message: str, node: ast.Node) -> ZynMLError:
    return ZynMLError(message, ast.leftmost(node).loc)


def unknown_output(checker, node: ast.Expr) -> ZynMLError:
    """`out.zz` where the let binds no `zz` (or `out.a` in a block of one output)."""
    name = node.name if isinstance(node, ast.Attribute) else "?"
    if checker.output_names is None:
        return _err(f"'out.{name}' names one of several outputs, but this block has one: "
                    f"write out[...] (or bind several: let (a, b) = compute(...))", node)
    return _err(f"unknown output '{name}'; this block's outputs are {_names(checker)} "
                f"(the names of its 'let')", node)


def output_target(checker, target: ast.Expr) -> ast.Expr:
    """The target of an assignment with `out.NAME[...]` made a write of output NAME (its
    base becomes the name `out.NAME`, which the block's scope binds); other targets as
    they are. A write of plain `out` in a block of several outputs is an error."""
    several = checker.output_names is not None
    base = target.base if isinstance(target, ast.Index) else target
    if isinstance(base, ast.Attribute) and isinstance(base.base, ast.Name) and \
            base.base.id == "out":
        local = f"out.{base.name}"
        if not several or checker._lookup(local) is None:
            raise unknown_output(checker, base)
        if not isinstance(target, ast.Index):
            raise _err(f"write one element of '{local}': {local}[i] = ...", target)
        target.base = ast.Name(base.base.loc, local)  # errors point at `out`
        return target
    if several and isinstance(base, ast.Name) and base.id == "out" and \
            checker._lookup("out") is not None and checker._lookup("out").kind == \
            OUTPUTS_NAMESPACE:
        first = checker.output_names[0]
        raise _err(f"this block has {len(checker.output_names)} outputs "
                   f"({_names(checker)}): write each as out.NAME[...], e.g. "
                   f"out.{first}[...]", base)
    return target


def check_output_names(node: ast.Compute, names: list[str], locs: list) -> None:
    """Before the body is checked: a reduction has one result, and names are distinct."""
    if node.kernel is not None and node.kernel.kind == "reduce":
        raise _err(f"a 'reduce' kernel has one result, but the 'let' binds {len(names)} "
                   f"names; write the reductions as loops (acc += ...) and the results "
                   f"with out.NAME[...]", node.kernel)
    for k, name in enumerate(names):
        if name in names[:k]:
            raise ZynMLError(f"'{name}' is bound twice by this 'let'", locs[k])


def check_outputs(checker, sym, kind: str) -> None:
    """After the body: every output is written."""
    if not checker.stores:
        raise ZynMLError(f"output '{sym.name}' is never written: the body must write "
                         f"out.{sym.name}[...]", sym.loc)


def several_outputs(checker, stmt: ast.Let) -> None:
    """`let (a, b) = compute(...)` at the top level (checker.py): one step computes all
    outputs and binds `a`; a step of op "result" binds each other output."""
    check_output_names(stmt.value, stmt.targets, stmt.target_locs)
    step = checker._compute(stmt.targets[0], stmt.value, stmt,
                            outputs=list(zip(stmt.targets, stmt.target_locs)))
    for k, output in enumerate(step.kernel.outputs):
        if k == 0:
            checker.steps.append(step)
        else:
            checker.steps.append(Step(output.name, stmt.loc, ty=output.result, op="result",
                                      operands=[step.target], params={"index": k}))
        checker.values[output.name] = output.result
        if checker.pipeline is None and output.name not in checker.outputs:
            checker.outputs.append(output.name)
