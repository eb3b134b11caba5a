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

import math
from typing import Any

from . import ast
from .symbols import Step, is_tensor
from .types import ANY, INT_LITERAL, SCALARS, TensorType
from ..errors import ZynMLError

CONFIG_KEYS = {"compute_device": "a device name such as \"cpu\" or \"auto\""}
DTYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
          "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
          "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "bool",
          **{n: n for n in ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16",
                            "u32", "u64")}}
SIZE_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
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
        self.pools: dict[str, dict] = {}  # memory_pool name -> {size, live: {name: bytes}}
        self.devices_named: list[tuple[str, Any]] = []  # (device, loc) for the API to check
        self.host_values: dict[str, str] = {}  # `let d = compute_devices()`: name -> query
        self.mutated: dict[str, Any] = {}  # inputs updated in place (`mut x`) -> loc

    def host_value_let(self, name: str, value: ast.Expr) -> bool:
        """`let devices = compute_devices()`: a value of the host, not of a kernel (the
        list of devices present, as zynml.compute_devices() gives it), computed at the call
        and returned with the outputs."""
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and value.func.id == "compute_devices"):
            return False
        if value.args or value.kwargs:
            raise ZynMLError("compute_devices() takes no arguments", value.loc)
        self.host_values[name] = "compute_devices"
        return True

    # ------------------------------------------------------------------ memory

    def memory_let(self, stmt: ast.Let) -> bool:
        """`allocate(...)`, `x.to_device(...)`, `memory_pool(...)`, `pool.allocate(...)`.

        On the CPU every device is the host: `allocate` gives a zero-filled tensor,
        `to_device` the value itself (copy or not), and a pool checks that what is live in
        it fits its size, and that `free` names a live tensor of the pool."""
        value = stmt.value
        if len(stmt.targets) != 1 or not isinstance(value, ast.Call):
            return False
        name = stmt.targets[0]
        func = value.func
        kwargs = {kw.name: kw for kw in value.kwargs}
        if isinstance(func, ast.Name) and func.id == "allocate":
            self._allocate(name, value, kwargs, stmt, pool=None)
            return True
        if isinstance(func, ast.Name) and func.id == "memory_pool":
            self._device_kw(kwargs)
            size = kwargs.get("size")
            if size is None or not isinstance(size.value, ast.UnitLit) or \
                    size.value.unit not in SIZE_UNITS:
                raise ZynMLError("memory_pool takes size=<bytes> such as 1GB", value.loc)
            self.pools[name] = {"size": int(size.value.value * SIZE_UNITS[size.value.unit]),
                                "live": {}}
            return True
        if isinstance(func, ast.Attribute) and isinstance(func.base, ast.Name):
            if func.name == "to_device":
                self._to_device(name, value, func.base, stmt)
                return True
            if func.base.id in self.pools and func.name == "allocate":
                self._allocate(name, value, kwargs, stmt, pool=func.base.id)
                return True
        return False

    def memory_statement(self, stmt: ast.ExprStmt) -> bool:
        """`pool.free(t)` and `pool.reset()`."""
        call = stmt.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and
                isinstance(call.func.base, ast.Name) and call.func.base.id in self.pools):
            return False
        pool = self.pools[call.func.base.id]
        if call.func.name == "reset" and not call.args:
            pool["live"].clear()
            return True
        if call.func.name == "free" and len(call.args) == 1 and \
                isinstance(call.args[0], ast.Name):
            target = call.args[0].id
            if target not in pool["live"]:
                raise ZynMLError(f"'{target}' is not live in pool '{call.func.base.id}' "
                                 "(never allocated from it, or already freed)",
                                 call.args[0].loc)
            del pool["live"][target]
            return True
        raise ZynMLError("a memory pool has allocate(shape=[...]), free(tensor) and reset()",
                         call.loc)

    def _device_kw(self, kwargs) -> None:
        device = kwargs.get("device")
        if device is not None:
            if not isinstance(device.value, ast.StringLit):
                raise ZynMLError("device= takes a device name", device.value.loc)
            self.devices_named.append((device.value.value, device.value.loc))

    def _allocate(self, name: str, call: ast.Call, kwargs, stmt: ast.Let, pool) -> None:
        if call.args or not set(kwargs) <= {"shape", "dtype", "device", "pinned"}:
            raise ZynMLError("allocate takes shape=[...], dtype=, device= and pinned=",
                             call.loc)
        shape_kw = kwargs.get("shape")
        if shape_kw is None or not isinstance(shape_kw.value, ast.ListExpr):
            raise ZynMLError("allocate needs shape=[extents]", call.loc)
        shape = []
        for extent in shape_kw.value.elts:
            if not isinstance(extent, ast.IntLit) or extent.value < 0:
                raise ZynMLError("an extent of allocate's shape must be a non-negative "
                                 "integer", extent.loc)
            shape.append(extent.value)
        dtype_name = "float32"
        if "dtype" in kwargs:
            dtype = kwargs["dtype"].value
            if not isinstance(dtype, ast.Name) or dtype.id not in DTYPES:
                raise ZynMLError("dtype= takes one of " + ", ".join(sorted(DTYPES)), dtype.loc)
            dtype_name = dtype.id
        self._device_kw(kwargs)
        ty = TensorType(SCALARS[DTYPES[dtype_name]], tuple(shape))
        if pool is not None:
            state = self.pools[pool]
            need = ty.dtype.bits // 8 * math.prod(shape) if ty.dtype.bits >= 8 else math.prod(shape)
            used = sum(state["live"].values())
            if used + need > state["size"]:
                raise ZynMLError(f"pool '{pool}' ({state['size']} bytes) cannot hold "
                                 f"{need} more bytes ({used} in use)", call.loc)
            state["live"][name] = need
        self.steps.append(Step(name, stmt.loc, ty=ty, op="zeros"))
        self.values[name] = ty
        if self.pipeline is None and name not in self.outputs:
            self.outputs.append(name)

    def _to_device(self, name: str, call: ast.Call, base: ast.Name, stmt: ast.Let) -> None:
        if len(call.args) != 1 or not isinstance(call.args[0], ast.StringLit) or any(
                kw.name != "copy" for kw in call.kwargs):
            raise ZynMLError('to_device takes a device name and copy=true|false: '
                             'x.to_device("cpu")', call.loc)
        self.devices_named.append((call.args[0].value, call.args[0].loc))
        if base.id not in self.values and base.id not in self.inputs:
            if self.signature is None:
                self.inputs[base.id] = TensorType(ANY, None)
            elif base.id in self.signature:
                self.inputs[base.id] = self.signature[base.id]
            else:
                raise ZynMLError(f"missing input '{base.id}'", base.loc)
            self.input_locs[base.id] = base.loc
        source = base.id
        ty = self.values.get(source, self.inputs.get(source))
        self.steps.append(Step(name, stmt.loc, ty=ty, op="alias", operands=[source]))
        self.values[name] = ty
        if self.pipeline is None and name not in self.outputs:
            self.outputs.append(name)

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
