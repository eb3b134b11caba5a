"""The `zynml` command: run a program, compile it and show any stage, list devices.

    zynml run FILE.zyn [--device D] [--backend B] [--input NAME=PATH.npy]...
                       [--random NAME=4x8[:f32]]... [--output-dir DIR]
    zynml compile FILE.zyn [--device D] [--backend B] [--target sm_90a]
                       --emit STAGE [-o OUT] [--save-temps DIR]
    zynml tune FILE.zyn --shape NAME=4096x4096:f16... [--set NAME=VALUE]... [--compile-only]
    zynml devices

D: cpu, cuda[:N], vulkan[:N], rocm[:N], metal[:N], interpreter or auto; B: native (ZynML's
CUDA path) or iree. `compile` needs no hardware: it compiles for the device named, present or not.
STAGE: a stage of the shared front (zynml/compiler.py) or of the program's backend
(zynml/backend/*/stages.py); `zynml compile --help` lists them. `--save-temps DIR` also
writes every stage's output on the way as DIR/STAGE.EXT.

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

from .. import compiler, knobs
from ..cache import atomic_write_bytes
from ..errors import ZynMLError
from . import tune
from .common import bad_knob, internal_error
from .inputs import UsageError, add_input_arguments, load_inputs

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zynml", description="ZynML compute programs")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a program and print a summary of each output")
    add_input_arguments(run)
    run.add_argument("--output-dir", help="write each output as DIR/NAME.npy (a device "
                     "list as DIR/NAME.json)")
    comp = sub.add_parser("compile", help="compile a program and print or write one stage")
    add_input_arguments(comp)
    stages = compiler.stage_names()
    binary = [name for name in stages if compiler.find_stage(name)[1].output.binary]
    comp.add_argument("--emit", choices=stages, default="linalg")
    comp.add_argument("--target", default=None,
                      help="CUDA chip of the native backend (default: sm_90a)")
    comp.add_argument("-o", "--output",
                      help=f"output file (default: stdout; {', '.join(binary)} need -o)")
    comp.add_argument("--save-temps", metavar="DIR", default=None,
                      help="also write every stage's output on the way as DIR/STAGE.EXT "
                           "(compiling even when the artifact is cached)")
    tune.add_parser(sub)
    sub.add_parser("devices", help="list the compute devices present")
    return parser


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
    values = load_inputs(args)
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
    from .. import api
    values = load_inputs(args)
    backend, stage = compiler.find_stage(args.emit)  # backend None: a shared front stage
    device = args.device
    if backend is not None and backend.emit_device and device == "auto":
        device = backend.emit_device  # e.g. the native stages only exist for CUDA
    program = api.compile(Path(args.file), device=device, backend=args.backend,
                          target=args.target, require_device=False)
    if backend is not None and program.backend != backend.name:
        raise UsageError(backend.wrong_backend.format(
            stage=args.emit, device=program.device, backend=program.backend))
    if stage.output.binary and not args.output:
        raise UsageError(f"--emit {args.emit} writes binary: give -o FILE")
    shown = program.emit(args.emit, values, save_temps=args.save_temps)
    if shown is None:
        raise UsageError(f"--emit {args.emit} made nothing here: "
                          f"{stage.output.none_means}")
    if args.output:
        atomic_write_bytes(Path(args.output), shown.encode() if isinstance(shown, str)
                           else shown)
    else:
        sys.stdout.write(shown if shown.endswith("\n") else shown + "\n")
    return 0


def _devices(args) -> int:
    from ..devices import compute_devices
    for device in compute_devices():
        size = (f"{device['memory'] / 2 ** 30:.0f} GiB" if "memory" in device
                else f"{device.get('cores', '?')} cores")
        print(f"{device['id']:10s} {device['type']:4s} {device['name']} ({size})")
    return 0


def _show_note(message, category, filename, lineno, file=None, line=None):
    print(str(message), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    import warnings
    warnings.showwarning = _show_note  # notes print as compiler notes, not Python warnings
    args = _parser().parse_args(argv)
    try:
        knobs.validate()  # a bad ZYNML_* value fails here, before any work
        return {"run": _run, "compile": _compile, "tune": tune.run,
                "devices": _devices}[args.command](args)
    except knobs.KnobError as err:  # before ZynMLError, its base class
        return bad_knob("zynml", err)
    except ZynMLError as err:
        print(str(err), file=sys.stderr)
        return 1
    except UsageError as err:
        print(f"zynml: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # a compiler bug: say so, without a traceback unless asked
        return internal_error("zynml", err)


if __name__ == "__main__":
    sys.exit(main())
