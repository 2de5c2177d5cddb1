"""The encodings that see the match (``match-slots``, ``match-afterstates``): the batched engine's
observations of both backends equal the encoding's own, and the features mean what they say."""

from __future__ import annotations

import numpy as np
import pytest

from buttonup_env.engine import numba_backend, numpy_backend
from buttonup_env.engine.numpy_backend import observations
from buttonup_env.engine.tables import game_tables
from buttonup_env.game.encoding import ENCODINGS
from buttonup_env.game.rules import COLORS, LAYOUTS, State

MATCH = ("match-slots", "match-afterstates")


def positions(count: int, seed: int) -> list[State]:
    """Positions of random rounds at random scores, starters and targets, some at round ends
    that reach the target."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        target = int(rng.integers(1, 30))
        r, b = (int(v) for v in rng.integers(0, target, size=2))
        starter = COLORS[int(rng.integers(2))]
        state = State.new_round(LAYOUTS[int(rng.integers(len(LAYOUTS)))], starter)
        state = State(state.board, starter, {"R": r, "B": b}, target, starter)
        for _ in range(int(rng.integers(0, 8))):
            state = state.play(int(rng.choice(state.legal_moves())))
        out.append(state)
    return out


@pytest.mark.parametrize("name", MATCH)
def test_the_engine_observes_as_the_encoding(name: str) -> None:
    tables = game_tables()
    states = positions(400, seed=1)
    own = np.array([int(np.random.default_rng(i).integers(2)) for i in range(len(states))])
    boards = np.array([tables.index_of(s.board) for s in states])
    score = np.array([s.score_pair for s in states])
    starter = np.array([COLORS.index(s.starter) for s in states])
    for i, state in enumerate(states):  # one target per call: the engine's batches share one
        got = observations(
            tables,
            name,
            boards[i : i + 1],
            own[i : i + 1],
            score[i : i + 1],
            state.target,
            starter[i : i + 1],
        )[0]
        want = ENCODINGS[name].encode(state, COLORS[own[i]])
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_the_compiled_observations_are_the_numpy_ones(name: str) -> None:
    """The players' batched observations (the compiled kernel) equal the readable reference's,
    float for float: every encoding, scores past a small target, views past the legal moves."""
    tables = game_tables()
    rng = np.random.default_rng(7)
    n = 3_000
    boards = rng.choice(np.flatnonzero(tables.num_legal >= 1), n)
    own, starter = rng.integers(0, 2, n), rng.integers(0, 2, n)
    score = rng.integers(0, 25, (n, 2))
    for target in (3, 15, 24):
        got = numba_backend.observations(tables, name, boards, own, score, target, starter)
        want = numpy_backend.observations(tables, name, boards, own, score, target, starter)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


def test_the_compiled_observations_refuse_an_unknown_encoding() -> None:
    boards = np.zeros(1, dtype=np.int64)
    with pytest.raises(ValueError, match="encoding='rings' is not one of"):
        numba_backend.observations(game_tables(), "rings", boards, boards, np.zeros((1, 2)), 15)


def test_match_slots_is_slots_and_who_started() -> None:
    state = positions(1, seed=3)[0]
    for own in COLORS:
        obs = ENCODINGS["match-slots"].encode(state, own)
        np.testing.assert_array_equal(obs[:-1], ENCODINGS["slots"].encode(state, own))
        assert obs[-1] == (state.starter == own)


def test_a_view_that_ends_the_round_sees_the_score_after_it_and_the_next_starter() -> None:
    """Red leads 6-5 to 7 and started; a move that ends the round with Black 2 up makes it 6-7:
    Black has won the match, and Red (behind) would start the next round."""
    encoding = ENCODINGS["match-afterstates"]
    rng = np.random.default_rng(5)
    for _ in range(2000):
        state = State.new_round(LAYOUTS[int(rng.integers(len(LAYOUTS)))], "R")
        while state.stacks > 2:
            state = state.play(int(rng.choice(state.legal_moves())))
        state = State(state.board, state.to_move, {"R": 6, "B": 5}, 7, "R")
        for a, slot in enumerate(state.legal_moves()):
            final = state.play(slot)
            if final.round_points["B"] == 2:
                view = encoding.encode(state, "R").reshape(3, -1)[a]
                assert view[243] == 0.0 and view[244] == 1.0  # not another turn; the round's end
                assert np.flatnonzero(view[245:266]).tolist() == [1]  # Red needs 1 more point
                assert np.flatnonzero(view[266:287]).tolist() == [0]  # Black has won
                assert view[287] == 1.0  # Red, behind, would start the next round
                assert set(np.unique(view)) <= {0.0, 1.0}
                return
    pytest.fail("no round ended with Black two points up")


def test_the_engine_values_moves_as_the_match_solver() -> None:
    """The batched engine's match values (read through the tables' rings) equal
    ``match_move_values``, and its perfect moves are among the best."""
    from buttonup_env.engine.numpy_backend import match_moves, match_values
    from buttonup_env.game.equity import best_moves, match_move_values

    tables = game_tables()
    states = [s for s in positions(300, seed=7) if not s.round_over]
    states = [s for s in states if max(s.score_pair) < s.target <= 9]
    for target in sorted({s.target for s in states}):
        group = [s for s in states if s.target == target]
        boards = np.array([tables.index_of(s.board) for s in group])
        mover = np.array([COLORS.index(s.to_move) for s in group])
        score = np.array([s.score_pair for s in group])
        starter = np.array([COLORS.index(s.starter) for s in group])
        values = match_values(tables, boards, mover, score, starter, target)
        slots = match_moves(tables, boards, mover, score, starter, target, np.full(len(group), 0.7))
        for i, state in enumerate(group):
            exact = match_move_values(state)
            legal = list(state.legal_moves())
            np.testing.assert_allclose(
                values[i, : len(legal)], [exact[s] for s in legal], atol=1e-12
            )
            assert np.isnan(values[i, len(legal) :]).all()
            assert slots[i] in best_moves(exact)
