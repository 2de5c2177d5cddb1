"""RingViews, the network of RingPolicy: its two critics, checked on positions the batched env
reached, against the same values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from random_play import random_play
from torch import nn

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.game.encoding import MAX_LEGAL, TO_GO, AfterstateEncoding, MatchAfterstateEncoding
from buttonup_env.learn.active import active_features
from buttonup_env.learn.nets import CRITICS, MARGINS, RingPolicy, RingViews
from buttonup_env.learn.round_starts import RoundStartValues

VIEW = AfterstateEncoding.view_size
MATCH_VIEW = MatchAfterstateEncoding.view_size


def positions(count: int = 600) -> tuple[th.Tensor, np.ndarray]:
    """Observations and legal-move masks of ``count`` positions from games of random moves,
    with one, two and three legal moves among them, and finished rounds' all-zero
    observations."""
    obs, mask = random_play(count // 6, steps=6, seed=7)
    obs = np.concatenate([obs, np.zeros((2, MAX_LEGAL * VIEW), np.float32)])  # finished:
    mask = np.concatenate([mask, np.zeros((2, MAX_LEGAL), bool)])  # no legal move
    assert set(mask.sum(1)) == {0, 1, 2, 3}
    return th.as_tensor(obs), mask


def match_positions() -> tuple[th.Tensor, np.ndarray]:
    """Observations (``match-afterstates``) and legal-move masks of random play in matches
    from random scores: moves that end a round among them, and every score near the end."""
    obs, mask = random_play(64, 40, 4, "match-afterstates", episode="match", random_score=1.0)
    return th.as_tensor(obs), mask


def network(critic: str, shared: bool = True) -> RingViews:
    th.manual_seed(3)
    view = MATCH_VIEW if critic == "margins" else VIEW
    net = RingViews(view, (32, 16), nn.ReLU, shared=shared, critic=critic)
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
    obs, mask = match_positions() if critic == "margins" else positions()
    three = mask.sum(1) == 3
    net = network(critic)
    if critic == "margins":
        net.set_margin_values(th.randn(TO_GO, TO_GO, 2, MARGINS))
    views = obs[three].reshape(-1, MAX_LEGAL, net.view_size)
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
    with pytest.raises(
        ValueError, match="critic must be one of expected, pooled, margins, got 'tw"
    ):
        RingViews(VIEW, (8,), nn.ReLU, critic="twin")


@pytest.mark.parametrize("shared", [True, False])
def test_the_margins_critic_values_each_afterstate_by_its_margins_worth(shared: bool) -> None:
    """With ``critic="margins"`` a move's afterstate is worth the sum over the round's margins
    of their probability (a softmax of 37 units) times the table's worth of that margin at the
    view's points to go and starter; a move that ends the round is worth its own unit. The
    value weights them by the policy, as the expected critic does, from dense views and from
    lists of their active features alike."""
    obs, mask = match_positions()
    views = obs.reshape(-1, MAX_LEGAL, MATCH_VIEW)
    over = views[..., AfterstateEncoding.view_size - 1] > 0
    own = views[..., VIEW : VIEW + TO_GO].argmax(-1)
    assert over[th.as_tensor(mask)].any() and (~over[th.as_tensor(mask)]).any()
    assert len(set(own[th.as_tensor(mask)].tolist())) > 10  # many scores
    net = network("margins", shared)
    table = th.randn(TO_GO, TO_GO, 2, MARGINS)
    net.set_margin_values(table)
    with th.no_grad():
        logits, value = net(obs)
        body = net.critic_body(views)
        units = net.critic_score(body)
    other = views[..., VIEW + TO_GO : VIEW + 2 * TO_GO].argmax(-1)
    starts = views[..., -1].long()
    for i in range(len(obs)):
        legal = th.as_tensor(mask[i])
        if not legal.any():
            continue
        worth = []
        for a in np.flatnonzero(mask[i]):
            if over[i, a]:
                worth.append(float(units[i, a, 0]))
            else:
                p = th.softmax(units[i, a, 1:], dim=0)
                worth.append(float((p * table[own[i, a], other[i, a], starts[i, a]]).sum()))
        probs = th.softmax(logits[i][legal], dim=0)
        assert float(value[i, 0]) == pytest.approx(
            float((probs * th.tensor(worth)).sum()), abs=1e-5
        )
    lists = th.as_tensor(active_features(obs.numpy(), MATCH_VIEW).reshape(len(obs), -1))
    with th.no_grad():
        listed = net.log_probs_and_value(lists, th.as_tensor(mask))[1]
        dense = net.log_probs_and_value(obs, th.as_tensor(mask))[1]
    playable = th.as_tensor(mask.any(1))
    assert th.allclose(listed[playable], value[playable], atol=1e-5)
    assert th.allclose(dense[playable], value[playable], atol=1e-5)


def test_the_margins_critic_reads_match_views_and_a_table_of_their_shape() -> None:
    with pytest.raises(ValueError, match="reads the match-afterstates encoding's views"):
        RingViews(VIEW, (8,), nn.ReLU, critic="margins")
    net = network("margins")
    with pytest.raises(
        ValueError, match=r"must have the shape \(21, 21, 2, 37\), got \(21, 21, 2\)"
    ):
        net.set_margin_values(np.zeros((21, 21, 2)))
    with pytest.raises(ValueError, match="must be finite numbers, got NaN or infinity"):
        net.set_margin_values(np.full((21, 21, 2, 37), np.nan))
    with pytest.raises(ValueError, match="is for critic='margins', not 'expected'"):
        network("expected").set_margin_values(np.zeros((21, 21, 2, 37)))


def test_a_margins_worth_is_the_tables_value_of_what_follows() -> None:
    """RoundStartValues.margin_values: a margin that reaches the target is +1 (-1 for the
    opponent's); otherwise the table's value of the next round's start, whose starter has
    fewer points or, on equal points, did not start; scaled, centred and scaled at the
    round's start."""
    env = ButtonUpVectorEnv(2, encoding="match-afterstates", episode="match")
    table = RoundStartValues(env)
    rng = np.random.default_rng(0)
    table.values = rng.uniform(-1, 1, table.values.shape)
    table.squares = table.values**2 + rng.uniform(0, 0.5, table.values.shape)
    worth, scaled = table.margin_values(False), table.margin_values(True)
    assert worth.shape == (TO_GO, TO_GO, 2, MARGINS)
    assert not worth[0].any() and not worth[:, 0].any() and not worth[16:].any()
    for own, other, starts, margin in [
        (0, 0, 1, 0),
        (0, 0, 0, 0),
        (3, 7, 1, 4),
        (3, 7, 0, -4),
        (14, 2, 0, 1),
        (14, 2, 1, -13),
        (10, 10, 1, -18),
    ]:
        got = worth[15 - own, 15 - other, starts, margin + 18]
        after = (own + max(margin, 0), other + max(-margin, 0))
        if after[0] >= 15 or after[1] >= 15:
            assert got == (1.0 if after[0] >= 15 else -1.0)
        else:
            nxt = int(after[0] < after[1]) if after[0] != after[1] else 1 - starts
            assert got == table.values[after[0], after[1], nxt]
        spread = table.spread(np.array([[own, other, starts]]))[0]
        mean = table.values[own, other, starts]
        assert scaled[15 - own, 15 - other, starts, margin + 18] == pytest.approx(
            (got - mean) / spread
        )


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


def test_the_policys_own_pass_needs_a_per_view_critic() -> None:
    with pytest.raises(ValueError, match="needs a per-view critic, not 'pooled'"):
        network("pooled").log_probs_and_value(th.zeros((1, MAX_LEGAL * VIEW)), th.ones(1, 3) > 0)
