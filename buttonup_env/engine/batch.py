"""A batch of games as arrays, and the names both backends of the engine share.

A :class:`Batch` is the state of ``n`` games side by side: one entry per game in each array
(numpy arrays, which the backends change in place). The operations on it are the backends'
(:class:`~buttonup_env.engine.numpy_backend.NumpyBackend`, the readable reference, and
:class:`~buttonup_env.engine.numba_backend.NumbaBackend`, the compiled one): both take the same
batch and play the same games from it, bit for bit.

A game here is seen from one side, the *agent*'s (the batched env's agent, the arena's first
player), against an *opponent* (a number the caller gives meaning to: the batched env's index
into its players). Colours are numbers: ``RED`` 0, ``BLACK`` 1. Boards are the numbers
of :class:`~buttonup_env.engine.tables.GameTables`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..game.rules import DEFAULT_TARGET, MAX_ROUND_MARGIN
from .tables import BLACK, RED

__all__ = [
    "BLACK",
    "BOT_KINDS",
    "MAX_PLIES",
    "POLICY",
    "POLICY_MOVE",
    "RED",
    "Batch",
    "Generators",
    "Outcome",
    "Ply",
    "Rules",
    "Status",
    "match_reward",
    "round_reward",
]

BOT_KINDS = ("random", "greedy", "margin")
"""The bots the engine plays itself, from the tables' candidate moves, by kind number (0, 1, 2):
the random bot (any legal slot), the greedy bot, the margin player (the round solver's best).
Perfect play of the match reads the match's values at each game's score
(:func:`~buttonup_env.engine.numpy_backend.match_moves`): to the engine it is a policy."""
POLICY = -1
"""The kind of a player the engine does not play: a policy, whose moves the caller chooses."""
POLICY_MOVE = -2
"""The slot of a game in a ply while its policy has not chosen (see :attr:`Status.POLICIES`)."""
MAX_PLIES = 90
"""More plies than any chain of opponent moves in one step (a round has eight moves); more means
a bug."""


class Status(enum.IntEnum):
    """How the opponents' plies of a step end (what ``bot_plies`` returns)."""

    WAITING = 0
    """Every opponent waits for its agent: the step is over."""
    POLICIES = 1
    """A policy is to move in the current ply: the caller fills in its slots, plays the ply
    (``play_moves``) and asks again."""
    RUNAWAY = 2
    """The opponents did not hand the move back within :data:`MAX_PLIES` plies (a bug)."""


class Batch(NamedTuple):
    """The state of ``n`` games: one row per game in each array, changed in place.

    A named tuple so that both backends take it whole: numpy code and numba kernels read the
    same fields by name.
    """

    board: np.ndarray
    """(n,) int64: the board number."""
    to_move: np.ndarray
    """(n,) int64: the colour to move."""
    agent: np.ndarray
    """(n,) int64: the agent's colour."""
    starter: np.ndarray
    """(n,) int64: the colour that started the current round (the starting rule reads it)."""
    score: np.ndarray
    """(n, 2) int64: Red's and Black's points in the match."""
    done: np.ndarray
    """(n,) bool: the episode is over (a won match, an ended round with one-round episodes, an
    illegal action)."""
    opponent: np.ndarray
    """(n,) int64: the opponent, as the caller numbers its players."""

    @classmethod
    def zeros(cls, n: int) -> Batch:
        """A batch of ``n`` games, every array zero (set them up with ``start_episodes``)."""
        return cls(
            board=np.zeros(n, dtype=np.int64),
            to_move=np.zeros(n, dtype=np.int64),
            agent=np.zeros(n, dtype=np.int64),
            starter=np.zeros(n, dtype=np.int64),
            score=np.zeros((n, 2), dtype=np.int64),
            done=np.zeros(n, dtype=bool),
            opponent=np.zeros(n, dtype=np.int64),
        )


class Ply(NamedTuple):
    """Where a backend keeps the current ply: the games that move in it and their slots.

    A ply is one move in each of a list of games, ``envs[:count]`` (ascending). The games whose
    opponent is to move after a ply are among those that moved in it, so each ply's list is the
    previous one, filtered in place.
    """

    envs: np.ndarray
    """(n,) int64: the games of the ply, ``envs[:count]``."""
    slot: np.ndarray
    """(n,) int64: each game's slot in the ply (:data:`POLICY_MOVE` while a policy chooses)."""
    ended: np.ndarray
    """(n,) int64: the games whose round ended in the last ply played, ascending."""
    draws: np.ndarray
    """(n,) float64: each bot's random number for its move in the ply."""
    chosen: np.ndarray
    """(n,) bool: the new round starts after random moves (``random_start``)."""
    moves: np.ndarray
    """(n,) int64: how many random moves it starts after."""

    @classmethod
    def zeros(cls, n: int) -> Ply:
        return cls(
            envs=np.zeros(n, dtype=np.int64),
            slot=np.zeros(n, dtype=np.int64),
            ended=np.zeros(n, dtype=np.int64),
            draws=np.zeros(n, dtype=np.float64),
            chosen=np.zeros(n, dtype=bool),
            moves=np.zeros(n, dtype=np.int64),
        )


class Outcome(NamedTuple):
    """What a step of the batch gives each game, new for every step (the caller keeps them)."""

    reward: np.ndarray
    """(n,) float64: the agent's reward."""
    round_points: np.ndarray
    """(n, 2) int64: Red's and Black's points of the last round that ended in the step."""
    has_points: np.ndarray
    """(n,) bool: a round ended in the step (``round_points`` holds its points)."""
    illegal: np.ndarray
    """(n,) bool: the agent's action was illegal."""

    @classmethod
    def zeros(cls, n: int) -> Outcome:
        return cls(
            reward=np.zeros(n, dtype=np.float64),
            round_points=np.zeros((n, 2), dtype=np.int64),
            has_points=np.zeros(n, dtype=bool),
            illegal=np.zeros(n, dtype=bool),
        )


class Rules(NamedTuple):
    """What an episode is and what it pays (the batched env's ``target``, ``episode``,
    ``reward``, ``random_start`` and ``random_start_moves``)."""

    target: int = DEFAULT_TARGET
    """Points that win a match."""
    round_episodes: bool = False
    """One round per episode (``episode="round"``); otherwise a match."""
    round_reward: bool = False
    """Every round pays its margin / 18 (``reward="round"``); otherwise only the result."""
    random_start: float = 0.0
    """The probability that a new episode's round starts after random moves."""
    random_start_moves: int = 6
    """The most random moves such a start plays (1 to 6)."""


@dataclass
class Generators:
    """The random numbers of a batch: ``main`` draws the colours, starters, layouts and random
    starts; ``bots[k]`` breaks the ties of bot kind ``k`` (:data:`BOT_KINDS`). Both backends
    draw from them in the same order."""

    main: np.random.Generator
    bots: tuple[np.random.Generator, np.random.Generator, np.random.Generator]


def round_reward(margin: Any, per_round: bool, round_episodes: bool) -> Any:
    """What the end of a round pays the player whose round margin (its strength minus the
    opponent's in the final stack) is ``margin``.

    * ``reward="round"`` (``per_round``): the margin divided by :data:`MAX_ROUND_MARGIN`, so
      in [-1, 1];
    * ``reward="match"`` with one round per episode (``round_episodes``): +1, 0 or -1, the
      sign of the margin (the round is the match);
    * ``reward="match"`` over a whole match: 0 (the match pays, :func:`match_reward`).

    ``margin`` is a number or an array of them. The numba kernels
    (:mod:`buttonup_env.engine.kernels`) spell out the same arithmetic: numba caches their
    machine code by their own file, so they call nothing outside it; the tests hold the
    compiled backend to the numpy one, bit for bit.
    """
    if per_round:
        return margin / MAX_ROUND_MARGIN
    if round_episodes:
        return np.sign(margin)
    return 0.0


def match_reward(won: Any) -> Any:
    """What the end of a match pays a player: +1 if it ``won``, -1 if not (a match has a
    winner). ``won`` is a bool or an array of them."""
    return np.where(won, 1.0, -1.0) if isinstance(won, np.ndarray) else (1.0 if won else -1.0)
