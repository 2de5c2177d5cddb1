"""What others may hand ``python_button_up`` (issue 50): a state to rebuild, which
:func:`buttonup_env.openspiel.state_from_history` rebuilds from the game's parameters and an
action history, never from OpenSpiel's state strings (they hold a pickle); and parameters,
actions and players that are refused in one sentence."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyspiel", reason="needs the openspiel extra: pip install -e '.[openspiel]'")

import pyspiel

import buttonup_env.openspiel as bo

CHANCE = pyspiel.PlayerId.CHANCE


def one_sentence(error: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(error.value)
    assert "\n" not in message and message, message
    return message


def played(game: pyspiel.Game, seed: int) -> pyspiel.State:
    """A state some way into an episode: chance outcomes and moves drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    state = game.new_initial_state()
    for _ in range(int(rng.integers(1, 40))):
        if state.is_terminal():
            break
        if state.is_chance_node():
            outcomes = [a for a, _ in state.chance_outcomes()]
            state.apply_action(int(rng.choice(outcomes)))
        else:
            state.apply_action(int(rng.choice(state.legal_actions())))
    return state


# --- parameters ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rounds", [238_609_295, 2**31 - 1, bo.MAX_ROUNDS + 1])
def test_a_max_rounds_beyond_the_bound_is_refused_naming_it(rounds: int) -> None:
    """Before: 238,609,295 loaded with a negative max_history_length() and 2^31 - 1 failed in
    pybind with a TypeError."""
    with pytest.raises(ValueError) as error:
        pyspiel.load_game(bo.GAME_NAME, {"max_rounds": rounds})
    assert one_sentence(error) == (
        f"max_rounds={rounds} is not allowed; use a whole number of rounds from 1 to "
        f"{bo.MAX_ROUNDS:,}, or 0 for 2 * target + 19"
    )


def test_the_largest_max_rounds_has_lengths_that_openspiel_can_hold() -> None:
    game = pyspiel.load_game(bo.GAME_NAME, {"max_rounds": bo.MAX_ROUNDS})
    assert 0 < game.max_game_length() < game.max_history_length() < 2**31


# --- actions ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "player", "action", "says"),
    [
        ("starter", CHANCE, 5, "chance outcome 5 does not exist; a starter is 0 to 1"),
        ("starter", CHANCE, -1, "chance outcome -1 does not exist; a starter is 0 to 1"),
        ("layout", CHANCE, 1680, "chance outcome 1680 does not exist; a layout is 0 to 1679"),
        ("move", 0, 5000, "action 5000 is not a slot; a player's action is a slot from 0 to 8"),
        ("move", 1, -3, "action -3 is not a slot; a player's action is a slot from 0 to 8"),
        ("move", 7, 2, "player 7 does not exist; the players are 0 (Red) and 1 (Black)"),
    ],
)
def test_an_action_that_does_not_exist_has_no_name(
    where: str, player: int, action: int, says: str
) -> None:
    """Before: IndexError for (-1, 5) at the starter's chance node, and "slot 5000"."""
    state = pyspiel.load_game(bo.GAME_NAME).new_initial_state()
    if where != "starter":
        state.apply_action(0)
    if where == "move":
        state.apply_action(0)
    with pytest.raises(ValueError) as error:
        state.action_to_string(player, action)
    assert one_sentence(error).startswith(says), str(error.value)


def test_the_names_of_actions_that_exist_are_unchanged() -> None:
    state = pyspiel.load_game(bo.GAME_NAME).new_initial_state()
    assert state.action_to_string(CHANCE, 1) == "Black starts"
    state.apply_action(0)
    assert state.action_to_string(CHANCE, 0).startswith("layout ")
    state.apply_action(0)
    assert state.action_to_string(0, 4) == "slot 4"


# --- players ------------------------------------------------------------------------------------


class Illegal:
    """A player that lifts slot 99, which no position allows."""

    def act(self, state: Any) -> int:
        return 99

    def __repr__(self) -> str:
        return "Illegal()"


def test_a_policy_of_a_player_that_chooses_an_illegal_slot_says_so() -> None:
    """Before: all-zero probabilities, which OpenSpiel's algorithms take as they are."""
    game = pyspiel.load_game(bo.GAME_NAME, {"layout": "B W W B B R W R R", "first": "R"})
    state = game.new_initial_state()
    with pytest.raises(ValueError) as error:
        bo.policy(Illegal(), game).action_probabilities(state)
    assert one_sentence(error) == (
        "Illegal() chose slot 99, which is not legal on 'B W W B B R W R R' (legal: 1, 2, 6)"
    )
    with pytest.raises(ValueError, match="Illegal\\(\\) chose slot 99, which is not legal"):
        bo.bot(Illegal(), game).step(state)


# --- states from others: the parameters and the history, never a pickle -------------------------


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(
    "params", [{}, {"episode": "round"}, {"target": 2, "first": "B"}], ids=repr
)
def test_a_state_is_rebuilt_from_its_game_s_parameters_and_history(
    params: dict[str, Any], seed: int
) -> None:
    game = pyspiel.load_game(bo.GAME_NAME, params)
    state = played(game, seed)
    shared = json.dumps({"params": game.get_parameters(), "history": state.history()})
    received = json.loads(shared)
    rebuilt = bo.state_from_history(received["params"], received["history"])
    assert isinstance(rebuilt, bo.ButtonUpState)
    assert str(rebuilt) == str(state) and rebuilt.history() == state.history()
    assert rebuilt.returns() == state.returns()
    assert bo.state_from_history(game, state.history()).history() == state.history()


@pytest.mark.parametrize(
    ("params", "history", "says"),
    [
        ({}, [0, 0, 99], "action 3 of the history, 99, is not allowed there: slot 99 is not legal"),
        ({}, [2], "action 1 of the history, 2, is not allowed there: chance outcome 2 does not"),
        ({}, [0, "3"], "action 2 of the history, '3', is not allowed there"),
        ({}, [0, True], "action 2 of the history, True, is not allowed there"),
        ({}, [0, 2**70], "action 2 of the history, 1180591620717411303424, is not allowed"),
        ({}, "0 0 1", "the history must be a list of action ids, not str"),
        ({"max_rounds": -2}, [], "max_rounds=-2 is not allowed"),
        ({"episode": "game"}, [], "episode='game' is not allowed"),
    ],
)  # fmt: skip
def test_a_history_that_cannot_be_played_is_refused_in_one_sentence(
    params: dict[str, Any], history: Any, says: str
) -> None:
    with pytest.raises(ValueError) as error:
        bo.state_from_history(params, history)
    assert says in one_sentence(error), str(error.value)


def test_a_history_longer_than_any_episode_is_refused_before_it_is_read() -> None:
    game = pyspiel.load_game(bo.GAME_NAME, {"episode": "round"})
    with pytest.raises(ValueError) as error:
        bo.state_from_history(game, [0] * 100)
    assert one_sentence(error) == (
        "the history has 100 actions; an episode of this game has at most 10"
    )


def test_an_action_after_the_end_is_refused() -> None:
    game = pyspiel.load_game(bo.GAME_NAME, {"target": 1})  # the first round that scores ends it
    state = game.new_initial_state()
    while not state.is_terminal():
        state.apply_action(0 if state.is_chance_node() else state.legal_actions()[-1])
    history = [*state.history(), 0]
    assert len(history) <= game.max_history_length()
    with pytest.raises(ValueError) as error:
        bo.state_from_history(game, history)
    assert one_sentence(error) == (
        f"action {len(history)} of the history, 0, is not allowed there: the episode is over"
    )
