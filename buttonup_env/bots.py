"""Players: anything with ``act(state) -> slot``.

Every player in the project — the bots here, exported policies from :func:`buttonup_env.load_policy`
and the opponent inside the environment — follows :class:`Player`. A player may also have
``reset(rng)``; the environment calls it at the start of every episode with its own seeded
generator, so that one seed fixes the opponent's choices too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from . import solver
from .rules import Color, State, is_whole_number, other, sow, strength


@runtime_checkable
class Player(Protocol):
    """The one protocol for everything that plays: return a legal slot for ``state.to_move``."""

    def act(self, state: State) -> int: ...


def _generator(seed: int | np.random.Generator | None) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (not is_whole_number(seed) or seed < 0):  # type: ignore[operator]
        raise ValueError(f"seed must be None, an integer >= 0 or a numpy Generator, got {seed!r}")
    return np.random.default_rng(seed)


def _pick(candidates: Sequence[int], rng: np.random.Generator) -> int:
    """One of ``candidates``, uniformly (drawn with ``rng`` only when there is a choice)."""
    n = len(candidates)
    if n == 1:
        return candidates[0]
    # rng.random() is several times faster than rng.integers() for one draw
    return candidates[min(int(rng.random() * n), n - 1)]


def _legal(state: State) -> tuple[int, ...]:
    moves = state.legal_moves()
    if not moves:
        raise ValueError(f"the round is over on {state.notation!r}; there is no move to choose")
    return moves


class _SeededBot:
    """A bot whose random choices come from one ``numpy.random.Generator``."""

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        self.rng = _generator(seed)

    def reset(self, rng: np.random.Generator) -> None:
        """Draw from ``rng`` from now on (the environment passes its own at every reset)."""
        self.rng = rng

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RandomBot(_SeededBot):
    """Lifts a legal slot uniformly at random."""

    def act(self, state: State) -> int:
        """A uniformly random legal slot."""
        return _pick(_legal(state), self.rng)


def immediate_margin(board: tuple[str, ...], color: Color) -> int:
    """``color``'s strength minus the opponent's, counting every stack as if it were final."""
    total = 0
    for stack in board:
        if stack:
            s = strength(stack)
            total += s[color] - s[other(color)]
    return total


class GreedyBot(_SeededBot):
    """Looks one move ahead.

    The rule, in order:

    1. if some moves earn another turn, choose among those;
    2. among the candidates, choose the move whose resulting board is best for the mover by
       :func:`immediate_margin` — own strength minus the opponent's, counting every stack as if
       it were the final one (on the round's last move this is the exact final margin);
    3. break remaining ties at random with the bot's generator.
    """

    def act(self, state: State) -> int:
        """The greedy choice described in the class docstring."""
        mover = state.to_move
        scored = []
        for slot in _legal(state):
            board, extra_turn = sow(state.board, slot)
            extra_turn = extra_turn and board.count("") < len(board) - 1
            scored.append((extra_turn, immediate_margin(board, mover), slot))
        best = max((e, m) for e, m, _ in scored)
        return _pick([slot for e, m, slot in scored if (e, m) == best], self.rng)


class PerfectBot(_SeededBot):
    """Plays a move of the exact solver's best value; ties are broken with the bot's generator.

    ``move_values(state)`` gives ``{slot: value}`` for every legal move, where the value is the
    round's final margin (mover's strength minus the opponent's) when both players then play to
    maximise their own round margin. The solver ignores the match score: it plays every round
    for the largest margin.
    """

    def move_values(self, state: State) -> dict[int, int]:
        """Exact value of each legal move (see :mod:`buttonup_env.solver`)."""
        return solver.move_values(state)

    def act(self, state: State) -> int:
        """A best move by the solver's values."""
        values = solver.move_values(state)
        best = max(values.values())
        return _pick([slot for slot, v in values.items() if v == best], self.rng)


BOTS = {"random": RandomBot, "greedy": GreedyBot, "perfect": PerfectBot}
"""The built-in bots by the names the environment and the scripts accept."""
