"""A folder whose contents someone else may have made (a training run someone sent you): every
read and write inside it stays inside it.

A :class:`SafeFolder` holds files and folders only. :meth:`SafeFolder.check_tree` refuses one
when anything in it, at any depth, is a symbolic link, a device, a pipe or a socket (the folder
itself may be a link when it is the path the user named). Every file is then read and written
through a checked path (:meth:`SafeFolder.check`: ``lstat`` of each part below the folder, no
link, the folders folders) and opened with ``O_NOFOLLOW``; every write goes through a
temporary file that ``tempfile.mkstemp`` makes beside the target (never a fixed name that
could be planted), renamed onto it (:mod:`buttonup_env.game.files`). Whatever is refused
raises the folder's :attr:`~SafeFolder.error`, a :class:`FolderError` in one sentence naming
the path. Standard library only.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from .files import append_text, read_regular_file, reason, write_atomically


class FolderError(ValueError):
    """A folder, or a file in it, that cannot be read or written safely; the message is one
    sentence naming the path."""


@dataclass(frozen=True)
class SafeFolder:
    """The folder ``path``, read and written only through checked paths (see the module)."""

    path: Path
    error: ClassVar[type[FolderError]] = FolderError
    """What this folder raises (a subclass raises its own kind)."""
    kind: ClassVar[str] = "a safe folder"
    """What the messages call the folder."""

    def _link(self, path: Path | str) -> FolderError:
        return self.error(
            f"{path} is a symbolic link; {self.kind} holds none (a link could lead a read or a "
            "write outside the folder)"
        )

    def _not_regular(self, path: Path | str) -> FolderError:
        return self.error(
            f"{path} is not a regular file (a device, a pipe or a socket); {self.kind} holds "
            "files and folders only"
        )

    def check(self, path: Path, kind: Literal["file", "folder"] = "file") -> Path:
        """``path``, inside the folder, once every part of it below the folder is checked with
        ``lstat``: none is a symbolic link, each one on the way is a folder, and the last one,
        if it exists, is a regular file (``kind="folder"``: a folder)."""
        parts = path.relative_to(self.path).parts
        current = self.path
        for index, part in enumerate(parts):
            current = current / part
            try:
                mode = os.lstat(current).st_mode
            except FileNotFoundError:
                return path
            except OSError as error:
                raise self.error(f"{current} cannot be read ({reason(error)})") from None
            if stat.S_ISLNK(mode):
                raise self._link(current)
            if index < len(parts) - 1 or kind == "folder":
                if not stat.S_ISDIR(mode):
                    raise self.error(f"{current} is not a folder; {self.kind}'s {part} is one")
            elif not stat.S_ISREG(mode):
                raise self._not_regular(current)
        return path

    def check_tree(self, named: bool = True) -> None:
        """Refuse the folder when anything in it, at any depth, is a symbolic link or neither
        a file nor a folder; and, unless ``named`` (the path the user gave), when the folder
        itself is a link. Code that is not this package's writes in a folder too (TensorBoard
        in a run's ``tb/``): none of it can then be led outside."""
        if not named and os.path.islink(self.path):
            raise self._link(self.path)
        folders = [self.path]
        while folders:
            folder = folders.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        if entry.is_symlink():
                            raise self._link(entry.path)
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(Path(entry.path))
                        elif not entry.is_file(follow_symlinks=False):
                            raise self._not_regular(entry.path)
            except OSError as error:
                raise self.error(f"{folder} cannot be read ({reason(error)})") from None

    def write(self, path: Path, data: bytes) -> Path:
        """Write ``data`` to ``path`` in the folder: the path checked, the file written
        atomically through a temporary file made by ``tempfile.mkstemp`` beside it."""
        self.check(path)
        try:
            return write_atomically(path, data)
        except OSError as error:
            raise self.error(f"cannot write {path} ({reason(error)})") from None

    def append(self, path: Path, text: str) -> None:
        """Add ``text`` to ``path`` in the folder (opened with ``O_NOFOLLOW``, a regular file,
        made if missing)."""
        self.check(path)
        try:
            append_text(path, text)
        except OSError as error:
            raise self.error(f"cannot write {path} ({reason(error)})") from None

    def read(self, path: Path, limit: int) -> bytes:
        """The bytes of ``path`` in the folder (at most ``limit``): the path checked, the file
        opened with ``O_NOFOLLOW`` and read only if it is a regular file."""
        self.check(path)
        try:
            return read_regular_file(path, limit)
        except OSError as error:
            raise self.error(f"{path} cannot be read ({reason(error)})") from None

    def folder(self, name: str) -> Path:
        """The folder ``name`` in this one, checked, made if missing."""
        path = self.check(self.path / name, "folder")
        try:
            path.mkdir(exist_ok=True)
        except OSError as error:
            raise self.error(f"{path} cannot be made ({reason(error)})") from None
        return path
