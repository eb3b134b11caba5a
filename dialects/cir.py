"""The `cir` dialect: ZynML's device-independent Compute IR, defined with IRDL.

MLIR 22's IRDL has no traits (no terminators, so no op can own a usable region) and no
properties (attributes are discardable). `cir` is shaped around that, the way
`gpu.launch_func` names a `gpu.func`:

* a `compute()` block becomes one `cir.compute` op in the program function whose `body`
  attribute names a private "body function" holding the loop nest as written;
* inside a body function, control flow and arithmetic are upstream ops (`scf.for`,
  `scf.if`, `arith`, `math`); only what upstream lacks is `cir`: element reads and writes
  of kernel tensors (`cir.load`, `cir.store`), reduction contributions (`cir.yield`),
  workgroup synchronisation (`cir.barrier`) and the reference interpreter's `cir.print`.

IRDL checks operand/result counts and attribute kinds; the `cir-verify` pass checks the
rest (ranks, element types, the body function's signature, known kinds).

Ops print in generic form (`"cir.load"(...)`), which is what IRDL dialects do.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import irdl

__all__ = ["OPS", "IRDL_SOURCE", "load_cir_dialect", "new_context", "op_doc", "MAX_COMPUTE_INPUTS",
           "MAX_COMPUTE_OUTPUTS", "COMPUTE_OPS",
           "MAX_PRINT_VALUES", "KERNEL_KINDS", "REDUCE_OPS"]

# Kernel kinds the compiler knows by name; any other kind is lowered generically from its body.
KERNEL_KINDS = ("elementwise", "reduce", "matmul", "batched_matmul", "conv2d",
                "conv2d_depthwise", "attention", "flash_attention", "fused")

# Reduction operators of `@kernel reduce(op)`.
REDUCE_OPS = ("+", "*", "min", "max", "and", "or", "argmin", "argmax")

# How many inputs one compute block may take (see cir.compute's documentation).
MAX_COMPUTE_INPUTS = 16

# How many outputs one compute block may have (`let (a, b, ...) = compute(...)`).
MAX_COMPUTE_OUTPUTS = 8

# The ops that run a compute body: one output, or several.
COMPUTE_OPS = ("cir.compute", "cir.multi_compute")

# On a program's function: dimensions of its inputs that the call checks equal (one size
# of run-time value bound by each), as [argument, dim, argument, dim, ...] per size.
EQUAL_DIMS_ATTR = "cir.equal_dims"

# On a program's function: the inputs it updates in place (`compute(mut x)`), by name;
# an output of the same name is that input's new value (an output named like an input
# that is not listed is a new array: `let x = ...` over a parameter x).
MUTATED_ATTR = "cir.mutated"

# How many values one `print(...)` may show (see cir.print's documentation).
MAX_PRINT_VALUES = 8


def _compute_irdl(outputs: int = 1) -> str:
    slots = "".join(f"\n    %in{i} = irdl.any" for i in range(MAX_COMPUTE_INPUTS))
    operands = ", ".join(f"in{i}: optional %in{i}" for i in range(MAX_COMPUTE_INPUTS))
    if outputs == 1:
        result_slots, results = "\n    %result = irdl.any", "result: %result"
    else:
        result_slots = "".join(f"\n    %r{i} = irdl.any" for i in range(outputs))
        results = ", ".join(f"r{i}: optional %r{i}" for i in range(outputs))
    return f"""{slots}{result_slots}
    %str = irdl.base "#builtin.string"
    %sym = irdl.base "#builtin.symbol_ref"
    irdl.operands({operands})
    irdl.results({results})
    irdl.attributes {{ "kind" = %str, "body" = %sym }}
    """


def _print_irdl() -> str:
    slots = "".join(f"\n    %v{i} = irdl.any" for i in range(MAX_PRINT_VALUES))
    operands = ", ".join(f"v{i}: optional %v{i}" for i in range(MAX_PRINT_VALUES))
    return f"""{slots}
    %str = irdl.base "#builtin.string"
    irdl.operands({operands})
    irdl.results()
    irdl.attributes {{ "format" = %str }}
    """


# Each op: (name, IRDL body, documentation). The documentation is the op's reference.
OPS: list[tuple[str, str, str]] = [
    ("compute", _compute_irdl(), """\
cir.compute — one `compute()` block of a ZynML program.

Operands: the block's inputs (tensors, or scalars captured from the program) in the order
of the body function's leading arguments. IRDL binds one type for every element of a
variadic operand, so inputs of different types cannot share one variadic: the op instead
has MAX_COMPUTE_INPUTS `optional` slots, and `operandSegmentSizes` (a dense i32 array,
1 for each used slot, then 0s) says how many are used.
Result: the block's value (a tensor, or a scalar for a full reduction).
Attributes: `kind` (string: `elementwise`, `reduce`, `matmul`, ... or any user kind),
`body` (symbol of the private body function: its arguments are the operands then `out`,
a tensor of the result type, or of rank 0 for a scalar result). Optional (checked by
`cir-verify`): `reduce` (string, one of REDUCE_OPS), `axis` (i64), `workgroup`
(array<i64>), `shared` (i64 bytes), `broadcast` (dictionary input-name -> axis), `tile`
(dictionary), `device` (string), `names` (array of the inputs' source names).

    %y = "cir.compute"(%x) {kind = "elementwise", body = @y_body,
           operandSegmentSizes = array<i32: 1, 0, ...>} : (tensor<7xf32>) -> tensor<7xf32>
"""),
    ("multi_compute", _compute_irdl(MAX_COMPUTE_OUTPUTS), """\
cir.multi_compute — a `compute()` block with several outputs, `let (a, b) = compute(...)`
(a body that writes `out.a[...]` and `out.b[...]`).

As cir.compute, but with up to MAX_COMPUTE_OUTPUTS results, of any types (the outputs'
shapes and dtypes may differ): like the operands, one `optional` result slot each, and
`resultSegmentSizes` says how many are used (a separate op, so that cir.compute keeps its
one result without that attribute). The body function takes the operands, then one
`out` tensor per result, in order. `out_dims` names one index operand per dimension of
each result, the results' dimensions one after the other. No `reduce` kind: each output
is written with cir.store.

    %p2, %m2 = "cir.multi_compute"(%p, %g, %n) {kind = "elementwise", body = @p2_body,
           out_dims = array<i64: 2, 2>, operandSegmentSizes = array<i32: 1, 1, 1, 0, ...>,
           resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>}
         : (tensor<7xf32>, tensor<7xf32>, index) -> (tensor<7xf32>, tensor<7xf32>)
"""),
    ("load", """
    %source = irdl.any
    %value = irdl.any
    %idx = irdl.is index
    irdl.operands(source: %source, indices: variadic %idx)
    irdl.results(value: %value)
    """, """\
cir.load — read one element of a kernel tensor (an input, or `out`) in a body function.

Operands: the tensor, then one `index` per dimension. Result: the element.

    %v = "cir.load"(%x, %i) : (tensor<7xf32>, index) -> f32
"""),
    ("store", """
    %value = irdl.any
    %dest = irdl.any
    %idx = irdl.is index
    irdl.operands(value: %value, dest: %dest, indices: variadic %idx)
    irdl.results()
    """, """\
cir.store — write one element of the kernel's output `out` in a body function.

Operands: the value, the `out` argument of the body function (one of them, for a
cir.multi_compute), one `index` per dimension.
Writes have effect on the compute's result; `out` is never an input tensor. Attribute
`combine = "+"` (a scatter, `x[ids[i], d] += v` of a `mut x`): the value is added to the
element instead of replacing it, so writes at one index add up; `"min"`, `"max"` (`x[k] =
min(x[k], v)`; floats propagate NaN) and, on unsigned integers, `"umin"`, `"umax"` keep
the smaller or larger.

    "cir.store"(%v, %out, %i) : (f32, tensor<7xf32>, index) -> ()
    "cir.store"(%v, %out, %k, %d) {combine = "+"} : (f32, tensor<9x4xf32>, index, index) -> ()
"""),
    ("yield", """
    %value = irdl.any
    %idx = irdl.is index
    irdl.operands(value: %value, index: optional %idx)
    irdl.results()
    """, """\
cir.yield — contribute one value to the reduction of a `reduce` compute.

Operands: the value, and for `argmin`/`argmax` its index. The reduction
operator and axis are attributes of the enclosing `cir.compute`.

    "cir.yield"(%v) : (f32) -> ()
    "cir.yield"(%v, %i) : (f32, index) -> ()
"""),
    ("alloc", """
    %idx = irdl.is index
    %result = irdl.any
    irdl.operands(sizes: variadic %idx)
    irdl.results(result: %result)
    """, """\
cir.alloc — a tensor local to one iteration of the enclosing loops of a body function
(`shared var up[n]`, and the tensors of whole-tensor statements such as
`let shifted = logits - m`).

Operands: one `index` extent per dimension. Result: the tensor; like `out`, it is written
with `cir.store` and read with `cir.load`, and it holds what was stored before a read.

    %up = "cir.alloc"(%n) : (index) -> tensor<?xf32>
"""),
    ("attention", """
    %query = irdl.any
    %key = irdl.any
    %value = irdl.any
    %scale = irdl.any
    %mask = irdl.any
    %offset = irdl.any
    %group = irdl.any
    %result = irdl.any
    irdl.operands(query: %query, key: %key, value: %value, scale: %scale, mask: optional %mask,
                  offset: optional %offset, group: optional %group)
    irdl.results(result: %result)
    """, """\
cir.attention — scaled dot-product attention, what `cir-raise-attention` makes of a compute
body that is attention written out element by element (the spec's form).

Operands: `query` [P.., Sq, D], `key` [K.., Sk, D], `value` [K.., Sk, E] (P: any leading
dims; K: P, or P divided by `kv_group`), `scale` (a float; the scores are computed in f32,
f64 for f64 inputs), an optional boolean `mask`, an optional integer (or index) scalar
`offset` and an optional integer (or index) scalar `group`; `operandSegmentSizes` says
which are there. Result [P.., Sq, E]:

    out[p.., i, e] = sum_j w[p.., i, j] * value[k.., j, e]
    w[p.., i, :]   = softmax over the allowed j of scale * sum_d query[p.., i, d] * key[k.., j, d]
    k_a            = p_a / kv_group[a]     (floor; grouped-query attention: query heads
                                            h of one group read key/value head h / group)
    k_a            = clamp(p_a / group, 0, K_a - 1)    along a = `group_axis`, with `group`
                     (read at run time; K_a: key's extent there for key, value's for
                     value; a group of 0 divides by 1, one below 0 reads head 0: the
                     clamped reads of the body it is raised from. Clamping matters only
                     to a program reading out of bounds, which checked mode reports; the
                     CUDA kernels clamp both reads to the smaller extent)

where j is allowed when `mask` holds there (all j without a mask) and, with
`causal_offset = c`, when j <= i + c (+ `offset`, a run-time value, when that operand is
there: a KV cache's `cache_start`); a row with no allowed j is 0. Attribute `mask_dims`
(array<i64>): for each mask axis, the loop it follows, numbering the loops (p.., i, j)
from 0. Attribute `causal_offset` (optional i64; required with `offset`): causal attention
(0: key j up to query i; c > 0: c more keys, a KV cache's; c < 0: fewer). Attribute
`kv_group` (optional array<i64>, one per P axis, all 1 when absent): K's extent times the
group is P's. Attribute `group_axis` (i64, with `group` only): the P axis `group` divides
(its kv_group is 1; any extents there, key's and value's may differ: the reads are
clamped).

    %o = "cir.attention"(%q, %k, %v, %scale, %mask) {mask_dims = array<i64: 2, 3>,
           operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>}
         : (tensor<2x3x17x5xf32>, tensor<2x3x17x5xf32>, tensor<2x3x17x5xf32>, f32,
            tensor<17x17xi1>) -> tensor<2x3x17x5xf32>
    %c = "cir.attention"(%q, %k, %v, %scale) {causal_offset = 0 : i64,
           operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>} : (...) -> tensor<2x3x17x5xf32>
    %g = "cir.attention"(%q, %k2, %v2, %scale, %start) {causal_offset = 0 : i64,
           kv_group = array<i64: 1, 4>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1, 0>}
         : (tensor<2x8x1x64xf16>, tensor<2x2x4096x64xf16>, tensor<2x2x4096x64xf16>, f32, i64)
           -> tensor<2x8x1x64xf16>
    %r = "cir.attention"(%q, %k3, %v3, %scale, %g) {group_axis = 1 : i64,
           operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1>}
         : (tensor<2x?x1x64xf16>, tensor<2x?x4096x64xf16>, tensor<2x?x4096x64xf16>, f32, i64)
           -> tensor<2x?x1x64xf16>
"""),
    ("print", _print_irdl(), """\
cir.print — `print(...)` in a compute body: a line on stdout when the reference
interpreter runs the body (device="interpreter"); the compiled backends reject it.

Operands: the values shown, up to MAX_PRINT_VALUES, of any scalar types; like
cir.compute, one `optional` slot each, `operandSegmentSizes` says which are used.
Attribute `format` (string): the line, `{}` where a value goes (`{u}` for an unsigned
integer) and `{{`/`}}` for braces.

    "cir.print"(%i, %v) {format = "row {} x = {}", operandSegmentSizes =
        array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (index, f32) -> ()
"""),
    ("barrier", """
    irdl.operands()
    irdl.results()
    """, """\
cir.barrier — all work items of a workgroup reach this point before any continues.

    "cir.barrier"() : () -> ()
"""),
]


def _irdl_source() -> str:
    body = "\n".join(f"  irdl.operation @{name} {{{text}  }}" for name, text, _ in OPS)
    return f"irdl.dialect @cir {{\n{body}\n}}\n"


IRDL_SOURCE = _irdl_source()

def load_cir_dialect(context: ir.Context) -> None:
    """Register `cir` in `context` (idempotent). Every context ZynML creates calls this."""
    if context.is_registered_operation("cir.compute"):
        return
    with context, ir.Location.unknown(context):
        irdl.load_dialects(ir.Module.parse(IRDL_SOURCE))


def new_context() -> ir.Context:
    """A context with `cir` and every upstream dialect ZynML uses."""
    context = ir.Context()
    load_cir_dialect(context)
    return context


def op_doc(name: str) -> str:
    """The reference text of `cir.<name>`."""
    for op_name, _, doc in OPS:
        if op_name == name:
            return doc
    raise KeyError(f"no op cir.{name}; ops: {', '.join(n for n, _, _ in OPS)}")
