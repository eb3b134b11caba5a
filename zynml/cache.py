"""An on-disk cache of compiled artifacts (vmfb bytes), keyed by a hash of their inputs.

Why: `iree-compile` takes about a second per module, while reading a cached vmfb takes
microseconds. A key is a sha256 over everything that determines the output (the MLIR
text, the compiler's version, the flags), so a stale entry can never be found.

The cache must never make a run fail: if its folder cannot be created or written (a
read-only home, a full disk) it silently stops caching, leaving a `logging` debug
message. Writes are atomic (a temporary file in the same folder, then `os.replace`), so
a reader never sees a half-written artifact, even with several processes writing the
same key at once: the last complete file wins, and all of them hold the same bytes.

Reads are checked, because a cache folder outlives processes and is carried between
machines (a disk that filled up, a copy cut short, a file zeroed by a crash, a hand
edit). Each entry starts with a header,

    b"ZYNMLART" | version: u32 | payload length: u64 | sha256(key + payload) (32 bytes)

all little-endian, and only a regular file (a symlink is followed only to one) whose size
is the header's and whose payload hashes right is read, never more than MAX_ENTRY_BYTES.
The hash covers the key too: a whole entry copied or renamed to another key's name is
not that key's artifact (found by tests/backend/test_cache_fuzz.py: IREE then refused
another key's bytes as a vmfb, on every run).
Anything else is a damaged entry: it is removed, with a `logging` warning, and reads as
missing, so the artifact is compiled again and stored whole; `removed` remembers why,
for a machine that has no compiler to say so (zynml/compiler.py's `build`).
"""
from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import shutil
import stat
import struct
import tempfile
from pathlib import Path

from . import knobs

__all__ = ["default_cache_dir", "atomic_write_bytes", "ArtifactCache", "MAX_ENTRY_BYTES"]

log = logging.getLogger(__name__)

# Bumped when the layout or the meaning of a key changes, so old entries are ignored.
# v2: entries have a header (v1 files, bare payloads, are never looked up).
_KEY_VERSION = b"zynml-artifact-cache-v2"
_KEY_RE = re.compile(r"[0-9a-f]{64}")
_MAGIC, _FORMAT = b"ZYNMLART", 2  # 2: the digest covers the key
_HEADER = struct.Struct("<8sIQ32s")  # magic, format version, payload length, sha256
# Larger than any artifact ZynML writes (the largest, with constants, are some MiB): a
# bigger file is not an entry, and is not read into memory to find that out.
MAX_ENTRY_BYTES = 2 ** 32


def default_cache_dir() -> Path:
    """`$ZYNML_CACHE_DIR`, else `$XDG_CACHE_HOME/zynml`, else `~/.cache/zynml`."""
    override = knobs.CACHE_DIR.get()
    if override is not None:
        return override
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec says a relative $XDG_CACHE_HOME is invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "zynml"


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = False,
                       follow: bool = True) -> None:
    """Write `data` to `path` so that `path` holds either its old content or all of `data`.

    The bytes go to a temporary file in the same folder (same file system, so the
    rename is atomic) that `os.replace` moves over `path`; on any failure, the
    temporary file is removed and the exception propagates. `fsync=True` also survives
    a power cut, at the price of a disk flush.

    With `follow` (the default: a user's output file), a symlink is followed, so the file
    it names gets the new content, and a path that is no regular file (/dev/null,
    /dev/stdout, a FIFO) is written in place, as a shell's `>` does: a rename would
    replace the device node itself (as root, /dev/null would become a file). The cache
    passes follow=False: its entries are replaced whatever they are.
    """
    path = Path(path)
    if follow:
        try:
            mode = os.stat(path).st_mode  # follows links, /proc's (/dev/stdout) included
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if mode is not None and not stat.S_ISREG(mode):
            with open(path, "wb") as f:
                f.write(data)
            return
        path = Path(os.path.realpath(path))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        umask = os.umask(0)  # mkstemp makes 0600; give the file the mode open() would
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class ArtifactCache:
    """Bytes stored under content-derived keys in one folder (`root`, default `default_cache_dir()`)."""

    def __init__(self, root: str | os.PathLike[str] | None = None):
        self.root = Path(root) if root is not None else default_cache_dir()
        self.removed: dict[str, str] = {}  # key -> why its damaged entry was removed
        self.hits = 0  # entries `get` returned (Program.stats() counts disk hits by it)

    def __repr__(self) -> str:
        return f"ArtifactCache({str(self.root)!r})"

    @staticmethod
    def key(*parts: str | bytes) -> str:
        """The sha256 hex digest of `parts`, each length-prefixed and type-tagged.

        Length prefixes keep ("ab", "c") and ("a", "bc") apart; the tag keeps the
        str "x" and the bytes b"x" apart.
        """
        h = hashlib.sha256(_KEY_VERSION)
        for part in parts:
            if isinstance(part, str):
                tag, data = b"s", part.encode("utf-8")
            elif isinstance(part, (bytes, bytearray, memoryview)):
                tag, data = b"b", bytes(part)
            else:
                raise TypeError(f"cache key parts must be str or bytes, not {type(part).__name__}")
            h.update(tag + len(data).to_bytes(8, "little") + data)
        return h.hexdigest()

    def path(self, key: str) -> Path:
        """Where the artifact of `key` lives (whether or not it exists)."""
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            # Keys come from `key()`; anything else could escape the folder ('../x').
            raise ValueError(f"not a cache key (64 lowercase hex digits): {key!r}")
        return self.root / key

    def get(self, key: str) -> bytes | None:
        """The stored bytes of `key`, or None when absent, unreadable or damaged (then
        removed: see the module's docstring)."""
        path = self.path(key)
        try:
            # O_NONBLOCK: opening a FIFO does not wait for a writer; fstat then refuses it
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return None
        except OSError as e:
            if os.path.isdir(path) and not os.path.islink(path):
                return self.discard(key, "it is a folder")
            log.debug("artifact cache: cannot read %s: %s", path, e)
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return self.discard(key, "it is not a regular file")
            if info.st_size > MAX_ENTRY_BYTES:
                return self.discard(key, f"it is larger than {MAX_ENTRY_BYTES} bytes")
            blob = _read_exactly(fd, info.st_size)
        except OSError as e:
            log.debug("artifact cache: cannot read %s: %s", path, e)
            return None
        finally:
            os.close(fd)
        payload, why = _unpack(key, blob)
        if payload is None:
            return self.discard(key, why)
        self.hits += 1
        return payload

    def discard(self, key: str, why: str) -> None:
        """Remove the damaged entry of `key` (so that it is compiled and stored again),
        say so, and remember why. Returns None: what `get` returns for it."""
        path = self.path(key)
        log.warning("artifact cache: removed the damaged entry %s (%s); it is compiled "
                    "again when needed", path, why)
        self.removed[key] = why
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError as e:
            log.debug("artifact cache: cannot remove %s: %s", path, e)
        return None

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key` atomically; an unwritable cache only logs (debug)."""
        path = self.path(key)
        header = _HEADER.pack(_MAGIC, _FORMAT, len(data), _digest(key, data))
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            # follow=False: the entry itself is replaced, whatever (damaged) thing it is
            atomic_write_bytes(path, header + bytes(data), follow=False)
        except OSError as e:
            log.debug("artifact cache: not caching %s: %s", path, e)
        else:
            self.removed.pop(key, None)


def _read_exactly(fd: int, size: int) -> bytes:
    """`size` bytes of `fd` (what fstat said): a file that grows meanwhile is not read on."""
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _digest(key: str, payload: bytes) -> bytes:
    return hashlib.sha256(key.encode("ascii") + payload).digest()


def _unpack(key: str, blob: bytes) -> tuple[bytes | None, str]:
    """(the payload, "") of `key`'s entry's bytes, or (None, what is wrong with them)."""
    if len(blob) < _HEADER.size:
        return None, f"{len(blob)} bytes, shorter than its header"
    magic, version, length, digest = _HEADER.unpack_from(blob)
    if magic != _MAGIC:
        return None, "no ZynML cache header"
    if version != _FORMAT:
        return None, f"format version {version}, this ZynML reads {_FORMAT}"
    payload = blob[_HEADER.size:]
    if len(payload) != length:
        return None, f"{len(payload)} bytes of payload where the header says {length}"
    if _digest(key, payload) != digest:
        return None, "its content does not match its sha256 (or it is another key's)"
    return payload, ""
