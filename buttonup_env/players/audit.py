"""An audit of every decision a player can meet: its move against the exact values, at every
position reachable from the 1,680 set-ups and both starters under any play, at chosen scores.

Exploitability visits only the positions that its best response leads to; the audit visits
them all. A *decision* is a position with two legal moves or more (a real choice), its mover and
the round's starter, at a score of the match: 774,168 of them at 0-0. At each, the player's move
(its move distribution: a deterministic policy puts all of it on one move) is judged twice:

* in **match** terms, the probability of winning the match that it gives away against the best
  move (:func:`buttonup_env.game.equity.match_move_values`): the audit's main figure;
* in **round** terms, the round points it gives away against the margin player's best move
  (:mod:`buttonup_env.game.solver`).

The counts and losses come by move number (1 to 8), by score, and by kind of position (whether
the match asks for another move than the round there), with the worst decisions in the rules'
notation. A policy is asked in batches of its encoding, once per thing it tells apart: a policy
that sees no score is asked once for every score.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..engine.numpy_backend import match_values
from ..engine.tables import GameTables, game_tables
from ..game.equity import TIE_TOLERANCE, match_equity
from ..game.rules import COLORS, DEFAULT_TARGET, NUM_SLOTS, format_board
from .best_response import BoardBehaviour, Questions, board_behaviour

__all__ = ["KINDS", "Audit", "Decision", "audit", "reachable_decisions"]

KINDS = ("the match agrees with the round", "the match asks for another move")
"""The kinds of position: whether every move of the best round margin is also a move of the best
probability of winning the match there."""


@dataclass(frozen=True)
class Decision:
    """One audited decision (the worst ones are kept)."""

    board: str
    """The position in the rules' notation."""
    mover: str
    score: tuple[int, int]
    """Red's points, Black's points."""
    starter: str
    """Who started the round."""
    played: dict[int, float]
    """The player's probability of each slot it may lift."""
    values: dict[int, float]
    """Each legal slot's probability that the mover wins the match."""
    loss: float
    """The probability of winning given away, on average over the player's moves."""

    def to_dict(self) -> dict[str, object]:
        """The decision as JSON-ready data (the score as ``"R-B"``, with its :meth:`line`)."""
        return {
            "board": self.board,
            "mover": self.mover,
            "score": f"{self.score[0]}-{self.score[1]}",
            "starter": self.starter,
            "played": {str(slot): p for slot, p in self.played.items()},
            "values": {str(slot): v for slot, v in self.values.items()},
            "loss": self.loss,
            "line": self.line(),
        }

    def line(self) -> str:
        """The decision on one line."""
        played = ", ".join(f"{s} ({100 * p:.0f}%)" for s, p in self.played.items() if p > 0)
        values = ", ".join(f"{s}: {v:.4f}" for s, v in self.values.items())
        return (
            f"{self.board}  {self.mover} to move at {self.score[0]}-{self.score[1]} "
            f"({self.starter} started): lifts {played}; values {values}; loses {self.loss:.4f}"
        )


@dataclass
class Tally:
    """Counts and losses of a group of decisions."""

    choices: int = 0
    wrong: float = 0.0
    """Decisions where the player's move is not among the best (its expected number)."""
    loss: float = 0.0
    """Sum of the match losses."""
    wrong_round: float = 0.0
    round_loss: float = 0.0

    def add(
        self, wrong: np.ndarray, loss: np.ndarray, wrong_r: np.ndarray, loss_r: np.ndarray
    ) -> None:
        self.choices += len(loss)
        self.wrong += float(wrong.sum())
        self.loss += float(loss.sum())
        self.wrong_round += float(wrong_r.sum())
        self.round_loss += float(loss_r.sum())

    @property
    def mean_loss(self) -> float:
        """Mean match loss per decision."""
        return self.loss / self.choices if self.choices else 0.0

    @property
    def mean_round_loss(self) -> float:
        """Mean round points lost per decision."""
        return self.round_loss / self.choices if self.choices else 0.0

    def to_dict(self) -> dict[str, float]:
        """The counts and losses as JSON-ready data: the real choices, the non-optimal ones
        for the match and for the round (expected counts: a stochastic player's share of a
        wrong move counts), the mean match loss per choice and where it errs, the mean round
        loss per choice."""
        return {
            "choices": self.choices,
            "non_optimal": self.wrong,
            "mean_loss": self.mean_loss,
            "loss_where_wrong": self.loss / self.wrong if self.wrong else 0.0,
            "non_optimal_round": self.wrong_round,
            "mean_round_loss": self.mean_round_loss,
        }


@dataclass
class Audit:
    """What :func:`audit` found (see the module docstring)."""

    target: int
    scores: list[tuple[int, int]]
    total: Tally = field(default_factory=Tally)
    by_move: dict[int, Tally] = field(default_factory=dict)
    """By move number in the round (1 to 8)."""
    by_score: dict[tuple[int, int], Tally] = field(default_factory=dict)
    by_kind: dict[str, Tally] = field(default_factory=dict)
    worst: list[Decision] = field(default_factory=list)
    """The worst decisions, worst first."""
    asked: int = 0
    """Positions the player was asked about."""
    seconds: float = 0.0

    def where(self) -> str:
        """The audited scores in a few words: ``"0-0"``, ``"all 225 scores"``, ``"2 scores"``."""
        if len(self.scores) == 1:
            return f"{self.scores[0][0]}-{self.scores[0][1]}"
        every = "all " if len(self.scores) == self.target**2 else ""
        return f"{every}{len(self.scores)} scores"

    def summary(self) -> str:
        """Several lines: the totals, by move and by kind, at several scores the ten scores of
        the largest mean loss, and the worst decisions (when any was kept)."""
        t = self.total
        lines = [
            f"audit at {self.where()} (target {self.target}, both starters each): "
            f"{t.choices:,} real choices; "
            f"non-optimal for the match {t.wrong:,.0f} ({100 * t.wrong / max(t.choices, 1):.2f}%), "
            f"mean loss {t.mean_loss:.6f} of winning probability per choice"
            + (f" ({t.loss / t.wrong:.4f} where it errs)" if t.wrong else "")
            + f"; for the round {t.wrong_round:,.0f} non-optimal, {t.mean_round_loss:.4f} points "
            f"per choice ({self.seconds:.1f} s, {self.asked:,} positions asked)",
            "by move: "
            + ", ".join(
                f"{m}: {v.mean_loss:.6f} ({v.wrong:,.0f} of {v.choices:,})"
                for m, v in sorted(self.by_move.items())
            ),
        ]
        for kind, v in self.by_kind.items():
            lines.append(
                f"{kind}: {v.choices:,} choices, {v.wrong:,.0f} non-optimal, mean loss "
                f"{v.mean_loss:.6f}"
            )
        if len(self.by_score) > 1:
            worst = sorted(self.by_score.items(), key=lambda item: -item[1].mean_loss)[:10]
            lines.append(
                f"by score, the {len(worst)} of the largest mean loss: "
                + ", ".join(
                    f"{r}-{b}: {v.mean_loss:.6f} ({v.wrong:,.0f} non-optimal)"
                    for (r, b), v in worst
                )
            )
        if self.worst:
            lines.extend(["worst:", *(f"  {d.line()}" for d in self.worst)])
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        """Every figure as JSON-ready data: the totals, by move, by kind and by score (keyed
        ``"R-B"``), and the worst decisions."""
        return {
            "target": self.target,
            "scores": [f"{r}-{b}" for r, b in self.scores],
            "seconds": self.seconds,
            "asked": self.asked,
            "total": self.total.to_dict(),
            "by_move": {str(m): v.to_dict() for m, v in sorted(self.by_move.items())},
            "by_kind": {kind: v.to_dict() for kind, v in self.by_kind.items()},
            "by_score": {f"{r}-{b}": v.to_dict() for (r, b), v in self.by_score.items()},
            "worst": [d.to_dict() for d in self.worst],
        }

    def loss_by_score(self) -> np.ndarray:
        """``[r, b]``: the mean match loss per choice at each audited score (NaN elsewhere)."""
        out = np.full((self.target, self.target), np.nan)
        for (r, b), tally in self.by_score.items():
            out[r, b] = tally.mean_loss
        return out


@dataclass(frozen=True)
class Decisions:
    """The real choices of a round, for one starter: boards and movers."""

    boards: np.ndarray
    mover: np.ndarray


def reachable_decisions(tables: GameTables, starter: int) -> Decisions:
    """Every (board, mover) with two legal moves or more that a round started by ``starter``
    (0 Red, 1 Black) can reach from the 1,680 set-ups under any play."""
    nb = len(tables.boards)
    reach = np.zeros((nb, 2), dtype=bool)
    reach[tables.layouts, starter] = True
    for stacks in range(9, 1, -1):
        rows = np.flatnonzero(tables.num_stacks == stacks)
        for mover in (0, 1):
            here = rows[reach[rows, mover]]
            for j in range(3):
                slots = tables.legal_slots[here, j].astype(np.int64)
                live = slots >= 0
                boards, slots = here[live], slots[live]
                child = tables.next_board[boards, slots]
                after = np.where(tables.extra_turn[boards, slots], mover, 1 - mover)
                going = ~tables.over[child]
                reach[child[going], after[going]] = True
    real = reach & (tables.num_legal[:, None] >= 2)
    boards, mover = np.nonzero(real)
    return Decisions(boards.astype(np.int64), mover.astype(np.int64))


def _parse_scores(scores: Sequence[tuple[int, int]] | str, target: int) -> list[tuple[int, int]]:
    if isinstance(scores, str):
        if scores != "all":
            raise ValueError(f"scores={scores!r} is not allowed; use 'all' or a list of (r, b)")
        return [(r, b) for r in range(target) for b in range(target)]
    out = []
    for score in scores:
        r, b = score
        if not (type(r) is int and type(b) is int and 0 <= r < target and 0 <= b < target):
            raise ValueError(
                f"score {score!r} is not one of a match to {target}: each player's points are "
                f"a whole number from 0 to {target - 1}"
            )
        out.append((r, b))
    if not out:
        raise ValueError("scores is empty; audit at least one score, e.g. (0, 0)")
    return list(dict.fromkeys(out))


def audit(
    player: object,
    scores: Sequence[tuple[int, int]] | str = ((0, 0),),
    target: int = DEFAULT_TARGET,
    *,
    worst: int = 10,
    tables: GameTables | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Audit:
    """Audit ``player`` (a bot, a loaded policy, or anything with ``act(state)``) at every
    decision it can meet at ``scores`` (pairs of Red's and Black's points, or ``"all"``) of a
    match to ``target``, both starters each (see the module docstring). ``progress`` is called
    with the scores done and their number."""
    target = match_equity(target).target  # checks it, and solves the match
    tables = game_tables() if tables is None else tables
    scores = _parse_scores(scores, target)
    start = time.perf_counter()
    behaviour = board_behaviour(player, tables)
    result = Audit(target, scores)
    result.by_kind = {kind: Tally() for kind in KINDS}
    rounds = [reachable_decisions(tables, s) for s in (0, 1)]
    round_values = tables.move_values.astype(np.float64)  # (NB, 2, 9), -128 where illegal
    cache: dict[tuple[int, ...], np.ndarray] = {}
    kept: list[tuple[float, int, Decision]] = []
    for done, (r, b) in enumerate(scores, start=1):
        tally = result.by_score.setdefault((r, b), Tally())
        for s, decisions in enumerate(rounds):
            for colour in (0, 1):
                mine = decisions.mover == colour
                boards = decisions.boards[mine]
                probs = _ask(behaviour, tables, boards, colour, (r, b, s), target, cache, result)
                _judge(
                    tables,
                    result,
                    tally,
                    kept,
                    boards,
                    colour,
                    (r, b, s),
                    probs,
                    round_values,
                    worst,
                )
        if progress is not None:
            progress(done, len(scores))
    kept.sort(key=lambda item: (-item[0], item[1]))
    result.worst = [d for _, _, d in kept[:worst]]
    result.seconds = time.perf_counter() - start
    return result


def _ask(
    behaviour: BoardBehaviour,
    tables: GameTables,
    boards: np.ndarray,
    colour: int,
    column: tuple[int, int, int],
    target: int,
    cache: dict[tuple[int, ...], np.ndarray],
    result: Audit,
) -> np.ndarray:
    """The player's probabilities ``(n, 3)`` on ``boards`` with ``colour`` to move, asked once
    per match it tells apart (the cache)."""
    r, b, s = column
    seen = (
        r if behaviour.sees_score else 0,
        b if behaviour.sees_score else 0,
        s if behaviour.sees_starter else 0,
    )
    key = (s, colour, *seen)  # the boards are the round's of starter s with colour to move
    probs = cache.get(key)
    if probs is None:
        if len(cache) > 8:
            cache.clear()
        views = np.array([seen], dtype=np.int64)
        questions = Questions(boards, colour, np.zeros(len(boards), np.int64), views, target)
        probs = behaviour.probabilities(questions)
        result.asked += len(boards)
        cache[key] = probs
    return probs


def _judge(
    tables: GameTables,
    result: Audit,
    tally: Tally,
    kept: list[tuple[float, int, Decision]],
    boards: np.ndarray,
    colour: int,
    column: tuple[int, int, int],
    probs: np.ndarray,
    round_values: np.ndarray,
    worst: int,
) -> None:
    """Judge the player's moves on ``boards`` and add them to the tallies."""
    r, b, s = column
    n = len(boards)
    mover = np.full(n, colour)
    values = match_values(
        tables, boards, mover, np.tile([r, b], (n, 1)), np.full(n, s), result.target
    )
    best = np.nanmax(values, axis=1, keepdims=True)
    gap = np.where(np.isnan(values), 0.0, best - values)
    gap = np.where(gap <= TIE_TOLERANCE, 0.0, gap)
    loss = (probs * gap).sum(axis=1)
    wrong = (probs * (gap > 0)).sum(axis=1)
    slots = tables.legal_slots[boards].astype(np.int64)
    margins = np.take_along_axis(round_values[boards, colour], np.maximum(slots, 0), axis=1)
    margins = np.where(slots >= 0, margins, -np.inf)
    round_gap = np.where(slots >= 0, margins.max(axis=1, keepdims=True) - margins, 0.0)
    loss_r = (probs * round_gap).sum(axis=1)
    wrong_r = (probs * (round_gap > 0)).sum(axis=1)
    result.total.add(wrong, loss, wrong_r, loss_r)
    tally.add(wrong, loss, wrong_r, loss_r)
    moves = (NUM_SLOTS - tables.num_stacks[boards] + 1).astype(np.int64)
    for move in range(1, 9):
        at = moves == move
        if at.any():
            result.by_move.setdefault(move, Tally()).add(
                wrong[at], loss[at], wrong_r[at], loss_r[at]
            )
    differs = ((round_gap == 0) & (gap > 0) & (slots >= 0)).any(axis=1)
    for kind, at in zip(KINDS, (~differs, differs), strict=True):
        result.by_kind[kind].add(wrong[at], loss[at], wrong_r[at], loss_r[at])
    if worst:
        floor = kept[worst - 1][0] if len(kept) >= worst else 0.0
        for i in np.flatnonzero(loss > max(floor, 0.0)):
            legal = [int(x) for x in slots[i] if x >= 0]
            decision = Decision(
                board=format_board(tables.board(int(boards[i]))),
                mover=COLORS[colour],
                score=(r, b),
                starter=COLORS[s],
                played={slot: float(p) for slot, p in zip(legal, probs[i], strict=False)},
                values={slot: float(v) for slot, v in zip(legal, values[i], strict=False)},
                loss=float(loss[i]),
            )
            kept.append((decision.loss, len(kept), decision))
        kept.sort(key=lambda item: (-item[0], item[1]))
        del kept[worst:]
