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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .rules import DEFAULT_TARGET, LAYOUTS, MAX_ROUND_MARGIN, Color, State, check_target
from .solver import Ring, canonical, final_margin, lift, mover_view, swap_sides

__all__ = [
    "MAX_SOLVED_TARGET",
    "EquityTable",
    "match_equity",
    "match_move_values",
    "match_value",
]

MAX_SOLVED_TARGET = 100
"""The largest target the match is solved for. The work grows with the square of the target
(the scores below it); the target 100 takes about a minute, where 15 takes a fraction of a
second."""

MARGINS = 2 * MAX_ROUND_MARGIN + 1
"""Round margins from -18 to 18: a utility is an array of 37 values, Red's margin + 18."""
_ZERO = MAX_ROUND_MARGIN
_TOLERANCE = 1e-14
_STARTER_INDEX: dict[str, int] = {"R": 0, "B": 1}


# --- the round's positions as a graph ------------------------------------------------------------


@dataclass(frozen=True)
class _Level:
    """The nodes with one number of stacks and their moves: three per node (a position has at
    most three legal moves), padded with a row that the mover never prefers."""

    lo: int
    hi: int
    red_sources: np.ndarray
    """``(3, nodes)``: the row of the value array each move reads when Red is the mover."""
    black_sources: np.ndarray
    """The same when Black is the mover."""


@dataclass(frozen=True)
class RoundGraph:
    """Every position of a round as a node: a canonical ring seen from the mover.

    Nodes are numbered by level (2 stacks first, 9 last), so that every move leads to a lower
    number or ends the round. A value array has ``2 * size + MARGINS + 2`` rows: the value of
    each node with Red to move, then with Black to move, then the utility of each final margin,
    then two rows for the moves a position lacks (-1 for Red, 2 for Black: never the best).
    """

    rings: tuple[Ring, ...]
    index: dict[Ring, int]
    levels: tuple[_Level, ...]
    roots: np.ndarray
    """The nodes the 1,680 set-ups start from (seen from the starter; every set-up seen from
    Black is another set-up seen from Red)."""
    root_weights: np.ndarray
    """How many set-ups start at each root, over 1,680."""

    @property
    def size(self) -> int:
        """The number of nodes."""
        return len(self.rings)

    def node(self, state: State) -> int:
        """The node of a position whose round is not over."""
        return self.index[canonical(mover_view(state.board, state.to_move))[0]]


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
        levels.append(_Level(nodes[0], nodes[-1] + 1, red, black))
    roots, counts = np.unique([index[r] for r in start_rings], return_counts=True)
    return RoundGraph(rings, index, tuple(levels), roots, counts / len(LAYOUTS))


def solve_rounds(
    graph: RoundGraph, utility: np.ndarray, slopes: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """Every node's value for each column of ``utility``, with both players playing perfectly.

    ``utility`` is ``(MARGINS, K)``: what a round ending with Red's margin ``m`` is worth to Red
    (row ``m + 18``) in each of ``K`` games. Red maximises, Black minimises. Returns the value
    array (``2 * size + MARGINS + 2`` rows, see :class:`RoundGraph`) and, with ``slopes``, the
    derivative of each value with respect to the tie's utility (row 18) along the line chosen
    (the first best move).
    """
    n = graph.size
    k = utility.shape[1]
    values = np.empty((2 * n + MARGINS + 2, k))
    values[2 * n : 2 * n + MARGINS] = utility
    values[2 * n + MARGINS] = -1.0  # a missing move, for Red
    values[2 * n + MARGINS + 1] = 2.0  # and for Black
    ties = None
    if slopes:
        ties = np.zeros_like(values)
        ties[2 * n + _ZERO] = 1.0
    for level in graph.levels:
        for sources, offset, best in (
            (level.red_sources, 0, np.max),
            (level.black_sources, n, np.min),
        ):
            moves = values.take(sources, axis=0)  # (3, nodes, k)
            rows = slice(offset + level.lo, offset + level.hi)
            best(moves, axis=0, out=values[rows])
            if ties is not None:  # the slope of the first best move
                slope = ties.take(sources, axis=0)
                top = values[rows]
                ties[rows] = np.where(
                    moves[0] == top, slope[0], np.where(moves[1] == top, slope[1], slope[2])
                )
    return values, ties


def _round_starts(graph: RoundGraph, values: np.ndarray, starters: np.ndarray) -> np.ndarray:
    """Each column's mean value at the start of a round (over the set-ups), ``starters`` being
    the column's starter (0 Red, 1 Black)."""
    rows = graph.roots[:, None] + graph.size * starters[None, :]
    return graph.root_weights @ np.take_along_axis(values, rows, axis=0)


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


def _utilities(
    target: int, columns: Sequence[tuple[int, int, int]], later: np.ndarray, tie_known: bool
) -> np.ndarray:
    """The utility of every margin for each column ``(r, b, starter)``, read from ``later``
    (``[r, b, starter]``: Red's probability at a later round's start). With ``tie_known``
    False the tie's row is left for the caller."""
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


def _solve_diagonal(
    graph: RoundGraph, target: int, columns: list[tuple[int, int, int]], table: np.ndarray
) -> None:
    """Fill ``table`` at ``columns``, the round starts of one sum of scores (with no limit on
    rounds): every result but a tie leads to a solved score, and a tie to one of ``columns``."""
    k = len(columns)
    utility = _utilities(target, columns, table, tie_known=False)
    position = {column: j for j, column in enumerate(columns)}
    tie = np.array([position[(r, b, _next_starter(r, b, s))] for r, b, s in columns])
    starters = np.array([s for _, _, s in columns])
    x = _first_guess(target, columns, table)
    slopes = True
    for _ in range(100):
        utility[_ZERO] = x[tie]
        values, ties = solve_rounds(graph, utility, slopes=slopes)
        g = _round_starts(graph, values, starters)
        if np.max(np.abs(g - x)) <= _TOLERANCE:
            x = g
            break
        if ties is None:  # the guess missed: take the slopes of the line of play it led to
            slopes = True
            x = g
            continue
        # Newton on the current line of play: x = g + h * (x[tie] - x_old[tie]), exactly
        h = _round_starts(graph, ties, starters)
        system = np.eye(k)
        system[np.arange(k), tie] -= h
        x = np.linalg.solve(system, g - h * x[tie])
        slopes = False  # the next pass checks the solution; if the line moved, it moves on
    else:  # pragma: no cover - the iteration converges in a handful of passes
        raise RuntimeError(f"the tie's fixed point at {columns[0][:2]} did not converge")
    for (r, b, s), value in zip(columns, x, strict=True):
        table[r, b, s] = value


def _first_guess(target: int, columns: list[tuple[int, int, int]], table: np.ndarray) -> np.ndarray:
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
    """The table with ``rounds_left`` rounds to play, from the table with one fewer."""
    columns = [(r, b, s) for r in range(target) for b in range(target) for s in (0, 1)]
    table = np.empty((target, target, 2))
    for chunk in range(0, len(columns), 64):
        part = columns[chunk : chunk + 64]
        values, _ = solve_rounds(graph, _utilities(target, part, later, tie_known=True))
        starts = _round_starts(graph, values, np.array([s for _, _, s in part]))
        for (r, b, s), value in zip(part, starts, strict=True):
            table[r, b, s] = value
    return table


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
        table = np.empty((target, target, 2))
        for total in range(2 * target - 2, -1, -1):
            columns = [
                (r, total - r, s)
                for r in range(max(0, total - target + 1), min(total, target - 1) + 1)
                for s in (0, 1)
            ]
            _solve_diagonal(graph, target, columns, table)
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


@functools.lru_cache(maxsize=64)
def _round_values(target: int, r: int, b: int, starter: int, rounds_left: int | None) -> np.ndarray:
    """Every node's value (Red's probability) in a round at ``(r, b)`` started by ``starter``."""
    graph = round_graph()
    if rounds_left is None:
        later = _table(target, None)
    elif rounds_left == 1:
        later = np.full((target, target, 2), 0.5)
    else:
        later = _table(target, rounds_left - 1)
    utility = _utilities(target, [(r, b, starter)], later, tie_known=True)
    values, _ = solve_rounds(graph, utility)
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
    values = _round_values(target, r, b, starter, rounds_left)
    graph = round_graph()
    n = graph.size
    red: dict[int, float] = {}
    for slot in state.legal_moves():
        child = state.child(slot)
        if child.round_over:
            margin = child.score_pair[0] - r - (child.score_pair[1] - b)
            red[slot] = float(values[2 * n + _ZERO + margin])
        else:
            offset = 0 if child.to_move == "R" else n
            red[slot] = float(values[offset + graph.node(child)])
    return red


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


def match_value(state: State, *, rounds_left: int | None = None) -> float:
    """The probability that the player to move wins the match under perfect play of the match
    (the best of :func:`match_move_values`)."""
    return max(match_move_values(state, rounds_left=rounds_left).values())
