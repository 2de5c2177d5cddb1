"""``buttonup_env.envs.interface``: the rules the three envs share, as tables, and the names that
moved there."""

from __future__ import annotations

import numpy as np
import pytest

from buttonup_env.envs import interface
from buttonup_env.envs.interface import action_slot, check_choice, match_reward, round_reward

ROUND_REWARDS = [
    # (margin, reward="round", episode="round", what the round's end pays)
    (18, True, False, 1.0),
    (-9, True, False, -0.5),
    (0, True, True, 0.0),
    (6, True, True, 6 / 18),
    (5, False, True, 1.0),
    (-1, False, True, -1.0),
    (0, False, True, 0.0),
    (7, False, False, 0.0),
    (-18, False, False, 0.0),
]


@pytest.mark.parametrize(("margin", "per_round", "round_episodes", "paid"), ROUND_REWARDS)
def test_round_reward(margin: int, per_round: bool, round_episodes: bool, paid: float) -> None:
    assert round_reward(margin, per_round, round_episodes) == paid
    margins = np.array([margin, -margin])  # the batched env pays arrays, the same numbers
    paid_both = np.asarray(round_reward(margins, per_round, round_episodes)) + np.zeros(2)
    assert paid_both.tolist() == [paid, -paid if paid else 0.0]


def test_match_reward() -> None:
    assert (match_reward(True), match_reward(False)) == (1.0, -1.0)
    assert match_reward(np.array([True, False, True])).tolist() == [1.0, -1.0, 1.0]


def test_check_choice_names_the_value_and_the_choices() -> None:
    check_choice("reward", "round", interface.REWARDS)
    for value in ("rounds", None, np.array("round"), 3):
        with pytest.raises(ValueError, match=r"reward=.* is not allowed; use one of 'match', "):
            check_choice("reward", value, interface.REWARDS)


@pytest.mark.parametrize("action", [12, -1, 3.7, "3", True, None, np.array([3])])
def test_action_slot_refuses_what_is_not_in_the_space(action: object) -> None:
    with pytest.raises(ValueError, match="is not in the action space Discrete"):
        action_slot(action)


def test_action_slot_takes_numpy_whole_numbers() -> None:
    assert action_slot(np.int8(4)) == action_slot(np.array(4)) == 4
    assert action_slot(2, actions=3) == 2
