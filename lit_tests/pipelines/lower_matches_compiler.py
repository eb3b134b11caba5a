# zynml-opt with --pass-pipeline=CIR_TO_LINALG_PIPELINE prints what zynml.compiler.lower
# produces for the same program and input types: the lit pipeline tests test the compiler.
# RUN: %PYTHON %s | filecheck %s
import subprocess
import sys
import tempfile
from pathlib import Path

from zynml import compiler
from zynml.frontend.types import SCALARS, TensorType

SOURCE = """
let scaled = compute(matrix, vector) {
    @kernel elementwise
    @broadcast(vector, axis=1)
    for i in 0..rows, j in 0..cols:
        out[i, j] = matrix[i, j] * vector[j]
}
let sums = compute(scaled) {
    @kernel reduce(+, axis=1)
    for i in 0..rows, j in 0..cols:
        yield scaled[i, j]
}
"""

with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "program.zyn"
    path.write_text(SOURCE)
    src, program = compiler.parse_source(path)
    signature = {"matrix": TensorType(SCALARS["f32"], (4, 8)),
                 "vector": TensorType(SCALARS["f32"], (8,))}
    module = compiler.to_cir(compiler.check_program(src, program, signature))
    expected = str(compiler.lower(module, src))
    opt = subprocess.run(
        [sys.executable, "-m", "zynml.cli.opt", str(path), "--zyn-input=matrix=4x8",
         "--zyn-input=vector=8", f"--pass-pipeline={compiler.CIR_TO_LINALG_PIPELINE}"],
        capture_output=True, text=True, check=True)
    print("pipeline:", compiler.CIR_TO_LINALG_PIPELINE)
    print("same output:", opt.stdout.strip() == expected.strip())
    print(expected)

# CHECK: pipeline: builtin.module(cir-verify,cir-shape-propagation,cir-raise-attention,cir-join-stores,cir-to-linalg,
# CHECK: same output: True
# CHECK: linalg.generic
# CHECK: linalg.reduce { arith.addf }
