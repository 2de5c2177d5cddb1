"""Playing players against each other and measuring them against the exact solver.

Used by ``training/evaluate.py`` and by the evaluation inside training. Only numpy: any player
with ``act(state)`` can be measured (bots, ONNX policies, SB3 models).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..game import solver
from ..game.match import Match
from ..game.rules import COLORS, DEFAULT_TARGET, MOVES_PER_ROUND, NUM_SLOTS, Color, other
from .bots import Player


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
    """Round points lost per decision against the solver's best move (0 is perfect)."""
    seconds: float
    matches_per_second: float
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)
    decisions_by_move: list[int] = field(default_factory=list)
    """The decisions counted in :attr:`mean_regret`, by move of the round (1st to 8th)."""
    regret_by_move: list[float] = field(default_factory=list)
    """:attr:`mean_regret` by move of the round (1st to 8th; NaN where there was no decision
    or no regret was measured): where in a round the player's mistakes sit."""

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (without the records; None for a move's NaN)."""
        data = asdict(self)
        data.pop("records")
        data["win_rate_interval"] = list(self.win_rate_interval)
        data["regret_by_move"] = [None if math.isnan(r) else r for r in self.regret_by_move]
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
            + self._by_move_line()
            + f"speed: {self.matches_per_second:.1f} matches/s ({self.seconds:.1f} s)"
        )


def _reset(player: Player, rng: np.random.Generator) -> None:
    reset = getattr(player, "reset", None)
    if callable(reset):
        reset(rng)


def evaluate(
    player: Player,
    opponent: Player,
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
    are played equally. Layouts come from a generator seeded with ``seed``; players with
    ``reset(rng)`` get their own generators derived from it. ``regret`` measures every decision
    of ``player`` with the solver. ``progress`` is called with the number of matches done.
    """
    if isinstance(matches, bool) or not isinstance(matches, int) or matches < 1:
        raise ValueError(f"matches must be a whole number >= 1, got {matches!r}")
    seeds = np.random.SeedSequence(seed).spawn(3)
    layout_rng, player_rng, opponent_rng = (np.random.default_rng(s) for s in seeds)
    _reset(player, player_rng)
    _reset(opponent, opponent_rng)
    wins = rounds = decisions = 0
    margin_total = 0
    regret_total = 0.0
    regret_by_move = np.zeros(MOVES_PER_ROUND)
    decisions_by_move = np.zeros(MOVES_PER_ROUND, dtype=np.int64)
    records = []
    start = time.perf_counter()
    for index in range(matches):
        color: Color = COLORS[index % 2]
        first: Color = COLORS[(index // 2) % 2]
        match = Match(layout_rng, target=target, first=first)
        players = {color: player, other(color): opponent}
        while True:
            state = match.state
            mover = players[state.to_move]
            slot = mover.act(state)
            if mover is player:
                move = NUM_SLOTS - state.stacks  # 0 for a round's first move, 7 for its last
                decisions += 1
                decisions_by_move[move] += 1
                if regret:
                    values = solver.move_values(state)
                    if slot in values:
                        lost = max(values.values()) - values[slot]
                        regret_total += lost
                        regret_by_move[move] += lost
            after = match.play(slot)
            if after.round_over:
                rounds += 1
                strength = after.strength
                margin_total += strength[color] - strength[other(color)]
                if after.match_over:
                    break
                match.next_round()
        wins += match.winner == color
        if keep_records:
            record = match.record(f"eval-{seed}-{index}")
            record["players"] = {color: repr(player), other(color): repr(opponent)}
            records.append(record)
        if progress is not None:
            progress(index + 1)
    seconds = time.perf_counter() - start
    return EvaluationResult(
        matches=matches,
        wins=wins,
        losses=matches - wins,
        win_rate=wins / matches,
        win_rate_interval=wilson_interval(wins, matches),
        rounds=rounds,
        mean_round_margin=margin_total / rounds,
        decisions=decisions,
        mean_regret=regret_total / decisions if regret and decisions else float("nan"),
        seconds=seconds,
        matches_per_second=matches / seconds if seconds > 0 else float("inf"),
        records=records,
        decisions_by_move=decisions_by_move.tolist(),
        regret_by_move=[
            float(total / count) if regret and count else float("nan")
            for total, count in zip(regret_by_move, decisions_by_move, strict=True)
        ],
    )
