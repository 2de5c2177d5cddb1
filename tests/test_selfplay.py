"""The self-play opponent pool: the mix's validation, who is drawn how often, and the pool
inside a training env."""

from __future__ import annotations

import dataclasses
import math
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.envs.wrappers import RingObservation
from buttonup_env.game.rules import LAYOUTS, State
from buttonup_env.learn.nets import RingPolicy
from buttonup_env.learn.onnx_writer import export_onnx
from buttonup_env.players.batched import PolicyPlayer, choose_together
from buttonup_env.players.bots import GreedyBot, PerfectBot, RandomBot
from buttonup_env.players.policy import OnnxPolicy
from buttonup_env.players.selfplay import OpponentMix, OpponentPool

POOL_BOTS = ("perfect", "greedy", "random")
"""The bots a pool draws (OpponentMix weighs them)."""

ROOT = Path(__file__).resolve().parent.parent
DRAWS = 3000
TOLERANCE = 0.03  # about four standard deviations of a frequency over 3000 draws


@pytest.fixture(scope="module")
def snapshot_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny RingPolicy models (different seeds) exported to ONNX."""
    folder = tmp_path_factory.mktemp("exported")
    previous = th.get_num_threads()
    th.set_num_threads(1)
    paths = []
    for seed in (1, 2):
        env = RingObservation(gym.make("ButtonUp-v1"), encoding="afterstates")
        model = MaskablePPO(
            RingPolicy, env, n_steps=64, seed=seed, device="cpu", policy_kwargs={"hidden": (8,)}
        )
        paths.append(export_onnx(model.policy, folder / f"seed{seed}.onnx"))
    th.set_num_threads(previous)
    return paths[0], paths[1]


def fill(folder: Path, sources: list[Path], steps: list[int]) -> list[Path]:
    """Copy policies into ``folder`` under the names training gives its snapshots."""
    folder.mkdir(parents=True, exist_ok=True)
    return [
        Path(shutil.copyfile(source, folder / f"step_{step:09d}.onnx"))
        for source, step in zip(sources, steps, strict=True)
    ]


def frequencies(pool: OpponentPool, seed: int, draws: int = DRAWS) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counts: Counter[str] = Counter()
    for _ in range(draws):
        pool.reset(rng)
        counts[pool.current_name] += 1
    return {name: n / draws for name, n in counts.items()}


def positions(seed: int, count: int) -> list[State]:
    rng = np.random.default_rng(seed)
    found: list[State] = []
    while len(found) < count:
        first = "R" if rng.integers(2) == 0 else "B"
        state = State.new_round(LAYOUTS[int(rng.integers(len(LAYOUTS)))], first)
        while not state.round_over:
            found.append(state)
            legal = state.legal_moves()
            state = state.play(legal[int(rng.integers(len(legal)))])
    return found[:count]


# --- OpponentMix -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"snapshots": -0.1}, ["snapshots=-0.1", ">= 0"]),
        ({"perfect": -1.0}, ["perfect=-1.0", ">= 0"]),
        ({"random": -0.5, "greedy": 1.0}, ["random=-0.5", ">= 0"]),
        ({"snapshots": 0, "perfect": 0, "greedy": 0, "random": 0}, ["positive sum"]),
        ({"newest": 1.5}, ["newest", "[0, 1]", "1.5"]),
        ({"newest": -0.1}, ["newest", "[0, 1]", "-0.1"]),
        ({"newest": float("nan")}, ["newest", "[0, 1]", "nan"]),
        ({"max_snapshots": 0}, ["max_snapshots", "from 1 to 1,000", "got 0"]),
        ({"max_snapshots": -3}, ["max_snapshots", "from 1 to 1,000", "got -3"]),
        ({"max_snapshots": 10**6}, ["max_snapshots", "from 1 to 1,000", "got 1000000"]),
        ({"prioritized": -1.0}, ["prioritized", ">= 0", "got -1.0"]),
        ({"prioritized": float("inf")}, ["prioritized", ">= 0", "got inf"]),
    ],
)
def test_opponent_mix_refuses_bad_values(kwargs: dict, fragments: list[str]) -> None:
    with pytest.raises(ValueError) as error:
        OpponentMix(**kwargs)
    for fragment in fragments:
        assert fragment in str(error.value), (fragment, str(error.value))


@pytest.mark.parametrize("weight", [float("nan"), float("inf")])
@pytest.mark.parametrize("name", ["snapshots", "perfect"])
def test_opponent_mix_refuses_weights_that_are_not_finite(name: str, weight: float) -> None:
    """A NaN or infinite weight cannot be normalised into probabilities: refuse it up front
    instead of failing inside ``rng.choice`` at the first episode."""
    with pytest.raises(ValueError, match=name):
        OpponentMix(**{name: weight})


def test_pure_self_play_mix_is_allowed_and_needs_a_snapshot(tmp_path: Path) -> None:
    """Snapshots alone (pure self-play) is a valid mix; drawing before the first snapshot
    exists says what is missing instead of dividing by zero."""
    mix = OpponentMix(snapshots=1.0, perfect=0, greedy=0, random=0)
    pool = OpponentPool(tmp_path, mix, refresh_seconds=0.0)
    with pytest.raises(ValueError, match=r"no snapshot in .* pure self-play"):
        pool.reset(np.random.default_rng(0))


def test_opponent_mix_accepts_edge_values() -> None:
    mix = OpponentMix(snapshots=0, perfect=0, greedy=0, random=1e-9, newest=0, max_snapshots=1)
    assert mix.random == 1e-9
    assert OpponentMix(newest=1.0).newest == 1.0


# --- drawing opponents -------------------------------------------------------------------------


@pytest.mark.parametrize("create_folder", [True, False])
def test_only_bots_are_drawn_while_there_is_no_snapshot(
    tmp_path: Path, create_folder: bool
) -> None:
    folder = tmp_path / "snapshots"
    if create_folder:
        folder.mkdir()
    mix = OpponentMix(snapshots=0.4, perfect=0.3, greedy=0.2, random=0.1)
    pool = OpponentPool(folder, mix, refresh_seconds=0.0)
    found = frequencies(pool, seed=0)
    assert set(found) == set(POOL_BOTS)
    # the snapshots' weight is shared among the bots in proportion to theirs
    for name, expected in (("perfect", 0.5), ("greedy", 1 / 3), ("random", 1 / 6)):
        assert abs(found[name] - expected) < TOLERANCE, found


def test_the_drawn_bot_is_the_one_that_plays(tmp_path: Path) -> None:
    mix = OpponentMix(snapshots=0.1, perfect=0.8, greedy=0.05, random=0.05)
    pool = OpponentPool(tmp_path, mix, refresh_seconds=0.0)
    kinds = {"perfect": PerfectBot, "greedy": GreedyBot, "random": RandomBot}
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(100):
        pool.reset(rng)
        assert type(pool.current) is kinds[pool.current_name]
        assert pool.current_name in repr(pool)
        seen.add(pool.current_name)
    assert seen == set(POOL_BOTS)


def test_draws_are_reproducible_with_the_same_seed(
    tmp_path: Path, snapshot_files: tuple[Path, Path]
) -> None:
    fill(tmp_path, list(snapshot_files), [1, 2])

    def names(seed: int) -> list[str]:
        pool = OpponentPool(tmp_path, OpponentMix(), refresh_seconds=0.0)
        rng = np.random.default_rng(seed)
        drawn = []
        for _ in range(200):
            pool.reset(rng)
            drawn.append(pool.current_name)
        return drawn

    assert names(5) == names(5)
    assert names(5) != names(6)


@pytest.mark.parametrize("newest", [0.7, 0.2])
def test_snapshots_are_drawn_by_their_weight_and_the_newest_by_its_probability(
    tmp_path: Path, snapshot_files: tuple[Path, Path], newest: float
) -> None:
    fill(tmp_path, list(snapshot_files), [1, 2])
    mix = OpponentMix(snapshots=0.4, perfect=0.4, greedy=0.1, random=0.1, newest=newest)
    pool = OpponentPool(tmp_path, mix, refresh_seconds=0.0)
    found = frequencies(pool, seed=1)
    expected = {
        "step_000000002": 0.4 * newest,
        "step_000000001": 0.4 * (1 - newest),
        "perfect": 0.4,
        "greedy": 0.1,
        "random": 0.1,
    }
    assert set(found) == set(expected)
    for name, p in expected.items():
        assert abs(found[name] - p) < TOLERANCE, (name, found)


@pytest.mark.parametrize(("newest", "only"), [(1.0, "step_000000002"), (0.0, "step_000000001")])
def test_newest_one_or_zero_picks_only_the_newest_or_only_older_snapshots(
    tmp_path: Path, snapshot_files: tuple[Path, Path], newest: float, only: str
) -> None:
    fill(tmp_path, list(snapshot_files), [1, 2])
    mix = OpponentMix(snapshots=1.0, perfect=0.01, greedy=0, random=0, newest=newest)
    pool = OpponentPool(tmp_path, mix, refresh_seconds=0.0)
    found = frequencies(pool, seed=2, draws=500)
    assert set(found) <= {only, "perfect"}
    assert found[only] > 0.95


def test_a_lone_snapshot_plays_whatever_newest_says(
    tmp_path: Path, snapshot_files: tuple[Path, Path]
) -> None:
    fill(tmp_path, [snapshot_files[0]], [7])
    mix = OpponentMix(snapshots=1.0, perfect=0.01, greedy=0, random=0, newest=0.0)
    found = frequencies(OpponentPool(tmp_path, mix, refresh_seconds=0.0), seed=3, draws=300)
    assert found["step_000000007"] > 0.95


def test_win_rates_are_recent_scores_against_each_snapshot(tmp_path: Path) -> None:
    pool = OpponentPool(tmp_path, OpponentMix(snapshots=1, prioritized=1))
    assert pool.win_rate("step_000000001.onnx") == 0.5  # nothing known yet
    pool.record("step_000000001.onnx", np.array([1.0, 1.0, 0.5]))
    assert pool.results["step_000000001.onnx"] == pytest.approx([2.5, 3.0])
    assert pool.win_rate("step_000000001.onnx") == pytest.approx(3.0 / 4.0)
    pool.record("step_000000001.onnx", np.zeros(1000))  # the old wins fade away
    score, rounds = pool.results["step_000000001.onnx"]
    assert score == pytest.approx(2.5 * OpponentPool.RESULT_DECAY**1000)
    assert pool.win_rate("step_000000001.onnx") < 0.01 and rounds > 150
    assert pool.win_rate("step_000000002.onnx") == 0.5  # kept apart per snapshot


@pytest.mark.parametrize("prioritized", [0.0, 2.0])
def test_prioritized_self_play_draws_the_snapshots_that_still_win(
    tmp_path: Path, snapshot_files: tuple[Path, Path], prioritized: float
) -> None:
    """PFSP: an older snapshot is drawn with weight (1 - the learner's score against it) **
    prioritized; with prioritized 0 the results do not matter (a uniform draw)."""
    fill(tmp_path, [*snapshot_files, snapshot_files[0]], [1, 2, 3])
    mix = OpponentMix(snapshots=1, perfect=0, greedy=0, random=0, newest=0.0, prioritized=0)
    plain = frequencies(OpponentPool(tmp_path, mix, refresh_seconds=0.0), seed=4)
    pool = OpponentPool(
        tmp_path, dataclasses.replace(mix, prioritized=prioritized), refresh_seconds=0.0
    )
    pool.record("step_000000001.onnx", np.ones(300))  # the learner beats it: rarely drawn
    pool.record("step_000000002.onnx", np.full(300, 0.25))  # it beats the learner: often
    found = frequencies(pool, seed=4)
    if prioritized == 0:
        assert found == plain  # the same draws as a pool without results
        return
    weights = {
        name: (1 - min(pool.win_rate(f"{name}.onnx"), 0.99)) ** prioritized
        for name in ("step_000000001", "step_000000002")
    }
    assert weights["step_000000001"] < 0.001 < 0.5 < weights["step_000000002"]
    total = sum(weights.values())
    assert set(found) <= set(weights)  # never the newest: newest=0
    for name, weight in weights.items():
        assert abs(found.get(name, 0.0) - weight / total) < TOLERANCE, found


def test_snapshot_opponents_are_sampling_onnx_policies(
    tmp_path: Path, snapshot_files: tuple[Path, Path]
) -> None:
    fill(tmp_path, list(snapshot_files), [1, 2])
    mix = OpponentMix(snapshots=1.0, perfect=0.001, greedy=0, random=0, newest=1.0)
    pool = OpponentPool(tmp_path, mix, refresh_seconds=0.0)
    rng = np.random.default_rng(4)
    pool.reset(rng)
    assert pool.current_name == "step_000000002"
    assert isinstance(pool.current, OnnxPolicy)
    assert not pool.current.deterministic
    assert pool.current.rng is rng  # it samples with the episode's generator
    first = pool.current
    pool.reset(rng)
    assert pool.current is first  # loaded once, then reused


def test_max_snapshots_keeps_only_the_newest_files(
    tmp_path: Path, snapshot_files: tuple[Path, Path]
) -> None:
    sources = [snapshot_files[0], snapshot_files[1]] * 2
    fill(tmp_path, sources, [10, 20, 30, 40])
    mix = OpponentMix(snapshots=0.8, perfect=0.2, greedy=0, random=0, newest=0.5, max_snapshots=2)
    pool = OpponentPool(tmp_path, mix, refresh_seconds=0.0)
    assert [p.name for p in pool.snapshots()] == ["step_000000030.onnx", "step_000000040.onnx"]
    found = frequencies(pool, seed=5, draws=1000)
    assert set(found) == {"step_000000030", "step_000000040", "perfect"}
    assert abs(found["step_000000040"] - 0.4) < 0.05
    assert abs(found["step_000000030"] - 0.4) < 0.05

    fill(tmp_path, [snapshot_files[0]], [50])  # training writes a new snapshot
    assert [p.name for p in pool.snapshots()] == ["step_000000040.onnx", "step_000000050.onnx"]
    found = frequencies(pool, seed=6, draws=500)
    assert set(found) == {"step_000000040", "step_000000050", "perfect"}


def test_the_folder_is_read_again_only_after_refresh_seconds(
    tmp_path: Path, snapshot_files: tuple[Path, Path]
) -> None:
    mix = OpponentMix(snapshots=1.0, perfect=0.01, greedy=0, random=0)
    pool = OpponentPool(tmp_path, mix, refresh_seconds=3600.0)
    assert frequencies(pool, seed=7, draws=50) == {"perfect": 1.0}
    fill(tmp_path, list(snapshot_files), [1, 2])
    assert frequencies(pool, seed=7, draws=50) == {"perfect": 1.0}  # not re-read yet
    fresh = OpponentPool(tmp_path, mix, refresh_seconds=3600.0)
    assert fresh.snapshots() == sorted(tmp_path.glob("step_*.onnx"))


# --- playing -----------------------------------------------------------------------------------


def test_act_delegates_to_the_current_opponent(tmp_path: Path) -> None:
    class Recorder:
        def __init__(self) -> None:
            self.seen: list[State] = []

        def act(self, state: State) -> int:
            self.seen.append(state)
            return state.legal_moves()[-1]

    pool = OpponentPool(tmp_path, OpponentMix())
    recorder = Recorder()
    pool.current = recorder
    states = positions(8, 20)
    assert [pool.act(s) for s in states] == [s.legal_moves()[-1] for s in states]
    assert recorder.seen == states


def test_every_drawn_opponent_plays_legal_moves(
    tmp_path: Path, snapshot_files: tuple[Path, Path]
) -> None:
    fill(tmp_path, list(snapshot_files), [1, 2])
    even = OpponentMix(snapshots=1, perfect=1, greedy=1, random=1, newest=0.5)
    pool = OpponentPool(tmp_path, even, refresh_seconds=0.0)
    rng = np.random.default_rng(9)
    states = positions(10, 300)
    seen = set()
    for episode in range(60):
        pool.reset(rng)
        seen.add(pool.current_name)
        for state in states[episode * 5 : episode * 5 + 5]:
            assert pool.act(state) in state.legal_moves()
    assert seen == {*POOL_BOTS, "step_000000001", "step_000000002"}


def test_a_training_env_plays_episodes_with_the_pool(
    tmp_path: Path, snapshot_files: tuple[Path, Path], training_script: Callable[[str], ModuleType]
) -> None:
    factories = training_script("factories")
    folder = tmp_path / "snapshots"
    fill(folder, list(snapshot_files), [1, 2])
    even = OpponentMix(snapshots=1, perfect=1, greedy=1, random=1, newest=0.5)
    env = factories.make_env(folder, even, "afterstates", "margin", "round")
    assert env.observation_space.shape == (735,)
    assert env.action_space.n == 3
    pool = env.unwrapped.opponent
    assert isinstance(pool, OpponentPool)
    # the pool takes in a new snapshot when the trainer says so, never on a timer
    assert pool.refresh_seconds == math.inf
    env.reset(seed=0)
    assert [p.name for p in pool.snapshots()] == ["step_000000001.onnx", "step_000000002.onnx"]
    fill(folder, [snapshot_files[0]], [3])
    assert len(pool.snapshots()) == 2
    env.refresh_pool()
    assert len(pool.snapshots()) == 3
    rng = np.random.default_rng(11)
    opponents = Counter()
    for episode in range(40):
        obs, info = env.reset(seed=100 + episode)
        opponents[pool.current_name] += 1
        steps, terminated, reward = 0, False, 0.0
        while not terminated:
            assert env.observation_space.contains(obs)
            mask = env.action_masks()
            assert np.array_equal(mask, info["action_mask"].astype(bool))
            action = int(rng.choice(np.flatnonzero(mask)))
            obs, reward, terminated, truncated, info = env.step(action)
            assert not truncated
            steps += 1
        assert 1 <= steps <= 8  # one round per episode
        assert "round_points" in info
        strength = info["state"].strength
        agent = info["agent_color"]
        other_color = "B" if agent == "R" else "R"
        assert reward == pytest.approx((strength[agent] - strength[other_color]) / 18)
    assert {"step_000000001", "step_000000002", "step_000000003"} <= set(opponents)
    assert set(opponents) & set(POOL_BOTS)
    env.close()


def test_a_pools_policies_choose_together_as_each_would_alone(
    snapshot_files: tuple[Path, Path],
) -> None:
    """A batched env's pool plays its policies together (``batched.choose_together``): each
    runs its own rows and draws its own noise, in turn; the masking and picking are shared.
    The slots are those of each policy alone, its noise drawn from the same generator."""
    env = ButtonUpVectorEnv(30, opponent="random")
    env.reset(seed=2)
    boards, mover = env._board.copy(), env._to_move.copy()
    observations = env.encode("afterstates", slice(None), mover)
    sampling = OnnxPolicy(snapshot_files[0], deterministic=False)
    greedy = OnnxPolicy(snapshot_files[1])
    counts = [12, 7, 11]

    def pool(seed: int) -> list[PolicyPlayer]:
        rng = np.random.default_rng(seed)
        policies = (sampling, greedy, sampling)
        return [PolicyPlayer(repr(policy), policy, env.tables, rng) for policy in policies]

    together = choose_together(pool(5), np.array(counts), boards, observations)
    rng, expected, start = np.random.default_rng(5), [], 0
    for player, count in zip(pool(5), counts, strict=True):
        rows = slice(start, start + count)
        logits = player.policy.logits(observations[rows]).astype(np.float64)
        if not player.policy.deterministic:
            logits += rng.gumbel(size=logits.shape)
        legal = env.tables.legal_views_int8[boards[rows]].view(bool)
        action = np.where(legal, logits, -np.inf).argmax(axis=1)
        expected.append(env.tables.legal_slots[boards[rows], action])
        start += count
    np.testing.assert_array_equal(together, np.concatenate(expected))
    assert env.tables.legal[boards, together].all()
    other = choose_together(pool(6), np.array(counts), boards, observations)
    assert (other != together).any()  # the noise decides some moves: its order is checked


def test_a_pool_of_policies_reading_different_encodings_plays_them_all(
    snapshot_files: tuple[Path, Path], tmp_path: Path
) -> None:
    """Policies of several encodings in one pool: each group is encoded in its own encoding
    and every policy plays legal moves, the same ones for the same seed."""
    env = RingObservation(gym.make("ButtonUp-v1"), encoding="ring")
    model = MaskablePPO(
        RingPolicy, env, n_steps=64, seed=3, device="cpu", policy_kwargs={"hidden": (8,)}
    )
    ring = export_onnx(model.policy, tmp_path / "ring.onnx")
    fill(tmp_path / "pool", [snapshot_files[0], ring, snapshot_files[1]], [0, 1, 2])
    mix = OpponentMix(snapshots=1, newest=0.34)

    def played(seed: int) -> tuple[list[str], np.ndarray]:
        envs = ButtonUpVectorEnv(48, opponent=OpponentPool(tmp_path / "pool", mix, 0.0))
        _, info = envs.reset(seed=seed)
        for _ in range(40):  # an illegal opponent move would raise
            _, _, _, _, info = envs.step(info["action_mask"].argmax(axis=1))
        encodings = [p.encoding.name for p in envs._players if isinstance(p, PolicyPlayer)]
        return encodings, envs._board.copy()

    encodings, boards = played(seed=5)
    assert sorted(encodings) == ["afterstates", "afterstates", "ring"]
    np.testing.assert_array_equal(played(seed=5)[1], boards)
