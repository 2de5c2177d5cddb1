"""The rules core (``buttonup_env.game.rules``) against docs/rules.md: tables of moves and
boards."""

from __future__ import annotations

import copy
import pickle
import re
from collections import Counter

import numpy as np
import pytest

from buttonup_env.game.rules import (
    CLOCKWISE_AFTER,
    LAYOUTS,
    MAX_ROUND_MARGIN,
    State,
    format_board,
    next_starter,
    parse_board,
    random_layout,
    round_points,
    sow,
    sow_counting_stacks,
    strength,
    white_slots,
)

WORKED_LAYOUT = "B W W B B R W R R"

# The worked example of docs/rules.md: (move number, mover, slot, board after, extra turn).
WORKED_EXAMPLE = [
    (1, "R", 1, "B . WW B B R W R R", True),
    (2, "R", 2, "B . . BW BW R W R R", False),
    (3, "B", 4, "B . . BW . RB WW R R", True),
    (4, "B", 3, "B . . . . RBB WWW R R", True),
    (5, "B", 6, "BW . . . . RBB . RW RW", False),
    (6, "R", 7, "BWW . . . . RBB . . RWR", True),
    (7, "R", 0, ". . . . . RBBB . . RWRWW", False),
    (8, "B", 8, ". . . . . RBBBRWRWW . . .", False),
]


def worked_position(moves_played: int) -> State:
    """The worked example's position after its first ``moves_played`` moves."""
    state = State.new_round(WORKED_LAYOUT, "R")
    for _, _, slot, _, _ in WORKED_EXAMPLE[:moves_played]:
        state = state.play(slot)
    return state


def final_state() -> State:
    return worked_position(8)


# --- the worked example ------------------------------------------------------------------------


@pytest.mark.parametrize(("number", "mover", "slot", "after", "extra_turn"), WORKED_EXAMPLE)
def test_worked_example_move(
    number: int, mover: str, slot: int, after: str, extra_turn: bool
) -> None:
    before = worked_position(number - 1)
    assert before.to_move == mover
    assert slot in before.legal_moves()
    state = before.play(slot)
    assert state.notation == after
    assert state.moves_played == number
    board, sow_flag = sow(before.board, slot)
    assert format_board(board) == after
    if number < 8:
        assert not state.round_over
        assert (state.to_move == mover) is extra_turn
        assert sow_flag is extra_turn
    else:
        assert state.round_over
        assert not extra_turn


def test_worked_example_final_score() -> None:
    state = final_state()
    assert state.round_over
    assert state.legal_moves() == ()
    assert state.strength == {"R": 13, "B": 9}
    assert state.round_points == {"R": 4, "B": 0}
    assert state.score == {"R": 4, "B": 0}
    assert not state.match_over
    assert state.winner is None


# --- sowing ------------------------------------------------------------------------------------

# (board before, slot lifted, board after, extra turn by the sowing rule)
SOW_CASES = {
    "bottom button first": ("RBW B R W B R W . .", 0, ". BR RB WW B R W . .", True),
    "skips empty slots": ("RBW R B . W R B . W", 0, ". RR BB . WW R B . W", True),
    "wraps from 8 to 0": ("R B W . B W R RBW .", 7, "RR BB WW . B W R . .", True),
    "last button on a different colour": ("R W . BW B B W R R", 3, "R W . . BB BW W R R", False),
    "k equal to m is no overflow": ("RW . . BW . . BBRRW . .", 0, ". . . BWR . . BBRRWW . .", True),
    "overflow piles the rest on the m-th stack": (
        "RBW . . RB . . RWWB . .",
        0,
        ". . . RBR . . RWWBBW . .",
        False,
    ),
    "overflow never earns a turn, even on a match": (
        "BWW . . RRB . . BRW . .",
        0,
        ". . . RRBB . . BRWWW . .",
        False,
    ),
    "overflow with one stack left": (
        ". . . . . RBBB . . RWRWW",
        8,
        ". . . . . RBBBRWRWW . . .",
        False,
    ),
    "single button onto the next stack": ("W R B W R B W R B", 0, ". RW B W R B W R B", False),
    "white on white": ("R W W B B B W R R", 1, "R . WW B B B W R R", True),
}


@pytest.mark.parametrize(
    ("before", "slot", "after", "extra_turn"), SOW_CASES.values(), ids=SOW_CASES
)
def test_sow(before: str, slot: int, after: str, extra_turn: bool) -> None:
    board = parse_board(before)
    new, flag = sow(board, slot)
    assert format_board(new) == after
    assert flag is extra_turn
    assert board == parse_board(before)  # sowing returns a new board


@pytest.mark.parametrize(
    ("before", "slot", "after", "extra_turn"), SOW_CASES.values(), ids=SOW_CASES
)
def test_play_applies_the_extra_turn(before: str, slot: int, after: str, extra_turn: bool) -> None:
    for mover in ("R", "B"):
        state = State.from_notation(before, mover).play(slot)
        assert state.notation == after
        if not state.round_over:
            assert (state.to_move == mover) is extra_turn
        else:
            assert state.to_move != mover


@pytest.mark.parametrize(
    ("before", "slot", "after", "extra_turn"), SOW_CASES.values(), ids=SOW_CASES
)
def test_sow_counting_stacks_counts_the_stacks_left(
    before: str, slot: int, after: str, extra_turn: bool
) -> None:
    board = parse_board(before)
    new, flag, stacks = sow_counting_stacks(board, slot)
    assert (format_board(new), flag) == (after, extra_turn)
    assert stacks == sum(1 for stack in new if stack) == sum(1 for s in board if s) - 1


def test_clockwise_after_lists_the_other_slots_from_the_next_one() -> None:
    assert CLOCKWISE_AFTER[0] == (1, 2, 3, 4, 5, 6, 7, 8)
    assert CLOCKWISE_AFTER[7] == (8, 0, 1, 2, 3, 4, 5, 6)
    assert all(sorted(after) == [s for s in range(9) if s != slot]
               for slot, after in enumerate(CLOCKWISE_AFTER))  # fmt: skip


def test_white_slots_are_the_legal_moves_of_a_round_going_on() -> None:
    for move, _, slot, _, _ in WORKED_EXAMPLE[:-1]:
        state = worked_position(move - 1)
        assert white_slots(state.board) == state.legal_moves() and slot in state.legal_moves()
    final = final_state()
    assert final.legal_moves() == () and len(white_slots(final.board)) == 1


def test_child_is_play_without_the_checks() -> None:
    state = State.new_round(WORKED_LAYOUT, "R")
    while not state.round_over:
        for slot in state.legal_moves():
            assert state.child(slot) == state.play(slot)
        state = state.play(state.legal_moves()[-1])


def test_why_illegal_is_the_sentence_play_raises() -> None:
    state = State.new_round(WORKED_LAYOUT, "R")
    for slot in (0, 3, 9, -1, "1"):
        with pytest.raises(ValueError) as error:
            state.play(slot)  # type: ignore[arg-type]
        assert str(error.value) == state.why_illegal(slot)
    final = final_state()
    assert final.why_illegal(0).startswith("the round is over")


def test_score_pair_is_the_score_as_red_then_black() -> None:
    state = State.from_notation(WORKED_LAYOUT, "B", score={"R": 4, "B": 11})
    assert state.score_pair == (4, 11) == (state.score["R"], state.score["B"])


def test_max_round_margin_is_the_largest_of_all_final_stacks() -> None:
    margins = {
        abs(s["R"] - s["B"]) for s in map(strength, {"".join(p) for p in LAYOUTS})
    }  # every order of the nine buttons is a final stack some round can end with
    assert max(margins) == MAX_ROUND_MARGIN == 18


def test_extra_turn_is_void_on_the_eighth_move() -> None:
    before = State.from_notation("W . . . RRRBBBWW . . . .", "R")
    assert before.moves_played == 7
    board, flag = sow(before.board, 0)
    assert flag is True  # white lands on white: the sowing rule alone would give a turn
    after = before.play(0)
    assert format_board(board) == after.notation == ". . . . RRRBBBWWW . . . ."
    assert after.round_over
    assert after.to_move == "B"
    assert after.legal_moves() == ()


def test_move_empties_exactly_the_lifted_slot() -> None:
    state = State.new_round(WORKED_LAYOUT, "R")
    for slot in state.legal_moves():
        after = state.play(slot)
        emptied = [s for s in range(9) if state.board[s] and not after.board[s]]
        assert emptied == [slot]
        assert after.stacks == state.stacks - 1


# --- scoring and the starting rule --------------------------------------------------------------


@pytest.mark.parametrize(
    ("stack", "expected"),
    [
        ("RBBBRWRWW", {"R": 13, "B": 9}),  # docs/rules.md
        ("RRRBBBWWW", {"R": 6, "B": 15}),
        ("WWWRRRBBB", {"R": 15, "B": 24}),
        ("BBBWWWRRR", {"R": 24, "B": 6}),
        ("RBWRBWRBW", {"R": 12, "B": 15}),
    ],
)
def test_strength(stack: str, expected: dict[str, int]) -> None:
    assert strength(stack) == expected


@pytest.mark.parametrize(
    ("strengths", "points"),
    [
        ({"R": 13, "B": 9}, {"R": 4, "B": 0}),
        ({"R": 6, "B": 15}, {"R": 0, "B": 9}),
        ({"R": 12, "B": 12}, {"R": 0, "B": 0}),
        ({"R": 24, "B": 6}, {"R": 18, "B": 0}),
    ],
)
def test_round_points(strengths: dict[str, int], points: dict[str, int]) -> None:
    assert round_points(strengths) == points


@pytest.mark.parametrize(
    ("score", "previous", "starter"),
    [
        ({"R": 3, "B": 5}, "R", "R"),  # fewer points starts
        ({"R": 3, "B": 5}, "B", "R"),
        ({"R": 9, "B": 2}, "R", "B"),
        ({"R": 9, "B": 2}, "B", "B"),
        ({"R": 4, "B": 4}, "R", "B"),  # tie: who did not start the previous round
        ({"R": 4, "B": 4}, "B", "R"),
        ({"R": 0, "B": 0}, "R", "B"),
        ({"R": 0, "B": 0}, "B", "R"),
    ],
)
def test_next_starter(score: dict[str, int], previous: str, starter: str) -> None:
    assert next_starter(score, previous) == starter  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("score", "starter", "first"),
    [
        ({"R": 0, "B": 0}, "R", "B"),  # the round ends 4-0 for Red: Black has fewer points
        ({"R": 0, "B": 4}, "R", "B"),  # tied 4-4 after it: who did not start this round
        ({"R": 0, "B": 4}, "B", "R"),
        ({"R": 0, "B": 10}, "R", "R"),  # 4-10: Red has fewer points
    ],
)
def test_next_round_follows_the_starting_rule(
    score: dict[str, int], starter: str, first: str
) -> None:
    before = State.from_notation(
        ". . . . . RBBB . . RWRWW", "B", score=score, starter=starter, target=15
    )
    final = before.play(8)
    assert final.score == {"R": score["R"] + 4, "B": score["B"]}
    layout = "R R R B B B W W W"
    nxt = final.next_round(layout)
    assert nxt.notation == layout
    assert nxt.to_move == nxt.starter == first
    assert nxt.score == final.score
    assert nxt.target == 15
    assert nxt.moves_played == 0


def test_match_over_and_winner() -> None:
    before = State.from_notation(". . . . . RBBB . . RWRWW", "B", score={"R": 11, "B": 14})
    final = before.play(8)
    assert final.score == {"R": 15, "B": 14}
    assert final.match_over
    assert final.winner == "R"
    not_yet = State.from_notation(". . . . . RBBB . . RWRWW", "B", score={"R": 10, "B": 14})
    assert not not_yet.play(8).match_over


# --- notation, values, layouts -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "B W W B B R W R R",
        "B . . BW BW R W R R",
        ". . . . . RBBBRWRWW . . .",
        "BWW . . . . RBB . . RWR",
    ],
)
def test_notation_round_trip(text: str) -> None:
    state = State.from_notation(text, "B", score={"R": 3, "B": 7}, target=20, starter="R")
    assert state.notation == text
    assert format_board(parse_board(text)) == text
    again = State.from_notation(state.notation, state.to_move, state.score, state.target)
    assert again.board == state.board
    assert eval(repr(state), {"State": State}) == state


def test_parse_board_reads_stacks_bottom_to_top() -> None:
    assert parse_board("B . . BW BW R W R R") == ("B", "", "", "BW", "BW", "R", "W", "R", "R")


def test_state_is_immutable() -> None:
    state = State.new_round(WORKED_LAYOUT, "R")
    for name, value in [("board", ("",) * 9), ("to_move", "B"), ("target", 3), ("starter", "B")]:
        with pytest.raises(AttributeError):
            setattr(state, name, value)
    with pytest.raises(AttributeError):
        state.extra = 1  # type: ignore[attr-defined]
    state.score["R"] = 99  # a copy: the state keeps its score
    assert state.score == {"R": 0, "B": 0}
    assert state == State.new_round(WORKED_LAYOUT, "R")


def test_state_attributes_cannot_be_deleted() -> None:
    state = State.new_round(WORKED_LAYOUT, "R")
    with pytest.raises(AttributeError):
        del state.board
    assert state.notation == WORKED_LAYOUT


def test_equality_and_hash() -> None:
    a = State.new_round(WORKED_LAYOUT, "R")
    b = State.from_notation(WORKED_LAYOUT, "R", score={"R": 0, "B": 0}, target=15, starter="R")
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a.play(1) == b.play(1)
    assert hash(a.play(1)) == hash(b.play(1))
    different = [
        State.new_round(WORKED_LAYOUT, "B"),
        State.new_round(WORKED_LAYOUT, "R", score={"R": 1, "B": 0}),
        State.new_round(WORKED_LAYOUT, "R", target=10),
        State.from_notation(WORKED_LAYOUT, "R", starter="B"),
        State.new_round("R R R B B B W W W", "R"),
    ]
    for other_state in different:
        assert other_state != a
    assert len({a, *different}) == 1 + len(different)
    assert a != WORKED_LAYOUT


def test_pickle_and_copy_keep_the_value() -> None:
    state = worked_position(3)
    for clone in (pickle.loads(pickle.dumps(state)), copy.deepcopy(state), copy.copy(state)):
        assert clone == state
        assert hash(clone) == hash(state)
        assert clone.legal_moves() == state.legal_moves()


def test_layouts() -> None:
    assert len(LAYOUTS) == 1680
    assert len(set(LAYOUTS)) == 1680
    assert list(LAYOUTS) == sorted(LAYOUTS)
    for layout in LAYOUTS:
        assert len(layout) == 9
        assert Counter(layout) == {"R": 3, "B": 3, "W": 3}
    assert all(State.new_round(layout, "R").moves_played == 0 for layout in LAYOUTS[:5])


def test_random_layout_is_seeded_and_covers_layouts() -> None:
    draws = [random_layout(np.random.default_rng(7)) for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]
    rng = np.random.default_rng(123)
    seen = {random_layout(rng) for _ in range(5000)}
    assert seen <= set(LAYOUTS)
    assert len(seen) > 1500  # 5000 uniform draws miss about 85 of the 1680 layouts


def _longest_run(state: State) -> int:
    """The most moves the player to move can make in a row from ``state``."""
    best = 1
    for slot in state.legal_moves():
        after = state.play(slot)
        if not after.round_over and after.to_move == state.to_move:
            best = max(best, 1 + _longest_run(after))
    return best


def test_starter_makes_at_most_three_moves_in_a_row() -> None:
    runs = Counter(_longest_run(State.new_round(layout, "R")) for layout in LAYOUTS)
    assert sum(runs.values()) == 1680
    assert max(runs) <= 3
    # the same for Black: extra turns depend only on colours matching, not on who moves
    assert all(
        _longest_run(State.new_round(layout, "B")) == _longest_run(State.new_round(layout, "R"))
        for layout in LAYOUTS[::37]
    )


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("R B W R B W R B", "8 slots"),
        ("R B W R B W R B W R", "10 slots"),
        ("", "0 slots"),
        ("R B W R B W R B X", "'X'"),
        ("R B W R B W R B w", "'w'"),
        ("R B W R B W R B-W .", "'B-W'"),
        ("R B W R B W R B B", "4 B"),
        ("R R R R B B W W W", "4 R"),
        ("RRRBBBWW . . . . . . . .", "2 W"),
    ],
)
def test_bad_board_strings(text: str, named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)) as error:
        parse_board(text)
    assert repr(text) in str(error.value)
    with pytest.raises(ValueError, match=re.escape(named)):
        State.from_notation(text, "R")


def test_board_must_be_a_string() -> None:
    with pytest.raises(ValueError, match="123"):
        parse_board(123)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "board",
    [
        ("R", "B", "W", "R", "B", "W", "R", "B", "X"),
        ("R", "B", "W", "R", "B", "W", "R", "B", "B"),
        ("RR", "B", "W", "R", "B", "W", "R", "B", "W"),
    ],
)
def test_constructor_rejects_boards_that_break_the_rules(board: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        State(board, "R")


def test_constructor_rejects_wrong_slot_count() -> None:
    with pytest.raises(ValueError, match="8"):
        State(("R", "B", "W", "R", "B", "W", "R", "BW"), "R")


def test_new_round_needs_a_set_up() -> None:
    with pytest.raises(ValueError, match=re.escape("'RB . W R B W R B W'")):
        State.new_round("RB . W R B W R B W", "R")
    with pytest.raises(ValueError, match="not a set-up"):
        State.new_round(("RB", "", "W", "R", "B", "W", "R", "B", "W"), "R")


@pytest.mark.parametrize(
    ("slot", "named"),
    [
        (0, "slot 0 (B) holds no white button"),
        (3, "slot 3 (B) holds no white button"),
        (9, "slot 9 does not exist"),
        (-1, "slot -1 does not exist"),
        (100, "slot 100"),
        (True, "slot True"),
        (False, "slot False"),
        ("1", "slot '1'"),
        (None, "slot None"),
        (1.0, "1.0"),
        ([1], "slot [1]"),
    ],
)
def test_illegal_slot(slot: object, named: str) -> None:
    state = State.new_round(WORKED_LAYOUT, "R")  # legal: 1, 2, 6
    assert state.legal_moves() == (1, 2, 6)
    with pytest.raises(ValueError, match=re.escape(named)) as error:
        state.play(slot)  # type: ignore[arg-type]
    assert "1, 2, 6" in str(error.value)  # the message names the legal slots


def test_empty_slot_is_illegal() -> None:
    state = worked_position(1)  # "B . WW B B R W R R"
    with pytest.raises(ValueError, match="slot 1 is empty"):
        state.play(1)


def test_numpy_integer_slot_is_a_slot() -> None:
    state = State.new_round(WORKED_LAYOUT, "R")
    assert state.play(np.int64(1)) == state.play(1)  # type: ignore[arg-type]


def test_play_in_a_finished_round() -> None:
    final = final_state()
    for slot in range(9):
        with pytest.raises(ValueError, match="round is over"):
            final.play(slot)


def test_next_round_before_the_round_ends() -> None:
    with pytest.raises(ValueError, match="not over"):
        worked_position(5).next_round(WORKED_LAYOUT)


def test_next_round_after_the_match_is_won() -> None:
    final = State.from_notation(". . . . . RBBB . . RWRWW", "B", score={"R": 12, "B": 3}).play(8)
    assert final.winner == "R"
    with pytest.raises(ValueError, match="match is over") as error:
        final.next_round(WORKED_LAYOUT)
    assert "16-3" in str(error.value)


def test_next_round_with_a_bad_layout() -> None:
    with pytest.raises(ValueError, match="not a set-up"):
        final_state().next_round("RB . W R B W R B W")


def test_strength_before_the_round_ends() -> None:
    with pytest.raises(ValueError, match="not over"):
        _ = worked_position(2).strength
    with pytest.raises(ValueError, match="not over"):
        _ = worked_position(2).round_points


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"to_move": "G"}, "'G'"),
        ({"to_move": None}, "None"),
        ({"starter": "W"}, "'W'"),
        ({"target": 0}, "0"),
        ({"target": -5}, "-5"),
        ({"target": True}, "True"),
        ({"target": 1.5}, "1.5"),
        ({"target": "15"}, "'15'"),
        ({"score": {"R": -1, "B": 0}}, "-1"),
        ({"score": {"R": 0, "B": 2.5}}, "2.5"),
        ({"score": {"R": True, "B": 0}}, "True"),
        ({"score": {"R": 0}}, "{'R': 0}"),
        ({"score": {"R": 0, "B": 0, "W": 0}}, "'W'"),
        ({"score": "0-0"}, "'0-0'"),
    ],
)
def test_bad_state_arguments(kwargs: dict[str, object], named: str) -> None:
    arguments: dict[str, object] = {"to_move": "R", **kwargs}
    with pytest.raises(ValueError, match=re.escape(named)):
        State.from_notation(WORKED_LAYOUT, **arguments)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape(named)):
        State(parse_board(WORKED_LAYOUT), **arguments)  # type: ignore[arg-type]
    if "starter" not in kwargs:
        layout_args = {k: v for k, v in arguments.items() if k != "to_move"}
        with pytest.raises(ValueError, match=re.escape(named)):
            State.new_round(WORKED_LAYOUT, arguments["to_move"], **layout_args)  # type: ignore[arg-type]
