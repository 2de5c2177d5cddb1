"""The match solved (buttonup_env.game.equity) against what can be computed another way: the round
solver where a round's result is worth a monotone function of its margin, a plain minimax over
the rules engine's positions, the Bellman equation at round starts, and closed forms."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from buttonup_env.game import equity, solver
from buttonup_env.game.equity import match_equity, match_move_values, match_value
from buttonup_env.game.rules import LAYOUTS, MAX_ROUND_MARGIN, State, next_starter

RNG = np.random.default_rng(47)


def red_after(table: equity.EquityTable, score: tuple[int, int], starter: str) -> float:
    """Red's probability once a round started by ``starter`` has ended at ``score``."""
    r, b = score
    if r >= table.target or b >= table.target:
        return 1.0 if r >= table.target else 0.0
    following = next_starter({"R": r, "B": b}, starter)  # type: ignore[arg-type]
    return table.win_probability("R", score, following)


def minimax_red(state: State, table: equity.EquityTable) -> float:
    """Red's probability under perfect play of the match, by plain minimax over the rules."""
    if state.round_over:
        return red_after(table, state.score_pair, state.starter)
    children = [minimax_red(state.play(slot), table) for slot in state.legal_moves()]
    return max(children) if state.to_move == "R" else min(children)


def utility(table: equity.EquityTable, score: tuple[int, int], starter: str) -> list[float]:
    """What each Red margin from -18 to 18 is worth to Red at ``score``."""
    r, b = score
    return [
        red_after(table, (r + max(m, 0), b + max(-m, 0)), starter)
        for m in range(-MAX_ROUND_MARGIN, MAX_ROUND_MARGIN + 1)
    ]


def random_position(score: tuple[int, int], target: int, moves: int) -> State:
    starter = "RB"[int(RNG.integers(2))]
    state = State.new_round(
        LAYOUTS[int(RNG.integers(len(LAYOUTS)))],
        starter,  # type: ignore[arg-type]
        score={"R": score[0], "B": score[1]},
        target=target,
    )
    for _ in range(moves):
        state = state.play(int(RNG.choice(state.legal_moves())))
    return state


def test_the_figures_of_the_issue() -> None:
    """At 0-0 after Red started: Black wins 0.5042 after a tie, 0.5009 after winning by one
    and 0.5064 by two; the first round's starter wins 50.418% of matches to 15."""
    table = match_equity(15)
    assert table.win_probability("B", (0, 0), "B") == pytest.approx(0.5042, abs=5e-5)
    assert table.win_probability("B", (0, 1), "R") == pytest.approx(0.5009, abs=5e-5)
    assert table.win_probability("B", (0, 2), "R") == pytest.approx(0.5064, abs=5e-5)
    assert table.first_starter == pytest.approx(0.50418, abs=5e-6)


def test_target_one_in_closed_form() -> None:
    """To one point a round decides the match unless tied, and then the other player starts:
    E_R = win_R + tie_R * E_B and E_B = win_B + tie_B * E_R (Red's probabilities), where the
    margin player's rounds (a monotone utility) give the win and tie rates."""
    rates = {}
    for starter in "RB":
        margins = [solver.margin_for(State.new_round(layout, starter), "R") for layout in LAYOUTS]
        rates[starter] = (np.mean(np.array(margins) > 0), np.mean(np.array(margins) == 0))
    (win_r, tie_r), (win_b, tie_b) = rates["R"], rates["B"]
    e_r = (win_r + tie_r * win_b) / (1 - tie_r * tie_b)
    e_b = win_b + tie_b * e_r
    table = match_equity(1)
    assert table.red[0, 0, 0] == pytest.approx(e_r, abs=1e-13)
    assert table.red[0, 0, 1] == pytest.approx(e_b, abs=1e-13)


def test_colour_symmetry() -> None:
    """Red's chance at (r, b) with a starter is Black's at (b, r) with the other starter."""
    red = match_equity(9).red
    mirrored = 1.0 - red.transpose(1, 0, 2)[:, :, ::-1]
    assert np.max(np.abs(red - mirrored)) < 1e-12


@pytest.mark.parametrize("target", [2, pytest.param(3, marks=pytest.mark.slow), 15])
def test_every_round_start_is_the_mean_of_its_layouts(target: int) -> None:
    """The Bellman equation at round starts: each entry is the mean over the 1,680 set-ups of
    the best first move's value (the fixed point of the tie included)."""
    table = match_equity(target)
    scores = [(0, 0), (target - 1, target - 1), (0, target - 1)]
    scores += [tuple(int(v) for v in RNG.integers(target, size=2)) for _ in range(2)]
    for r, b in scores:
        for starter in "RB":
            firsts = [
                match_value(State.new_round(layout, starter, score={"R": r, "B": b}, target=target))
                for layout in LAYOUTS
            ]
            red = np.mean(firsts) if starter == "R" else 1.0 - np.mean(firsts)
            assert table.win_probability("R", (r, b), starter) == pytest.approx(red, abs=1e-12)


def test_move_values_equal_a_plain_minimax_over_the_rules() -> None:
    """Within a round, every move's value is the minimax of the rules engine's positions with
    the table at the end of each line, at scores where the margin player is wrong and right."""
    table = match_equity(15)
    for _ in range(40):
        score = (int(RNG.integers(15)), int(RNG.integers(15)))
        state = random_position(score, 15, int(RNG.integers(1, 6)))
        values = match_move_values(state)
        assert sorted(values) == list(state.legal_moves())
        for slot, value in values.items():
            red = minimax_red(state.play(slot), table)
            assert value == pytest.approx(red if state.to_move == "R" else 1.0 - red, abs=1e-12)


def test_monotone_results_make_the_margin_player_perfect() -> None:
    """Where a round's result is worth more the larger its margin, the match's value of every
    move is the worth of the round solver's margin."""
    table = match_equity(15)
    monotone = 0
    for r in range(15):
        for b in range(15):
            for starter in "RB":
                worth = utility(table, (r, b), starter)
                if np.all(np.diff(worth) >= 0):
                    monotone += 1
                    state = random_position((r, b), 15, int(RNG.integers(0, 6)))
                    state = State(state.board, state.to_move, state.score, 15, starter)  # type: ignore[arg-type]
                    margins = solver.move_values(state)
                    sign = 1 if state.to_move == "R" else -1
                    for slot, value in match_move_values(state).items():
                        red = worth[MAX_ROUND_MARGIN + sign * margins[slot]]
                        assert value == pytest.approx(red if sign == 1 else 1 - red, abs=1e-12)
    assert 0 < monotone < 450


def test_results_are_not_monotone_in_the_margin() -> None:
    """The issue's count: in 420 of the 450 score states some larger margin is worth less."""
    table = match_equity(15)
    broken = sum(
        not np.all(np.diff(utility(table, (r, b), starter)) >= -1e-15)
        for r in range(15)
        for b in range(15)
        for starter in "RB"
    )
    assert broken == 420


def test_a_truncated_match_tends_to_the_match() -> None:
    """With more and more rounds allowed, the truncated match's table (a draw worth half a
    win) tends to the match's, geometrically (a tie is about one round in twenty)."""
    full = match_equity(3).red
    gaps = [np.max(np.abs(match_equity(3, rounds_left=n).red - full)) for n in (1, 4, 8, 16)]
    assert all(later < earlier for earlier, later in itertools.pairwise(gaps))
    assert gaps[-1] < 1e-9


def test_one_round_left_is_the_round_itself() -> None:
    """To one point with one round left, Red's chance is its win rate plus half its tie rate."""
    table = match_equity(1, rounds_left=1)
    margins = np.array([solver.margin_for(State.new_round(lay, "R"), "R") for lay in LAYOUTS])
    assert table.red[0, 0, 0] == pytest.approx(np.mean(margins > 0) + np.mean(margins == 0) / 2)
    state = State.new_round(LAYOUTS[7], "B", target=1)
    with_limit = match_move_values(state, rounds_left=1)
    for slot, margin in solver.move_values(state).items():  # Black's margin
        assert with_limit[slot] == (1.0 if margin > 0 else 0.0 if margin < 0 else 0.5)


def test_a_won_match_or_a_finished_round_has_no_move_to_value() -> None:
    state = State.from_notation("RRRBBBWWW . . . . . . . .", "R", target=5)
    with pytest.raises(ValueError, match="round is over"):
        match_move_values(state)
    won = State.new_round(LAYOUTS[0], "R", score={"R": 5, "B": 0}, target=5)
    with pytest.raises(ValueError, match="already won at 5-0"):
        match_move_values(won)


@pytest.mark.parametrize("target", [0, 101, 1000, 2.5, "15", True])
def test_targets_outside_the_solved_range_are_refused(target: object) -> None:
    with pytest.raises(ValueError, match="target=") as error:
        match_equity(target)  # type: ignore[arg-type]
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("rounds_left", [-1, 1.0, "3", 10**6, True])
def test_bad_round_limits_are_refused(rounds_left: object) -> None:
    with pytest.raises(ValueError, match="rounds_left="):
        match_equity(3, rounds_left=rounds_left)  # type: ignore[arg-type]


def test_the_table_is_read_only_and_cached() -> None:
    table = match_equity(4)
    assert match_equity(4).red is table.red
    with pytest.raises(ValueError):
        table.red[0, 0, 0] = 1.0
    assert table.win_probability("R", (4, 2), "B") == 1.0
    assert table.win_probability("B", (4, 2), "B") == 0.0


def test_the_equity_of_the_starter() -> None:
    """Starting is worth something at every score of a match to 15 but the last (at 14-14,
    each round decides, and the tie's rule hands the start over)."""
    red = match_equity(15).red
    assert np.all(red[:, :, 0] >= red[:, :, 1] - 1e-15)
