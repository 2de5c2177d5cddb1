"""The bounds of a run's settings (each count and interval's range, read by
:mod:`training.typed_json` from its type; the rates' ranges, :func:`check_ranges`), the names a
config may hold, and the code version a run records. :mod:`training.config` declares the
settings with these types."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path
from typing import Annotated, Any

import buttonup_env
from training.typed_json import Pattern, Range

ROOT = Path(__file__).resolve().parent.parent
"""The repository (the folder that holds the ``training`` package)."""

MAX_MATCHES = 100_000
"""The most matches a command plays against one opponent (a few minutes on one core)."""
Matches = Annotated[int, Range(1, MAX_MATCHES)]
"""A number of matches, as the scripts' flags and a run's config take it."""
Seed = Annotated[int, Range(0, 2**32 - 1)]
"""A seed, as the scripts' flags and a run's config take it (numpy's legacy seeding, which
some of the libraries use, takes 32 bits)."""

CODE_VERSION = r"buttonup-env [0-9A-Za-z.+-]{1,40} \([0-9A-Za-z._+-]{1,80}\)"
"""What :func:`code_version` gives (``buttonup-env 0.1.0 (d2d4121+dirty)``), as a regular
expression: a code version read from a file is printed and copied only when it is one."""


def code_version() -> str:
    """The package version and the git commit (with ``+dirty`` when files were changed)."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty=+dirty"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return f"buttonup-env {buttonup_env.__version__} ({commit})"


# --- the bounds of the settings ------------------------------------------------------------

MAX_STEPS = 10_000_000_000
"""The most environment steps a run may ask for (a hundred times the full preset's)."""
MAX_MINUTES = 10_080.0
"""The longest time budget, in minutes: a week."""
MIN_INTERVAL = 64
"""The fewest steps between snapshots, evaluations or checkpoints (each is checked at a
rollout's start, so a smaller interval only means every rollout)."""
MAX_PERIODIC = 10_000
"""The most snapshots, and the most periodic evaluations, a run may ask for
(``total_steps / snapshot_every``): each snapshot is a file, each evaluation a line of
``eval.jsonl``, and neither may fill a disk."""
MAX_ENVS = 65_536
"""The most environments stepped together."""
MAX_ROLLOUT_STEPS = 4_096
"""The most steps per env in a rollout."""
MAX_EPOCHS = 100
"""The most passes over each rollout."""
MAX_MARGIN_WEIGHT = 18.0
"""The rounds' margins' largest weight in a match's reward (a one-point round is the match)."""
MAX_LAYERS = 16
"""The most hidden layers (the shipped agent has two)."""
MAX_WIDTH = 16_384
"""The widest hidden layer."""
MAX_THREADS = 4 * (os.cpu_count() or 1)
"""The most torch threads: four times this machine's cores (100,000 threads crashed a run)."""
MAX_PARAMETERS = 50_000_000
"""The largest network a config may ask for (the shipped agent's exported policy has about
140,000 parameters): a larger one is refused before anything is built."""
MAX_ROLLOUT_BYTES = 4 << 30
"""The largest rollout (n_envs x n_steps observations) a config may ask for: 4 GiB."""

Steps = Annotated[int, Range(1, MAX_STEPS)]
Minutes = Annotated[float, Range(0, MAX_MINUTES)]
Interval = Annotated[int, Range(MIN_INTERVAL, MAX_STEPS)]
Hidden = tuple[Annotated[int, Range(1, MAX_WIDTH)], ...]
"""A network's hidden layer sizes (``--hidden``)."""
ROUND_HIDDEN = (128, 128)
"""The hidden layers of round training and of the smoke preset (the full preset trains the
match with 256 256 256, the quick one with 256 256: the results log has the runs)."""

RUN_NAME = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
"""A run's folder name: letters, digits, '.', '_' and '-' (not first), at most 128."""
RunName = Annotated[str, Pattern(RUN_NAME, "a folder name of letters, digits, '.', '_' and '-'")]
PLAYER_NAME = r"[\w./\\~+@:=-][\w ./\\~+@:=,-]{0,254}"
"""A ladder player as a config may name it: a bot, a graded bot, a shipped policy or a path,
in letters, digits, spaces and ``. / \\ ~ + @ : = , - _`` (no control characters: the names
reach cards and messages)."""
Ladder = tuple[Annotated[str, Pattern(PLAYER_NAME, "a player's name or path")], ...]
"""Reference players (``--ladder``)."""


def check_ranges(values: dict[str, Any]) -> None:
    """``ValueError`` naming the flag for a rate or coefficient of ``values`` (a config's
    fields by name) out of its range."""
    end = values["learning_rate_end"]
    ranges = [
        ("learning_rate", 0 < values["learning_rate"] < math.inf, "> 0 and finite"),
        ("gamma", 0 < values["gamma"] <= 1, "in (0, 1]"),
        ("gae_lambda", 0 <= values["gae_lambda"] <= 1, "in [0, 1]"),
        ("clip_range", 0 < values["clip_range"] < math.inf, "> 0 and finite"),
        ("ent_coef_start", 0 <= values["ent_coef_start"] < math.inf, ">= 0 and finite"),
        ("ent_coef_end", 0 <= values["ent_coef_end"] < math.inf, ">= 0 and finite"),
        ("learning_rate_end", end is None or 0 <= end < math.inf, ">= 0 and finite"),
    ]
    for name, ok, allowed in ranges:
        if not ok:
            raise ValueError(f"--{name.replace('_', '-')} must be {allowed}, got {values[name]}")
