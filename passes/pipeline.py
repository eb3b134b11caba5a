"""Textual pass pipelines that mix zynml and upstream passes.

MLIR's Python bindings register Python passes per PassManager, not globally, so
`PassManager.parse` cannot see `cir-to-linalg`. `build_pass_manager` splits the top level
of `builtin.module(a,b{k=v},func.func(c))` and adds each element either as a zynml
Python pass (with its options parsed into the pass's Options dataclass) or as upstream
pipeline text.
"""
from __future__ import annotations

import dataclasses
import traceback
from typing import Any

from mlir import ir
from mlir.passmanager import PassManager

from .. import knobs
from . import PASSES, get_pass
from ..limits import MAX_VALUE_DEPTH, recursion_room
from ..lowering.cir_ops import AttributeKindError

__all__ = ["build_pass_manager", "split_pipeline", "PipelineError", "parse_options"]


class PipelineError(ValueError):
    """A malformed pipeline or option; the message says what and where."""


def split_pipeline(text: str) -> list[str]:
    """`builtin.module(a,b{x=1},func.func(c))` -> ["a", "b{x=1}", "func.func(c)"]."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module("):-1]
    elements, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
            if depth < 0:
                raise PipelineError(f"unbalanced '{ch}' in pass pipeline at column {i + 1}")
        elif ch == "," and depth == 0:
            elements.append(text[start:i].strip())
            start = i + 1
    if depth != 0:
        raise PipelineError("unbalanced brackets in pass pipeline")
    last = text[start:].strip()
    if last:
        elements.append(last)
    return [e for e in elements if e]


def parse_options(pass_name: str, options_cls: type, text: str) -> Any:
    """`k1=v1 k2=v2` (the text inside `{}`) -> an Options instance, validated."""
    fields = {f.name.replace("_", "-"): f for f in dataclasses.fields(options_cls)}
    values: dict[str, Any] = {}
    for item in text.replace(",", " ").split():
        if "=" not in item:
            raise PipelineError(f"option '{item}' of '{pass_name}' needs a value (name=value)")
        key, raw = item.split("=", 1)
        if key not in fields:
            known = ", ".join(fields) or "none"
            raise PipelineError(f"unknown option '{key}' of '{pass_name}'; options: {known}")
        field = fields[key]
        values[field.name] = _convert_option(pass_name, key, raw, field.type)
    return options_cls(**values)


def _convert_option(pass_name: str, key: str, raw: str, type_name: Any) -> Any:
    type_name = getattr(type_name, "__name__", str(type_name))
    try:
        if type_name == "bool":
            if raw not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return raw in ("true", "1")
        if type_name == "int":
            return int(raw)
        return raw
    except ValueError:
        raise PipelineError(f"option '{key}' of '{pass_name}' expects {type_name}, got '{raw}'")


def build_pass_manager(pipeline: str, context: ir.Context | None = None) -> PassManager:
    """A PassManager on builtin.module running `pipeline` (zynml and upstream passes)."""
    context = context or ir.Context.current
    debug = knobs.DEBUG.get()  # now: a bad value raises here, not inside a pass run by C++
    with context:
        pm = PassManager("builtin.module")
        for element in split_pipeline(pipeline):
            name, _, rest = element.partition("{")
            name = name.strip()
            if name in PASSES and rest and not rest.rstrip().endswith("}"):
                raise PipelineError(f"unexpected text after '}}' in '{element}'")
            if name in PASSES:
                module = get_pass(name)
                options = parse_options(name, module.Options, rest.rstrip("}"))
                pm.add(_python_pass(module, options, debug), name=module.NAME,
                       argument=module.NAME, description=PASSES[name][1])
            else:
                try:
                    pm.add(element)
                except ValueError as err:
                    raise PipelineError(f"unknown pass or bad pipeline element '{element}': "
                                        f"{str(err).strip()}") from None
    return pm


def _python_pass(module, options, debug: bool):
    def run(op, pass_):
        try:  # passes walk values recursively; cir-verify bounds how deep (limits.py)
            with op.context, op.location, recursion_room(MAX_VALUE_DEPTH):
                module.run(op, options)
        except PassFailure:
            pass_.signal_pass_failure()
        except AttributeKindError as err:  # the input's mistake: located, not a bug
            err.location.emit_error(str(err))
            pass_.signal_pass_failure()
        except Exception as err:  # a bug in the pass: report it, don't unwind through C++
            if debug:
                traceback.print_exc()
            op.location.emit_error(f"internal error in pass '{module.NAME}': "
                                   f"{type(err).__name__}: {err}")
            pass_.signal_pass_failure()
    run.__name__ = module.NAME
    return run


class PassFailure(Exception):
    """Raised by a pass after it has emitted its located error(s)."""


def fail(location: ir.Location, message: str) -> PassFailure:
    """Emit `message` at `location` as an MLIR error and return the exception to raise."""
    location.emit_error(message)
    return PassFailure(message)
