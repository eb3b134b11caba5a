"""`zynml` under mistakes in its arguments and its environment: each is a usage error
(`zynml: error: ...`, exit 1; after the usage line when the mistake is in the arguments),
never an internal error (exit 2) or a traceback, and nothing is left behind on failure.
Found by a hostile-user campaign; each case pins down one defect."""
import os
import resource
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from zynml.cache import atomic_write_bytes
from zynml.cli import main as cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DOUBLE = "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n" \
         "        out[i] = x[i] * 2.0\n}\n"
# a small output (a scalar), then a large one: a file-size limit stops the second
TWO = "let s = compute(x) {\n    @kernel reduce(+)\n    for i in 0..n:\n        yield x[i]\n}\n" \
      "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n" \
      "        out[i] = x[i] * 2.0\n}\n"
# a 'matmul' body that is not a plain product: lowered generically, with a note
MATMUL_TIMES_2 = (Path(__file__).resolve().parents[1] / "programs"
                  / "matmul_times_2.zyn").read_text()


def zynml(*args, cwd=None, preexec_fn=None):
    return subprocess.run([sys.executable, "-m", "zynml.cli.main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, preexec_fn=preexec_fn)


@pytest.fixture
def prog(tmp_path) -> Path:
    path = tmp_path / "double.zyn"
    path.write_text(DOUBLE)
    return path


def usage_error(done, message: str, usage: bool = False) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[-1] == message, done.stderr
    assert lines[0].startswith("usage: zynml") == usage, done.stderr


@pytest.mark.parametrize("args,message,usage", [
    (["--random", "x=4x-1"], "zynml: error: --random x=4x-1: sizes are non-negative "
                             "integers", True),
    (["--random", "x=4", "--random", "x=5"], "zynml: error: input 'x' is given twice: "
                                             "--random x=4 and --random x=5", True),
    (["--random", "x=4", "--set", "n=99999999999999999999999"],
     "zynml: error: --set n=99999999999999999999999: does not fit in a 64-bit integer "
     "(i64 holds -2**63 to 2**63 - 1)", True),
    (["--input", "x=/dev/null"], "zynml: error: cannot read input 'x' from '/dev/null': "
                                 "No data left in file", False),
    (["--random", "x=4", "--device", "bogus"],
     "zynml: error: --device bogus: unknown device 'bogus'; devices are cpu, cuda:N, "
     "vulkan:N, rocm:N, metal:N, interpreter and auto", True),
    (["--random", "x=4", "--random", "q=3"],
     "zynml: error: --random q=3: the program has no input 'q'; its inputs: x", True),
    (["--random", "x=4", "--output-dir", "/proc/zynml-out"],
     "zynml: error: cannot write the outputs into '/proc/zynml-out': No such file or "
     "directory; nothing was written", False),
])
def test_argument_and_environment_mistakes_are_usage_errors(prog, args, message, usage):
    """A mistake in the arguments follows the usage line; one of the file system not."""
    usage_error(zynml("run", prog, "--device", "cpu", *args) if "--device" not in args
                else zynml("run", prog, *args), message, usage)


def test_an_array_larger_than_memory_is_a_usage_error(prog):
    done = zynml("run", prog, "--random", "x=99999999999x99999")
    assert done.returncode == 1 and done.stderr.startswith("usage: zynml run")
    assert done.stderr.splitlines()[-1].startswith(
        "zynml: error: --random x=99999999999x99999 (shape 99999999999x99999, float64) "
        "needs 71.1 PiB, more than this machine's memory (")


@pytest.mark.parametrize("args,message", [
    (["run", "PROG", "--random", "x=4", "--seed", "-1"],
     "zynml run: error: argument --seed: expected a non-negative integer, got -1"),
    (["run", "PROG", "--device"], "zynml run: error: argument --device: expected one "
                                  "argument"),
    (["run"], "zynml run: error: the following arguments are required: file"),
    ([], "zynml: error: the following arguments are required: command"),
    (["compile", "PROG", "--emit", "bogus"], "zynml compile: error: argument --emit: "
                                             "invalid choice: 'bogus' (choose from "),
])
def test_argparse_mistakes_exit_1_after_the_usage_line(prog, args, message):
    done = zynml(*[prog if a == "PROG" else a for a in args])
    assert done.returncode == 1 and done.stderr.startswith("usage: zynml")
    assert done.stderr.splitlines()[-1].startswith(message), done.stderr


def test_help_exits_0_in_process(capsys):
    assert cli.main(["run", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: zynml run")


def test_an_npz_archive_is_refused(prog, tmp_path):
    np.savez(tmp_path / "x.npz", x=np.ones(3, np.float32))
    usage_error(zynml("run", prog, "--device", "cpu", "--input", f"x={tmp_path / 'x.npz'}"),
                f"zynml: error: cannot read input 'x' from '{tmp_path / 'x.npz'}': it is an "
                ".npz archive; give one array as a .npy file")


# ------------------------------------------------------------------ output files


def test_output_dir_that_is_a_file_is_refused_before_running(prog, tmp_path):
    usage_error(zynml("run", prog, "--device", "cpu", "--random", "x=4",
                      "--output-dir", prog), f"zynml: error: --output-dir '{prog}' is a "
                                             "file, not a folder")


def test_dash_o_naming_a_folder_or_no_folder_is_refused(prog, tmp_path):
    usage_error(zynml("compile", prog, "--random", "x=4", "--emit", "cir", "-o", tmp_path),
                f"zynml: error: -o '{tmp_path}' is a folder; give the name of a file")
    usage_error(zynml("compile", prog, "--random", "x=4", "--emit", "cir", "-o",
                      tmp_path / "none" / "x.mlir"),
                f"zynml: error: -o '{tmp_path / 'none' / 'x.mlir'}': the folder "
                f"'{tmp_path / 'none'}' does not exist")


def test_a_taken_name_in_the_output_dir_leaves_it_as_it_was(tmp_path):
    prog = tmp_path / "two.zyn"
    prog.write_text(TWO)
    out = tmp_path / "out"
    out.mkdir()
    (out / "s.npy").write_bytes(b"old s")
    (out / "y.npy").mkdir()  # a folder where the second output goes
    usage_error(zynml("run", prog, "--device", "cpu", "--random", "x=100",
                      "--output-dir", out),
                f"zynml: error: cannot write the outputs into '{out}': Is a directory; "
                "nothing was written")
    assert sorted(p.name for p in out.iterdir()) == ["s.npy", "y.npy"]
    assert (out / "s.npy").read_bytes() == b"old s"  # restored


def _limit_files_to_4_kib():
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


@pytest.mark.parametrize("existing", [False, True])
def test_a_file_size_limit_leaves_no_partial_outputs(tmp_path, existing):
    """The scalar output fits under the limit, the 8 KiB one does not: without the
    temporary folder, s.npy would be left behind."""
    prog = tmp_path / "two.zyn"
    prog.write_text(TWO)
    args = ("run", prog, "--device", "cpu", "--random", "x=2048")
    assert zynml(*args).returncode == 0  # compiled into the cache: no limit on iree-compile
    out = tmp_path / "out"
    if existing:
        out.mkdir()
    done = zynml(*args, "--output-dir", out, preexec_fn=_limit_files_to_4_kib)
    usage_error(done, f"zynml: error: cannot write the outputs into '{out}': File too "
                      "large; nothing was written")
    assert (sorted(os.listdir(out)) if existing else out.exists()) in ([], False)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".zynml")] == []


def test_outputs_go_through_a_symlink_and_into_a_fifo_in_place(tmp_path):
    """A device, a FIFO or /dev/stdout is written in place: renaming over it would
    replace the node itself (as root, `-o /dev/null` made /dev/null a file)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    atomic_write_bytes(fifo, b"through the fifo")
    reader.join(timeout=10)
    assert got == [b"through the fifo"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (tmp_path / "link").symlink_to("target")
    atomic_write_bytes(tmp_path / "link", b"data")
    assert os.path.islink(tmp_path / "link")
    assert (tmp_path / "target").read_bytes() == b"data"


# ------------------------------------------------------------------ notes


def test_notes_print_as_note_lines_not_python_warnings(tmp_path):
    prog = tmp_path / "mm.zyn"
    prog.write_text(MATMUL_TIMES_2)
    done = zynml("compile", prog, "--random", "A=4x3", "--random", "B=3x5",
                 "--emit", "linalg", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"{prog}:1:9: note: the body of this 'matmul' kernel is not a "
                           "plain matrix product; it is lowered generically from the body\n")


def test_an_empty_output_name_is_a_usage_error(prog):
    """test_cli_fuzz: `--output-dir ''` was ignored (exit 0, nothing written)."""
    usage_error(zynml("run", prog, "--device", "cpu", "--random", "x=4", "--output-dir", ""),
                "zynml: error: --output-dir needs a name, not ''", usage=True)
    usage_error(zynml("compile", prog, "--random", "x=4", "-o", ""),
                "zynml: error: --output needs a name, not ''", usage=True)
