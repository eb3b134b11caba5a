"""`zynml compile` without inputs and with `--shape NAME=DIMS[:DTYPE]` (no data; a `?`
dimension is compiled dynamic): docs/language.md §4."""
import subprocess
import sys
from pathlib import Path

import numpy as np

MATMUL = Path(__file__).resolve().parents[1] / "programs" / "examples" / "matmul.zyn"


def zynml(*args):
    return subprocess.run([sys.executable, "-m", "zynml.cli.main", *map(str, args)],
                          capture_output=True, text=True)


def signature(result) -> str:
    assert result.returncode == 0, result.stderr
    return next(line for line in result.stdout.splitlines() if "func.func @main" in line)


def test_no_shapes_compiles_dynamic_on_the_cpu(tmp_path):
    assert "(%arg0: tensor<?x?xf32>, %arg1: tensor<?x?xf32>) -> tensor<?x?xf32>" in \
        signature(zynml("compile", MATMUL, "--device", "cpu", "--emit", "linalg"))
    result = zynml("compile", MATMUL, "--device", "cpu", "--emit", "vmfb",
                   "-o", tmp_path / "m.vmfb")
    assert result.returncode == 0, result.stderr
    from zynml.runtime.iree_runner import IreeModule
    main = IreeModule((tmp_path / "m.vmfb").read_bytes(), "local-task").function("main")
    rng = np.random.default_rng()
    for m, k, n in [(1, 1, 1), (7, 31, 3), (65, 17, 129)]:
        a, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n)))
        np.testing.assert_allclose(main(a, b)[0], a.astype(np.float64) @ b, rtol=1e-4,
                                   atol=1e-5)


def test_shapes_fix_shapes_and_dtypes_without_data():
    line = signature(zynml("compile", MATMUL, "--device", "cpu", "--emit", "linalg",
                           "--shape", "A=4096x4096:f16", "--shape", "B=4096x8:f16"))
    assert "(%arg0: tensor<4096x4096xf16>, %arg1: tensor<4096x8xf16>) -> " \
        "tensor<4096x8xf16>" in line


def test_a_question_mark_is_a_dynamic_dimension():
    line = signature(zynml("compile", MATMUL, "--device", "cpu", "--emit", "linalg",
                           "--shape", "A=?x64", "--shape", "B=64x32"))
    assert "(%arg0: tensor<?x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<?x32xf32>" in line


def test_shape_mistakes_are_usage_errors():
    for args, message in [
            (["--shape", "A=4xq"], "--shape expects NAME=DIMS[:DTYPE] like x=4x8:f32"),
            (["--shape", "A=4x-1", "--shape", "B=1x2"], "sizes are non-negative integers"),
            (["--shape", "Z=4x4"], "--shape Z=4x4: the program has no input 'Z'"),
            (["--shape", "A=2x3", "--shape", "B=4x5"], "size 'K' is bound two ways")]:
        result = zynml("compile", MATMUL, "--device", "cpu", "--emit", "linalg", *args)
        assert result.returncode == 1 and message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_the_native_backend_compiles_shape_less(tmp_path):
    """Without shapes every size is dynamic (run-time extents: kernels read them from
    their arguments); `?` in --shape makes one size dynamic; a construct that needs static
    sizes (a strided write no other store completes) is its located error and a note
    naming the shapes to give."""
    result = zynml("compile", MATMUL, "--device", "cuda", "--emit", "gpu")
    assert result.returncode == 0, result.stderr
    assert "memref<?x?xf32>" in result.stdout and "memref.dim" in result.stdout
    result = zynml("compile", MATMUL, "--device", "cuda", "--emit", "gpu",
                   "--shape", "A=?x64", "--shape", "B=64x32")
    assert result.returncode == 0 and "memref<?x64xf32>" in result.stdout, result.stderr
    strided = tmp_path / "strided.zyn"
    strided.write_text("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
                       "        out[2 * i] = x[i]\n}\n")
    result = zynml("compile", strided, "--device", "cuda", "--emit", "ptx")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "strided or offset writes need static shapes" in result.stderr
    assert "note: compiled without shapes, every size is dynamic, and this needs static " \
        "sizes: give the inputs' shapes, e.g. --shape x=DIMS[:DTYPE]" in result.stderr
    result = zynml("compile", MATMUL, "--device", "cuda", "--emit", "ptx",
                   "--shape", "A=16x64:f16", "--shape", "B=64x32:f16")
    assert result.returncode == 0 and ".entry" in result.stdout, result.stderr
