"""zynml-opt on input that makes MLIR abort, and on cir the passes once crashed on: exit 1
with a located error, never a signal, a traceback or exit 2. Found by a hostile-user
campaign: `array<index: 1>` failed an assertion in MLIR's parser (SIGABRT), a tensor of
99999999999 elements an LLVM ERROR (SIGABRT), and a `cir.compute` whose body symbol names
no function was an AttributeError in cir-to-linalg and cir-shape-propagation."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from zynml.cli import isolate

ABORTS_IN_ASSERTION = "module attributes {x = array<index: 1>} {}\n"
ABORTS_IN_LLVM_ERROR = """\
func.func @f() -> tensor<99999999999xf32> {
  %c = arith.constant 1.0 : f32
  %t = tensor.from_elements %c : tensor<99999999999xf32>
  return %t : tensor<99999999999xf32>
}
"""
NO_BODY = """\
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c8 = arith.constant 8 : index
  %y = "cir.compute"(%x, %c8) {kind = "elementwise", body = @missing, out_dims = array<i64: 1>,
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
"""
# a 'matmul' body that is not a plain product: lowered generically, with a note
MATMUL_TIMES_2 = (Path(__file__).resolve().parents[1] / "programs"
                  / "matmul_times_2.zyn").read_text()


def zynml_opt(*args, env=None):
    done = subprocess.run([sys.executable, "-m", "zynml.cli.opt", *map(str, args)],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    return done


@pytest.mark.parametrize("text,why", [
    (ABORTS_IN_ASSERTION, 'assertion isIntOrFloat() && "only integers and floats have a '
                          'bitwidth" failed (Types.cpp:123)'),
    (ABORTS_IN_LLVM_ERROR, "SmallVector unable to grow. Requested capacity (99999999999) "
                           "is larger than maximum value for size type (4294967295)"),
])
def test_mlir_aborting_is_a_located_error_exit_1(tmp_path, text, why):
    path = tmp_path / "a.mlir"
    path.write_text(text)
    done = zynml_opt(path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{path}:1:1: error: MLIR crashed (SIGABRT) while processing this input: {why}",
        text.splitlines()[0], "^"]


def test_a_chunk_that_aborts_fails_alone(tmp_path):
    path = tmp_path / "a.mlir"
    path.write_text("module {}\n// -----\n\n" + ABORTS_IN_ASSERTION +
                    "// -----\nfunc.func @g() {\n  return\n}\n")
    done = zynml_opt(path, "--split-input-file")
    assert done.returncode == 1 and done.stdout == ""  # no output when any chunk fails
    assert done.stderr.splitlines()[0].startswith(f"{path}:4:1: error: MLIR crashed (SIGABRT)")
    assert len(done.stderr.splitlines()) == 3  # the other chunks were fine


def test_the_debug_knob_shows_mlirs_own_words(tmp_path):
    path = tmp_path / "a.mlir"
    path.write_text(ABORTS_IN_ASSERTION)
    done = zynml_opt(path, env={"ZYNML_DEBUG": "1"})
    assert done.returncode == 1 and "Assertion `isIntOrFloat()" in done.stderr


@pytest.mark.parametrize("flag", ["--cir-to-linalg", "--cir-shape-propagation",
                                  "--cir-raise-attention", "--cir-verify"])
def test_a_missing_body_is_a_located_error_of_every_cir_pass(tmp_path, flag):
    path = tmp_path / "a.mlir"
    path.write_text(NO_BODY)
    done = zynml_opt(path, flag)
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (f"{path}:3:8: error: 'cir.compute' body @missing "
                                           "is not a function of this module")


def test_usage_errors_print_the_usage_line(tmp_path):
    path = tmp_path / "a.mlir"
    path.write_text("module {}\n")
    done = zynml_opt(path, path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "usage: zynml-opt [options] [passes] [input file | -]",
        f"zynml-opt: error: expected one input file, got 2: {path} {path}"]
    done = zynml_opt(path, "-o", tmp_path)
    assert done.returncode == 1
    assert done.stderr == f"zynml-opt: error: cannot write -o '{tmp_path}': Is a directory\n"


def test_notes_of_the_passes_print_as_notes(tmp_path):
    path = tmp_path / "mm.zyn"
    path.write_text(MATMUL_TIMES_2)
    done = zynml_opt(path, "--zyn-input=A=4x3", "--zyn-input=B=3x5", "--cir-to-linalg")
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        f"{path}:1:9: note: the body of this 'matmul' kernel is not a plain matrix "
        "product; it is lowered generically from the body",
        "let C = compute(A, B) {", "        ^"]
    assert "zynml.notes" not in done.stdout


def test_isolated_passes_results_exceptions_and_deaths():
    assert isolate.isolated(sum, [1, 2, 3]) == 6
    with pytest.raises(KeyError, match="gone"):
        isolate.isolated(_raises_key_error)
    with pytest.raises(isolate.Crashed) as err:
        isolate.isolated(os.abort)
    assert err.value.how == "MLIR crashed (SIGABRT)"


def _raises_key_error():
    raise KeyError("gone")


# ------------------------------------------------------------------ found by the fuzzers


def test_an_invalid_regex_in_an_expectation_is_a_located_error(tmp_path):
    """test_opt_fuzz seed 832: re.error escaped as an internal error (exit 2)."""
    path = tmp_path / "a.mlir"
    path.write_text("func.func @f() {\n  // expected-error-re@+1 {{a {{[0-9}} b}}\n"
                    "  return\n}\n")
    done = zynml_opt(path, "--verify-diagnostics")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith(
        f"{path}:2:6: error: invalid regex in expected-error-re: ")


def test_cir_to_linalg_lowers_a_shape_generic_gather_of_a_dynamic_input(tmp_path):
    """test_opt_fuzz seed 854: conv2d_depthwise without --zyn-input reads `input[.., oh +
    kh, ..]` of a dynamic dimension: "cannot slice a dynamic dimension without its
    extent" was an internal error; the whole dimension is its tensor.dim."""
    path = tmp_path / "conv.zyn"
    path.write_text((Path(__file__).resolve().parents[1] / "programs" / "examples" /
                     "conv2d_depthwise.zyn").read_text())
    done = zynml_opt(path, "--cir-to-linalg")
    assert done.returncode == 0, done.stderr
    assert "linalg.generic" in done.stdout and "tensor.dim" in done.stdout


ONE_COMPUTE = """\
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %n = arith.constant SIZE : index
  %y = "cir.compute"(%x, %n) {kind = "elementwise", body = @body, ATTRS
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<8xf32>, index) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
func.func private @body(%x: tensor<8xf32>, %n: index, %out: tensor<8xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<8xf32>, index) -> f32
    "cir.store"(%v, %out, %i) : (f32, tensor<8xf32>, index) -> ()
  }
  return
}
"""


def test_a_negative_constant_size_is_an_empty_result(tmp_path):
    """test_opt_fuzz seed 15565: tensor<-8xf32> was an MLIRError (exit 2); a loop to -8
    runs no iteration, as Python's range, so the result is empty."""
    path = tmp_path / "a.mlir"
    path.write_text(ONE_COMPUTE.replace("SIZE", "-8").replace("ATTRS", "out_dims = array<i64: 1>,"))
    done = zynml_opt(path, "--cir-shape-propagation")
    assert done.returncode == 0, done.stderr
    assert "-> tensor<0xf32>" in done.stdout


@pytest.mark.parametrize("size,attrs,flag,message", [
    ("8", "out_dims = array<i64: 5>,", "--cir-shape-propagation",
     "3:8: error: 'out_dims' entry 5 is not an index operand"),
    # test_opt_fuzz seed 14833: `reduce` as a unit attribute was a ValueError (exit 2)
    ("8", "out_dims = array<i64: 1>, reduce,", "--cir-verify",
     "3:8: error: 'cir.compute' attribute 'reduce' must be a string, not unit"),
    ("8", "out_dims = array<i64: 1>, names = [1, 2],", "--cir-to-linalg",
     "3:8: error: 'cir.compute' attribute 'names' must be an array of strings, not [1, 2]"),
])
def test_cir_attributes_of_the_wrong_kind_or_value_are_located_errors(tmp_path, size, attrs,
                                                                      flag, message):
    path = tmp_path / "a.mlir"
    path.write_text(ONE_COMPUTE.replace("SIZE", size).replace("ATTRS", attrs))
    done = zynml_opt(path, flag)
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == f"{path}:{message}"


def test_an_unknown_reduce_operator_is_a_located_error_of_cir_to_linalg(tmp_path):
    """test_opt_fuzz seed 40953: reduce = "vector" was a KeyError in cir-to-linalg run
    without cir-verify (exit 2)."""
    path = tmp_path / "a.mlir"
    path.write_text("""\
func.func @f(%x: tensor<16xf32>) -> f32 {
  %c16 = arith.constant 16 : index
  %r = "cir.compute"(%x, %c16) {kind = "reduce", reduce = "vector", body = @sum_body,
      out_dims = array<i64>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<16xf32>, index) -> f32
  return %r : f32
}
func.func private @sum_body(%x: tensor<16xf32>, %n: index, %out: tensor<f32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = "cir.load"(%x, %i) : (tensor<16xf32>, index) -> f32
    "cir.yield"(%v) : (f32) -> ()
  }
  return
}
""")
    done = zynml_opt(path, "--cir-to-linalg")
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        f"{path}:3:8: error: 'cir.compute' of kind reduce needs 'reduce' to be one of +, *, "
        "min, max, and, or, argmin, argmax; got 'vector'")
