"""TorchRL on the envs, by TorchRL's own checks: ``PettingZooWrapper(env(), use_mask=True)`` and
``GymWrapper(ActionMaskObservation(...))`` with the ``ActionMask`` transform pass
``check_env_specs`` and play whole matches with masked random actions and a masked policy."""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import buttonup_env  # noqa: F401  (registers ButtonUp-v1)
from buttonup_env.envs.wrappers import ActionMaskObservation, RingObservation

# torchrl and tensordict are imported by the tests that use them, not when the module is
# collected: their import takes seconds, and every xdist worker collects every module
if TYPE_CHECKING:
    from torchrl.envs import PettingZooWrapper, TransformedEnv

AGENTS = ("red", "black")

pytestmark = [
    pytest.mark.skipif(
        find_spec("torchrl") is None, reason="needs the torchrl extra: pip install -e '.[torchrl]'"
    ),
    pytest.mark.skipif(find_spec("pettingzoo") is None, reason="needs the pettingzoo extra"),
    # TorchRL's note on the version it was tested with
    pytest.mark.filterwarnings("ignore:PettingZoo in TorchRL is tested using version:UserWarning"),
]


def pettingzoo(seed: int, **kwargs: object) -> PettingZooWrapper:
    from torchrl.envs import PettingZooWrapper

    from buttonup_env.pettingzoo import env as pettingzoo_env

    torch.manual_seed(seed)
    return PettingZooWrapper(pettingzoo_env(**kwargs), use_mask=True, seed=seed)


def gym_masked(inner: gym.Env, seed: int) -> TransformedEnv:
    from torchrl.envs import GymWrapper, TransformedEnv
    from torchrl.envs.transforms import ActionMask

    torch.manual_seed(seed)
    env = TransformedEnv(GymWrapper(ActionMaskObservation(inner)), ActionMask())
    env.set_seed(seed)
    return env


# --- PettingZoo ---------------------------------------------------------------------------------


def test_pettingzoo_wrapper_passes_check_env_specs() -> None:
    from torchrl.envs import check_env_specs

    env = pettingzoo(0)
    check_env_specs(env)
    assert set(env.group_map) == set(AGENTS)
    for agent in AGENTS:
        assert env.full_action_spec[agent, "action"].space.n == 9
        assert env.observation_spec[agent, "action_mask"].shape == (1, 9)
        assert set(env.observation_spec[agent, "info"].keys()) == {"round_over", "round_points"}


def test_pettingzoo_wrapper_rolls_out_whole_matches_with_masked_random_actions() -> None:
    rollout = pettingzoo(1, target=3).rollout(300, break_when_any_done=False)
    acting = torch.stack([rollout[agent, "mask"][:, 0] for agent in AGENTS], dim=1)
    assert (acting.sum(dim=1) == 1).all(), "one agent moves at every step"
    for index, agent in enumerate(AGENTS):
        moves = acting[:, index]
        actions = rollout[agent, "action"][moves, 0]
        masks = rollout[agent, "action_mask"][moves, 0]
        assert masks.gather(1, actions[:, None]).all(), f"{agent} played an illegal slot"
    done = rollout["next", "done"][:, 0]
    ends = torch.nonzero(done).flatten().tolist()
    assert len(ends) >= 3
    starts = [0, *(end + 1 for end in ends[:-1])]
    for start, end in zip(starts, ends, strict=True):
        assert (end - start + 1) % 8 == 0, "a match ends with a round, never an illegal move"
        rewards = [float(rollout["next", agent, "reward"][end, 0, 0]) for agent in AGENTS]
        assert sorted(rewards) == [-1.0, 1.0]
    round_over = rollout["next", "red", "info", "round_over"][:, 0].bool()
    assert round_over.sum() >= len(ends) and round_over[done].all()


# --- Gymnasium ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ring", [False, True], ids=["ButtonUp-v1", "RingObservation"])
def test_gym_wrapper_with_the_action_mask_passes_check_env_specs(ring: bool) -> None:
    from torchrl.envs import check_env_specs

    inner = gym.make("ButtonUp-v1")
    env = gym_masked(RingObservation(inner, "afterstates") if ring else inner, seed=0)
    check_env_specs(env)
    assert env.observation_spec["action_mask"].dtype == torch.bool
    assert env.observation_spec["action_mask"].shape == env.full_action_spec["action"].shape


def check_whole_matches(rollout: object) -> int:
    """Every action is legal, every episode ends a match with +1 or -1; returns the matches."""
    actions = rollout["action"].argmax(-1)
    assert rollout["action_mask"].gather(-1, actions[:, None]).all()
    done = rollout["next", "done"][:, 0]
    rewards = rollout["next", "reward"][done, 0]
    assert done.any() and set(rewards.tolist()) <= {-1.0, 1.0}
    return int(done.sum())


def test_action_mask_masks_random_actions() -> None:
    env = gym_masked(gym.make("ButtonUp-v1", target=5), seed=2)
    assert check_whole_matches(env.rollout(400, break_when_any_done=False)) >= 5


def test_action_mask_masks_a_learned_policy() -> None:
    """A policy that prefers slot 0 above all plays it when it is legal and never when not."""
    from tensordict.nn import TensorDictModule
    from torchrl.envs.utils import ExplorationType, set_exploration_type
    from torchrl.modules import MaskedOneHotCategorical, ProbabilisticActor

    torch.manual_seed(3)
    env = gym_masked(gym.make("ButtonUp-v1", target=5), seed=3)
    network = nn.Linear(247, 9)
    with torch.no_grad():
        network.bias[0] = 100.0
    actor = ProbabilisticActor(
        TensorDictModule(network, in_keys=["observation"], out_keys=["logits"]),
        in_keys={"logits": "logits", "mask": "action_mask"},
        spec=env.full_action_spec["action"],
        distribution_class=MaskedOneHotCategorical,
    )
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        rollout = env.rollout(400, actor, break_when_any_done=False)
    assert check_whole_matches(rollout) >= 5
    legal_zero = rollout["action_mask"][:, 0]
    chose_zero = rollout["action"].argmax(-1) == 0
    assert legal_zero.any() and (~legal_zero).any()
    assert torch.equal(chose_zero, legal_zero)


def test_wrapped_and_bare_envs_play_the_same_match() -> None:
    """TorchRL's rollout of the wrapped env is the Gymnasium env's match, step for step."""
    env = gym_masked(gym.make("ButtonUp-v1", target=3, opponent="greedy"), seed=5)
    rollout = env.rollout(300, break_when_any_done=True)
    bare = gym.make("ButtonUp-v1", target=3, opponent="greedy")
    bare.reset(seed=5)  # what env.set_seed(5) did; the rollout resets without a seed
    obs, info = bare.reset()
    for step in range(rollout.shape[0]):
        np.testing.assert_array_equal(rollout["observation"][step].numpy(), obs)
        np.testing.assert_array_equal(rollout["action_mask"][step].numpy(), info["action_mask"])
        obs, reward, terminated, _, info = bare.step(int(rollout["action"][step].argmax()))
        assert float(rollout["next", "reward"][step, 0]) == reward
    assert terminated
