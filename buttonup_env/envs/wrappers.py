"""Wrappers that change what the agent of ``ButtonUp-v1`` (or ``-v0``) sees and does."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..game.encoding import ENCODINGS, MAX_LEGAL, RingEncoding
from ..game.rules import NUM_SLOTS
from .env import ButtonUpEnv
from .interface import action_slot

VIEWS = ("ring", "afterstates", "match-afterstates")
"""The view encodings :class:`RingObservation` takes."""


class RingObservation(
    gym.Wrapper[np.ndarray, np.int64, np.ndarray, np.int64], gym.utils.RecordConstructorArgs
):
    """``ButtonUp-v1`` (or ``-v0``) seen through a view encoding (see
    :mod:`buttonup_env.game.encoding`).

    ``encoding="ring"`` (default), ``"afterstates"`` or ``"match-afterstates"`` (what training
    uses, for the round and for the match). Observation: ``Box(0, 1, (729,), (735,) or (864,),
    float32)``, one view per legal move. Action: ``Discrete(3)``,
    action ``a`` lifts the ``a``-th legal slot in increasing order. :meth:`action_masks` and
    ``info["action_mask"]`` are over these three actions. Rewards, episode ends and the other
    ``info`` keys are the env's; an action outside ``Discrete(3)`` raises ``ValueError``, and
    one with no legal move behind it is passed on as an illegal slot, so the env's
    ``illegal_action`` setting decides what happens.
    """

    def __init__(self, env: gym.Env, encoding: str = "ring") -> None:
        gym.utils.RecordConstructorArgs.__init__(self, encoding=encoding)
        gym.Wrapper.__init__(self, env)
        if not isinstance(env.unwrapped, ButtonUpEnv):
            raise ValueError(f"RingObservation wraps ButtonUp-v1 or -v0, got {env.unwrapped!r}")
        if encoding not in VIEWS:
            raise ValueError(f"encoding={encoding!r}; use {', '.join(map(repr, VIEWS))}")
        self.encoding: RingEncoding = ENCODINGS[encoding]  # type: ignore[assignment]
        self.observation_space = spaces.Box(0.0, 1.0, (self.encoding.size,), np.float32)
        self.action_space = spaces.Discrete(MAX_LEGAL)

    @property
    def _game(self) -> ButtonUpEnv:
        return self.env.unwrapped  # type: ignore[return-value]

    def _obs(self) -> np.ndarray:
        game = self._game
        assert game.state is not None
        return self.encoding.encode(game.state, game.agent_color)

    def action_masks(self) -> np.ndarray:
        """Boolean mask over the three actions (all True once the episode is over)."""
        game = self._game
        if game.state is None:
            raise RuntimeError("call reset() before action_masks()")
        if game.episode_over:
            return np.ones(MAX_LEGAL, dtype=bool)
        return self.encoding.mask(game.state)

    def _with_mask(self, info: dict[str, Any]) -> dict[str, Any]:
        info["action_mask"] = self.action_masks().astype(np.int8)
        return info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        return self._obs(), self._with_mask(info)

    def step(
        self, action: np.int64 | int
    ) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        game = self._game
        if game.state is None or game.episode_over:
            return self.env.step(action)  # the env says what is wrong (no reset, episode over)
        index = action_slot(action, MAX_LEGAL)  # ValueError outside Discrete(3)
        legal = game.state.legal_moves()
        if index < len(legal):
            slot = legal[index]
        elif game.illegal_action == "raise":
            raise ValueError(
                f"illegal action: {index}; the actions are the legal slots {list(legal)} in "
                f"order, so 0 to {len(legal) - 1}"
            )
        else:  # a slot with no white button: the env's illegal_action decides what happens
            slot = next(s for s in range(NUM_SLOTS) if s not in legal)
        _, reward, terminated, truncated, info = self.env.step(slot)
        return self._obs(), reward, terminated, truncated, self._with_mask(info)


class ActionMaskObservation(
    gym.Wrapper[dict[str, np.ndarray], np.int64, np.ndarray, np.int64],
    gym.utils.RecordConstructorArgs,
):
    """``ButtonUp-v1`` (or ``-v0``, or a :class:`RingObservation` of either) observing its
    action mask too.

    Observation: ``Dict`` with ``"observation"``, the wrapped env's observation, and
    ``"action_mask"``, ``Box(0, 1, (n,), bool)``: True on the legal actions of the
    ``n`` (``info["action_mask"]`` as booleans; all True once the episode is over). It is the
    dict the PettingZoo env observes, and what TorchRL reads: ``GymWrapper`` puts
    ``action_mask`` beside ``observation`` in its specs, the ``ActionMask`` transform masks
    random actions with it and its masked distributions take it as it is. Actions, rewards,
    episode ends and ``info`` are the wrapped env's.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        if not isinstance(env.unwrapped, ButtonUpEnv):
            raise ValueError(
                f"ActionMaskObservation wraps ButtonUp-v1 or -v0, got {env.unwrapped!r}"
            )
        actions = int(env.action_space.n)  # type: ignore[attr-defined]
        self.observation_space = spaces.Dict(
            {
                "observation": env.observation_space,
                "action_mask": spaces.Box(0, 1, (actions,), np.bool_),
            }
        )

    @staticmethod
    def _observe(observation: np.ndarray, info: dict[str, Any]) -> dict[str, np.ndarray]:
        return {"observation": observation, "action_mask": info["action_mask"].astype(bool)}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        return self._observe(observation, info), info

    def step(
        self, action: np.int64 | int
    ) -> tuple[dict[str, np.ndarray], SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return self._observe(observation, info), reward, terminated, truncated, info
