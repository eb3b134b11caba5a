"""What the checker produces: symbols, sizes and checked kernels (the "typed AST").

The AST itself keeps its shape; the checker writes `ty` (a type) and `sym` (a Symbol) on
expressions and returns a CheckedProgram that lists, in order, what the program computes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from . import ast
from .types import ScalarType, TensorType
from ..errors import SourceFile, SourceLocation


@dataclass(eq=False)
class Symbol:
    """What a name in a compute body means.

    kind: "arg" (a compute input: tensor or scalar), "capture" (a program-level scalar the
    body reads), "size" (a named extent such as `len`), "loop" (a loop variable), "let"
    (immutable local), "var" (mutable local), "out" (the kernel's output).
    """

    kind: str
    name: str
    ty: Any
    loc: Optional[SourceLocation] = None
    range: Optional[ast.Range] = None  # for loop variables
    init: Optional["Symbol"] = None  # an "out" of `mut x`: x's "arg" symbol


@dataclass
class SizeBinding:
    """`size` is the extent of dimension `dim` of program value `tensor`, seen at `loc`."""

    tensor: str
    dim: int
    loc: SourceLocation


@dataclass
class Size:
    """A named extent (`len`, `rows`, `K`): bound by input dimensions, a `let`, or an input."""

    name: str
    loc: SourceLocation  # first use
    bindings: list[SizeBinding] = field(default_factory=list)
    value: Optional[int] = None  # known at specialization


@dataclass(eq=False)
class KernelOutput:
    """One result of a compute block: `out` (one result), or `out.NAME` of a block bound
    with `let (a, b) = compute(...)` (NAME is a's, b's name), in the let's order."""

    name: str  # the program name it is bound to
    sym: Symbol
    result: Any  # TensorType, or ScalarType for a full reduction
    out_dims: list  # one extent expression (over sizes) per result dimension
    init: Optional[Symbol] = None  # `mut x`: the input whose values it starts from


@dataclass(eq=False)
class Kernel:
    """A checked compute block.

    The body function it lowers to takes, in order: `arg_syms` (the compute's inputs),
    `capture_syms` (program scalars the body reads), `size_syms` (extents the body uses),
    then one `out` per output (`outputs`, in order). Each Symbol's `name` is the
    program-level name it stands for. `result`, `out_dims` and `out_sym` are the first
    output's.
    """

    name: str
    node: ast.Compute
    kind: str
    reduce_op: Optional[str]
    axis: Optional[int]
    arg_syms: list[Symbol]
    capture_syms: list[Symbol]
    size_syms: list[Symbol]
    outputs: list[KernelOutput]
    default_float: ScalarType
    annotations: dict[str, Any]
    # the statements to compile: the body as written, or in element form (tiles.py)
    body: list = field(default_factory=list)
    tile_checks: list = field(default_factory=list)  # tiles.ExtentCheck, once sizes are known
    scatters: list = field(default_factory=list)  # locations of `x[ids[i]] += v` writes

    @property
    def result(self) -> Any:
        return self.outputs[0].result

    @property
    def out_dims(self) -> list:
        return self.outputs[0].out_dims

    @property
    def out_sym(self) -> Symbol:
        return self.outputs[0].sym

    @property
    def sizes(self) -> list[str]:
        return [s.name for s in self.size_syms]


@dataclass(eq=False)
class Step:
    """One top-level binding: `target = kernel` (then `pipes` applied), a constant, or a
    builtin on whole values: op "slice" (a part of `split`), "reshape", or "call" (of a
    pipeline), reading the program values named in `operands`."""

    target: str
    loc: SourceLocation
    kernel: Optional[Kernel] = None
    pipes: list[ast.Call] = field(default_factory=list)
    constant: Any = None
    ty: Any = None
    op: Optional[str] = None
    operands: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)


@dataclass
class CheckedProgram:
    source: SourceFile
    inputs: dict[str, Any]  # name -> TensorType | ScalarType, in order of first use
    outputs: list[str]
    steps: list[Step]
    sizes: dict[str, Size]
    constants: dict[str, Any]
    input_locs: dict[str, SourceLocation]
    pipelines: dict[str, "CheckedProgram"] = field(default_factory=dict)
    # Record inputs (`model.layers[0].qkv_proj`): roots the caller passes, and the arrays
    # each flattened input name resolved to.
    record_roots: set = field(default_factory=set)
    record_values: dict = field(default_factory=dict)
    name: str = "main"
    list_outputs: dict = field(default_factory=dict)  # `await all(fs)`: name -> element names
    config: dict = field(default_factory=dict)  # `config { key: value }`: key -> (value, loc)
    devices_named: list = field(default_factory=list)  # (device, loc) of allocate/to_device
    host_values: dict = field(default_factory=dict)  # name -> host query (compute_devices)
    mutated: dict = field(default_factory=dict)  # input written in place (`mut`) -> its loc
    # integer inputs compiled by value (sizes, record indices); the others are arguments
    static_scalars: frozenset = frozenset()
    # scalar inputs main takes by value, not as 0-d tensors (the native CUDA backend's
    # numbers: its kernels take them as parameters); set by the API for a signature
    by_value: frozenset = frozenset()

    def flat_outputs(self) -> list[str]:
        """Outputs as the compiled function returns them: lists expanded."""
        flat = []
        for name in self.outputs:
            flat += self.list_outputs.get(name, [name])
        return flat


def is_tensor(t: Any) -> bool:
    return isinstance(t, TensorType)
