"""`zynml run|compile|tune --pipeline NAME`: a file's pipelines from the command line, their
record inputs as `--input model.layers[0].w=...`, and the usage errors of a file of
pipelines and no script, or of a pipeline that is not there."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_close, transformer_block_reference, transformer_layer
from zynml.cli import main as cli

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
SOFTMAX = PROGRAMS / "softmax_pipeline.zyn"
TRANSFORMER = PROGRAMS / "transformer" / "transformer_block.zyn"
# a script and two pipelines, one calling the other
MIXED = """pipeline scale(x: tensor[n], s: float) -> tensor[n]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] * s
    }
    return y

pipeline shifted(x: tensor[n], t: float) -> tensor[n]:
    let z = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] + 1.0
    }
    let r = scale(z, t)
    return r

let w = compute(v) {
    @kernel elementwise
    for i in 0..m:
        out[i] = v[i] - 1.0
}
"""


def zynml(*args):
    return subprocess.run([sys.executable, "-m", "zynml.cli.main", *map(str, args)],
                          capture_output=True, text=True)


def softmax64(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def usage_error(code: int, stderr: str, command: str) -> list[str]:
    """The lines after the usage line of a usage error (exit 1, no traceback)."""
    assert code == 1, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert stderr.startswith(f"usage: zynml {command}"), stderr
    lines = stderr.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("zynml: error: "))
    return lines[first:]


def test_run_a_pipeline_from_npy_inputs(tmp_path, rng):
    x = rng.standard_normal((7, 13)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = zynml("run", SOFTMAX, "--pipeline", "softmax", "--device", "cpu",
                   "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("probs: float32[7, 13] min=")
    assert_close(np.load(tmp_path / "out" / "probs.npy"), softmax64(x))


def test_run_a_pipeline_in_process(tmp_path, rng, capsys):
    x = rng.standard_normal((1, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["run", str(SOFTMAX), "--pipeline", "softmax", "--device", "cpu",
                     "--input", f"x={tmp_path / 'x.npy'}",
                     "--output-dir", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.startswith("probs: float32[1, 5]")
    assert_close(np.load(tmp_path / "out" / "probs.npy"), softmax64(x))


def test_run_a_pipeline_of_a_file_with_a_script(tmp_path, rng, capsys):
    """--pipeline picks the pipeline (one that calls another); without it the script runs."""
    prog = tmp_path / "mixed.zyn"
    prog.write_text(MIXED)
    x = rng.standard_normal(11).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["run", str(prog), "--pipeline", "shifted", "--device", "cpu",
                     "--input", f"x={tmp_path / 'x.npy'}", "--set", "t=3",
                     "--output-dir", str(tmp_path / "out")]) == 0
    assert_close(np.load(tmp_path / "out" / "r.npy"), (x.astype(np.float64) + 1) * 3)
    assert cli.main(["run", str(prog), "--device", "cpu", "--random", "v=4"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("w: float32[4] min=")


def test_run_the_transformer_block_with_record_inputs(tmp_path, rng):
    batch, seq, hidden, heads = 2, 5, 12, 3
    layer = transformer_layer(rng, hidden, 7)
    x = rng.standard_normal((batch, seq, hidden)).astype(np.float32)
    args = ["--input", f"x={tmp_path / 'x.npy'}"]
    np.save(tmp_path / "x.npy", x)
    for name, value in layer.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--input", f"model.layers[1].{name}={tmp_path / name}.npy"]
    result = zynml("run", TRANSFORMER, "--pipeline", "transformer_block", "--device", "cpu",
                   *args, "--set", "layer=1", "--set", f"num_heads={heads}",
                   "--set", f"head_dim={hidden // heads}", "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert_close(np.load(tmp_path / "out" / "output.npy"),
                 transformer_block_reference(x, layer, heads, hidden // heads), rtol=1e-4)


@pytest.mark.parametrize("stage,marker", [
    ("ast", "Pipeline @3:1 name='softmax'"), ("cir", '"cir.compute"'),
    ("linalg", "linalg.reduce"), ("gpu", "gpu.launch_func"), ("ptx", ".entry"),
])
def test_compile_a_pipeline_to_each_stage(stage, marker):
    device = ["--device", "cuda"] if stage in ("gpu", "ptx") else []
    result = zynml("compile", SOFTMAX, "--pipeline", "softmax", "--emit", stage,
                   "--random", "x=37x129", *device)
    assert result.returncode == 0, result.stderr
    assert marker in result.stdout


def test_compile_a_pipeline_shape_generic_and_its_artifact(tmp_path, capsys):
    assert cli.main(["compile", str(SOFTMAX), "--pipeline", "softmax", "--emit", "cir"]) == 0
    cir = capsys.readouterr().out
    assert "tensor<?x?xf32>" in cir and 'zynml.outputs = ["probs"]' in cir
    out = tmp_path / "softmax.zart"
    assert cli.main(["compile", str(SOFTMAX), "--pipeline", "softmax", "--device", "cuda",
                     "--emit", "artifact", "--random", "x=3x5", "-o", str(out)]) == 0
    assert out.stat().st_size > 0


@pytest.mark.parametrize("command", [["run"], ["compile", "--emit", "cir"],
                                     ["tune", "--compile-only"]])
def test_a_file_of_pipelines_without_pipeline_is_a_usage_error(command, capsys):
    code = cli.main([command[0], str(TRANSFORMER), *command[1:]])
    lines = usage_error(code, capsys.readouterr().err, command[0])
    assert lines == [
        f"zynml: error: {TRANSFORMER} has no script, only pipelines: name one with "
        "--pipeline NAME; its pipelines:",
        "  transformer_block(x: tensor[batch, seq, hidden], layer: int); also takes "
        "num_heads, head_dim, model (a record)"]


def test_the_ast_of_a_file_of_pipelines_needs_no_pipeline():
    result = zynml("compile", SOFTMAX, "--emit", "ast")
    assert result.returncode == 0 and "Pipeline @3:1 name='softmax'" in result.stdout


def test_an_unknown_pipeline_is_a_usage_error_listing_them(tmp_path):
    prog = tmp_path / "mixed.zyn"
    prog.write_text(MIXED)
    result = zynml("run", prog, "--pipeline", "scaled", "--random", "x=3")
    assert result.stdout == ""
    assert usage_error(result.returncode, result.stderr, "run") == [
        f"zynml: error: --pipeline scaled: {prog} has no pipeline 'scaled'; its pipelines:",
        "  scale(x: tensor[n], s: float)",
        "  shifted(x: tensor[n], t: float)"]


def test_an_input_the_pipeline_does_not_have_lists_its_inputs(capsys):
    code = cli.main(["run", str(TRANSFORMER), "--pipeline", "transformer_block",
                     "--random", "modl.layers[0].w=3"])
    assert usage_error(code, capsys.readouterr().err, "run") == [
        "zynml: error: --random modl.layers[0].w=3: the program has no input "
        "'modl.layers[0].w'; its inputs: x, layer, num_heads, head_dim, "
        "model (a record: model.FIELD...)"]


@pytest.mark.parametrize("args", [
    ["--random", "model.layers=3", "--random", "model.layers[0].w=3"],
    ["--random", "model.layers[0].w=3", "--random", "model.layers=3"],
])
def test_a_record_given_as_an_array_too_is_a_usage_error(args, capsys):
    code = cli.main(["run", str(TRANSFORMER), "--pipeline", "transformer_block", *args])
    (line,) = usage_error(code, capsys.readouterr().err, "run")
    assert line.endswith("a record is given as an array too, or an array as a record")


def test_a_missing_record_member_is_a_located_error(capsys):
    code = cli.main(["run", str(TRANSFORMER), "--pipeline", "transformer_block",
                     "--device", "cpu", "--random", "x=1x2x4", "--set", "layer=0",
                     "--set", "num_heads=2", "--set", "head_dim=2",
                     "--random", "model.layers[0].qkv=4x12"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.startswith(f"{TRANSFORMER}:2:19: error: 'model.layers[0]' has no member "
                          ".qkv_proj\n"), err
