"""Timing two checkouts of this repository side by side: each one's own benchmark code, run in
a fresh subprocess with the checkout first on ``sys.path`` (``--reference DIR`` of
``bench_vector.py``, ``bench_league.py`` and ``bench_training.py``).

Both checkouts are timed the same way, each in its own process, one after the other and in
alternating order from one repeat to the next, so that the machine's drift weighs on both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
"""This checkout's root."""


def describe(folder: Path, script: str) -> str:
    """The checkout's short commit (or its folder's name); ``ValueError`` in a sentence when it
    has no ``benchmarks/SCRIPT`` to time it with."""
    if not (folder / "benchmarks" / script).is_file():
        raise ValueError(
            f"--reference {folder}: no benchmarks/{script} there; give a checkout of this "
            "repository (git worktree add --detach DIR COMMIT)"
        )
    found = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() if found.returncode == 0 else folder.name


def run(folder: Path, code: str, *args: object) -> dict[str, Any]:
    """What ``code`` prints last as JSON, run by this Python in a new process with the checkout
    ``folder`` first on its path (``sys.argv[1]`` is the folder, then ``args``)."""
    folder = folder.resolve()
    paths = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    child = subprocess.run(
        [sys.executable, "-c", code, str(folder), *map(str, args)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode != 0:
        tail = "\n".join(child.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"{folder}: its benchmark failed (exit {child.returncode}):\n{tail}")
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    return result


def side_by_side(
    reference: Path, repeats: int, code: str, *args: object
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``code`` run ``repeats`` times in this checkout and in ``reference``, alternating which
    goes first. Returns the results of this checkout and of the reference, repeat by repeat."""
    here: list[dict[str, Any]] = []
    there: list[dict[str, Any]] = []
    for repeat in range(repeats):
        order = [(HERE, here), (reference, there)]
        for folder, results in order if repeat % 2 == 0 else order[::-1]:
            results.append(run(folder, code, *args))
    return here, there
