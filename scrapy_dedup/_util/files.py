"""Atomic file replacement and the clean-up of what an interrupted one leaves (no Scrapy imports).

Every checkpoint of the project (the Bloom filter, the content index, the
frontier journal's compaction) is written through :func:`atomic_write`: a
temporary file next to the target, fsynced, renamed over it, the directory
fsynced; a crash leaves either the old or the new file. The temporary file's
name says which process wrote it (``<name>.tmp-<pid>-<random>``), so that a
later start can delete those of processes that are gone
(:func:`remove_stale_temporaries`): a kill during a checkpoint otherwise
leaves a file as large as the filter behind, forever.
"""
from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import IO, Callable

_TEMPORARY = re.compile(r"^(?P<name>.+)\.tmp-(?P<pid>\d+)-[A-Za-z0-9_]+$")


def set_aside(path: Path) -> Path:
    """Rename an unreadable checkpoint to ``<name>.corrupt-<time>`` (kept for inspection: the next checkpoint
    must not overwrite it); the new path, or ``path`` itself when it cannot be renamed."""
    kept = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    try:
        os.replace(path, kept)
    except OSError:
        return path
    return kept


def where_kept(path: Path, kept: Path) -> str:
    """What became of the bad file ``path`` that :func:`set_aside` returned ``kept`` for, for the log line."""
    if kept != path:
        return f"the bad file is kept as {kept}"
    return (f"the bad file cannot be renamed (a read-only directory?): it stays as {path}, which the next "
            "checkpoint replaces")


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], object]) -> None:
    """Write ``path`` through ``write(fileobj)``: temporary file, fsync, rename over ``path``, fsync the directory."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f"{os.path.basename(path)}.tmp-{os.getpid()}-", dir=directory)
    try:
        # mkstemp creates 0600; give the file the mode an ordinary open() would (the user's umask)
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_directory(directory)


def fsync_directory(directory: str | os.PathLike) -> None:
    """Make a rename in ``directory`` durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except OSError:
        return False
    return True


def remove_stale_temporaries(directory: str | os.PathLike, names: tuple[str, ...] | None = None) -> list[Path]:
    """Delete the temporary files of interrupted :func:`atomic_write` calls whose process is gone.

    ``names`` limits it to temporaries of those target file names. Returns the
    paths removed. A file of a live process (a checkpoint being written now) is
    left alone; so is anything that does not match the temporary-name pattern.
    """
    removed: list[Path] = []
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _TEMPORARY.match(entry.name)
        if match is None or (names is not None and match["name"] not in names):
            continue
        if _alive(int(match["pid"])):
            continue
        try:
            entry.unlink()
        except OSError:
            continue
        removed.append(entry)
    return removed
