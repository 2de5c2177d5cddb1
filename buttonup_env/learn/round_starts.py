"""What a round's result is worth in the match, learnt by self-play: :class:`RoundStartValues`.

A training match cut into rounds (``ButtonUpVectorEnv(truncate_rounds=True)``) pays each round
the value of the next round's start. A critic that sees the whole position estimates it for
one layout; what the round's play decides is only the new score and starter, worth the
average over the next round's layouts. :class:`RoundStartValues` keeps that average itself:
one number per round start (the agent's points, the opponent's, whether the agent starts),
the agent's expected match result (+1 a win, -1 a loss), learnt by temporal differences from
the rounds the training plays (each round's value moves towards the next round's, or towards
the match's result), with the colours swapped for the opponent (self-play is symmetric). No
solver enters: it is the training's own estimate of the match equity. It keeps the spread of
those targets too (:meth:`RoundStartValues.spread`): how much a round from each start swings
the match, by which a training can scale each round's result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..envs.vector import ButtonUpVectorEnv

MIN_STEP = 1e-3
"""The smallest step of an update: each start's value is the mean of its first 1,000
targets, then an average over about the last 1,000 (the policy keeps changing)."""


class RoundStartValues:
    """The agent's expected match result from every round start of a match to ``target``:
    ``values[own, other, starts]`` in [-1, 1].

    Call :meth:`observe` after every step of the batched env ``env`` with the step's ended
    episodes (a round ends an episode when the env truncates rounds): it learns from the
    rounds that ended and returns, for each, the value of what follows (the next round's
    start, or the match's result: +1 or -1).
    """

    def __init__(self, env: ButtonUpVectorEnv, min_step: float = MIN_STEP) -> None:
        if not isinstance(env, ButtonUpVectorEnv) or env.episode != "match":
            raise ValueError(
                f"env must be a ButtonUpVectorEnv of match episodes (episode='match'), got "
                f"{env.episode + ' episodes of ' if isinstance(env, ButtonUpVectorEnv) else ''}"
                f"{type(env).__name__}"
            )
        if not 0 < min_step <= 1:
            raise ValueError(f"min_step must be in (0, 1], got {min_step}")
        self.env = env
        self.target = env.target
        self.min_step = float(min_step)
        self.values = np.zeros((self.target, self.target, 2))
        self.counts = np.zeros((self.target, self.target, 2), dtype=np.int64)
        self.squares = np.zeros((self.target, self.target, 2))
        """The running mean of the squared targets: with ``values``, their spread."""
        self.starts = np.zeros((0, 3), dtype=np.int64)
        """The starts of the rounds the last :meth:`observe` learnt from."""
        self._keys: np.ndarray | None = None  # (n, 3): each env's round start, as indices
        self._agent: np.ndarray | None = None  # (n,): the agent's colour in that round

    def current(self) -> tuple[np.ndarray, np.ndarray]:
        """Each env's round in play: its start's indices (own points, the opponent's, whether
        the agent starts) and the agent's colour."""
        env = self.env
        agent = env._agent.copy()
        rows = np.arange(len(agent))
        own, other = env._score[rows, agent], env._score[rows, 1 - agent]
        keys = np.stack([own, other, (env._starter == agent).astype(np.int64)], axis=1)
        return keys.astype(np.int64), agent

    def observe(self, ended: np.ndarray, round_points: np.ndarray) -> np.ndarray:
        """Learn from the envs ``ended`` (indices: their round ended in the step just taken,
        with ``round_points`` ``(len(ended), 2)``, Red's and Black's) and return, for each,
        the value of what follows it: the next round's start, or +1 / -1 where the round
        ended the match (the env has then started a new one)."""
        keys, agent = self.current()
        if self._keys is None:  # the first step: the rounds in play are where we start
            self._keys, self._agent = keys, agent
            self.starts = keys[np.asarray(ended, dtype=np.int64)]
            return np.zeros(len(ended))
        ended = np.asarray(ended, dtype=np.int64)
        start, colour = self._keys[ended], self._agent[ended]
        points = np.asarray(round_points, dtype=np.int64).reshape(len(ended), 2)
        rows = np.arange(len(ended))
        margin = points[rows, colour] - points[rows, 1 - colour]
        own = start[:, 0] + np.maximum(margin, 0)
        other = start[:, 1] + np.maximum(-margin, 0)
        over = (own >= self.target) | (other >= self.target)
        after = np.where(own >= self.target, 1.0, -1.0)
        going = ~over  # the match goes on: its next round's start, as the env has it
        nxt = keys[ended[going]]
        after[going] = self.values[nxt[:, 0], nxt[:, 1], nxt[:, 2]]
        self._learn(start, after)
        self._keys, self._agent, self.starts = keys, agent, start
        return after

    def spread(self, starts: np.ndarray, floor: float = 0.05) -> np.ndarray:
        """The standard deviation of the targets learnt at ``starts`` (``(n, 3)`` indices), at
        least ``floor``: how much a round's play can swing the match from there."""
        index = (starts[:, 0], starts[:, 1], starts[:, 2])
        variance = self.squares[index] - self.values[index] ** 2
        return np.maximum(np.sqrt(np.maximum(variance, 0.0)), floor)

    def _learn(self, start: np.ndarray, after: np.ndarray) -> None:
        """Move each start's value (and its mirror, the opponent's) towards ``after``."""
        mirror = np.stack([start[:, 1], start[:, 0], 1 - start[:, 2]], axis=1)
        keys, targets = np.concatenate([start, mirror]), np.concatenate([after, -after])
        index = (keys[:, 0], keys[:, 1], keys[:, 2])
        np.add.at(self.counts, index, 1)
        step = np.maximum(1.0 / self.counts[index], self.min_step)
        np.add.at(self.values, index, step * (targets - self.values[index]))
        np.add.at(self.squares, index, step * (targets**2 - self.squares[index]))

    def get_state(self) -> dict[str, Any]:
        """What the table has learnt and the rounds in play that it follows, as lists (JSON
        ready): :meth:`set_state` of it goes on exactly as this table would (a training's
        resume point holds it)."""
        return {
            "values": self.values.ravel().tolist(),
            "squares": self.squares.ravel().tolist(),
            "counts": self.counts.ravel().tolist(),
            "keys": None if self._keys is None else self._keys.ravel().tolist(),
            "agent": None if self._agent is None else self._agent.tolist(),
        }

    def set_state(self, state: object) -> None:
        """Put back a :meth:`get_state` of a table of this env (its target and envs);
        ``ValueError`` in one sentence naming the key that does not fit."""
        keys = ("values", "squares", "counts", "keys", "agent")
        if not isinstance(state, dict) or set(state) != set(keys):
            given = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"the table's state must have the keys {list(keys)}, got {given}")
        size, n, shape = self.values.size, self.env.num_envs, self.values.shape
        values = _numbers(state, "values", size, -1.0, 1.0).reshape(shape)
        squares = _numbers(state, "squares", size, 0.0, 1.0).reshape(shape)
        counts = _numbers(state, "counts", size, 0, 1e15, whole=True).reshape(shape)
        if (state["keys"] is None) != (state["agent"] is None):
            raise ValueError("the table's keys and agent must be both null or both given")
        keys = agent = None
        if state["keys"] is not None:
            keys = _numbers(state, "keys", 3 * n, 0, self.target - 1, whole=True).reshape(n, 3)
            if not np.isin(keys[:, 2], (0, 1)).all():
                raise ValueError("the table's keys must give whether the agent starts as 0 or 1")
            agent = _numbers(state, "agent", n, 0, 1, whole=True).astype(np.int64)
            keys = keys.astype(np.int64)
        self.values, self.squares, self.counts = values, squares, counts.astype(np.int64)
        self._keys, self._agent = keys, agent

    def win_probability(self, own: int, other: int, starts: bool) -> float:
        """The estimate as a probability of winning the match (for reading it against the
        exact :func:`buttonup_env.game.equity.match_equity`)."""
        return float((1 + self.values[own, other, int(starts)]) / 2)


def _numbers(
    state: dict[str, Any], key: str, size: int, low: float, high: float, whole: bool = False
) -> np.ndarray:
    """``state[key]``, a list of ``size`` numbers from ``low`` to ``high`` (whole numbers if
    ``whole``), as an array; ``ValueError`` naming the key otherwise."""
    items = state[key]
    kind = "whole numbers" if whole else "numbers"
    if (
        not isinstance(items, list)
        or len(items) != size
        or not all(
            isinstance(x, int if whole else (int, float)) and not isinstance(x, bool) for x in items
        )
    ):
        raise ValueError(f"the table's {key} must be a list of {size} {kind}")
    array = np.array(items, dtype=np.float64)
    slack = 0.0 if whole else 1e-9  # running means of targets in range, to the rounding
    if not (
        np.isfinite(array).all() and (array >= low - slack).all() and (array <= high + slack).all()
    ):
        raise ValueError(f"the table's {key} must be from {low:g} to {high:g}")
    return array
