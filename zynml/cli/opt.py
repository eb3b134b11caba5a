"""zynml-opt: run passes on MLIR (or ZynML source) the way mlir-opt does.

    zynml-opt in.mlir --cir-verify --cir-to-linalg=named-ops=false --canonicalize
    zynml-opt in.mlir --pass-pipeline='builtin.module(cir-verify,cir-to-linalg)'
    zynml-opt kernel.zyn                  # front end only: the program as `cir`
    zynml-opt bad.mlir --split-input-file --verify-diagnostics --cir-verify

Pass flags (zynml's and upstream MLIR's) run in command-line order; they become one
pipeline, `builtin.module(a,b{k=v},...)`, built by `zynml.passes.pipeline` (the Python
bindings have no global registry for Python passes). Errors of any kind are located
diagnostics on stderr and exit code 1; only a bug in zynml-opt exits 2.

The file has three parts: the command line (`parse_args`, `help_text`), processing one
input chunk (`process_chunk`: read, run the pipeline, print), and `main`, which splits the
input, checks expected diagnostics (`zynml/cli/diagnostics.py`) and writes the output.
"""
from __future__ import annotations

import dataclasses
import os
import re
import sys
import tempfile
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from mlir import ir

from .. import compiler, knobs
from ..dialects import new_context
from ..cache import atomic_write_bytes
from .common import bad_knob, internal_error
from ..errors import SourceFile, ZynMLError
from ..frontend.parser import parse
from ..frontend.types import SCALARS, TensorType
from ..passes import PASSES, get_pass
from ..passes.pipeline import PipelineError, build_pass_manager, split_pipeline
from . import diagnostics as diag
from .diagnostics import Diagnostic

__all__ = ["main", "parse_args", "OptOptions", "UsageError", "process_chunk",
           "split_input", "SPLIT_MARKER"]

PROG = "zynml-opt"
SPLIT_MARKER = "// -----"
# MLIR recurses per nesting level (parser, verifier, printer, passes): zynml-opt runs on a
# thread with a large stack (reserved, not used) and refuses deeper MLIR input.
MAX_NESTING = 2000
STACK_BYTES = 512 * 1024 * 1024

# ============================================================================ command line


class UsageError(Exception):
    """A bad command line; reported as `zynml-opt: error: ...`, exit code 1."""


@dataclass
class OptOptions:
    input: str = "-"
    output: str = "-"
    input_kind: Optional[str] = None  # "mlir" | "zyn"; None: from the file extension
    pass_flags: list[str] = field(default_factory=list)  # pipeline elements, in order
    pass_pipeline: Optional[str] = None
    split_input_file: bool = False
    verify_diagnostics: bool = False
    verify_each: bool = True
    print_ir_before_all: bool = False
    print_ir_after_all: bool = False
    print_ir_after_change: bool = False
    print_ir_after_failure: bool = False
    print_ir_module_scope: bool = False
    print_op_generic: bool = False
    print_debuginfo: bool = False
    timing: bool = False
    allow_unregistered_dialect: bool = False
    reproducer: Optional[str] = None
    zyn_inputs: list[str] = field(default_factory=list)
    show_help: bool = False
    list_passes: bool = False

    @property
    def pipeline(self) -> Optional[str]:
        """The whole pipeline as text, or None when no pass was asked for."""
        if self.pass_pipeline is not None:
            return self.pass_pipeline
        if self.pass_flags:
            return f"builtin.module({','.join(self.pass_flags)})"
        return None


# flag -> (OptOptions field, help). Boolean flags take `=true|false` (or nothing: true).
BOOL_FLAGS = {
    "split-input-file": ("split_input_file",
                         f"Split the input at lines '{SPLIT_MARKER}' and process each chunk "
                         "on its own; outputs are joined by the same marker"),
    "verify-diagnostics": ("verify_diagnostics",
                           "Check that the diagnostics are exactly the input's "
                           "expected-error/warning/note/remark comments"),
    "verify-each": ("verify_each", "Verify the IR after each pass (default true)"),
    "mlir-print-ir-before-all": ("print_ir_before_all", "Print the IR before each pass"),
    "mlir-print-ir-after-all": ("print_ir_after_all", "Print the IR after each pass"),
    "mlir-print-ir-after-change": ("print_ir_after_change",
                                   "With --mlir-print-ir-after-all: only when a pass changed it"),
    "mlir-print-ir-after-failure": ("print_ir_after_failure",
                                    "Print the IR after a pass fails"),
    "mlir-print-ir-module-scope": ("print_ir_module_scope",
                                   "IR printing shows the whole module"),
    "mlir-print-op-generic": ("print_op_generic", "Print the output in generic op form"),
    "mlir-print-debuginfo": ("print_debuginfo", "Print locations in the output"),
    "mlir-timing": ("timing", "Report the time each pass takes (on stderr)"),
    "allow-unregistered-dialect": ("allow_unregistered_dialect",
                                   "Accept ops of dialects nobody registered"),
    "help": ("show_help", "Show this help"),
    "h": ("show_help", "Show this help"),
    "list-passes": ("list_passes", "List zynml's passes and their options"),
}

# flag -> (OptOptions field, metavar, help). The value is `--flag=V` or `--flag V`.
VALUE_FLAGS = {
    "o": ("output", "FILE", "Output file ('-': stdout, the default); written only on success"),
    "pass-pipeline": ("pass_pipeline", "PIPELINE",
                      "A textual pipeline, 'builtin.module(a,b{k=v},func.func(c))'"),
    "x": ("input_kind", "mlir|zyn", "The input language (default: by extension, .zyn is "
                                    "ZynML source)"),
    "zyn-input": ("zyn_inputs", "NAME=DIMS[:DTYPE]",
                  "Type of a ZynML input (repeatable; given one, give all): x=4x8 (f32), "
                  "x=?x8:f16, eps=:f32, an integer with its value n=:i64=6"),
    "mlir-pass-pipeline-crash-reproducer": (
        "reproducer", "FILE", "When a pass fails, save the IR given to the pipeline with the "
                              "pipeline in a header comment (or set "
                              f"${knobs.REPRODUCER_DIR.name})"),
}

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def parse_args(argv: list[str]) -> OptOptions:
    """mlir-opt's command line: `-flag` or `--flag`, `--flag=value`, values of non-boolean
    flags also as the next argument; any other flag is a pass (`--name=opts`)."""
    options = OptOptions()
    positionals: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--":
            positionals += list(args)
            break
        if arg == "-" or not arg.startswith("-"):
            positionals.append(arg)
            continue
        name, has_value, value = arg.lstrip("-").partition("=")
        if name in BOOL_FLAGS:
            attr = BOOL_FLAGS[name][0]
            if not has_value or value.lower() in _TRUE:
                setattr(options, attr, True)
            elif value.lower() in _FALSE:
                setattr(options, attr, False)
            else:
                raise UsageError(f"'{arg}': expected true or false, got '{value}'")
        elif name in VALUE_FLAGS:
            attr = VALUE_FLAGS[name][0]
            if not has_value:
                value = next(args, None)
                if value is None:
                    raise UsageError(f"'{arg}' needs a value ({VALUE_FLAGS[name][1]})")
            if isinstance(getattr(options, attr), list):
                getattr(options, attr).append(value)
            else:
                setattr(options, attr, value)
        elif not name or not re.fullmatch(r"[A-Za-z][\w.-]*", name):
            raise UsageError(f"unknown argument '{arg}'")
        else:  # a pass: `--name` or `--name=k1=v1 k2=v2`
            options.pass_flags.append(f"{name}{{{value}}}" if has_value else name)
    if len(positionals) > 1:
        raise UsageError(f"expected one input file, got {len(positionals)}: "
                         + " ".join(positionals))
    if positionals:
        options.input = positionals[0]
    if options.pass_pipeline is not None and options.pass_flags:
        raise UsageError("'--pass-pipeline' cannot be used with individual pass flags "
                         f"(got --{options.pass_flags[0]})")
    if options.input_kind not in (None, "mlir", "zyn"):
        raise UsageError(f"'--x={options.input_kind}': the input language is mlir or zyn")
    return options


def _pass_options(name: str) -> list[str]:
    module = get_pass(name)
    lines = []
    for f in dataclasses.fields(module.Options):
        type_name = getattr(f.type, "__name__", str(f.type))
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, bool):
            default = str(default).lower()
        lines.append(f"      {f.name.replace('_', '-')}=<{type_name}>  (default: {default})")
    return lines


def list_passes_text() -> str:
    lines = ["zynml passes (flag, or element of --pass-pipeline; options as "
             "--pass=opt=value or pass{opt=value}):"]
    for name, (_, description) in PASSES.items():
        lines.append(f"  --{name:<24} {description}")
        lines += _pass_options(name)
    lines.append("Upstream MLIR passes are flags too: --canonicalize, --cse, "
                 "--canonicalize=max-iterations=3, ... (anything mlir-opt's "
                 "--pass-pipeline accepts).")
    return "\n".join(lines)


def help_text() -> str:
    lines = [f"USAGE: {PROG} [options] [passes] [input file | -]", "",
             __doc__.strip().split("\n\n")[1], "", "OPTIONS:"]
    flags = [(f"{'-' if len(name) == 1 else '--'}{name}={metavar}", text)
             for name, (_, metavar, text) in VALUE_FLAGS.items()]
    flags += [(f"--{name}", text) for name, (_, text) in BOOL_FLAGS.items() if name != "h"]
    for flag, text in flags:
        wrapped = textwrap.wrap(text, 96 - 34)
        if len(flag) + 2 >= 34:
            lines.append(f"  {flag}")
        else:
            lines.append(f"  {flag}".ljust(34) + wrapped.pop(0))
        lines += [" " * 34 + rest for rest in wrapped]
    lines += ["", list_passes_text(), "",
              "Exit status: 0 success, 1 invalid input or failing pass (diagnostics on "
              "stderr), 2 a bug in zynml-opt."]
    return "\n".join(lines)


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
        return ChunkResult(_print(module, options, source=source), diagnostics)
    finally:
        handler.detach()


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
        raise UsageError(_locate_pipeline_error(text, err, options, context)) from None
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
    src = SourceFile(source.name, text)
    signature, scalars = _zyn_signature(options.zyn_inputs)
    checked = compiler.check_program(src, parse(src), signature, scalars)
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
                             f"types: {', '.join(SCALARS)}") from None
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
        result = process_chunk(chunk, source, options)
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
        write_atomically(options.output, text)
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
        text = str(err)
        prefix = "" if text.startswith("<") or ": error: " in text else f"{PROG}: error: "
        print(prefix + text, file=sys.stderr)
        return 1
    except knobs.KnobError as err:
        return bad_knob(PROG, err)
    except BrokenPipeError:  # `zynml-opt ... | head`
        sys.stderr.close()
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # a bug in zynml-opt, never a user's mistake
        return internal_error(PROG, err)


if __name__ == "__main__":
    sys.exit(main())
