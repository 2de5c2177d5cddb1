"""The table of the match at round starts that bootstrapped rounds can be valued by
(buttonup_env.learn.round_starts), learnt from the rounds a batched env plays."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.learn.nets import RingPolicy
from buttonup_env.learn.round_starts import RoundStartValues
from buttonup_env.learn.sb3 import BootstrapTruncated, SB3VecEnv


def random_play(steps: int, seed: int = 0) -> tuple[RoundStartValues, dict[str, int]]:
    """Random moves against the random bot in matches cut into rounds, half of them from random
    scores; every round's end checked against the table's view of it."""
    env = ButtonUpVectorEnv(
        48, opponent="random", episode="match", truncate_rounds=True, random_score=0.5
    )
    _, info = env.reset(seed=seed)
    table = RoundStartValues(env)
    table.observe(np.zeros(0, dtype=np.int64), np.zeros((0, 2)))
    rng = np.random.default_rng(seed)
    seen = {"rounds": 0, "matches": 0}
    for _ in range(steps):
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in info["action_mask"]])
        before, values = table._keys.copy(), table.values.copy()  # what the step's ends read
        _, reward, terminated, truncated, info = env.step(actions)
        ended = np.flatnonzero(terminated | truncated)
        points = info["round_points"][ended] if len(ended) else np.zeros((0, 2))
        after = table.observe(ended, points)
        keys, _ = table.current()
        for j, i in enumerate(ended):
            if terminated[i]:  # the match's result, as the env paid it
                assert after[j] == np.sign(reward[i])
                seen["matches"] += 1
                continue
            own, other = points[j][env._batch.agent[i]], points[j][1 - env._batch.agent[i]]
            margin = int(own) - int(other)  # the next start is the old score plus the round
            assert tuple(keys[i, :2]) == (
                before[i, 0] + max(margin, 0),
                before[i, 1] + max(-margin, 0),
            )
            assert after[j] == values[tuple(keys[i])]
            seen["rounds"] += 1
    return table, seen


def test_the_table_follows_every_round_and_match() -> None:
    """Each round's end is valued at the next round's start (its score the old one plus the
    round's margin) or at the match's result; the opponent's view is the agent's negated; and
    what it learns reads like a match: the leader ahead, 0-0 even, and never the leader
    starting (no match reaches that start)."""
    table, seen = random_play(1200)
    assert seen["rounds"] > 5000 and seen["matches"] > 2000
    mirrored = -table.values.transpose(1, 0, 2)[:, :, ::-1]
    np.testing.assert_allclose(table.values, mirrored, atol=1e-9)
    assert table.values[14, :5, 0].mean() > 0.5 and table.values[:5, 14, 1].mean() < -0.5
    own, other = np.indices(table.counts.shape[:2])
    assert table.counts[own > other, 1].sum() == 0 and table.counts[own < other, 0].sum() == 0
    assert table.counts[own < other, 1].all() and table.counts[own == other].sum() > 0
    assert abs(table.values[0, 0, 0]) < 0.1
    assert table.win_probability(14, 0, True) == pytest.approx((1 + table.values[14, 0, 1]) / 2)


def test_a_step_below_zero_or_an_env_without_matches_is_refused() -> None:
    env = ButtonUpVectorEnv(2, opponent="random", episode="match", truncate_rounds=True)
    with pytest.raises(ValueError, match=r"min_step must be in \(0, 1\], got 0"):
        RoundStartValues(env, min_step=0)
    rounds = ButtonUpVectorEnv(2, opponent="random", episode="round")
    with pytest.raises(ValueError, match="got round episodes of ButtonUpVectorEnv"):
        RoundStartValues(rounds)
    with pytest.raises(ValueError, match=r"episode='match'\), got list"):
        RoundStartValues([])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scale=True scales by a table's spreads"):
        BootstrapTruncated(scale=True)


def test_bootstrapped_rounds_are_paid_the_tables_values() -> None:
    """With a table, BootstrapTruncated adds the table's value of the next round's start to a
    truncated round's reward (not the critic's), so a round's reward is its margin's share plus
    a value the table holds; the match's last round is paid its result alone."""
    th.manual_seed(0)
    env = ButtonUpVectorEnv(
        32, opponent="random", episode="match", encoding="match-afterstates", truncate_rounds=True
    )
    venv = SB3VecEnv(env)
    model = MaskablePPO(
        RingPolicy, venv, n_steps=64, seed=0, device="cpu", policy_kwargs=dict(hidden=(16,))
    )
    table = RoundStartValues(env)
    paid: list[float] = []

    class Spy(BootstrapTruncated):
        def _on_step(self) -> bool:
            dones, rewards = self.locals["dones"], self.locals["rewards"]
            truncated = [
                i
                for i in np.flatnonzero(dones)
                if self.locals["infos"][i].get("TimeLimit.truncated")
            ]
            before, values = rewards.copy(), table.values.copy()
            super()._on_step()
            keys, _ = table.current()
            for i in truncated:
                assert before[i] == 0  # reward="match": a round that does not end it pays 0
                expected = model.gamma * values[tuple(keys[i])]
                assert rewards[i] == pytest.approx(expected, abs=1e-6)
                assert not self.locals["infos"][i]["TimeLimit.truncated"]
                paid.append(float(rewards[i]))
            return True

    model.learn(32 * 64, callback=Spy(table))
    assert len(paid) > 100 and np.count_nonzero(paid) > 50
    assert table.counts.sum() > 2 * len(paid)  # the matches' ends count too


def test_the_spread_is_the_targets_standard_deviation_with_a_floor() -> None:
    """A start's spread is the standard deviation of the targets it learnt (their plain mean
    while it has had fewer than 1,000 of them), and never below the floor."""
    env = ButtonUpVectorEnv(2, opponent="random", episode="match", truncate_rounds=True)
    table = RoundStartValues(env)
    rng = np.random.default_rng(0)
    targets = rng.choice([-1.0, -0.2, 0.3, 1.0], size=400)
    starts = np.tile([[3, 5, 1]], (len(targets), 1))
    for target in targets:  # one at a time, as rounds end
        table._learn(starts[:1], np.array([target]))
    assert table.spread(starts[:1])[0] == pytest.approx(np.std(targets), rel=1e-9)
    assert table.values[3, 5, 1] == pytest.approx(np.mean(targets), rel=1e-9)
    assert table.spread(np.array([[5, 3, 0]]))[0] == pytest.approx(np.std(targets), rel=1e-9)
    assert table.spread(np.array([[0, 0, 0]]))[0] == 0.05  # nothing learnt there: the floor
    table._learn(np.array([[7, 7, 0]] * 3), np.full(3, 0.5))  # no spread at all
    assert table.spread(np.array([[7, 7, 0]]), floor=0.2)[0] == 0.2


def test_random_play_swings_the_match_most_where_it_is_close_to_its_end() -> None:
    """At 14-14 a round decides the match; at 0-0 it moves it a little: the spreads say so."""
    table, _ = random_play(600)
    late = table.spread(np.array([[14, 14, 0], [14, 14, 1]]))
    early = table.spread(np.array([[0, 0, 0], [0, 0, 1]]))
    assert (late > 0.8).all() and (early < late / 2).all()


def test_scaled_rounds_are_paid_their_result_centred_and_scaled_at_their_start() -> None:
    """With ``scale``, each round's reward (the table's value of the next start, or the match's
    result) becomes (reward - its start's mean) / its start's spread, so that every score's
    rounds count alike; the steps that end no round are left as they are."""
    th.manual_seed(0)
    env = ButtonUpVectorEnv(
        32, opponent="random", episode="match", encoding="match-afterstates", truncate_rounds=True
    )
    model = MaskablePPO(
        RingPolicy,
        SB3VecEnv(env),
        n_steps=64,
        seed=0,
        device="cpu",
        policy_kwargs=dict(hidden=(16,)),
    )
    table = RoundStartValues(env)
    paid: list[tuple[float, float]] = []

    class Spy(BootstrapTruncated):
        def _on_step(self) -> bool:
            dones, rewards, infos = (
                self.locals["dones"],
                self.locals["rewards"],
                self.locals["infos"],
            )
            twin = copy.copy(table)  # the same table, paying the rounds unscaled
            for name in ("values", "squares", "counts", "_keys", "_agent"):
                setattr(twin, name, copy.copy(getattr(table, name)))
            plain, plain_infos = rewards.copy(), [dict(info) for info in infos]
            before = rewards.copy()
            unscaled = BootstrapTruncated(twin)
            unscaled.model = model
            unscaled._from_table(twin, plain_infos, dones, plain)
            super()._on_step()
            assert (rewards[~dones] == before[~dones]).all()
            ended = np.flatnonzero(dones)
            if len(ended) and table.counts.sum():
                np.testing.assert_array_equal(table.starts, twin.starts)
                mean, spread = table.values[tuple(table.starts.T)], table.spread(table.starts)
                expected = (plain[ended] - mean) / spread
                np.testing.assert_allclose(rewards[ended], expected, rtol=1e-5, atol=1e-6)
                paid.extend(zip(plain[ended].tolist(), rewards[ended].tolist(), strict=True))
            assert not any(info.get("TimeLimit.truncated") for info in infos)
            return True

    model.learn(32 * 64, callback=Spy(table, scale=True))
    plain, scaled = np.array(paid).T
    assert len(paid) > 100 and np.abs(plain).max() <= 1 + 1e-6  # match values
    assert np.abs(scaled - plain).max() > 0.1  # and the scaling changed them


def test_a_table_put_back_from_its_state_goes_on_exactly() -> None:
    """get_state then set_state (through JSON, as a resume point holds it) into a new table
    of the same env: both tables then learn and pay the same from the same rounds."""
    env = ButtonUpVectorEnv(
        16, opponent="random", episode="match", truncate_rounds=True, random_score=0.5
    )
    _, info = env.reset(seed=3)
    table = RoundStartValues(env)
    rng = np.random.default_rng(3)

    def play(tables: list[RoundStartValues], steps: int) -> list[np.ndarray]:
        paid = []
        nonlocal info
        for _ in range(steps):
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in info["action_mask"]])
            _, _, terminated, truncated, info = env.step(actions)
            ended = np.flatnonzero(terminated | truncated)
            points = info["round_points"][ended] if len(ended) else np.zeros((0, 2))
            paid.append(np.stack([t.observe(ended, points) for t in tables]))
        return paid

    play([table], 200)
    assert table.counts.sum() > 500  # it has learnt: a fresh table would pay otherwise
    twin = RoundStartValues(env)
    twin.set_state(json.loads(json.dumps(table.get_state())))
    for both in play([table, twin], 200):
        np.testing.assert_array_equal(both[0], both[1])
    np.testing.assert_array_equal(table.values, twin.values)
    np.testing.assert_array_equal(table.squares, twin.squares)
    assert table.get_state() == twin.get_state()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda s: s.pop("squares"), "must have the keys"),
        (lambda s: s.update(values=s["values"][:-1]), "values must be a list of 450 numbers"),
        (lambda s: s.update(values=[float("nan")] * 450), "values must be from -1 to 1"),
        (lambda s: s.update(squares=[-0.5] * 450), "squares must be from 0 to 1"),
        (lambda s: s.update(counts=[0.5] * 450), "counts must be a list of 450 whole numbers"),
        (lambda s: s.update(counts=[True] * 450), "counts must be a list of 450 whole numbers"),
        (lambda s: s.update(keys=[15] * 6), "keys must be from 0 to 14"),
        (lambda s: s.update(keys=[1, 1, 2] * 2), "whether the agent starts as 0 or 1"),
        (lambda s: s.update(agent=[0, 2]), "agent must be from 0 to 1"),
        (lambda s: s.update(keys=None), "keys and agent must be both null or both given"),
    ],
)
def test_a_state_that_does_not_fit_the_table_is_refused_in_one_sentence(
    change: Any, says: str
) -> None:
    env = ButtonUpVectorEnv(2, opponent="random", episode="match", truncate_rounds=True)
    env.reset(seed=0)
    table = RoundStartValues(env)
    table.observe(np.zeros(0, dtype=np.int64), np.zeros((0, 2)))  # the rounds in play
    state = table.get_state()
    change(state)
    fresh = RoundStartValues(env)
    with pytest.raises(ValueError, match=re.escape(says)):
        fresh.set_state(state)
    assert fresh.counts.sum() == 0 and fresh._keys is None  # nothing half put back
    with pytest.raises(ValueError, match=r"must have the keys .*, got list"):
        fresh.set_state([])
