"""SB3VecEnv: the batched env as Stable-Baselines3 sees it, and MaskablePPO on it (same-seed
training runs are in test_training.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.buffers import MaskableRolloutBuffer
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.learn.nets import RingPolicy
from buttonup_env.learn.sb3 import BootstrapTruncated, SB3VecEnv, TensorRolloutBuffer

TRAIN = Path(__file__).resolve().parent.parent / "training" / "train.py"


def test_steps_like_an_sb3_vec_env() -> None:
    batch = ButtonUpVectorEnv(
        32, opponent="greedy", episode="round", reward="round", encoding="afterstates"
    )
    venv = SB3VecEnv(batch)
    venv.seed(3)
    obs = venv.reset()
    assert obs.shape == (32, 735)
    assert is_masking_supported(venv)
    rng = np.random.default_rng(0)
    finished = 0
    for _ in range(40):
        masks = get_action_masks(venv)
        np.testing.assert_array_equal(masks, batch.action_masks())
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        before = batch.encode("afterstates", slice(None), batch._agent)
        np.testing.assert_array_equal(before, obs)
        obs, rewards, dones, infos = venv.step(actions)
        assert rewards.dtype == np.float32 and dones.dtype == bool and len(infos) == 32
        for i in range(32):
            if dones[i]:
                finished += 1
                terminal = infos[i]["terminal_observation"]
                # a round is over: the afterstate views of a finished round are all zeros
                assert terminal.shape == (735,) and not terminal.any()
                assert infos[i]["TimeLimit.truncated"] is False
                assert sum(infos[i]["round_points"].values()) == abs(rewards[i]) * 18
            else:
                assert "terminal_observation" not in infos[i]
    assert finished > 50


def test_seed_makes_resets_reproducible() -> None:
    venv = SB3VecEnv(ButtonUpVectorEnv(8))
    venv.seed(11)
    first = venv.reset()
    venv.seed(11)
    np.testing.assert_array_equal(venv.reset(), first)
    venv.seed(12)
    assert not np.array_equal(venv.reset(), first)


def test_attributes_and_methods() -> None:
    venv = SB3VecEnv(ButtonUpVectorEnv(4, target=7))
    assert venv.get_attr("target") == [7] * 4
    assert venv.get_attr("target", indices=[1, 2]) == [7, 7]
    venv.set_attr("target", 9)
    assert venv.env.target == 9
    with pytest.raises(ValueError, match="one value for all of them"):
        venv.set_attr("target", 5, indices=[0])
    with pytest.raises(AttributeError, match="only 'action_masks'"):
        venv.env_method("render")
    assert venv.env_is_wrapped(object) == [False] * 4
    with pytest.raises(ValueError, match="adapts a ButtonUpVectorEnv"):
        SB3VecEnv("ButtonUp-v1")  # type: ignore[arg-type]


def test_maskable_ppo_trains_on_the_batched_env() -> None:
    """A short MaskablePPO training (the trainer the package's users use) runs on the adapter,
    updates the network and counts exactly the steps it took."""
    th.set_num_threads(1)
    venv = SB3VecEnv(
        ButtonUpVectorEnv(
            64, opponent="random", episode="round", reward="round", encoding="afterstates"
        )
    )
    model = MaskablePPO(
        RingPolicy,
        venv,
        n_steps=16,
        batch_size=256,
        n_epochs=2,
        seed=0,
        device="cpu",
        policy_kwargs=dict(hidden=(32, 32)),
    )
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(64 * 16 * 3)
    assert model.num_timesteps == 64 * 16 * 3
    after = list(model.policy.parameters())
    assert any(not th.equal(a, b) for a, b in zip(before, after, strict=True))
    # the rollout buffer holds legal actions only, judged by the masks it stored
    buffer = model.rollout_buffer
    actions = buffer.actions.reshape(-1).astype(int)
    masks = buffer.action_masks.reshape(-1, 3)
    assert masks[np.arange(len(actions)), actions].all()


def test_tensor_rollout_buffer_gives_the_parents_minibatches() -> None:
    """TensorRolloutBuffer hands PPO the same minibatches as sb3-contrib's buffer: the same
    samples in the same order with the same dtypes, rollout after rollout (a new rollout's
    data, not the last one's) and epoch after epoch."""
    env = ButtonUpVectorEnv(4, opponent="random", encoding="afterstates")
    obs_space, action_space = env.single_observation_space, env.single_action_space
    n_steps, n_envs = 8, 4
    buffers = [
        cls(
            n_steps, obs_space, action_space, device="cpu", gamma=0.9, gae_lambda=0.8, n_envs=n_envs
        )
        for cls in (MaskableRolloutBuffer, TensorRolloutBuffer)
    ]
    rng = np.random.default_rng(0)
    for _rollout in range(2):
        for buffer in buffers:
            buffer.reset()
        for _ in range(n_steps):
            step = dict(
                obs=rng.random((n_envs, *obs_space.shape), dtype=np.float32),
                action=rng.integers(0, 3, (n_envs, 1)),
                reward=rng.random(n_envs, dtype=np.float32),
                episode_start=rng.random(n_envs) < 0.2,
                value=th.as_tensor(rng.random(n_envs, dtype=np.float32)),
                log_prob=th.as_tensor(-rng.random(n_envs, dtype=np.float32)),
                action_masks=rng.random((n_envs, 3)) < 0.7,
            )
            for buffer in buffers:
                buffer.add(**step)
        last = th.as_tensor(rng.random(n_envs, dtype=np.float32))
        dones = rng.random(n_envs) < 0.3
        for buffer in buffers:
            buffer.compute_returns_and_advantage(last, dones)
        for epoch in range(2):
            batches = []
            for buffer in buffers:
                np.random.seed(epoch)  # get() draws its permutation from numpy's global state
                batches.append(list(buffer.get(batch_size=12)))
            expected, got = batches
            assert len(got) == len(expected) == 3  # 32 samples: 12 + 12 + 8
            for want, have in zip(expected, got, strict=True):
                for a, b in zip(want, have, strict=True):
                    assert a.dtype == b.dtype and a.shape == b.shape
                    assert th.equal(a, b)


def rollout_rewards(batched_bootstrap: bool) -> np.ndarray:
    """The rewards of one rollout of an untrained MaskablePPO on match episodes whose rounds
    are truncated, bootstrapped by BootstrapTruncated or by SB3's own loop."""
    th.manual_seed(0)
    venv = SB3VecEnv(
        ButtonUpVectorEnv(
            32,
            opponent="random",
            episode="match",
            reward="round",
            encoding="match-afterstates",
            truncate_rounds=True,
        )
    )
    model = MaskablePPO(
        RingPolicy, venv, n_steps=24, seed=0, device="cpu", policy_kwargs=dict(hidden=(16,))
    )
    callback = BootstrapTruncated() if batched_bootstrap else None
    model.learn(32 * 24, callback=callback)
    return model.rollout_buffer.rewards.copy()


def test_bootstrap_truncated_adds_what_sb3_adds_in_one_batch(monkeypatch) -> None:
    """BootstrapTruncated's rewards are SB3's own bootstrap (one critic call an env), to float
    precision, and SB3 does not add them a second time: the same rollout, bootstrapped both
    ways, with values added, in batches where SB3 asks for one env at a time."""
    th.set_num_threads(1)
    sb3 = rollout_rewards(False)
    batched = rollout_rewards(True)
    np.testing.assert_allclose(batched, sb3, rtol=1e-5, atol=1e-6)
    assert np.count_nonzero(sb3 % 1) > 10  # values were added: rewards off the grid of n/18
    calls = []
    original = RingPolicy.predict_values

    def counted(self, obs):  # type: ignore[no-untyped-def]
        calls.append(len(obs))
        return original(self, obs)

    monkeypatch.setattr(RingPolicy, "predict_values", counted)
    rollout_rewards(True)
    batched_calls = calls.copy()
    calls.clear()
    rollout_rewards(False)
    assert sum(batched_calls) == sum(calls)  # the same values (and the rollout's last ones)
    assert len(batched_calls) * 3 < len(calls)  # in a few calls, not one an env
