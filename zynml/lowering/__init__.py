"""Helpers the passes share that are not passes themselves (xDSL keeps them apart too):

    cir_ops             finding compute ops and body functions, reading attributes, walking
    cir_terms           loop bodies as hashable trees (cir-raise-attention compares them)
    attention_forms     the causal comparison and K/V head index cir-raise-attention reads
    nest_lowering       a compute body's loop nest -> linalg named ops and generics
    generic_region      one generic's region from the body values it computes
    combiners           reductions' identities and argmin/argmax's select
    linalg_emit         building linalg generics from a body
    attention_lowering  cir.attention -> the four tagged generics that IREE runs and the
                        CUDA attention strategies take as one kernel
    outputs_lowering    the outputs of a compute: one generic for several, or one by one
    scatter_lowering    x[ids[i], d] += v (or = min/max(x[...], v)) -> a call each
                        backend turns into its scatter
"""
import re

# The callee of a scatter's call (scatter_lowering.py): `__zynml_scatter_<kind>_d<depth>_<n>`,
# its combining kind (a cir.store's `combine`, SCATTER_KINDS), its index depth and a
# number. Here, without MLIR, for the backends that expand the call as text (IREE).
SCATTER_PREFIX = "__zynml_scatter_"
SCATTER_CALLEE = re.compile(SCATTER_PREFIX + r"(?P<kind>[a-z]+)_d(?P<depth>\d+)_\d+")

# cir.store's `combine` -> the callee's kind; the arith op that combines the element
# with a contribution, on floats and on integers (None: not for that type). min and max
# of floats propagate NaN, as reduce(min)/reduce(max) and the builtins do.
SCATTER_KINDS = {"+": "add", "min": "min", "max": "max", "umin": "umin", "umax": "umax"}
SCATTER_COMBINERS = {"add": ("addf", "addi"), "min": ("minimumf", "minsi"),
                     "max": ("maximumf", "maxsi"), "umin": (None, "minui"),
                     "umax": (None, "maxui")}


def scatter_combiner(kind: str, is_float: bool) -> str:
    """The arith op (without `arith.`) a scatter of `kind` combines elements with."""
    op = SCATTER_COMBINERS[kind][0 if is_float else 1]
    assert op is not None, f"no {kind} scatter of floats"
    return op
