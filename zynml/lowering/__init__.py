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
    scatter_lowering    x[ids[i], d] += v -> a call each backend turns into its scatter
"""

# The callee of a scatter's call (scatter_lowering.py), its index depth and a number
# after it: here, without MLIR, for the backends that expand the call as text (IREE).
SCATTER_PREFIX = "__zynml_scatter_add_d"
