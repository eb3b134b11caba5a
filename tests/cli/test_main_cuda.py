"""`zynml compile --device cuda --emit ...` and `zynml devices` without a GPU: each
native stage, artifacts, and the mistakes that exit 1 with a message, no traceback and
nothing written."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zynml.runtime.cuda.artifact import launches

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SOFTMAX = EXAMPLES / "softmax.zyn"


def zynml(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "zynml.cli.main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def compile_softmax(*args, rows_cols="37x129"):
    return zynml("compile", SOFTMAX, *args, "--random", f"x={rows_cols}")


def assert_clean_failure(result, message):
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert "internal error" not in result.stderr
    assert result.stdout == ""


def test_emit_ptx():
    result = compile_softmax("--device", "cuda", "--emit", "ptx")
    assert result.returncode == 0, result.stderr
    ptx = result.stdout
    assert ptx.startswith("//")
    assert re.search(r"^\.target sm_90a$", ptx, re.M)
    assert re.search(r"^\.version 8\.3$", ptx, re.M)
    entries = re.findall(r"\.entry\s+(\w+)\(", ptx)
    assert entries and all(re.fullmatch(r"k\d+_\w+", e) for e in entries), entries


def test_emit_ptx_for_another_chip_to_a_file(tmp_path):
    out = tmp_path / "softmax.ptx"
    result = compile_softmax("--device", "cuda:0", "--emit", "ptx", "--target", "sm_80",
                             "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    ptx = out.read_text()
    assert re.search(r"^\.target sm_80$", ptx, re.M) and ".entry" in ptx


def test_native_stages_default_to_cuda():
    """--emit of a native stage with --device auto (the default) compiles for CUDA."""
    result = compile_softmax("--emit", "ptx", rows_cols="5x9")
    assert result.returncode == 0, result.stderr
    assert ".entry" in result.stdout


def test_emit_gpu():
    result = compile_softmax("--device", "cuda", "--emit", "gpu")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "gpu.launch_func" in text and "zynml.strategy" in text
    assert "gpu.module @zynml_kernels" in text
    strategies = set(re.findall(r'zynml.strategy = "(\w+)"', text))
    assert strategies and strategies <= {"pointwise", "row_reduce", "matmul", "row_fused"}, \
        strategies
    assert "memref<37x129xf32>" in text  # specialized to the --random shape


def test_emit_nvvm():
    result = compile_softmax("--device", "cuda", "--emit", "nvvm")
    assert result.returncode == 0, result.stderr
    assert "llvm.func" in result.stdout
    assert "nvvm." in result.stdout
    assert "gpu.launch_func" in result.stdout  # the host side stays


def test_emit_llvm():
    result = compile_softmax("--device", "cuda", "--emit", "llvm")
    assert result.returncode == 0, result.stderr
    assert 'target triple = "nvptx64-nvidia-cuda"' in result.stdout
    assert "define" in result.stdout and "@llvm.nvvm." in result.stdout


def test_emit_artifact_writes_a_loadable_artifact(tmp_path):
    from zynml.runtime.cuda.artifact import CudaArtifact, describe
    out = tmp_path / "softmax.zynart"
    result = compile_softmax("--device", "cuda", "--emit", "artifact", "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    artifact = CudaArtifact.load(out)
    assert artifact.chip == "sm_90a"
    assert ".entry" in artifact.ptx and artifact.cubin[:4] == b"\x7fELF"
    assert artifact.plan["input_names"] == ["x"]
    assert artifact.plan["inputs"] == [{"kind": "tensor", "shape": [37, 129],
                                        "dtype": "float32"}]
    assert artifact.plan["output_names"] == ["row_max", "shifted_exp", "row_sum", "probs"]
    info = describe(artifact)
    assert set(info["kernels"]) == set(re.findall(r"\.entry\s+(\w+)\(", artifact.ptx))
    assert out.stat().st_mode & 0o044  # readable like any output file


def test_emit_plan_prints_the_launch_plan_of_the_ptx_kernels():
    plan = json.loads(compile_softmax("--device", "cuda", "--emit", "plan").stdout)
    ptx = compile_softmax("--device", "cuda", "--emit", "ptx").stdout
    assert plan["input_names"] == ["x"] and plan["inputs"][0]["shape"] == [37, 129]
    launched = {step["kernel"] for step in launches(plan["body"])}
    assert launched == set(re.findall(r"\.entry\s+(\w+)\(", ptx))


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
def test_emit_cubin_writes_the_assembled_kernels(tmp_path):
    out = tmp_path / "softmax.cubin"
    result = compile_softmax("--device", "cuda", "--emit", "cubin", "-o", out)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:4] == b"\x7fELF"
    result = compile_softmax("--device", "cuda", "--emit", "cubin")
    assert_clean_failure(result, "zynml: error: --emit cubin writes binary: give -o FILE")


def test_save_temps_writes_every_native_stage_and_emits_as_usual(tmp_path):
    temps = tmp_path / "temps"
    result = compile_softmax("--device", "cuda", "--emit", "ptx", "--save-temps", temps)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in temps.iterdir()) == [
        "ast.txt", "cir.mlir", "gpu.mlir", "linalg.mlir", "llvm.ll", "nvvm.mlir",
        "plan.json", "ptx.ptx"]
    assert (temps / "ptx.ptx").read_text() == result.stdout  # what -o would have written


def test_emit_artifact_needs_an_output_file(tmp_path):
    result = zynml("compile", SOFTMAX, "--device", "cuda", "--emit", "artifact",
                   "--random", "x=4x8", cwd=tmp_path)
    assert_clean_failure(result, "zynml: error: --emit artifact writes binary: give -o FILE")
    assert list(tmp_path.iterdir()) == []


def test_native_stage_for_the_cpu_is_an_error(tmp_path):
    out = tmp_path / "x.ptx"
    result = compile_softmax("--device", "cpu", "--emit", "ptx", "-o", out)
    assert_clean_failure(result, "--emit ptx is a stage of the native CUDA backend")
    assert "--device cuda" in result.stderr
    assert not out.exists()


def test_native_stage_through_iree_is_an_error(tmp_path):
    result = compile_softmax("--device", "cuda", "--backend", "iree", "--emit", "gpu")
    assert_clean_failure(result, "--emit gpu is a stage of the native CUDA backend")


def test_vmfb_of_the_native_backend_is_an_error(tmp_path):
    out = tmp_path / "x.vmfb"
    result = compile_softmax("--device", "cuda", "--emit", "vmfb", "-o", out)
    assert_clean_failure(result, "--emit vmfb is IREE's artifact: add --backend iree")
    assert not out.exists()


def test_vmfb_for_vulkan_through_iree(tmp_path):
    out = tmp_path / "x.vmfb"
    result = zynml("compile", SOFTMAX, "--device", "vulkan", "--backend", "iree",
                   "--emit", "vmfb", "--random", "x=3x5", "-o", out)
    assert result.returncode == 0, result.stderr
    data = out.read_bytes()
    assert data[:2] == b"PK" and len(data) > 1000  # IREE's zip-aligned flatbuffer
    # No Vulkan device here to load it on: check what it carries, a SPIR-V executable.
    assert b"vulkan-spirv-fb" in data
    assert b"\x03\x02\x23\x07" in data  # SPIR-V's magic number, little-endian


def test_unknown_target_exits_1_and_writes_nothing(tmp_path):
    out = tmp_path / "x.ptx"
    result = compile_softmax("--device", "cuda", "--emit", "ptx", "--target", "sm_99",
                             "-o", out)
    assert_clean_failure(result, "unknown CUDA target 'sm_99'")
    assert "sm_90a" in result.stderr  # the known ones are listed
    assert not out.exists()
    result = compile_softmax("--device", "cuda", "--emit", "artifact", "--target", "90",
                             "-o", out)
    assert_clean_failure(result, "bad CUDA target '90'")
    assert not out.exists()


def test_devices_lists_the_cpu():
    result = zynml("devices")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines and lines[-1].startswith("cpu")
    assert re.fullmatch(r"cpu\s+cpu\s+.+ \(\d+ cores\)", lines[-1]), lines[-1]
    for line in lines[:-1]:  # any GPUs come first, with their memory
        assert re.match(r"(cuda|vulkan|rocm|metal):\d+\s+gpu\s", line), line


def test_run_on_a_missing_gpu_exits_1():
    from zynml.devices import compute_devices
    if any(d["id"] == "cuda:0" for d in compute_devices()):
        pytest.skip("this machine has a CUDA GPU")
    result = zynml("run", SOFTMAX, "--random", "x=4x8", "--device", "cuda:0")
    assert_clean_failure(result, "device 'cuda:0' is not available")
    assert "available devices: auto" in result.stderr


def test_the_command_line_asks_with_tf32():
    """f32 products on TF32 tensor cores (tests/backend/test_cuda_tf32.py) when asked."""
    source = Path(__file__).resolve().parents[1] / "programs" / "examples" / "matmul.zyn"
    def ptx(*flags):
        done = zynml("compile", source, "--device", "cuda", "--emit", "ptx", "--shape",
                     "A=256x64", "--shape", "B=64x256", *flags)
        assert done.returncode == 0, done.stderr
        return done.stdout
    assert re.search(r"wgmma\.mma_async\.\S+k8\.f32\.tf32\.tf32", ptx("--tf32"))
    assert "tf32" not in ptx()
