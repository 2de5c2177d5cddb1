"""The workers' scratch copies of a run folder, and their removal.

Every worker but worker 0 keeps a copy of what it reads of the run folder (``config.json``,
the snapshots, on ``--resume`` the checkpoint ``latest``) in a folder of its own in the
temporary directory, made by :func:`make` (``tempfile.mkdtemp``: 0700, a fresh name) and
removed when the worker ends. A worker killed with ``kill -9`` cannot remove it, so the folder's
name says which process made it (``buttonup-worker1-NAMESPACE-PID-XXXXXXXX``) and
:func:`sweep` removes the copies whose process is gone: worker 0 sweeps when its workers have
ended, and every run as it starts. It removes only this user's folders of that name, made in
this machine's process namespace, never a link, and never the folder of a process alive.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from training.shared_memory import alive

PREFIX = "buttonup-worker"

_NAME = re.compile(rf"{PREFIX}(\d{{1,7}})-(\d{{1,20}})-(\d{{1,7}})-[A-Za-z0-9_]+")
"""A scratch folder's name: the worker's rank, its PID namespace, its process id (Linux's are
at most 4,194,304), ``mkdtemp``'s random part."""


def _namespace() -> int:
    """The inode of this process's PID namespace (0 where Linux's ``/proc`` does not say):
    a process id means a process only within its namespace."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def make(rank: int, folder: Path | None = None) -> Path:
    """A new scratch folder for worker ``rank``, named after this process, in ``folder``
    (the temporary directory by default)."""
    prefix = f"{PREFIX}{rank}-{_namespace()}-{os.getpid()}-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=folder))


def sweep(folder: str | Path | None = None) -> list[Path]:
    """Remove the scratch folders that workers killed before they could left in ``folder``
    (the temporary directory by default): those of this user, of this PID namespace, whose
    process is gone. Returns the folders removed."""
    folder = Path(folder or tempfile.gettempdir())
    namespace, uid = _namespace(), os.getuid()
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _NAME.fullmatch(entry.name)
        if match is None or int(match[2]) != namespace or int(match[3]) == os.getpid():
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or alive(int(match[3])):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)  # never follows a link inside
        removed.append(Path(entry.path))
    return removed
