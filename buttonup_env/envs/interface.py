"""What the three environments share: the values of their arguments, their reset options, their
actions, and what a round and a match pay.

``ButtonUp-v1`` (:class:`~buttonup_env.envs.env.ButtonUpEnv`), the batched env
(:class:`~buttonup_env.envs.vector.ButtonUpVectorEnv`, numpy and compiled) and the PettingZoo env
(:class:`~buttonup_env.envs.pettingzoo.ButtonUpAEC`) check their arguments with
:func:`check_choice`, read ``reset(options=...)`` with :func:`reset_options` and their actions
with :func:`action_slot`, and pay with :func:`round_reward` and :func:`match_reward` (whose
home is the batched engine, :mod:`buttonup_env.engine.batch`, which pays with them too), so
that the three agree on each of these rules. The game itself is
:mod:`buttonup_env.game.rules`; nothing here changes it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..engine.batch import match_reward, round_reward
from ..game.records import shown
from ..game.rules import NUM_SLOTS, is_whole_number

__all__ = [
    "COLOR_CHOICES",
    "EPISODES",
    "ILLEGAL_ACTIONS",
    "OBSERVATIONS",
    "RENDER_MODES",
    "RESET_OPTIONS",
    "REWARDS",
    "RenderModes",
    "action_slot",
    "as_slot",
    "check_choice",
    "interrupted",
    "match_reward",
    "reset_options",
    "round_reward",
]

COLOR_CHOICES = (None, "R", "B")
"""``agent_color`` and every reset option: Red, Black, or None (drawn at random)."""
REWARDS = ("match", "round")
"""``reward``: ``"match"`` pays only the match's result; ``"round"`` also every round's margin
(see :func:`round_reward`)."""
EPISODES = ("match", "round")
"""``episode``: one episode is a match, or one round from 0-0."""
OBSERVATIONS = ("match-slots", "slots")
"""``encoding`` of the single and the PettingZoo env: ``ButtonUp-v1``'s observation (with who
started the round), or ``ButtonUp-v0``'s (:mod:`buttonup_env.game.encoding`)."""
ILLEGAL_ACTIONS = ("end", "raise")
"""``illegal_action``: an illegal slot ends the episode with -1, or raises ``ValueError``."""
RENDER_MODES = ("human", "ansi", "rgb_array")
"""``render_mode`` of the single and the PettingZoo env (the batched env has ``"ansi"``)."""


class RenderModes(list):  # type: ignore[type-arg]
    """The render modes as an env's ``metadata["render_modes"]`` lists them. A value that is
    not a string counts as listed, so that ``gymnasium.make`` hands it to the env, which
    refuses it in one sentence (:func:`check_choice`): Gymnasium's own check of an unlisted
    mode calls ``.endswith`` on it, an ``AttributeError`` for ``render_mode=1``."""

    def __contains__(self, value: object) -> bool:
        return not isinstance(value, str) or super().__contains__(value)


RESET_OPTIONS = ("agent_color", "first")
"""The keys of ``reset(options=...)``: the agent's colour and the first round's starter for
one episode (the PettingZoo env, where both colours are agents, has ``"first"`` alone)."""


def check_choice(name: str, value: object, allowed: tuple[Any, ...]) -> None:
    """``ValueError`` in one sentence unless ``value`` (a str, or None) is one of ``allowed``."""
    # ``in`` alone would ask arrays and odd objects to compare themselves with each choice
    if not ((value is None or isinstance(value, str)) and value in allowed):
        raise ValueError(
            f"{name}={shown(value)} is not allowed; use one of {', '.join(map(repr, allowed))}"
        )


def reset_options(options: object, allowed: tuple[str, ...] = RESET_OPTIONS) -> dict[str, Any]:
    """``reset(options=...)`` checked: None or a mapping whose keys are among ``allowed`` and
    whose values are ``"R"``, ``"B"`` or None (every reset option names a colour).

    Anything but None or a mapping, and a bad value of a known key, raise ``ValueError`` in one
    sentence. Unknown keys are dropped with a warning naming them and the allowed ones: a typo
    is said out loud, and the envs still take the options other code passes on purpose
    (PettingZoo's ``api_test`` resets with ``options={"options": 1}``, Gymnasium's envs ignore
    keys they do not know).
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(
            f"options={shown(options)} is not allowed; reset options are a dict with the keys "
            f"{', '.join(map(repr, allowed))}"
        )
    unknown = sorted((k for k in options if not (isinstance(k, str) and k in allowed)), key=repr)
    if unknown:
        warnings.warn(
            f"unknown reset option(s) {unknown} ignored; allowed: {', '.join(map(repr, allowed))}",
            stacklevel=3,
        )
    checked = {k: v for k, v in options.items() if k not in unknown}
    for key, value in checked.items():
        check_choice(f"options[{key!r}]", value, COLOR_CHOICES)
    return checked


def interrupted(call: str, then: str = "step()") -> RuntimeError:
    """The error of a ``step()`` (or ``then``) after a ``call`` (``"step()"``, ``"reset()"``)
    that an exception stopped part-way: Ctrl-C, an opponent policy that failed, a window that
    could not be drawn. The game is then half-played (the agent's move made, the opponent's
    not), so the envs refuse to go on from it until ``reset()``."""
    return RuntimeError(
        f"the last {call} stopped part-way with an exception, which left the game half-played; "
        f"call reset() before {then}"
    )


def as_slot(value: object) -> object:
    """``value`` with a 0-d integer array (numpy's answer to many questions) replaced by its
    number; anything else unchanged. What a slot may be: an action, or a player's move."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iu":
        return value.item()
    return value


def action_slot(action: object, actions: int = NUM_SLOTS) -> int:
    """The number ``action`` names, when it is in the action space ``Discrete(actions)``: a
    whole number (Python or numpy, or a 0-d integer array) from 0 to ``actions - 1``.

    Raises ``ValueError`` naming it otherwise (12, -1, 3.7, ``"3"``, ``True``, ``None``): such
    an action is a mistake in the calling code, not a move. A number in the space that is not
    a legal move in the position is the env's to judge (``illegal_action``).
    """
    value = as_slot(action)
    if is_whole_number(value) and 0 <= value < actions:  # type: ignore[operator]
        return int(value)  # type: ignore[call-overload]
    raise ValueError(
        f"action {shown(action)} is not in the action space Discrete({actions}): an action is "
        f"a whole number from 0 to {actions - 1}"
    )
