"""An on-disk cache of compiled artifacts (vmfb bytes), keyed by a hash of their inputs.

Why: `iree-compile` takes about a second per module, while reading a cached vmfb takes
microseconds. A key is a sha256 over everything that determines the output (the MLIR
text, the compiler's version, the flags), so a stale entry can never be found.

The cache must never make a run fail: if its folder cannot be created or written (a
read-only home, a full disk) it silently stops caching, leaving a `logging` debug
message. Writes are atomic (a temporary file in the same folder, then `os.replace`), so
a reader never sees a half-written artifact, even with several processes writing the
same key at once: the last complete file wins, and all of them hold the same bytes.
"""
from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import stat
import tempfile
from pathlib import Path

from . import knobs

__all__ = ["default_cache_dir", "atomic_write_bytes", "ArtifactCache"]

log = logging.getLogger(__name__)

# Bumped when the layout or the meaning of a key changes, so old entries are ignored.
_KEY_VERSION = b"zynml-artifact-cache-v1"
_KEY_RE = re.compile(r"[0-9a-f]{64}")


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
        """The stored bytes of `key`, or None when absent or unreadable."""
        path = self.path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.debug("artifact cache: cannot read %s: %s", path, e)
            return None

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key` atomically; an unwritable cache only logs (debug)."""
        path = self.path(key)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        except OSError as e:
            log.debug("artifact cache: not caching %s: %s", path, e)
