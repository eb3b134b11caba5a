"""zynml-opt: run passes on MLIR (or ZynML source) the way mlir-opt does.

    zynml-opt in.mlir --cir-verify --cir-to-linalg=named-ops=false --canonicalize
    zynml-opt in.mlir --pass-pipeline='builtin.module(cir-verify,cir-to-linalg)'
    zynml-opt kernel.zyn                  # front end only: the program as `cir`
    zynml-opt bad.mlir --split-input-file --verify-diagnostics --cir-verify

Pass flags (zynml's and upstream MLIR's) run in command-line order; they become one
pipeline, `builtin.module(a,b{k=v},...)`, built by `zynml.passes.pipeline` (the Python
bindings have no global registry for Python passes). Errors of any kind are located
diagnostics on stderr and exit code 1, usage errors `zynml-opt: error: ...` after the
usage line, exit code 1; only a bug in zynml-opt exits 2. Notes of the passes (a kernel
lowered generically) print as `FILE:LINE:COL: note: ...`.

Input is not trusted: MLIR aborts the process on some of it (an LLVM ERROR, a failed
assertion), so each chunk is read and run in a forked child (zynml/cli/isolate.py, about
10 ms a chunk); a child that dies is an error located at the chunk.

The command line is zynml/cli/opt_args.py; this file processes one input chunk
(`process_chunk`: read, run the pipeline, print) and holds `main`, which splits the input,
checks expected diagnostics (`zynml/cli/diagnostics.py`) and writes the output.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from mlir import ir

from .. import compiler, knobs
from ..dialects import new_context
from ..cache import atomic_write_bytes
from .common import bad_knob, internal_error, printed_notes, report_os_error, report_usage
from ..errors import SourceFile, ZynMLError
from ..frontend.types import SCALARS, TensorType
from ..passes import PASSES
from ..passes.pipeline import PipelineError, build_pass_manager, split_pipeline
from . import diagnostics as diag
from .diagnostics import Diagnostic
from .isolate import Crashed, isolated
from .opt_args import PROG, SPLIT_MARKER, USAGE, OptOptions, UsageError, parse_args, \
    help_text, list_passes_text

__all__ = ["main", "parse_args", "OptOptions", "UsageError", "process_chunk",
           "split_input", "SPLIT_MARKER"]

# MLIR recurses per nesting level (parser, verifier, printer, passes): zynml-opt runs on a
# thread with a large stack (reserved, not used) and refuses deeper MLIR input.
MAX_NESTING = 2000
STACK_BYTES = 512 * 1024 * 1024

# ============================================================================ one chunk


@dataclass
class ChunkResult:
    output: Optional[str]  # the printed module; None when the chunk failed
    diagnostics: list[Diagnostic]
    reproducer: Optional[str] = None  # where the failing pipeline's input was saved


@dataclass
class Source:
    """The input: its name in diagnostics, its language and its whole text."""

    name: str
    kind: str  # "mlir" | "zyn"
    text: str


def split_input(text: str, split: bool) -> list[str]:
    """The chunks to process, each padded with empty lines so that line numbers in
    diagnostics are those of the whole file."""
    if not split:
        return [text]
    chunks, current, start = [], [], 0
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        if line.startswith(SPLIT_MARKER):
            chunks.append("\n" * start + "".join(current))
            current, start = [], number + 1
        else:
            current.append(line)
    chunks.append("\n" * start + "".join(current))
    return chunks


def process_chunk(text: str, source: Source, options: OptOptions) -> ChunkResult:
    """Read one chunk (MLIR or ZynML), run the pipeline on it and print it."""
    context = new_context()
    context.allow_unregistered_dialects = options.allow_unregistered_dialect
    context.emit_error_diagnostics = True  # errors too reach the handler, in order
    if options.print_ir_module_scope:
        context.enable_multithreading(False)
    rename = {"-": source.name}
    diagnostics: list[Diagnostic] = []

    def on_diagnostic(d) -> bool:
        diagnostics.append(diag.from_mlir(d, rename))
        return True

    handler = context.attach_diagnostic_handler(on_diagnostic)
    try:
        pm = _pass_manager(options, context)
        try:
            module = _read(text, source, options, context)
        except ir.MLIRError:
            return ChunkResult(None, _with_error(diagnostics, "cannot read the input"))
        except ZynMLError as err:
            return ChunkResult(None, diagnostics + diag.from_zynml(err))
        except TooDeep as err:
            return ChunkResult(None, diagnostics + [err.diagnostic])
        if pm is not None:
            snapshot = _print(module, options, generic=True, debuginfo=True, source=source) \
                if _reproducer_wanted(options) else None
            sys.stderr.flush()
            try:
                pm.run(module.operation)
            except ir.MLIRError:
                reproducer = _write_reproducer(snapshot, source, options) if snapshot else None
                return ChunkResult(None, _with_error(diagnostics, "the pass pipeline failed"),
                                   reproducer)
        diagnostics += _pass_notes(module, rename)
        return ChunkResult(_print(module, options, source=source), diagnostics)
    finally:
        handler.detach()


_NOTE = re.compile(r"(.*):(\d+):(\d+): note: (.*)", re.S)


def _pass_notes(module: ir.Module, rename: dict[str, str]) -> list[Diagnostic]:
    """The notes a pass left on the module (cir-to-linalg's `zynml.notes`) as diagnostics,
    taken off the module, as the compiler does (zynml/compiler.py)."""
    attrs = module.operation.attributes
    if "zynml.notes" not in attrs:
        return []
    notes = []
    for attr in ir.ArrayAttr(attrs["zynml.notes"]):
        text = ir.StringAttr(attr).value
        match = _NOTE.fullmatch(text)
        if match:
            name, line, col, message = match.groups()
            notes.append(Diagnostic("note", message, rename.get(name, name), int(line),
                                    int(col)))
        else:
            notes.append(Diagnostic("note", text.removeprefix("note: ")))
    del attrs["zynml.notes"]
    return notes


def _crashed(err: Crashed, chunk: str, source: Source) -> ChunkResult:
    """A chunk whose child died: an error at the chunk's first line that has text."""
    skipped = len(chunk) - len(chunk.lstrip("\n"))
    line = chunk.count("\n", 0, skipped) + 1
    why = f": {err.why}" if err.why else ""
    message = f"{err.how} while processing this input{why}"
    if knobs.DEBUG.get():
        sys.stderr.write(err.stderr)
    return ChunkResult(None, [Diagnostic("error", message, source.name, line, 1)])


def _with_error(diagnostics: list[Diagnostic], message: str) -> list[Diagnostic]:
    """A failure always reports an error, even when MLIR emitted none."""
    if any(d.severity == "error" for d in diagnostics):
        return diagnostics
    return diagnostics + [Diagnostic("error", message)]


def _pass_manager(options: OptOptions, context: ir.Context):
    """The PassManager of the pipeline (None without passes); a bad pipeline raises
    UsageError located in the pipeline text."""
    text = options.pipeline
    if text is None:
        return None
    try:
        pm = build_pass_manager(text, context)
    except PipelineError as err:
        raise UsageError(_locate_pipeline_error(text, err, options, context),
                         USAGE) from None
    pm.enable_verifier(options.verify_each)
    if options.timing:
        pm.enable_timing()
    if (options.print_ir_before_all or options.print_ir_after_all
            or options.print_ir_after_failure):
        with context:
            pm.enable_ir_printing(print_before_all=options.print_ir_before_all,
                                  # after-failure filters the after-pass printing
                                  print_after_all=(options.print_ir_after_all
                                                   or options.print_ir_after_failure),
                                  print_module_scope=options.print_ir_module_scope,
                                  print_after_change=options.print_ir_after_change,
                                  print_after_failure=options.print_ir_after_failure)
    return pm


def _locate_pipeline_error(text: str, err: PipelineError, options: OptOptions,
                           context: ir.Context) -> str:
    """`<pass-pipeline>:1:COL: error: ...` at the element that fails on its own."""
    message, col = str(err), 1
    try:
        elements = split_pipeline(text)
    except PipelineError:
        elements = []
    cursor = text.find("(") + 1 if text.strip().startswith("builtin.module(") else 0
    for element in elements:
        at = text.find(element, cursor)
        cursor = at + len(element)
        try:
            build_pass_manager(f"builtin.module({element})", context)
        except PipelineError as element_err:
            message, col = str(element_err), at + 1
            break
    if "error: " in message:  # MLIR's own parser message: keep its text
        message = message.split("error: ", 1)[1]
    message = message.splitlines()[0]
    if "does not refer to a registered pass" in message:
        if options.pass_pipeline is None:  # the element came from a flag
            name = message.split("'")[1]
            message = f"'--{name}' is neither an option of {PROG} nor a registered pass"
        message += f"; zynml passes: {', '.join(PASSES)} (see '{PROG} --help')"
    return f"<pass-pipeline>:1:{col}: error: {message}\n{text}\n{' ' * (col - 1)}^"


def _read(text: str, source: Source, options: OptOptions, context: ir.Context) -> ir.Module:
    if source.kind == "mlir":
        _check_nesting(text, source.name)
        return ir.Module.parse(text, context)  # verifies; the buffer is named "-"
    src, program = compiler.parse_file(SourceFile(source.name, text))
    signature, scalars = _zyn_signature(options.zyn_inputs)
    checked = compiler.check_program(src, program, signature, scalars)
    module = compiler.to_cir(checked, context)
    if options.verify_each:
        module.operation.verify()
    return module


class TooDeep(Exception):
    """MLIR text nested deeper than MAX_NESTING: MLIR's recursive parser would overflow."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


# What _check_nesting looks at: strings and comments (skipped whole) and brackets.
_NESTING_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|[({\[\]})]')


def _check_nesting(text: str, name: str) -> None:
    """Refuse brackets nested deeper than MAX_NESTING (outside strings and comments):
    MLIR parses, verifies and prints recursively, and deep enough input overflows the
    stack (the bindings' parser segfaults on 5000 nested `module {`)."""
    depth = 0
    for token in _NESTING_TOKENS.finditer(text):
        bracket = token.group()
        if bracket in "({[":
            depth += 1
            if depth > MAX_NESTING:
                line = text.count("\n", 0, token.start()) + 1
                col = token.start() - text.rfind("\n", 0, token.start())
                raise TooDeep(Diagnostic("error", f"nesting too deep (more than {MAX_NESTING} "
                                                  "levels of brackets)", name, line, col))
        elif bracket in ")}]":
            depth -= 1


def _zyn_signature(items: list[str]):
    """`--zyn-input` values -> (signature, integer scalar values), or (None, None).

    The spelling is `zynml run --random`'s, NAME=DIMS[:DTYPE], plus `=VALUE` for an integer
    scalar whose value fixes a size: x=4x8, x=?x8:f16, eps=:f32, out_h=:i64=6.
    """
    if not items:
        return None, None
    signature, scalars = {}, {}
    for item in items:
        name, _, spec = item.partition("=")
        spec, _, value = spec.partition("=")
        dims, _, dtype = spec.partition(":")
        dtype = dtype or "f32"
        try:
            if not name or dtype not in SCALARS or (value and not SCALARS[dtype].is_int):
                raise ValueError
            shape = tuple(None if d == "?" else int(d) for d in dims.split("x")) if dims \
                else ()
            signature[name] = TensorType(SCALARS[dtype], shape) if shape else SCALARS[dtype]
            if value:
                scalars[name] = int(value)
        except ValueError:
            raise UsageError(f"'--zyn-input={item}': expected NAME=DIMS[:DTYPE] (x=4x8, "
                             "x=?x8:f16, eps=:f32) or NAME=:INT_TYPE=VALUE (n=:i64=6); "
                             f"types: {', '.join(SCALARS)}", USAGE) from None
    return signature, scalars


def _print(module: ir.Module, options: OptOptions, source: Source,
           generic: Optional[bool] = None, debuginfo: Optional[bool] = None) -> str:
    debuginfo = options.print_debuginfo if debuginfo is None else debuginfo
    text = module.operation.get_asm(
        print_generic_op_form=options.print_op_generic if generic is None else generic,
        enable_debug_info=debuginfo)
    if debuginfo:  # text parsed from a string is named "-" by MLIR: show the input's name
        escaped = source.name.replace("\\", "\\\\").replace('"', '\\"')
        text = text.replace('loc("-":', f'loc("{escaped}":')
    return text if text.endswith("\n") else text + "\n"


def _reproducer_wanted(options: OptOptions) -> bool:
    return options.reproducer is not None or knobs.REPRODUCER_DIR.get() is not None


def _write_reproducer(snapshot: str, source: Source, options: OptOptions) -> str:
    """Save the pipeline's input with the pipeline in a header, like MLIR's reproducers."""
    pipeline = options.pipeline
    configuration = f"--pass-pipeline='{pipeline}'"
    if not options.verify_each:
        configuration += " --verify-each=false"
    header = (f"// configuration: {configuration}\n"
              f"// note: a pass failed on this input of {PROG} (from {source.name}); "
              f"rerun with: {PROG} FILE {configuration}\n")
    if options.reproducer is not None:
        path = options.reproducer
    else:
        directory = knobs.REPRODUCER_DIR.get()
        directory.mkdir(parents=True, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=f"{Path(source.name).stem or 'stdin'}-",
                                    suffix=".mlir", dir=directory)
        os.close(fd)
    write_atomically(path, header + snapshot)
    return path


# ============================================================================ driver


def write_atomically(path: str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _read_input(options: OptOptions) -> Source:
    if options.input == "-":
        name, data = "<stdin>", sys.stdin.buffer.read()
    else:
        try:
            name, data = options.input, Path(options.input).read_bytes()
        except OSError as err:
            raise UsageError(f"cannot read '{options.input}': {err.strerror or err}") from None
    kind = options.input_kind or ("zyn" if name.endswith(".zyn") else "mlir")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise UsageError(f"{name}:{line}:{col}: error: the input is not UTF-8 text "
                         f"(byte 0x{data[err.start]:02x})") from None
    return Source(name, kind, text)


def run(options: OptOptions) -> int:
    """Process the input chunk by chunk, print diagnostics (or, with --verify-diagnostics,
    the mismatches), write the output if all went well. Returns the exit code."""
    source = _read_input(options)
    sources = {source.name: source.text}
    outputs, failed, internal = [], False, False
    for chunk in split_input(source.text, options.split_input_file):
        try:
            result = isolated(process_chunk, chunk, source, options)
        except Crashed as err:
            result = _crashed(err, chunk, source)
        reported = result.diagnostics
        if options.verify_diagnostics:  # like mlir-opt, without "see current operation"
            try:
                expected = diag.parse_expected(chunk, source.name)
            except ValueError as err:
                raise UsageError(str(err)) from None
            reported = diag.check_expected(diag.without_op_notes(reported), expected)
            failed |= bool(reported)
        else:
            failed |= result.output is None
            internal |= any(d.message.startswith("internal error") for d in reported)
        for d in reported:
            print(diag.render(d, sources), file=sys.stderr)
        if result.reproducer is not None:
            print(f"{PROG}: note: the pipeline's input was saved to {result.reproducer}",
                  file=sys.stderr)
        if result.output is not None:
            outputs.append(result.output)
    if failed:
        return 2 if internal else 1
    text = f"{SPLIT_MARKER}\n".join(outputs)
    if options.output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        try:
            write_atomically(options.output, text)
        except OSError as err:
            raise UsageError(f"cannot write -o '{options.output}': "
                             f"{err.strerror or err}") from None
    return 0


def _on_big_stack(fn, *args):
    """fn(*args) on a thread with STACK_BYTES of stack; its result or exception."""
    outcome: dict = {}

    def target():
        try:
            outcome["result"] = fn(*args)
        except BaseException as err:  # re-raised below, in the calling thread
            outcome["error"] = err

    try:
        previous = threading.stack_size(STACK_BYTES)
    except (ValueError, RuntimeError):  # the platform cannot: run with the default stack
        return fn(*args)
    try:
        worker = threading.Thread(target=target, name=PROG, daemon=True)
        worker.start()
    except RuntimeError:  # no thread with that much stack (e.g. a tight `ulimit -v`)
        return fn(*args)
    finally:
        threading.stack_size(previous)
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with printed_notes(PROG):
        return _main(argv)


def _main(argv: list[str]) -> int:
    try:
        options = parse_args(argv)
        if options.show_help:
            print(help_text())
            return 0
        if options.list_passes:
            print(list_passes_text())
            return 0
        knobs.validate()  # a bad ZYNML_* value fails here, before any work
        return _on_big_stack(run, options)
    except UsageError as err:
        return report_usage(PROG, err)
    except knobs.KnobError as err:
        return bad_knob(PROG, err)
    except BrokenPipeError:  # `zynml-opt ... | head`
        sys.stderr.close()
        return 1
    except OSError as err:  # the file system refused (a full disk, a limit, a fault)

        return report_os_error(PROG, err)
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # a bug in zynml-opt, never a user's mistake
        return internal_error(PROG, err)


if __name__ == "__main__":
    sys.exit(main())
