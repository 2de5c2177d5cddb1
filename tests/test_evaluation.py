"""Measuring players: the Wilson interval, and evaluate() on bots whose strength is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from buttonup_env.game.records import problem
from buttonup_env.game.rules import State
from buttonup_env.players.bots import GreedyBot, MarginBot, PerfectBot, RandomBot
from buttonup_env.players.evaluation import EvaluationResult, evaluate, wilson_interval


def textbook_wilson(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), written out once more."""
    n, p = trials, successes / trials
    centre = p + z**2 / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return ((centre - spread) / (1 + z**2 / n), (centre + spread) / (1 + z**2 / n))


@pytest.mark.parametrize(
    ("successes", "trials", "published"),
    [
        # published 95% Wilson intervals (e.g. Newcombe 1998, Table I; Wikipedia's examples)
        (0, 10, (0.0, 0.2775)),
        (10, 10, (0.7225, 1.0)),
        (5, 10, (0.2366, 0.7634)),
        (81, 263, (0.2553, 0.3662)),
        (15, 148, (0.0624, 0.1605)),
        (0, 20, (0.0, 0.1611)),
        (1, 29, (0.0061, 0.1718)),
    ],
)
def test_wilson_interval_matches_the_textbook(
    successes: int, trials: int, published: tuple[float, float]
) -> None:
    low, high = wilson_interval(successes, trials)
    ref_low, ref_high = textbook_wilson(successes, trials)
    assert low == pytest.approx(max(0.0, ref_low), abs=1e-12)
    assert high == pytest.approx(min(1.0, ref_high), abs=1e-12)
    assert (low, high) == pytest.approx(published, abs=1e-4)


def test_wilson_interval_contains_the_observed_rate() -> None:
    """The Wilson interval always contains the observed rate: for none or all successes it
    reaches exactly 0 or 1, rounding must not pull it off that end."""
    outside = [
        (k, n)
        for n in range(1, 101)
        for k in range(n + 1)
        if not wilson_interval(k, n)[0] <= k / n <= wilson_interval(k, n)[1]
    ]
    assert outside == []


def test_wilson_interval_properties() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    # symmetric around one half, narrower with more trials, wider with a larger z
    for k, n in ((3, 10), (7, 40), (1, 3)):
        low, high = wilson_interval(k, n)
        mirror_low, mirror_high = wilson_interval(n - k, n)
        assert low == pytest.approx(1 - mirror_high) and high == pytest.approx(1 - mirror_low)
        big_low, big_high = wilson_interval(10 * k, 10 * n)
        assert big_high - big_low < high - low
        wide_low, wide_high = wilson_interval(k, n, z=2.575829)
        assert wide_low < low and wide_high > high


# --- evaluate ----------------------------------------------------------------------------------


def test_perfect_against_perfect_has_no_regret_and_wins_half() -> None:
    """Perfect play of the match gives no probability of winning away; the margin player no
    round point."""
    margin = evaluate(MarginBot(), MarginBot(), 40, seed=0, target=5)
    assert margin.mean_regret == 0.0 and margin.mean_match_regret > 0.0
    result = evaluate(PerfectBot(), PerfectBot(), 200, seed=0, target=5)
    assert isinstance(result, EvaluationResult)
    assert result.matches == 200
    assert result.wins + result.losses == 200
    assert result.mean_match_regret == 0.0
    assert "mean match regret: 0.00000" in result.summary()
    assert result.decisions > 200 * 4  # at least one round of at least four decisions each
    assert 0.40 <= result.win_rate <= 0.60
    low, high = result.win_rate_interval
    assert low < 0.5 < high
    assert abs(result.mean_round_margin) < 0.5


def test_random_against_perfect_has_large_regret_and_loses() -> None:
    result = evaluate(RandomBot(), PerfectBot(), 40, seed=1, target=5)
    assert result.mean_regret > 1.0
    assert result.win_rate < 0.2
    assert result.mean_round_margin < -2.0
    assert result.win_rate_interval == wilson_interval(result.wins, 40)


def test_the_measured_side_is_the_first_player() -> None:
    result = evaluate(PerfectBot(), RandomBot(), 40, seed=2, target=5)
    assert result.win_rate > 0.8
    assert result.mean_round_margin > 2.0
    assert result.mean_match_regret == 0.0


def test_seats_and_starters_alternate() -> None:
    player, opponent = RandomBot(), GreedyBot()
    result = evaluate(player, opponent, 8, seed=3, target=5, keep_records=True)
    assert len(result.records) == 8
    seats = [
        next(c for c, who in r["players"].items() if who == repr(player)) for r in result.records
    ]
    assert seats == ["R", "B"] * 4
    assert all(set(r["players"].values()) == {"RandomBot()", "GreedyBot()"} for r in result.records)
    assert [r["first"] for r in result.records] == ["R", "R", "B", "B"] * 2
    wins = sum(r["winner"] == seat for r, seat in zip(result.records, seats, strict=True))
    assert wins == result.wins
    rounds = sum(len(r["rounds"]) for r in result.records)
    assert rounds == result.rounds
    margin = sum(
        rnd["strength"][seat] - rnd["strength"]["B" if seat == "R" else "R"]
        for r, seat in zip(result.records, seats, strict=True)
        for rnd in r["rounds"]
    )
    assert result.mean_round_margin == pytest.approx(margin / rounds)


def test_kept_records_are_valid_match_records() -> None:
    result = evaluate(GreedyBot(), RandomBot(), 10, seed=4, keep_records=True)
    assert len(result.records) == 10
    for record in result.records:
        assert problem(record) is None
        assert record["target"] == 15
        assert max(record["score"].values()) >= 15
    assert len({r["id"] for r in result.records}) == 10
    assert evaluate(GreedyBot(), RandomBot(), 10, seed=4).records == []


def test_same_seed_same_result_other_seed_other_games() -> None:
    def run(seed: int) -> EvaluationResult:
        return evaluate(RandomBot(), GreedyBot(), 12, seed=seed, target=5, keep_records=True)

    first, again, other = run(5), run(5), run(6)
    timing = ("seconds", "matches_per_second")
    same = {k: v for k, v in first.to_dict().items() if k not in timing}
    assert same == {k: v for k, v in again.to_dict().items() if k not in timing}
    assert first.records == again.records
    assert [r["rounds"] for r in first.records] != [r["rounds"] for r in other.records]


def test_players_get_their_own_seeded_generators() -> None:
    player, opponent = RandomBot(), RandomBot()
    evaluate(player, opponent, 1, seed=7, target=1)
    assert isinstance(player.rng, np.random.Generator)
    assert player.rng is not opponent.rng


def test_without_regret_there_is_no_regret_figure() -> None:
    result = evaluate(RandomBot(), RandomBot(), 4, seed=8, target=5, regret=False)
    assert math.isnan(result.mean_regret)
    assert result.decisions > 0


def test_progress_is_reported_after_every_match() -> None:
    seen: list[int] = []
    evaluate(RandomBot(), RandomBot(), 5, seed=9, target=3, progress=seen.append)
    assert seen == [1, 2, 3, 4, 5]


def test_figures_are_json_ready_and_summarised() -> None:
    result = evaluate(GreedyBot(), RandomBot(), 6, seed=10, target=5, keep_records=True)
    data = result.to_dict()
    assert "records" not in data
    assert data["win_rate_interval"] == list(result.win_rate_interval)
    assert data["wins"] == result.wins and data["matches"] == 6
    text = result.summary()
    assert f"won {result.wins}, lost {result.losses}" in text
    assert "Wilson interval" in text and "mean regret" in text and "matches/s" in text


@pytest.mark.parametrize("matches", [0, -1, 2.5, True, "3"])
def test_matches_must_be_a_whole_number_of_at_least_one(matches: object) -> None:
    with pytest.raises(ValueError, match="matches must be a whole number >= 1"):
        evaluate(RandomBot(), RandomBot(), matches)  # type: ignore[arg-type]


def test_a_player_that_cheats_is_stopped() -> None:
    class Cheater:
        def act(self, state: State) -> int:
            return next(s for s in range(9) if s not in state.legal_moves())

    with pytest.raises(ValueError):
        evaluate(Cheater(), RandomBot(), 1, seed=11)


def test_decisions_and_regret_by_move_of_the_round() -> None:
    player = GreedyBot()
    result = evaluate(player, PerfectBot(), 12, seed=11, target=5, keep_records=True)
    seats = [
        next(c for c, who in r["players"].items() if who == repr(player)) for r in result.records
    ]
    counted = [0] * 8  # recounted from the records: whose move each of a round's eight moves was
    for record, seat in zip(result.records, seats, strict=True):
        for rnd in record["rounds"]:
            for move, mover in enumerate(rnd["movers"]):
                counted[move] += mover == seat
    assert result.decisions_by_move == counted
    assert sum(result.decisions_by_move) == result.decisions
    weighted = sum(
        n * r for n, r in zip(result.decisions_by_move, result.regret_by_move, strict=True)
    )
    assert weighted / result.decisions == pytest.approx(result.mean_regret)
    assert max(result.regret_by_move) > 0  # the greedy bot errs somewhere against the solver
    assert "regret by move of the round (1st to 8th): " in result.summary()
    assert result.to_dict()["regret_by_move"] == result.regret_by_move


def test_a_perfect_player_loses_nothing_at_any_move_and_no_regret_means_no_line() -> None:
    perfect = evaluate(PerfectBot(), RandomBot(), 6, seed=12, target=5)
    assert perfect.match_regret_by_move == [0.0] * 8
    margin = evaluate(MarginBot(), RandomBot(), 6, seed=12, target=5)
    assert margin.regret_by_move == [0.0] * 8
    unmeasured = evaluate(RandomBot(), RandomBot(), 3, seed=13, target=5, regret=False)
    assert sum(unmeasured.decisions_by_move) == unmeasured.decisions
    assert all(math.isnan(r) for r in unmeasured.regret_by_move)
    assert unmeasured.to_dict()["regret_by_move"] == [None] * 8  # JSON null, not NaN
    assert unmeasured.to_dict()["mean_match_regret"] is None
    assert "by move" not in unmeasured.summary()
