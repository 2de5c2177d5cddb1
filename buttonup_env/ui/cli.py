"""What the command-line tools share: their argument types, how they parse, fail and exit.

``buttonup-play``, ``buttonup-replay``, ``buttonup-web``, ``python -m buttonup_env.animate``
and the scripts of ``training/`` use these, so that a bad argument gets the same kind of one
sentence and exit status 2 everywhere, and a reader that goes away (``... | head``) ends a
tool quietly.

The standard streams are checked the same way everywhere: a tool whose standard input or
output is closed (``<&-``, ``>&-``), or whose output cannot be written (``> /dev/full``: no
space left), says so in one sentence on standard error and exits with status 2
(:class:`Checked`, :func:`report`), rather than with a traceback or, on a closed output,
silently.

The files a command writes are checked the same way everywhere too (:func:`check_outputs`,
before any work): an output that is one of the command's inputs, or another of its outputs,
is refused; an existing file is kept unless ``--force`` is given; no folder is made for an
output but the one the user named; and a file that cannot be written is one sentence
(:func:`write_output`, :func:`make_output_folder`), never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from ..game.files import reason, write_atomically


def whole_number(minimum: int, what: str, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``minimum`` to ``maximum`` (None: no upper
    bound), else one sentence saying so (``'x' is not a whole number``, ``0 is not a target:
    use a whole number from 1 to 1000``); ``what`` names the argument in that sentence."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            shown = repr(text) if len(text) <= 40 else repr(text[:37] + "...")
            raise argparse.ArgumentTypeError(f"{shown} is not a whole number") from None
        if value < minimum or (maximum is not None and value > maximum):
            span = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
            shown = str(value) if len(text) <= 40 else "a number that large"
            raise argparse.ArgumentTypeError(f"{shown} is not a {what}: use a whole number {span}")
        return value

    return parse


def parse_arguments(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    stdout: TextIO | Checked,
    stderr: TextIO | Checked | None,
) -> argparse.Namespace | int:
    """``parser``'s arguments, or the exit status when argparse has answered itself (``--help``
    printed to ``stdout``, a usage error to ``stderr``: status 2)."""
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            return parser.parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2


def fail(message: str) -> NoReturn:
    """Exit with status 2 and ``error: MESSAGE`` on stderr (a script's answer to a bad
    argument or a file it cannot use)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def silence_stdout() -> None:
    """Point standard output at the null device, so that the interpreter's last flush at exit
    does not fail a second time once the reader of the output has gone (``... | head``)."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def run_cli(main: Callable[[], Any]) -> NoReturn:
    """Run a script's ``main()`` and exit with its status (an int; anything else is 0).

    If the reader of the output went away, as ``python training/evaluate.py ... | head -3``
    does, the script stops there with status 1 and no traceback, as ``cat`` or ``grep``
    would."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        status = 1
    raise SystemExit(status if isinstance(status, int) else 0)


class StreamError(Exception):
    """A standard stream is closed, or reading or writing it failed; the message is one
    sentence (``standard output is closed``, ``cannot write to standard output (No space left
    on device)``)."""


class Checked:
    """A standard stream whose failures are :class:`StreamError` naming it.

    ``name`` is how the sentence names it (``standard output``). A closed stream (``None``,
    what Python makes of a closed file descriptor 0, 1 or 2) raises at once. A
    ``BrokenPipeError`` passes through unchanged: the reader went away, which the tools answer
    quietly (:func:`run_cli`)."""

    def __init__(self, stream: TextIO | None, name: str) -> None:
        if stream is None:
            raise StreamError(f"{name} is closed")
        self.stream = stream
        self.name = name

    def _failed(self, doing: str, error: Exception) -> StreamError:
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        return StreamError(f"cannot {doing} {self.name} ({reason})")

    def write(self, text: str) -> int:
        """Write ``text``."""
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as error:  # ValueError: the stream was closed under us
            raise self._failed("write to", error) from None

    def flush(self) -> None:
        """Flush what is written so far."""
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as error:
            raise self._failed("write to", error) from None

    def readline(self) -> str:
        """The next line, ``""`` at the end of the input."""
        try:
            return self.stream.readline()
        except (OSError, ValueError) as error:  # UnicodeDecodeError is a ValueError
            raise self._failed("read", error) from None

    def isatty(self) -> bool:
        """True for a terminal."""
        try:
            return bool(self.stream.isatty())
        except (OSError, ValueError, AttributeError):
            return False


def report(stderr: TextIO | None, line: str) -> None:
    """Write ``line`` to standard error, if it can be written at all (a tool whose standard
    error is closed or full still exits with its status)."""
    if stderr is None:
        return
    with contextlib.suppress(OSError, ValueError):
        stderr.write(line.rstrip("\n") + "\n")
        stderr.flush()


def after_output_failed(stdout: object) -> None:
    """After writing to the process's standard output failed, point it at the null device
    (:func:`silence_stdout`), so that the interpreter's last flush at exit does not fail again
    and print a traceback of its own."""
    if stdout is not None and stdout is sys.stdout:
        silence_stdout()


# --- the files a command writes ---------------------------------------------------------------

FORCE_HELP = (
    "replace output files that exist (without it, an existing file is kept and the command "
    "stops before any work)"
)
"""The help of every command's ``--force``."""


class OutputError(ValueError):
    """An output file that the command cannot or may not write; the message is one sentence."""


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """True when the paths ``a`` and ``b`` name one file: the same file on disk when both
    exist, else the same path once links and ``..`` are resolved."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.realpath(a) == os.path.realpath(b)


Named = tuple[str, "str | os.PathLike[str] | None"]
"""A file a command reads or writes, and how its message names it (``("--json", path)``;
None: not asked for)."""


def check_outputs(
    outputs: Sequence[Named], inputs: Sequence[Named] = (), force: bool = False
) -> None:
    """:class:`OutputError` in one sentence unless every file of ``outputs`` can be written as the
    commands write their outputs:

    * it is none of ``inputs`` (the files the command reads) and no other output;
    * its folder exists (no folder is made for it) and it is not a folder, a device, a pipe
      or a symbolic link (a link would lead the write elsewhere);
    * it does not exist, unless ``force`` (``--force``): an existing file is kept.
    """
    given = [(what, Path(path)) for what, path in outputs if path is not None]
    read = [(what, Path(path)) for what, path in inputs if path is not None]
    for index, (what, path) in enumerate(given):
        for source, other in read:
            if same_file(path, other):
                raise OutputError(
                    f"{what} {path} is also {source}, which the command reads; an output "
                    "never replaces an input"
                )
        for other_what, other in given[:index]:
            if same_file(path, other):
                raise OutputError(
                    f"{other_what} {other} and {what} {path} are the same file; give each output "
                    "its own"
                )
    for what, path in given:
        folder = path.parent
        if not folder.exists():
            raise OutputError(f"{what} {path}: the folder {folder} does not exist")
        if not folder.is_dir():
            raise OutputError(f"{what} {path}: {folder} is not a folder")
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as error:
            raise OutputError(f"{what} {path} cannot be written ({reason(error)})") from None
        if stat.S_ISDIR(mode):
            raise OutputError(f"{what} {path} is a folder; give the file to write")
        if stat.S_ISLNK(mode):
            raise OutputError(f"{what} {path} is a symbolic link; give the path of the file itself")
        if not stat.S_ISREG(mode):
            raise OutputError(
                f"{what} {path} is not a regular file (a device, a pipe or a socket); give a "
                "file to write"
            )
        if not force:
            raise OutputError(f"{what} {path} exists; give --force to replace it")


def make_output_folder(what: str, path: str | os.PathLike[str]) -> Path:
    """The output folder ``path``, made if missing (its own folder must exist: nothing else is
    made); :class:`OutputError` in one sentence when it cannot be."""
    path = Path(path)
    if os.path.islink(path):
        raise OutputError(f"{what} {path} is a symbolic link; give the path of the folder itself")
    if not path.parent.is_dir():
        raise OutputError(f"{what} {path}: the folder {path.parent} does not exist")
    try:
        path.mkdir(exist_ok=True)
    except FileExistsError:
        raise OutputError(f"{what} {path} is a file; give a folder") from None
    except OSError as error:
        raise OutputError(f"{what} {path} cannot be made ({reason(error)})") from None
    return path


def write_output(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` (atomically: see
    :func:`~buttonup_env.game.files.write_atomically`); :class:`OutputError` in one sentence
    when it cannot be written."""
    try:
        return write_atomically(path, data)
    except OSError as error:
        raise OutputError(f"cannot write {path} ({reason(error)})") from None
