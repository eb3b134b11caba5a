"""Blocks with several outputs: `let (p2, m2) = compute(p, g) { ... out.p2[i] = ...;
out.m2[i] = ... }` (docs/language.md §2).

The names of the `let` name the outputs; the body writes each as `out.NAME[...]`, and
every output's shape and dtype come from its own writes, as `out`'s do. The body checker
(body_checker.py) calls these helpers: `output_target` turns `out.NAME[...]` into a write
of that output's symbol, and `check_outputs` checks each output once the body is checked.
"""
from __future__ import annotations

import dataclasses

from . import ast
from .symbols import KernelOutput, Step, Symbol, is_tensor
from .types import TensorType
from ..errors import ZynMLError

__all__ = ["OUTPUTS_NAMESPACE", "several_outputs", "mutable_outputs", "mutable_result",
           "mutable_write", "kernel_outputs", "written_sym", "out_label", "reads_data",
           "check_scatter", "scatter_form", "output_target", "unknown_output", "check_outputs",
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
        if not checker.output_names:
            raise _err("this block is not bound by a 'let', so it has no 'out': it writes "
                       "its 'mut' inputs; bind it (let y = compute(...)) to write out", base)
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


def written_sym(store: ast.Assign) -> Symbol:
    """The output an `out...` (or `mut x`) write writes."""
    target = store.target
    return target.sym if isinstance(target, ast.Name) else target.base.sym


def out_label(sym: Symbol) -> str:
    return "out" if sym.name == "out" else f"out.{sym.name}"


def kernel_outputs(checker, kind: str, reduce_op, axis) -> list[KernelOutput]:
    """After the body: each output's type and extents, from its own writes."""
    outputs = []
    for sym in checker.out_syms:
        checker.stores = [s for s in checker.all_stores if written_sym(s) is sym]
        if checker.whole_out not in checker.stores:
            checker.whole_out = None
        if checker.output_names is not None or sym.init is not None:
            check_outputs(checker, sym, kind)
        if sym.init is not None:
            outputs.append(mutable_result(checker, sym))
            continue
        result, out_dims = checker._result(kind, reduce_op, axis)
        name = checker.name if checker.output_names is None else sym.name  # `let name`
        outputs.append(KernelOutput(name, sym, result, out_dims))
    return outputs


def mutable_write(checker, stmt: ast.Assign, sym: Symbol, value_t) -> None:
    """`x[i] = v` of a `mut x`: a write of x's output `sym` (the indices bind sizes to x's
    dimensions, as reads do)."""
    target = stmt.target
    target.base.sym = sym
    checker._check_rank(sym.init, target, len(target.indices))
    for dim, idx in enumerate(target.indices):
        checker._index_expr(idx)
        checker._bind_size(sym.init.name, dim, idx)
    check_scatter(checker, stmt)  # x[ids[i], d] += v
    checker.stores.append(stmt)
    target.ty = value_t


def reads_data(e: ast.Expr) -> bool:
    """Does an index read a tensor (`idx[i]`): a data-dependent index, a scatter's?"""
    if isinstance(e, ast.Index):
        return True
    if isinstance(e, ast.Binary):
        return reads_data(e.left) or reads_data(e.right)
    if isinstance(e, ast.Unary):
        return reads_data(e.operand)
    if isinstance(e, ast.Call):
        return any(reads_data(a) for a in e.args)
    return False


def check_scatter(checker, stmt: ast.Assign) -> bool:
    """A write of a `mut x` at an index read from data is a scatter: it must combine the
    contributions, `x[ids[i], d] += v` (repeated indices add up) or `x[ids[i], d] =
    min(x[ids[i], d], v)` (or max; the read at the very indices written). True for one."""
    if not any(reads_data(i) for i in stmt.target.indices):
        return False
    if scatter_form(stmt) is None:
        name = stmt.target.base.id
        raise _err(f"a write at an index read from data is a scatter and must accumulate: "
                   f"write {name}[...] += value (repeated indices add up), or "
                   f"{name}[...] = min({name}[...], value) (or max) with the same indices",
                   stmt.target)
    _one_combiner(checker, stmt)
    checker.scatters.append(stmt.loc)
    return True


def _one_combiner(checker, stmt: ast.Assign) -> None:
    """A block scatters into x one way: `+=` then `min` of each contribution in loop order
    is not what all sums then all minimums give, so mixing them is an error."""
    sym, kind = stmt.target.base.sym, scatter_form(stmt)[0]
    for other in checker.stores:
        if isinstance(other.target, ast.Index) and written_sym(other) is sym and \
                any(reads_data(i) for i in other.target.indices) and \
                scatter_form(other)[0] != kind:
            shown = {"+": "+="}
            raise _err(f"'{stmt.target.base.id}' is scattered into with "
                       f"'{shown.get(scatter_form(other)[0], scatter_form(other)[0])}' and "
                       f"with '{shown.get(kind, kind)}' in one block, whose order would "
                       f"matter: write them in two blocks", stmt.target)


def scatter_form(stmt: ast.Assign):
    """(combine, contribution) of a scatter's write: ("+", v) for `x[k] += v`, ("min", v)
    for `x[k] = min(x[k], v)` or `min(v, x[k])`, ("max", v) alike; None for another form."""
    if stmt.op == "+":
        return "+", stmt.value
    call = stmt.value
    if stmt.op is not None or not isinstance(call, ast.Call) or \
            not isinstance(call.func, ast.Name) or call.func.id not in ("min", "max") or \
            len(call.args) != 2 or call.kwargs:
        return None
    target = stmt.target
    for k, arg in enumerate(call.args):
        if isinstance(arg, ast.Index) and isinstance(arg.base, ast.Name) and \
                arg.base.id == target.base.id and _same(arg.indices, target.indices):
            return call.func.id, call.args[1 - k]
    return None


def _same(a, b) -> bool:
    """Whether two expressions are written alike (locations and types aside)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if not isinstance(a, ast.Node):
        return a == b
    return all(_same(getattr(a, f.name), getattr(b, f.name))
               for f in dataclasses.fields(a) if f.name not in ("loc", "ty", "sym"))


def check_outputs(checker, sym, kind: str) -> None:
    """After the body: every output is written."""
    if checker.stores:
        return
    if sym.init is not None:
        raise ZynMLError(f"'{sym.name}' is marked 'mut' but never written; remove 'mut'",
                         sym.loc)
    raise ZynMLError(f"output '{sym.name}' is never written: the body must write "
                     f"out.{sym.name}[...]", sym.loc)


def mutable_outputs(checker, node: ast.Compute) -> dict[Symbol, Symbol]:
    """`compute(mut x, ...)`: for each input marked `mut`, the output symbol its writes
    (`x[i] = v`) go to; reads of `x` keep reading the input, its values before the block."""
    found: dict[Symbol, Symbol] = {}
    for expr, marked, arg in zip(node.inputs, node.mutable, checker.arg_syms):
        if not marked:
            continue
        if not isinstance(expr, ast.Name):
            raise _err("only an input named by a plain name can be 'mut'", expr)
        if not is_tensor(arg.ty):
            raise _err(f"'{expr.id}' is a scalar: only a tensor input can be 'mut'", expr)
        if node.kernel is not None and node.kernel.kind == "reduce":
            raise _err("a 'reduce' kernel cannot update an input in place: write it in a "
                       "block of another kind", expr)
        found[arg] = Symbol("out", arg.name, arg.ty, expr.loc, init=arg)
    return found


def mutable_result(checker, sym: Symbol) -> KernelOutput:
    """The output of `mut x`: x's dtype and shape (extents bound to x's dimensions)."""
    arg = sym.init
    if arg.ty.rank is None:  # known at the call
        return KernelOutput(arg.name, sym, TensorType(arg.ty.dtype, None), [], init=arg)
    dims = checker.shape_sizes(arg, sym.loc)
    return KernelOutput(arg.name, sym, TensorType(arg.ty.dtype, (None,) * arg.ty.rank), dims,
                        init=arg)


def several_outputs(checker, stmt: ast.Stmt) -> None:
    """`let (a, b) = compute(...)`, or a block that only updates inputs in place
    (`compute(mut x) {...}` as a statement), at the top level (checker.py)."""
    node = stmt.value
    if isinstance(stmt, ast.Let):
        check_output_names(node, stmt.targets, stmt.target_locs)
        names = list(zip(stmt.targets, stmt.target_locs))
    else:
        if not any(node.mutable):
            raise ZynMLError("bind the compute block's value with 'let name = compute(...)'",
                             stmt.loc)
        names = []
    first = names[0][0] if names else \
        next(e.id for e, m in zip(node.inputs, node.mutable) if m and isinstance(e, ast.Name))
    step = checker._compute(first, node, stmt, outputs=names)
    checker.steps.append(step)
    bind_outputs(checker, step, stmt)


def bind_outputs(checker, step: Step, stmt: ast.Stmt) -> None:
    """After the step of a compute: a step of op "result" binds each output but the first,
    each output is a value of the program, and an input updated in place (`mut x`) is an
    output too (its new values; the call writes them into the caller's array)."""
    for k, output in enumerate(step.kernel.outputs):
        if k:
            checker.steps.append(Step(output.name, stmt.loc, ty=output.result, op="result",
                                      operands=[step.target], params={"index": k}))
        checker.values[output.name] = output.result
        if output.init is not None and output.name in checker.inputs:
            checker.mutated.setdefault(output.name, output.sym.loc)
        if checker.pipeline is None and output.name not in checker.outputs:
            checker.outputs.append(output.name)
