"""ZynML's types: the scalar types of the spec's CirType, tensors of them, and promotion.

Promotion rules (docs/language.md repeats them for users):
* an integer literal or a size/index used with a float becomes that float type;
* a float literal adopts the float type of the other operand (f32 when there is none);
* int op float -> float; f16 op f32 -> f32 (the wider float wins); bf16 op f16 -> f32
  (neither holds the other: f16 has the mantissa, bf16 the exponent range); bool never
  promotes;
* indices must be integers: a float used as an index is an error.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes  # numpy has no bfloat16 of its own
import numpy as np

__all__ = ["ScalarType", "TensorType", "SCALARS", "INDEX", "F32", "F64", "I64", "BOOL", "ANY",
           "FLOAT_LITERAL", "INT_LITERAL", "promote", "from_numpy", "to_numpy"]


@dataclass(frozen=True)
class ScalarType:
    name: str  # f16 bf16 f32 f64 i8.. i64 u8.. u64 bool index; "float"/"int" for untyped literals

    @property
    def is_float(self) -> bool:
        return self.name in ("f16", "bf16", "f32", "f64", "float")

    @property
    def is_int(self) -> bool:
        return self.name[0] in "iu" or self.name == "int"  # includes index

    @property
    def is_bool(self) -> bool:
        return self.name == "bool"

    @property
    def is_literal(self) -> bool:
        return self.name in ("float", "int")

    @property
    def is_any(self) -> bool:
        return self.name == "any"

    def may_be_bool(self) -> bool:
        return self.is_bool or self.is_any

    def may_be_int(self) -> bool:
        return (self.is_int and not self.is_bool) or self.is_any

    @property
    def bits(self) -> int:
        return {"bool": 1, "index": 64, "int": 64, "float": 32, "any": 32, "bf16": 16}.get(
            self.name) or int(self.name[1:])

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TensorType:
    """A tensor; `shape` holds ints (known sizes) or None (not known yet); `shape` itself
    is None while the rank is unknown (an input only used whole, before the call)."""

    dtype: ScalarType
    shape: tuple

    @property
    def rank(self) -> int | None:
        return len(self.shape) if self.shape is not None else None  # None: not known yet

    def __str__(self) -> str:
        if self.shape is None:
            return f"tensor of {self.dtype}"
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"tensor[{dims}] of {self.dtype}"


SCALARS = {n: ScalarType(n) for n in ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64",
                                      "u8", "u16", "u32", "u64", "bool")}
INDEX = ScalarType("index")
F32, F64, I64, BOOL = SCALARS["f32"], SCALARS["f64"], SCALARS["i64"], SCALARS["bool"]
FLOAT_LITERAL = ScalarType("float")
# The element type of an input before its dtype is known (checking without a signature):
# every check that depends on it waits for the real dtype.
ANY = ScalarType("any")
INT_LITERAL = ScalarType("int")


def concrete(t: ScalarType) -> ScalarType:
    """The type a literal takes when nothing else decides it."""
    return {"float": F32, "int": INDEX, "any": F32}.get(t.name, t)


def promote(a: ScalarType, b: ScalarType) -> ScalarType | None:
    """The common type of a binary arithmetic operation, or None if there is none."""
    if a == b:
        return a
    if a.is_any or b.is_any:
        other = b if a.is_any else a
        return ANY if other.is_literal else other
    if a.is_bool or b.is_bool:
        return None
    if a.is_float and b.is_float:
        if a.is_literal:
            return b
        if b.is_literal:
            return a
        if a.bits == b.bits:  # f16 and bf16: neither holds the other exactly
            return F32
        return a if a.bits > b.bits else b
    if a.is_float:
        return a if not a.is_literal else F32
    if b.is_float:
        return b if not b.is_literal else F32
    # both integers: literals and indices adopt the other side
    if a.is_literal or a == INDEX:
        return b if not b.is_literal else a
    if b.is_literal or b == INDEX:
        return a
    return a if a.bits >= b.bits else b


_NUMPY = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
          "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
          "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_,
          "index": np.int64}


def from_numpy(dtype) -> ScalarType | None:
    dtype = np.dtype(dtype)
    for name, np_type in _NUMPY.items():
        if name != "index" and np.dtype(np_type) == dtype:
            return SCALARS[name]
    return None


def to_numpy(t: ScalarType):
    return np.dtype(_NUMPY[concrete(t).name])
