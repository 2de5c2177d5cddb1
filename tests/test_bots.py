"""The bots: legal moves, seeding, and the greedy rule on positions built for it."""

from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest

from buttonup_env.game import solver
from buttonup_env.game.equity import best_moves, match_move_values
from buttonup_env.game.rules import LAYOUTS, State, other
from buttonup_env.players.bots import (
    BOT_CLASSES,
    BOT_NAMES,
    GradedBot,
    GreedyBot,
    MarginBot,
    PerfectBot,
    Player,
    RandomBot,
    check_target_for,
    graded_name,
    graded_p,
    immediate_margin,
    make_bot,
)

EVERY_BOT = [RandomBot, GreedyBot, MarginBot, PerfectBot, functools.partial(GradedBot, 0.3)]


def positions(seed: int, games: int) -> list[State]:
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(games):
        state = State.new_round(LAYOUTS[int(rng.integers(len(LAYOUTS)))], "R")
        while not state.round_over:
            found.append(state)
            legal = state.legal_moves()
            state = state.play(legal[int(rng.integers(len(legal)))])
    return found


def margin_if_final(board: tuple[str, ...], color: str) -> int:
    """``color``'s strength minus the opponent's, scoring every stack as if it were final."""
    total = 0
    for stack in board:
        for height, button in enumerate(stack, start=1):
            if button == color:
                total += height
            elif button == other(color):  # type: ignore[arg-type]
                total -= height
    return total


def greedy_candidates(state: State) -> set[int]:
    """The moves the greedy rule allows, computed with ``State.play``."""
    scored = []
    for slot in state.legal_moves():
        after = state.play(slot)
        extra_turn = not after.round_over and after.to_move == state.to_move
        scored.append((extra_turn, margin_if_final(after.board, state.to_move), slot))
    best = max((e, m) for e, m, _ in scored)
    return {slot for e, m, slot in scored if (e, m) == best}


@pytest.mark.parametrize("bot_class", EVERY_BOT)
def test_bots_play_legal_moves(bot_class: type) -> None:
    bot = bot_class(np.random.default_rng(0))
    assert isinstance(bot, Player)
    for state in positions(1, games=30):
        slot = bot.act(state)
        assert type(slot) is int
        assert slot in state.legal_moves()


@pytest.mark.parametrize("bot_class", EVERY_BOT)
def test_bots_play_whole_rounds_for_both_colours(bot_class: type) -> None:
    for first in ("R", "B"):
        state = State.new_round(LAYOUTS[100], first)
        bot = bot_class(3)
        moves = 0
        while not state.round_over:
            state = state.play(bot.act(state))
            moves += 1
        assert moves == 8


@pytest.mark.parametrize("bot_class", EVERY_BOT)
def test_bots_refuse_a_finished_round(bot_class: type) -> None:
    state = State.from_notation(". . . . . RBBBRWRWW . . .", "R")
    assert state.round_over
    with pytest.raises(ValueError, match="round is over"):
        bot_class(0).act(state)


@pytest.mark.parametrize("bot_class", EVERY_BOT)
@pytest.mark.parametrize("seed", [-1, 1.5, "7", True, [1]])
def test_bad_seed(bot_class: type, seed: object) -> None:
    with pytest.raises(ValueError, match="seed"):
        bot_class(seed)


def test_seeds_that_are_accepted() -> None:
    state = State.new_round("B W W B B R W R R", "R")
    for seed in (None, 0, 2**40, np.random.default_rng(5)):
        assert RandomBot(seed).act(state) in (1, 2, 6)


def test_bots_by_name() -> None:
    assert BOT_NAMES == ("random", "greedy", "margin", "perfect") == tuple(BOT_CLASSES)
    assert BOT_CLASSES == {
        "random": RandomBot,
        "greedy": GreedyBot,
        "margin": MarginBot,
        "perfect": PerfectBot,
    }
    assert [type(make_bot(name)) for name in BOT_NAMES] == list(BOT_CLASSES.values())


def test_perfect_plays_the_game_being_played() -> None:
    """``perfect`` plays the match (a best move of the match solved); with the round's
    objective (one-round episodes) it plays as the margin player."""
    assert make_bot("perfect").objective == "match"
    assert make_bot("perfect", objective="round").objective == "round"
    assert make_bot("perfect-0.2", objective="round").objective == "round"  # type: ignore[attr-defined]
    for state in positions(11, games=20):
        state = State(state.board, state.to_move, {"R": 13, "B": 12}, 15, state.starter)
        best = best_moves(match_move_values(state))
        assert PerfectBot(1).act(state) in best
        margins = solver.move_values(state)
        top = max(margins.values())
        assert margins[PerfectBot(1, objective="round").act(state)] == top
        assert margins[MarginBot(1).act(state)] == top
    with pytest.raises(ValueError, match="objective='game' is not allowed"):
        PerfectBot(objective="game")


def test_the_match_players_know_the_largest_target() -> None:
    check_target_for(PerfectBot(), 100)
    check_target_for(MarginBot(), 1000)
    check_target_for(PerfectBot(objective="round"), 1000)
    for player in (PerfectBot(), GradedBot(0.5)):
        with pytest.raises(ValueError, match="solved for targets up to 100, not 101"):
            check_target_for(player, 101)


# --- RandomBot ----------------------------------------------------------------------------------


def test_random_bot_same_seed_same_moves() -> None:
    states = positions(2, games=20)

    def moves(seed: int) -> list[int]:
        bot = RandomBot(seed)
        return [bot.act(state) for state in states]

    assert moves(42) == moves(42)
    assert moves(42) != moves(43)
    bot = RandomBot(0)
    bot.reset(np.random.default_rng(8))  # the env hands its generator to the bot this way
    fresh = RandomBot(np.random.default_rng(8))
    assert [bot.act(s) for s in states] == [fresh.act(s) for s in states]


def test_random_bot_covers_every_legal_move() -> None:
    state = State.new_round("B W W B B R W R R", "R")
    bot = RandomBot(np.random.default_rng(1))
    counts = Counter(bot.act(state) for _ in range(3000))
    assert set(counts) == {1, 2, 6}
    assert all(800 < n < 1200 for n in counts.values())  # uniform: about 1000 each
    two = State.from_notation("B . . . . RBB WWW R R", "B")
    assert two.legal_moves() == (6,)
    assert {bot.act(two) for _ in range(20)} == {6}


# --- GreedyBot ----------------------------------------------------------------------------------


def test_greedy_prefers_an_extra_turn_over_a_better_margin() -> None:
    state = State.from_notation("R W . BW B B W R R", "B")
    after = {slot: state.play(slot) for slot in state.legal_moves()}
    extra = {slot for slot, s in after.items() if not s.round_over and s.to_move == "B"}
    margins = {slot: margin_if_final(s.board, "B") for slot, s in after.items()}
    # the premise: one move earns another turn, another move has a strictly better margin
    assert extra == {1}
    assert max(margins.values()) > margins[1]
    for seed in range(10):
        assert GreedyBot(seed).act(state) == 1


def test_greedy_maximises_immediate_margin_without_extra_turns() -> None:
    state = State.from_notation("R W . . BB BW . RW R", "B")
    after = {slot: state.play(slot) for slot in state.legal_moves()}
    assert all(s.to_move == "R" for s in after.values())  # no move earns another turn
    margins = {slot: margin_if_final(s.board, "B") for slot, s in after.items()}
    assert len(set(margins.values())) == len(margins) == 3  # a unique best
    best = max(margins, key=margins.__getitem__)
    for seed in range(10):
        assert GreedyBot(seed).act(state) == best


def test_greedy_follows_its_rule_everywhere() -> None:
    bot = GreedyBot(np.random.default_rng(6))
    for state in positions(4, games=60):
        assert bot.act(state) in greedy_candidates(state)


def test_greedy_breaks_ties_with_its_generator() -> None:
    tied = [s for s in positions(9, games=60) if len(greedy_candidates(s)) > 1]
    assert tied, "the random games should reach a greedy tie"
    state = tied[0]
    picks = {GreedyBot(seed).act(state) for seed in range(40)}
    assert picks == greedy_candidates(state)
    assert [GreedyBot(5).act(s) for s in tied] == [GreedyBot(5).act(s) for s in tied]


def test_greedy_knows_the_last_move_earns_nothing() -> None:
    # Lifting slot 0 puts white on white, which would earn a turn, but it is the round's last
    # move; both moves leave the same margin, so the greedy rule has a tie to break.
    state = State.from_notation("W . . . RRRBBBWW . . . .", "B")
    assert state.legal_moves() == (0, 4)
    margins = {s: margin_if_final(state.play(s).board, "B") for s in state.legal_moves()}
    assert margins[0] == margins[4]
    assert {GreedyBot(seed).act(state) for seed in range(20)} == {0, 4}


def test_immediate_margin() -> None:
    board = ("RB", "", "W", "BBR", "", "", "W", "R", "RWBW")
    assert immediate_margin(board, "R") == margin_if_final(board, "R")
    assert immediate_margin(board, "B") == -immediate_margin(board, "R")
    assert immediate_margin(("RBBBRWRWW", *[""] * 8), "R") == 4  # the worked example's end


# --- GradedBot ----------------------------------------------------------------------------------


def test_graded_bots_by_name() -> None:
    assert graded_p("perfect-0.3") == 0.3 and graded_p("perfect-1") == 1.0
    assert graded_p("perfect") is None and graded_p("greedy") is None
    assert graded_name(0.30) == "perfect-0.3" and graded_name(0.0) == "perfect-0"
    for bad in ("perfect-1.5", "perfect--0.1", "perfect-x", "perfect-nan", "perfect-"):
        with pytest.raises(ValueError, match="is not a graded bot"):
            graded_p(bad)
    assert isinstance(make_bot("perfect-0.25"), GradedBot) and make_bot("perfect-0.25").p == 0.25
    assert isinstance(make_bot("greedy", seed=3), GreedyBot)
    with pytest.raises(ValueError, match="'best' is not a bot; the bots are random, greedy"):
        make_bot("best")


@pytest.mark.parametrize("p", [-0.1, 1.01, float("nan"), "0.3", True])
def test_a_graded_bot_needs_a_probability(p: object) -> None:
    with pytest.raises(ValueError, match="is not allowed; use a probability in"):
        GradedBot(p)  # type: ignore[arg-type]


def test_a_graded_bot_plays_random_moves_as_often_as_it_says() -> None:
    """In positions where no random legal slot is a best move, perfect-0.4 plays a non-best
    slot 0.4 x (its share of the legal slots) of the time, and only best slots otherwise."""
    bot, never_wrong = GradedBot(0.4, seed=7), GradedBot(0.0, seed=8)
    expected = wrong = 0.0
    for state in positions(5, games=40):
        values = PerfectBot().move_values(state)
        best = {s for s, v in values.items() if v == max(values.values())}
        share = 1 - len(best) / len(values)
        for _ in range(20):
            wrong += bot.act(state) not in best
            expected += 0.4 * share
        assert never_wrong.act(state) in best
    assert abs(wrong - expected) < 4 * np.sqrt(expected)
