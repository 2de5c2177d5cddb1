"""Many matches at once: the match loop behind every measure of a player and the leagues.

All the matches are played together, as one :class:`~buttonup_env.engine.batch.Batch` of the
batched engine (the pair's first player is the batch's agent), whose numpy backend plays the
moves, scores the rounds and deals the next ones by the starting rule
(:class:`~buttonup_env.engine.numpy_backend.NumpyBackend`). One pass of the loop is one move in
every match still going on, and each player chooses its slots in all the matches where it is to
move with one call (:class:`~buttonup_env.players.batched.BatchedPlayer`): a table look-up for
the bots, one batched inference for a policy.
The random numbers a match needs (the bots' random moves and tie-breaks, the layouts) come from a
generator of its own pair of players, seeded from the seed and the two names
(:func:`pair_generator`), so a pair's matches are the same whatever else is played beside them.
Seats alternate (the pair's first player is Red in even-numbered matches) and so does the first
round's starter (every two matches); later rounds follow the starting rule.

:func:`play_pairs` plays the matches of many pairs and counts, for the first player of each
pair, matches won, round margins, and the regret of its every decision against the exact
solver's move values: :func:`buttonup_env.players.evaluation.evaluate` (a card,
``training/evaluate.py``) and :func:`~buttonup_env.players.evaluation.evaluate_many`
(training's periodic evaluations) measure through it, and the league
(:mod:`buttonup_env.players.league`) rates from it.

Players by name (:func:`make_player`): ``random``, ``greedy``, ``margin``, ``perfect`` (perfect
play of the match, at each game's score), a graded bot ``perfect-P`` (a random legal move with
probability ``P``, else the perfect one; see
:class:`buttonup_env.players.bots.GradedBot`), a shipped policy (``buttonup-ppo``), a path to an
exported ``.onnx`` policy, or a training run's folder (its snapshots, :func:`run_snapshots`).
Policies play their best legal action.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.batch import BLACK, RED, Batch, Rules
from ..engine.numpy_backend import NumpyBackend, match_values
from ..engine.tables import GameTables, game_tables
from ..game.equity import MAX_SOLVED_TARGET, TIE_TOLERANCE
from ..game.rules import (
    COLORS,
    DEFAULT_TARGET,
    LAYOUTS,
    MOVES_PER_ROUND,
    NUM_SLOTS,
    check_target,
    is_whole_number,
)
from .batched import UNIFORMS, BatchedPlayer, BotPlayer, PolicyPlayer, Positions, check_legal
from .bots import BOT_NAMES, GRADED_PREFIX, graded_name, graded_p
from .shipped import shipped_policies


def run_snapshots(folder: str | Path) -> list[Path]:
    """The opponent snapshots of a training run's folder (``snapshots/step_N.onnx``), in the
    order of their steps. Raises ``ValueError`` when the folder has none, and when
    ``snapshots`` or a snapshot is a symbolic link or not what its name says (a link there
    could lead the reading anywhere; the folder itself may be a link, as the path named)."""
    from ..game.folders import SafeFolder  # here: the imports above are the arena's own

    folder = Path(folder)
    safe = SafeFolder(folder)
    snapshots = sorted(safe.check(folder / "snapshots", "folder").glob("step_*.onnx"))
    for snapshot in snapshots:
        safe.check(snapshot)  # FolderError, a ValueError in one sentence
    if not snapshots:
        raise ValueError(
            f"{folder} is a folder without snapshots ({folder / 'snapshots'}/step_N.onnx); give "
            "a training run's folder or a policy file"
        )
    return snapshots


def snapshot_steps(path: str | Path) -> int | None:
    """The training steps in a snapshot's name (``step_000250000.onnx``: 250000), else None."""
    stem = Path(path).stem
    if stem.startswith("step_") and stem[5:].isdigit():
        return int(stem[5:])
    return None


def player_specs(specs: Sequence[str]) -> list[tuple[str, str]]:
    """(name, spec) of every player that ``specs`` give, a run folder giving its snapshots
    (named ``FOLDER/step_N``). Raises ``ValueError`` for a spec that names no player and for
    a name given twice."""
    out: list[tuple[str, str]] = []
    for spec in specs:
        spec = str(spec)
        p = graded_p(spec)  # raises for perfect-<not a probability>
        if spec in BOT_NAMES or spec in shipped_policies():
            out.append((spec, spec))
        elif p is not None:
            out.append((graded_name(p), spec))
        elif Path(spec).is_dir():
            folder = Path(spec)
            out += [(f"{folder.name}/{s.stem}", str(s)) for s in run_snapshots(folder)]
        elif Path(spec).is_file():
            out.append((spec, spec))
        else:
            shipped = ", ".join(shipped_policies()) or "none"
            raise ValueError(
                f"{spec!r} is not a player: use a bot ({', '.join(BOT_NAMES)}), a graded bot "
                f"{GRADED_PREFIX}P with P from 0 to 1, a shipped policy ({shipped}), an .onnx "
                "file or a training run's folder"
            )
    seen: set[str] = set()
    for name, _ in out:
        if name in seen:
            raise ValueError(f"the player {name!r} is given twice; each player plays once")
        seen.add(name)
    return out


def make_player(spec: str | Any, name: str | None = None) -> BatchedPlayer:
    """The league player ``spec`` names: a bot or graded bot name, a shipped policy's name, a
    path to an ``.onnx`` policy, or an already loaded policy (then ``name`` names it).

    Raises ``ValueError`` in one sentence for anything else (a missing file included).
    """
    if not isinstance(spec, str | Path):
        return PolicyPlayer(name or repr(spec), spec)
    text = str(spec)
    if text in BOT_NAMES or graded_p(text) is not None:
        return BotPlayer(text)
    from .policy import load_policy

    if text not in shipped_policies() and not Path(text).is_file():
        raise ValueError(
            f"{text!r} is not a player: neither a bot's nor a shipped policy's name, nor a "
            "policy file"
        )
    return PolicyPlayer(name or text, load_policy(text))


# --- playing -------------------------------------------------------------------------------------


@dataclass
class PairResult:
    """The matches of one pair: how many ``a`` won of ``matches`` (a match is never drawn)."""

    a: str
    b: str
    wins_a: int
    matches: int
    rounds: int = 0
    """Rounds played in these matches."""
    margin_a: int = 0
    """The sum over those rounds of ``a``'s strength minus ``b``'s in the final stack."""
    decisions_by_move: list[int] = field(default_factory=lambda: [0] * MOVES_PER_ROUND)
    """``a``'s decisions by move of the round (1st to 8th)."""
    regret_by_move: list[float] = field(default_factory=lambda: [0.0] * MOVES_PER_ROUND)
    """The round points ``a`` lost against the round solver's best moves, summed by move of
    the round."""
    match_regret_by_move: list[float] | None = None
    """The probability of winning the match ``a`` lost against the best moves of the match,
    summed by move of the round (None for a target the match is not solved for)."""
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)
    """The match records (``docs/rules.md``), when asked for."""

    def to_dict(self) -> dict[str, Any]:
        """``{"a", "b", "wins_a", "matches"}`` as the league's JSON has them."""
        return {"a": self.a, "b": self.b, "wins_a": self.wins_a, "matches": self.matches}


def pair_generator(seed: int, a: str, b: str) -> np.random.Generator:
    """The generator of the matches of ``a`` against ``b`` in a league seeded with ``seed``."""
    keys = [zlib.crc32(name.encode("utf-8")) for name in (a, b)]
    return np.random.default_rng(np.random.SeedSequence([seed, *keys]))


def play_pairs(
    players: Sequence[BatchedPlayer],
    pairs: Sequence[tuple[int, int]],
    matches: int,
    seed: int = 0,
    target: int = DEFAULT_TARGET,
    keep_records: bool = False,
    progress: Callable[[int], None] | None = None,
) -> list[PairResult]:
    """Play ``matches`` matches between each pair ``(i, j)`` of ``players``, all at once.

    In match ``k`` of a pair, ``players[i]`` is Red when ``k`` is even, and the first round's
    starter is Red when ``k // 2`` is even; later rounds follow the starting rule. The random
    numbers come from :func:`pair_generator`. ``keep_records`` keeps every match as a match
    record (``docs/rules.md``, with the players' names). ``progress`` is called with the
    number of matches finished so far.
    """
    if not is_whole_number(matches) or matches < 1:
        raise ValueError(f"matches={matches!r} is not allowed; use a whole number >= 1")
    if not is_whole_number(seed) or seed < 0:
        raise ValueError(f"seed={seed!r} is not allowed; use a whole number >= 0")
    target = check_target(target)
    for player in players:
        check = getattr(player, "check_target", None)
        if callable(check):  # a bot that reads the solved match: a target it is solved for
            check(target)
    for i, j in pairs:
        if not (0 <= i < len(players) and 0 <= j < len(players)) or i == j:
            raise ValueError(f"pair {(i, j)} does not name two different players of {len(players)}")
    games = MatchBatch(players, pairs, matches, seed, target, keep_records)
    while True:
        live = np.flatnonzero(~games.batch.done)
        if not len(live):
            return games.results()
        games.draw()
        slots = games.choices(live)
        games.count_regret(live, slots)
        ended = games.engine.move(games.batch, live, slots)
        if len(ended):
            games.end_rounds(ended, progress)


class MatchBatch:
    """The matches of :func:`play_pairs` under way: the batch of games, who sits where, the
    pairs' generators and what is counted for each pair's first player."""

    def __init__(
        self,
        players: Sequence[BatchedPlayer],
        pairs: Sequence[tuple[int, int]],
        matches: int,
        seed: int,
        target: int,
        keep_records: bool,
    ) -> None:
        self.players, self.pairs, self.matches, self.target = players, pairs, matches, target
        self.keep_records = keep_records
        self.tables = tables = game_tables()
        n_pairs = len(pairs)
        n = n_pairs * matches
        k = np.tile(np.arange(matches), n_pairs)
        self.pair = pair = np.repeat(np.arange(n_pairs), matches)
        first = np.array([i for i, _ in pairs], dtype=np.int64)[pair]
        second = np.array([j for _, j in pairs], dtype=np.int64)[pair]
        self.a_is_red = a_is_red = k % 2 == 0
        self.seat = np.stack(
            [np.where(a_is_red, first, second), np.where(a_is_red, second, first)], 1
        )
        self.engine = NumpyBackend(tables, Rules(target=target), n)
        self.batch = batch = Batch.zeros(n)  # the agent: the pair's first player
        batch.agent[:] = np.where(a_is_red, RED, BLACK)
        batch.starter[:] = (k // 2) % 2
        batch.to_move[:] = batch.starter
        self.rounds = np.zeros(n, dtype=np.int64)
        self.rngs = [pair_generator(seed, players[i].name, players[j].name) for i, j in pairs]
        self.regret = np.zeros((n_pairs, MOVES_PER_ROUND))  # the first player's, by move
        self.match_regret = (
            np.zeros((n_pairs, MOVES_PER_ROUND)) if target <= MAX_SOLVED_TARGET else None
        )
        self.decisions = np.zeros((n_pairs, MOVES_PER_ROUND), dtype=np.int64)
        self.margin_a = np.zeros(n_pairs, dtype=np.int64)
        self.uniforms = np.empty((n, UNIFORMS + 1))  # the players' numbers, the next layout's
        self.going = np.ones(n_pairs, dtype=bool)
        self.finished = 0
        self.log: list[tuple[np.ndarray, np.ndarray]] = []  # (matches, slots) of every move
        self.starts: list[
            tuple[np.ndarray, np.ndarray, np.ndarray]
        ] = []  # (matches, layout, starter)
        self.draw()
        batch.board[:] = self.layouts(np.arange(n))
        if keep_records:
            self.starts.append((np.arange(n), batch.board.copy(), batch.starter.copy()))

    def draw(self) -> None:
        """The random numbers of the next move in every pair still playing."""
        matches = self.matches
        for p in np.flatnonzero(self.going):
            self.uniforms[p * matches : (p + 1) * matches] = self.rngs[p].random(
                (matches, UNIFORMS + 1)
            )

    def layouts(self, rows: np.ndarray) -> np.ndarray:
        return (self.uniforms[rows, UNIFORMS] * len(LAYOUTS)).astype(np.int64)

    def choices(self, live: np.ndarray) -> np.ndarray:
        """The slots the players to move choose in the games ``live``: one call each, every
        slot checked."""
        batch, players = self.batch, self.players
        boards, mover = batch.board[live], batch.to_move[live]
        who = self.seat[live, mover]
        slots = np.empty(len(live), dtype=np.int64)
        for index in np.unique(who):
            sel = np.flatnonzero(who == index)
            rows = live[sel]
            uniforms = self.uniforms[rows, :UNIFORMS]
            at = Positions(
                boards[sel],
                mover[sel],
                batch.score[rows],
                self.target,
                batch.starter[rows],
                uniforms,
            )
            slots[sel] = players[index].choose(at)
        check_legal(self.tables, boards, slots, lambda row: players[who[row]].name)
        if self.keep_records:
            self.log.append((live, slots))
        return slots

    def count_regret(self, live: np.ndarray, slots: np.ndarray) -> None:
        """Count the regret of the first players' decisions among ``slots``: round points
        against the round solver, and the probability of winning the match against the match
        solved (at each game's score and starter)."""
        batch, tables = self.batch, self.tables
        mine = np.flatnonzero(batch.to_move[live] == batch.agent[live])
        if len(mine):
            games = live[mine]
            b, m, s = batch.board[games], batch.to_move[games], slots[mine]
            values = tables.move_values[b, m]
            lost = values.max(axis=1).astype(np.int64) - values[np.arange(len(mine)), s]
            at = (self.pair[games], NUM_SLOTS - tables.num_stacks[b])
            np.add.at(self.regret, at, lost)
            np.add.at(self.decisions, at, 1)
            if self.match_regret is not None:
                match = match_values(
                    tables, b, m, batch.score[games], batch.starter[games], self.target
                )
                chosen = (tables.legal_slots[b] == s[:, None]).argmax(axis=1)
                gap = np.nanmax(match, axis=1) - match[np.arange(len(mine)), chosen]
                np.add.at(self.match_regret, at, np.where(gap > TIE_TOLERANCE, gap, 0.0))

    def end_rounds(self, ended: np.ndarray, progress: Callable[[int], None] | None) -> None:
        """Score the rounds that ended in the games ``ended``; end the matches won (telling
        ``progress`` of each), deal the next rounds of the others."""
        batch, engine = self.batch, self.engine
        margin = engine.score_rounds(batch, ended)  # Red's strength minus Black's
        mine = np.where(batch.agent[ended] == RED, margin, -margin)
        np.add.at(self.margin_a, self.pair[ended], mine)
        self.rounds[ended] += 1
        won = engine.match_won(batch, ended)
        batch.done[ended[won]] = True
        more = ended[~won]
        if len(more):  # the next rounds: the starting rule, fresh layouts
            engine.start_rounds(batch, more, self.layouts(more))
            if self.keep_records:
                self.starts.append((more, batch.board[more].copy(), batch.starter[more].copy()))
        if won.any():
            self.going = ~batch.done.reshape(len(self.pairs), self.matches).all(axis=1)
            if progress is not None:  # once for every match finished
                for count in range(self.finished + 1, self.finished + int(won.sum()) + 1):
                    progress(count)
            self.finished += int(won.sum())

    def results(self) -> list[PairResult]:
        """Each pair's matches, counted (with their records when kept)."""
        matches, players, score = self.matches, self.players, self.batch.score
        a_won = (score[:, 0] >= self.target) == self.a_is_red
        results = []
        for p, (i, j) in enumerate(self.pairs):
            rows = slice(p * matches, (p + 1) * matches)
            results.append(
                PairResult(
                    players[i].name,
                    players[j].name,
                    int(a_won[rows].sum()),
                    matches,
                    int(self.rounds[rows].sum()),
                    int(self.margin_a[p]),
                    self.decisions[p].tolist(),
                    self.regret[p].tolist(),
                    None if self.match_regret is None else self.match_regret[p].tolist(),
                )
            )
        if self.keep_records:
            log, starts = self.log, self.starts
            records = _records(players, self.tables, self.seat, score, self.target, log, starts)
            for p, result in enumerate(results):
                result.records = records[p * matches : (p + 1) * matches]
        return results


def _records(
    players: Sequence[BatchedPlayer],
    tables: GameTables,
    seat: np.ndarray,
    score: np.ndarray,
    target: int,
    log: list[tuple[np.ndarray, np.ndarray]],
    starts: list[tuple[np.ndarray, ...]],
) -> list[dict[str, Any]]:
    """Match records from the moves and round starts logged by :func:`play_pairs`."""
    n = len(seat)
    moves: list[list[int]] = [[] for _ in range(n)]
    for live, slots in log:
        for m, slot in zip(live.tolist(), slots.tolist(), strict=True):
            moves[m].append(slot)
    layouts: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for which, layout, first in starts:
        for m, b, f in zip(which.tolist(), layout.tolist(), first.tolist(), strict=True):
            layouts[m].append((b, f))
    records = []
    for m in range(n):
        rounds = [
            {
                "layout": " ".join(tables.board(b)),
                "first": COLORS[f],
                "moves": moves[m][8 * r : 8 * r + 8],
            }
            for r, (b, f) in enumerate(layouts[m])
        ]
        red, black = int(score[m, 0]), int(score[m, 1])
        records.append(
            {
                "id": f"league-{m}",
                "target": target,
                "first": rounds[0]["first"],
                "rounds": rounds,
                "score": {"R": red, "B": black},
                "winner": "R" if red >= target else "B",
                "players": {"R": players[seat[m, 0]].name, "B": players[seat[m, 1]].name},
            }
        )
    return records
