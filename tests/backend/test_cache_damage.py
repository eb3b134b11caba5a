"""A damaged artifact cache never fails a run: entries carry a sha256 checked on read; a
truncated, zeroed or garbage entry, a symlink to /dev/zero, a FIFO or a folder is removed
(a logged warning) and compiled again; where there is no compiler to do that, the error
names the entry and says what to do. Found by a hostile-user campaign: a damaged entry
failed every later run ("cannot load the vmfb ... FlatBuffer"), and a symlink to
/dev/zero was read until the process was killed for memory."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml import cache as cache_mod
from zynml import compiler
from zynml.cache import ArtifactCache

DOUBLE = "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n" \
         "        out[i] = x[i] * 2.0\n}\n"
X = np.arange(6, dtype=np.float32)


def entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if len(p.name) == 64)


@pytest.fixture
def filled(tmp_path, monkeypatch) -> Path:
    """A cache folder holding DOUBLE's entries (the artifact and iree-compile's own)."""
    monkeypatch.setenv("ZYNML_CACHE_DIR", str(tmp_path))
    np.testing.assert_array_equal(zynml.run(DOUBLE, x=X, device="cpu")["y"], 2 * X)
    assert len(entries(tmp_path)) == 2
    return tmp_path


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def zero(path: Path) -> None:
    path.write_bytes(bytes(path.stat().st_size))


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def flip_a_payload_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))


def dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def folder(path: Path) -> None:
    path.unlink()
    (path / "inside").mkdir(parents=True)


@pytest.mark.parametrize("damage", [truncate, zero, garbage, flip_a_payload_byte, dev_zero,
                                    fifo, folder])
def test_a_damaged_entry_is_removed_logged_and_compiled_again(filled, damage, caplog,
                                                               monkeypatch):
    for path in entries(filled):
        damage(path)
    compiles = []
    to_cir = compiler.to_cir
    monkeypatch.setattr(compiler, "to_cir", lambda c: compiles.append(1) or to_cir(c))
    with caplog.at_level(logging.WARNING, logger="zynml.cache"):
        np.testing.assert_array_equal(zynml.run(DOUBLE, x=X, device="cpu")["y"], 2 * X)
    assert compiles == [1]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and all(m.startswith("artifact cache: removed the damaged "
                                                   "entry ") for m in messages), messages
    repaired = entries(filled)
    assert len(repaired) == 2 and all(p.is_file() and not p.is_symlink() for p in repaired)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zynml.cache"):  # whole again: no warning
        zynml.run(DOUBLE, x=X, device="cpu")
    assert compiles == [1] and not caplog.records


@pytest.mark.parametrize("damage,why", [
    (truncate, "48 bytes of payload where the header says 800"),
    (zero, "no ZynML cache header"),
    (flip_a_payload_byte, "its content does not match its sha256"),
    (dev_zero, "it is not a regular file"),
    (fifo, "it is not a regular file"),
    (folder, "it is not a regular file"),
])
def test_the_warning_says_what_is_wrong(tmp_path, damage, why, caplog):
    cache = ArtifactCache(tmp_path)
    key = cache.key("k")
    cache.put(key, b"payload " * 100)
    damage(cache.path(key))
    with caplog.at_level(logging.WARNING, logger="zynml.cache"):
        assert cache.get(key) is None
    (record,) = caplog.records
    assert record.getMessage().startswith(f"artifact cache: removed the damaged entry "
                                          f"{cache.path(key)} (")
    assert why in record.getMessage() and why in cache.removed[key]
    assert not os.path.lexists(cache.path(key))
    cache.put(key, b"again")
    assert cache.get(key) == b"again" and key not in cache.removed


def test_an_entry_larger_than_the_bound_is_not_read(tmp_path, monkeypatch):
    cache = ArtifactCache(tmp_path)
    key = cache.key("big")
    cache.put(key, b"x" * 4096)
    monkeypatch.setattr(cache_mod, "MAX_ENTRY_BYTES", 1024)
    read = []
    monkeypatch.setattr(cache_mod, "_read_exactly", lambda fd, n: read.append(n))
    assert cache.get(key) is None and read == []
    assert "larger than 1024 bytes" in cache.removed[key]


def test_a_symlink_to_a_whole_entry_is_followed(tmp_path):
    """A cache of links to another (shared) cache reads; a link to another key's entry
    does not (its hash covers its key)."""
    shared, mine = ArtifactCache(tmp_path / "shared"), ArtifactCache(tmp_path / "mine")
    key, other = shared.key("a"), shared.key("b")
    shared.put(key, b"shared")
    shared.put(other, b"another")
    mine.root.mkdir()
    mine.path(key).symlink_to(shared.path(key))
    assert mine.get(key) == b"shared"
    mine.path(other).symlink_to(shared.path(key))
    assert mine.get(other) is None and "another key's" in mine.removed[other]
    assert shared.get(key) == b"shared"  # the link went, not what it named


def test_without_a_compiler_a_damaged_entry_is_an_error_saying_what_to_do(filled,
                                                                         monkeypatch):
    for path in entries(filled):
        zero(path)
    monkeypatch.setattr(compiler, "installed", lambda: False)
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.run(DOUBLE, x=X, device="cpu")
    text = str(err.value)
    assert text.startswith(f"error: the cached iree artifact {filled}/") and \
        "was damaged (no ZynML cache header) and has been removed, and it cannot be " \
        "compiled again: ZynML's compiler (the MLIR bindings) is not installed here" in text
    assert "into a cache folder carried here (ZYNML_CACHE_DIR" in text


def test_without_a_compiler_a_missing_entry_is_an_error_saying_what_to_do(tmp_path):
    """In a process that cannot import MLIR, as on the GPU machines."""
    code = ("import sys; sys.modules['mlir'] = None\n"
            "import numpy as np, zynml\n"
            "try:\n"
            f"    zynml.run({DOUBLE!r}, x=np.ones(3, np.float32), device='cpu')\n"
            "except zynml.ZynMLError as err:\n"
            "    print(err)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, ZYNML_CACHE_DIR=str(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"error: the iree artifact of this program for these "
                                  f"shapes is not in the artifact cache ({tmp_path}), and "
                                  "ZynML's compiler (the MLIR bindings) is not installed")


def test_a_whole_entry_that_is_no_artifact_is_compiled_again(tmp_path, caplog):
    """The hash holds, the content is not a CUDA artifact (written by a bug, say)."""
    prog = zynml.compile(DOUBLE, device="cuda", require_device=False)
    prog._cache = cache = ArtifactCache(tmp_path)
    first = prog.artifact(x=X)
    (key,) = [p.name for p in entries(tmp_path) if cache.get(p.name)[:2] == b"PK"]
    cache.put(key, b"not a zip")
    with caplog.at_level(logging.WARNING, logger="zynml.cache"):
        assert prog.artifact(x=X).ptx == first.ptx
    (record,) = caplog.records
    assert f"{key} (it is not an artifact: cached artifact: not a readable ZynML CUDA " \
           "artifact (File is not a zip file))" in record.getMessage()
    assert cache.get(key)[:2] == b"PK"  # stored again, whole


def test_the_cli_runs_on_with_a_warning(filled):
    for path in entries(filled):
        garbage(path)
    prog = filled / "double.zyn"
    prog.write_text(DOUBLE)
    done = subprocess.run([sys.executable, "-m", "zynml.cli.main", "run", str(prog),
                           "--device", "cpu", "--random", "x=6"], capture_output=True,
                          text=True, env=dict(os.environ, ZYNML_CACHE_DIR=str(filled)))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("artifact cache: removed the damaged entry") == 2, done.stderr
