"""``buttonup_env.ui.narration``: a move told from the positions before and after it."""

from __future__ import annotations

import pytest

from buttonup_env.game.rules import State
from buttonup_env.ui.narration import Move, describe_move

MOVES = [
    # (board, mover, slot, drops, overflow, landed on, extra turn, what describe_move says)
    ("B W W B B R W R R", "R", 1, [(2, "W")], False, "W", True, "W lands on W on slot 2, Red"),
    ("B W W B B R W R R", "R", 2, [(3, "W")], False, "B", False, "W lands on B on slot 3."),
    (". . . . RBB B WWW R R", "B", 6, [(7, "W"), (8, "W"), (4, "W")], False, "B", False, "B on"),
    ("W . . . RRRBBBWW . . . .", "R", 0, [(4, "W")], False, "W", False, "the round is over."),
    ("RBW . . . . . . BRW BWR", "B", 0, [(7, "R"), (8, "BW")], True, "R", False, "together"),
    ("WW . . . . . . . RRRBBBW", "R", 0, [(8, "WW")], True, "W", False, "the only stack left"),
]


@pytest.mark.parametrize(
    ("board", "mover", "slot", "drops", "overflow", "under", "again", "said"), MOVES
)
def test_a_move_is_read_off_the_two_positions(
    board: str,
    mover: str,
    slot: int,
    drops: list[tuple[int, str]],
    overflow: bool,
    under: str,
    again: bool,
    said: str,
) -> None:
    before = State.from_notation(board, mover)  # type: ignore[arg-type]
    move = Move.play(before, slot)
    assert move.after == before.play(slot) and move.mover == mover
    assert move.lifted == before.board[slot]
    assert move.drops == drops
    assert "".join(b for _, b in drops) == move.lifted  # every button went somewhere, in order
    assert (move.overflow, move.landed_on, move.extra_turn) == (overflow, under, again)
    assert said in describe_move(before, slot, move.after)
