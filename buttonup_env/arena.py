"""Many matches at once between two players, over the game tables (numpy only).

:func:`play_matches` plays ``matches`` matches of Button Up! side by side, each a board number in
:mod:`buttonup_env.tables`, and measures the first player as
:func:`buttonup_env.evaluation.evaluate` does (wins, round margins, and the regret of every
decision against the exact solver's move values), in a fraction of the time: a ply of all the
matches is a few array look-ups and, for a policy, one batched inference call. Training uses it
for its periodic evaluations.

The players are *batched players*: ``choose(boards, movers, scores, target) -> slots``, with
one row per match that waits for that player (board numbers, the colour to move as 0 Red or 1
Black, the match score as Red's and Black's points). :func:`batched_player` makes one from a
bot name (``"random"``, ``"greedy"``, ``"perfect"``) or from a policy loaded with
:func:`buttonup_env.load_policy`.

Seats and starters alternate as in :func:`~buttonup_env.evaluation.evaluate`: the first player
is Red in even-numbered matches, and the first round's starter alternates every two matches;
later rounds follow the starting rule (fewer points start; on equal points, who did not start
the previous round). The layouts, the bots' tie-breaks and the sampling of stochastic policies
come from generators seeded with ``seed``, so a seed gives the same matches; they are not the
same layouts as :func:`~buttonup_env.evaluation.evaluate` draws for that seed.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np

from .encoding import ENCODINGS, MAX_LEGAL
from .evaluation import EvaluationResult, wilson_interval
from .rules import DEFAULT_TARGET, LAYOUTS, MOVES_PER_ROUND, NUM_SLOTS, check_target
from .tables import RED, GameTables, game_tables

BOT_NAMES = ("random", "greedy", "perfect")


class BatchedPlayer(Protocol):
    """A player of many matches at once (see the module docstring)."""

    def choose(
        self, boards: np.ndarray, movers: np.ndarray, scores: np.ndarray, target: int
    ) -> np.ndarray: ...


def _draw(slots: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One of the first ``counts[i]`` entries of each row ``slots[i]``, uniformly at random."""
    k = (rng.random(len(counts)) * counts).astype(np.int64)
    return slots[np.arange(len(counts)), k].astype(np.int64)


class TableBot:
    """The random, greedy or perfect bot for many matches: its candidate moves come from the
    tables (the same candidates as :mod:`buttonup_env.bots`), ties broken at random."""

    def __init__(self, name: str, tables: GameTables, rng: np.random.Generator) -> None:
        if name not in BOT_NAMES:
            raise ValueError(f"bot {name!r} is not one of {', '.join(map(repr, BOT_NAMES))}")
        self.name = name
        self.tables = tables
        self.rng = rng

    def choose(
        self, boards: np.ndarray, movers: np.ndarray, scores: np.ndarray, target: int
    ) -> np.ndarray:
        t = self.tables
        if self.name == "random":
            return _draw(t.legal_slots[boards], t.num_legal[boards], self.rng)
        slots, counts = t.perfect_choices if self.name == "perfect" else t.greedy_choices
        return _draw(slots[boards, movers], counts[boards, movers], self.rng)

    def __repr__(self) -> str:
        return f"{self.name} bot"


def observations(
    tables: GameTables,
    encoding: str,
    boards: np.ndarray,
    own: np.ndarray,
    scores: np.ndarray,
    target: int,
) -> np.ndarray:
    """Observations in ``encoding`` of ``boards`` from the side of ``own`` (0 Red, 1 Black),
    exactly as :mod:`buttonup_env.encoding` writes them; ``scores`` (Red's and Black's points)
    only enter the ``slots`` encoding."""
    n = len(boards)
    t = tables
    shift = (own * len(t.stacks))[:, None]
    if encoding == "slots":
        obs = np.empty((n, ENCODINGS["slots"].size), dtype=np.float32)
        obs[:, :243] = t.flat_planes[t.boards[boards] + shift].reshape(n, -1)
        mine = np.where(own == RED, scores[:, 0], scores[:, 1])
        theirs = np.where(own == RED, scores[:, 1], scores[:, 0])
        obs[:, 243] = np.minimum(mine / target, 1.0)  # the division in float64, as the env
        obs[:, 244] = np.minimum(theirs / target, 1.0)
        obs[:, 245] = 1.0 / target
        return obs
    views = t.afterstate_views if encoding == "afterstates" else t.ring_views
    planes = t.flat_planes[views[boards] + shift[:, :, None]].reshape(n, MAX_LEGAL, -1)
    if encoding == "afterstates":
        planes = np.concatenate([planes, t.afterstate_flags[boards]], axis=2)
    return planes.reshape(n, -1)


class PolicyPlayer:
    """A policy (anything with ``logits(obs)`` and ``encoding``, such as
    :class:`~buttonup_env.policy.OnnxPolicy`) for many matches: one inference call a ply.
    Deterministic policies play their best legal action; others sample from the softmax."""

    def __init__(self, policy: Any, tables: GameTables, rng: np.random.Generator) -> None:
        self.policy = policy
        self.encoding = policy.encoding.name
        self.tables = tables
        self.rng = rng
        self.deterministic = bool(getattr(policy, "deterministic", True))

    def choose(
        self, boards: np.ndarray, movers: np.ndarray, scores: np.ndarray, target: int
    ) -> np.ndarray:
        t = self.tables
        obs = observations(t, self.encoding, boards, movers, scores, target)
        logits = np.asarray(self.policy.logits(obs), dtype=np.float64)
        if self.encoding == "slots":
            mask = t.legal[boards]
        else:
            mask = np.arange(MAX_LEGAL) < t.num_legal[boards][:, None]
        logits = np.where(mask, logits, -np.inf)
        if not self.deterministic:  # a sample from the softmax (Gumbel-max)
            logits = logits + self.rng.gumbel(size=logits.shape)
        action = logits.argmax(axis=1)
        if self.encoding == "slots":
            return action.astype(np.int64)
        return t.legal_slots[boards, action].astype(np.int64)

    def __repr__(self) -> str:
        return repr(self.policy)


def batched_player(spec: Any, tables: GameTables, rng: np.random.Generator) -> BatchedPlayer:
    """A batched player from a bot name, a policy (``logits`` and ``encoding``), or an object
    that already has ``choose``."""
    if isinstance(spec, str) and spec in BOT_NAMES:
        return TableBot(spec, tables, rng)
    if callable(getattr(spec, "choose", None)):
        return spec
    if callable(getattr(spec, "logits", None)) and getattr(spec, "encoding", None) is not None:
        return PolicyPlayer(spec, tables, rng)
    raise ValueError(
        f"{spec!r} cannot play a batch of matches; use one of "
        f"{', '.join(map(repr, BOT_NAMES))} or a policy from buttonup_env.load_policy"
    )


def play_matches(
    player: Any,
    opponent: Any,
    matches: int,
    seed: int = 0,
    target: int = DEFAULT_TARGET,
) -> EvaluationResult:
    """Play ``matches`` matches of ``player`` against ``opponent`` at once; measure ``player``.

    ``player`` and ``opponent``: bot names, policies or batched players (see
    :func:`batched_player`). Returns the figures of
    :func:`~buttonup_env.evaluation.evaluate` (without records): matches won, round margin and
    the mean regret per decision against the solver, by move of the round too.
    """
    if isinstance(matches, bool) or not isinstance(matches, int) or matches < 1:
        raise ValueError(f"matches must be a whole number >= 1, got {matches!r}")
    target = check_target(target)
    tables = game_tables()
    layout_rng, player_rng, opponent_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    players = (
        batched_player(player, tables, player_rng),
        batched_player(opponent, tables, opponent_rng),
    )
    start = time.perf_counter()
    index = np.arange(matches)
    seat = index % 2  # the player's colour: Red in even matches
    starter = (index // 2) % 2
    to_move = starter.copy()
    board = layout_rng.integers(len(LAYOUTS), size=matches)
    score = np.zeros((matches, 2), dtype=np.int64)
    done = np.zeros(matches, dtype=bool)
    rounds = 0
    margin_total = 0
    regret_by_move = np.zeros(MOVES_PER_ROUND)
    decisions_by_move = np.zeros(MOVES_PER_ROUND, dtype=np.int64)
    values = tables.move_values
    for _ in range(100_000):  # far more plies than any set of matches needs
        live = np.flatnonzero(~done)
        if not len(live):
            break
        slots = np.empty(len(live), dtype=np.int64)
        mine = to_move[live] == seat[live]
        for which, sel in ((0, mine), (1, ~mine)):
            if sel.any():
                rows = live[sel]
                slots[sel] = players[which].choose(board[rows], to_move[rows], score[rows], target)
        boards, movers = board[live], to_move[live]
        legal = tables.legal[boards, slots]
        if not legal.all():
            bad = int(np.flatnonzero(~legal)[0])
            who = players[0 if mine[bad] else 1]
            raise ValueError(f"{who!r} chose the illegal slot {slots[bad]} in a match")
        rows_mine = np.flatnonzero(mine)
        if len(rows_mine):  # the regret of the player's decisions
            b, m, s = boards[rows_mine], movers[rows_mine], slots[rows_mine]
            lost = values[b, m].max(axis=1).astype(np.int64) - values[b, m, s]
            move = NUM_SLOTS - tables.num_stacks[b]
            np.add.at(regret_by_move, move, lost)
            np.add.at(decisions_by_move, move, 1)
        flat = boards * NUM_SLOTS + slots
        child = tables.next_flat[flat]
        board[live] = child
        to_move[live] = np.where(tables.extra_flat[flat], movers, 1 - movers)
        over = tables.over[child]
        if over.any():
            ended = live[over]
            margin = tables.final_margin[board[ended]].astype(np.int64)  # Red's
            score[ended, 0] += np.maximum(margin, 0)
            score[ended, 1] += np.maximum(-margin, 0)
            rounds += len(ended)
            margin_total += int(np.where(seat[ended] == RED, margin, -margin).sum())
            won = score[ended].max(axis=1) >= target
            done[ended[won]] = True
            going = ended[~won]
            if len(going):
                s = score[going]
                tied = s[:, 0] == s[:, 1]
                starter[going] = np.where(tied, 1 - starter[going], s.argmin(axis=1))
                to_move[going] = starter[going]
                board[going] = layout_rng.integers(len(LAYOUTS), size=len(going))
    else:  # pragma: no cover - a bug, not a player
        raise RuntimeError("the matches did not end")
    seconds = time.perf_counter() - start
    wins = int((score[index, seat] >= target).sum())
    decisions = int(decisions_by_move.sum())
    return EvaluationResult(
        matches=matches,
        wins=wins,
        losses=matches - wins,
        win_rate=wins / matches,
        win_rate_interval=wilson_interval(wins, matches),
        rounds=rounds,
        mean_round_margin=margin_total / rounds,
        decisions=decisions,
        mean_regret=float(regret_by_move.sum() / decisions) if decisions else float("nan"),
        seconds=seconds,
        matches_per_second=matches / seconds if seconds > 0 else float("inf"),
        decisions_by_move=decisions_by_move.tolist(),
        regret_by_move=[
            float(total / count) if count else float("nan")
            for total, count in zip(regret_by_move, decisions_by_move, strict=True)
        ],
    )
