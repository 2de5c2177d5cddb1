"""Invariants of the rules checked with Hypothesis over many random games."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from buttonup_env.envs.env import ButtonUpEnv
from buttonup_env.game.encoding import legal_mask
from buttonup_env.game.rules import LAYOUTS, State, other

layouts = st.integers(min_value=0, max_value=len(LAYOUTS) - 1)
colors = st.sampled_from(["R", "B"])
# a move choice: index into the legal moves, taken modulo how many there are
choices = st.lists(st.integers(min_value=0, max_value=2), min_size=8, max_size=8)
scores = st.integers(min_value=0, max_value=14)

SETTINGS = settings(max_examples=300, deadline=None)


def play_round(state: State, picks: list[int]) -> list[State]:
    """The positions of a round from ``state``, choosing moves by ``picks``."""
    states = [state]
    for pick in picks:
        if state.round_over:
            break
        legal = state.legal_moves()
        state = state.play(legal[pick % len(legal)])
        states.append(state)
    return states


def buttons(state: State) -> Counter[str]:
    return Counter("".join(state.board))


@SETTINGS
@given(layouts, colors, choices, scores, scores)
def test_round_invariants(index: int, first: str, picks: list[int], red: int, black: int) -> None:
    start = State.new_round(LAYOUTS[index], first, score={"R": red, "B": black})  # type: ignore[arg-type]
    states = play_round(start, picks)
    assert len(states) == 9  # exactly eight moves a round, whatever the choices
    for number, state in enumerate(states):
        assert buttons(state) == {"R": 3, "B": 3, "W": 3}
        assert len(state.board) == 9
        assert state.stacks == 9 - number  # one stack fewer per move
        assert state.moves_played == number
        assert state.round_over is (number == 8)
        expected = () if number == 8 else tuple(s for s in range(9) if "W" in state.board[s])
        assert state.legal_moves() == expected
        assert len(state.legal_moves()) <= 3
        if number < 8:
            assert state.legal_moves(), "a round in progress always has a legal move"
            assert state.score == start.score
        assert state.target == start.target
        assert state.starter == first
    for before, after in pairwise(states):
        emptied = [s for s in range(9) if before.board[s] and not after.board[s]]
        assert len(emptied) == 1
        assert emptied[0] in before.legal_moves()
        assert not any(after.board[s] and not before.board[s] for s in range(9))


@SETTINGS
@given(layouts, colors, choices, scores, scores)
def test_final_stack_strength_and_points(
    index: int, first: str, picks: list[int], red: int, black: int
) -> None:
    start = State.new_round(LAYOUTS[index], first, score={"R": red, "B": black})  # type: ignore[arg-type]
    final = play_round(start, picks)[-1]
    (stack,) = [s for s in final.board if s]
    assert len(stack) == 9
    whites = sum(height for height, button in enumerate(stack, start=1) if button == "W")
    strength = final.strength
    assert strength["R"] + strength["B"] + whites == 45
    assert strength["R"] == sum(h for h, b in enumerate(stack, start=1) if b == "R")
    points = final.round_points
    assert points["R"] - points["B"] == strength["R"] - strength["B"]
    assert min(points.values()) == 0
    assert max(points.values()) <= 18
    assert final.score == {"R": red + points["R"], "B": black + points["B"]}
    if final.match_over:
        assert final.score[final.winner] >= final.target  # type: ignore[index]
        assert final.score[other(final.winner)] < final.target  # type: ignore[arg-type]


@SETTINGS
@given(layouts, colors, choices)
def test_extra_turn_means_same_mover(index: int, first: str, picks: list[int]) -> None:
    states = play_round(State.new_round(LAYOUTS[index], first), picks)  # type: ignore[arg-type]
    for before, after in pairwise(states[:-1]):  # the last move ends the round
        lifted = next(s for s in range(9) if before.board[s] and not after.board[s])
        stack = before.board[lifted]
        targets = [(lifted + step) % 9 for step in range(1, 9) if before.board[(lifted + step) % 9]]
        k, m = len(stack), len(targets)
        if k <= m:
            landed_on = before.board[targets[k - 1]][-1]
            extra_turn = landed_on == stack[-1]
        else:
            extra_turn = False
        assert (after.to_move == before.to_move) is extra_turn


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32 - 1),
    st.lists(st.integers(min_value=0, max_value=8), min_size=60, max_size=60),
    st.sampled_from(["random", "greedy"]),
)
def test_env_mask_is_the_legal_moves(seed: int, picks: list[int], opponent: str) -> None:
    env = ButtonUpEnv(opponent=opponent, target=5)
    _, info = env.reset(seed=seed)
    for pick in picks:
        state = info["state"]
        legal = state.legal_moves()
        mask = info["action_mask"]
        assert mask.dtype == np.int8
        assert np.array_equal(mask, env.action_masks().astype(np.int8))
        assert tuple(np.flatnonzero(mask)) == legal
        assert np.array_equal(legal_mask(state), env.action_masks())
        assert state.to_move == env.agent_color
        _, _, terminated, truncated, info = env.step(legal[pick % len(legal)])
        assert not truncated
        if terminated:
            assert info["state"].match_over
            assert env.action_masks().all()
            break
