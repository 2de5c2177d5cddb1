"""``buttonup_v0``, the PettingZoo AEC environment: PettingZoo's checks, whole matches, rewards."""

from __future__ import annotations

import itertools
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from pettingzoo.test import api_test, collect_render_results, render_test, seed_test

from buttonup_env.envs.pettingzoo import AGENT_COLORS, ButtonUpAEC, env
from buttonup_env.envs.render import WINDOW_CAPTION
from buttonup_env.game.encoding import ENCODINGS, legal_mask
from buttonup_env.game.rules import State, sow

# What PettingZoo's api_test says about every environment outside its own list of classic games.
API_TEST_NOTES = (
    r"unknown reset option\(s\) \['options'\]",
    "Observation space for each agent probably should be",
    "We recommend agents to be named",
    "Observation is not a NumPy array",
    "Action mask numpy array is all zeros",
)


@pytest.fixture
def fast_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """Human-mode frames without the 0.5 s pace of render_fps=2 (set before the env is made)."""
    monkeypatch.setitem(ButtonUpAEC.metadata, "render_fps", 1000)


def play_match(
    seed: int, action_seed: int, options: dict[str, Any] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Play one match with legal moves drawn from a seeded generator; return what was seen."""
    game = env(**kwargs)
    game.reset(seed=seed, options=options)
    rng = np.random.default_rng(action_seed)
    moves: list[tuple[str, int, State]] = []
    returns = dict.fromkeys(game.possible_agents, 0.0)
    for agent in game.agent_iter():
        observation, reward, termination, truncation, _ = game.last()
        returns[agent] += reward
        assert not truncation
        if termination:
            game.step(None)
            continue
        state: State = game.unwrapped.position
        mask = observation["action_mask"]
        assert mask.dtype == np.int8
        np.testing.assert_array_equal(mask, legal_mask(state, np.int8))
        opponent = next(a for a in game.agents if a != agent)
        assert not game.observe(opponent)["action_mask"].any(), "only the mover has moves"
        assert state.to_move == AGENT_COLORS[agent]
        action = int(rng.choice(np.flatnonzero(mask)))
        assert action in state.legal_moves()
        moves.append((agent, action, state))
        game.step(action)
    assert game.agents == []
    return {"moves": moves, "returns": returns, "final": game.unwrapped.position}


# --- PettingZoo's own checks -------------------------------------------------------------------


def test_api_test() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for message in API_TEST_NOTES:
            warnings.filterwarnings("ignore", message=message)
        api_test(env(), num_cycles=1000)
        api_test(env(reward="round", target=5), num_cycles=1000)


def test_seed_test() -> None:
    seed_test(env, num_cycles=500)


@pytest.mark.parametrize("pygame", ["installed", "missing"])
def test_render_test(
    pygame: str,
    fast_frames: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every declared mode, "human" included: a window, or the text board without pygame."""
    if pygame == "installed":
        pytest.importorskip("pygame")
    else:
        monkeypatch.setitem(sys.modules, "pygame", None)
    assert env().metadata["render_modes"] == ["human", "ansi", "rgb_array"]
    render_test(env)
    printed = capsys.readouterr().out
    assert ("Button Up!  Red 0 - 0 Black" in printed) == (pygame == "missing")


# --- whole matches -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_random_match_is_legal_and_rewards_the_winner(seed: int) -> None:
    record = play_match(seed, action_seed=100 + seed)
    final: State = record["final"]
    assert final.match_over
    assert max(final.score.values()) >= final.target == 15
    winner = {"R": "red", "B": "black"}[final.winner]  # type: ignore[index]
    loser = "black" if winner == "red" else "red"
    assert record["returns"] == {winner: 1.0, loser: -1.0}
    assert len(record["moves"]) % 8 == 0, "every round has exactly eight moves"


def test_same_seed_same_match() -> None:
    first = play_match(7, action_seed=3)
    again = play_match(7, action_seed=3)
    assert first["moves"] == again["moves"]
    assert first["returns"] == again["returns"]
    other = play_match(8, action_seed=3)
    assert other["moves"] != first["moves"]


@pytest.mark.parametrize("first", ["R", "B"])
def test_first_option_names_the_starter(first: str) -> None:
    record = play_match(0, action_seed=0, options={"first": first})
    agent, _, state = record["moves"][0]
    assert state.to_move == first == state.starter
    assert AGENT_COLORS[agent] == first


def test_starter_is_drawn_from_the_seed() -> None:
    starters = set()
    for seed in range(20):
        game = env()
        game.reset(seed=seed)
        starters.add(game.agent_selection)
        again = env()
        again.reset(seed=seed)
        assert again.agent_selection == game.agent_selection
        assert again.unwrapped.position == game.unwrapped.position
    assert starters == {"red", "black"}


def test_turns_follow_the_rules_and_extra_turns_repeat_the_agent() -> None:
    record = play_match(1, action_seed=2)
    moves = record["moves"]
    repeats = 0
    for (agent, slot, state), (next_agent, _, next_state) in itertools.pairwise(moves):
        board, extra_turn = sow(state.board, slot)
        if board.count("") == 8:  # the round ended: the next round's starter moves
            assert AGENT_COLORS[next_agent] == next_state.starter
        elif extra_turn:
            assert next_agent == agent
            repeats += 1
        else:
            assert next_agent != agent
    assert repeats > 0


def test_extra_turn_on_the_first_move() -> None:
    """Find a seed whose first layout lets the starter earn another turn, and take it."""
    for seed in range(50):
        game = env()
        game.reset(seed=seed, options={"first": "R"})
        state: State = game.unwrapped.position
        extra = [s for s in state.legal_moves() if sow(state.board, s)[1]]
        if extra:
            break
    else:
        pytest.fail("no seed in range(50) gives Red an extra turn on the first move")
    assert game.agent_selection == "red"
    game.step(extra[0])
    assert game.agent_selection == "red"
    assert game.last()[0]["action_mask"].any()
    assert game.unwrapped.position == state.play(extra[0])


def test_round_rewards_add_the_margins() -> None:
    record = play_match(3, action_seed=4, reward="round", target=20)
    final: State = record["final"]
    margin = (final.score["R"] - final.score["B"]) / 18  # each round: red's points - black's
    win = 1.0 if final.winner == "R" else -1.0
    assert record["returns"]["red"] == pytest.approx(margin + win)
    assert record["returns"]["black"] == pytest.approx(-margin - win)


@pytest.mark.parametrize("encoding", ["match-slots", "slots"])
def test_observation_is_the_slot_encoding_from_each_side(encoding: str) -> None:
    """v1's observation (with who started the round) by default, v0's on request."""
    game = env(encoding=encoding) if encoding == "slots" else env()
    game.reset(seed=5)
    state: State = game.unwrapped.position
    for agent, color in AGENT_COLORS.items():
        observation = game.observe(agent)
        assert game.observation_space(agent).contains(observation)
        np.testing.assert_array_equal(
            observation["observation"], ENCODINGS[encoding].encode(state, color)
        )


@pytest.mark.parametrize("seed", [0, 1])  # 0: the round ends level, 1: someone scores
def test_round_points_in_infos_after_a_round(seed: int) -> None:
    game = env(target=1000)
    game.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(8):
        for info in game.infos.values():
            assert info["round_over"] is False
            np.testing.assert_array_equal(info["round_points"], [0, 0])
        mask = game.last()[0]["action_mask"]
        game.step(int(rng.choice(np.flatnonzero(mask))))
    position: State = game.unwrapped.position
    assert position.moves_played == 0, "the next round is already set up"
    for info in game.infos.values():
        assert info["round_over"] is True
        points = info["round_points"]
        assert points.dtype == np.int64 and points.shape == (2,)
        assert (points[0], points[1]) == position.score_pair
        assert points.any() == (seed == 1)


def test_infos_hold_numbers_with_the_same_keys_after_every_move() -> None:
    """What TorchRL's PettingZooWrapper needs: it makes a tensor of every info value."""
    game = env(target=5)
    game.reset(seed=1)
    rng = np.random.default_rng(1)
    for _ in game.agent_iter():
        observation, _, termination, _, info = game.last()
        assert set(info) == {"round_over", "round_points"}
        assert all(np.asarray(value).dtype.kind in "bi" for value in info.values())
        action = (
            None if termination else int(rng.choice(np.flatnonzero(observation["action_mask"])))
        )
        game.step(action)


# --- illegal actions ---------------------------------------------------------------------------


def test_illegal_action_loses_through_the_wrapper() -> None:
    game = env()
    game.reset(seed=0)
    offender = game.agent_selection
    illegal = int(np.flatnonzero(game.last()[0]["action_mask"] == 0)[0])
    game.step(illegal)
    assert all(game.terminations.values())
    returns = {}
    for agent in game.agent_iter():
        _, reward, termination, truncation, _ = game.last()
        assert termination and truncation
        returns[agent] = reward
        game.step(None)
    other = "black" if offender == "red" else "red"
    assert returns == {offender: -1.0, other: 0.0}


def test_out_of_range_action_fails_the_bounds_wrapper() -> None:
    game = env()
    game.reset(seed=0)
    with pytest.raises(AssertionError, match="action space"):
        game.step(9)


def test_illegal_action_without_wrappers_raises() -> None:
    game = ButtonUpAEC()
    game.reset(seed=0)
    state = game.position
    assert state is not None
    illegal = next(s for s in range(9) if s not in state.legal_moves())
    with pytest.raises(ValueError, match=rf"illegal action by '\w+': slot {illegal} "):
        game.step(illegal)
    for outside in (12, -1, 3.7, "3", None):
        with pytest.raises(ValueError, match="is not in the action space Discrete"):
            game.step(outside)
    assert game.position == state


def test_a_step_broken_off_leaves_the_game_needing_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the middle of a move (here: while the next round's layout is drawn, after
    the round's rewards were given) leaves the game half-played: no agent steps again until
    reset() starts a new match."""
    from buttonup_env.envs import pettingzoo

    game = ButtonUpAEC()
    game.reset(seed=0)

    def interrupted(rng: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(pettingzoo, "random_layout", interrupted)
    with pytest.raises(KeyboardInterrupt):
        for _ in range(8):  # a round is eight moves: the last one draws the next layout
            game.step(int(game.last()[0]["action_mask"].argmax()))
    monkeypatch.undo()
    for action in (None, *range(9)):
        with pytest.raises(RuntimeError, match=r"^the last step\(\) stopped part-way with an "
                           r"exception, which left the game half-played; call reset\(\) "
                           r"before step\(\)$"):  # fmt: skip
            game.step(action)
    game.reset(seed=1)
    game.step(int(game.last()[0]["action_mask"].argmax()))


def test_a_zero_dimensional_integer_array_is_its_slot() -> None:
    game, plain = ButtonUpAEC(), ButtonUpAEC()
    game.reset(seed=0)
    plain.reset(seed=0)
    assert game.position is not None
    slot = game.position.legal_moves()[0]
    game.step(np.array(slot))
    plain.step(slot)
    assert game.position == plain.position
    assert game.agent_selection == plain.agent_selection


# --- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": 0}, "target=0 is not allowed"),
        ({"target": True}, "target=True is not allowed"),
        ({"target": 2.5}, "target=2.5 is not allowed"),
        ({"reward": "win"}, "reward='win' is not allowed; use one of 'match', 'round'"),
        ({"render_mode": "window"}, "render_mode='window' is not allowed"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ButtonUpAEC(**kwargs)


def test_bad_reset_options() -> None:
    game = env()
    with pytest.raises(ValueError, match=r"options\['first'\]='red' is not allowed"):
        game.reset(options={"first": "red"})
    with pytest.warns(UserWarning, match=r"unknown reset option\(s\) \['frist'\] ignored"):
        game.reset(options={"frist": "R"})
    with pytest.raises(ValueError, match="options='R' is not allowed; reset options are a dict"):
        game.reset(options="R")


def test_observe_before_reset_raises() -> None:
    with pytest.raises(RuntimeError, match="reset"):
        ButtonUpAEC().observe("red")


# --- rendering ---------------------------------------------------------------------------------


def test_render_ansi() -> None:
    results = collect_render_results(env(render_mode="ansi"))  # unseeded: random games
    assert len(results) == 5
    for text in results:
        assert isinstance(text, str) and text.startswith("Button Up!")
        # a player to move, unless the match is over (one round of 15+ points can end it)
        assert ("to move" in text) != ("Match over:" in text), text
    assert "to move (move 1 of 8)" in results[0]


def test_render_rgb_array() -> None:
    results = collect_render_results(env(render_mode="rgb_array"))
    for picture in results:
        assert isinstance(picture, np.ndarray)
        assert picture.shape == (400, 400, 3) and picture.dtype == np.uint8


def test_render_without_mode_is_none() -> None:
    game = env()
    game.reset(seed=0)
    assert game.render() is None


def window_pixels() -> np.ndarray:
    """What the window shows, as an (height, width, 3) uint8 picture."""
    import pygame

    return pygame.surfarray.array3d(pygame.display.get_surface()).transpose(1, 0, 2)


def twin_match(human: Any, twin: Any, seed: int) -> Iterator[bool]:
    """Play the same match in both games (legal moves from a seeded generator), yield after the
    reset and after every step, when both show the same position: True after a move, False
    after the reset and after a terminated agent's step."""
    human.reset(seed=seed)
    twin.reset(seed=seed)
    yield False
    rng = np.random.default_rng(seed)
    for _ in human.agent_iter():
        observation, _, termination, truncation, _ = human.last()
        if termination or truncation:
            action = None
        else:
            action = int(rng.choice(np.flatnonzero(observation["action_mask"])))
        human.step(action)
        twin.step(action)
        assert human.unwrapped.position == twin.unwrapped.position
        yield action is not None


def test_render_human_window_shows_the_rgb_array_picture(fast_frames: None) -> None:
    pygame = pytest.importorskip("pygame")
    game = env(render_mode="human", target=5)
    twin = env(render_mode="rgb_array", target=5)
    moves = 0
    for moved in twin_match(game, twin, seed=2):
        assert pygame.display.get_caption()[0] == WINDOW_CAPTION
        picture = twin.render()
        assert window_pixels().shape == picture.shape == (400, 400, 3)
        np.testing.assert_array_equal(window_pixels(), picture)
        moves += moved
    assert moves > 8, "a match to 5 points has more than one round"
    pygame.display.get_surface().fill((0, 0, 0))
    assert game.render() is None
    np.testing.assert_array_equal(window_pixels(), twin.render())
    game.close()
    assert not pygame.display.get_init(), "close() closes the window"
    game.close()  # twice is fine
    assert game.render() is None  # after close(), a frame opens the window again
    np.testing.assert_array_equal(window_pixels(), twin.render())
    game.close()


def test_render_human_without_pygame_prints_the_board(
    fast_frames: None, no_pygame: None, capsys: pytest.CaptureFixture[str]
) -> None:
    def printed() -> str:
        captured = capsys.readouterr()
        assert captured.err == "", "stdout only, no warnings"
        return captured.out

    game = env(render_mode="human", target=5)
    twin = env(render_mode="ansi", target=5)
    match = twin_match(game, twin, seed=2)
    next(match)
    note, board = printed().split("\n", 1)
    assert note == (
        "Button Up! is shown as text: pygame is not installed (pip install pygame shows a window)."
    )
    assert board == twin.render() + "\n"
    moves = 0
    for moved in match:  # each move prints the board once; a terminated agent's step does not
        assert printed() == (twin.render() + "\n" if moved else "")
        moves += moved
    assert moves > 8
    assert game.render() is None
    assert printed() == twin.render() + "\n"
    assert "Match over:" in twin.render()
    game.close()
    assert game.render() is None
    assert printed() == twin.render() + "\n"
