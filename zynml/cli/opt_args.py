"""zynml-opt's command line: mlir-opt's flags, and any other flag names a pass.

    zynml-opt in.mlir --cir-verify --cir-to-linalg=named-ops=false --canonicalize
    zynml-opt in.mlir --pass-pipeline='builtin.module(cir-verify,cir-to-linalg)'
    zynml-opt kernel.zyn                  # front end only: the program as `cir`
    zynml-opt bad.mlir --split-input-file --verify-diagnostics --cir-verify

`parse_args` turns argv into OptOptions (a mistake is a UsageError with the usage line,
exit 1); `help_text` and `list_passes_text` are what --help and --list-passes print.
"""
from __future__ import annotations

import dataclasses
import re
import textwrap
from dataclasses import dataclass, field
from typing import Optional

from .. import knobs
from ..passes import PASSES, get_pass
from .common import UsageError

__all__ = ["PROG", "USAGE", "SPLIT_MARKER", "OptOptions", "parse_args", "help_text",
           "list_passes_text"]

PROG = "zynml-opt"
USAGE = f"usage: {PROG} [options] [passes] [input file | -]"
SPLIT_MARKER = "// -----"


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
                raise UsageError(f"'{arg}': expected true or false, got '{value}'", USAGE)
        elif name in VALUE_FLAGS:
            attr = VALUE_FLAGS[name][0]
            if not has_value:
                value = next(args, None)
                if value is None:
                    raise UsageError(f"'{arg}' needs a value ({VALUE_FLAGS[name][1]})", USAGE)
            if isinstance(getattr(options, attr), list):
                getattr(options, attr).append(value)
            else:
                setattr(options, attr, value)
        elif not name or not re.fullmatch(r"[A-Za-z][\w.-]*", name):
            raise UsageError(f"unknown argument '{arg}'", USAGE)
        else:  # a pass: `--name` or `--name=k1=v1 k2=v2`
            options.pass_flags.append(f"{name}{{{value}}}" if has_value else name)
    if len(positionals) > 1:
        raise UsageError(f"expected one input file, got {len(positionals)}: "
                         + " ".join(positionals), USAGE)
    if positionals:
        options.input = positionals[0]
    if options.pass_pipeline is not None and options.pass_flags:
        raise UsageError("'--pass-pipeline' cannot be used with individual pass flags "
                         f"(got --{options.pass_flags[0]})", USAGE)
    if options.input_kind not in (None, "mlir", "zyn"):
        raise UsageError(f"'--x={options.input_kind}': the input language is mlir or zyn",
                         USAGE)
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
    lines = [USAGE.replace("usage:", "USAGE:"), "",
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
