"""What the command-line tools share: their argument types, how they parse, fail and exit.

``buttonup-play``, ``buttonup-replay``, ``buttonup-web``, ``python -m buttonup_env.animate``
and the scripts of ``training/`` use these, so that a bad argument gets the same kind of one
sentence and exit status 2 everywhere, and a reader that goes away (``... | head``) ends a
tool quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO


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
    stdout: TextIO,
    stderr: TextIO,
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
