"""buttonup-env: Button Up! as a Gymnasium environment, with bots and an exact solver.

Importing the package registers ``ButtonUp-v1`` (and ``ButtonUp-v0``, its observation without
the round's starter) with Gymnasium.
"""

from __future__ import annotations

import os

from gymnasium.envs.registration import register, registry

from .envs.env import ButtonUpEnv
from .game.equity import match_equity, match_move_values
from .game.match import Match
from .game.rules import LAYOUTS, State
from .players.audit import audit
from .players.best_response import BestResponseBot, match_exploitability
from .players.bots import GreedyBot, MarginBot, PerfectBot, Player, RandomBot

__all__ = [
    "LAYOUTS",
    "BestResponseBot",
    "ButtonUpEnv",
    "GreedyBot",
    "MarginBot",
    "Match",
    "PerfectBot",
    "Player",
    "RandomBot",
    "State",
    "audit",
    "load_policy",
    "match_equity",
    "match_exploitability",
    "match_move_values",
]

__version__ = "0.1.0"

for _version, _encoding in (("v1", "match-slots"), ("v0", "slots")):
    if f"ButtonUp-{_version}" not in registry:  # v1: the observation has the round's starter
        register(
            id=f"ButtonUp-{_version}",
            entry_point="buttonup_env.envs.env:ButtonUpEnv",
            vector_entry_point="buttonup_env.envs.vector:ButtonUpVectorEnv",
            kwargs={"encoding": _encoding},
        )


def load_policy(
    path: str | os.PathLike[str], *, trusted: bool = False, deterministic: bool = True
) -> Player:
    """Load a shipped policy by name (``"buttonup-ppo"``) or an exported one from its file.

    Returns a player with ``act(state) -> slot``. See
    :func:`buttonup_env.players.policy.load_policy` (imported lazily: onnxruntime only when used).
    """
    from .players.policy import load_policy as _load

    return _load(path, trusted=trusted, deterministic=deterministic)
