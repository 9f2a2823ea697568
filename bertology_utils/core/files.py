"""Files and folders written whole or not at all: built under a temporary name beside the target, then renamed.

A process stopped half way (Ctrl-C, SIGTERM, SIGKILL, a full disk) leaves the target as it
was, or absent, never half written: a rename within one folder is atomic. What such a
process leaves behind is named ``.<target name>.<host>-<pid>.<random>.partial``, a name no
reader asks for; the next write of the same target removes it once that process is gone
(:func:`remove_leftovers`).

* :func:`atomic_path`: a temporary file or folder to fill, renamed into place when the block
  ends and removed when it raises (KeyboardInterrupt and SystemExit included);
* :func:`scratch_path`: a temporary file or folder beside a target, always removed;
* :func:`atomic_write_text`, :func:`atomic_write_bytes`: one file's content, whole;
* :func:`atomic_remove`: a file or folder gone at once, not file by file.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "PARTIAL_SUFFIX",
    "is_partial",
    "remove_leftovers",
    "atomic_path",
    "scratch_path",
    "atomic_remove",
    "atomic_write_text",
    "atomic_write_bytes",
]

#: The end of the name of a file or folder still being written (or left by a process that died writing it).
PARTIAL_SUFFIX = ".partial"

# host and pid: a leftover is removed only by a process that can tell its writer is gone
_HOST = re.sub(r"[^A-Za-z0-9_-]+", "_", socket.gethostname()) or "host"


def is_partial(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a file or folder still being written, or left by a writer that died."""
    name = Path(path).name
    return name.startswith(".") and name.endswith(PARTIAL_SUFFIX)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_leftovers(target: str | os.PathLike) -> list[Path]:
    """Remove what writes of ``target`` left behind in processes of this host that have ended; return it."""
    target = Path(target)
    leftover = re.compile(
        rf"\.{re.escape(target.name)}\.{re.escape(_HOST)}-(\d+)\.[0-9a-f]+{re.escape(PARTIAL_SUFFIX)}"
    )
    try:
        names = os.listdir(target.parent)
    except OSError:
        return []
    removed = []
    for name in names:
        match = leftover.fullmatch(name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            _remove(target.parent / name)
            removed.append(target.parent / name)
    return removed


@contextlib.contextmanager
def scratch_path(target: str | os.PathLike, *, folder: bool = False) -> Iterator[Path]:
    """A temporary path beside ``target`` (with ``folder``, an empty folder made for you), removed when the
    block ends, however it ends; named as a leftover of ``target``, so the next write of it removes it."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(target)
    partial = target.with_name(f".{target.name}.{_HOST}-{os.getpid()}.{uuid.uuid4().hex[:12]}{PARTIAL_SUFFIX}")
    if folder:
        partial.mkdir()
    try:
        yield partial
    finally:
        _remove(partial)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike, *, folder: bool = False) -> Iterator[Path]:
    """A temporary path beside ``target`` to fill with a file or a folder (with ``folder``, an empty folder made
    for you).

    When the block ends it replaces ``target``; when the block raises it is removed and ``target``
    stays as it was. A folder cannot be renamed over another, so an old ``target`` folder is moved
    aside first: for a moment ``target`` is absent, never half there.
    """
    target = Path(target)
    with scratch_path(target, folder=folder) as partial:
        yield partial
        if partial.is_dir() and target.exists():
            with scratch_path(target) as old:
                os.replace(target, old)
                os.replace(partial, target)
        else:
            os.replace(partial, target)


def atomic_remove(path: str | os.PathLike) -> None:
    """Remove the file or folder ``path`` at once: renamed aside, then deleted, so no reader meets half of it."""
    with scratch_path(path) as aside, contextlib.suppress(FileNotFoundError):
        os.replace(path, aside)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` whole: a reader sees the old content or the new, never part of it."""
    with atomic_path(path) as partial:
        partial.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """:func:`atomic_write_bytes` for text, in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))
