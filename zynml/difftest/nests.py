"""Compute-block templates of the less regular forms (blocks.py has the common ones):

    scan      e = a*e + f(x[r, c]) in a loop run in order (optionally `step 2`), or the
              online softmax denominator (m, l)
    strided   out[2*d] = .., out[2*d + 1] = ..; out[k + c] = ..; out[i, 2*j + 1] = ..
    shared    `shared var h[n]` filled, `barrier()`, then read by a reduction loop
    whole     whole-tensor statements: let t = e(x), reduce(op, t), out = e(t, ...)
    tiles     for i in 0..rows step T: x[i:i+T] tiles, row_max / row_sum, A[i:i+T] @ B
"""
from __future__ import annotations

import re

from .blocks import _register
from .builder import Block, Builder
from .expressions import Expr, chance, float_expr

__all__ = ["scan", "strided", "shared", "whole", "tiles"]


def scan(b: Builder) -> None:
    d = b.d
    rows, cols = b.sizes_for(2, work=300)
    x = b.tensor((rows, cols))
    blk = Block(b, d.choice(("scan", "elementwise", "fused")))
    blk.line(f"for i0 in 0..{rows}:")
    blk.indent()
    if chance(d, 35):  # online softmax: the sum of exp(x - max) in one pass
        blk.line("var m = -inf")
        blk.line("var l = 0.0")
        blk.line(f"for r0 in 0..{cols}:")
        blk.indent()
        element = blk.read(x.name, "i0", "r0")
        blk.line(f"let m_new = max(m, {element})")
        blk.line(f"l = l * exp(m - m_new) + exp({element} - m_new)")
        blk.line("m = m_new")
        blk.dedent()
        blk.line("out[i0] = l + m" if chance(d, 50) else "out[i0] = l")
        b.features.append("scan/online-softmax")
    else:
        step = d.choice(("", "", " step 2", " step 3"))
        decay = d.choice(("0.5", "0.9", "(-0.25)"))
        blk.line("var e = 0.0")
        blk.line(f"for r0 in 0..{cols}{step}:")
        blk.indent()
        value = float_expr(d, [Expr(blk.read(x.name, "i0", "r0"), x.lo, x.hi)], 2)
        blk.line(f"e = {decay} * e + {value.text}")
        blk.dedent()
        blk.line("out[i0] = e")
        b.features.append(f"scan/decay{step.strip().replace(' ', '')}")
    b.blocks.append(blk.text(b.fresh("y")))


def strided(b: Builder) -> None:
    d = b.d
    n = b.size()
    blk = Block(b, d.choice(("elementwise", "interleave", "pad")))
    form = d.choice(("interleave", "shift", "columns"))
    if form == "columns":
        rows = b.size()
        x = b.tensor((rows, n))
        blk.line(f"for i0 in 0..{rows}, i1 in 0..{n}:")
        blk.indent()
        value = float_expr(d, [Expr(blk.read(x.name, "i0", "i1"), x.lo, x.hi)], 2)
        blk.line(f"out[i0, {d.choice((2, 3))} * i1 + {d.integer(0, 2)}] = {value.text}")
    else:
        blk.line(f"for i0 in 0..{n}:")
        blk.indent()
        a = b.tensor((n,))
        first = float_expr(d, [Expr(blk.read(a.name, "i0"), a.lo, a.hi)], 2)
        if form == "interleave":
            c = b.tensor((n,))
            second = float_expr(d, [Expr(blk.read(c.name, "i0"), c.lo, c.hi)], 2)
            blk.line(f"out[2 * i0] = {first.text}")
            blk.line(f"out[2 * i0 + 1] = {second.text}")
        else:
            blk.line(f"out[i0 + {d.integer(1, 3)}] = {first.text}")
    b.blocks.append(blk.text(b.fresh("y")))
    b.features.append(f"strided/{form}")


def shared(b: Builder) -> None:
    d = b.d
    batch, hidden, outs = b.sizes_for(3, work=400)
    x = b.tensor((batch, hidden))
    w = b.tensor((hidden, outs))
    blk = Block(b, d.choice(("fused", "mlp")))
    if chance(d, 50):
        blk.annotations.append(f"@workgroup({d.choice((32, 64, 128))})")
    blk.line(f"for i0 in 0..{batch}:")
    blk.indent()
    blk.line(f"shared var h[{hidden}]")
    blk.line(f"for i1 in 0..{hidden}:")
    value = float_expr(d, [Expr(blk.read(x.name, "i0", "i1"), x.lo, x.hi)], 2)
    blk.line(f"    h[i1] = {value.text}")
    blk.line("barrier()")
    blk.line(f"for i2 in 0..{outs}:")
    blk.indent()
    blk.line("var s = 0.0")
    blk.line(f"for r0 in 0..{hidden}:")
    blk.line(f"    s += h[r0] * {blk.read(w.name, 'r0', 'i2')}")
    blk.line("out[i0, i2] = s")
    name = b.fresh("y")
    b.blocks.append(blk.text(name))
    bound = value.bound * 2.0 * b.sizes[hidden]
    _register(b, (batch, outs), "f", Expr("", -bound, bound), name)
    b.features.append("shared")


def whole(b: Builder) -> None:
    d = b.d
    dims = tuple(b.sizes_for(d.choice((1, 2)), work=300))
    tensors = [b.tensor(dims) for _ in range(d.integer(1, 2))]
    blk = Block(b, "fused")
    for t in tensors:
        if t.name not in blk.args:
            blk.args.append(t.name)
    leaves = [Expr(t.name, t.lo, t.hi) for t in tensors]
    if chance(d, 30):
        leaves.append(b.scalar())
    first = _with_tensor(float_expr(d, leaves, 2, whole=True), leaves[0])
    blk.line(f"let t0 = {first.text}")
    leaves.append(Expr("t0", first.lo, first.hi))
    count = b.extent(dims)
    for k in range(d.integer(0, 2)):
        op = d.choice(("+", "max", "min"))
        source = d.choice([lf for lf in leaves if lf.text in ("t0",) or
                           lf.text in [t.name for t in tensors]])
        blk.line(f"let s{k} = reduce({op}, {source.text})")
        scale = count if op == "+" else 1
        leaves.append(Expr(f"s{k}", min(source.lo * scale, 0), max(source.hi * scale, 0)))
    value = _with_tensor(float_expr(d, leaves, 3, whole=True), leaves[0])
    blk.line(f"out = {value.text}")
    name = b.fresh("y")
    b.blocks.append(blk.text(name))
    _register(b, dims, "f", value, name)  # a later block may index it
    b.features.append(f"whole/{len(dims)}")


def _with_tensor(e: Expr, tensor: Expr) -> Expr:
    """A whole-tensor expression that has a tensor in it (`out = 1.0` is no tensor)."""
    if re.search(rf"\b({tensor.text}|t0)\b", e.text):
        return e
    return Expr(f"({e.text} + {tensor.text})", e.lo + tensor.lo, e.hi + tensor.hi)


def tiles(b: Builder) -> None:
    d = b.d
    rows, cols = b.sizes_for(2, work=200)
    tile = d.choice((1, 2, 4, 5, 8))
    blk = Block(b, d.choice(("fused", "softmax", "matmul")))
    form = d.choice(("map", "softmax", "matmul"))
    blk.line(f"for i0 in 0..{rows} step {tile}:")
    blk.indent()
    rows_of = f"i0:i0+{tile}"
    if form == "matmul":
        inner = b.size(budget=12)
        a = b.tensor((rows, inner))
        w = b.tensor((inner, cols))
        blk.args += [t for t in (a.name, w.name) if t not in blk.args]
        value = f"{a.name}[{rows_of}] @ {w.name}"
        if chance(d, 50):
            value = f"relu({value})"
        blk.line(f"out[{rows_of}] = {value}")
    else:
        x = b.tensor((rows, cols))
        blk.args.append(x.name)
        blk.line(f"let t0 = {x.name}[{rows_of}]")
        if form == "softmax":
            blk.line("let e0 = exp(t0 - row_max(t0))")
            blk.line(f"out[{rows_of}] = e0 / row_sum(e0)")
        else:
            leaves = [Expr("t0", x.lo, x.hi)] + ([b.scalar()] if chance(d, 40) else [])
            value = _with_tensor(float_expr(d, leaves, 2, whole=True), leaves[0])
            blk.line(f"out[{rows_of}] = {value.text}")
    b.blocks.append(blk.text(b.fresh("y")))
    b.features.append(f"tiles/{form}/T{tile}")

