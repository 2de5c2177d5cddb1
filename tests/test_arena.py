"""``buttonup_env.players.arena``'s measurements: regret, margins and wins, held to the rules
engine and the solver (the match loop itself is tested in test_league.py)."""

from __future__ import annotations

import numpy as np
import pytest

from buttonup_env import load_policy
from buttonup_env.game import solver
from buttonup_env.game.equity import match_move_values
from buttonup_env.game.rules import COLORS, LAYOUTS, State
from buttonup_env.players.arena import play_pairs
from buttonup_env.players.batched import BotPlayer, Positions
from buttonup_env.players.bots import GreedyBot, PerfectBot, RandomBot
from buttonup_env.players.evaluation import evaluate, evaluate_many, figures


class Recording:
    """A batched player that writes down every call (for matches played one at a time)."""

    def __init__(self, inner: BotPlayer, log: list[tuple], first: bool) -> None:
        self.inner, self.log, self.first, self.name = inner, log, first, inner.name

    kind, encoding = BotPlayer("random").kind, None

    def choose(self, at: Positions) -> np.ndarray:
        slots = self.inner.choose(at)
        assert len(at.boards) == 1, "one match at a time here"
        self.log.append((self.first, int(at.boards[0]), int(at.mover[0]), int(slots[0])))
        return slots


@pytest.mark.parametrize("names", [("random", "greedy"), ("greedy", "perfect-0.3")])
def test_the_regret_and_margin_of_the_first_player_are_the_solvers(names: tuple[str, str]) -> None:
    """Matches replayed with the rules engine and the solvers: the first player's regret per
    decision by move of the round (in round points and in the probability of winning the
    match), its round margin and its wins."""
    for seed in range(10):
        log: list[tuple] = []
        a = Recording(BotPlayer(names[0]), log, True)
        b = Recording(BotPlayer(names[1]), log, False)
        (result,) = play_pairs([a, b], [(0, 1)], 1, seed=seed, target=7)
        seat = "R"  # match 0: the first player is Red and Red starts
        state = None
        regret = np.zeros(8)
        match_regret = np.zeros(8)
        decisions = np.zeros(8, dtype=int)
        margin = 0
        for first, board, mover, slot in log:
            if state is None:
                state = State.new_round(LAYOUTS[board], "R", target=7)
            elif state.round_over:
                state = state.next_round(LAYOUTS[board])  # the starting rule
            assert COLORS[mover] == state.to_move and first == (state.to_move == seat)
            if first:
                values = solver.move_values(state)
                move = 9 - state.stacks
                regret[move] += max(values.values()) - values[slot]
                chances = match_move_values(state)
                match_regret[move] += max(chances.values()) - chances[slot]
                decisions[move] += 1
            state = state.play(slot)
            if state.round_over:
                strength = state.strength
                margin += strength[seat] - strength["B"]
        assert state is not None and state.match_over
        assert result.wins_a == int(state.winner == seat)
        assert result.decisions_by_move == decisions.tolist()
        assert result.regret_by_move == pytest.approx(regret.tolist())
        assert result.match_regret_by_move == pytest.approx(match_regret.tolist(), abs=1e-12)
        assert result.margin_a == margin
        measured = figures(result)
        assert measured.mean_regret == pytest.approx(regret.sum() / decisions.sum())
        assert measured.mean_round_margin == pytest.approx(margin / result.rounds)


def test_the_perfect_bots_have_no_regret_and_beat_the_random_bot() -> None:
    result = evaluate("perfect", "random", 200, seed=0)
    assert result.mean_match_regret == 0.0
    assert result.win_rate == 1.0
    assert result.mean_round_margin > 0
    assert all(r == 0.0 for r in result.match_regret_by_move)
    margin = evaluate("margin", "random", 200, seed=0)
    assert margin.mean_regret == 0.0 and margin.win_rate == 1.0
    assert all(r == 0.0 for r in margin.regret_by_move)


def test_a_card_and_a_training_log_measure_the_same_matches_for_one_seed() -> None:
    """A card measures a policy with ``evaluate`` against bot objects, one at a time; a
    periodic evaluation with ``evaluate_many`` against the bots by name, all at once. For one
    seed they play the same matches, and another seed other ones."""
    policy = load_policy("buttonup-ppo")
    cards = [evaluate(policy, bot, 40, seed=5) for bot in (RandomBot(), PerfectBot())]
    log = evaluate_many(policy, ["random", "perfect"], 40, seed=5)
    timing = ("seconds", "matches_per_second")
    for card, row in zip(cards, log, strict=True):
        assert {k: v for k, v in card.to_dict().items() if k not in timing} == {
            k: v for k, v in row.to_dict().items() if k not in timing
        }
    other = evaluate(policy, PerfectBot(), 40, seed=6)
    assert (other.rounds, other.regret_by_move) != (cards[1].rounds, cards[1].regret_by_move)
    assert log[1].decisions == sum(log[1].decisions_by_move) > 0


def test_a_player_with_act_alone_plays_the_matches_its_table_bot_plays() -> None:
    """A player known only by ``act(state)`` (here the greedy bot behind another class) is
    asked one game at a time; it plays the greedy bot's moves (ties aside), so its figures are
    the table bot's within the tie-breaks' sampling error."""

    class OwnGreedy:
        def __init__(self) -> None:
            self.inner = GreedyBot(seed=0)

        def act(self, state: State) -> int:
            return self.inner.act(state)

    own = evaluate(OwnGreedy(), "random", 60, seed=3)
    table = evaluate("greedy", "random", 60, seed=3)
    assert abs(own.mean_regret - table.mean_regret) < 0.15
    assert own.decisions == sum(own.decisions_by_move) > 0


def test_evaluate_many_plays_each_opponent_as_evaluate_does() -> None:
    together = evaluate_many("greedy", ["random", "perfect"], 30, seed=2)
    alone = [evaluate("greedy", name, 30, seed=2) for name in ("random", "perfect")]
    for a, b in zip(together, alone, strict=True):
        assert (a.wins, a.rounds, a.mean_regret) == (b.wins, b.rounds, b.mean_regret)
    with pytest.raises(ValueError, match="at least one opponent"):
        evaluate_many("greedy", [], 10)


def test_the_measured_policys_file_path_does_not_change_its_matches(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Training evaluates its learner from a file in the run's folder: two runs with one seed
    in two folders must play the same matches."""
    import shutil

    from buttonup_env.players.shipped import shipped_policy_path

    paths = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        paths.append(shutil.copy(shipped_policy_path("buttonup-ppo"), tmp_path / folder / "p.onnx"))
    first, second = (evaluate_many(load_policy(p), ["random", "greedy"], 20, seed=3) for p in paths)
    for a, b in zip(first, second, strict=True):
        assert (a.wins, a.rounds, a.decisions, a.regret_by_move) == (
            b.wins,
            b.rounds,
            b.decisions,
            b.regret_by_move,
        )
