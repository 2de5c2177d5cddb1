"""Writing and reading files so that a reader never sees half of one, and a symbolic link
planted where a file goes never redirects the write or the read.

Every file the package writes (a policy, a model card, a checkpoint, game records, a picture)
is written by :func:`write_atomically`: into a temporary file that ``tempfile.mkstemp`` makes
in the target's own folder (a fresh random name, created with ``O_EXCL`` and ``O_NOFOLLOW``,
so nothing planted there is written through), then renamed onto the target. A reader sees
the old file or the new one, never a partial one, and a symbolic link at the target is
replaced, never followed. :func:`append_text` and :func:`read_regular_file` open with
``O_NOFOLLOW`` (where the platform has it) and check that what they opened is a regular
file. Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""``os.O_NOFOLLOW`` where the platform has it: opening a symbolic link fails (``ELOOP``)."""


def reason(error: OSError) -> str:
    """Why an ``OSError`` happened, in a few words (``No such file or directory``)."""
    return error.strerror or str(error) or type(error).__name__


def _umask() -> int:
    """The process's umask (read once, at import, before any thread could make files)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()
"""The permissions of a file written here: those ``open()`` would give it (``mkstemp`` makes
its files readable by their owner only)."""


def write_atomically(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, renamed onto it.

    The folder must exist (``FileNotFoundError`` otherwise: no folder is made). Raises
    ``OSError`` when the file cannot be written; the temporary file is then removed.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            if hasattr(os, "fchmod"):
                os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _open_regular(path: Path, flags: int) -> int:
    """A descriptor of ``path`` opened with ``flags`` and ``O_NOFOLLOW`` (without waiting on a
    pipe), when it is a regular file; ``OSError`` otherwise (``ELOOP`` for a link)."""
    fd = os.open(path, flags | NOFOLLOW | getattr(os, "O_NONBLOCK", 0), 0o666)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a folder" if stat.S_ISDIR(mode) else "a device, a pipe or a socket"
            raise OSError(errno.EINVAL, f"not a regular file ({what})", os.fspath(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def append_text(path: str | os.PathLike[str], text: str) -> None:
    """Append ``text`` (UTF-8) to the regular file ``path``, made if missing; a symbolic link
    there is not followed (``OSError``)."""
    fd = _open_regular(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "ab") as handle:
        handle.write(text.encode("utf-8"))


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; ``OSError`` for a
    symbolic link, a device, a pipe or a folder, and for a longer file (``EFBIG``)."""
    fd = _open_regular(Path(path), os.O_RDONLY | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", os.fspath(path))
    return data
