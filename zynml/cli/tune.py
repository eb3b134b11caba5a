"""`zynml tune FILE.zyn --shape NAME=DIMS[:DTYPE]... [--set NAME=VALUE]...`: time the
strategy parameters of the program's kernels on the GPU present and keep the fastest in
the autotuning database (zynml/autotune/), which later compiles use.

Compiling needs ZynML's compiler (MLIR), timing a GPU: `--compile-only` compiles every
candidate into the artifact cache where the compiler is; the same command without it,
run where the GPU is with that cache folder (ZYNML_CACHE_DIR), times them and writes the
database into that folder.
"""
from __future__ import annotations

from pathlib import Path

from .common import UsageError
from .inputs import (add_input_arguments, check_input_names, integer_at_least, load_inputs,
                     nest_records)
from .pipelines import add_pipeline_argument, choose

__all__ = ["add_parser", "run"]

_POSITIVE = integer_at_least(1, "a positive integer")


def add_parser(sub) -> None:
    p = sub.add_parser("tune", help="autotune the program's kernels on the GPU",
                       description=__doc__.split("\n\n")[0])
    add_input_arguments(p)
    p.add_argument("--shape", action="append", dest="random", metavar="NAME=DIMS[:DTYPE]",
                   help="an input's shape and dtype, e.g. A=4096x4096:f16 (random data; "
                        "the same as --random)")
    add_pipeline_argument(p)
    p.add_argument("--target", default=None, help="CUDA chip (default: sm_90a)")
    p.add_argument("--limit", type=_POSITIVE, default=None,
                   help="try at most N parameter sets per kernel")
    p.add_argument("--rounds", type=_POSITIVE, default=5,
                   help="timed rounds per set (the median is kept; default 5)")
    p.add_argument("--compile-only", action="store_true",
                   help="compile every candidate into the artifact cache and stop (where "
                        "the compiler is but no GPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    from .. import api
    from ..devices import DeviceError, resolve
    values, origins = load_inputs(args)
    device = "cuda" if args.device == "auto" else args.device
    try:
        resolve(device, args.backend, require_present=not args.compile_only)
    except DeviceError as err:
        raise UsageError(f"--device {args.device}: {err.message}") from None
    program = api.compile(Path(args.file), device=device, backend=args.backend,
                          target=args.target, require_device=not args.compile_only)
    program = choose(program, args)
    check_input_names(program, origins)
    report = program.tune(nest_records(values), limit=args.limit, rounds=args.rounds,
                          compile_only=args.compile_only, progress=not args.no_progress)
    if args.compile_only:
        total = sum(len(k.candidates) for k in report.kernels)
        print(f"compiled {total} parameter sets of {len(report.kernels)} kernels into the "
              f"artifact cache ({program.cache_folder}); time them where the GPU is with "
              "the same command, without --compile-only")
    else:
        print(report.table())
    return 0
