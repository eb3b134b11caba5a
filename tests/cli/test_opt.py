"""zynml-opt as users meet it: exit codes, located errors, files written or not.

Most tests run the tool in a subprocess (`python -m zynml.cli.opt`, the console script's
module); the expected-diagnostics parser and the catch-all are also tested in-process.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zynml import knobs
from zynml.cli import diagnostics as diag
from zynml.cli import opt
from zynml.passes import PASSES

VALID = """\
func.func @id(%a: i32) -> i32 {
  return %a : i32
}
"""

# A cir module whose body cir-to-linalg rejects (it reads `out`).
FAILS_IN_PASS = """\
func.func @reads_out(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @body, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @body(%x: tensor<8xf32>, %n: index, %out: tensor<8xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = "cir.load"(%out, %i) : (tensor<8xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}
"""
FAILING_LINE = 13  # the cir.load that reads out


def zynml_opt(*args: str, stdin: str | bytes | None = None, env: dict | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    environment = {k: v for k, v in os.environ.items() if k != knobs.REPRODUCER_DIR.name}
    environment.update(env or {})
    done = subprocess.run([sys.executable, "-m", "zynml.cli.opt", *args], input=data,
                          capture_output=True, env=environment, cwd=cwd, timeout=120)
    done.stdout, done.stderr = done.stdout.decode(), done.stderr.decode()
    return done


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ------------------------------------------------------------------ exit codes, errors


def test_valid_input_exits_0_and_prints_mlir_that_parses_again(tmp_path):
    first = zynml_opt(str(write(tmp_path / "a.mlir", VALID)))
    assert first.returncode == 0, first.stderr
    second = zynml_opt("-", stdin=first.stdout)
    assert second.returncode == 0 and second.stdout == first.stdout


@pytest.mark.parametrize("garbage", [
    "this is not MLIR", "func.func @f(", "}", "\x00\x01\x02", "module {" * 5000,
    "%x = " * 200, '"unterminated', "#map = affine_map<(d0) -> (d0", "func.func @f() {\n",
])
def test_garbage_is_a_located_error_never_a_traceback(garbage):
    done = zynml_opt(stdin=garbage)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("<stdin>:"), done.stderr[:200]
    assert ": error: " in done.stderr.splitlines()[0]


def test_random_bytes_are_an_error_not_a_crash():
    data = bytes(range(256)) * 4
    done = zynml_opt(stdin=data)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "error:" in done.stderr


@pytest.mark.parametrize("source", ["let y = compute(", "compute compute", "let = 1\n" * 50,
                                    "let y = compute(x) {\n    @kernel elementwise\n}\n"])
def test_zyn_garbage_is_a_located_error(tmp_path, source):
    done = zynml_opt(str(write(tmp_path / "bad.zyn", source)))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"{tmp_path / 'bad.zyn'}:"), done.stderr


def test_zyn_error_points_at_the_mistake(tmp_path):
    path = write(tmp_path / "prog.zyn", "let y = compute(x) {\n    @kernel elementwise\n"
                                        "    for i in 0..len:\n        out[i] = relu(z[i])\n}\n")
    done = zynml_opt(str(path))
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == f"{path}:4:23: error: unknown name 'z'"
    assert lines[1] == "        out[i] = relu(z[i])"
    assert lines[2] == " " * 22 + "^"


def test_pass_failure_exits_1_with_the_pass_error(tmp_path):
    path = write(tmp_path / "f.mlir", FAILS_IN_PASS)
    done = zynml_opt(str(path), "--cir-verify", "--cir-to-linalg")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"{path}:{FAILING_LINE}:10: error: cannot lower this")


@pytest.mark.parametrize("args, message", [
    (["--frobnicate"], "'--frobnicate' is neither an option of zynml-opt nor a registered pass"),
    (["--pass-pipeline=builtin.module(frobnicate)"], "'frobnicate' does not refer to a registered pass"),
    (["--cir-to-linalg=named-ops=maybe"], "option 'named-ops' of 'cir-to-linalg' expects bool"),
    (["--cir-verify=x=1"], "unknown option 'x' of 'cir-verify'"),
    (["--cse", "--pass-pipeline=builtin.module(cse)"], "cannot be used with individual pass"),
    (["-o"], "'-o' needs a value"),
])
def test_bad_command_lines_exit_1(tmp_path, args, message):
    done = zynml_opt(str(write(tmp_path / "a.mlir", VALID)), *args)
    assert done.returncode == 1
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bug_in_zynml_opt_is_an_internal_error_exit_2(monkeypatch, capsys, tmp_path):
    def broken(*args, **kwargs):
        raise RuntimeError("simulated bug")
    monkeypatch.setattr(opt, "process_chunk", broken)
    monkeypatch.delenv(knobs.DEBUG.name, raising=False)
    assert opt.main([str(write(tmp_path / "a.mlir", VALID))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zynml-opt: internal error: RuntimeError: simulated bug")
    assert "Traceback" not in err


# ------------------------------------------------------------------ passes


def test_list_passes_names_the_zynml_passes_with_descriptions():
    done = zynml_opt("--list-passes")
    assert done.returncode == 0
    for name, (_, description) in PASSES.items():
        assert f"--{name}" in done.stdout
        assert description in done.stdout
    assert "named-ops=<bool>" in done.stdout
    assert {"cir-verify", "cir-shape-propagation", "cir-to-linalg"} <= set(PASSES)


def test_help_lists_options_and_passes():
    done = zynml_opt("--help")
    assert done.returncode == 0
    for flag in ("--pass-pipeline", "--split-input-file", "--verify-diagnostics",
                 "--mlir-print-ir-after-all", "--mlir-pass-pipeline-crash-reproducer", "-o"):
        assert flag in done.stdout
    for name in PASSES:
        assert f"--{name}" in done.stdout


def test_pass_flags_run_in_command_line_order(tmp_path):
    path = str(write(tmp_path / "a.mlir", VALID))
    done = zynml_opt(path, "--cse", "--cir-verify", "--canonicalize",
                     "--mlir-print-ir-after-all")
    assert done.returncode == 0
    dumps = [line for line in done.stderr.splitlines() if "IR Dump After" in line]
    assert ["(cse)" in dumps[0], "(cir-verify)" in dumps[1], "(canonicalize)" in dumps[2]] == \
        [True, True, True]


def test_zyn_input_runs_the_front_end_and_the_pipeline(tmp_path):
    path = write(tmp_path / "k.zyn", "let y = compute(x) {\n    @kernel elementwise\n"
                                     "    for i in 0..n:\n        out[i] = x[i] + x[i]\n}\n")
    cir = zynml_opt(str(path), "--zyn-input=x=8")
    assert cir.returncode == 0, cir.stderr
    assert '"cir.compute"' in cir.stdout and "tensor<8xf32>" in cir.stdout
    from zynml.compiler import CIR_TO_LINALG_PIPELINE
    linalg = zynml_opt(str(path), "--zyn-input=x=8", f"--pass-pipeline={CIR_TO_LINALG_PIPELINE}")
    assert linalg.returncode == 0, linalg.stderr
    assert "linalg.generic" in linalg.stdout and "cir." not in linalg.stdout


# ------------------------------------------------------------------ output files


def test_output_file_written_on_success(tmp_path):
    out = tmp_path / "out.mlir"
    done = zynml_opt(str(write(tmp_path / "a.mlir", VALID)), "-o", str(out))
    assert done.returncode == 0 and done.stdout == ""
    assert "func.func @id" in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mlir", "out.mlir"]


def test_output_file_not_written_on_failure(tmp_path):
    fresh, existing = tmp_path / "fresh.mlir", write(tmp_path / "existing.mlir", "old\n")
    source = write(tmp_path / "f.mlir", FAILS_IN_PASS)
    assert zynml_opt(str(source), "--cir-to-linalg", "-o", str(fresh)).returncode == 1
    assert zynml_opt(str(source), "--cir-to-linalg", f"-o={existing}").returncode == 1
    assert zynml_opt("-o", str(fresh), stdin="garbage").returncode == 1
    assert not fresh.exists()
    assert existing.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.mlir", "f.mlir"]


# ------------------------------------------------------------------ reproducers


def test_reproducer_saves_the_pipeline_input_with_its_pipeline(tmp_path):
    source, repro = write(tmp_path / "f.mlir", FAILS_IN_PASS), tmp_path / "repro.mlir"
    done = zynml_opt(str(source), "--cir-verify", "--cir-to-linalg",
                     f"--mlir-pass-pipeline-crash-reproducer={repro}")
    assert done.returncode == 1
    text = repro.read_text()
    pipeline = "builtin.module(cir-verify,cir-to-linalg)"
    assert text.startswith(f"// configuration: --pass-pipeline='{pipeline}'\n")
    assert f'loc("{source}":{FAILING_LINE}:10)' in text
    again = zynml_opt(str(repro), f"--pass-pipeline={pipeline}")
    assert again.returncode == 1
    assert again.stderr.splitlines()[0] == done.stderr.splitlines()[0]


def test_reproducer_directory_from_the_environment(tmp_path):
    source, directory = write(tmp_path / "f.mlir", FAILS_IN_PASS), tmp_path / "repros"
    done = zynml_opt(str(source), "--cir-to-linalg",
                     env={knobs.REPRODUCER_DIR.name: str(directory)})
    assert done.returncode == 1
    files = list(directory.iterdir())
    assert len(files) == 1 and files[0].suffix == ".mlir"
    assert files[0].read_text().startswith(
        "// configuration: --pass-pipeline='builtin.module(cir-to-linalg)'")
    assert str(files[0]) in done.stderr


def test_no_reproducer_when_the_pipeline_succeeds(tmp_path):
    repro = tmp_path / "repro.mlir"
    done = zynml_opt(str(write(tmp_path / "a.mlir", VALID)), "--canonicalize",
                     f"--mlir-pass-pipeline-crash-reproducer={repro}")
    assert done.returncode == 0
    assert not repro.exists()


# ------------------------------------------------------------------ split-input-file


SPLIT = """\
func.func @a() {
  return
}
// -----
func.func @b() {
  return
}
// -----
func.func @c() {
  %x = arith.constant 1 : i64
  return %x : i64
}
"""


def test_split_input_file_reports_lines_of_the_whole_file(tmp_path):
    path = write(tmp_path / "s.mlir", SPLIT)
    done = zynml_opt(str(path), "--split-input-file")
    assert done.returncode == 1
    assert done.stderr.startswith(f"{path}:11:3: error: 'func.return' op has 1 operands, "
                                  "but enclosing function (@c) returns 0")


def test_split_input_file_joins_outputs_with_the_marker(tmp_path):
    path = write(tmp_path / "s.mlir", SPLIT.rsplit("// -----", 1)[0])
    done = zynml_opt(str(path), "--split-input-file")
    assert done.returncode == 0
    chunks = done.stdout.split("// -----\n")
    assert len(chunks) == 2
    assert "@a" in chunks[0] and "@b" in chunks[1]


def test_split_input_pads_chunks_to_their_lines():
    chunks = opt.split_input("a\n// -----\nb\nc\n// -----\n", split=True)
    assert chunks == ["a\n", "\n\nb\nc\n", "\n" * 5]
    assert opt.split_input("a\n// -----\nb\n", split=False) == ["a\n// -----\nb\n"]


# ------------------------------------------------------------------ verify-diagnostics


def test_verify_diagnostics_success(tmp_path):
    path = write(tmp_path / "v.mlir", SPLIT.replace(
        "  return %x : i64", "  // expected-error@+1 {{has 1 operands}}\n  return %x : i64"))
    done = zynml_opt(str(path), "--split-input-file", "--verify-diagnostics")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "@a" in done.stdout and "@b" in done.stdout


def test_verify_diagnostics_failure_reports_both_sides(tmp_path):
    path = write(tmp_path / "v.mlir", SPLIT.replace("func.func @b() {",
                                                    "func.func @b() { // expected-error {{nope}}"))
    done = zynml_opt(str(path), "--split-input-file", "--verify-diagnostics")
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert lines == [
        f"{path}:5:21: error: expected error \"nope\" was not produced",
        f"{path}:11:3: error: unexpected error: 'func.return' op has 1 operands, but "
        "enclosing function (@c) returns 0",
    ]


def test_expected_comments_designate_lines():
    text = "\n".join([
        "op1",                                         # 1
        "// expected-error@+2 {{two below}}",          # 2 -> 4
        "// expected-note@below {{next real line}}",   # 3 -> 4 (skips designator lines)
        "op2  // expected-warning {{same line}}",      # 4 -> 4
        "// expected-remark@-4 {{four above}}",        # 5 -> 1
        "// expected-error@above {{previous real}}",   # 6 -> 4
        "// expected-error@unknown {{nowhere}}",       # 7 -> None
        "// expected-error-re {{value {{[0-9]+}}}}",   # 8 -> 8
    ])
    found = diag.parse_expected(text, "f.mlir")
    assert [(e.severity, e.line, e.text) for e in found] == [
        ("error", 4, "two below"), ("note", 4, "next real line"),
        ("warning", 4, "same line"), ("remark", 1, "four above"),
        ("error", 4, "previous real"), ("error", None, "nowhere"),
        ("error", 8, "value {{[0-9]+}}"),
    ]
    assert found[-1].matches("value 42 is bad") and not found[-1].matches("value x")
    assert (found[0].comment_line, found[0].comment_col) == (2, 4)


def test_expected_comment_outside_the_file_is_an_error():
    with pytest.raises(ValueError, match="outside the file"):
        diag.parse_expected("// expected-error@+5 {{x}}\n", "f.mlir")


def test_check_expected_matches_severity_line_and_substring():
    expected = diag.parse_expected("a\nb // expected-warning {{careful}}\n", "f.mlir")
    ok = [diag.Diagnostic("warning", "be careful here", "f.mlir", 2, 1)]
    assert diag.check_expected(ok, expected) == []
    expected = diag.parse_expected("a\nb // expected-warning {{careful}}\n", "f.mlir")
    wrong = [diag.Diagnostic("error", "careful", "f.mlir", 2, 1),
             diag.Diagnostic("note", "elsewhere", "g.mlir", 2, 1)]
    problems = [p.message for p in diag.check_expected(wrong, expected)]
    assert problems == ["'error' diagnostic emitted when expecting a 'warning'",
                        "unexpected note: elsewhere"]


def test_render_shows_the_line_and_a_caret():
    d = diag.Diagnostic("error", "boom", "f.mlir", 2, 3,
                        notes=[diag.Diagnostic("note", "here", "f.mlir", 1, 1)])
    assert diag.render(d, {"f.mlir": "first\n\tsecond\n"}).splitlines() == [
        "f.mlir:2:3: error: boom", " second", "  ^", "f.mlir:1:1: note: here", "first", "^"]
    assert diag.render(diag.Diagnostic("error", "lost"), {}) == "<unknown>:0:0: error: lost"


# ------------------------------------------------------------------ installation


def test_console_script_is_installed():
    script = shutil.which("zynml-opt")
    if script is None:
        pytest.skip("zynml-opt is not on PATH (pip install -e . installs it)")
    done = subprocess.run([script, "--list-passes"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "--cir-to-linalg" in done.stdout
