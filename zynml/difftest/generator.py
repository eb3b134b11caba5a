"""Random valid ZynML programs with their inputs: the cases of the differential tests.

    case = case_from_seed(7)          # the same program and inputs for the same seed
    case.source                       # 1 to 3 compute blocks, chained (blocks.py, nests.py)
    case.inputs                       # {name: array or scalar}: exactly the program's inputs

Float inputs are never zero (|x| in [0.2, 2]); integer inputs are small; index tensors
hold in-range indices; sizes are 1, primes and non-multiples of 4/8/16 (builder.SIZES).
Most programs are f32; some f64, f16 or bf16, some integer.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import ml_dtypes
import numpy as np

from . import blocks, nests
from .builder import Builder, InputSpec
from .expressions import Draw, RandomDraw

__all__ = ["Case", "generate", "case_from_seed", "merge", "TEMPLATES"]

# (weight, template): how often each block form is drawn.
TEMPLATES: list[tuple[int, Callable[[Builder], None]]] = [
    (5, blocks.elementwise), (5, blocks.reduction), (3, blocks.matmul), (3, blocks.gather),
    (1, blocks.stencil), (2, nests.scan), (1, nests.strided), (1, nests.shared),
    (2, nests.whole), (2, nests.tiles),
]
_FLOAT_TYPES = ["float32"] * 16 + ["float64", "float64", "float16", "bfloat16"]


@dataclass
class Case:
    source: str
    inputs: dict[str, Any]
    features: list[str] = field(default_factory=list)
    seed: Optional[int] = None
    invalid: Optional[str] = None  # the generator made a program the front end rejects
    suffix: str = ""  # ends each of its program-level names (merge)

    @property
    def name(self) -> str:
        return f"seed{self.seed}" if self.seed is not None else "case"

    def owns(self, name: str) -> bool:
        """Is the program-level name `name` (an output of a merged program) this case's?"""
        return name.endswith(self.suffix) if self.suffix else True


def _dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _draw_input(spec: InputSpec, sizes: dict[str, int], rng: np.random.Generator):
    dtype = _dtype(spec.dtype)
    shape = () if spec.dims is None else tuple(sizes[d] for d in spec.dims)
    if spec.kind == "f":
        lo = max(spec.lo, 0.0) if spec.lo >= 0 else 0.2
        hi = max(abs(spec.lo), abs(spec.hi))
        values = rng.uniform(lo, hi, shape)
        if spec.lo < 0:
            values *= rng.choice([-1.0, 1.0], shape)
    elif spec.kind == "b":
        values = rng.random(shape) < 0.5
    else:
        values = rng.integers(int(spec.lo), int(spec.hi), shape, endpoint=True)
    array = np.asarray(values).astype(dtype)
    return array[()] if spec.dims is None else array


def generate(d: Draw, rng: np.random.Generator, seed: Optional[int] = None,
             suffix: str = "") -> Case:
    """A program of 1 to 3 blocks drawn with `d`, inputs drawn with `rng`; `suffix` ends
    every program-level name (so that cases can be merged into one program)."""
    b = Builder(d, float_type=d.choice(_FLOAT_TYPES), int_type=d.choice(("int32", "int64")),
                suffix=suffix)
    weighted = [t for w, t in TEMPLATES for _ in range(w)]
    for _ in range(d.choice((1, 1, 1, 2, 2, 3))):
        d.choice(weighted)(b)
    source = "\n".join(b.blocks)
    inputs = {name: _draw_input(spec, b.sizes, rng) for name, spec in b.inputs.items()}
    case = Case(source, inputs, [f"dtype/{b.float_type}"] + b.features, seed, suffix=suffix)
    _keep_program_inputs(case, b.sizes)
    return case


def _keep_program_inputs(case: Case, sizes: dict[str, int]) -> None:
    """Pass what the program takes: its tensors and scalars, and the sizes that no input
    dimension binds (integer inputs)."""
    from .. import api
    from ..errors import ZynMLError
    try:
        wanted = api.compile(case.source, device="interpreter").inputs
    except ZynMLError as err:
        case.invalid = str(err)
        return
    values = dict(case.inputs)
    values.update({name: np.int64(v) for name, v in sizes.items()})
    missing = [n for n in wanted if n not in values]
    if missing:
        case.invalid = f"the generator gave no value for {missing}"
        return
    case.inputs = {name: values[name] for name in wanted}


def case_from_seed(seed: int, suffix: str = "") -> Case:
    return generate(RandomDraw(random.Random(seed)), np.random.default_rng(seed), seed, suffix)


def merge(cases: list[Case]) -> Case:
    """One program holding the blocks of every case (their names are apart by suffix):
    one compilation for many cases, which is what makes a long campaign affordable."""
    if len({c.suffix for c in cases}) != len(cases):
        raise ValueError("merged cases need distinct suffixes")
    return Case("\n".join(c.source for c in cases),
                {n: v for c in cases for n, v in c.inputs.items()},
                [f for c in cases for f in c.features], cases[0].seed if cases else None)
