"""Program-level constructs around compute blocks: `config`, `@async` futures, `await`,
`all`, `any` and `timeout ... else ...` (a mixin of the program checker).

Meaning on the CPU backend (docs/language.md says the same): a program runs as one IREE
invocation, whose scheduler runs independent dispatches concurrently; a future is the
value of its `@async` compute and is not an output itself. `await f` is f's value;
`await all(fs)` the list of their values (an output holding a list); `await any(fs)` is
(value, index) of the first future in list order, the one that completes first when
they all complete together; `await f timeout T else d` checks that T is a duration and d
a value of f's kind: f has always completed when the program returns, so d is not taken.
"""
from __future__ import annotations

from typing import Any

from . import ast
from .symbols import Step, is_tensor
from .types import INT_LITERAL
from ..errors import ZynMLError

CONFIG_KEYS = {"compute_device": "a device name such as \"cpu\" or \"auto\""}
TIME_UNITS = ("us", "ms", "s")


class ProgramLevel:
    """Mixin: needs self.values, self.steps, self.outputs, self.pipeline, self._compute."""

    futures: dict[str, Any]
    future_lists: dict[str, list[str]]
    list_outputs: dict[str, list[str]]

    def _init_program_level(self) -> None:
        self.futures = {}
        self.future_lists = {}
        self.list_outputs = {}

    # ------------------------------------------------------------------ config

    def check_config(self, configs: list[ast.Config]) -> dict[str, Any]:
        settings: dict[str, Any] = {}
        for config in configs:
            for entry in config.entries:
                if entry.key not in CONFIG_KEYS:
                    raise ZynMLError(f"unknown config key '{entry.key}'; keys: "
                                     + ", ".join(CONFIG_KEYS), entry.loc)
                if not isinstance(entry.value, ast.StringLit):
                    raise ZynMLError(f"'{entry.key}' takes {CONFIG_KEYS[entry.key]}",
                                     entry.value.loc)
                settings[entry.key] = (entry.value.value, entry.value.loc)
        return settings

    # ------------------------------------------------------------------ futures and await

    def async_let(self, stmt: ast.Let) -> bool:
        """Handle `let` of futures, lists of futures and awaits; False if not one."""
        value = stmt.value
        if len(stmt.targets) == 1 and isinstance(value, ast.Compute) and _is_async(value):
            self._future(stmt.targets[0], value, stmt)
            return True
        if len(stmt.targets) == 1 and isinstance(value, ast.ListExpr) and value.elts and \
                all(isinstance(e, ast.Compute) for e in value.elts):
            names = []
            for i, element in enumerate(value.elts):
                if not _is_async(element):
                    raise ZynMLError("a list of computes holds futures: mark each @async",
                                     element.loc)
                names.append(f"{stmt.targets[0]}[{i}]")
                self._future(names[-1], element, stmt)
            self.future_lists[stmt.targets[0]] = names
            return True
        if isinstance(value, ast.Await):
            self._await(stmt, value)
            return True
        return False

    def _future(self, name: str, node: ast.Compute, stmt: ast.Let) -> None:
        step = self._compute(name, node, stmt)
        step.params["future"] = True
        self.values[name] = step.ty
        self.steps.append(step)
        self.futures[name] = step.ty

    def _alias(self, target: str, source: str, stmt: ast.Let) -> None:
        ty = self.values[source]
        self.steps.append(Step(target, stmt.loc, ty=ty, op="alias", operands=[source]))
        self.values[target] = ty
        if self.pipeline is None and target not in self.outputs:
            self.outputs.append(target)

    def _await(self, stmt: ast.Let, node: ast.Await) -> None:
        inner = node.value
        if node.timeout is not None:
            if not (isinstance(node.timeout, ast.UnitLit) and node.timeout.unit in TIME_UNITS):
                raise ZynMLError("a timeout is a duration such as 1000ms", node.timeout.loc)
            if node.default is None:
                raise ZynMLError("'timeout' needs 'else <default value>'", node.loc)
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and \
                inner.func.id in ("all", "any"):
            if len(inner.args) != 1 or not isinstance(inner.args[0], ast.Name) or \
                    inner.args[0].id not in self.future_lists:
                raise ZynMLError(f"'{inner.func.id}' takes a list of futures", inner.loc)
            futures = self.future_lists[inner.args[0].id]
            if inner.func.id == "all":
                if len(stmt.targets) != 1:
                    raise ZynMLError("'await all(...)' is one list", stmt.loc)
                names = []
                for i, future in enumerate(futures):
                    names.append(f"{stmt.targets[0]}[{i}]")
                    self._alias(names[-1], future, stmt)
                    self.outputs.remove(names[-1])
                self.list_outputs[stmt.targets[0]] = names
                if self.pipeline is None:
                    self.outputs.append(stmt.targets[0])
                return
            if len(stmt.targets) != 2:
                raise ZynMLError("'await any(...)' gives (value, index): "
                                 "let (result, index) = await any(futures)", stmt.loc)
            self._alias(stmt.targets[0], futures[0], stmt)
            self.constants[stmt.targets[1]] = 0
            self.values[stmt.targets[1]] = INT_LITERAL
            self.steps.append(Step(stmt.targets[1], stmt.loc, constant=0, ty=INT_LITERAL))
            if self.pipeline is None:
                self.outputs.append(stmt.targets[1])
            return
        if not isinstance(inner, ast.Name) or inner.id not in self.futures:
            raise ZynMLError("'await' takes a future: a name bound to an @async compute",
                             inner.loc)
        if len(stmt.targets) != 1:
            raise ZynMLError("'await' gives one value", stmt.loc)
        if node.default is not None:
            self._check_default(node.default, self.futures[inner.id])
        self._alias(stmt.targets[0], inner.id, stmt)

    def _check_default(self, default: ast.Expr, ty: Any) -> None:
        if isinstance(default, ast.Name):
            other = self.values.get(default.id, self.inputs.get(default.id))
            if other is None:
                raise ZynMLError(f"unknown name '{default.id}'", default.loc)
            if is_tensor(other) != is_tensor(ty):
                raise ZynMLError("the default of a timeout must be of the awaited value's "
                                 "kind (tensor or scalar)", default.loc)
            return
        if is_tensor(ty) or not isinstance(default, (ast.IntLit, ast.FloatLit)):
            raise ZynMLError("the default of a timeout must be a value of the awaited "
                             "value's kind", default.loc)


def _is_async(node: ast.Compute) -> bool:
    return any(a.name == "async" for a in node.outer)
