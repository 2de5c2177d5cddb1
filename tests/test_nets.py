"""RingViews, the network of RingPolicy: its two critics, checked on positions the batched env
reached, against the same values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from random_play import random_play
from torch import nn

from buttonup_env.game.encoding import MAX_LEGAL, AfterstateEncoding
from buttonup_env.learn.nets import CRITICS, RingPolicy, RingViews

VIEW = AfterstateEncoding.view_size


def positions(count: int = 600) -> tuple[th.Tensor, np.ndarray]:
    """Observations and legal-move masks of ``count`` positions from games of random moves,
    with one, two and three legal moves among them, and finished rounds' all-zero
    observations."""
    obs, mask = random_play(count // 6, steps=6, seed=7)
    obs = np.concatenate([obs, np.zeros((2, MAX_LEGAL * VIEW), np.float32)])  # finished:
    mask = np.concatenate([mask, np.zeros((2, MAX_LEGAL), bool)])  # no legal move
    assert set(mask.sum(1)) == {0, 1, 2, 3}
    return th.as_tensor(obs), mask


def network(critic: str, shared: bool = True) -> RingViews:
    th.manual_seed(3)
    net = RingViews(VIEW, (32, 16), nn.ReLU, shared=shared, critic=critic)
    for p in net.parameters():  # away from the initial zeros, so that the scores differ
        nn.init.normal_(p, std=0.3)
    return net


@pytest.mark.parametrize("shared", [True, False])
def test_the_expected_critic_weights_each_afterstate_by_the_policy(shared: bool) -> None:
    """The value is the sum over legal moves of the policy's probability of the move times
    the value of its afterstate (the critic's own unit on that view); 0 with no legal move."""
    obs, mask = positions()
    net = network("expected", shared)
    with th.no_grad():
        logits, value = net(obs)
        body = net.critic_body(obs.reshape(-1, MAX_LEGAL, VIEW))
        afterstates = net.critic_score(body).squeeze(-1)
        scores = net.actor_score(net.actor_body(obs.reshape(-1, MAX_LEGAL, VIEW))).squeeze(-1)
    assert th.allclose(logits, scores, atol=1e-6)  # the actor's own unit, however computed
    assert value.shape == (len(obs), 1) and logits.shape == (len(obs), MAX_LEGAL)
    for i in range(len(obs)):
        legal = th.as_tensor(mask[i])
        probs = th.softmax(logits[i][legal], dim=0)
        expected = float((probs * afterstates[i][legal]).sum()) if legal.any() else 0.0
        assert float(value[i, 0]) == pytest.approx(expected, abs=1e-5)
    assert th.equal(net.forward_critic(obs), value)
    assert th.equal(net.forward_actor(obs), logits)


@pytest.mark.parametrize("critic", CRITICS)
def test_both_critics_ignore_the_order_of_the_moves(critic: str) -> None:
    """Listing the legal moves in another order permutes the logits and leaves the value."""
    obs, mask = positions()
    three = mask.sum(1) == 3
    net = network(critic)
    views = obs[three].reshape(-1, MAX_LEGAL, VIEW)
    order = [2, 0, 1]
    with th.no_grad():
        logits, value = net(views.reshape(len(views), -1))
        turned_logits, turned_value = net(views[:, order].reshape(len(views), -1))
    assert th.allclose(turned_logits, logits[:, order], atol=1e-5)
    assert th.allclose(turned_value, value, atol=1e-5)


def test_the_value_loss_does_not_move_the_policy_scores() -> None:
    """The expected critic holds the policy's probabilities fixed: a loss on the value alone
    sends no gradient to the actor's scoring unit, and some to the critic's."""
    obs, _ = positions()
    net = network("expected")
    _, value = net(obs)
    value.pow(2).sum().backward()
    assert net.actor_score.weight.grad is None or not net.actor_score.weight.grad.any()
    assert net.critic_score.weight.grad is not None and net.critic_score.weight.grad.any()


def test_an_unknown_critic_is_named() -> None:
    with pytest.raises(ValueError, match="critic must be one of expected, pooled, got 'twin'"):
        RingViews(VIEW, (8,), nn.ReLU, critic="twin")


@pytest.mark.parametrize(
    ("shared", "logit_bound", "bfloat16"),
    [(True, None, False), (False, None, False), (True, 2.0, False), (True, None, True)],
)
def test_the_policys_own_pass_gives_sb3_contribs_numbers(
    shared: bool, logit_bound: float | None, bfloat16: bool
) -> None:
    """RingPolicy computes MaskablePPO's rollouts and updates (``forward``,
    ``evaluate_actions``) with one masked log-softmax instead of sb3-contrib's masked
    distribution: the same values, log-probabilities and entropies, the same actions drawn
    from the same generator, on positions with one, two and three legal moves."""
    from gymnasium import spaces
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    obs, mask = positions()
    playable = mask.any(axis=1)
    obs, mask = obs[playable], mask[playable]
    th.manual_seed(11)
    policy = RingPolicy(
        spaces.Box(0, 1, (MAX_LEGAL * VIEW,), np.float32),
        spaces.Discrete(MAX_LEGAL),
        lambda _: 1e-3,
        hidden=(32, 16),
        shared=shared,
        logit_bound=logit_bound,
        bfloat16=bfloat16,
        critic="expected",
    )
    for p in policy.parameters():
        nn.init.normal_(p, std=0.3)
    rng = np.random.default_rng(5)
    actions = th.as_tensor([rng.choice(np.flatnonzero(row)) for row in mask])
    masks = th.as_tensor(mask)
    with th.no_grad():
        ours = policy.evaluate_actions(obs, actions, action_masks=masks)
        theirs = MaskableActorCriticPolicy.evaluate_actions(policy, obs, actions, masks)
        for a, b in zip(ours, theirs, strict=True):
            assert a.shape == b.shape
            assert th.allclose(a, b, atol=1e-5)
        for deterministic in (True, False):
            th.manual_seed(2)
            ours = policy(obs, deterministic=deterministic, action_masks=mask)
            th.manual_seed(2)
            theirs = MaskableActorCriticPolicy.forward(policy, obs, deterministic, mask)
            assert th.equal(ours[0], theirs[0])
            assert mask[np.arange(len(mask)), ours[0].numpy()].all()  # legal moves only
            for a, b in zip(ours[1:], theirs[1:], strict=True):
                assert th.allclose(a, b, atol=1e-5)


def test_the_policys_own_pass_values_a_finished_round_at_zero() -> None:
    """With no legal move (a finished round) the value is 0, as RingViews.forward has it."""
    net = network("expected")
    obs = th.zeros((2, MAX_LEGAL * VIEW))
    _, value = net.log_probs_and_value(obs, th.zeros((2, MAX_LEGAL), dtype=th.bool))
    assert th.equal(value, th.zeros((2, 1)))
    assert th.equal(net(obs)[1], value)


def test_the_policys_own_pass_needs_the_expected_critic() -> None:
    with pytest.raises(ValueError, match="needs the expected critic, not 'pooled'"):
        network("pooled").log_probs_and_value(th.zeros((1, MAX_LEGAL * VIEW)), th.ones(1, 3) > 0)
