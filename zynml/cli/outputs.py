"""Writing a command's output files all or nothing.

`zynml run --output-dir DIR` writes one file per output. Written one by one, a failure
at the k-th (a full disk, a file-size limit, a folder in the way) would leave outputs
1..k-1 behind, which a script could take for a run's results. So every file is written
first into a new temporary folder on the same file system as DIR, then moved into place:

* DIR does not exist: the temporary folder is made beside it and renamed to DIR, one
  atomic step (missing parents of DIR are made then, and removed again on failure);
* DIR exists: the temporary folder is made inside it and each file renamed into DIR;
  should a rename fail, those already moved are moved back (a file they replaced is
  kept, as a hard link or a copy, until the end, and restored).

On failure nothing new remains and files already there keep their content; the error
is a UsageError naming the path and the reason (exit 1).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..cache import atomic_write_bytes
from .common import FileSystemError

__all__ = ["write_all", "write_file", "check_output_dir", "check_output_file"]

_PREFIX = ".zynml-out-"


def _why(err: OSError) -> str:
    return err.strerror or str(err)


def check_output_dir(path: Path) -> None:
    """Before any work: a path that can never be an output folder is a usage error."""
    if path.exists() and not path.is_dir():
        raise FileSystemError(f"--output-dir '{path}' is a file, not a folder")
    ancestor = _existing_ancestor(path)
    if not ancestor.is_dir():
        raise FileSystemError(f"--output-dir '{path}': '{ancestor}' is a file, not a folder")


def check_output_file(path: Path, flag: str = "-o") -> None:
    """Before any work: an output file named by a folder, or in no folder."""
    if path.is_dir():
        raise FileSystemError(f"{flag} '{path}' is a folder; give the name of a file")
    if not path.parent.is_dir():
        raise FileSystemError(f"{flag} '{path}': the folder '{path.parent}' does not exist")


def write_file(path: Path, data: bytes, flag: str = "-o") -> None:
    """One file, atomically (the old content or all of the new): errors are usage errors."""
    check_output_file(path, flag)
    try:
        atomic_write_bytes(path, data)
    except OSError as err:
        raise FileSystemError(f"cannot write {flag} '{path}': {_why(err)}") from None


def write_all(out_dir: Path, files: dict[str, bytes]) -> None:
    """Write `files` (name -> bytes) into `out_dir`, all of them or none."""
    check_output_dir(out_dir)
    try:
        if out_dir.is_dir():
            _into_existing(out_dir, files)
        else:
            _as_new_folder(out_dir, files)
    except OSError as err:
        raise FileSystemError(f"cannot write the outputs into '{out_dir}': {_why(err)}; "
                         "nothing was written") from None


def _existing_ancestor(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _fill(folder: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        with open(os.path.join(folder, name), "xb") as f:
            f.write(data)
            f.flush()
    umask = os.umask(0)  # mkdtemp makes 0700: the folder gets the mode mkdir would give
    os.umask(umask)
    os.chmod(folder, 0o777 & ~umask)


def _as_new_folder(out_dir: Path, files: dict[str, bytes]) -> None:
    ancestor = _existing_ancestor(out_dir)
    tmp = tempfile.mkdtemp(prefix=_PREFIX, dir=ancestor)
    made: list[Path] = []
    try:
        _fill(tmp, files)
        missing = []
        parent = Path(os.path.abspath(out_dir)).parent
        while parent != ancestor and not parent.exists():
            missing.append(parent)
            parent = parent.parent
        for folder in reversed(missing):
            folder.mkdir()
            made.append(folder)
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass
        raise


def _into_existing(out_dir: Path, files: dict[str, bytes]) -> None:
    tmp = tempfile.mkdtemp(prefix=_PREFIX, dir=out_dir)
    moved: list[tuple[str, str | None]] = []  # (name, its old file's backup or None)
    try:
        _fill(tmp, files)
        for name in files:
            target = os.path.join(out_dir, name)
            backup = None
            if os.path.lexists(target) and not os.path.isdir(target):
                backup = os.path.join(tmp, f".old-{name}")
                try:
                    os.link(target, backup, follow_symlinks=False)
                except OSError:  # no hard links on this file system: a copy
                    shutil.copy2(target, backup, follow_symlinks=False)
            os.replace(os.path.join(tmp, name), target)
            moved.append((name, backup))
    except BaseException:
        for name, backup in reversed(moved):
            target = os.path.join(out_dir, name)
            try:
                if backup is not None:
                    os.replace(backup, target)
                else:
                    os.unlink(target)
            except OSError:
                pass
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
