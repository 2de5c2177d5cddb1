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

from ..game import equity, solver
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


OBJECTIVES = ("match", "round")
"""What a perfect player plays for: the match (the probability of winning it, the default) or
the round alone (its largest margin, what one-round episodes pay)."""


def check_objective(objective: object) -> str:
    """``objective`` if it is one of :data:`OBJECTIVES`; ``ValueError`` in one sentence if not."""
    if not (isinstance(objective, str) and objective in OBJECTIVES):
        raise ValueError(
            f"objective={objective!r} is not allowed; use 'match' (play to win the match) or "
            "'round' (play every round for its largest margin)"
        )
    return objective


def best_slots(state: State, objective: str) -> list[int]:
    """The legal slots of ``state`` that a perfect player of ``objective`` may lift: those of
    the best match value (within :data:`buttonup_env.game.equity.TIE_TOLERANCE`), or of the
    best round margin."""
    if objective == "match":
        return equity.best_moves(equity.match_move_values(state))
    values = solver.move_values(state)
    best = max(values.values())
    return [slot for slot, v in values.items() if v == best]


class MarginBot(_SeededBot):
    """Plays every round for its largest margin: a move of the round solver's best value, ties
    broken with the bot's generator.

    ``move_values(state)`` gives ``{slot: value}`` for every legal move, where the value is the
    round's final margin (mover's strength minus the opponent's) when both players then play to
    maximise their own round margin (:mod:`buttonup_env.game.solver`). It ignores the match: in a
    one-round episode, which pays the round, it plays perfectly; in a match it does not, since a
    round's result is not worth its margin there (the next starter depends on the score), and
    a best response to it wins 55.6% of matches to 15
    (:func:`~buttonup_env.players.best_response.match_exploitability`).
    """

    def move_values(self, state: State) -> dict[int, int]:
        """Exact round value of each legal move (see :mod:`buttonup_env.game.solver`)."""
        return solver.move_values(state)

    def act(self, state: State) -> int:
        """A move of the largest round margin."""
        return _pick(best_slots(_playing(state), "round"), self.rng)


class PerfectBot(_SeededBot):
    """Plays the game perfectly: a move of the best value, ties broken with the bot's generator.

    With ``objective="match"`` (the default) it plays the match: ``move_values(state)`` gives
    every legal move's probability that the player to move wins the match, when both then play
    the match perfectly (:func:`buttonup_env.game.equity.match_move_values`, from the state's
    score, target and starter). With ``objective="round"`` it plays every round for its largest
    margin, as :class:`MarginBot` does: perfect play of a one-round episode (the envs make the
    ``"perfect"`` opponent of a one-round episode so).
    """

    def __init__(
        self, seed: int | np.random.Generator | None = None, objective: str = "match"
    ) -> None:
        super().__init__(seed)
        self.objective = check_objective(objective)

    def move_values(self, state: State) -> dict[int, float]:
        """Exact value of each legal move for the objective: the probability of winning the
        match, or the round margin."""
        if self.objective == "match":
            return equity.match_move_values(state)
        return dict(solver.move_values(state))

    def act(self, state: State) -> int:
        """A best move for the objective."""
        return _pick(best_slots(_playing(state), self.objective), self.rng)

    def __repr__(self) -> str:
        return "PerfectBot()" if self.objective == "match" else "PerfectBot(objective='round')"


class GradedBot(_SeededBot):
    """The perfect bot with mistakes: a uniformly random legal move with probability ``p``,
    otherwise a move of :class:`PerfectBot` with the same ``objective`` (ties broken at random).

    ``p`` = 0 plays as :class:`PerfectBot` and ``p`` = 1 as :class:`RandomBot`; in between the
    graded bots are the steps of a strength scale. Its name is ``perfect-P`` (``perfect-0.3``
    for ``p`` = 0.3, see :func:`graded_name`), the name the league and the web app accept.
    """

    def __init__(
        self, p: float, seed: int | np.random.Generator | None = None, objective: str = "match"
    ) -> None:
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            raise ValueError(f"p={p!r} is not allowed; use a probability in [0, 1]")
        super().__init__(seed)
        self.p = float(p)
        self.objective = check_objective(objective)

    def act(self, state: State) -> int:
        """A random legal slot with probability ``p``, else a best move for the objective."""
        legal = _legal(state)
        if self.rng.random() < self.p:
            return _pick(legal, self.rng)
        return _pick(best_slots(state, self.objective), self.rng)

    def __repr__(self) -> str:
        if self.objective == "match":
            return f"GradedBot({self.p:g})"
        return f"GradedBot({self.p:g}, objective='round')"


def plays_the_match(player: object) -> bool:
    """Whether ``player`` reads the solved match to choose its moves (perfect play of the
    match, graded or not), so that it can play only targets the match is solved for."""
    return isinstance(player, PerfectBot | GradedBot) and player.objective == "match"


def check_target_for(player: object, target: int) -> None:
    """``ValueError`` in one sentence when ``player`` plays the solved match and ``target`` is
    above :data:`buttonup_env.game.equity.MAX_SOLVED_TARGET`."""
    if plays_the_match(player) and target > equity.MAX_SOLVED_TARGET:
        raise ValueError(
            f"{player!r} plays the match perfectly, which is solved for targets up to "
            f"{equity.MAX_SOLVED_TARGET}, not {target}; use a smaller target or the margin "
            "player ('margin')"
        )


def _playing(state: State) -> State:
    _legal(state)  # a finished round: one sentence
    return state


BOT_NAMES = ("random", "greedy", "margin", "perfect")
"""The names of the built-in bots, as the environments, the scripts and the web app accept
them (weakest first). ``margin`` plays every round for its largest margin; ``perfect`` plays
the game being played perfectly: the match, or in a one-round episode the round."""

BOT_CLASSES: dict[str, type[RandomBot | GreedyBot | MarginBot | PerfectBot]] = {
    "random": RandomBot,
    "greedy": GreedyBot,
    "margin": MarginBot,
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


def make_bot(
    name: str, seed: int | np.random.Generator | None = None, objective: str = "match"
) -> Player:
    """The bot called ``name``: ``random``, ``greedy``, ``margin``, ``perfect`` or a graded
    ``perfect-P``; ``objective`` is what ``perfect`` and ``perfect-P`` play for (``"round"`` in
    a one-round episode).

    Raises ``ValueError`` naming the allowed names for any other name.
    """
    check_objective(objective)
    if name == "perfect":
        return PerfectBot(seed, objective)
    if name in BOT_CLASSES:
        return BOT_CLASSES[name](seed)
    p = graded_p(name)
    if p is None:
        raise ValueError(
            f"{name!r} is not a bot; the bots are {', '.join(BOT_NAMES)} and the graded "
            f"{GRADED_PREFIX}P (a random move with probability P, e.g. {GRADED_PREFIX}0.3)"
        )
    return GradedBot(p, seed, objective)
