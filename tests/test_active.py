"""Views as lists of their active features (buttonup_env.learn.active): the lists, the first layer
that reads them against nn.Linear on the dense views, RingPolicy reading them, and
TensorRolloutBuffer handing them to the updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from random_play import random_play
from sb3_contrib.common.maskable.buffers import MaskableRolloutBuffer
from torch import nn

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.game.encoding import MAX_LEGAL, AfterstateEncoding, RingEncoding
from buttonup_env.learn.active import END, MAX_ACTIVE, active_features, active_linear
from buttonup_env.learn.nets import RingPolicy
from buttonup_env.learn.sb3 import TensorRolloutBuffer


def observations(encoding: str, rounds_of: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Observations and masks of every position of ``rounds_of`` rounds of random play (one
    to three legal moves, and the all-zero views of illegal moves)."""
    return random_play(rounds_of, steps=8, seed=4, encoding=encoding)


@pytest.mark.parametrize("encoding", [AfterstateEncoding, RingEncoding])
def test_the_lists_hold_each_views_ones_in_order(encoding: type) -> None:
    obs, mask = observations(encoding.name)
    lists = active_features(obs, encoding.view_size)
    assert lists.dtype == np.int16 and lists.shape == (len(obs), MAX_LEGAL, MAX_ACTIVE)
    views = obs.reshape(len(obs), MAX_LEGAL, encoding.view_size) != 0
    counts = views.sum(axis=2)
    # each view's ones in order: a stable sort puts the ones' places first, then the zeros'
    ones_first = np.argsort(~views, axis=2, kind="stable")[..., :MAX_ACTIVE]
    expected = np.where(np.arange(MAX_ACTIVE) < counts[..., None], ones_first, END)
    np.testing.assert_array_equal(lists, expected)
    np.testing.assert_array_equal(counts > 0, mask)  # a legal move's view is never empty
    longest = int(counts.max())
    assert longest >= 9  # nine buttons on the board at the start of a round


def test_values_other_than_zero_and_one_are_named() -> None:
    obs = np.zeros((3, 2 * 245), np.float32)
    obs[2, 250] = 0.5
    with pytest.raises(ValueError, match=r"row 2 has values \[0.0, 0.5\]"):
        active_features(obs, 245)
    obs[2, 250] = 0
    obs[1, : MAX_ACTIVE + 1] = 1
    with pytest.raises(
        ValueError, match=rf"at most {MAX_ACTIVE} ones; row 1 .* {MAX_ACTIVE + 1} non-zero"
    ):
        active_features(obs, 245)
    with pytest.raises(ValueError, match=r"views of 245 features, got shape \(3, 7\)"):
        active_features(np.zeros((3, 7), np.float32), 245)


def test_the_first_layer_on_lists_is_the_dense_layer() -> None:
    """active_linear gives nn.Linear's outputs on the dense views, and the same gradients
    for the weight and the bias."""
    obs, _ = observations("afterstates")
    views = th.as_tensor(obs).reshape(-1, MAX_LEGAL, 245)
    lists = th.as_tensor(active_features(obs, 245))
    th.manual_seed(0)
    layer = nn.Linear(245, 64)
    grad = th.randn(len(obs), MAX_LEGAL, 64)
    dense = layer(views)
    dense.backward(grad)
    want = layer.weight.grad.clone(), layer.bias.grad.clone()
    layer.zero_grad()
    ours = active_linear(lists, layer)
    ours.backward(grad)
    assert ours.shape == dense.shape and ours.dtype == th.float32
    assert th.allclose(ours, dense, atol=1e-5)
    assert th.allclose(layer.weight.grad, want[0], atol=1e-3, rtol=1e-5)
    assert th.allclose(layer.bias.grad, want[1], atol=1e-3, rtol=1e-5)
    assert layer.weight.grad[:, 243:].abs().sum() > 0  # the flags' weights learn too


@pytest.mark.parametrize("bfloat16", [False, True])
def test_ring_policy_reads_lists_like_dense_views(bfloat16: bool) -> None:
    """A RingPolicy with active_features scores positions as the same network does on
    the dense views (bfloat16: within its rounding), given the dense observations (rollouts)
    or the lists already made (updates)."""
    obs, mask = observations("afterstates", 50)
    space = spaces.Box(0, 1, (MAX_LEGAL * 245,), np.float32)
    policies = []
    for active in (False, True):
        th.manual_seed(1)
        policies.append(
            RingPolicy(
                space,
                spaces.Discrete(MAX_LEGAL),
                lambda _: 1e-3,
                hidden=(32, 16),
                shared=True,
                bfloat16=bfloat16,
                critic="expected",
                active_features=active,
            )
        )
    dense, listed = policies
    assert all(th.equal(a, b) for a, b in zip(dense.parameters(), listed.parameters(), strict=True))
    x, masks = th.as_tensor(obs), th.as_tensor(mask)
    actions = masks.float().argmax(dim=1)
    lists = th.as_tensor(active_features(obs, 245).reshape(len(obs), -1))
    tolerance = 5e-2 if bfloat16 else 1e-5
    with th.no_grad():
        want = dense.evaluate_actions(x, actions, masks)
        for given in (x, lists):
            got = listed.evaluate_actions(given, actions, masks)
            for a, b in zip(got, want, strict=True):
                assert th.allclose(a, b, atol=tolerance)
        assert th.equal(listed.predict_values(x), listed.predict_values(lists))
    assert listed._get_constructor_parameters()["active_features"] is True


def test_tensor_rollout_buffer_hands_out_lists() -> None:
    """With view_size, TensorRolloutBuffer's minibatches hold the lists of the observations
    sb3-contrib's buffer hands out, and every other field as it does."""
    env = ButtonUpVectorEnv(4, encoding="afterstates")
    obs_space, action_space = env.single_observation_space, env.single_action_space
    n_steps, n_envs = 8, 4
    buffers = [
        MaskableRolloutBuffer(n_steps, obs_space, action_space, n_envs=n_envs),
        TensorRolloutBuffer(n_steps, obs_space, action_space, n_envs=n_envs, view_size=245),
    ]
    obs, mask = observations("afterstates", n_envs)
    rng = np.random.default_rng(0)
    for step in range(n_steps):
        rows = slice(step * n_envs, (step + 1) * n_envs)
        for buffer in buffers:
            buffer.add(
                obs=obs[rows],
                action=rng.integers(0, 1, (n_envs, 1)),
                reward=np.ones(n_envs, np.float32),
                episode_start=np.zeros(n_envs, bool),
                value=th.zeros(n_envs),
                log_prob=th.zeros(n_envs),
                action_masks=mask[rows],
            )
    for buffer in buffers:
        buffer.compute_returns_and_advantage(th.zeros(n_envs), np.zeros(n_envs, bool))
    batches = []
    for buffer in buffers:
        np.random.seed(3)
        batches.append(list(buffer.get(batch_size=16)))
    for want, have in zip(*batches, strict=True):
        assert have.observations.dtype == th.int16
        lists = active_features(want.observations.numpy(), 245).reshape(16, -1)
        np.testing.assert_array_equal(have.observations.numpy(), lists)
        for a, b in zip(want[1:], have[1:], strict=True):
            assert th.equal(a, b)


def test_bad_lists_and_view_sizes_are_named() -> None:
    """Lists the kernels cannot read (another dtype or length, a feature past the layer's
    inputs) and view sizes that do not divide the observations are refused in a sentence,
    before any kernel runs; a TensorRolloutBuffer says so when it is made."""
    layer = nn.Linear(245, 8)
    cases = [
        (th.zeros((2, 3, MAX_ACTIVE)), rf"int16 lists of {MAX_ACTIVE} .* got torch.float32"),
        (th.zeros((2, 3, 5), dtype=th.int16), rf"int16 lists of {MAX_ACTIVE} .* shape \(2, 3, 5\)"),
        (th.full((2, 3, MAX_ACTIVE), 245, dtype=th.int16), r"features from 245 to 245 .* 245"),
        (th.full((2, 3, MAX_ACTIVE), -2, dtype=th.int16), r"features from -2 to -2"),
    ]
    for lists, message in cases:
        with pytest.raises(ValueError, match=message):
            active_linear(lists, layer)
    assert layer.weight.grad is None
    with pytest.raises(ValueError, match="view_size must be a whole number >= 1, got 0"):
        active_features(np.zeros((2, 735), np.float32), 0)
    env = ButtonUpVectorEnv(2, encoding="afterstates")
    spaces_ = env.single_observation_space, env.single_action_space
    with pytest.raises(ValueError, match=r"views of 100 features, got shape \(16, 735\)"):
        TensorRolloutBuffer(8, *spaces_, n_envs=2, view_size=100)
