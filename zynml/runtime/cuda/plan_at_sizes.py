"""A launch plan with run-time sizes, fixed at one call's sizes.

A program compiled with dynamic sizes has a plan that reads its inputs' sizes ("dim"),
computes with them ("scalar"), and views its buffers by them ("subview", "collapse",
"expand", views at computed offsets, allocations of computed shapes): the executor
interprets that, step by step, at every call (about 150-300 us of Python for an
elementwise program, against 20-40 on the fast path). The kernel library's programs are
compiled so, and a training step calls them about a hundred times.

`plan_at_sizes` evaluates every such step once for given input shapes (and the values
of the scalar inputs that sizes depend on, `size_inputs`) and returns the plan a call
at those sizes runs: inputs of fixed shapes, allocations of fixed shapes, every view a
plain view of its root at a fixed offset, launches with fixed grids, and of each "if"
step the branch those sizes take. Kernel parameters
that depend only on the call (a pointer, a scalar input no size depends on) stay
references, so the fast path (executor._FlatPlan) patches them per call as usual.
Runtime only: the kernels are the same; nothing is compiled again.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

from . import run_time_views
from .executor import _FlatPlan, _NotFlat, _row_major

__all__ = ["plan_at_sizes", "size_inputs", "flat_at", "held_inputs"]

# A plan with run-time sizes gets a fast path per set of sizes it is called at; a few
# dozen sets per program are plenty (a model's shapes)
SETS_PER_PLAN = 64

# steps whose references are sizes (what a fixed plan must know), by the keys naming them
_SIZE_KEYS = {"dim": ("index",), "scalar": ("args",), "alloc": ("shape",),
              "view": ("offsets",), "subview": ("offsets", "sizes"), "expand": ("sizes",),
              "launch": ("grid", "block", "shared_bytes"), "for": ("lower", "upper", "step"),
              "if": ("cond",)}


class _Unknown(Exception):
    """A size the plan needs is not fixed by the call's shapes: keep the interpreter."""


def size_inputs(plan: dict) -> list[int]:
    """The scalar inputs (by position) some size, offset or grid is computed from: a
    fixed plan holds their values."""
    names = {f"%in{i}": i for i, spec in enumerate(plan["inputs"])
             if spec["kind"] == "scalar"}
    found: set[int] = set()

    def visit(body: list[dict]) -> None:
        for step in body:
            for key in _SIZE_KEYS.get(step["op"], ()):
                value = step.get(key)
                for ref in value if isinstance(value, list) else [value]:
                    if isinstance(ref, str) and ref in names:
                        found.add(names[ref])
            for key in ("body", "then", "else"):
                visit(step.get(key, []))
    visit(plan["body"])
    return sorted(found)


def flat_at(executor, inputs: Sequence[Any]) -> "_FlatPlan | None":
    """`executor`'s fast path at given sizes: `inputs` a shape (tuple) per tensor input
    and a number per scalar input (those sizes depend on, `size_inputs`, are held as
    they are). The plan's own fast path when it has no run-time sizes; None where even
    fixed sizes leave it to the interpreter. Made once per set of sizes."""
    if executor.flat is not None or executor.poison or executor.module is None:
        return executor.flat
    held = held_inputs(executor)
    if any(not executor.plan["inputs"][i]["dtype"].startswith(("int", "uint"))
           for i in held):
        # the fast path's signature holds ints by value, not floats: a float that a
        # host step computes with would be held at its first value
        return None
    shapes = tuple(tuple(v) if spec["kind"] == "tensor" else None
                   for spec, v in zip(executor.plan["inputs"], inputs))
    scalars = {i: inputs[i] for i in held}
    key = (shapes, tuple(scalars.items()))
    kept = executor._flat_at
    if key in kept:
        return kept[key]
    flat = None
    fixed = plan_at_sizes(executor.plan, shapes, scalars)
    if fixed is not None:
        at_sizes = copy.copy(executor)
        at_sizes.plan = fixed
        try:
            flat = _FlatPlan(at_sizes)
        except _NotFlat:
            pass
    if len(kept) < SETS_PER_PLAN:
        kept[key] = flat
    return flat


def held_inputs(executor) -> list[int]:
    """The scalar inputs (positions) `executor`'s fast paths at fixed sizes hold the
    values of (`size_inputs` of its plan; none when the plan has fixed sizes)."""
    if executor.flat is not None:
        return []
    if executor._size_inputs is None:
        executor._size_inputs = size_inputs(executor.plan)
    return executor._size_inputs


def plan_at_sizes(plan: dict, shapes: Sequence[Any], scalars: dict[int, Any]) -> dict | None:
    """`plan` at these input `shapes` (a tuple per tensor input, None per scalar) and
    scalar values (`scalars`: position -> value, for `size_inputs(plan)`), or None when
    the sizes disagree (the interpreter says how) or a step is not fixed by them (a
    loop)."""
    try:
        run_time_views.check_equal_dims(plan.get("equal_dims", ()), list(shapes))
        return _Fixer(plan, shapes, scalars).plan()
    except (_Unknown, ValueError, IndexError, KeyError, TypeError, ZeroDivisionError):
        return None


class _Fixer:
    def __init__(self, plan: dict, shapes: Sequence[Any], scalars: dict[int, Any]):
        self.source = plan
        self.numbers: dict[str, Any] = {}  # a scalar's name -> its value
        # a view's name -> (its root's name, offset, sizes, strides), in elements
        self.views: dict[str, tuple[str, int, tuple, tuple]] = {}
        self.inputs = []
        for i, (spec, shape) in enumerate(zip(plan["inputs"], shapes)):
            name = f"%in{i}"
            if spec["kind"] == "tensor":
                shape = tuple(int(s) for s in shape)
                if len(shape) != len(spec["shape"]) or any(
                        want is not None and want != got
                        for want, got in zip(spec["shape"], shape)):
                    raise _Unknown()
                self.views[name] = (name, 0, shape, _row_major(shape))
                self.inputs.append({**spec, "shape": list(shape)})
            else:
                if i in scalars:
                    self.numbers[name] = scalars[i]
                self.inputs.append(spec)

    def plan(self) -> dict:
        body = [fixed for step in self.source["body"] for fixed in self.step(step)]
        return {**self.source, "inputs": self.inputs, "body": body, "equal_dims": []}

    def number(self, ref: Any) -> Any:
        if not isinstance(ref, str):
            return ref
        if ref not in self.numbers:
            raise _Unknown()
        return self.numbers[ref]

    def as_view(self, result: str, root: str, offset: int, sizes, strides) -> dict:
        sizes, strides = tuple(int(s) for s in sizes), tuple(int(s) for s in strides)
        self.views[result] = (root, int(offset), sizes, strides)
        return {"op": "view", "result": result, "source": root, "absolute": True,
                "offset": int(offset), "sizes": list(sizes), "strides": list(strides)}

    def step(self, step: dict) -> list[dict]:
        op = step["op"]
        if op == "dim":
            sizes = self.views[step["source"]][2]
            self.numbers[step["result"]] = sizes[int(self.number(step["index"]))]
            return []
        if op == "scalar":
            args = [self.number(a) for a in step["args"]]
            self.numbers[step["result"]] = run_time_views.SCALAR_FNS[step["fn"]](*args)
            return []
        if op == "alloc":
            shape = tuple(int(self.number(s)) for s in step["shape"])
            self.views[step["result"]] = (step["result"], 0, shape, _row_major(shape))
            return [{**step, "shape": list(shape)}]
        if op == "global":
            spec = next(g for g in self.source["globals"] if g["name"] == step["name"])
            shape = tuple(spec["shape"])
            self.views[step["result"]] = (step["result"], 0, shape, _row_major(shape))
            return [step]
        if op == "view":
            root, offset, _, _ = self.views[step["source"]]
            if "offsets" in step:
                offset += sum(int(self.number(o)) * s for o, s in
                              zip(step["offsets"], step["source_strides"]))
            elif step.get("absolute"):
                offset = int(step["offset"])
            else:
                offset += int(step["offset"])
            return [self.as_view(step["result"], root, offset, step["sizes"],
                                 step["strides"])]
        if op in ("subview", "collapse", "expand"):
            root, offset, sizes, strides = self.views[step["source"]]
            if op == "subview":
                values = [[self.number(v) for v in step[k]] for k in ("offsets", "sizes")]
                args = (*values, step["steps"], step["kept"])
                how = run_time_views.subview
            elif op == "collapse":
                args, how = (step["groups"],), run_time_views.collapse
            else:
                args = (step["groups"], [int(self.number(v)) for v in step["sizes"]])
                how = run_time_views.expand
            return [self.as_view(step["result"], root, *how(offset, sizes, strides, *args))]
        if op == "launch":
            args = [self.numbers.get(a, a) if isinstance(a, str) else a for a in step["args"]]
            return [{**step, "args": args,
                     "grid": [int(self.number(g)) for g in step["grid"]],
                     "block": [int(self.number(b)) for b in step["block"]],
                     "shared_bytes": int(self.number(step["shared_bytes"]))}]
        if op in ("tensor_map", "copy"):
            return [step]
        if op == "if":  # the branch these sizes take, fixed in turn
            branch = step["then"] if int(self.number(step["cond"])) else step["else"]
            return [fixed for inner in branch for fixed in self.step(inner)]
        raise _Unknown()  # a loop, or a step this module does not know

