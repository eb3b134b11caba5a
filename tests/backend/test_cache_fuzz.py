"""Fuzzing the artifact cache with damaged entries.

An entry is stored, then damaged the way disks, copies and people damage files: cut at
any byte, bytes flipped, appended or zeroed, its header's fields changed, replaced by
random bytes of any length, a symlink (to a device, a folder, nowhere, another entry), a
FIFO, a folder, an unreadable file. `get` must then return the exact bytes stored or None
(never other bytes, never an exception, never a hang on a FIFO or /dev/zero), and a None
must leave the key free for `put`, which must work again. The autotuning database, which
lives in the same folder, gets the same treatment (it must read as empty, with a note).
A few end-to-end cases corrupt a real program's entries and run it: the result must be
right every time.

Plain seeded mutation (case `seed` is made again by `damage(seed, ...)`); ZYNML_FUZZ_SCALE=N
runs N times as many cases.
"""
from __future__ import annotations

import os
import random
import struct
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml import knobs
from zynml.autotune.database import Entry, TuningDatabase, params_text
from zynml.cache import ArtifactCache

SCALE = knobs.FUZZ_SCALE.get()
CASES = max(1, int(3000 * SCALE))
RUNS = max(1, int(6 * SCALE))
HEADER = 52  # magic 8, version 4, length 8, sha256 32


def damage(seed: int, path: Path, payload: bytes) -> str:
    """Damage the entry at `path` (whose payload is `payload`) as case `seed` says; return
    what was done, for the failure message."""
    rng = random.Random(seed)
    data = path.read_bytes()
    kind = rng.choice(["cut", "flip", "append", "zero", "header", "garbage", "empty",
                       "symlink", "fifo", "folder", "unreadable", "swap", "same"])
    if kind == "cut":
        at = rng.randrange(len(data))
        path.write_bytes(data[:at])
        return f"cut at {at}"
    if kind == "flip":
        data = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        return "bits flipped"
    if kind == "append":
        path.write_bytes(data + os.urandom(rng.randint(1, 64)))
        return "bytes appended"
    if kind == "zero":
        start = rng.randrange(len(data))
        count = rng.randint(1, len(data) - start)
        path.write_bytes(data[:start] + bytes(count) + data[start + count:])
        return f"{count} bytes zeroed from {start}"
    if kind == "header":
        field = rng.choice(["magic", "version", "length", "digest"])
        fmt = {"magic": (0, "8s", os.urandom(8)), "version": (8, "<I", rng.randrange(2 ** 32)),
               "length": (12, "<Q", rng.choice([0, len(payload) + 1, max(0, len(payload) - 1),
                                                2 ** 63, rng.randrange(2 ** 64)])),
               "digest": (20, "32s", os.urandom(32))}[field]
        data = bytearray(data)
        struct.pack_into(fmt[1], data, fmt[0], fmt[2])
        path.write_bytes(bytes(data))
        return f"header {field} changed"
    if kind == "garbage":
        path.write_bytes(os.urandom(rng.randint(0, 2 * len(data))))
        return "garbage"
    if kind == "empty":
        path.write_bytes(b"")
        return "empty"
    if kind == "symlink":
        target = rng.choice(["/dev/zero", "/dev/null", "/dev/urandom", "/", "/nowhere",
                             str(path.parent)])
        path.unlink()
        path.symlink_to(target)
        return f"symlink to {target}"
    if kind == "fifo":
        path.unlink()
        os.mkfifo(path)
        return "fifo"
    if kind == "folder":
        path.unlink()
        path.mkdir()
        (path / "inside").write_bytes(data)
        return "folder"
    if kind == "unreadable":
        path.chmod(0)  # root reads it anyway: then it must read whole
        return "mode 000"
    if kind == "swap":  # a whole entry of another key: its bytes are whole, not ours
        other = ArtifactCache(path.parent)
        key = other.key("another", str(seed))
        other.put(key, b"another payload")
        os.replace(other.path(key), path)
        return "another key's entry"
    return "left as it was"


@pytest.mark.parametrize("chunk", range(4))
def test_a_damaged_entry_reads_whole_or_not_at_all(chunk):
    with tempfile.TemporaryDirectory(prefix="zynml-cache-fuzz-") as folder:
        cache = ArtifactCache(folder)
        for seed in range(chunk, CASES, 4):
            rng = random.Random(-seed)
            key = cache.key("fuzz", str(seed))
            payload = os.urandom(rng.choice([0, 1, 31, 52, 1000, 70000]))
            cache.put(key, payload)
            what = damage(seed, cache.path(key), payload)
            got = cache.get(key)
            where = f"seed {seed}: {what}"
            # only a whole entry of this key reads (not another key's whole entry)
            assert got in (None, payload), where
            if got is None:
                assert not os.path.lexists(cache.path(key)) or \
                    not os.access(cache.path(key), os.R_OK), where
            cache.put(key, payload)  # works again, whatever was there
            assert cache.get(key) == payload, where
            _clean(cache.path(key))


def _clean(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for inner in path.iterdir():
            inner.unlink()
        path.rmdir()
    elif os.path.lexists(path):
        path.unlink()


def test_a_damaged_tuning_database_reads_as_a_database_or_not_at_all(tmp_path):
    database = TuningDatabase(tmp_path / "autotune.json")
    entry = Entry("sm_90a", "c" * 64, "pointwise", "4096f32_4096f32", {"vectors": 2}, 1.0,
                  2.0, "2026-11-25T00:00:00+00:00")
    for seed in range(max(1, int(300 * SCALE))):
        database.record([entry])
        what = damage(seed, database.path, b"")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            entries = database.entries()
        # a flipped byte inside a string is still a database (it has no checksum: it is
        # meant to be read and edited); it must be one of the right kinds of values
        assert len(entries) <= 1, f"seed {seed}: {what}"
        for found in entries:
            assert isinstance(found.params, dict) and isinstance(found.chip, str) and \
                isinstance(found.ms, (int, float)), f"seed {seed}: {what}"
            params_text(database.entries_for(found.chip, found.compiler))  # no error
        _clean(database.path)


DOUBLE = "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n" \
         "        out[i] = x[i] * 2.0\n}\n"


def test_programs_run_right_on_a_damaged_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(knobs.CACHE_DIR.name, str(tmp_path))
    x = np.arange(5, dtype=np.float32)
    for seed in range(RUNS):
        for path in sorted(p for p in tmp_path.iterdir() if len(p.name) == 64):
            if path.is_file() and not path.is_symlink():
                damage(seed * 7919 + int(path.name[:6], 16), path, b"")
        np.testing.assert_array_equal(zynml.run(DOUBLE, x=x, device="cpu")["y"], 2 * x,
                                      err_msg=f"seed {seed}")
