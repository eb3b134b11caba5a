"""ArtifactCache: key stability and sensitivity, atomic writes, cache folder selection."""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from zynml import cache as cache_mod
from zynml.cache import ArtifactCache, atomic_write_bytes, default_cache_dir


def files_in(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


# ----------------------------------------------------------------------------- keys


def test_key_is_deterministic_hex():
    assert ArtifactCache.key("module", b"\x00\x01", "--flag") == ArtifactCache.key("module", b"\x00\x01", "--flag")
    key = ArtifactCache.key("a")
    assert len(key) == 64 and all(c in "0123456789abcdef" for c in key)


def test_key_known_value():
    # Spelled out, so the key stays the same across processes and Python versions
    # (no hash(), no pickling); changing the scheme must be deliberate.
    import hashlib
    expected = hashlib.sha256(b"zynml-artifact-cache-v2" + b"s" + (3).to_bytes(8, "little") + b"abc").hexdigest()
    assert ArtifactCache.key("abc") == expected


@pytest.mark.parametrize("a, b", [
    (("ab", "c"), ("a", "bc")),          # part boundaries matter
    (("a", "b"), ("b", "a")),            # order matters
    (("x",), (b"x",)),                   # str and bytes differ
    (("x",), ("x", "")),                 # an empty part still counts
    (("mlir", "--flag=1"), ("mlir", "--flag=2")),
    (("é",), ("e",)),
])
def test_key_is_sensitive_to_every_part(a, b):
    assert ArtifactCache.key(*a) != ArtifactCache.key(*b)


def test_key_rejects_non_bytes_parts():
    with pytest.raises(TypeError):
        ArtifactCache.key("a", 3)


def test_path_rejects_keys_that_could_escape_the_folder(tmp_path):
    cache = ArtifactCache(tmp_path)
    for bad in ["../etc/passwd", "abc", "A" * 64, ""]:
        with pytest.raises(ValueError):
            cache.path(bad)
    key = cache.key("x")
    assert cache.path(key).parent == tmp_path


# ----------------------------------------------------------------------------- get / put


def test_put_then_get_roundtrip(tmp_path):
    cache = ArtifactCache(tmp_path / "nested" / "dir")   # created on first put
    key = cache.key("module text")
    assert cache.get(key) is None
    cache.put(key, b"\x00vmfb bytes\xff")
    assert cache.get(key) == b"\x00vmfb bytes\xff"
    assert cache.path(key).read_bytes().endswith(b"\x00vmfb bytes\xff")  # after a header
    cache.put(key, b"new")
    assert cache.get(key) == b"new"
    assert files_in(cache.root) == [key]   # no temporary files left behind


class _FailingFile:
    """Wraps a real file; writes half of the data, then fails like a full disk."""

    def __init__(self, f, exc):
        self._f, self._exc = f, exc

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._f.close()

    def write(self, data):
        self._f.write(data[: len(data) // 2])
        self._f.flush()
        raise self._exc

    def __getattr__(self, name):
        return getattr(self._f, name)


def test_failed_write_leaves_no_file_and_keeps_old_value(tmp_path, monkeypatch):
    cache = ArtifactCache(tmp_path)
    old_key, new_key = cache.key("old"), cache.key("new")
    cache.put(old_key, b"old complete value")
    real_fdopen = os.fdopen
    monkeypatch.setattr(cache_mod.os, "fdopen",
                        lambda fd, mode: _FailingFile(real_fdopen(fd, mode), OSError(28, "No space left")))
    cache.put(new_key, b"x" * 1000)          # an OSError: swallowed, nothing cached
    cache.put(old_key, b"y" * 1000)          # a failed overwrite keeps the old bytes
    monkeypatch.undo()
    assert cache.get(new_key) is None
    assert cache.get(old_key) == b"old complete value"
    assert files_in(tmp_path) == [old_key]


def test_interrupted_write_cleans_up_and_propagates(tmp_path, monkeypatch):
    target = tmp_path / "out.vmfb"
    real_fdopen = os.fdopen
    monkeypatch.setattr(cache_mod.os, "fdopen",
                        lambda fd, mode: _FailingFile(real_fdopen(fd, mode), KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(target, b"z" * 100)
    assert files_in(tmp_path) == []


def test_failed_rename_leaves_no_temporary_file(tmp_path, monkeypatch):
    def broken_replace(src, dst):
        raise OSError("simulated rename failure")
    monkeypatch.setattr(cache_mod.os, "replace", broken_replace)
    cache = ArtifactCache(tmp_path)
    cache.put(cache.key("a"), b"data")
    assert files_in(tmp_path) == []


def test_concurrent_writers_never_expose_partial_files(tmp_path):
    cache = ArtifactCache(tmp_path)
    key = cache.key("shared")
    payloads = [bytes([i]) * 200_000 for i in range(4)]
    seen: list[bytes] = []
    stop = threading.Event()

    def write(data):
        for _ in range(20):
            cache.put(key, data)

    def read():
        while not stop.is_set():
            got = cache.get(key)
            if got is not None:
                seen.append(got)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()
    assert cache.get(key) in payloads
    assert all(s in payloads for s in seen)
    assert files_in(tmp_path) == [key]


def test_unwritable_cache_folder_disables_caching_silently(tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    cache = ArtifactCache(blocker / "cache")    # cannot mkdir under a regular file
    key = cache.key("k")
    with caplog.at_level(logging.DEBUG, logger="zynml.cache"):
        cache.put(key, b"data")                 # no exception
    assert cache.get(key) is None
    assert any("not caching" in r.getMessage() for r in caplog.records)


# ----------------------------------------------------------------------------- folder


def test_env_override_of_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYNML_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "mine"
    assert ArtifactCache().root == tmp_path / "mine"


def test_xdg_then_home_cache_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("ZYNML_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "zynml"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "zynml"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "zynml"
