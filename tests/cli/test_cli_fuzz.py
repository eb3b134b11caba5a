"""Fuzzing `zynml` with mutated command lines in hostile file-system situations.

Each case is made from a seed (plain seeded mutation: a failure names the seed and the
command line, and `case(seed)` makes it again): a command, a program file (valid, broken,
binary, empty, a folder, missing) and a handful of arguments drawn from what the options
take plus what they should not (negative, huge and malformed sizes, files that are no
.npy arrays, output folders that are files, taken names, /proc, a file-size limit).
Every run must end with exit code 0 or 1, print no traceback and no "internal error",
and, when it fails, leave the files around it as they were (no partial outputs, no
temporary files); --save-temps is exempt, it writes on the way by design.

Runs in-process through `main(argv)` (fast: the artifact cache stays warm); every 8th
case also runs as a subprocess, so that a crash by a signal shows. ZYNML_FUZZ_SCALE=N
runs N times as many cases (the default, 160, takes about 20 s).
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from zynml import knobs
from zynml.cli import main as cli

SCALE = knobs.FUZZ_SCALE.get()
CASES = max(1, int(160 * SCALE))
SUBPROCESS_EVERY = 8

DOUBLE = "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n" \
         "        out[i] = x[i] * 2.0\n}\n"
TWO = "let s = compute(x) {\n    @kernel reduce(+)\n    for i in 0..n:\n        yield x[i]\n}\n" \
      + DOUBLE
SOFTMAX = (Path(__file__).resolve().parents[2] / "examples" / "softmax.zyn").read_text()
PROGRAMS = {"double.zyn": DOUBLE, "two.zyn": TWO, "softmax.zyn": SOFTMAX,
            "bad.zyn": DOUBLE.replace("x[i]", "q[i]"), "empty.zyn": "",
            "syntax.zyn": "let y = compute(x {\n"}


def world(root: Path) -> None:
    """The files a case's arguments can name."""
    for name, text in PROGRAMS.items():
        (root / name).write_text(text)
    (root / "binary.zyn").write_bytes(bytes(range(256)))
    (root / "folder.zyn").mkdir()
    np.save(root / "x4.npy", np.arange(4, dtype=np.float32))
    np.save(root / "x3x5.npy", np.ones((3, 5), np.float32))
    np.save(root / "c.npy", np.ones(4, np.complex64))
    np.save(root / "i8.npy", np.ones(4, np.int8))
    np.save(root / "obj.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    np.savez(root / "x.npz", x=np.ones(4, np.float32))
    (root / "text.npy").write_text("not an array\n")
    header = np.lib.format  # a header promising 10**12 floats, then nothing
    with open(root / "huge.npy", "wb") as f:
        header.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False,
                                          "shape": (10 ** 12,)})
    (root / "a-file").write_text("a file")
    (root / "existing").mkdir()
    (root / "existing" / "y.npy").write_bytes(b"old y")
    (root / "taken").mkdir()
    (root / "taken" / "y.npy").mkdir()  # a folder where an output goes


SIZES = ["4", "8", "3x5", "0", "", "-1", "4x-1", "x", "4x", "99999999999x99999",
         "2x3x4", "1_0", "4:f64", "4:bf16", "4:i32", "4:bool", "4:bogus", "3x5:f16",
         "10000000000000000000000000"]
NAMES = ["x", "x", "x", "n", "q", "", "y", "x=4"]
PATHS = ["x4.npy", "x3x5.npy", "c.npy", "i8.npy", "obj.npy", "x.npz", "text.npy",
         "huge.npy", "missing.npy", "/dev/null", "existing", "", "/proc/self/mem"]
OUT_DIRS = ["out", "existing", "taken", "a-file", "/proc/zynml-fuzz", "new/deeper/out",
            "a-file/under", "", "."]
OUT_FILES = ["out.mlir", "existing", "a-file", "missing/x.mlir", "/dev/null", "",
             "/proc/zynml-fuzz.mlir"]
DEVICES = ["cpu", "cpu", "auto", "cuda", "cuda:7", "vulkan", "bogus", "", "cpu:1", "CPU"]
NUMBERS = ["1", "0", "-1", "2.5", "1e999", "nan", "x", "", "99999999999999999999999",
           "9" * 5000]
STAGES = ["ast", "cir", "linalg", "vmfb", "gpu", "ptx", "artifact", "bogus", ""]


# which arguments each command takes (others are tried now and then, as mistakes)
TAKES = {"run": ["random", "random", "input", "set", "seed", "device", "backend",
                 "output-dir", "output-dir"],
         "compile": ["random", "input", "set", "device", "backend", "emit", "emit", "o",
                     "o", "save-temps", "target"],
         "tune": ["random", "device", "target", "limit"], "devices": [], "bogus": []}
ALL = sorted({k for kinds in TAKES.values() for k in kinds})


def _argument(rng: random.Random, command: str) -> list[str]:
    kinds = TAKES.get(command) or ALL
    kind = rng.choice(kinds) if rng.random() < 0.9 else rng.choice(ALL + ["junk"])
    if kind == "random":
        return ["--random", f"{rng.choice(NAMES)}={rng.choice(SIZES)}"]
    if kind == "input":
        return ["--input", f"{rng.choice(NAMES)}={rng.choice(PATHS)}"]
    if kind == "set":
        return ["--set", f"{rng.choice(NAMES)}={rng.choice(NUMBERS)}"]
    if kind == "seed":
        return ["--seed", rng.choice(NUMBERS)]
    if kind == "device":
        return ["--device", rng.choice(DEVICES)]
    if kind == "backend":
        return ["--backend", rng.choice(["native", "iree", "iree", "bogus", ""])]
    if kind == "output-dir":
        return ["--output-dir", rng.choice(OUT_DIRS)]
    if kind == "emit":
        return ["--emit", rng.choice(STAGES)]
    if kind == "o":
        return ["-o", rng.choice(OUT_FILES)]
    if kind == "save-temps":
        return ["--save-temps", rng.choice(["temps", "a-file", "/proc/zynml-temps"])]
    if kind == "target":
        return ["--target", rng.choice(["sm_80", "sm_90a", "sm_1", "bogus", ""])]
    if kind == "limit":
        return ["--limit", rng.choice(NUMBERS)]
    return [rng.choice(["--", "-", "--bogus", "-x", "--input", "--random=x=4", "--help"])]


def case(seed: int) -> tuple[list[str], bool]:
    """(argv, whether to run under a file-size limit of 4 KiB) of case `seed`: half of
    them a valid command with an output to write and at most one mistake, so that runs get
    as far as writing; the rest anything."""
    rng = random.Random(seed)
    if rng.random() < 0.5:
        program = rng.choice(["double.zyn", "two.zyn", "softmax.zyn"])
        shape = "3x5" if program == "softmax.zyn" else rng.choice(["4", "2048"])
        argv = [rng.choice(["run", "run", "compile"]), program, "--random", f"x={shape}",
                "--device", "cpu"]
        if argv[0] == "run":
            argv += ["--output-dir", rng.choice(OUT_DIRS)]
        else:
            argv += ["--emit", rng.choice(STAGES[:4]), "-o", rng.choice(OUT_FILES)]
        if rng.random() < 0.5:
            argv += _argument(rng, argv[0])
        return argv, rng.random() < 0.25
    command = rng.choice(["run"] * 6 + ["compile"] * 4 + ["tune", "devices", "bogus"])
    program = rng.choice(list(PROGRAMS) * 3 + ["binary.zyn", "folder.zyn", "missing.zyn"])
    argv = [command] if rng.random() < 0.98 else []
    if command != "devices" and rng.random() < 0.97:
        argv.append(program)
    if command in ("run", "compile", "tune") and rng.random() < 0.85:  # a likely input
        argv += ["--random", "x=3x5" if "soft" in program else rng.choice(["x=4", "x=8"])]
    if command == "run" and rng.random() < 0.5:
        argv += ["--device", "cpu"]  # where there is a GPU too, a run on the CPU
    for _ in range(rng.randrange(0, 4)):
        argv += _argument(rng, command)
    if command == "tune" and rng.random() < 0.3:
        argv += ["--compile-only", "--limit", "1", "--no-progress"]
    return argv, rng.random() < 0.08


def _snapshot(root: Path, exempt: set[str]) -> dict[str, bytes | None]:
    """Every path under root (files with their bytes, folders as None), the ones named
    by --save-temps left out."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel.split(os.sep)[0] in exempt:
            continue
        seen[rel] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.relpath(path, root).split(os.sep)[0] not in exempt:
                seen[os.path.relpath(path, root)] = Path(path).read_bytes() \
                    if os.path.isfile(path) else b"<special>"
    return seen


@contextlib.contextmanager
def _file_size_limit(limited: bool):
    if not limited:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def run_case(seed: int, in_subprocess: bool) -> tuple[int, str]:
    """Run case `seed` in a fresh world; assert the properties; (exit code, stderr)."""
    argv, limited = case(seed)
    root = Path(tempfile.mkdtemp(prefix=f"zynml-cli-fuzz-{seed}-"))
    cwd = os.getcwd()
    try:
        world(root)
        exempt = {argv[i + 1].split("/")[0] for i, a in enumerate(argv[:-1])
                  if a == "--save-temps"}
        before = _snapshot(root, exempt)
        if in_subprocess:
            done = subprocess.run([sys.executable, "-m", "zynml.cli.main", *argv],
                                  capture_output=True, text=True, cwd=root, timeout=600,
                                  preexec_fn=(lambda: resource.setrlimit(
                                      resource.RLIMIT_FSIZE, (4096, 4096))) if limited
                                  else None)
            code, err = done.returncode, done.stderr
        else:
            out_text, err_text = io.StringIO(), io.StringIO()
            os.chdir(root)
            with contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err_text), \
                    _file_size_limit(limited):
                code = cli.main(list(argv))
            err = err_text.getvalue()
        where = f"seed {seed}: zynml {' '.join(argv)}" + (" (ulimit -f 4)" if limited else "")
        assert code in (0, 1), f"{where}: exit {code}\n{err}"
        assert "Traceback (most recent" not in err and ": internal error:" not in err, \
            f"{where}\n{err}"
        if code != 0:
            after = _snapshot(root, exempt)
            assert after == before, f"{where}: files changed on failure: " \
                f"{sorted(set(after) ^ set(before))}\n{err}"
        leftovers = [p for p in root.rglob("*") if p.name.startswith(".zynml-out-")
                     or p.name.startswith(".") and p.name.endswith(".tmp")]
        assert not leftovers, f"{where}: temporary files left: {leftovers}"
        return code, err
    finally:
        os.chdir(cwd)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("chunk", range(4))
def test_mutated_command_lines_exit_0_or_1_and_leave_nothing_behind(chunk):
    seeds = [s for s in range(CASES) if s % 4 == chunk]
    for seed in seeds:
        run_case(seed, in_subprocess=seed % SUBPROCESS_EVERY == SUBPROCESS_EVERY - 1)


if __name__ == "__main__":  # a campaign: python tests/cli/test_cli_fuzz.py FIRST COUNT
    from collections import Counter
    os.environ.setdefault(knobs.CACHE_DIR.name, tempfile.mkdtemp(prefix="zynml-fuzz-cache-"))
    first, count = (int(a) for a in sys.argv[1:3])
    codes, messages = Counter(), Counter()
    failures = []
    for seed in range(first, first + count):
        try:
            code, err = run_case(seed, in_subprocess=seed % SUBPROCESS_EVERY == 0)
        except AssertionError as failure:  # keep going: count them all
            failures.append(seed)
            print(f"FAILED {failure}", flush=True)
            continue
        codes[code] += 1
        last = (err.strip().splitlines() or ["(nothing)"])[-1]
        messages["ok" if code == 0 else last.split(": error: ")[-1][:60]] += 1
    print(f"{count} cases from seed {first}: exit 0: {codes[0]}, exit 1: {codes[1]}, "
          f"failed: {len(failures)} {failures[:20]}")
    for message, n in messages.most_common(40):
        print(f"{n:6d}  {message}")
