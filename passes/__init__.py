"""ZynML's Python-registered MLIR passes (installed as `zynml.passes`).

One pass per file. Each module defines `NAME` (its command-line flag, also its lit test's
file name), `Options` (a dataclass; fields are the pass options,
written `name{field-name=value}` in a pipeline) and `run(module_op, options)`.
Modules load lazily: the table below is the registry.
"""
from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["PASSES", "get_pass", "describe_passes"]

# flag name -> (module, one-line description). Keep in the order a pipeline uses them.
PASSES: dict[str, tuple[str, str]] = {
    "cir-verify": ("cir_verify",
                   "Check cir invariants IRDL cannot express (ranks, body signatures, kinds)"),
    "cir-shape-propagation": ("cir_shape_propagation",
                              "Make compute results and body functions static from input shapes"),
    "cir-insert-checks": ("cir_insert_checks",
                          "Checked mode: report out-of-range reads and integer division by "
                          "zero at run time"),
    "cir-raise-attention": ("cir_raise_attention",
                            "Replace compute bodies that are attention written out with "
                            "cir.attention"),
    "cir-join-stores": ("cir_join_stores",
                        "Join the stores of one loop that together write a whole range "
                        "(out[2p], out[2p + 1]; out[p], out[p + n]) into one store"),
    "cir-to-linalg": ("cir_to_linalg",
                      "Lower cir.compute to linalg on tensors (named ops, generics, gathers)"),
    "sink-loops-into-generics": ("sink_loops_into_generics",
                                 "Run a host loop whose iterations are per-element work "
                                 "inside one linalg.generic (one kernel on CUDA)"),
    "fold-scalar-tensors": ("fold_scalar_tensors",
                            "Turn scalar islands between 0-d tensors into 0-d "
                            "linalg.generics"),
    "pack-loop-carried-tensors": ("pack_loop_carried_tensors",
                                  "Carry the tensors of one shape that an scf.for carries "
                                  "as one tensor with a leading axis (IREE's input)"),
    "safe-integer-division": ("safe_integer_division",
                              "Give integer divisions a divisor of 1 where theirs would trap "
                              "(0, or -1 under the smallest signed value)"),
    "read-only-inputs": ("read_only_inputs",
                         "Mark a program's tensor inputs not writable, so that "
                         "bufferization copies one before writing into it"),
    "split-shared-fills": ("split_shared_fills",
                           "Give each linalg init that a fill shares with others a fill "
                           "of its own"),
    "collapse-matmul-rows": ("collapse_matmul_rows",
                             "View the row loops of a matrix product by one weight matrix "
                             "(C[b, s, j] = A[b, s, k] W[k, j]) as one, on row-major memrefs"),
    "linalg-to-gpu-kernels": ("linalg_to_gpu_kernels",
                              "Outline each linalg.generic on memrefs into a gpu.func chosen "
                              "by strategy"),
    "gpu-kernels-wait-on-predecessor": ("gpu_kernels_wait_on_predecessor",
                                        "Make each kernel wait for the one before it "
                                        "first and let the next launch as it ends "
                                        "(programmatic dependent launch, sm_90+)"),
    "widen-half-arithmetic": ("widen_half_arithmetic",
                              "Do the f16 and bf16 arithmetic of GPU kernels in f32, "
                              "rounded where a value leaves it"),
    "convert-nvgpu-kernels-to-nvvm": ("nvgpu_kernels_to_nvvm",
                                      "Lower nvgpu ops in the kernels that use them "
                                      "(convert-nvgpu-to-nvvm), leaving the other kernels "
                                      "as they are"),
}


def get_pass(name: str) -> ModuleType:
    if name not in PASSES:
        raise KeyError(f"unknown pass '{name}'; zynml passes: {', '.join(PASSES)}")
    return importlib.import_module(f".{PASSES[name][0]}", __name__)


def describe_passes() -> list[tuple[str, str]]:
    return [(name, desc) for name, (_, desc) in PASSES.items()]
