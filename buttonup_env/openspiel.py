"""Button Up! in OpenSpiel: ``import buttonup_env.openspiel`` registers the game
``python_button_up``, and :func:`bot` and :func:`policy` make the package's players OpenSpiel
bots and policies.

The game and the adapters live in :mod:`buttonup_env.envs.openspiel` (the ``openspiel`` extra),
whose docstring documents the parameters, the chance outcomes and the observations.
"""

from .envs.openspiel import (
    GAME_NAME,
    MAX_ROUNDS,
    PARAMETERS,
    PLAYER_COLORS,
    STARTERS,
    ButtonUpGame,
    ButtonUpState,
    PlayerBot,
    PlayerPolicy,
    bot,
    policy,
    position_of,
    state_from_history,
)

__all__ = [
    "GAME_NAME",
    "MAX_ROUNDS",
    "PARAMETERS",
    "PLAYER_COLORS",
    "STARTERS",
    "ButtonUpGame",
    "ButtonUpState",
    "PlayerBot",
    "PlayerPolicy",
    "bot",
    "policy",
    "position_of",
    "state_from_history",
]
