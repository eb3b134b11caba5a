"""`zynml run --checked` and ZYNML_CHECK: a bad index at run time is a located error with
exit code 1, nothing written; `zynml compile --checked` shows the checks."""
import os
import subprocess
import sys

import numpy as np
import pytest

GATHER = "let y = compute(x, idx) {\n    @kernel elementwise\n    for i in 0..n:\n" \
         "        out[i] = x[idx[i]]\n}\n"
MESSAGE = ("gather.zyn:4:18: error: 'x' is read out of bounds: index 9 of dimension 0, but "
           "that dimension of 'x' has size 4\n        out[i] = x[idx[i]]\n"
           "                 ^\n")


def _zynml(*args, env=None):
    return subprocess.run([sys.executable, "-m", "zynml.cli.main", *map(str, args)],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})


@pytest.fixture
def gather(tmp_path):
    (tmp_path / "gather.zyn").write_text(GATHER)
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    np.save(tmp_path / "idx.npy", np.array([1, 9, 0], np.int64))
    return tmp_path


def _run(folder, *flags, env=None):
    return _zynml("run", folder / "gather.zyn", "--device", "cpu", "--input",
                  f"x={folder / 'x.npy'}", "--input", f"idx={folder / 'idx.npy'}",
                  "--output-dir", folder / "out", *flags, env=env)


def test_run_checked_reports_the_read_and_exits_1(gather):
    result = _run(gather, "--checked")
    assert result.returncode == 1
    assert result.stderr.endswith(MESSAGE) and "Traceback" not in result.stderr
    assert not (gather / "out").exists()


def test_zynml_check_does_the_same(gather):
    result = _run(gather, env={"ZYNML_CHECK": "1"})
    assert result.returncode == 1 and result.stderr.endswith(MESSAGE)
    unchecked = _run(gather)
    assert unchecked.returncode == 0, unchecked.stderr
    np.testing.assert_array_equal(np.load(gather / "out" / "y.npy"), [1, 3, 0])


def test_compile_checked_shows_the_check_computes(gather):
    args = ("compile", gather / "gather.zyn", "--device", "cpu", "--emit", "linalg",
            "--random", "x=4", "--random", "idx=3:i64")
    checked, plain = _zynml(*args, "--checked"), _zynml(*args)
    assert checked.returncode == 0 and plain.returncode == 0, checked.stderr + plain.stderr
    assert '"zynml.checks"]' in checked.stdout and "zynml.checks" not in plain.stdout
