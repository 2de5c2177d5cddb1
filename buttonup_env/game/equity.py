"""The match solved: every position's probability of winning the match under perfect play.

A match is played to a target (15 points). A round's result is not worth its margin: the next
round's starter depends on the score (fewer points starts; on equal points, whoever did not
start the round just played), and starting is worth about 0.85 points. So the player who
maximises every round's margin (:mod:`buttonup_env.game.solver`, the *margin* player) is not
perfect at the match. This module solves the match itself.

**The equity table.** For every score ``(r, b)`` below the target and every starter, the
probability that Red wins the match from the start of a round there, when both players play
the match perfectly (:func:`match_equity`). A round's result leads to another score (or ends
the match), whose entry is known once every later score is solved: scores are solved in
decreasing order of ``r + b``. A tied round leads back to the same score with a starter the
rule decides, so the two entries of one score are a small fixed point; it is solved exactly by
policy iteration (Newton's method on a piecewise-linear map: two or three passes).

**The value of a position.** Within a round the match's state does not change, so a round is a
deterministic game whose final margin is worth the entry of the score it leads to. Its values
come from one backward pass over the round's positions, the 12,804 rings of
:mod:`buttonup_env.game.solver` (rotations merged, seen from the mover) for either mover: 25,608
positions, with the match's value at the end of each line. :func:`match_move_values` gives every
legal move's probability that the player to move wins the match; :func:`match_value` the
position's.

**Truncated matches.** With ``rounds_left``, a match still undecided after that many more rounds
is a draw, worth half a win (OpenSpiel's ``max_rounds``: its return 0 is half way between -1 and
+1). Without it (the default) a match has no limit.

Every figure is exact up to float rounding (the fixed points are solved to 1e-14). The whole
table for the target 15 takes well under a second (``benchmarks/bench_solver.py``); it grows
with the square of the target, and targets above :data:`MAX_SOLVED_TARGET` are refused.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .rules import DEFAULT_TARGET, LAYOUTS, MAX_ROUND_MARGIN, Color, State, check_target
from .solver import Ring, canonical, final_margin, lift, mover_view, swap_sides

__all__ = [
    "MAX_SOLVED_TARGET",
    "TIE_TOLERANCE",
    "EquityTable",
    "best_moves",
    "match_equity",
    "match_move_values",
    "match_value",
]

MAX_SOLVED_TARGET = 100
"""The largest target the match is solved for. The work grows with the square of the target
(the scores below it): the target 100 takes about 20 seconds, where 15 takes under one."""

TIE_TOLERANCE = 1e-12
"""Moves whose values differ by at most this are equally good (:func:`best_moves`): a value is
exact up to float rounding, and two lines that end in the same result have the same bits."""

MARGINS = 2 * MAX_ROUND_MARGIN + 1
"""Round margins from -18 to 18: a utility is an array of 37 values, Red's margin + 18."""
_ZERO = MAX_ROUND_MARGIN
_TOLERANCE = 1e-14
_NEVER = 1e9

Column = tuple[int, int, int]
"""A round start: Red's points, Black's points and the starter (0 Red, 1 Black)."""

_STARTER_INDEX: dict[str, int] = {"R": 0, "B": 1}


# --- the round's positions as a graph ------------------------------------------------------------


@dataclass(frozen=True)
class Level:
    """The nodes of a graph with one number of stacks (a contiguous range of numbers) and
    their moves: three per node (a position has at most three legal moves), padded with a row
    that the mover never prefers and that has probability 0."""

    lo: int
    hi: int
    red: np.ndarray
    """``(3, n)``: the row of the value array each move reads when Red is the mover."""
    black: np.ndarray
    """The same when Black is the mover."""


class Graph:
    """Positions of a round as nodes, by level, so that every move leads to a node of the
    level below or ends the round: :class:`RoundGraph` (rings) and the best response's board
    graph (:mod:`buttonup_env.players.best_response`).

    A value array has ``2 * size + MARGINS + 2`` rows: the value of each node with Red to move,
    then with Black to move, then the utility of each final margin (Red's margin + 18), then
    a row for a move a position lacks (-1e9 for Red, 1e9 for Black: never the best, whether
    the values are probabilities or margins).
    """

    size: int
    levels: tuple[Level, ...]

    def solve(
        self,
        utility: np.ndarray,
        players: Mapping[int, Sequence[np.ndarray]] | None = None,
        slopes: bool = False,
        scratch: Scratch | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Every node's value for each column of ``utility`` ``(MARGINS, K)``: what a round
        ending with Red's margin ``m`` is worth to Red (row ``m + 18``) in each of ``K`` games.

        Red maximises, Black minimises, except a colour in ``players`` (0 Red, 1 Black), which
        plays by its probabilities (per level, ``(3, n, K or 1)``: each move's probability, 0 for
        a move the position lacks). Returns the value array and, with ``slopes``, the
        derivative of each value with respect to the tie's utility (row 18) along the line of
        play (the first best move, or the player's mixture).

        With a :class:`Scratch` the arrays returned are its own, overwritten by the next call
        given it.
        """
        players = {} if players is None else players
        n = self.size
        k = utility.shape[1]

        def array(name: str, shape: tuple[int, ...]) -> np.ndarray:
            return np.empty(shape) if scratch is None else scratch.array(name, shape)

        values = array("values", (2 * n + MARGINS + 2, k))
        values[2 * n : 2 * n + MARGINS] = utility
        values[2 * n + MARGINS] = -_NEVER  # a missing move, for Red
        values[2 * n + MARGINS + 1] = _NEVER  # and for Black (finite: its probability is 0)
        ties = None
        if slopes:
            ties = array("ties", values.shape)
            ties[:] = 0.0
            ties[2 * n + _ZERO] = 1.0
        # the moves' values (and slopes) of a level, gathered into one buffer reused level
        # after level
        widest = 3 * k * max((level.hi - level.lo for level in self.levels), default=0)
        buffer = array("moves", (widest,))
        slope_buffer = array("slopes", (widest if slopes else 0,))
        for i, level in enumerate(self.levels):
            shape = (3, level.hi - level.lo, k)
            size = shape[0] * shape[1] * k
            for colour, sources, best in ((0, level.red, np.max), (1, level.black, np.min)):
                moves = buffer[:size].reshape(shape)
                np.take(values, sources, axis=0, out=moves, mode="clip")
                rows = slice(colour * n + level.lo, colour * n + level.hi)
                if ties is not None:
                    slope = slope_buffer[:size].reshape(shape)
                    np.take(ties, sources, axis=0, out=slope, mode="clip")
                if colour in players:
                    p = players[colour][i]
                    if ties is not None:
                        np.multiply(p, slope, out=slope)
                        slope.sum(axis=0, out=ties[rows])
                    np.multiply(p, moves, out=moves)
                    moves.sum(axis=0, out=values[rows])
                    continue
                best(moves, axis=0, out=values[rows])
                if ties is not None:  # the slope of the first best move
                    top = values[rows]
                    ties[rows] = np.where(
                        moves[0] == top, slope[0], np.where(moves[1] == top, slope[1], slope[2])
                    )
        return values, ties

    def round_starts(self, values: np.ndarray, starters: np.ndarray) -> np.ndarray:
        """Each column's mean value over the 1,680 set-ups at the start of a round, for the
        column's starter (``starters``: 0 Red, 1 Black)."""
        raise NotImplementedError


class Scratch:
    """Arrays that :meth:`Graph.solve` fills call after call (its ``scratch``), for a caller
    that reads each call's values before the next: arrays of this size, freed and made anew
    at every call, cost more in the system's zeroed pages than in arithmetic."""

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def array(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """The array ``name`` of ``shape`` (float64, contiguous, its contents left as they
        were): the first elements of the largest asked for so far under that name."""
        size = math.prod(shape)
        kept = self._arrays.get(name)
        if kept is None or kept.size < size:
            kept = self._arrays[name] = np.empty(size)
        return kept[:size].reshape(shape)


class RoundGraph(Graph):
    """Every position of a round as a node: a canonical ring seen from the mover (rotations
    merged), for either mover: 12,804 rings, 25,608 positions.

    Nodes are numbered by level (2 stacks first, 9 last). A move reads, for Red to move, the
    child's row with Red to move after an extra turn and with Black to move otherwise (and
    the other way round for Black), or the final margin's row: the mover's margin for Red, its
    opposite for Black.
    """

    def __init__(
        self,
        rings: tuple[Ring, ...],
        levels: tuple[Level, ...],
        roots: np.ndarray,
        root_weights: np.ndarray,
    ) -> None:
        self.rings = rings
        self.index = {ring: i for i, ring in enumerate(rings)}
        self.size = len(rings)
        self.levels = levels
        self.roots = roots
        """The nodes the 1,680 set-ups start from (seen from the starter; every set-up seen
        from Black is another set-up seen from Red)."""
        self.root_weights = root_weights
        """How many set-ups start at each root, over 1,680."""

    def node(self, state: State) -> int:
        """The node of a position whose round is not over."""
        return self.index[canonical(mover_view(state.board, state.to_move))[0]]

    def round_starts(self, values: np.ndarray, starters: np.ndarray) -> np.ndarray:
        rows = self.roots[:, None] + self.size * starters[None, :]
        return self.root_weights @ np.take_along_axis(values, rows, axis=0)

    def move_values(self, state: State, values: np.ndarray) -> dict[int, float]:
        """``{slot: value}`` after each legal move of ``state`` (a round not over), read from
        one column of a value array of the state's round (``values``, 1-d)."""
        n = self.size
        r, b = state.score_pair
        out: dict[int, float] = {}
        for slot in state.legal_moves():
            child = state.child(slot)
            if child.round_over:  # the round's points are Red's margin, one way or the other
                margin = child.score_pair[0] - r - (child.score_pair[1] - b)
                out[slot] = float(values[2 * n + _ZERO + margin])
            else:
                offset = 0 if child.to_move == "R" else n
                out[slot] = float(values[offset + self.node(child)])
        return out


class _Move(NamedTuple):
    """A legal move of a ring: the child ring (the same mover's view after an extra turn, the
    opponent's otherwise), or the round's end with the mover's margin."""

    child: Ring | None
    extra_turn: bool
    margin: int


def _moves(ring: Ring) -> list[_Move]:
    """Every legal move of ``ring``, in ring order."""
    moves = []
    for i, stack in enumerate(ring):
        if "W" not in stack:
            continue
        child, extra_turn = lift(ring, i)
        if len(child) == 1:
            moves.append(_Move(None, False, final_margin(child[0])))
        elif extra_turn:
            moves.append(_Move(canonical(child)[0], True, 0))
        else:
            moves.append(_Move(canonical(swap_sides(child))[0], False, 0))
    return moves


@functools.cache
def round_graph() -> RoundGraph:
    """The graph of every position reachable from the set-ups (built once per process)."""
    to_red = str.maketrans("RB", "MO")
    start_rings = [canonical(tuple(s.translate(to_red) for s in layout))[0] for layout in LAYOUTS]
    moves: dict[Ring, list[_Move]] = {}
    todo = list(dict.fromkeys(start_rings))
    while todo:
        ring = todo.pop()
        if ring not in moves:
            moves[ring] = _moves(ring)
            todo.extend(m.child for m in moves[ring] if m.child is not None)
    rings = tuple(sorted(moves, key=lambda r: (len(r), r)))
    index = {ring: i for i, ring in enumerate(rings)}
    n = len(rings)
    levels = []
    for stacks in range(2, 10):
        nodes = [i for i, ring in enumerate(rings) if len(ring) == stacks]
        red = np.full((3, len(nodes)), 2 * n + MARGINS, dtype=np.intp)
        black = np.full((3, len(nodes)), 2 * n + MARGINS + 1, dtype=np.intp)
        for row, i in enumerate(nodes):
            for j, move in enumerate(moves[rings[i]]):
                if move.child is None:  # Red's margin is the mover's, or its opposite
                    red[j, row] = 2 * n + _ZERO + move.margin
                    black[j, row] = 2 * n + _ZERO - move.margin
                elif move.extra_turn:  # the same mover again
                    red[j, row], black[j, row] = index[move.child], n + index[move.child]
                else:  # the opponent moves: Red's move reads Black's values and back
                    red[j, row], black[j, row] = n + index[move.child], index[move.child]
        levels.append(Level(nodes[0], nodes[-1] + 1, red, black))
    roots, counts = np.unique([index[r] for r in start_rings], return_counts=True)
    return RoundGraph(rings, tuple(levels), roots, counts / len(LAYOUTS))


# --- the equity table ----------------------------------------------------------------------------


def _next_starter(r: int, b: int, starter: int) -> int:
    if r != b:
        return 0 if r < b else 1
    return 1 - starter


def _outcome(target: int, r: int, b: int, margin: int) -> tuple[int, int] | float:
    """The score after a round of Red's ``margin`` from ``(r, b)``, or Red's 1.0 / 0.0 if it
    ends the match."""
    r2, b2 = r + max(margin, 0), b + max(-margin, 0)
    if r2 >= target:
        return 1.0
    if b2 >= target:
        return 0.0
    return r2, b2


def utilities(
    target: int, columns: Sequence[Column], later: np.ndarray, tie_known: bool
) -> np.ndarray:
    """The utility ``(MARGINS, K)`` of every round margin for each of ``columns``: what the
    round's result is worth to Red, read from ``later`` (``[r, b, starter]``, Red's probability
    at a later round's start; 1 or 0 where the result ends the match). With ``tie_known``
    False the tie's row is left for the caller to fill."""
    utility = np.empty((MARGINS, len(columns)))
    for j, (r, b, s) in enumerate(columns):
        for margin in range(-MAX_ROUND_MARGIN, MAX_ROUND_MARGIN + 1):
            if margin == 0 and not tie_known:
                continue
            after = _outcome(target, r, b, margin)
            if isinstance(after, float):
                utility[_ZERO + margin, j] = after
            else:
                utility[_ZERO + margin, j] = later[(*after, _next_starter(*after, s))]
    return utility


RoundStarts = Callable[[np.ndarray, bool], tuple[np.ndarray, np.ndarray | None]]
"""What a solver of rounds gives :func:`solve_table`: for a utility ``(MARGINS, K)`` (one
column per round start), each round start's value (Red's probability, ``(K,)``) and, when asked,
its derivative with respect to the tie's utility (row 18) along the line of play."""


def solve_table(
    target: int,
    rounds: Callable[[list[Column]], RoundStarts],
    chunk: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """The table ``[r, b, starter]`` of a match to ``target`` with no limit on rounds, filled
    in decreasing order of ``r + b``: ``rounds(columns)`` gives the solver of the rounds that
    start at ``columns`` (every result but a tie leads to a score already solved, a tie to
    one of ``columns``). The perfect players' table (:func:`match_equity`) and a best
    response's (:mod:`buttonup_env.players.best_response`) differ only in ``rounds``.

    ``chunk`` (an even number, or None for a whole diagonal) bounds the round starts solved
    together: a tie links the two starters of one score, never two scores. ``progress`` is
    called with the scores solved so far and their number.
    """
    table = np.empty((target, target, 2))
    done = 0
    for total in range(2 * target - 2, -1, -1):
        columns = [
            (r, total - r, s)
            for r in range(max(0, total - target + 1), min(total, target - 1) + 1)
            for s in (0, 1)
        ]
        size = len(columns) if chunk is None else chunk
        for lo in range(0, len(columns), size):
            part = columns[lo : lo + size]
            values = _fixed_point(target, part, table, rounds(part))
            for (r, b, s), value in zip(part, values, strict=True):
                table[r, b, s] = value
            done += len(part) // 2
            if progress is not None:
                progress(done, target * target)
    return table


def _fixed_point(
    target: int, columns: list[Column], table: np.ndarray, starts: RoundStarts
) -> np.ndarray:
    """The values at ``columns``: a tie sends a round back to one of them, so they are the
    fixed point of the rounds' values, solved by Newton's method on the line of play (the map is
    piecewise linear: exact once the line of play stops changing, two or three passes)."""
    k = len(columns)
    utility = utilities(target, columns, table, tie_known=False)
    position = {column: j for j, column in enumerate(columns)}
    tie = np.array([position[(r, b, _next_starter(r, b, s))] for r, b, s in columns])
    x = _first_guess(target, columns, table)
    slopes = True
    for _ in range(100):
        utility[_ZERO] = x[tie]
        g, h = starts(utility, slopes)
        if np.max(np.abs(g - x)) <= _TOLERANCE:
            return g
        if h is None:  # the line of play moved: take its slopes
            slopes = True
            x = g
            continue
        # Newton on the current line of play: x = g + h * (x[tie] - x_old[tie]), exactly
        system = np.eye(k)
        system[np.arange(k), tie] -= h
        x = np.linalg.solve(system, g - h * x[tie])
        slopes = False  # the next pass checks the solution
    raise RuntimeError(  # pragma: no cover - the iteration converges in a handful of passes
        f"the tie's fixed point at {columns[0][:2]} did not converge"
    )


def _first_guess(target: int, columns: list[Column], table: np.ndarray) -> np.ndarray:
    """A guess at each column's value: the mean of the two scores one point further on."""
    guess = []
    for r, b, s in columns:
        ahead = [_outcome(target, r, b, 1), _outcome(target, r, b, -1)]
        guess.append(
            np.mean(
                [a if isinstance(a, float) else table[(*a, _next_starter(*a, s))] for a in ahead]
            )
        )
    return np.array(guess)


def _solve_rounds_left(graph: RoundGraph, target: int, later: np.ndarray) -> np.ndarray:
    """The table of a match with one more round left than ``later``'s (each round start's
    value when an undecided match becomes ``later``'s after this round)."""
    columns = [(r, b, s) for r in range(target) for b in range(target) for s in (0, 1)]
    table = np.empty((target, target, 2))
    for chunk in range(0, len(columns), 64):
        part = columns[chunk : chunk + 64]
        values, _ = graph.solve(utilities(target, part, later, tie_known=True))
        starts = graph.round_starts(values, np.array([s for _, _, s in part]))
        for (r, b, s), value in zip(part, starts, strict=True):
            table[r, b, s] = value
    return table


def _perfect_rounds(graph: RoundGraph, columns: list[Column]) -> RoundStarts:
    """The rounds at ``columns`` under perfect play of the match by both players."""
    starters = np.array([s for _, _, s in columns])

    def starts(utility: np.ndarray, slopes: bool) -> tuple[np.ndarray, np.ndarray | None]:
        values, ties = graph.solve(utility, slopes=slopes)
        h = None if ties is None else graph.round_starts(ties, starters)
        return graph.round_starts(values, starters), h

    return starts


def _check_target(target: object) -> int:
    target = check_target(target)
    if target > MAX_SOLVED_TARGET:
        raise ValueError(
            f"target={target} is not solved: the match is solved for targets from 1 to "
            f"{MAX_SOLVED_TARGET} (the work grows with the square of the target)"
        )
    return target


def _check_rounds_left(rounds_left: object) -> int | None:
    if rounds_left is None:
        return None
    if type(rounds_left) is not int or not 0 <= rounds_left <= 10_000:
        raise ValueError(
            f"rounds_left={rounds_left!r} is not allowed; use None (no limit) or a whole "
            "number of rounds from 0 to 10,000"
        )
    return rounds_left


@functools.lru_cache(maxsize=32)
def _table(target: int, rounds_left: int | None) -> np.ndarray:
    graph = round_graph()
    if rounds_left is not None:
        table = np.full((target, target, 2), 0.5)  # no round left: a draw
        for _ in range(rounds_left):
            table = _solve_rounds_left(graph, target, table)
    else:
        table = solve_table(target, functools.partial(_perfect_rounds, graph))
    table.flags.writeable = False
    return table


@dataclass(frozen=True)
class EquityTable:
    """The match's equity at every round start: Red's probability of winning the match from the
    start of a round at score ``(r, b)`` with ``starter`` to move first, under perfect play of
    the match by both players (a draw, in a truncated match, counts as half a win)."""

    target: int
    rounds_left: int | None
    """The rounds the match may still have (None: no limit)."""
    red: np.ndarray
    """``red[r, b, s]``: Red's probability, ``s`` 0 when Red starts the round and 1 when Black
    does (read-only, ``(target, target, 2)``)."""

    def win_probability(self, color: Color, score: tuple[int, int], starter: Color) -> float:
        """``color``'s probability of winning the match from the start of a round at ``score``
        (Red's points, Black's points) that ``starter`` starts."""
        r, b = score
        if r >= self.target or b >= self.target:
            red = 1.0 if r >= self.target else 0.0
        else:
            red = float(self.red[r, b, _STARTER_INDEX[starter]])
        return red if color == "R" else 1.0 - red

    @property
    def first_starter(self) -> float:
        """The probability that the first round's starter wins the match (from 0-0)."""
        return float(self.red[0, 0, 0])


def match_equity(target: int = DEFAULT_TARGET, *, rounds_left: int | None = None) -> EquityTable:
    """The equity table of a match to ``target`` (see :class:`EquityTable`).

    Computed once per process and target (well under a second for 15), then cached. With
    ``rounds_left`` the match is cut after that many rounds: an undecided match is then a draw.
    Raises ``ValueError`` in one sentence for a target outside 1 to :data:`MAX_SOLVED_TARGET`.
    """
    target = _check_target(target)
    rounds_left = _check_rounds_left(rounds_left)
    return EquityTable(target, rounds_left, _table(target, rounds_left))


# --- the values of a position --------------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def round_values(
    target: int, r: int, b: int, starter: int, rounds_left: int | None = None
) -> np.ndarray:
    """Every position's value (Red's probability of winning the match under perfect play of
    the match) in a round at ``(r, b)`` started by ``starter`` (0 Red, 1 Black): a read-only
    value array of :func:`round_graph` (see :class:`Graph`), 205 KB. Cached for the 512
    latest: every round start of a match to 15 (450) fits."""
    target = _check_target(target)
    graph = round_graph()
    if rounds_left is None:
        later = _table(target, None)
    elif rounds_left == 1:
        later = np.full((target, target, 2), 0.5)
    else:
        later = _table(target, rounds_left - 1)
    utility = utilities(target, [(r, b, starter)], later, tie_known=True)
    values, _ = graph.solve(utility)
    values = values[:, 0]
    values.flags.writeable = False
    return values


def _red_values(state: State, rounds_left: int | None) -> dict[int, float]:
    """Red's probability after each legal move of ``state``."""
    target = _check_target(state.target)
    rounds_left = _check_rounds_left(rounds_left)
    if rounds_left == 0:
        raise ValueError("rounds_left=0 leaves no round to play; the position is in a round")
    if state.round_over:
        raise ValueError(f"the round is over on {state.notation!r}; there is no move to value")
    r, b = state.score_pair
    if max(r, b) >= target:
        raise ValueError(
            f"the match is already won at {r}-{b} (target {target}); there is no move to value"
        )
    starter = _STARTER_INDEX[state.starter]
    return round_graph().move_values(state, round_values(target, r, b, starter, rounds_left))


def match_move_values(state: State, *, rounds_left: int | None = None) -> dict[int, float]:
    """``{slot: probability}`` for every legal move of ``state``: the probability that the
    player to move wins the match after that move, when both players then play the match
    perfectly (its score, target and starter are the state's).

    ``rounds_left`` (None: no limit) counts the rounds the match may still have, this one
    included; an undecided match is then a draw, worth half a win. Raises ``ValueError`` for a
    finished round, a match already won, or a target above :data:`MAX_SOLVED_TARGET`.
    """
    red = _red_values(state, rounds_left)
    if state.to_move == "R":
        return red
    return {slot: 1.0 - p for slot, p in red.items()}


def best_moves(values: dict[int, float]) -> list[int]:
    """The slots of the best value in ``values`` (a :func:`match_move_values` answer), within
    :data:`TIE_TOLERANCE`, in increasing order."""
    best = max(values.values())
    return [slot for slot, value in values.items() if value >= best - TIE_TOLERANCE]


def match_value(state: State, *, rounds_left: int | None = None) -> float:
    """The probability that the player to move wins the match under perfect play of the match
    (the best of :func:`match_move_values`)."""
    return max(match_move_values(state, rounds_left=rounds_left).values())
