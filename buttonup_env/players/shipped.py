"""The policies shipped with the package, loadable by name.

Every ``NAME.onnx`` in :data:`SHIPPED_DIR` (``models/`` at the top of the repository, installed
with the package as ``buttonup_env/shipped/``) is a shipped policy called ``NAME``, with its
model card ``NAME.json`` beside it:
``buttonup_env.load_policy("buttonup-ppo")``, ``gymnasium.make("ButtonUp-v1",
opponent="buttonup-ppo")`` and ``buttonup-play --opponent buttonup-ppo`` all find it here.

To ship a new policy, export it into ``models/`` from a clone of the repository::

    python training/export.py runs/NAME --which best --out models/buttonup-ppo.onnx

which writes the ``.onnx`` file and its ``.json`` card; ``pyproject.toml`` makes the folder
package data (``buttonup_env.shipped``), so the next wheel carries them: one copy of each file
in the repository, one in the wheel.

``league.json`` holds the ratings of the bots, the graded bots and the shipped policies from one
league (``training/league.py``; the command that made it is inside), which the web app shows
beside its opponents: :func:`shipped_ratings`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

_INSTALLED = Path(__file__).resolve().parent.parent / "shipped"  # in an installed wheel
_CLONE = (
    Path(__file__).resolve().parent.parent.parent / "models"
)  # in the repository (pip install -e)

SHIPPED_DIR = _INSTALLED if _INSTALLED.is_dir() else _CLONE
"""The folder holding the shipped policies and their cards: ``models/`` in the repository,
``buttonup_env/shipped/`` in an installed wheel."""


def shipped_policies() -> list[str]:
    """The names of the shipped policies (the ``.onnx`` files in :data:`SHIPPED_DIR`), sorted."""
    return sorted(path.stem for path in SHIPPED_DIR.glob("*.onnx"))


def shipped_policy_path(name: str) -> Path:
    """The ``.onnx`` file of the shipped policy ``name``.

    Raises ``ValueError`` listing the shipped names when there is no policy of that name.
    """
    known = shipped_policies()
    if name not in known:
        listed = ", ".join(repr(n) for n in known) or "none"
        raise ValueError(
            f"there is no shipped policy named {name!r}; the shipped policies are {listed} "
            "(or give the path to an exported .onnx file)"
        )
    return SHIPPED_DIR / f"{name}.onnx"


SHIPPED_LEAGUE = SHIPPED_DIR / "league.json"
"""The shipped league's ratings, written by ``training/league.py --json``."""


def shipped_ratings(path: Path = SHIPPED_LEAGUE) -> dict[str, float]:
    """The Elo rating (random bot at 0) of every player of the shipped league, by name (``greedy``,
    ``perfect-0.1``, ``buttonup-ppo``, ...); empty when the file is missing or unreadable."""
    try:
        ratings = json.loads(path.read_text(encoding="utf-8"))["ratings"]
        found = {str(name): float(entry["elo"]) for name, entry in ratings.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    return {name: elo for name, elo in found.items() if math.isfinite(elo)}
