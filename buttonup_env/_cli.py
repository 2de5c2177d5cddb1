"""What the command-line scripts share: a quiet exit when the reader of their output goes away."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn


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
