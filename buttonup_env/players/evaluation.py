"""Measuring a player: its matches against an opponent, won and lost, and the regret of its
every decision against the exact solver.

The one way a player is measured: :func:`evaluate` (a model card, ``training/evaluate.py``)
and :func:`evaluate_many` (training's periodic evaluations, several opponents at once) play
their matches through the arena's batched loop
(:func:`~buttonup_env.players.arena.play_pairs`), so that for one seed a card and a
training log measure the same matches: the layouts and random moves of a pair come from the
seed and the two players' names, the measured player always named :data:`MEASURED`. Any
player can be measured: a bot or a policy plays from the tables or in one inference call,
anything else with ``act(state)`` (an SB3 model, your own) one game at a time
(:class:`~buttonup_env.players.batched.ActPlayer`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..game.match import replayed
from ..game.rules import DEFAULT_TARGET
from .arena import PairResult, make_player, play_pairs
from .batched import ActPlayer, BatchedPlayer, BotPlayer, PolicyPlayer
from .bots import BOT_CLASSES, GradedBot, Player, graded_name


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of a success rate."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return (low, high)  # the ends are exact at 0 and n successes (no rounding past p)


@dataclass
class EvaluationResult:
    """What :func:`evaluate` measured, from the evaluated player's side."""

    matches: int
    wins: int
    losses: int
    win_rate: float
    win_rate_interval: tuple[float, float]
    rounds: int
    mean_round_margin: float
    decisions: int
    mean_regret: float
    """Round points lost per decision against the round solver's best move (0 is perfect play
    of the round)."""
    seconds: float
    matches_per_second: float
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)
    decisions_by_move: list[int] = field(default_factory=list)
    """The decisions counted in :attr:`mean_regret`, by move of the round (1st to 8th)."""
    regret_by_move: list[float] = field(default_factory=list)
    """:attr:`mean_regret` by move of the round (1st to 8th; NaN where there was no decision
    or no regret was measured): where in a round the player's mistakes sit."""
    mean_match_regret: float = float("nan")
    """The probability of winning the match lost per decision against the best move of the
    match (0 is perfect play of the match; NaN where not measured: no regret asked, or a
    target the match is not solved for)."""
    match_regret_by_move: list[float] = field(default_factory=list)
    """:attr:`mean_match_regret` by move of the round (NaN as for :attr:`regret_by_move`)."""

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (without the records; None for a move's NaN)."""
        data = asdict(self)
        data.pop("records")
        data["win_rate_interval"] = list(self.win_rate_interval)
        data["regret_by_move"] = [None if math.isnan(r) else r for r in self.regret_by_move]
        data["match_regret_by_move"] = [
            None if math.isnan(r) else r for r in self.match_regret_by_move
        ]
        data["mean_match_regret"] = (
            None if math.isnan(self.mean_match_regret) else self.mean_match_regret
        )
        return data

    def _by_move_line(self) -> str:
        if all(math.isnan(r) for r in self.regret_by_move):  # not measured (or no decisions)
            return ""
        cells = " ".join("-" if math.isnan(r) else f"{r:.3f}" for r in self.regret_by_move)
        return f"regret by move of the round (1st to {len(self.regret_by_move)}th): {cells}\n"

    def summary(self) -> str:
        """A few readable lines."""
        low, high = self.win_rate_interval
        return (
            f"matches: {self.matches}, won {self.wins}, lost {self.losses} "
            f"({100 * self.win_rate:.1f}%, 95% Wilson interval {100 * low:.1f}-{100 * high:.1f}%)\n"
            f"mean round margin: {self.mean_round_margin:+.3f} points over {self.rounds} rounds\n"
            f"mean regret: {self.mean_regret:.4f} round points per decision over "
            f"{self.decisions} decisions\n"
            + (
                ""
                if math.isnan(self.mean_match_regret)
                else f"mean match regret: {self.mean_match_regret:.5f} of the probability of "
                "winning the match per decision\n"
            )
            + self._by_move_line()
            + f"speed: {self.matches_per_second:.1f} matches/s ({self.seconds:.1f} s)"
        )


MEASURED = "learner"
"""The name under which :func:`evaluate` and :func:`evaluate_many` play the player they
measure (unless it is a batched player already, which keeps its own): the matches then
depend on the seed and the opponents, not on the measured player's name or file path. (The
name is training's: its periodic evaluation measures the learner.)"""


def figures(pair: PairResult, seconds: float = 0.0, regret: bool = True) -> EvaluationResult:
    """The first player's figures of the matches ``pair`` (without records): won, round
    margin, and (``regret``) the regret per decision against the solver."""
    decisions = sum(pair.decisions_by_move)
    by_move = [
        total / count if regret and count else float("nan")
        for total, count in zip(pair.regret_by_move, pair.decisions_by_move, strict=True)
    ]
    mean = sum(pair.regret_by_move) / decisions if regret and decisions else float("nan")
    match_by_move = [float("nan")] * len(by_move)
    match_mean = float("nan")
    if regret and pair.match_regret_by_move is not None:
        match_by_move = [
            total / count if count else float("nan")
            for total, count in zip(pair.match_regret_by_move, pair.decisions_by_move, strict=True)
        ]
        match_mean = sum(pair.match_regret_by_move) / decisions if decisions else float("nan")
    return EvaluationResult(
        matches=pair.matches,
        wins=pair.wins_a,
        losses=pair.matches - pair.wins_a,
        win_rate=pair.wins_a / pair.matches,
        win_rate_interval=wilson_interval(pair.wins_a, pair.matches),
        rounds=pair.rounds,
        mean_round_margin=pair.margin_a / pair.rounds,
        decisions=decisions,
        mean_regret=mean,
        seconds=seconds,
        matches_per_second=pair.matches / seconds if seconds > 0 else float("inf"),
        decisions_by_move=list(pair.decisions_by_move),
        regret_by_move=by_move,
        mean_match_regret=match_mean,
        match_regret_by_move=match_by_move,
    )


def batched(player: Any, name: str | None = None) -> BatchedPlayer:
    """``player`` as a batched player, named ``name`` (default: its own name): a batched
    player already; a name or a file (:func:`~buttonup_env.players.arena.make_player`); a
    built-in bot (played from the tables, as its name is); a policy (``logits`` and an
    ``encoding``); or anything with ``act(state)``."""
    if callable(getattr(player, "choose", None)) and hasattr(player, "name"):
        return player
    if isinstance(player, str | Path):
        made = make_player(player, name)
        made.name = name or made.name  # a bot's too
        return made
    bot = bot_name(player)
    if bot is not None:
        made = BotPlayer(bot)
        made.name = name or bot
        return made
    if callable(getattr(player, "logits", None)) and hasattr(player, "encoding"):
        return PolicyPlayer(name or repr(player), player)
    if not callable(getattr(player, "act", None)):
        raise ValueError(f"{player!r} is not a player: it needs act(state) or logits(obs)")
    return ActPlayer(name or repr(player), player)


def bot_name(player: Any) -> str | None:
    """The name of the built-in bot ``player`` is (``perfect-0.3`` for a graded one), or
    None."""
    if isinstance(player, GradedBot):
        return graded_name(player.p)
    for name, cls in BOT_CLASSES.items():
        if type(player) is cls:
            return name
    return None


def _reset(player: Player, rng: np.random.Generator) -> None:
    reset = getattr(player, "reset", None)
    if callable(reset):
        reset(rng)


def evaluate(
    player: Any,
    opponent: Any,
    matches: int,
    seed: int = 0,
    target: int = DEFAULT_TARGET,
    regret: bool = True,
    keep_records: bool = False,
    progress: Callable[[int], None] | None = None,
) -> EvaluationResult:
    """Play ``matches`` matches of ``player`` against ``opponent`` and measure ``player``.

    Seats alternate: ``player`` is red in even-numbered matches and black in odd ones, and the
    first round's starter alternates every two matches, so both seats and both starting orders
    are played equally. The matches are the arena's for ``seed`` (:func:`evaluate_many` plays
    the same against each opponent); players with ``reset(rng)`` get their own generators
    derived from ``seed``. ``regret`` reports the regret of ``player``'s decisions against the
    solver. ``keep_records`` keeps every match as a match record (``docs/rules.md``, each
    round in full). ``progress`` is called with the number of matches done, after each.
    """
    if isinstance(matches, bool) or not isinstance(matches, int) or matches < 1:
        raise ValueError(f"matches must be a whole number >= 1, got {matches!r}")
    player_rng, opponent_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2)
    )
    _reset(player, player_rng)
    _reset(opponent, opponent_rng)
    players = [batched(player, MEASURED), batched(opponent)]
    start = time.perf_counter()
    [pair] = play_pairs(players, [(0, 1)], matches, seed, target, keep_records, progress)
    result = figures(pair, time.perf_counter() - start, regret)
    names = {players[0].name: repr(player), players[1].name: repr(opponent)}
    for index, record in enumerate(pair.records):
        full = replayed(record)
        full["id"] = f"eval-{seed}-{index}"
        full["players"] = {seat: names[who] for seat, who in record["players"].items()}
        result.records.append(full)
    return result


def evaluate_many(
    player: Any,
    opponents: Sequence[Any],
    matches: int,
    seed: int = 0,
    target: int = DEFAULT_TARGET,
) -> list[EvaluationResult]:
    """:func:`evaluate` against each of ``opponents`` (names, files, bots, policies), all
    their matches at once: the same matches as one :func:`evaluate` each (without
    records)."""
    if not opponents:
        raise ValueError("evaluate_many needs at least one opponent")
    start = time.perf_counter()
    players = [batched(player, MEASURED)] + [batched(o) for o in opponents]
    pairs = play_pairs(players, [(0, j) for j in range(1, len(players))], matches, seed, target)
    seconds = (time.perf_counter() - start) / len(pairs)
    return [figures(pair, seconds) for pair in pairs]
