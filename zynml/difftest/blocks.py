"""Compute-block templates: each adds one random, valid block to a Builder.

    elementwise   out[i, j] = e(x[i, j], b[j], c0, ...), lets, vars under if/else
    reduction     reduce(+ * min max and or argmin argmax), any axis, guarded yields, |>
    matmul        acc += A[i, k] * B[k, j] (B transposed, guarded, max-plus, dot), epilogue
    gather        x[g[i]], x[(a*i + c) % m], x[m - 1 - i % m], x[min(i, m - 1)]
    stencil       s += x[s*o + k] * w[k] (an integer input sizes the output)
    scan          e = a*e + x[r, c] run in order (step loops, the online softmax sum)
    strided       out[2*d] / out[2*d + 1] / out[k + c] writes (zeros where none writes)
    shared        a `shared var` row filled before a barrier, then read
    whole         whole-tensor lets, reduce(op, t), out = ...
    tiles         x[i:i+T] tiles: elementwise, row softmax, A[i:i+T] @ B

Every template draws its sizes from the Builder, reads tensors through Block.read (so
that compute(...) lists them) and registers its result for later blocks to read.
"""
from __future__ import annotations

from .builder import Block, Builder, Tensor
from .expressions import Expr, bool_expr, chance, float_expr, int_expr

__all__ = ["TEMPLATES"]

_KERNELS = ("elementwise", "fused", "pointwise", "custom")


def _for(vars_: list[str], dims: list[str]) -> str:
    return "for " + ", ".join(f"{v} in 0..{n}" for v, n in zip(vars_, dims)) + ":"


def _open_loops(blk: Block, vars_: list[str], dims: list[str]) -> int:
    """The loop nest, as one `for` or nested ones; returns how many levels it opened."""
    if len(vars_) > 1 and chance(blk.b.d, 30):
        for v, n in zip(vars_, dims):
            blk.line(_for([v], [n]))
            blk.indent()
        return len(vars_)
    blk.line(_for(vars_, dims))
    blk.indent()
    return 1


def _leaves(b: Builder, blk: Block, vars_: list[str], dims: list[str], kind: str) -> list[Expr]:
    """Elements of tensors over the loops (all of them, or broadcast over some), scalars,
    loop variables."""
    d = b.d
    leaves = []
    for _ in range(d.integer(1, 3)):
        keep = [k for k in range(len(vars_)) if len(vars_) == 1 or chance(d, 75)] or [0]
        if chance(d, 60):
            keep = list(range(len(vars_)))
        t = b.tensor(tuple(dims[k] for k in keep), kind)
        leaves.append(Expr(blk.read(t.name, *(vars_[k] for k in keep)), t.lo, t.hi))
    if chance(d, 30):
        leaves.append(b.scalar(kind if kind in "fi" else "f"))
    if chance(d, 15):  # a loop variable (index): as it is among integers, made float
        k = d.integer(0, len(vars_) - 1)
        top = b.sizes[dims[k]] - 1
        leaves.append(Expr(vars_[k], 0, top) if kind == "i" else
                      Expr(f"({vars_[k]} * 0.5)", 0, top * 0.5))
    if kind == "f" and chance(d, 10):  # an integer tensor in a float expression promotes
        t = b.tensor(tuple(dims), "i")
        leaves.append(Expr(blk.read(t.name, *vars_), t.lo, t.hi))
    return leaves


def _value(b: Builder, leaves: list[Expr], kind: str, depth: int = 3) -> Expr:
    if kind == "i":
        return int_expr(b.d, leaves, depth)
    return float_expr(b.d, leaves, depth)


def _condition(b: Builder, blk: Block, leaves: list[Expr], kind: str, vars_, dims) -> Expr:
    d = b.d
    bools = []
    if chance(d, 15):
        t = b.tensor(tuple(dims), "b")
        bools.append(Expr(blk.read(t.name, *vars_), 0, 1))

    # In 16-bit floats a computed value (sin(x), a product) rounds to neighbouring values
    # on different backends, and a comparison of it flips (campaign seed 306646: bf16
    # `tanh(3.0) == sin(x)`); reads and constants are exact, so compare those.
    exact_only = kind == "f" and b.avoid_known_bugs and b.float_type in ("float16", "bfloat16")

    def pair():
        operand = (lambda: d.choice(leaves)) if exact_only else \
            (lambda: _value(b, leaves, kind, 1))
        a = operand()
        other = operand() if chance(d, 60) else \
            Expr(d.choice(("0.0", "0.5", "(-0.5)")) if kind == "f" else d.choice(("0", "2")),
                 0, 0)
        return a, other
    return bool_expr(d, pair, bools, 2)


def _register(b: Builder, dims, kind: str, value: Expr, name: str) -> None:
    if max(abs(value.lo), abs(value.hi)) < 1e5:
        b.results.append(Tensor(name, tuple(dims), kind, value.lo, value.hi))


# ---------------------------------------------------------------------- templates

def elementwise(b: Builder) -> None:
    d = b.d
    kind = "i" if chance(d, 15) else "f"
    rank = d.choice((1, 2, 2, 3))
    dims = b.sizes_for(rank)
    vars_ = [f"i{k}" for k in range(rank)]
    blk = Block(b, d.choice(_KERNELS))
    leaves = _leaves(b, blk, vars_, dims, kind)
    _open_loops(blk, vars_, dims)
    if chance(d, 30):
        t = _value(b, leaves, kind)
        blk.line(f"let t0 = {t.text}")
        leaves.append(Expr("t0", t.lo, t.hi))
    if chance(d, 35):
        _conditional_var(b, blk, leaves, kind, vars_, dims)
    if chance(d, 10):
        value = _condition(b, blk, leaves, kind, vars_, dims)
        kind = "b"
    else:
        value = _value(b, leaves, kind)
    blk.line(f"out[{', '.join(vars_)}] = {value.text}")
    name = b.fresh("y")
    b.blocks.append(blk.text(name))
    _register(b, dims, kind, value, name)
    b.features.append(f"elementwise/{kind}{rank}")


def _conditional_var(b: Builder, blk: Block, leaves: list[Expr], kind: str, vars_, dims):
    d = b.d
    first = _value(b, leaves, kind, 2)
    # the var takes its first value's type: a float program's var must be a float
    blk.line(f"var v0 = {first.text}" if kind == "i" else f"var v0 = {first.text} * 1.0")
    values = [first]
    blk.line(f"if {_condition(b, blk, leaves, kind, vars_, dims).text}:")
    blk.indent()
    if chance(d, 30):
        extra = _value(b, leaves, kind, 2)
        blk.line(f"v0 {d.choice(('+=', '-=', '*='))} {extra.text}")
        values.append(Expr("", -(first.bound + 1) * (extra.bound + 1),
                           (first.bound + 1) * (extra.bound + 1)))
    else:
        then = _value(b, leaves, kind, 2)
        blk.line(f"v0 = {then.text}")
        values.append(then)
    blk.dedent()
    if chance(d, 30):
        blk.line(f"else if {_condition(b, blk, leaves, kind, vars_, dims).text}:")
        blk.indent()
        other = _value(b, leaves, kind, 2)
        blk.line(f"v0 = {other.text}")
        values.append(other)
        blk.dedent()
    if chance(d, 50):
        blk.line("else:")
        blk.indent()
        other = _value(b, leaves, kind, 2)
        blk.line(f"v0 = {other.text}")
        values.append(other)
        blk.dedent()
    leaves.append(Expr("v0", min(v.lo for v in values), max(v.hi for v in values)))


def reduction(b: Builder) -> None:
    d = b.d
    op = d.choice(("+", "max", "min", "argmax", "argmin", "*", "and", "or"))
    if op.startswith("arg") and b.avoid_known_bugs and b.float_type in ("float16", "bfloat16"):
        op = "max"  # ties in 16-bit floats: tests/test_differential.py, KNOWN_BUGS
    kind = "i" if op not in ("*",) and chance(d, 20) else "f"
    rank = d.choice((1, 2, 2, 3))
    dims = b.sizes_for(rank)
    vars_ = [f"i{k}" for k in range(rank)]
    axis = None if chance(d, 40) else d.integer(0, rank - 1)
    params = op if axis is None else f"{op}, axis={axis}"
    blk = Block(b, f"reduce({params})")
    leaves = _leaves(b, blk, vars_, dims, kind)
    _open_loops(blk, vars_, dims)
    if chance(d, 25):
        t = _value(b, leaves, kind, 2)
        blk.line(f"let t0 = {t.text}")
        leaves.append(Expr("t0", t.lo, t.hi))
    guarded = chance(d, 25)
    if guarded:
        blk.line(f"if {_condition(b, blk, leaves, kind, vars_, dims).text}:")
        blk.indent()
    value = _value(b, leaves, kind)
    if b.avoid_known_bugs and "[" not in value.text:  # see builder.Builder.avoid_known_bugs
        read = next(lf for lf in leaves if "[" in lf.text)
        value = Expr(f"({value.text} + {read.text})", value.lo + read.lo, value.hi + read.hi)
    count = b.extent(dims if axis is None else [dims[axis]])
    pipe = ""
    if op == "*":
        blk.line(f"yield (1.0 + 0.1 * tanh({value.text}))")
        result = Expr("", 0.9 ** count, 1.1 ** count)
    elif op in ("and", "or"):
        blk.line(f"yield {_condition(b, blk, leaves, kind, vars_, dims).text}")
        result = Expr("", 0, 1)
    elif op in ("argmin", "argmax"):
        k = axis if axis is not None else d.integer(0, rank - 1)
        blk.line(f"yield ({value.text}, {vars_[k]})")
        result = Expr("", 0, count)
    else:
        if op == "+" and axis is None and kind == "f" and chance(d, 30):
            # `* 1.0`: leaves of integer tensors alone make an integer sum, and `|> sqrt()`
            # takes a float (campaign seed 404839 was an invalid program)
            value = Expr(f"({value.text} * {value.text} * 1.0)", 0, value.bound ** 2)
            pipe = " |> sqrt()"
        blk.line(f"yield {value.text}")
        result = Expr("", min(value.lo * count, 0), max(value.hi * count, 0)) if op == "+" \
            else value
    name = b.fresh("y")
    b.blocks.append(blk.text(name, pipe))
    b.features.append(f"reduce/{op}/{kind}{rank}/axis={axis}{'/guarded' if guarded else ''}")
    if guarded and op in ("min", "max", "argmin", "argmax"):
        return  # maybe the identity (inf), or index 0: not reused
    result_kind = "b" if op in ("and", "or") else "i" if op in ("argmin", "argmax") else kind
    if axis is None:
        if result_kind == "f" and result.bound < 1e4:
            b.scalars.append(Expr(name, result.lo, result.hi))
    else:
        _register(b, [n for k, n in enumerate(dims) if k != axis], result_kind, result, name)


def matmul(b: Builder) -> None:
    d = b.d
    batched = chance(d, 25)
    outer = b.sizes_for(3 if batched else 2, work=300)
    inner = b.size(budget=max(1, min(31, 3000 // b.extent(outer))))
    vars_ = [f"i{k}" for k in range(len(outer))]
    blk = Block(b, d.choice(("matmul", "batched_matmul" if batched else "matmul", "fused")))
    lead_v, lead_d = vars_[:-2], outer[:-2]
    (m_v, n_v), (m_d, n_d) = vars_[-2:], outer[-2:]
    a = b.tensor(tuple(lead_d + [m_d, inner]))
    transposed = chance(d, 35)
    bt = b.tensor(tuple(lead_d + ([n_d, inner] if transposed else [inner, n_d])))
    _open_loops(blk, vars_, outer)
    form = d.choice(("sum", "sum", "guarded", "max", "dot"))
    a_row = lead_v + [m_v]
    b_row = lead_v + [n_v]
    if form == "dot" and transposed:
        blk.line(f"let acc = dot({blk.read(a.name, *a_row)}, {blk.read(bt.name, *b_row)})")
    else:
        form = "sum" if form == "dot" else form
        blk.line("var acc = -inf" if form == "max" else "var acc = 0.0")
        blk.line(f"for r0 in 0..{inner}:")
        blk.indent()
        left = blk.read(a.name, *(a_row + ["r0"]))
        right = blk.read(bt.name, *((b_row + ["r0"]) if transposed else
                                    (lead_v + ["r0", n_v])))
        if form == "guarded":
            blk.line(f"if {left} > {d.choice(('0.0', '(-0.5)', '0.5'))}:")
            blk.indent()
            blk.line(f"acc += {left} * {right}")
            blk.dedent()
        elif form == "max":
            blk.line(f"acc = max(acc, {left} * {right})")
        else:
            blk.line(f"acc += {left} * {right}")
        blk.dedent()
    k = b.sizes[inner]
    acc = Expr("acc", -4.0 * k, 4.0 * k) if form != "max" else Expr("acc", -4.0, 4.0)
    leaves = [acc]
    if chance(d, 50):
        bias = b.tensor((n_d,))
        leaves.append(Expr(blk.read(bias.name, n_v), bias.lo, bias.hi))
    value = float_expr(d, leaves, 2) if chance(d, 60) else acc
    blk.line(f"out[{', '.join(vars_)}] = {value.text}")
    name = b.fresh("y")
    b.blocks.append(blk.text(name))
    _register(b, outer, "f", value, name)
    b.features.append(f"matmul/{form}/{'bt' if transposed else 'b'}/{len(outer)}")


def gather(b: Builder) -> None:
    d = b.d
    table_dims = b.sizes_for(d.choice((1, 2)), work=200)
    m = b.sizes[table_dims[0]]
    n = b.size()
    vars_ = ["i0"] + (["i1"] if len(table_dims) == 2 else [])
    blk = Block(b, d.choice(("gather", "embedding", "elementwise")))
    table = b.tensor(tuple(table_dims), "i" if chance(d, 15) else "f")
    form = d.choice(("tensor", "mod", "reverse", "clamp"))
    if form == "tensor":
        g = b.index_tensor((n,), m)
        index = blk.read(g, "i0")
    elif form == "mod":
        index = f"({d.integer(1, 5)} * i0 + {d.integer(0, 6)}) % {m}"
    elif form == "reverse":
        index = f"{m - 1} - i0 % {m}"
    else:
        index = f"min(i0, {m - 1})"
    _open_loops(blk, vars_, [n] + table_dims[1:])
    leaves = [Expr(blk.read(table.name, index, *vars_[1:]), table.lo, table.hi)]
    if chance(d, 40):
        other = b.tensor(tuple([n] + table_dims[1:]), table.kind)
        leaves.append(Expr(blk.read(other.name, *vars_), other.lo, other.hi))
    value = _value(b, leaves, table.kind, 2) if chance(d, 70) else leaves[0]
    blk.line(f"out[{', '.join(vars_)}] = {value.text}")
    name = b.fresh("y")
    b.blocks.append(blk.text(name))
    _register(b, [n] + table_dims[1:], table.kind, value, name)
    b.features.append(f"gather/{form}/{len(table_dims)}")


def stencil(b: Builder) -> None:
    d = b.d
    taps = b.size(budget=7)
    length = b.fresh("n")
    b.sizes[length] = d.choice((1, 3, 5, 8, 13))
    stride = d.choice((1, 1, 2))
    x_len = b.fresh("n")
    b.sizes[x_len] = stride * (b.sizes[length] - 1) + b.sizes[taps]
    x = b.tensor((x_len,), reuse=0)
    w = b.tensor((taps,))
    blk = Block(b, d.choice(("conv1d", "stencil")))
    blk.line(f"for i0 in 0..{length}:")
    blk.indent()
    blk.line("var s = 0.0")
    blk.line(f"for r0 in 0..{taps}:")
    start = "i0" if stride == 1 else f"{stride} * i0"
    blk.line(f"    s += {blk.read(x.name, start + ' + r0')} * {blk.read(w.name, 'r0')}")
    blk.line("out[i0] = s")
    b.blocks.append(blk.text(b.fresh("y")))
    b.features.append(f"stencil/stride{stride}")
