"""The exact best response to any player in a match, and the player's match exploitability.

A player's *match exploitability* is what a best response gains against it: the best response's
probability of winning the match from 0-0, averaged over its seat and the first round's
starter, minus 0.5 (what it would win against perfect play of the match). Perfect play of the
match (:class:`~buttonup_env.players.bots.PerfectBot`) scores 0; the margin player
(:class:`~buttonup_env.players.bots.MarginBot`) about 0.0564 at the target 15. Nothing is
sampled: every reply of the best response is searched, and the player's own move distribution
is read at every position, score and starter that its observation tells apart.

How. For one seat of the player, the match is a game of one decision maker: the best response
maximises its probability of winning, and the player's moves are chance moves with its own
probabilities. Its table of round starts is solved as the perfect players' is
(:func:`buttonup_env.game.equity.solve_table`: scores in decreasing order, the tie's fixed
point by Newton's method), with a backward pass over the round's positions:

* a bot plays alike on every rotation of a board, so it is solved on the 25,608 rings of
  :func:`~buttonup_env.game.equity.round_graph` (:class:`RingBot`: a second or less);
* anyone else on the rules engine's 315,480 boards (:class:`BoardGraph`), since a policy may see
  where a stack lies. A policy is asked through its batched inference on the observations its
  encoding makes (:func:`board_behaviour`), only at the positions a best response can reach
  (its own moves of probability 0 prune the tree), and once per thing it tells apart (one
  that does not see the score is asked once per board).

A player that sees its position from its own side (every bot and policy) gives away as much
from either seat, so one seat is solved; any other player is asked in both.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..engine.tables import BLACK, RED, GameTables, game_tables
from ..game import equity, solver
from ..game.equity import MARGINS, TIE_TOLERANCE, Column
from ..game.rules import COLORS, DEFAULT_TARGET, MAX_ROUND_MARGIN, State, is_whole_number
from . import deadline
from .bots import GradedBot, GreedyBot, MarginBot, PerfectBot, RandomBot

__all__ = [
    "BestResponseBot",
    "BoardBehaviour",
    "MatchBestResponse",
    "board_behaviour",
    "match_best_response",
    "match_exploitability",
    "match_result",
]

_ZERO = MAX_ROUND_MARGIN
_CHUNK = 16
"""Round starts solved together: a diagonal of the table is cut into chunks of this many (the
two starters of a score stay together: a tie links them)."""


# --- the boards as a graph ---------------------------------------------------------------------


class BoardGraph(equity.Graph):
    """Every board of the game tables as a node of the round, for either mover (a policy may
    see where a stack lies, so rotations are not merged here). Boards are numbered breadth
    first from the set-ups, so each level is a contiguous range; a move reads the child board's
    row for the next mover, or the final margin's row (Red's margin: boards keep colours)."""

    def __init__(self, tables: GameTables) -> None:
        nb = len(tables.boards)
        self.tables = tables
        self.size = nb
        slots = tables.legal_slots.astype(np.int64)
        live = slots >= 0
        safe = np.where(live, slots, 0)
        rows = np.arange(nb)[:, None]
        child = np.where(live, tables.next_board[rows, safe], 0)
        extra = live & tables.extra_turn[rows, safe]
        end = 2 * nb + _ZERO + tables.final_margin[child].astype(np.int64)
        over = tables.over[child]
        red = np.where(over, end, np.where(extra, child, nb + child))
        black = np.where(over, end, np.where(extra, nb + child, child))
        self.sources = (
            np.where(live, red, 2 * nb + MARGINS),
            np.where(live, black, 2 * nb + MARGINS + 1),
        )
        """Per mover (0 Red, 1 Black), ``(NB, 3)``: the row each legal slot's move reads."""
        stacks = tables.num_stacks
        levels = []
        for count in range(2, 10):  # children have one stack fewer: lower levels first
            where = np.flatnonzero(stacks == count)
            lo, hi = int(where[0]), int(where[-1]) + 1
            assert hi - lo == len(where), "boards are numbered level by level"
            red_rows, black_rows = (np.ascontiguousarray(s[lo:hi].T) for s in self.sources)
            levels.append(equity.Level(lo, hi, red_rows, black_rows))
        self.levels = tuple(levels)
        self.starts = tables.layouts.astype(np.int64)
        """The set-ups' boards (the first 1,680)."""

    def round_starts(self, values: np.ndarray, starters: np.ndarray) -> np.ndarray:
        rows = self.starts[:, None] + self.size * starters[None, :]
        return np.take_along_axis(values, rows, axis=0).mean(axis=0)


_GRAPHS: dict[int, BoardGraph] = {}


def board_graph(tables: GameTables | None = None) -> BoardGraph:
    """The board graph of ``tables`` (the process's game tables by default), built once."""
    tables = game_tables() if tables is None else tables
    graph = _GRAPHS.get(id(tables))
    if graph is None or graph.tables is not tables:
        graph = _GRAPHS[id(tables)] = BoardGraph(tables)
    return graph


# --- what a player plays, on boards -----------------------------------------------------------


@dataclass(frozen=True)
class Questions:
    """Positions to ask a player about, one per row: a board it is to move on (from the game
    tables, with two legal moves or more), its colour, and the match around it."""

    boards: np.ndarray
    own: int
    """The player's colour (0 Red, 1 Black), the same for every row."""
    view: np.ndarray
    """Each row's match: a row of ``views``."""
    views: np.ndarray
    """``(V, 3)``: Red's points, Black's points and who started the round (0 Red, 1 Black);
    0 where the player does not see them (:attr:`BoardBehaviour.sees_score`, ``sees_starter``)."""
    target: int

    def __len__(self) -> int:
        return len(self.boards)

    @property
    def score(self) -> np.ndarray:
        """``(n, 2)``: Red's points and Black's points of every row."""
        return self.views[self.view, :2]

    @property
    def starter(self) -> np.ndarray:
        """``(n,)``: who started every row's round."""
        return self.views[self.view, 2]


class BoardBehaviour(Protocol):
    """A player's move probabilities on boards, asked in batches."""

    sees_score: bool
    """Whether its moves may depend on the score (and target)."""
    sees_starter: bool
    """Whether they may depend on who started the round."""
    own_side: bool
    """Whether it sees the position from its own side only (so that it plays Black's side of a
    board as it plays Red's side of the board with the colours swapped)."""
    cheap: bool
    """Whether asking about every board costs little (a bot that sees no score is then asked
    once about every board); otherwise it is asked only at the positions a best response can
    reach."""

    def probabilities(self, questions: Questions) -> np.ndarray:
        """``(n, 3)``: the probability of each legal slot, in increasing order (0 past the
        last legal one)."""
        ...


def _from_mask(mask: np.ndarray, tables: GameTables, boards: np.ndarray) -> np.ndarray:
    """Uniform probabilities over the slots of ``mask`` (``(n, 9)``), in legal-slot order."""
    slots = tables.legal_slots[boards].astype(np.int64)
    chosen = np.take_along_axis(mask, np.maximum(slots, 0), axis=1) & (slots >= 0)
    return chosen / chosen.sum(axis=1, keepdims=True)


@dataclass
class TableBot:
    """A bot whose candidates are a mask of the game tables (``[board, colour, slot]``),
    played uniformly: the random, greedy and margin bots."""

    moves: np.ndarray
    tables: GameTables
    sees_score: bool = False
    sees_starter: bool = False
    own_side: bool = True
    cheap: bool = True

    def probabilities(self, questions: Questions) -> np.ndarray:
        mask = self.moves[questions.boards, questions.own]
        return _from_mask(mask, self.tables, questions.boards)


@dataclass
class MatchPerfect:
    """Perfect play of the match, uniform among the best moves, mixed with a uniformly random
    move with probability ``p`` (the graded bots; 0 for the perfect bot)."""

    tables: GameTables
    p: float = 0.0
    sees_score: bool = True
    sees_starter: bool = True
    own_side: bool = True
    cheap: bool = True
    _solved: tuple[tuple[int, bytes], np.ndarray] | None = field(default=None, repr=False)

    def probabilities(self, questions: Questions) -> np.ndarray:
        tables, target = self.tables, questions.target
        graph = board_graph(tables)
        key = (target, questions.views.tobytes())
        if self._solved is None or self._solved[0] != key:  # one pass for a whole chunk
            later = equity.match_equity(target).red
            starts = [(int(r), int(b), int(s)) for r, b, s in questions.views]
            self._solved = key, graph.solve(equity.utilities(target, starts, later, True))[0]
        values = self._solved[1]
        which = questions.view
        boards = questions.boards
        slots = tables.legal_slots[boards].astype(np.int64)
        moves = values[graph.sources[questions.own][boards], which.reshape(-1, 1)]  # (n, 3)
        sign = 1.0 if questions.own == RED else -1.0  # Black's probability is 1 - Red's
        mine = np.where(slots >= 0, sign * moves, -np.inf)
        best = mine >= mine.max(axis=1, keepdims=True) - TIE_TOLERANCE
        probs = best / best.sum(axis=1, keepdims=True)
        if self.p:
            legal = slots >= 0
            probs = (1 - self.p) * probs + self.p * legal / legal.sum(axis=1, keepdims=True)
        return probs


def _cores() -> int:
    """The cores this process may run on, at most 4."""
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return max(1, min(4, len(cores) if cores else (os.cpu_count() or 1)))


@dataclass
class PolicyBehaviour:
    """An exported policy: its batched inference on the observations of its encoding, the
    argmax of the legal logits when deterministic, else their softmax."""

    policy: Any
    tables: GameTables
    own_side: bool = True
    cheap: bool = False
    batch: int = 1_024
    """Positions per call of the policy: onnxruntime scores them fastest in batches whose
    activations stay in the processor's cache, and small arrays are not page-faulted anew at
    every call (benchmarks/README.md)."""
    threads: int = field(default_factory=_cores)
    """Batches scored at once, one a thread, for a policy whose ``thread_safe`` is true (an
    ONNX policy: onnxruntime and the observations' compiled kernel let go of Python's lock);
    by default the cores this process may run on, at most 4."""
    sees_score: bool = field(init=False)
    sees_starter: bool = field(init=False)
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("batch", "threads"):
            value = getattr(self, name)
            if not is_whole_number(value) or value < 1:
                raise ValueError(f"{name}={value!r} is not allowed; use a whole number, 1 or more")
        encoding = self.policy.encoding
        self.sees_score = encoding.sees_score
        self.sees_starter = encoding.sees_starter

    def probabilities(self, questions: Questions) -> np.ndarray:
        out = np.zeros((len(questions), 3))
        score, starter = questions.score, questions.starter  # each computed once
        starts = range(0, len(questions), self.batch)
        threads = self.threads if getattr(self.policy, "thread_safe", False) else 1
        if threads == 1 or len(starts) == 1:
            for lo in starts:
                self._score(questions, score, starter, lo, out)
            return out
        if self._pool is None:
            self._pool = ThreadPoolExecutor(threads, thread_name_prefix="buttonup-policy")
        group = deadline.current()  # the caller's runs are stopped together: these too

        def batch(lo: int) -> None:
            with deadline.within(group):
                self._score(questions, score, starter, lo, out)

        for _ in self._pool.map(batch, starts):  # raises the first batch's error, if any
            pass
        return out

    def _score(
        self,
        questions: Questions,
        score: np.ndarray,
        starter: np.ndarray,
        lo: int,
        out: np.ndarray,
    ) -> None:
        """The probabilities of the batch of ``questions`` from row ``lo`` into ``out``."""
        from ..engine.numba_backend import observations  # numba only when it is used

        encoding = self.policy.encoding
        part = slice(lo, lo + self.batch)
        boards = questions.boards[part]
        n = len(boards)
        obs = observations(
            self.tables,
            encoding.name,
            boards,
            np.full(n, questions.own),
            score[part],
            questions.target,
            starter[part],
        )
        logits = self.policy.logits(obs).astype(np.float64)
        slots = self.tables.legal_slots[boards].astype(np.int64)
        legal = slots >= 0
        if encoding.actions == 3:
            scores = logits
        else:
            scores = np.take_along_axis(logits, np.maximum(slots, 0), axis=1)
        scores = np.where(legal, scores, -np.inf)
        if getattr(self.policy, "deterministic", True):
            probs = np.zeros((n, 3))
            probs[np.arange(n), np.argmax(scores, axis=1)] = 1.0
        else:
            z = np.exp(scores - scores.max(axis=1, keepdims=True))
            probs = z / z.sum(axis=1, keepdims=True)
        out[part] = probs


@dataclass
class ActBehaviour:
    """Any player with ``act(state) -> slot``, asked one position at a time: the slot it
    lifts has probability 1 (it is asked once per position, so a player that draws at random
    is judged by the draws it made)."""

    player: Any
    tables: GameTables
    sees_score: bool = True
    sees_starter: bool = True
    own_side: bool = False
    cheap: bool = False

    def probabilities(self, questions: Questions) -> np.ndarray:
        out = np.zeros((len(questions), 3))
        colour = COLORS[questions.own]
        score, starter = questions.score.tolist(), questions.starter.tolist()
        for i, board in enumerate(questions.boards.tolist()):
            state = State(
                self.tables.board(board),
                colour,
                {"R": score[i][0], "B": score[i][1]},
                questions.target,
                COLORS[starter[i]],
            )
            slot = self.player.act(state)
            legal = list(state.legal_moves())
            if slot not in legal:
                raise ValueError(
                    f"{self.player!r} lifted slot {slot!r} on {state.notation!r}; the legal "
                    f"slots are {legal}"
                )
            out[i, legal.index(slot)] = 1.0
        return out


# --- bots on rings ------------------------------------------------------------------------------


@dataclass
class RingBot:
    """A bot that plays alike on every rotation of a board, so that it can be solved on the
    rings of :class:`~buttonup_env.game.equity.RoundGraph` (25,608 positions, not 630,960):
    uniform among its candidates. ``kind`` is ``"random"``, ``"greedy"``, ``"margin"`` or
    ``"match"`` (perfect play of the match, mixed with a random move with probability ``p``)."""

    kind: str
    p: float = 0.0
    own_side: bool = True

    @property
    def sees_score(self) -> bool:
        return self.kind == "match"

    def probabilities(
        self, graph: equity.RoundGraph, seat: int, columns: list[Column], target: int
    ) -> list[np.ndarray]:
        """Per level of ``graph``, ``(3, n, K or 1)``: each move's probability for the bot in
        ``seat`` in the rounds that start at ``columns``."""
        pad = 2 * graph.size + MARGINS + seat
        if self.kind == "match":
            later = equity.match_equity(target).red
            values = graph.solve(equity.utilities(target, columns, later, True))[0]
        elif self.kind == "margin":  # the round solver's values: a margin is worth itself
            margins = np.arange(-MAX_ROUND_MARGIN, MAX_ROUND_MARGIN + 1, dtype=float)
            values = graph.solve(margins[:, None])[0]
        out = []
        for i, level in enumerate(graph.levels):
            sources = level.red if seat == RED else level.black
            live = (sources != pad)[:, :, None]
            if self.kind == "random":
                chosen = live
            elif self.kind == "greedy":
                chosen = _ring_greedy(graph)[i][:, :, None]
            else:
                sign = 1.0 if seat == RED else -1.0  # Black's probability is 1 - Red's
                mine = np.where(live, sign * values.take(sources, axis=0), -np.inf)
                chosen = mine >= mine.max(axis=0, keepdims=True) - TIE_TOLERANCE
            probs = chosen / chosen.sum(axis=0, keepdims=True)
            if self.p:
                probs = (1.0 - self.p) * probs + self.p * live / live.sum(axis=0, keepdims=True)
            out.append(probs)
        return out


_GREEDY: dict[int, list[np.ndarray]] = {}


def _ring_greedy(graph: equity.RoundGraph) -> list[np.ndarray]:
    """Per level, ``(3, n)``: the greedy bot's candidates on each ring (moves that earn
    another turn first, then the best margin counting every stack as final)."""
    cached = _GREEDY.get(id(graph))
    if cached is not None:
        return cached
    out = []
    for level in graph.levels:
        mask = np.zeros((3, level.hi - level.lo), dtype=bool)
        for row, ring in enumerate(graph.rings[level.lo : level.hi]):
            scored = []
            for i, stack in enumerate(ring):
                if "W" in stack:
                    child, extra_turn = solver.lift(ring, i)
                    margin = sum(solver.final_margin(s) for s in child)
                    scored.append((extra_turn and len(child) > 1, margin))
            best = max(scored)
            mask[: len(scored), row] = [score == best for score in scored]
        out.append(mask)
    _GREEDY[id(graph)] = out
    return out


def _ring_bot(player: object) -> RingBot | None:
    """The ring form of a bot, or None for a player that is not one."""
    if isinstance(player, RandomBot):
        return RingBot("random")
    if isinstance(player, GreedyBot):
        return RingBot("greedy")
    if isinstance(player, MarginBot) or (
        isinstance(player, PerfectBot) and player.objective == "round"
    ):
        return RingBot("margin")
    if isinstance(player, PerfectBot):
        return RingBot("match")
    if isinstance(player, GradedBot):
        if player.objective == "round":
            raise ValueError(
                f"{player!r} plays the round; its match exploitability is not computed "
                "(use a graded bot of the match)"
            )
        return RingBot("match", player.p)
    return None


def board_behaviour(player: object, tables: GameTables | None = None) -> BoardBehaviour:
    """How ``player`` plays on boards: a bot by its rule, a policy (anything with ``logits``
    and an ``encoding``) by its batched inference, anything else with ``act(state)`` one
    position at a time."""
    tables = game_tables() if tables is None else tables
    if isinstance(player, RandomBot):
        return TableBot(tables.legal[:, None, :].repeat(2, axis=1), tables)
    if isinstance(player, GreedyBot):
        return TableBot(tables.greedy_moves, tables)
    if isinstance(player, MarginBot) or (
        isinstance(player, PerfectBot) and player.objective == "round"
    ):
        return TableBot(tables.margin_moves, tables)
    if isinstance(player, PerfectBot):
        return MatchPerfect(tables)
    if isinstance(player, GradedBot):
        if player.objective == "round":
            raise ValueError(
                f"{player!r} plays the round; its match exploitability is not computed "
                "(use a graded bot of the match)"
            )
        return MatchPerfect(tables, player.p)
    if callable(getattr(player, "logits", None)) and hasattr(player, "encoding"):
        return PolicyBehaviour(player, tables)
    if callable(getattr(player, "act", None)):
        return ActBehaviour(player, tables)
    raise ValueError(f"{player!r} is not a player: it has no act(state) method")


# --- asking the player ----------------------------------------------------------------------------


def _views(behaviour: BoardBehaviour, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct matches the player tells apart among ``columns`` (``(K, 3)``: Red's points,
    Black's, the starter) and which one each column is."""
    seen = columns.copy()
    if not behaviour.sees_score:
        seen[:, :2] = 0
    if not behaviour.sees_starter:
        seen[:, 2] = 0
    views, which = np.unique(seen, axis=0, return_inverse=True)
    return views, which.reshape(-1)


@dataclass
class _Asked:
    """The player's probabilities on the boards of a chunk of round starts, per level."""

    probabilities: list[np.ndarray]
    """Per level of the graph, ``(3, n, K)`` (``K`` 1 when the player sees no difference)."""
    questions: int
    """Positions asked about."""
    reach: np.ndarray | None
    """Which value rows (and columns) a best response can reach, None where every board was
    asked about."""


def _ask(
    behaviour: BoardBehaviour,
    graph: BoardGraph,
    target: int,
    seat: int,
    columns: list[Column],
    seeds: np.ndarray | None = None,
) -> _Asked:
    """Ask the player in ``seat`` about its positions in the rounds that start at ``columns``:
    every board if it is cheap, else those a best response can reach from the set-ups (and
    from the value rows ``seeds``, ``(rows, columns)`` pairs) given the player's own moves."""
    nb = graph.size
    cols = np.array(columns, dtype=np.int64).reshape(-1, 3)
    views, which = _views(behaviour, cols)
    k = len(columns) if len(views) > 1 else 1
    which = which if k > 1 else np.zeros(1, dtype=np.int64)
    probabilities = [np.zeros((3, level.hi - level.lo, k)) for level in graph.levels]
    reach = None
    if not (behaviour.cheap and k == 1):
        reach = np.zeros((2 * nb + MARGINS + 2, len(columns)), dtype=bool)
        reach[graph.starts[:, None] + nb * cols[None, :, 2], np.arange(len(columns))] = True
        if seeds is not None:
            reach[seeds[0], seeds[1]] = True
    questions = 0
    for i in reversed(range(len(graph.levels))):  # from the set-ups down
        level = graph.levels[i]
        own = slice(seat * nb + level.lo, seat * nb + level.hi)
        asked_rows, asked_views = [], []
        for v in range(len(views)):
            in_view = np.flatnonzero(which == v) if k > 1 else np.arange(len(columns))
            if reach is None:
                rows = np.arange(level.hi - level.lo)
            else:
                rows = np.flatnonzero(reach[own][:, in_view].any(axis=1))
            asked_rows.append(rows)
            asked_views.append(np.full(len(rows), v))
        rows, view = np.concatenate(asked_rows), np.concatenate(asked_views)
        single = graph.tables.num_legal[rows + level.lo] == 1  # no choice: nothing to ask
        probabilities[i][0, rows[single], :] = 1.0
        rows, view = rows[~single], view[~single]
        if len(rows):
            asked = behaviour.probabilities(Questions(rows + level.lo, seat, view, views, target))
            questions += len(rows)
            if k == 1:
                probabilities[i][:, rows, 0] = asked.T
            else:  # every column of the view: the player cannot tell them apart
                for j in range(len(columns)):
                    mine = view == which[j]
                    probabilities[i][:, rows[mine], j] = asked[mine].T
        if reach is not None:
            _spread(graph, level, seat, reach, probabilities[i])
    return _Asked(probabilities, questions, reach)


def _spread(
    graph: BoardGraph, level: equity.Level, seat: int, reach: np.ndarray, probabilities: np.ndarray
) -> None:
    """Mark what the reachable nodes of ``level`` lead to: every move of the best response,
    the player's moves of probability above 0."""
    nb = graph.size
    for colour, sources in ((RED, level.red), (BLACK, level.black)):
        here = reach[colour * nb + level.lo : colour * nb + level.hi]  # (n, K)
        for j in range(3):
            moves = here.copy()
            if colour == seat:
                moves &= probabilities[j] > 0  # (n, K or 1)
            nodes, cols = np.nonzero(moves)
            reach[sources[j][nodes], cols] = True


# --- the best response -------------------------------------------------------------------------


@dataclass(frozen=True)
class MatchBestResponse:
    """A player's match exploitability and the best response's tables."""

    target: int
    exploitability: float
    """The best response's probability of winning from 0-0, averaged over its seat and the
    first round's starter, minus 0.5."""
    wins: dict[tuple[str, str], float]
    """The best response's probability of winning from 0-0 by (the player's colour, the first
    round's starter)."""
    tables: dict[str, np.ndarray]
    """By the player's colour: Red's probability of winning from each round start
    ``[r, b, starter]`` when the best response plays the other colour."""
    questions: int
    """Positions the player was asked about."""
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (the wins keyed ``"player R, B starts"``)."""
        return {
            "target": self.target,
            "exploitability": self.exploitability,
            "wins": {f"player {c}, {f} starts": p for (c, f), p in sorted(self.wins.items())},
            "questions": self.questions,
            "seconds": self.seconds,
        }

    def summary(self) -> str:
        """One line: the exploitability and what it is made of."""
        seats = ", ".join(
            f"{100 * p:.2f}% (player {c}, {f} starts)" for (c, f), p in sorted(self.wins.items())
        )
        return (
            f"match exploitability: {self.exploitability:.4f} (target {self.target}; the best "
            f"response wins {100 * (0.5 + self.exploitability):.2f}% of matches from 0-0: "
            f"{seats}; exact, "
            + (f"{self.questions:,} positions asked" if self.questions else "on rings")
            + f", {self.seconds:.1f} s)"
        )


def _seat_table(
    player: RingBot | BoardBehaviour,
    graph: equity.Graph,
    target: int,
    seat: int,
    counter: list[int],
    progress: Callable[[int, int], None] | None,
) -> np.ndarray:
    """Red's probability at every round start with ``player`` in ``seat`` and a best response
    in the other."""

    def ask(columns: list[Column]) -> list[np.ndarray]:
        if isinstance(player, RingBot):
            assert isinstance(graph, equity.RoundGraph)
            return player.probabilities(graph, seat, columns, target)
        assert isinstance(graph, BoardGraph)
        asked = _ask(player, graph, target, seat, columns)
        counter[0] += asked.questions
        return asked.probabilities

    shared = None  # a bot that sees no score plays every board alike in every round
    if not player.sees_score and (isinstance(player, RingBot) or player.cheap):
        shared = ask([(0, 0, 0)])

    scratch = equity.Scratch()  # each solve's values are read before the next

    def rounds(columns: list[Column]) -> equity.RoundStarts:
        probabilities = ask(columns) if shared is None else shared
        starters = np.array([c[2] for c in columns])

        def starts(utility: np.ndarray, slopes: bool) -> tuple[np.ndarray, np.ndarray | None]:
            values, ties = graph.solve(utility, {seat: probabilities}, slopes, scratch)
            h = None if ties is None else graph.round_starts(ties, starters)
            return graph.round_starts(values, starters), h

        return starts

    return equity.solve_table(target, rounds, chunk=_CHUNK, progress=progress)


def _player(
    player: object, tables: GameTables | None, on_boards: bool
) -> tuple[RingBot | BoardBehaviour, equity.Graph]:
    """How to solve against ``player``: on rings for a bot, on boards for anyone else."""
    ring = None if on_boards else _ring_bot(player)
    if ring is not None:
        return ring, equity.round_graph()
    return board_behaviour(player, tables), board_graph(tables)


def match_best_response(
    player: object,
    target: int = DEFAULT_TARGET,
    *,
    progress: Callable[[int, int], None] | None = None,
    tables: GameTables | None = None,
    on_boards: bool = False,
) -> MatchBestResponse:
    """The exact best response to ``player`` in a match to ``target`` (see the module
    docstring): its tables, its winning probabilities and the player's match exploitability.

    ``player`` is a bot, a loaded policy or anything with ``act(state)``. A bot that plays
    alike on every rotation of a board is solved on rings (a second or two), anyone else on
    the rules engine's boards (tens of seconds; ``on_boards`` solves a bot there too, for the
    same figure). ``progress`` is called with the scores solved so far and their number (over
    every seat solved). Raises ``ValueError`` for a target outside 1 to
    :data:`buttonup_env.game.equity.MAX_SOLVED_TARGET`.
    """
    target = equity.match_equity(target).target  # checks it, and solves the perfect table
    start = time.perf_counter()
    behaviour, graph = _player(player, tables, on_boards)
    seats = (RED,) if behaviour.own_side else (RED, BLACK)
    counter = [0]
    solved = {}
    for k, seat in enumerate(seats):  # progress counts the scores of every seat solved
        told = None
        if progress is not None:
            told = functools.partial(_progress, progress, k, len(seats))
        solved[COLORS[seat]] = _seat_table(behaviour, graph, target, seat, counter, told)
    wins = {}
    for f, first in enumerate(COLORS):
        wins[("R", first)] = 1.0 - float(solved["R"][0, 0, f])
        if "B" in solved:
            wins[("B", first)] = float(solved["B"][0, 0, f])
        else:  # the colours swapped: the player as Black is the player as Red
            wins[("B", first)] = 1.0 - float(solved["R"][0, 0, 1 - f])
    gain = float(np.mean(list(wins.values()))) - 0.5
    if -1e-12 < gain < 0.0:  # float rounding around perfect play, which gains nothing
        gain = 0.0
    return MatchBestResponse(
        target=target,
        exploitability=gain,
        wins=wins,
        tables=solved,
        questions=counter[0],
        seconds=time.perf_counter() - start,
    )


def _progress(
    progress: Callable[[int, int], None], seat: int, seats: int, done: int, total: int
) -> None:
    progress(seat * total + done, seats * total)


def match_exploitability(player: object, target: int = DEFAULT_TARGET) -> float:
    """How much a best response gains against ``player`` in a match to ``target``: its
    probability of winning from 0-0, averaged over its seat and the first round's starter,
    minus 0.5. Exact; 0 for perfect play of the match (see :func:`match_best_response`)."""
    return match_best_response(player, target).exploitability


def _ask_any(
    player: RingBot | BoardBehaviour, graph: equity.Graph, target: int, seat: int
) -> Callable[[list[Column]], list[np.ndarray]]:
    """How to ask ``player`` in ``seat`` about the rounds at some columns, on ``graph``."""

    def ask(columns: list[Column]) -> list[np.ndarray]:
        if isinstance(player, RingBot):
            assert isinstance(graph, equity.RoundGraph)
            return player.probabilities(graph, seat, columns, target)
        assert isinstance(graph, BoardGraph)
        return _ask(player, graph, target, seat, columns).probabilities

    return ask


def match_result(first: object, second: object, target: int = DEFAULT_TARGET) -> float:
    """The exact probability that ``first`` wins a match to ``target`` against ``second``, from
    0-0, averaged over its seat and the first round's starter (both play by their own move
    distributions; nothing is sampled). Perfect play of the match wins 0.5435 against the
    margin player at the target 15."""
    target = equity.match_equity(target).target
    rings = _ring_bot(first), _ring_bot(second)
    if rings[0] is not None and rings[1] is not None:
        players: tuple[RingBot | BoardBehaviour, ...] = rings  # type: ignore[assignment]
        graph: equity.Graph = equity.round_graph()
    else:
        players = board_behaviour(first), board_behaviour(second)
        graph = board_graph()
    wins = []
    scratch = equity.Scratch()  # each solve's values are read before the next
    for seat in (RED, BLACK):
        asks = (
            _ask_any(players[0], graph, target, seat),
            _ask_any(players[1], graph, target, 1 - seat),
        )

        def rounds(columns: list[Column], asks=asks, seat=seat) -> equity.RoundStarts:
            both = {seat: asks[0](columns), 1 - seat: asks[1](columns)}
            starters = np.array([c[2] for c in columns])

            def starts(utility: np.ndarray, slopes: bool) -> tuple[np.ndarray, np.ndarray | None]:
                values, ties = graph.solve(utility, both, slopes, scratch)
                h = None if ties is None else graph.round_starts(ties, starters)
                return graph.round_starts(values, starters), h

            return starts

        red = equity.solve_table(target, rounds, chunk=_CHUNK)[0, 0]
        wins.extend(red if seat == RED else 1.0 - red)
    return float(np.mean(wins))


class BestResponseBot:
    """The exact best response to ``player`` in a match to ``target``, as a player: at every
    position it lifts a slot that maximises its probability of winning the match against that
    player (ties broken with its generator).

    The tables are solved when the bot is made (:func:`match_best_response`: about a second
    against a bot, tens of seconds against a policy at the target 15), and each round's values
    when it first plays in it. Against ``player`` it wins, on average over seats and starters,
    0.5 plus the player's match exploitability; against anyone else it is just a player.
    """

    def __init__(
        self,
        player: object,
        target: int = DEFAULT_TARGET,
        seed: int | np.random.Generator | None = None,
        *,
        solved: MatchBestResponse | None = None,
    ) -> None:
        self.player = player
        self.solved = match_best_response(player, target) if solved is None else solved
        self.target = self.solved.target
        self.behaviour, self.graph = _player(player, None, False)
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self._rounds: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray | None]] = {}

    def reset(self, rng: np.random.Generator) -> None:
        """Break ties with ``rng`` from now on (the envs pass theirs at every reset)."""
        self.rng = rng

    def _table(self, seat: int) -> np.ndarray:
        table = self.solved.tables.get(COLORS[seat])
        if table is None:  # the player plays both seats alike: swap the colours
            table = 1.0 - self.solved.tables["R"].transpose(1, 0, 2)[:, :, ::-1]
        return table

    def _values(self, seat: int, column: Column, node: int) -> np.ndarray:
        """Every node's value in the round at ``column`` with the player in ``seat``, solved
        so that ``node`` (a value row) is among the positions the player is asked about."""
        key = (seat, *column)
        values, reach = self._rounds.get(key, (None, None))
        if values is None or (reach is not None and not reach[node]):
            if len(self._rounds) >= 64:
                self._rounds.clear()
            utility = equity.utilities(self.target, [column], self._table(seat), True)
            if isinstance(self.behaviour, RingBot):
                assert isinstance(self.graph, equity.RoundGraph)
                probabilities = self.behaviour.probabilities(
                    self.graph, seat, [column], self.target
                )
            else:
                assert isinstance(self.graph, BoardGraph)
                seeds = np.array([[node], [0]])
                asked = _ask(self.behaviour, self.graph, self.target, seat, [column], seeds)
                probabilities = asked.probabilities
                reach = None if asked.reach is None else asked.reach[:, 0]
            values = self.graph.solve(utility, {seat: probabilities})[0][:, 0]
            self._rounds[key] = values, reach
        return values

    def move_values(self, state: State) -> dict[int, float]:
        """``{slot: probability}``: the best response's probability of winning the match
        after each legal move, against the player."""
        if state.round_over:
            raise ValueError(f"the round is over on {state.notation!r}; there is no move to value")
        if state.target != self.target:
            raise ValueError(
                f"this best response was solved for matches to {self.target}, not "
                f"{state.target}; make one for that target"
            )
        mover = COLORS.index(state.to_move)
        column = (*state.score_pair, COLORS.index(state.starter))
        if isinstance(self.graph, equity.RoundGraph):
            values = self._values(1 - mover, column, 0)
            red = self.graph.move_values(state, values)
        else:
            board = self.graph.tables.index_of(state.board)
            values = self._values(1 - mover, column, mover * self.graph.size + board)
            slots = self.graph.tables.legal_slots[board]
            rows = self.graph.sources[mover][board]
            red = {int(s): float(values[row]) for s, row in zip(slots, rows, strict=True) if s >= 0}
        return red if mover == RED else {slot: 1.0 - p for slot, p in red.items()}

    def act(self, state: State) -> int:
        """A slot of the best probability of winning against the player."""
        best = equity.best_moves(self.move_values(state))
        return best[0] if len(best) == 1 else best[int(self.rng.integers(len(best)))]

    def __repr__(self) -> str:
        return f"BestResponseBot({self.player!r}, target={self.target})"
