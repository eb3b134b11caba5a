"""The inputs of a program on the command line: `--input NAME=PATH.npy`, `--random
NAME=DIMS[:DTYPE]` (random data of that shape; `zynml tune` calls it `--shape`) and `--set
NAME=VALUE` (a scalar)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["UsageError", "add_input_arguments", "load_inputs"]

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


class UsageError(Exception):
    """A mistake in the command's arguments: `zynml: error: ...`, exit 1."""


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
    p.add_argument("--seed", type=int, default=0, help="seed of --random inputs")


def load_inputs(args) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--input expects NAME=PATH.npy, got '{item}'")
        try:
            values[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise UsageError(f"cannot read input '{name}' from '{path}': {err}")
    rng = np.random.default_rng(args.seed)
    for item in args.random:
        name, sep, spec = item.partition("=")
        dims, _, dtype = spec.partition(":")
        try:
            shape = tuple(int(d) for d in dims.split("x")) if dims else ()
            np_dtype = np.dtype({"f16": "float16", "bf16": ml_dtypes.bfloat16,
                                 "f32": "float32", "f64": "float64", "i32": "int32",
                                 "i64": "int64", "bool": "bool"}[dtype or "f32"])
        except (ValueError, KeyError):
            raise UsageError(f"--random expects NAME=DIMS[:DTYPE] like x=4x8:f32, got '{item}'")
        if not sep or not name:
            raise UsageError(f"--random expects NAME=DIMS[:DTYPE], got '{item}'")
        if np_dtype.kind == "f" or np_dtype == _BFLOAT16:
            values[name] = rng.standard_normal(shape).astype(np_dtype)
        elif np_dtype.kind == "b":
            values[name] = rng.random(shape) < 0.5
        else:
            values[name] = rng.integers(1, 10, size=shape, dtype=np_dtype)
    for item in args.set:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--set expects NAME=VALUE, got '{item}'")
        try:
            values[name] = int(text)
        except ValueError:
            try:
                values[name] = float(text)
            except ValueError:
                raise UsageError(f"--set {name}: '{text}' is not a number") from None
    return values


class UsageError(Exception):
    pass
