"""Players: anything with ``act(state) -> slot``.

Every player in the project — the bots here, exported policies from :func:`buttonup_env.load_policy`
and the opponent inside the environment — follows :class:`Player`. A player may also have
``reset(rng)``; the environment calls it at the start of every episode with its own seeded
generator, so that one seed fixes the opponent's choices too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..engine.batch import BOT_KINDS
from ..game import solver
from ..game.rules import Color, State, is_whole_number, other, sow, strength


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
        """Exact value of each legal move (see :mod:`buttonup_env.game.solver`)."""
        return solver.move_values(state)

    def act(self, state: State) -> int:
        """A best move by the solver's values."""
        values = solver.move_values(state)
        best = max(values.values())
        return _pick([slot for slot, v in values.items() if v == best], self.rng)


class GradedBot(_SeededBot):
    """The perfect bot with mistakes: a uniformly random legal move with probability ``p``,
    otherwise a move of the exact solver's best value (ties broken at random).

    ``p`` = 0 plays as :class:`PerfectBot` and ``p`` = 1 as :class:`RandomBot`; in between the
    graded bots are the steps of a strength scale. Its name is ``perfect-P`` (``perfect-0.3``
    for ``p`` = 0.3, see :func:`graded_name`), the name the league and the web app accept.
    """

    def __init__(self, p: float, seed: int | np.random.Generator | None = None) -> None:
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            raise ValueError(f"p={p!r} is not allowed; use a probability in [0, 1]")
        super().__init__(seed)
        self.p = float(p)

    def act(self, state: State) -> int:
        """A random legal slot with probability ``p``, else a best move by the solver's values."""
        legal = _legal(state)
        if self.rng.random() < self.p:
            return _pick(legal, self.rng)
        values = solver.move_values(state)
        best = max(values.values())
        return _pick([slot for slot, v in values.items() if v == best], self.rng)

    def __repr__(self) -> str:
        return f"GradedBot({self.p:g})"


BOT_NAMES = BOT_KINDS
"""The names of the built-in bots, as the environments, the scripts and the web app accept
them (weakest first): the bots the batched engine plays from its tables
(:data:`buttonup_env.engine.batch.BOT_KINDS`), each with a class here."""

BOT_CLASSES: dict[str, type[RandomBot | GreedyBot | PerfectBot]] = {
    "random": RandomBot,
    "greedy": GreedyBot,
    "perfect": PerfectBot,
}
"""The class of each built-in bot, by its name (:func:`make_bot` makes one)."""

GRADED_PREFIX = "perfect-"
"""A graded bot's name is this prefix and its probability of a random move: ``perfect-0.3``."""


_DECIMAL = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?", re.ASCII)
"""A decimal number in ASCII digits, as :func:`graded_name` writes one (``0.3``, ``1e-05``)."""


def graded_name(p: float) -> str:
    """The name of the graded bot with probability ``p`` of a random move (``perfect-0.3``)."""
    return f"{GRADED_PREFIX}{p:g}"


def graded_p(name: str) -> float | None:
    """The probability of a random move that a graded bot's name gives (0.3 for
    ``perfect-0.3``), or None for a name that is not a graded bot's.

    Raises ``ValueError`` for ``perfect-`` followed by something that is not a probability in
    [0, 1] (``perfect-1.5``, ``perfect-x``).
    """
    if not isinstance(name, str) or not name.lower().startswith(GRADED_PREFIX):
        return None
    text = name[len(GRADED_PREFIX) :]
    try:  # float() alone reads any script's digits (perfect-\u0661 as perfect-1) and 1_0
        p = float(text) if _DECIMAL.fullmatch(text) else float("nan")
    except ValueError:
        p = float("nan")
    if not 0.0 <= p <= 1.0:  # NaN fails too
        raise ValueError(
            f"{name!r} is not a graded bot: after {GRADED_PREFIX!r} comes the probability of a "
            f"random move, a number from 0 to 1 (e.g. {GRADED_PREFIX}0.3), not {text!r}"
        )
    return p


def make_bot(name: str, seed: int | np.random.Generator | None = None) -> Player:
    """The bot called ``name``: ``random``, ``greedy``, ``perfect`` or a graded ``perfect-P``.

    Raises ``ValueError`` naming the allowed names for any other name.
    """
    if name in BOT_CLASSES:
        return BOT_CLASSES[name](seed)
    p = graded_p(name)
    if p is None:
        raise ValueError(
            f"{name!r} is not a bot; the bots are {', '.join(BOT_NAMES)} and the graded "
            f"{GRADED_PREFIX}P (a random move with probability P, e.g. {GRADED_PREFIX}0.3)"
        )
    return GradedBot(p, seed)
