"""The `zynml` command: run a program, compile it and show any stage, list devices.

    zynml run FILE.zyn [--device D] [--backend B] [--input NAME=PATH.npy]...
                       [--random NAME=4x8[:f32]]... [--output-dir DIR]
    zynml compile FILE.zyn [--device D] [--backend B] [--target sm_90a]
                       --emit {ast,cir,linalg,vmfb,gpu,nvvm,llvm,ptx,artifact} [-o OUT]
    zynml devices

D: cpu, cuda[:N], vulkan[:N], rocm[:N], metal[:N] or auto; B: native (ZynML's CUDA path) or
iree. `compile` needs no hardware: it compiles for the device named, present or not.

User mistakes print a located error and exit 1; nothing is written on failure. Outputs are
written as .npy files, bf16 ones as float32 (exact: .npy has no bfloat16).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

from ..cache import atomic_write_bytes
from ..backend.iree.target import IREE_TARGETS
from ..errors import ZynMLError
from ..limits import MAX_EXPRESSION_DEPTH, recursion_room
from .common import internal_error

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

STAGES = ("ast", "cir", "linalg", "vmfb", "gpu", "nvvm", "llvm", "ptx", "artifact")
NATIVE_STAGES = ("gpu", "nvvm", "llvm", "ptx", "artifact")
BINARY_STAGES = ("vmfb", "artifact")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zynml", description="ZynML compute programs")
    sub = parser.add_subparsers(dest="command", required=True)

    def inputs(p):
        p.add_argument("file", help="a .zyn program")
        p.add_argument("--device", default="auto",
                       help="cpu, cuda[:N], vulkan[:N], rocm[:N], metal[:N] or auto "
                            "(default: auto, the GPU if one is present)")
        p.add_argument("--backend", choices=("native", "iree"), default=None,
                       help="native (ZynML's CUDA path) or iree (default: the best for "
                            "the device)")
        p.add_argument("--input", action="append", default=[], metavar="NAME=PATH.npy",
                       help="an input read from a .npy file (repeatable)")
        p.add_argument("--random", action="append", default=[], metavar="NAME=DIMS[:DTYPE]",
                       help="a random input, e.g. x=4x8 or x=16:f64 or n=5:i64 (repeatable); "
                            "DTYPE: f16, bf16, f32, f64, i32, i64 or bool")
        p.add_argument("--seed", type=int, default=0, help="seed of --random inputs")

    run = sub.add_parser("run", help="run a program and print a summary of each output")
    inputs(run)
    run.add_argument("--output-dir", help="write each output as DIR/NAME.npy (a device "
                     "list as DIR/NAME.json)")
    comp = sub.add_parser("compile", help="compile a program and print or write one stage")
    inputs(comp)
    comp.add_argument("--emit", choices=STAGES, default="linalg")
    comp.add_argument("--target", default=None,
                      help="CUDA chip of the native backend (default: sm_90a)")
    comp.add_argument("-o", "--output",
                      help="output file (default: stdout; vmfb and artifact need -o)")
    sub.add_parser("devices", help="list the compute devices present")
    return parser


def _load_inputs(args) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name:
            raise _UsageError(f"--input expects NAME=PATH.npy, got '{item}'")
        try:
            values[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise _UsageError(f"cannot read input '{name}' from '{path}': {err}")
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
            raise _UsageError(f"--random expects NAME=DIMS[:DTYPE] like x=4x8:f32, got '{item}'")
        if not sep or not name:
            raise _UsageError(f"--random expects NAME=DIMS[:DTYPE], got '{item}'")
        if np_dtype.kind == "f" or np_dtype == _BFLOAT16:
            values[name] = rng.standard_normal(shape).astype(np_dtype)
        elif np_dtype.kind == "b":
            values[name] = rng.random(shape) < 0.5
        else:
            values[name] = rng.integers(1, 10, size=shape, dtype=np_dtype)
    return values


class _UsageError(Exception):
    pass


def _summary(name: str, value) -> str:
    array = np.asarray(value)
    head = f"{name}: {array.dtype}{list(array.shape)}"
    if array.size == 0:
        return head + " (empty)"
    if array.ndim == 0:
        return f"{head} = {array.item()!r}"
    if array.dtype.kind in "fiu" or array.dtype == _BFLOAT16:
        data = array.astype(np.float64)
        return f"{head} min={data.min():.6g} max={data.max():.6g} mean={data.mean():.6g}"
    return f"{head} true={int(array.sum())}"


def _npy_bytes(value) -> bytes:
    """`value` as a .npy file; bf16 as float32 (exact), which .npy can say (bf16 is '<V2')."""
    import io
    buffer = io.BytesIO()
    array = np.asarray(value)
    if array.dtype == _BFLOAT16:
        array = array.astype(np.float32)
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _run(args) -> int:
    from .. import api
    values = _load_inputs(args)
    program = api.compile(Path(args.file), device=args.device, backend=args.backend)
    outputs = program(**values)
    files = {}  # everything before writing: arrays as .npy, host values (device lists) as JSON
    for name, value in outputs.items():
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            files[f"{name}.json"] = json.dumps(value, indent=1).encode()
        else:
            files[f"{name}.npy"] = _npy_bytes(value)
    if args.output_dir:
        out_dir = Path(args.output_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for filename, data in files.items():
            atomic_write_bytes(out_dir / filename, data)
    for name, value in outputs.items():
        if f"{name}.json" in files:
            print(f"{name}: " + ", ".join(d["id"] for d in value))
        else:
            print(_summary(name, value))
    return 0


def _compile(args) -> int:
    from .. import api, compiler
    values = _load_inputs(args)
    device = args.device
    if args.emit in NATIVE_STAGES and device == "auto":
        device = "cuda"  # the native stages only exist for CUDA
    program = api.compile(Path(args.file), device=device, backend=args.backend,
                          target=args.target, require_device=False)
    if args.emit in NATIVE_STAGES and program.backend != "native":
        raise _UsageError(f"--emit {args.emit} is a stage of the native CUDA backend; "
                          f"use --device cuda (this program is for '{program.device}' "
                          f"with backend '{program.backend}')")
    if args.emit == "vmfb" and program.backend != "iree":
        raise _UsageError("--emit vmfb is IREE's artifact: add --backend iree "
                          "(or use --emit artifact for the native CUDA backend)")
    if args.emit in BINARY_STAGES and not args.output:
        raise _UsageError(f"--emit {args.emit} writes binary: give -o FILE")
    if args.emit == "ast":
        with recursion_room(MAX_EXPRESSION_DEPTH):  # the dump recurses into expressions
            text = _dump_ast(program.ast)
    elif args.emit == "artifact":
        data = program.artifact(**values).to_bytes()
        atomic_write_bytes(Path(args.output), data)
        return 0
    else:
        module = program.stage_module(values, upto=args.emit)
        if args.emit == "vmfb":
            data = compiler.to_vmfb(module, IREE_TARGETS[program.placement.kind])
            atomic_write_bytes(Path(args.output), data)
            return 0
        if args.emit in NATIVE_STAGES:
            text = compiler.to_cuda_stage(module, args.emit, program.cuda_target,
                                          program.source)
        else:
            text = str(module)
    if args.output:
        atomic_write_bytes(Path(args.output), text.encode())
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _devices(args) -> int:
    from ..devices import compute_devices
    for device in compute_devices():
        size = (f"{device['memory'] / 2 ** 30:.0f} GiB" if "memory" in device
                else f"{device.get('cores', '?')} cores")
        print(f"{device['id']:10s} {device['type']:4s} {device['name']} ({size})")
    return 0


def _dump_ast(node, indent: int = 0, out: list | None = None) -> str:
    """The tree, one node a line; lines are collected in `out` and joined once (joining
    at every level copied a deep expression's text once per level)."""
    from ..frontend import ast
    top = out is None
    out = [] if top else out
    pad = "  " * indent
    if isinstance(node, list):
        for n in node:
            _dump_ast(n, indent, out)
    elif not isinstance(node, ast.Node):
        out.append(f"{pad}{node!r}\n")
    else:
        fields = {k: v for k, v in vars(node).items() if k not in ("loc", "ty", "sym")}
        simple = {k: v for k, v in fields.items() if not isinstance(v, (ast.Node, list))}
        head = f"{pad}{type(node).__name__} @{node.loc.line}:{node.loc.col}"
        head += "".join(f" {k}={v!r}" for k, v in simple.items() if v is not None)
        out.append(head + "\n")
        for k, v in fields.items():
            if isinstance(v, (ast.Node, list)) and v:
                out.append(f"{pad}  {k}:\n")
                _dump_ast(v, indent + 2, out)
    return "".join(out) if top else ""


def _show_note(message, category, filename, lineno, file=None, line=None):
    print(str(message), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    import warnings
    warnings.showwarning = _show_note  # notes print as compiler notes, not Python warnings
    args = _parser().parse_args(argv)
    try:
        return {"run": _run, "compile": _compile, "devices": _devices}[args.command](args)
    except ZynMLError as err:
        print(str(err), file=sys.stderr)
        return 1
    except _UsageError as err:
        print(f"zynml: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # a compiler bug: say so, without a traceback unless asked
        return internal_error("zynml", err)


if __name__ == "__main__":
    sys.exit(main())
