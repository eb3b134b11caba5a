"""The `zynml` command: run a program, compile it and show any stage, list devices.

    zynml run FILE.zyn [--pipeline NAME] [--device D] [--backend B] [--checked]
                       [--deterministic] [--tf32]
                       [--input NAME=PATH.npy]... [--random NAME=4x8[:f32]]...
                       [--set NAME=VALUE]... [--output-dir DIR]
    zynml compile FILE.zyn [--pipeline NAME] [--device D] [--backend B] [--target sm_90a]
                       [--shape NAME=4096x?[:f16]]... [--checked] [--deterministic]
                       [--tf32] --emit STAGE [-o OUT] [--save-temps DIR]
    zynml tune FILE.zyn [--pipeline NAME] --shape NAME=4096x4096:f16... [--set NAME=VALUE]...
                       [--compile-only]
    zynml devices

D: cpu, cuda[:N], vulkan[:N], rocm[:N], metal[:N], interpreter or auto; B: native (ZynML's
CUDA path) or iree. `compile` needs no hardware: it compiles for the device named, present or not.
STAGE: a stage of the shared front (zynml/compiler.py) or of the program's backend
(zynml/backend/*/stages.py); `zynml compile --help` lists them. `--save-temps DIR` also
writes every stage's output on the way as DIR/STAGE.EXT. `--pipeline NAME` works on that
pipeline of the file instead of its script (zynml/cli/pipelines.py).

Mistakes in the program print a located error, mistakes in the arguments or the
environment a usage error (`zynml: error: ...`); both exit 1, and nothing is written on
failure: the outputs of `run` are written all or nothing (zynml/cli/outputs.py). Notes
print as `note: ...` lines on stderr. Exit code 2 means a bug in zynml. Outputs are
written as .npy files, bf16 ones as float32 (exact: .npy has no bfloat16).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

from .. import compiler, knobs
from ..devices import DeviceError, resolve
from ..errors import Diagnostic, ZynMLError
from . import tune
from .common import (ArgumentParser, FileSystemError, UsageError, bad_knob, internal_error,
                     printed_notes, report_os_error, report_usage)
from .inputs import (add_input_arguments, add_shape_argument, check_input_names,
                     dynamic_dims, load_inputs, nest_records)
from .outputs import check_output_dir, check_output_file, write_all, write_file
from .pipelines import add_pipeline_argument, choose

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def _parser() -> ArgumentParser:
    parser = ArgumentParser(prog="zynml", description="ZynML compute programs")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a program and print a summary of each output")
    add_input_arguments(run)
    add_pipeline_argument(run)
    run.add_argument("--output-dir", help="write each output as DIR/NAME.npy (a device "
                     "list as DIR/NAME.json)")
    comp = sub.add_parser("compile", help="compile a program and print or write one stage")
    add_input_arguments(comp)
    add_pipeline_argument(comp)
    for command in (run, comp):
        command.add_argument("--checked", action="store_true", default=None,
                             help="checked mode: an index out of range or an integer "
                                  "division by zero at run time is a located error "
                                  "(default: ZYNML_CHECK)")
        command.add_argument("--deterministic", action="store_true", default=None,
                             help="scatters give the same bits run to run (on native CUDA: "
                                  "sorted segments, not atomics; default: "
                                  "ZYNML_DETERMINISTIC)")
        command.add_argument("--tf32", action="store_true", default=None,
                             help="f32 matrix products on TF32 tensor cores (operands "
                                  "rounded to 10-bit mantissas; native CUDA on sm_90a; "
                                  "default: ZYNML_TF32)")
    add_shape_argument(comp)
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
    parser.commands = sub.choices  # name -> its parser, for the usage line of its errors
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


def _check_device(args, present: bool, device: str | None = None) -> None:
    """--device and --backend: a mistake in them is one of the arguments, not the program's."""
    try:
        resolve(device or args.device, args.backend, require_present=present)
    except DeviceError as err:
        raise UsageError(f"--device {args.device}: {err.message}") from None


def _program(args, device: str, stage: str | None = None, **options):
    """The program of args.file (its script or the pipeline --pipeline names), its inputs
    checked against the arguments; `stage`: the one --emit shows."""
    from .. import api
    values, origins = load_inputs(args)
    program = api.compile(Path(args.file), device=device, backend=args.backend, **options)
    program = choose(program, args, stage)
    check_input_names(program, origins)
    return program, nest_records(values)


def _named(args, *flags: str) -> None:
    """An output flag given an empty name: no path, not "the current folder"."""
    for flag in flags:
        if getattr(args, flag.lstrip("-").replace("-", "_"), None) == "":
            raise UsageError(f"{flag} needs a name, not ''")


def _run(args) -> int:
    _named(args, "--output-dir")
    _check_device(args, present=True)
    if args.output_dir:
        check_output_dir(Path(args.output_dir))
    program, values = _program(args, args.device, checked=args.checked,
                               deterministic=args.deterministic, tf32=args.tf32)
    outputs = program(values)
    files = {}  # everything before writing: arrays as .npy, host values (device lists) as JSON
    for name, value in outputs.items():
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            files[f"{name}.json"] = json.dumps(value, indent=1).encode()
        else:
            files[f"{name}.npy"] = _npy_bytes(value)
    if args.output_dir:
        write_all(Path(args.output_dir), files)
    for name, value in outputs.items():
        if f"{name}.json" in files:
            print(f"{name}: " + ", ".join(d["id"] for d in value))
        else:
            print(_summary(name, value))
    return 0


def _compile(args) -> int:
    _named(args, "--output", "--save-temps")
    backend, stage = compiler.find_stage(args.emit)  # backend None: a shared front stage
    device = args.device
    if backend is not None and backend.emit_device and device == "auto":
        device = backend.emit_device  # e.g. the native stages only exist for CUDA
    _check_device(args, present=False, device=device)
    if args.output:
        check_output_file(Path(args.output))
    dynamic = dynamic_dims(args)
    program, values = _program(args, device, args.emit, target=args.target,
                               require_device=False, checked=args.checked,
                               deterministic=args.deterministic, tf32=args.tf32,
                               **({"dynamic": dynamic} if dynamic else {}))
    if backend is not None:
        _needs_shapes(program, backend, values, dynamic)
    if backend is not None and program.backend != backend.name:
        raise UsageError(backend.wrong_backend.format(
            stage=args.emit, device=program.device, backend=program.backend))
    if stage.output.binary and not args.output:
        raise UsageError(f"--emit {args.emit} writes binary: give -o FILE")
    if args.save_temps is not None:
        _make_folder(Path(args.save_temps), "--save-temps")
    try:
        shown = program.emit(args.emit, values, save_temps=args.save_temps)
    except ZynMLError as err:
        raise _shape_less_hint(err, program, backend, values) from None
    if shown is None:
        raise UsageError(f"--emit {args.emit} made nothing here: "
                          f"{stage.output.none_means}")
    if args.output:
        write_file(Path(args.output), shown.encode() if isinstance(shown, str) else shown)
    else:
        sys.stdout.write(shown if shown.endswith("\n") else shown + "\n")
    return 0


def _needs_shapes(program, backend, values: dict, dynamic: list[str]) -> None:
    """A backend that compiles static sizes only, given no input shapes: say which to give
    rather than fail on the first missing input."""
    if dynamic and not backend.shape_generic:
        raise UsageError(f"--shape with '?' ({', '.join(dynamic)}): the {program.backend} "
                         "backend compiles static sizes only (yet)")
    tensors = [n for n, t in program.generic.inputs.items() if hasattr(t, "shape")]
    if backend.shape_generic or values or not tensors:
        return
    sizes = ", ".join(sorted(program.generic.sizes)) or "none named"
    raise UsageError(f"the {program.backend} backend compiles static sizes only (yet), so "
                     f"the sizes of this program ({sizes}) need its inputs' shapes: e.g. "
                     + " ".join(f"--shape {n}=DIMS[:DTYPE]" for n in tensors))


def _shape_less_hint(err: ZynMLError, program, backend, values: dict) -> ZynMLError:
    """A native compile without shapes makes every size dynamic: a construct that needs
    static sizes says so (its located error), and a note says which shapes to give."""
    tensors = [n for n, t in program.generic.inputs.items() if hasattr(t, "shape")]
    if backend is None or backend.name != "native" or values or not tensors or \
            "static" not in err.message:  # not about sizes: the error as it is
        return err
    hint = ("compiled without shapes, every size is dynamic, and this needs static sizes: "
            "give the inputs' shapes, e.g. "
            + " ".join(f"--shape {n}=DIMS[:DTYPE]" for n in tensors))
    return ZynMLError.from_diagnostics(err.diagnostics + [Diagnostic("note", hint, None)])


def _devices(args) -> int:
    from ..devices import compute_devices
    for device in compute_devices():
        size = (f"{device['memory'] / 2 ** 30:.0f} GiB" if "memory" in device
                else f"{device.get('cores', '?')} cores")
        print(f"{device['id']:10s} {device['type']:4s} {device['name']} ({size})")
    return 0


def _make_folder(path: Path, flag: str) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise FileSystemError(f"{flag} '{path}': cannot make this folder: "
                         f"{err.strerror or err}") from None


def main(argv: list[str] | None = None) -> int:
    with printed_notes("zynml"):
        try:
            parser, args = _parser(), None
            try:
                args = parser.parse_args(argv)
            except SystemExit as done:  # --help: printed; argparse exits
                return done.code or 0
            knobs.validate()  # a bad ZYNML_* value fails here, before any work
            return {"run": _run, "compile": _compile, "tune": tune.run,
                    "devices": _devices}[args.command](args)
        except knobs.KnobError as err:  # before ZynMLError, its base class
            return bad_knob("zynml", err)
        except ZynMLError as err:
            print(str(err), file=sys.stderr)
            return 1
        except UsageError as err:
            if err.usage is None and not isinstance(err, FileSystemError):  # the arguments'
                command = parser.commands.get(getattr(args, "command", None))
                err.usage = (command or parser).format_usage()
            return report_usage("zynml", err)
        except BrokenPipeError:  # `zynml compile ... | head`
            sys.stderr.close()
            return 1
        except OSError as err:  # the file system refused (a full disk, a limit, a fault)

            return report_os_error("zynml", err)
        except KeyboardInterrupt:
            return 130
        except Exception as err:  # a compiler bug: say so, without a traceback unless asked
            return internal_error("zynml", err)


if __name__ == "__main__":
    sys.exit(main())
