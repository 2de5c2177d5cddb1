"""``buttonup_env.arena``: matches played side by side, held to the rules engine and the solver."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from buttonup_env import load_policy, solver
from buttonup_env.arena import TableBot, batched_player, observations, play_matches
from buttonup_env.bots import PerfectBot
from buttonup_env.encoding import ENCODINGS
from buttonup_env.evaluation import evaluate
from buttonup_env.rules import COLORS, LAYOUTS, State
from buttonup_env.tables import game_tables


class Recording:
    """A batched player that writes down every call (for matches played one at a time)."""

    def __init__(self, inner: Any, log: list[tuple[int, int, int, tuple[int, int], int]], who: int):
        self.inner, self.log, self.who = inner, log, who

    def choose(self, boards, movers, scores, target):  # type: ignore[no-untyped-def]
        slots = self.inner.choose(boards, movers, scores, target)
        assert len(boards) == 1, "one match at a time here"
        self.log.append((self.who, int(boards[0]), int(movers[0]), tuple(scores[0]), int(slots[0])))
        return slots


@pytest.mark.parametrize(
    "names", [("random", "greedy"), ("greedy", "random"), ("random", "perfect")]
)
def test_every_match_follows_the_rules(names: tuple[str, str]) -> None:
    """Matches replayed with the rules engine: boards, movers, scores, the starting rule, the
    winner, and the regret recomputed with the solver."""
    tables = game_tables()
    for seed in range(12):
        log: list[tuple[int, int, int, tuple[int, int], int]] = []
        rng = np.random.default_rng(seed)
        players = [Recording(TableBot(n, tables, rng), log, k) for k, n in enumerate(names)]
        result = play_matches(players[0], players[1], 1, seed=seed, target=7)
        seat = "R"  # match 0: the first player is Red and Red starts
        state = None
        regret = 0.0
        decisions = 0
        for who, board, mover, score, slot in log:
            if state is None:
                assert board < len(LAYOUTS), "a match starts from a set-up"
                state = State.new_round(LAYOUTS[board], "R", target=7)
            elif state.round_over:
                assert board < len(LAYOUTS), "a round starts from a set-up"
                state = state.next_round(LAYOUTS[board])  # the starting rule: checked below
            assert tables.board(board) == state.board
            assert COLORS[mover] == state.to_move
            assert (who == 0) == (state.to_move == seat)
            assert {"R": score[0], "B": score[1]} == state.score
            if who == 0:
                values = solver.move_values(state)
                regret += max(values.values()) - values[slot]
                decisions += 1
            state = state.play(slot)
        assert state is not None and state.match_over
        assert result.wins == int(state.winner == seat)
        assert result.decisions == decisions
        assert result.mean_regret == pytest.approx(regret / decisions)


def test_seats_and_starters_alternate_and_a_seed_repeats() -> None:
    first = play_matches("random", "greedy", 40, seed=3)
    again = play_matches("random", "greedy", 40, seed=3)
    other = play_matches("random", "greedy", 40, seed=4)
    assert first.to_dict() | {"seconds": 0, "matches_per_second": 0} == again.to_dict() | {
        "seconds": 0,
        "matches_per_second": 0,
    }
    assert (first.rounds, first.mean_regret) != (other.rounds, other.mean_regret)
    assert first.wins + first.losses == 40


def test_the_perfect_bot_has_no_regret_and_beats_the_random_bot() -> None:
    result = play_matches("perfect", "random", 200, seed=0)
    assert result.mean_regret == 0.0
    assert result.win_rate == 1.0
    assert result.mean_round_margin > 0


def test_figures_agree_with_evaluate() -> None:
    """The shipped agent against the perfect bot: the same measure as the one-match-at-a-time
    evaluation, on other layouts (so within sampling error, not equal)."""
    policy = load_policy("buttonup-ppo")
    batched = play_matches(policy, "perfect", 400, seed=5)
    single = evaluate(policy, PerfectBot(), 100, seed=5)
    assert abs(batched.mean_regret - single.mean_regret) < 0.02
    assert abs(batched.win_rate - single.win_rate) < 0.2
    assert len(batched.regret_by_move) == 8


@pytest.mark.parametrize("encoding", ["slots", "ring", "afterstates"])
def test_observations_are_the_encodings(encoding: str) -> None:
    tables = game_tables()
    rng = np.random.default_rng(1)
    boards = rng.integers(len(tables.boards), size=50)
    boards = boards[~tables.over[boards]]
    own = rng.integers(2, size=len(boards))
    scores = rng.integers(0, 20, size=(len(boards), 2))
    obs = observations(tables, encoding, boards, own, scores, 15)
    for row, b, o, s in zip(obs, boards, own, scores, strict=True):
        state = State(tables.board(int(b)), COLORS[o], {"R": int(s[0]), "B": int(s[1])}, 15)
        assert np.array_equal(row, ENCODINGS[encoding].encode(state, COLORS[o]))


def test_bad_players_and_match_counts() -> None:
    with pytest.raises(ValueError, match="'perfect'"):
        batched_player("best", game_tables(), np.random.default_rng())
    for matches in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="matches must be a whole number"):
            play_matches("random", "random", matches)  # type: ignore[arg-type]
