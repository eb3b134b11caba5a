"""Row gathers: loads of a row kernel's body that read a chunk whole.

A row held in registers (row_registers.py) gives thread t chunks of W neighbouring
columns, chunk k starting at s = (k B + t) W, and the values of the row's inputs at
those points. A generic's body may read an input at computed indices (gathers:
`tensor.extract` in linalg, `memref.load` here), e.g. RoPE's interleaved pairs once
their two stores are one (cir-join-stores):

    x[r, 2 (e / 2)], x[r, 2 (e / 2) + 1], w[2 (e / 2)]: point e of chunk s reads chunk s

Loaded as written, that is a 4-byte load per point and gather. When, for every chunk
start s of the row, the W points s .. s + W - 1 read W elements of the chunk at s itself
(a fixed lane each), the thread takes them from the buffer's values at its own points:
held already, or one 16-byte load of the chunk.

A gather whose W points of a chunk read W elements of another chunk, the same one for
the W points (RoPE's rotate-half partners x[r, e % n + n], and its angle tables
cos[t, e % n], whose rows are half as long), is a "moved" gather: the thread takes the
chunk it reads from the lane holding it, or loads it (one 16-byte load where the buffer
is aligned), and takes its lanes (row_registers.py).

Whether a load is such a gather is found by evaluating its last index's computation
(linalg.index and integer arith, clamps included) at every point of a static row, with
the row loops at their first, second and last values (the same each time: a function of
the point alone; for a moved gather, body_dims proves it); the other indices must be row
loops themselves (clamps aside).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mlir import ir

from ....lowering.cir_ops import SIGNED_FOLDS, defining_op
from .body_slices import body_dims
from .kernel_builder import generic_operands

_INTEGER_OPS = {
    **SIGNED_FOLDS,
    "arith.divui": lambda a, b: a // b if b > 0 and a >= 0 else None,
    "arith.remui": lambda a, b: a % b if b > 0 and a >= 0 else None,
    "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
}
_PREDICATES = {0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: lambda a, b: a < b,
               3: lambda a, b: a <= b, 4: lambda a, b: a > b, 5: lambda a, b: a >= b,
               6: lambda a, b: a < b, 7: lambda a, b: a <= b, 8: lambda a, b: a > b,
               9: lambda a, b: a >= b}


@dataclass(frozen=True)
class ChunkGather:
    """A load whose W points of a chunk read W elements of one chunk: the point's own
    (`own`), or another at the same offset for all W points (the last index at the
    chunk's first point, less lanes[0], is that chunk's start)."""
    load: ir.Operation   # the memref.load of the generic's body
    dims: tuple          # the loop each index but the last is
    lanes: tuple         # point l of a chunk reads lane lanes[l] of the chunk read
    own: bool = True

    @property
    def buffer(self) -> ir.Value:
        return self.load.operands[0]

    @property
    def last_index(self) -> ir.Value:
        return list(self.load.operands)[-1]


def chunk_gathers(generic: ir.Operation, rank: int, extents: list, width: int,
                  moved: bool = False) -> list[ChunkGather]:
    """The chunk gathers of `generic`'s body: loops of `extents` (the row's last, of a
    static length; the `rank` loops before it the rows), chunks of `width` columns;
    those that read another chunk too where `moved`."""
    if len(extents) != rank + 1 or extents[-1] is None or extents[-1] % width:
        return []
    point_only = _point_only(generic, rank) if moved else set()
    found = []
    for op in generic.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "memref.load" and _of_an_input(generic, op.operands[0]):
            gather = _classify(op, rank, extents, width)
            if gather is not None and (gather.own or gather.last_index in point_only):
                found.append(gather)
    return found


def _point_only(generic: ir.Operation, rank: int) -> set:
    """The body's values that depend on the point's column alone (loop `rank`)."""
    dims = body_dims(generic)
    return set() if dims is None else {v for v, d in dims.items() if d == {rank}}


def _of_an_input(generic: ir.Operation, buffer: ir.Value) -> bool:
    """A buffer from outside the generic that it does not write (memory stays as read)."""
    _, outs = generic_operands(generic)
    return isinstance(buffer.type, ir.MemRefType) and buffer not in outs and \
        ir.MemRefType(buffer.type).has_static_shape


def _classify(load: ir.Operation, rank: int, extents: list, width: int
              ) -> Optional[ChunkGather]:
    indices = list(load.operands)[1:]
    shape = ir.MemRefType(load.operands[0].type).shape
    dims = tuple(_loop_of(i) for i in indices[:-1])
    if not indices or shape[-1] % width or None in dims or any(d >= rank for d in dims):
        return None
    rows = [2 if n is None else n for n in extents[:rank]]  # (a run-time number of rows)
    probes = {tuple(0 for _ in rows), tuple(n - 1 for n in rows),
              tuple(min(1, n - 1) for n in rows)}
    lanes, own = None, True
    for start in range(0, extents[-1], width):  # chunk by chunk: most loads fail at once
        for probe in probes:  # (the same at each: the last index is the point's alone)
            env = dict(enumerate(probe))
            here = tuple(_evaluate(indices[-1], {**env, rank: start + lane}, {})
                         for lane in range(width))
            if None in here or not 0 <= here[0] < shape[-1]:
                return None
            read = here[0] - here[0] % width  # the chunk the first point reads
            here = tuple(value - read for value in here)
            if not all(0 <= lane < width for lane in here) or lanes not in (None, here):
                return None
            lanes, own = here, own and read == start
    return ChunkGather(load, dims, lanes, own)


def _loop_of(index: ir.Value) -> Optional[int]:
    """The loop `index` is (`linalg.index d`, through clamps by constants), or None."""
    op = defining_op(index)
    while op is not None and op.name in ("arith.maxsi", "arith.minsi") and \
            defining_op(op.operands[1]) is not None and \
            defining_op(op.operands[1]).name == "arith.constant":
        op = defining_op(op.operands[0])
    if op is None or op.name != "linalg.index":
        return None
    return ir.IntegerAttr(op.attributes["dim"]).value


def _evaluate(value: ir.Value, env: dict, memo: dict) -> Optional[int]:
    """The integer `value` holds with each `linalg.index d` at env[d]; None when it is
    not made of index arithmetic (or leaves what unsigned ops may take)."""
    if value in memo:
        return memo[value]
    op = defining_op(value)
    result = None
    if op is None:
        pass
    elif op.name == "linalg.index":
        result = env.get(ir.IntegerAttr(op.attributes["dim"]).value)
    elif op.name == "arith.constant":
        attr = op.attributes["value"]
        result = ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None
    elif op.name == "arith.index_cast":
        result = _evaluate(op.operands[0], env, memo)
    elif op.name in _INTEGER_OPS:
        a, b = (_evaluate(v, env, memo) for v in op.operands)
        result = None if a is None or b is None else _INTEGER_OPS[op.name](a, b)
    elif op.name == "arith.cmpi":
        a, b = (_evaluate(v, env, memo) for v in op.operands)
        predicate = ir.IntegerAttr(op.attributes["predicate"]).value
        if a is not None and b is not None and (predicate < 6 or min(a, b) >= 0):
            result = int(_PREDICATES[predicate](a, b))
    elif op.name == "arith.select":
        c, a, b = (_evaluate(v, env, memo) for v in op.operands)
        result = None if c is None else (a if c else b)
    memo[value] = result
    return result
