"""A league table: ratings on one Elo scale for bots, graded bots and policies.

Players meet in matches to the target (15 points, the rules' match), and the results are fitted
with the Bradley-Terry model on the Elo scale: player ``a`` beats player ``b`` in a match with
probability ``1 / (1 + 10 ** (-(r_a - r_b) / 400))``, the random bot fixed at 0.

**Playing.** All the matches of a league are played together, as rows of arrays over the board
numbers of :func:`buttonup_env.tables.game_tables`: one pass of the loop is one move in every
match still going on, and each player chooses its slots in all the matches where it is to move
with one call (:class:`LeaguePlayer`): a table look-up for the bots, one batched inference for
a policy. The random numbers a match needs (the bots' random moves and tie-breaks, the layouts)
come from a generator of its own pair of players, seeded from the league's seed and the two
names, so a pair's matches are the same whatever else the league holds. Seats alternate (``a``
is Red in even-numbered matches) and so does the first round's starter (every two matches), as
in :func:`buttonup_env.evaluation.evaluate`.

**Fitting.** :func:`fit_ratings` finds the ratings of largest posterior probability with scipy's
optimiser. The prior counts as ``prior`` extra matches per pair of players that met, won by each
side half of the time (half a match by default), which keeps ratings finite when a pair never
loses (the perfect bot against the random bot wins every match) and pulls gaps towards 0 by a
few Elo where results are mixed. A rating's 95% interval holds the values at which the log
posterior, the other ratings refitted, is within 1.92 of its top (a profile likelihood interval,
relative to the fixed players): lopsided where the results are.

**During training.** :func:`rate_against_ladder` rates one policy against a fixed ladder of
reference players whose ratings are held fixed, those of the shipped league
(``buttonup_env/models/league.json``) for the default ladder (``training/train.py`` logs it at
every periodic evaluation).

Players by name (:func:`make_player`): ``random``, ``greedy``, ``perfect``, a graded bot
``perfect-P`` (a random legal move with probability ``P``, else the perfect one; see
:class:`buttonup_env.bots.GradedBot`), a shipped policy (``buttonup-ppo``), a path to an exported
``.onnx`` policy, or a training run's folder (its snapshots, :func:`run_snapshots`).
Policies play their best legal action, as in ``training/evaluate.py``.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .bots import BOTS, GRADED_PREFIX, graded_name, graded_p
from .encoding import ENCODINGS, MAX_LEGAL
from .models import shipped_policies, shipped_ratings
from .rules import COLORS, DEFAULT_TARGET, LAYOUTS, NUM_SLOTS, check_target, is_whole_number
from .tables import RED, GameTables, game_tables

ELO_SCALE = 400 / math.log(10)
"""Elo points per unit of log-odds: a gap of 400 is odds of 10 to 1."""

ANCHOR = "random"
"""The player whose rating is fixed at 0 when it plays in a league."""

PRIOR_MATCHES = 0.5
"""The prior of :func:`fit_ratings`: extra matches per pair that met, half won by each side
(half a match: a quarter of a win for each)."""

DEFAULT_LADDER = ("random", "greedy", "perfect-0.25", "perfect-0.1", "perfect-0.05", "perfect")
"""The reference players that :func:`rate_against_ladder` rates a policy against."""

LADDER_MATCHES = 400
"""Matches per pair in the league that rates a ladder's players the shipped league does not
(:func:`ladder_ratings`)."""

LADDER_SEED = 2028
"""Seed of that league (fixed, so that every rating against one ladder uses the same scale)."""

ROUND_ROBIN_MAX = 12
"""The ``auto`` schedule plays a round robin up to this many players (66 pairs)."""

UNIFORMS = 2
"""Random numbers a player may use for each move (in ``[0, 1)``; see :class:`LeaguePlayer`)."""


# --- players -----------------------------------------------------------------------------------


class LeaguePlayer(Protocol):
    """A player that chooses its moves in many matches at once.

    ``choose`` gets, for each match where the player is to move, the board number (of
    :func:`~buttonup_env.tables.game_tables`), the colour to move (0 Red, 1 Black), the match
    score (Red's then Black's points), the target, and ``UNIFORMS`` random numbers in
    ``[0, 1)`` for the move; it returns a legal slot for each. A player draws no random numbers
    of its own: the league hands them out, so that a pair's matches do not depend on the rest.
    """

    name: str

    def choose(
        self,
        boards: np.ndarray,
        mover: np.ndarray,
        score: np.ndarray,
        target: int,
        uniforms: np.ndarray,
    ) -> np.ndarray: ...


def _pick(slots: np.ndarray, counts: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """Entry ``floor(uniform * counts)`` of each row of ``slots``: uniform among the first
    ``counts`` entries."""
    k = np.minimum((uniform * counts).astype(np.int64), counts.astype(np.int64) - 1)
    return slots[np.arange(len(counts)), k].astype(np.int64)


class BotPlayer:
    """A bot whose choices come from the game tables: ``random``, ``greedy``, ``perfect``, or a
    graded ``perfect-P``, which lifts a uniformly random legal slot with probability ``P`` and
    plays as the perfect bot otherwise (ties between equal moves broken uniformly)."""

    def __init__(self, name: str, tables: GameTables | None = None) -> None:
        self.tables = tables if tables is not None else game_tables()
        p = graded_p(name)
        if name not in BOTS and p is None:
            raise ValueError(f"{name!r} is not a bot; use {', '.join(BOTS)} or {GRADED_PREFIX}P")
        self.name = graded_name(p) if p is not None else name
        self.p = 1.0 if name == "random" else (p if p is not None else 0.0)
        kind = "greedy" if name == "greedy" else "perfect"
        slots, counts = getattr(self.tables, f"{kind}_choices")
        self._slots = slots.reshape(-1, MAX_LEGAL)  # row board * 2 + mover
        self._counts = counts.reshape(-1)

    def choose(
        self,
        boards: np.ndarray,
        mover: np.ndarray,
        score: np.ndarray,
        target: int,
        uniforms: np.ndarray,
    ) -> np.ndarray:
        """The bot's slots: uniform 0 decides a random move, uniform 1 picks the slot."""
        t = self.tables
        if self.p >= 1.0:
            return _pick(t.legal_slots[boards], t.num_legal[boards], uniforms[:, 1])
        rows = 2 * boards + mover
        slots = _pick(self._slots[rows], self._counts[rows], uniforms[:, 1])
        if self.p > 0.0:
            wild = uniforms[:, 0] < self.p
            if wild.any():
                b = boards[wild]
                slots[wild] = _pick(t.legal_slots[b], t.num_legal[b], uniforms[wild, 1])
        return slots

    def __repr__(self) -> str:
        return f"BotPlayer({self.name!r})"


def observations(
    tables: GameTables,
    encoding: str,
    boards: np.ndarray,
    own: np.ndarray,
    score: np.ndarray,
    target: int,
) -> np.ndarray:
    """Observations of ``boards`` in ``encoding`` from the side of ``own`` (0 Red, 1 Black, one
    per board), with the match ``score`` (Red's then Black's points) for the ``slots``
    encoding: the same floats as :mod:`buttonup_env.encoding` gives for those positions.

    It reads the tables as :meth:`buttonup_env.vector.ButtonUpVectorEnv.encode` does, for
    boards that are not inside an env.
    """
    t = tables
    n = len(boards)
    if encoding == "slots":
        obs = np.empty((n, ENCODINGS["slots"].size), dtype=np.float32)
        rows = t.boards[boards] + (own * len(t.stacks))[:, None]  # (own, stack) flattened
        np.take(
            t.flat_planes, rows, axis=0, out=obs[:, :243].reshape(n, NUM_SLOTS, -1), mode="clip"
        )
        mine = np.where(own == RED, score[:, 0], score[:, 1])
        theirs = np.where(own == RED, score[:, 1], score[:, 0])
        obs[:, 243] = np.minimum(mine / target, 1.0)  # the division in float64, as the encoding
        obs[:, 244] = np.minimum(theirs / target, 1.0)
        obs[:, 245] = 1.0 / target
        return obs
    views = t.afterstate_views if encoding == "afterstates" else t.ring_views
    rows = views[boards] + (own * len(t.stacks))[:, None, None]
    planes = t.flat_planes[rows].reshape(n, MAX_LEGAL, -1)
    if encoding == "afterstates":
        planes = np.concatenate([planes, t.afterstate_flags[boards]], axis=2)
    return planes.reshape(n, -1)


class PolicyPlayer:
    """An exported policy (anything with ``logits(obs)`` and an ``encoding``, as
    :func:`buttonup_env.load_policy` gives): one inference for all the matches where it is to
    move, then its best legal action in each (the first of equal logits, as its ``act``)."""

    def __init__(self, name: str, policy: Any, tables: GameTables | None = None) -> None:
        if not callable(getattr(policy, "logits", None)) or not hasattr(policy, "encoding"):
            raise ValueError(f"{policy!r} is not a policy: it needs logits(obs) and an encoding")
        self.name = name
        self.policy = policy
        self.encoding = policy.encoding.name
        self.tables = tables if tables is not None else game_tables()

    def choose(
        self,
        boards: np.ndarray,
        mover: np.ndarray,
        score: np.ndarray,
        target: int,
        uniforms: np.ndarray,
    ) -> np.ndarray:
        """The policy's best legal slot in each position (the uniforms are not used)."""
        t = self.tables
        obs = observations(t, self.encoding, boards, mover, score, target)
        logits = np.asarray(self.policy.logits(obs), dtype=np.float64)
        legal = t.legal[boards] if self.encoding == "slots" else t.legal_views_int8[boards] > 0
        action = np.where(legal, logits, -np.inf).argmax(axis=1)
        if self.encoding == "slots":
            return action.astype(np.int64)
        return t.legal_slots[boards, action].astype(np.int64)

    def __repr__(self) -> str:
        return f"PolicyPlayer({self.name!r})"


def run_snapshots(folder: str | Path) -> list[Path]:
    """The opponent snapshots of a training run's folder (``snapshots/step_N.onnx``), in the
    order of their steps. Raises ``ValueError`` when the folder has none."""
    folder = Path(folder)
    snapshots = sorted((folder / "snapshots").glob("step_*.onnx"))
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
        if spec in BOTS or spec in shipped_policies():
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
                f"{spec!r} is not a player: use a bot ({', '.join(BOTS)}), a graded bot "
                f"{GRADED_PREFIX}P with P from 0 to 1, a shipped policy ({shipped}), an .onnx "
                "file or a training run's folder"
            )
    seen: set[str] = set()
    for name, _ in out:
        if name in seen:
            raise ValueError(f"the player {name!r} is given twice; each player plays once")
        seen.add(name)
    return out


def make_player(spec: str | Any, name: str | None = None) -> LeaguePlayer:
    """The league player ``spec`` names: a bot or graded bot name, a shipped policy's name, a
    path to an ``.onnx`` policy, or an already loaded policy (then ``name`` names it).

    Raises ``ValueError`` in one sentence for anything else (a missing file included).
    """
    if not isinstance(spec, str | Path):
        return PolicyPlayer(name or repr(spec), spec)
    text = str(spec)
    if text in BOTS or graded_p(text) is not None:
        return BotPlayer(text)
    from .policy import load_policy

    if text not in shipped_policies() and not Path(text).is_file():
        raise ValueError(
            f"{text!r} is not a player: neither a bot's nor a shipped policy's name, nor a "
            "policy file"
        )
    return PolicyPlayer(name or text, load_policy(text))


# --- schedules ---------------------------------------------------------------------------------


def round_robin(count: int) -> list[tuple[int, int]]:
    """Every pair of ``count`` players once: ``(i, j)`` with ``i < j``."""
    return [(i, j) for i in range(count) for j in range(i + 1, count)]


def neighbour_schedule(
    count: int, neighbours: int, references: Sequence[int] = ()
) -> list[tuple[int, int]]:
    """A schedule for many players: each of the ``count`` players (in the order given, e.g. a
    run's snapshots by step) plays the next ``neighbours`` players, and the ``references``
    (indices of players such as the bots) play every other player, so that the pairs cover the
    whole scale at a cost that grows linearly with the players."""
    if not is_whole_number(neighbours) or neighbours < 1:
        raise ValueError(f"neighbours={neighbours!r} is not allowed; use a whole number >= 1")
    pairs = set()
    for i in range(count):
        for j in range(i + 1, min(count, i + 1 + neighbours)):
            pairs.add((i, j))
    for r in references:
        for j in range(count):
            if j != r:
                pairs.add((min(r, j), max(r, j)))
    return sorted(pairs)


SCHEDULES = ("auto", "round-robin", "neighbours")
"""The schedules :func:`schedule` knows."""


def schedule(
    names: Sequence[str], kind: str = "auto", neighbours: int = 2
) -> list[tuple[int, int]]:
    """The pairs (indices into ``names``) that meet: ``round-robin``; ``neighbours`` (see
    :func:`neighbour_schedule`, the bots and graded bots as references); or ``auto``, a round
    robin up to :data:`ROUND_ROBIN_MAX` players and ``neighbours`` beyond."""
    if kind not in SCHEDULES:
        raise ValueError(f"schedule {kind!r} is not known; use one of {', '.join(SCHEDULES)}")
    if len(names) < 2:
        raise ValueError(f"a league needs at least two players, got {len(names)}")
    if kind == "round-robin" or (kind == "auto" and len(names) <= ROUND_ROBIN_MAX):
        return round_robin(len(names))
    references = [i for i, n in enumerate(names) if n in BOTS or n.startswith(GRADED_PREFIX)]
    return neighbour_schedule(len(names), neighbours, references)


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
    players: Sequence[LeaguePlayer],
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
    for i, j in pairs:
        if not (0 <= i < len(players) and 0 <= j < len(players)) or i == j:
            raise ValueError(f"pair {(i, j)} does not name two different players of {len(players)}")
    tables = game_tables()
    n_pairs = len(pairs)
    n = n_pairs * matches
    k = np.tile(np.arange(matches), n_pairs)
    pair = np.repeat(np.arange(n_pairs), matches)
    first = np.array([i for i, _ in pairs], dtype=np.int64)[pair]
    second = np.array([j for _, j in pairs], dtype=np.int64)[pair]
    a_is_red = k % 2 == 0
    seat = np.stack([np.where(a_is_red, first, second), np.where(a_is_red, second, first)], 1)
    starter = ((k // 2) % 2).astype(np.int64)  # 0 Red, 1 Black
    to_move = starter.copy()
    score = np.zeros((n, 2), dtype=np.int64)
    rounds = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=bool)
    rngs = [pair_generator(seed, players[i].name, players[j].name) for i, j in pairs]
    uniforms = np.empty((n, UNIFORMS + 1))  # the players' numbers, then the next layout's
    going = np.ones(n_pairs, dtype=bool)

    def draw() -> None:
        for p in np.flatnonzero(going):
            uniforms[p * matches : (p + 1) * matches] = rngs[p].random((matches, UNIFORMS + 1))

    draw()
    layout = (uniforms[:, UNIFORMS] * len(LAYOUTS)).astype(np.int64)
    board = layout.copy()
    log: list[tuple[np.ndarray, np.ndarray]] = []  # (matches, slots) of every move
    starts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (matches, layout, starter)
    if keep_records:
        starts.append((np.arange(n), layout, starter.copy()))
    finished = 0
    while True:
        live = np.flatnonzero(~done)
        if not len(live):
            break
        draw()
        boards, mover = board[live], to_move[live]
        who = seat[live, mover]
        slots = np.empty(len(live), dtype=np.int64)
        for index in np.unique(who):
            sel = np.flatnonzero(who == index)
            slots[sel] = players[index].choose(
                boards[sel], mover[sel], score[live[sel]], target, uniforms[live[sel], :UNIFORMS]
            )
        legal = (slots >= 0) & (slots < NUM_SLOTS)
        legal[legal] = tables.legal[boards[legal], slots[legal]]
        if not legal.all():
            bad = int(np.flatnonzero(~legal)[0])
            text = " ".join(s or "." for s in tables.board(int(boards[bad])))
            raise ValueError(
                f"the player {players[who[bad]].name!r} chose slot {slots[bad]}, which is not "
                f"legal on {text!r}"
            )
        if keep_records:
            log.append((live, slots))
        flat = boards * NUM_SLOTS + slots
        child = tables.next_flat[flat]
        board[live] = child
        to_move[live] = np.where(tables.extra_flat[flat], mover, 1 - mover)
        ended = live[tables.over[child]]
        if not len(ended):
            continue
        margin = tables.final_margin[board[ended]].astype(np.int64)  # Red's strength - Black's
        score[ended, 0] += np.maximum(margin, 0)
        score[ended, 1] += np.maximum(-margin, 0)
        rounds[ended] += 1
        won = score[ended].max(axis=1) >= target
        done[ended[won]] = True
        more = ended[~won]
        if len(more):  # the next round: the starting rule, a fresh layout
            s = score[more]
            starter[more] = np.where(s[:, 0] == s[:, 1], 1 - starter[more], s.argmin(axis=1))
            to_move[more] = starter[more]
            board[more] = (uniforms[more, UNIFORMS] * len(LAYOUTS)).astype(np.int64)
            if keep_records:
                starts.append((more, board[more].copy(), starter[more].copy()))
        if won.any():
            going = ~done.reshape(n_pairs, matches).all(axis=1)
            finished += int(won.sum())
            if progress is not None:
                progress(finished)
    red_won = score[:, 0] >= target
    a_won = red_won == a_is_red
    results = []
    for p, (i, j) in enumerate(pairs):
        rows = slice(p * matches, (p + 1) * matches)
        results.append(
            PairResult(
                players[i].name,
                players[j].name,
                int(a_won[rows].sum()),
                matches,
                int(rounds[rows].sum()),
            )
        )
    if keep_records:
        records = _records(players, tables, seat, score, target, log, starts)
        for p, result in enumerate(results):
            result.records = records[p * matches : (p + 1) * matches]
    return results


def _records(
    players: Sequence[LeaguePlayer],
    tables: GameTables,
    seat: np.ndarray,
    score: np.ndarray,
    target: int,
    log: list[tuple[np.ndarray, np.ndarray]],
    starts: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
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


# --- fitting -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rating:
    """A player's rating on the Elo scale, its interval and the matches behind it."""

    elo: float
    interval: tuple[float, float]
    """The 95% interval (both ends equal for a fixed player)."""
    matches: int

    def to_dict(self) -> dict[str, Any]:
        return {"elo": self.elo, "interval": list(self.interval), "matches": self.matches}


@dataclass
class LeagueTable:
    """The fitted ratings of a league (:func:`fit_ratings`)."""

    ratings: dict[str, Rating]
    """By player, best first."""
    fixed: dict[str, float]
    """The players whose ratings were fixed, and their ratings."""
    prior: float
    """Extra matches per pair that met, half won by each side (see :func:`fit_ratings`)."""
    confidence: float
    covariance: np.ndarray = field(repr=False)
    """Covariance of the ratings in the order of :attr:`names` (zero for fixed players)."""
    names: list[str] = field(repr=False)
    pairs: list[PairResult] = field(repr=False)

    def elo(self, name: str) -> float:
        """``name``'s rating."""
        return self.ratings[name].elo

    def win_probability(self, a: str, b: str) -> float:
        """The probability that ``a`` beats ``b`` in a match, by their ratings."""
        return float(expected_score(self.elo(a) - self.elo(b)))

    def gap_interval(self, a: str, b: str) -> tuple[float, float]:
        """The interval of the rating gap ``a`` minus ``b`` in the normal approximation (the
        gap plus or minus ``z`` standard errors from :attr:`covariance`)."""
        i, j = self.names.index(a), self.names.index(b)
        c = self.covariance
        sd = math.sqrt(max(c[i, i] + c[j, j] - 2 * c[i, j], 0.0))
        gap = self.elo(a) - self.elo(b)
        z = _z(self.confidence)
        return (gap - z * sd, gap + z * sd)

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``training/league.py --json``: ratings and pairs."""
        return {
            "ratings": {name: r.to_dict() for name, r in self.ratings.items()},
            "pairs": [p.to_dict() for p in self.pairs],
            "fixed": self.fixed,
            "prior_matches": self.prior,
            "confidence": self.confidence,
        }

    def table(self) -> str:
        """The ratings as a text table: player, rating, interval, matches."""
        width = max(len("player"), *(len(n) for n in self.ratings))
        lines = [f"{'player':<{width}}  {'elo':>6}  {'95% interval':>15}  {'matches':>7}"]
        for name, r in self.ratings.items():
            low, high = r.interval
            span = "(fixed)" if name in self.fixed else f"{low:.0f} to {high:.0f}"
            lines.append(f"{name:<{width}}  {r.elo:>6.0f}  {span:>15}  {r.matches:>7}")
        return "\n".join(lines)


def expected_score(gap: float | np.ndarray) -> float | np.ndarray:
    """The probability of winning a match with a rating ``gap`` (Bradley-Terry, Elo scale)."""
    return 1.0 / (1.0 + 10.0 ** (-np.asarray(gap, dtype=float) / 400.0))


def _z(confidence: float) -> float:
    """The normal quantile of a two-sided ``confidence`` (1.96 for 0.95)."""
    return float(_scipy().special.ndtri(0.5 + confidence / 2))


def _scipy() -> Any:
    try:
        import scipy.optimize
        import scipy.special
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ImportError(
            "fitting ratings needs scipy: pip install scipy (it comes with 'buttonup-env[train]')"
        ) from error
    return scipy


class _Posterior:
    """The negative log posterior of ratings (in log-odds units, one per player) given the
    pairs' results and the prior; each player's derivative is its expected wins minus its wins."""

    def __init__(self, a: np.ndarray, b: np.ndarray, wins: np.ndarray, losses: np.ndarray,
                 players: int) -> None:  # fmt: skip
        self.scipy = _scipy()
        self.a, self.b, self.wins, self.losses = a, b, wins, losses
        self.total = wins + losses
        self.design = np.zeros((len(a), players))  # d(gap of pair k) / d(rating): +1 a, -1 b
        np.add.at(self.design, (np.arange(len(a)), a), 1.0)
        np.add.at(self.design, (np.arange(len(a)), b), -1.0)

    def value(self, r: np.ndarray) -> float:
        gap = r[self.a] - r[self.b]
        log_expit = self.scipy.special.log_expit
        return float(-(self.wins * log_expit(gap) + self.losses * log_expit(-gap)).sum())

    def gradient(self, r: np.ndarray) -> np.ndarray:
        gap = r[self.a] - r[self.b]
        return -self.design.T @ (self.wins - self.total * self.scipy.special.expit(gap))

    def hessian(self, r: np.ndarray) -> np.ndarray:
        p = self.scipy.special.expit(r[self.a] - r[self.b])
        return self.design.T @ (self.design * (self.total * p * (1 - p))[:, None])

    def top(self, r: np.ndarray, free: list[int]) -> np.ndarray:
        """``r`` with the ratings ``free`` moved to the top of the posterior, the rest kept."""
        if not free:
            return r
        r = r.copy()

        def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
            r[free] = x
            return self.value(r), self.gradient(r)[free]

        def hessian(x: np.ndarray) -> np.ndarray:
            r[free] = x
            return self.hessian(r)[np.ix_(free, free)]

        result = self.scipy.optimize.minimize(
            objective, r[free], jac=True, hess=hessian, method="trust-exact"
        )
        # The gradient is each player's expected wins minus its wins (the prior's included):
        # where they agree within a thousandth of a match the ratings are within about a
        # hundredth of an Elo point of the top, whatever the optimiser says about rounding.
        if not result.success and np.abs(result.jac).max() > 1e-3:  # pragma: no cover
            raise RuntimeError(f"the rating fit did not converge: {result.message}")
        r[free] = result.x
        return r

    def profile_interval(
        self, r_top: np.ndarray, free: list[int], i: int, drop: float
    ) -> tuple[float, float]:
        """The ratings of player ``i`` where the posterior, the other ``free`` ratings at their
        top for each, falls ``drop`` below its top (a profile likelihood interval)."""
        top = self.value(r_top)
        others = [j for j in free if j != i]
        warm = [r_top]  # the last refit: the next one starts from it

        def excess(v: float) -> tuple[float, float]:
            """How far the profile is below the cut at ``v``, and its slope there (the
            derivative in ``r_i`` at the refit: the other derivatives are 0 there)."""
            r = warm[0].copy()
            r[i] = v
            r = warm[0] = self.top(r, others)
            return self.value(r) - top - drop, float(self.gradient(r)[i])

        centre = r_top[i]
        half = math.sqrt(2 * drop / max(self.hessian(r_top)[i, i], 1e-12))  # the normal one
        ends = []
        for sign in (-1.0, 1.0):
            warm[0] = r_top
            # The profile is convex: Newton's steps from the normal approximation's end reach
            # the cut from outside and then close in on it without passing it.
            found = self.scipy.optimize.root_scalar(
                excess, x0=centre + sign * half, fprime=True, method="newton", xtol=1e-9
            )
            if not (found.converged and sign * (found.root - centre) > 0):  # pragma: no cover
                raise RuntimeError(f"the interval of a rating was not found: {found.flag}")
            ends.append(found.root)
        return ends[0], ends[1]


def fit_ratings(
    pairs: Sequence[PairResult],
    fixed: Mapping[str, float] | None = None,
    prior: float = PRIOR_MATCHES,
    confidence: float = 0.95,
) -> LeagueTable:
    """Bradley-Terry ratings on the Elo scale from the results of ``pairs``.

    ``fixed`` gives players whose ratings are not fitted (default: the random bot at 0, or,
    without it, the first pair's ``a`` at 0). The rest maximise the log posterior::

        sum over pairs (wins_a + prior/2) log P(a beats b) + (losses_a + prior/2) log P(b beats a)

    with ``P(a beats b) = 1 / (1 + 10 ** (-(r_a - r_b) / 400))``: the prior counts as
    ``prior`` extra matches per pair, won by each side half of the time, which keeps every
    rating finite when a pair never loses. It is concave, so scipy's trust-region optimiser
    finds its one top. A player's interval holds the ratings at which the log posterior, the
    other ratings refitted for each, is within ``z**2 / 2`` of its top (1.92 for 95%): a profile
    likelihood interval, lopsided where the results are (``perfect`` against ``random``: the
    lower end set by the matches, the upper one by the prior). :attr:`LeagueTable.covariance`
    (the inverse curvature at the top) gives the normal approximation.

    Raises ``ValueError`` for a player with no path of played pairs to a fixed player (its
    rating would be anything) and for a bad ``prior`` or ``confidence``.
    """
    if not pairs:
        raise ValueError("no pairs to fit: a league needs at least one pair that played")
    if not isinstance(prior, int | float) or not 0 < prior < math.inf:
        raise ValueError(f"prior={prior!r} is not allowed; use a number of matches > 0")
    if not isinstance(confidence, float) or not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence!r} is not allowed; use a number in (0, 1)")
    names: list[str] = []
    for p in pairs:
        for name in (p.a, p.b):
            if name not in names:
                names.append(name)
    if fixed is None:
        fixed = {ANCHOR: 0.0} if ANCHOR in names else {pairs[0].a: 0.0}
    fixed = {name: float(value) for name, value in fixed.items()}
    for name in fixed:
        if name not in names:
            names.append(name)  # a fixed player may have no match here
    index = {name: i for i, name in enumerate(names)}
    _check_connected(names, pairs, fixed)
    free = [i for i, name in enumerate(names) if name not in fixed]
    posterior = _Posterior(
        np.array([index[p.a] for p in pairs]),
        np.array([index[p.b] for p in pairs]),
        np.array([p.wins_a for p in pairs], dtype=float) + prior / 2,
        np.array([p.matches - p.wins_a for p in pairs], dtype=float) + prior / 2,
        len(names),
    )
    start = np.zeros(len(names))
    for name, value in fixed.items():
        start[index[name]] = value / ELO_SCALE  # in log-odds units while fitting
    r = posterior.top(start, free)
    covariance = np.zeros((len(names), len(names)))
    if free:
        inverse = np.linalg.inv(posterior.hessian(r)[np.ix_(free, free)])
        covariance[np.ix_(free, free)] = inverse * ELO_SCALE**2
    drop = _z(confidence) ** 2 / 2
    played = dict.fromkeys(names, 0)
    for p in pairs:
        played[p.a] += p.matches
        played[p.b] += p.matches
    ratings = {}
    for i in sorted(range(len(names)), key=lambda i: -r[i]):
        if i in free:
            low, high = posterior.profile_interval(r, free, i, drop)
        else:
            low = high = r[i]
        interval = (float(low * ELO_SCALE), float(high * ELO_SCALE))
        ratings[names[i]] = Rating(float(r[i] * ELO_SCALE), interval, played[names[i]])
    return LeagueTable(
        ratings=ratings,
        fixed=fixed,
        prior=float(prior),
        confidence=confidence,
        covariance=covariance,
        names=names,
        pairs=list(pairs),
    )


def _check_connected(
    names: list[str], pairs: Sequence[PairResult], fixed: Mapping[str, float]
) -> None:
    """Every player must reach a fixed player through pairs that played."""
    reached = set(fixed)
    edges = [(p.a, p.b) for p in pairs if p.matches > 0]
    grown = True
    while grown:
        grown = False
        for x, y in edges:
            if (x in reached) != (y in reached):
                reached |= {x, y}
                grown = True
    cut = [name for name in names if name not in reached]
    if cut:
        raise ValueError(
            f"{', '.join(map(repr, cut))} never met, directly or through others, a player "
            f"whose rating is fixed ({', '.join(map(repr, fixed))}): the ratings are not defined"
        )


# --- a whole league ------------------------------------------------------------------------------


def run_league(
    specs: Sequence[str],
    matches: int,
    seed: int = 0,
    target: int = DEFAULT_TARGET,
    schedule_kind: str = "auto",
    neighbours: int = 2,
    prior: float = PRIOR_MATCHES,
    progress: Callable[[int, int], None] | None = None,
) -> LeagueTable:
    """Play a league of the players ``specs`` name (see :func:`player_specs`) and fit it.

    ``matches`` per pair of :func:`schedule`; the random bot is fixed at 0, or without it the
    first player. ``progress(done, total)`` is called as matches finish.
    """
    named = player_specs(specs)
    names = [name for name, _ in named]
    pairs = schedule(names, schedule_kind, neighbours)
    players = [make_player(spec, name) for name, spec in named]
    total = len(pairs) * matches
    results = play_pairs(
        players,
        pairs,
        matches,
        seed,
        target,
        progress=None if progress is None else lambda done: progress(done, total),
    )
    anchor = ANCHOR if ANCHOR in names else names[0]
    return fit_ratings(results, fixed={anchor: 0.0}, prior=prior)


# --- rating against a ladder ---------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def ladder_ratings(
    ladder: tuple[str, ...] = DEFAULT_LADDER,
    matches: int = LADDER_MATCHES,
    seed: int = LADDER_SEED,
) -> dict[str, float]:
    """The ratings of a ladder's players: those of the shipped league
    (:func:`buttonup_env.models.shipped_ratings`, the scale the web app shows) when it rates
    them all, as it does the default ladder; otherwise from a round robin of ``matches`` per
    pair among them (the random bot at 0, or the first player), played once per process."""
    shipped = shipped_ratings()
    if all(name in shipped for name in ladder):
        return {name: shipped[name] for name in ladder}
    table = run_league(ladder, matches, seed)
    return {name: table.elo(name) for name in ladder}


def check_ladder(ladder: Sequence[str]) -> tuple[str, ...]:
    """``ladder`` as a tuple, after checking that it names two or more players, each once,
    none of them a run folder. Raises ``ValueError`` otherwise."""
    ladder = tuple(str(name) for name in ladder)
    named = player_specs(ladder)
    if len(named) != len(ladder):
        raise ValueError(f"the ladder {list(ladder)} holds a run folder; name players one by one")
    if len(ladder) < 2:
        raise ValueError(f"a ladder needs at least two players, got {list(ladder)}")
    return tuple(name for name, _ in named)


def rate_against_ladder(
    policy: str | Path | Any,
    ladder: Sequence[str] = DEFAULT_LADDER,
    matches: int = 200,
    seed: int = 0,
    target: int = DEFAULT_TARGET,
) -> dict[str, Any]:
    """The rating of ``policy`` (a player's name or file, or a loaded policy) against a fixed
    ladder of reference players.

    ``matches`` are shared evenly between the ladder's players (seats and starters
    alternating), and the policy's rating is fitted with the ladder's ratings
    (:func:`ladder_ratings`) held fixed, so that ratings of different policies, such as one
    run's snapshots, are on the same scale. Returns ``{"elo", "elo_low", "elo_high",
    "ladder_matches", "ladder_score"}``: the rating, its 95% interval, the matches played and
    the share of them won.
    """
    ladder = check_ladder(ladder)
    if not is_whole_number(matches) or matches < len(ladder):
        raise ValueError(
            f"matches={matches!r} is not allowed; use a whole number >= {len(ladder)}, at least "
            "one match against each player of the ladder"
        )
    fixed = ladder_ratings(ladder)
    name = "rated policy"
    player = make_player(policy, name)
    player.name = name
    members = [make_player(spec) for spec in ladder]
    per_pair = matches // len(ladder)
    results = play_pairs(
        [player, *members], [(0, j) for j in range(1, len(ladder) + 1)], per_pair, seed, target
    )
    table = fit_ratings(results, fixed=fixed)
    rating = table.ratings[name]
    wins = sum(r.wins_a for r in results)
    played = per_pair * len(ladder)
    return {
        "elo": rating.elo,
        "elo_low": rating.interval[0],
        "elo_high": rating.interval[1],
        "ladder_matches": played,
        "ladder_score": wins / played,
    }
