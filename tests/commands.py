"""Running the project's scripts from the tests (not a test module): in this process as their
command line would (:func:`run`), or in a new interpreter (:func:`run_process`)."""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository: scripts run from here, as the README's commands do."""


def run(script: Path, *args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run ``python SCRIPT ARGS...`` in this process, as its command line would (its
    ``__main__``, its exit status, what it prints), without a new interpreter's seconds of
    imports. The script's folder leads ``sys.path`` while it runs, as Python puts it there. A
    traceback the script lets out is printed to its captured standard error with status 1, as
    Python does. Signals, terminals and child processes are tested with
    :func:`run_process`."""
    argv = [str(script), *map(str, args)]
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv, os.getcwd(), sys.path[:]
    status: int = 0
    try:
        sys.argv = argv
        sys.path.insert(0, str(Path(script).resolve().parent))
        os.chdir(cwd)
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as exit:
                if exit.code is None or isinstance(exit.code, int):
                    status = exit.code or 0
                else:  # a message: Python prints it and exits with 1
                    print(exit.code, file=sys.stderr)
                    status = 1
            except BaseException:
                traceback.print_exc()
                status = 1
    finally:
        sys.argv, sys.path[:] = saved[0], saved[2]
        os.chdir(saved[1])
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


def run_process(
    script: Path, *args: str | Path, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Run ``python SCRIPT ARGS...`` in a new interpreter."""
    return subprocess.run(
        [sys.executable, str(script), *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
