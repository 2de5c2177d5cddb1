"""The periodic evaluation of the learner during training: its matches against the fixed bots
and its rating against the ladder, as an :class:`~training.runfolder.EvalRow`.

Every evaluation plays the same layouts (:data:`PERIODIC_EVAL_SEED`), so that rows compare,
and measures through the arena's batched matches (``buttonup_env.players.arena``), as a
policy's card does: against each bot the win rate, the round regret and the match regret (the
probability of winning the match lost per decision, counted in the same matches at no extra
cost). With several workers evaluating together, worker 1 plays the rating
matches while worker 0 plays the bots' (their weights are equal, so is the policy each
exports): the row is the one a single process gets.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from buttonup_env.learn.onnx_writer import export_onnx
from buttonup_env.players.evaluation import EvaluationResult, evaluate_many
from buttonup_env.players.league import rate_against_ladder
from buttonup_env.players.policy import OnnxPolicy
from training.config import RunConfig
from training.distributed import Team
from training.runfolder import EVAL_BOTS, EvalRow

PERIODIC_EVAL_SEED = 1000
"""Layouts of the periodic evaluations (the same at every evaluation, so rows compare)."""


@dataclass(frozen=True)
class Evaluation:
    """A periodic evaluation: its row and the bots' full results (for TensorBoard)."""

    row: EvalRow
    results: dict[str, EvaluationResult]

    def log(self, logger: Any) -> None:
        """Record the figures in SB3's ``logger`` (TensorBoard's ``eval/`` charts)."""
        for name, result in self.results.items():
            logger.record(f"eval/win_rate_{name}", result.win_rate)
            logger.record(f"eval/regret_vs_{name}", result.mean_regret)
            logger.record(f"eval/round_margin_{name}", result.mean_round_margin)
            if not math.isnan(result.mean_match_regret):
                logger.record(f"eval/match_regret_vs_{name}", result.mean_match_regret)
            if name == "perfect":  # where in a round the mistakes sit (the first moves, so far)
                logger.record("eval/regret_vs_perfect_first_move", result.regret_by_move[0])
        if self.row.elo is not None:
            logger.record("eval/elo", self.row.elo)
            logger.record("eval/elo_low", self.row.elo_low)
            logger.record("eval/elo_high", self.row.elo_high)


def evaluate_learner(
    policy: Any, steps: int, minutes: float, config: RunConfig, team: Team, together: bool
) -> Evaluation | None:
    """Evaluate the learner's ``policy`` at ``steps`` (after ``minutes`` of training) against
    the fixed bots (``eval_matches`` each) and rate it against the ladder (``ladder_matches``;
    none when 0). Worker 0 gets the evaluation; the others None. With several workers and
    ``together`` (every worker calls it at the same step), worker 1 rates while worker 0 plays
    the bots (:meth:`~training.distributed.Team.rater`); without ``together`` worker 0 plays
    both."""
    rater = team.rater(together) if config.ladder_matches else 0
    if team.rank not in (0, rater):
        if rater:  # the others meet worker 0 and the rater at the rating's gathering
            team.gather(None)
        return None
    with tempfile.TemporaryDirectory() as folder:  # this process's own, not the run's
        path = Path(folder) / "policy.onnx"
        export_onnx(policy, path, {"steps": steps})
        player = OnnxPolicy(path)  # evaluate_many plays it as evaluation.MEASURED, by no path

    def rate() -> dict[str, Any]:
        return rate_against_ladder(player, config.ladder, config.ladder_matches, PERIODIC_EVAL_SEED)

    if team.rank == rater != 0:
        try:
            rating: Any = rate()
        except Exception as error:  # worker 0 raises it, as it would have itself
            rating = error
        team.gather(rating)
        return None
    played = evaluate_many(player, EVAL_BOTS, config.eval_matches, seed=PERIODIC_EVAL_SEED)
    random, greedy, perfect = played  # all the matches at once
    rating = {}
    if config.ladder_matches:  # the rating on the league's scale, against a fixed ladder
        rating = rate() if rater == 0 else helped(team)
    row = EvalRow(
        steps=steps,
        minutes=minutes,
        win_rate_random=random.win_rate,
        regret_random=random.mean_regret,
        win_rate_greedy=greedy.win_rate,
        regret_greedy=greedy.mean_regret,
        win_rate_perfect=perfect.win_rate,
        regret_perfect=perfect.mean_regret,
        regret_by_move_perfect=tuple(perfect.to_dict()["regret_by_move"]),
        match_regret_random=measured(random.mean_match_regret),
        match_regret_greedy=measured(greedy.mean_match_regret),
        match_regret_perfect=measured(perfect.mean_match_regret),
        **rating,
    )
    return Evaluation(row, dict(zip(EVAL_BOTS, played, strict=True)))


def measured(figure: float) -> float | None:
    """A figure of an ``EvaluationResult`` (``buttonup_env.players.evaluation``) as a row
    holds it: None for NaN (not measured)."""
    return None if math.isnan(figure) else figure


def helped(team: Team) -> dict[str, Any]:
    """The rating the helping worker sent (its error raised here, as worker 0's own)."""
    gathered = team.gather(None)
    rating = None if gathered is None else gathered[1]
    if isinstance(rating, Exception):
        raise rating
    return rating or {}
