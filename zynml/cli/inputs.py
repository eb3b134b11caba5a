"""The inputs of a program on the command line: `--input NAME=PATH.npy`, `--random
NAME=DIMS[:DTYPE]` (random data of that shape; `zynml tune` calls it `--shape`) and `--set
NAME=VALUE` (a scalar). A NAME with fields or indices, `model.layers[0].w`, is a member of
the record input `model` (records: docs/language.md, section 6).

Every mistake in them is a UsageError naming the argument (exit 1): a malformed or
negative size, an array larger than the machine's memory, a file that is no .npy array,
a name given twice, an integer beyond 64 bits. `load_inputs` also returns which argument
gave each input, so that the caller can say which one names no input of the program.
"""
from __future__ import annotations

import argparse
import re

import ml_dtypes
import numpy as np

from ..errors import ZynMLError
from ..machine_limits import as_i64, check_fits
from ..specialize import ShapeOnly
from .common import FileSystemError, UsageError

__all__ = ["UsageError", "add_input_arguments", "add_shape_argument", "load_inputs",
           "check_input_names", "nest_records"]

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_DTYPES = {"f16": "float16", "bf16": ml_dtypes.bfloat16, "f32": "float32", "f64": "float64",
           "i32": "int32", "i64": "int64", "bool": "bool"}
_INTEGER = re.compile(r"[+-]?\d[\d_]*")
_IDENTIFIER = r"[A-Za-z_]\w*"
# `model.layers[0].w`: a root, then fields and integer indices
_MEMBER = re.compile(rf"({_IDENTIFIER})((?:\.{_IDENTIFIER}|\[\d+\])+)")
_SEGMENT = re.compile(rf"\.({_IDENTIFIER})|\[(\d+)\]")


def integer_at_least(least: int, what: str):
    """An argparse type: an integer of at least `least` (`what` says so in the error)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value
    return parse


# --seed: numpy's generators take no negative seed
_seed = integer_at_least(0, "a non-negative integer")


def add_input_arguments(p) -> None:
    """The program and its inputs, as run, compile and tune take them."""
    p.add_argument("file", help="a .zyn program")
    p.add_argument("--device", default="auto",
                   help="cpu, cuda[:N], vulkan[:N], rocm[:N], metal[:N], interpreter "
                        "or auto (default: auto, the GPU if one is present)")
    p.add_argument("--backend", choices=("native", "iree"), default=None,
                   help="native (ZynML's CUDA path) or iree (default: the best for "
                        "the device)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=PATH.npy",
                   help="an input read from a .npy file (repeatable)")
    p.add_argument("--random", action="append", default=[], metavar="NAME=DIMS[:DTYPE]",
                   help="a random input, e.g. x=4x8 or x=16:f64 or n=5:i64 (repeatable); "
                        "DTYPE: f16, bf16, f32, f64, i32, i64 or bool")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a scalar input, e.g. eps=1e-5 or n=56 (repeatable)")
    p.add_argument("--seed", type=_seed, default=0, help="seed of --random inputs")


def add_shape_argument(p) -> None:
    """`zynml compile --shape x=4096x4096:f16`: an input's shape and dtype, no data;
    a `?` dimension (`x=?x64`) compiles dynamic (docs/language.md §4)."""
    p.add_argument("--shape", action="append", default=[], metavar="NAME=DIMS[:DTYPE]",
                   dest="shapes", help="an input's shape and dtype without data, e.g. "
                   "A=4096x4096:f16; a '?' dimension (A=?x64) is compiled dynamic")


def dynamic_dims(args) -> list[str]:
    """`x.shape[d]` of each `?` of --shape: the sizes the compile keeps dynamic."""
    return [f"{item.partition('=')[0]}.shape[{d}]" for item in getattr(args, "shapes", [])
            for d, dim in enumerate(item.partition("=")[2].partition(":")[0].split("x"))
            if dim == "?"]


def load_inputs(args) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(input name -> value, input name -> the argument that gave it)."""
    values: dict[str, np.ndarray] = {}
    origins: dict[str, str] = {}

    def add(flag: str, item: str, name: str, value) -> None:
        if name in values:
            raise UsageError(f"input '{name}' is given twice: {origins[name]} and "
                             f"{flag} {item}")
        values[name], origins[name] = value, f"{flag} {item}"

    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input expects NAME=PATH.npy, got '{item}'")
        add("--input", item, name, _read_npy(name, path))
    rng = np.random.default_rng(args.seed)
    for item in args.random or []:
        name, shape, np_dtype = _random_spec(item)
        add("--random", item, name, _random(item, rng, shape, np_dtype))
    for item in getattr(args, "shapes", []):  # a `?` is 1 here; the compile makes it `?`
        name, shape, np_dtype = _random_spec(item.replace("?", "1"), "--shape")
        try:
            check_fits(f"--shape {item}", shape, np_dtype, None)
        except ZynMLError as err:
            raise UsageError(err.message) from None
        add("--shape", item, name, ShapeOnly(shape, np_dtype))
    for item in args.set:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--set expects NAME=VALUE, got '{item}'")
        add("--set", item, name, _number(name, text))
    return values, origins


def check_input_names(program, origins: dict[str, str]) -> None:
    """An input the program does not have is a mistake in the arguments: say which."""
    roots = program.generic.record_roots
    plain = [n for n in program.inputs if _record_root(n) not in roots]
    shown = plain + [f"{root} (a record: {root}.FIELD...)" for root in sorted(roots)]
    for name, origin in origins.items():
        if name not in plain and _record_root(name) not in roots:
            raise UsageError(f"{origin}: the program has no input '{name}'; its inputs: "
                             + (", ".join(shown) or "(none)"))


def nest_records(values: dict[str, object]) -> dict[str, object]:
    """The inputs with record members (`model.layers[0].w`) gathered under their root
    (`model`) as nested dicts, which records are read from like lists: `[0]` is key 0."""
    nested: dict[str, object] = {}
    for name, value in values.items():
        found = _MEMBER.fullmatch(name)
        root, keys = (found.group(1), [field or int(index) for field, index
                                       in _SEGMENT.findall(found.group(2))]) \
            if found else (name, [])
        node, place = nested, root
        for key in keys:
            node = node.setdefault(place, {})
            place = key
            if not isinstance(node, dict):
                break
        if not isinstance(node, dict) or place in node:  # an array where a record is
            raise UsageError(f"input '{name}': a record is given as an array too, or an "
                             "array as a record")
        node[place] = value
    return nested


def _record_root(name: str) -> str | None:
    found = _MEMBER.fullmatch(name)
    return found.group(1) if found else None


def _read_npy(name: str, path: str) -> np.ndarray:
    try:
        value = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, MemoryError) as err:  # EOFError: an empty file
        why = err.strerror if isinstance(err, OSError) and err.strerror else \
            str(err) or type(err).__name__
        raise FileSystemError(f"cannot read input '{name}' from '{path}': {why}") from None
    if not isinstance(value, np.ndarray):  # an .npz archive: several arrays, by name
        value.close()
        raise FileSystemError(f"cannot read input '{name}' from '{path}': it is an .npz "
                         "archive; give one array as a .npy file")
    return value


def _random_spec(item: str, flag: str = "--random") -> tuple[str, tuple[int, ...], np.dtype]:
    name, sep, spec = item.partition("=")
    dims, _, dtype = spec.partition(":")
    usage = f"{flag} expects NAME=DIMS[:DTYPE] like x=4x8:f32, got '{item}'"
    if not sep or not name:
        raise UsageError(usage)
    try:
        shape = tuple(int(d) for d in dims.split("x")) if dims else ()
        np_dtype = np.dtype(_DTYPES[dtype or "f32"])
    except (ValueError, KeyError):
        raise UsageError(f"{usage}; DTYPE: {', '.join(_DTYPES)}") from None
    if any(d < 0 for d in shape):
        raise UsageError(f"{flag} {item}: sizes are non-negative integers")
    return name, shape, np_dtype


def _random(item: str, rng, shape, np_dtype: np.dtype) -> np.ndarray:
    # floats are drawn as f64 and then cast: that is what must fit, at the start
    drawn = np.dtype(np.float64) if np_dtype.kind == "f" or np_dtype == _BFLOAT16 \
        else np_dtype
    try:
        check_fits(f"--random {item}", shape, drawn, None)
        if np_dtype.kind == "f" or np_dtype == _BFLOAT16:
            return rng.standard_normal(shape).astype(np_dtype)
        if np_dtype.kind == "b":
            return rng.random(shape) < 0.5
        return rng.integers(1, 10, size=shape, dtype=np_dtype)
    except ZynMLError as err:
        raise UsageError(err.message) from None
    except (MemoryError, ValueError) as err:  # fits the machine, not its free memory
        raise UsageError(f"--random {item}: cannot make this array: "
                         f"{str(err) or type(err).__name__}") from None


def _number(name: str, text: str):
    if _INTEGER.fullmatch(text.strip()):
        try:
            value = int(text)
        except ValueError:  # more digits than Python converts (4300)
            raise UsageError(f"--set {name}: '{text[:20]}...' does not fit in a 64-bit "
                             "integer") from None
        try:
            as_i64(name, value, None)
        except ZynMLError:
            raise UsageError(f"--set {name}={text}: does not fit in a 64-bit integer "
                             "(i64 holds -2**63 to 2**63 - 1)") from None
        return value
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"--set {name}: '{text}' is not a number") from None
