"""``ButtonUpVectorEnv``: every transition against the rules engine, seeding, bots, arguments."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import buttonup_env
from buttonup_env.engine.tables import game_tables
from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.game import solver
from buttonup_env.game.encoding import ENCODINGS, legal_mask
from buttonup_env.game.equity import best_moves, match_move_values
from buttonup_env.game.rules import LAYOUTS, MAX_ROUND_MARGIN, NUM_SLOTS, State, other, sow
from buttonup_env.players.bots import GreedyBot, immediate_margin
from buttonup_env.players.selfplay import OpponentMix, OpponentPool
from buttonup_env.players.shipped import shipped_policy_path

MODEL = shipped_policy_path("buttonup-ppo")
COLORS = ("R", "B")


class Recorder:
    """Records what the env drew and chose (layouts, agents, starters, every move), so that a
    reference made of :class:`State` objects can replay it with the rules engine alone: it
    listens to the steps of the env's engine (the numpy backend)."""

    def __init__(self, env: ButtonUpVectorEnv) -> None:
        self.events: list[tuple[Any, ...]] = []
        engine = env._backend
        move, start, end = engine.move, engine.start_episodes, engine.end_rounds
        random_starts = engine.random_starts

        def record_start(batch: Any, idx: np.ndarray, *args: Any) -> None:
            start(batch, idx, *args)
            self.events.append(
                ("start", idx.copy(), batch.board[idx].copy(), batch.agent[idx].copy(),
                 batch.starter[idx].copy())
            )  # fmt: skip

        def record_random_starts(batch: Any, idx: np.ndarray) -> None:
            random_starts(batch, idx)  # their moves go through record_move
            self.events.append(("agents", idx.copy(), batch.agent[idx].copy()))  # after them

        def record_move(batch: Any, idx: np.ndarray, slots: np.ndarray) -> np.ndarray:
            self.events.append(("move", idx.copy(), np.asarray(slots).copy()))
            return move(batch, idx, slots)

        def record_end(batch: Any, idx: np.ndarray, out: Any) -> None:
            end(batch, idx, out)
            going = idx[~batch.done[idx]]
            self.events.append(("next_round", going.copy(), batch.board[going].copy()))

        engine.start_episodes, engine.random_starts = record_start, record_random_starts
        engine.move, engine.end_rounds = record_move, record_end
        random_scores = env._random_scores

        def record_random_scores(idx: np.ndarray) -> None:
            random_scores(idx)
            self.events.append(("scores", idx.copy(), env._batch.score[idx].copy()))

        env._random_scores = record_random_scores  # type: ignore[method-assign]

    def take(self) -> list[tuple[Any, ...]]:
        events, self.events = self.events, []
        return events


class Reference:
    """The same games, replayed with :class:`State` (one Python object per env)."""

    def __init__(self, n: int, target: int, reward: str, episode: str) -> None:
        self.states: list[State | None] = [None] * n
        self.agents = ["R"] * n
        self.target, self.reward_mode, self.episode = target, reward, episode

    def replay(self, events: list[tuple[Any, ...]], n: int) -> tuple[np.ndarray, np.ndarray]:
        rewards = np.zeros(n)
        done = np.zeros(n, dtype=bool)
        for event in events:
            if event[0] == "start":
                _, idx, boards, agents, starters = event
                for i, b, a, s in zip(idx, boards, agents, starters, strict=True):
                    assert 0 <= b < len(LAYOUTS), "an episode starts from a set-up"
                    self.states[i] = State.new_round(LAYOUTS[b], COLORS[s], target=self.target)
                    self.agents[i] = COLORS[a]
            elif event[0] == "move":
                _, idx, slots = event
                for i, slot in zip(idx, slots, strict=True):
                    state = self.states[i]
                    assert state is not None and not done[i]
                    self.states[i] = after = state.play(int(slot))  # raises if illegal
                    if after.round_over:
                        rewards[i] += self._round_end(i, after, done)
            elif event[0] == "agents":  # a random start gives the agent the side to move
                _, idx, agents = event
                for i, a in zip(idx, agents, strict=True):
                    self.agents[i] = COLORS[a]
            elif event[0] == "scores":  # a match that starts at a random score
                _, idx, scores = event
                for i, (r, b) in zip(idx, scores.tolist(), strict=True):
                    start = self.states[i]  # after its random moves, if it has any
                    assert start is not None and not start.round_over
                    self.states[i] = State(start.board, start.to_move, {"R": r, "B": b},
                                           self.target, start.starter)  # fmt: skip
            else:  # the next rounds of the matches that go on
                _, idx, boards = event
                for i, b in zip(idx, boards, strict=True):
                    self.states[i] = self.states[i].next_round(LAYOUTS[b])  # starting rule
        return rewards, done

    def _round_end(self, i: int, state: State, done: np.ndarray) -> float:
        agent = self.agents[i]
        strength = state.strength
        margin = strength[agent] - strength[other(agent)]
        reward = margin / MAX_ROUND_MARGIN if self.reward_mode == "round" else 0.0
        if self.episode == "round":
            done[i] = True
            return reward + (float(np.sign(margin)) if self.reward_mode == "match" else 0.0)
        if state.match_over:
            done[i] = True
            reward += 1.0 if state.winner == agent else -1.0
        return reward


def encode(encoding: str, state: State, agent: str) -> np.ndarray:
    return ENCODINGS[encoding].encode(state, agent)


def check_batch(
    num_envs: int,
    steps: int,
    seed: int,
    illegal_rate: float = 0.03,
    encoding: str = "slots",
    **kwargs: Any,
) -> int:
    """Drive the env with random actions and check every transition; return the env steps."""
    env = ButtonUpVectorEnv(num_envs, encoding=encoding, backend="numpy", **kwargs)
    recorder = Recorder(env)
    ref = Reference(num_envs, env.target, env.reward_mode, env.episode)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    ref.replay(recorder.take(), num_envs)
    actions_n = env.single_action_space.n
    for _ in range(steps):
        assert [s.legal_moves() for s in env.states()] == [s.legal_moves() for s in ref.states]
        assert env.states() == ref.states
        for i in range(num_envs):
            state, agent = ref.states[i], ref.agents[i]
            assert state.to_move == agent, "the env waits for the agent"
            assert np.array_equal(obs[i], encode(encoding, state, agent))
            slots = ENCODINGS[encoding].actions == NUM_SLOTS
            mask = legal_mask(state) if slots else ENCODINGS[encoding].mask(state)
            assert np.array_equal(info["action_mask"][i], mask.astype(np.int8))
        assert list(info["agent_color"]) == ref.agents
        mask = info["action_mask"].astype(bool)
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        wild = rng.random(num_envs) < illegal_rate
        actions[wild] = rng.integers(actions_n, size=int(wild.sum()))
        before = list(ref.states)
        obs, reward, terminated, truncated, info = env.step(actions)
        events = recorder.take()
        # the agents' moves first: the legal ones are the first "move" event
        illegal = ~mask[np.arange(num_envs), actions]
        assert np.array_equal(info["illegal_action"], illegal)
        expected_reward = np.where(illegal, -1.0, 0.0)
        expected_done = illegal.copy()
        end = next((k for k, e in enumerate(events) if e[0] == "start"), len(events))
        r, d = ref.replay(events[:end], num_envs)
        expected_reward += r
        expected_done |= d
        for i in np.flatnonzero(~illegal):
            slot = actions[i] if actions_n == NUM_SLOTS else before[i].legal_moves()[actions[i]]
            assert events[0][0] == "move" and i in events[0][1]
            assert events[0][2][list(events[0][1]).index(i)] == slot
        np.testing.assert_array_equal(reward, expected_reward)
        np.testing.assert_array_equal(terminated, expected_done)
        assert not truncated.any()
        if expected_done.any():
            assert np.array_equal(info["_final_obs"], expected_done)
            for i in np.flatnonzero(expected_done):
                final = encode(encoding, ref.states[i], ref.agents[i])
                assert np.array_equal(info["final_obs"][i], final)
        else:
            assert "final_obs" not in info
        ref.replay(events[end:], num_envs)  # the new episodes and their opening moves
    return num_envs * steps


CONFIGS = [
    dict(opponent="random", episode="round", reward="round", random_start=0.75),
    dict(opponent="random"),
    dict(
        opponent="greedy",
        episode="round",
        reward="round",
        encoding="afterstates",
        random_start=0.75,
    ),
    dict(opponent="perfect", reward="round"),
    dict(opponent="greedy", episode="round", reward="match", encoding="afterstates"),
    dict(opponent="random", episode="round", reward="round", encoding="ring", target=5),
    dict(opponent="perfect", agent_color="B", target=3),
    dict(opponent="margin", encoding="match-slots", target=4),
    dict(opponent="perfect", encoding="match-afterstates", reward="round", target=3),
]


@pytest.mark.parametrize(
    ("envs", "steps", "at_least"),
    [(32, 30, 6_500), pytest.param(64, 230, 100_000, marks=pytest.mark.slow)],
)
def test_every_transition_follows_the_rules(envs: int, steps: int, at_least: int) -> None:
    """Over 6,500 env steps (100,000 with -m slow) with random (sometimes illegal) actions,
    every position, score, starter, reward, termination, mask and observation is the rules
    engine's."""
    total = sum(check_batch(envs, steps, seed=k, **config) for k, config in enumerate(CONFIGS))
    assert total >= at_least


def test_illegal_action_raise_moves_nobody() -> None:
    env = ButtonUpVectorEnv(4, illegal_action="raise")
    _, info = env.reset(seed=1)
    before = env.states()
    actions = info["action_mask"].argmax(axis=1)
    actions[2] = int(np.flatnonzero(info["action_mask"][2] == 0)[0])
    with pytest.raises(ValueError, match=r"illegal action in env 2: slot \d"):
        env.step(actions)
    assert env.states() == before


class BreakingPolicy:
    """A batched policy opponent (``logits`` of observations in ``encoding``) whose
    ``moves``-th call raises ``error`` instead: Ctrl-C, onnxruntime failing, broken logits."""

    deterministic = True

    def __init__(self, error: BaseException, moves: int) -> None:
        self.encoding = ENCODINGS["slots"]
        self.error, self.moves, self.calls = error, moves, 0

    def logits(self, observations: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.calls == self.moves:
            raise self.error
        return np.zeros((len(observations), 9), dtype=np.float32)


HALF_PLAYED = (
    r"^the last {} stopped part-way with an exception, which left the game half-played; "
    r"call reset\(\) before {}$"
)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("[ONNXRuntimeError]")])
def test_a_step_the_opponent_breaks_off_leaves_the_batch_needing_reset(
    backend: str, error: BaseException
) -> None:
    """The agents' moves are made, the opponents' are not: neither step() nor get_state()
    goes on from that half-played batch, until reset() (or set_state) starts it again."""
    env = ButtonUpVectorEnv(4, opponent=BreakingPolicy(error, moves=2), backend=backend)
    _, info = env.reset(seed=0, options={"agent_color": "R", "first": "R"})
    saved = env.get_state()
    with pytest.raises(type(error)):
        for _ in range(10):
            _, _, _, _, info = env.step(info["action_mask"].argmax(axis=1))
    half_played = env.states()
    for actions in (info["action_mask"].argmax(axis=1), np.zeros(4, dtype=np.int64)):
        with pytest.raises(RuntimeError, match=HALF_PLAYED.format(r"step\(\)", r"step\(\)")):
            env.step(actions)
    with pytest.raises(RuntimeError, match=HALF_PLAYED.format(r"step\(\)", r"get_state\(\)")):
        env.get_state()
    assert env.states() == half_played
    env.set_state(saved)  # a whole state again
    _, info = env.reset(seed=1, options={"agent_color": "R", "first": "R"})
    env.step(info["action_mask"].argmax(axis=1))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_reset_the_opponent_breaks_off_leaves_the_batch_needing_reset(backend: str) -> None:
    env = ButtonUpVectorEnv(4, opponent=BreakingPolicy(KeyboardInterrupt(), 1), backend=backend)
    with pytest.raises(KeyboardInterrupt):
        env.reset(seed=0, options={"agent_color": "B", "first": "R"})  # the opponents open
    with pytest.raises(RuntimeError, match=HALF_PLAYED.format(r"reset\(\)", r"step\(\)")):
        env.step(np.zeros(4, dtype=np.int64))
    _, info = env.reset(seed=0)
    env.step(info["action_mask"].argmax(axis=1))


def test_an_illegal_action_refused_with_raise_breaks_nothing() -> None:
    env = ButtonUpVectorEnv(4, illegal_action="raise")
    _, info = env.reset(seed=1)
    actions = info["action_mask"].argmax(axis=1)
    bad = actions.copy()
    bad[2] = int(np.flatnonzero(info["action_mask"][2] == 0)[0])
    with pytest.raises(ValueError, match="illegal action in env 2"):
        env.step(bad)
    env.step(actions)


@pytest.mark.parametrize(
    "actions, message",
    [
        (np.zeros(3, dtype=np.int64), r"shape \(4,\)"),
        (np.zeros((4, 1), dtype=np.int64), r"shape \(4,\)"),
        (np.zeros(4, dtype=np.float32), "integer array"),
        (np.array([0, 1, 9, 2]), "action 9 of env 2 is out of range; actions are 0 to 8"),
        (np.array([0, -1, 0, 2]), "action -1 of env 1 is out of range"),
        ("0123", "integer array"),
    ],
)
def test_bad_actions(actions: Any, message: str) -> None:
    env = ButtonUpVectorEnv(4)
    env.reset(seed=0)
    before = env.states()
    with pytest.raises(ValueError, match=message):
        env.step(actions)
    assert env.states() == before


@pytest.mark.parametrize(
    "kwargs, named",
    [
        (dict(num_envs=0), "num_envs=0"),
        (dict(num_envs=2.5), "num_envs=2.5"),
        (dict(num_envs=True), "num_envs=True"),
        (dict(opponent="nobody"), "'nobody'"),
        (dict(opponent=3), "opponent 3"),
        (dict(agent_color="W"), "agent_color='W'"),
        (dict(target=0), "target=0"),
        (dict(reward="points"), "reward='points'"),
        (dict(episode="game"), "episode='game'"),
        (dict(illegal_action="ignore"), "illegal_action='ignore'"),
        (dict(encoding="pixels"), "encoding='pixels'"),
        (dict(render_mode="human"), "render_mode='human'"),
        (dict(random_start=1.5), "random_start=1.5"),
        (dict(random_start=0.5, agent_color="R"), "agent_color=None"),
        (dict(random_start=0.5, episode="round", agent_color="R"), "agent_color=None"),
        (dict(random_start_moves=7), "random_start_moves=7"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], named: str) -> None:
    kwargs = {"num_envs": 2, **kwargs}
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(".", r"\.")):
        ButtonUpVectorEnv(**kwargs)


def test_bad_reset_arguments() -> None:
    env = ButtonUpVectorEnv(2)
    with pytest.raises(ValueError, match="seed=-1"):
        env.reset(seed=-1)
    with pytest.warns(UserWarning, match="unknown reset option"):
        env.reset(options={"colour": "R"})
    with pytest.raises(ValueError, match="options\\['first'\\]='X'"):
        env.reset(options={"first": "X"})


def test_step_or_masks_before_reset() -> None:
    env = ButtonUpVectorEnv(2)
    for call in (lambda: env.step(np.zeros(2, dtype=np.int64)), env.action_masks, env.states):
        with pytest.raises(RuntimeError, match="reset"):
            call()


def rollout(env: ButtonUpVectorEnv, seed: int, steps: int = 40) -> list[np.ndarray]:
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(99)
    seen = [obs]
    for _ in range(steps):
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in info["action_mask"]])
        obs, reward, terminated, _, info = env.step(actions)
        seen += [obs, reward, terminated]
    return seen


@pytest.mark.parametrize("opponent", ["random", "greedy", "perfect", str(MODEL)])
def test_same_seed_same_games_other_seed_other_games(opponent: str) -> None:
    env = ButtonUpVectorEnv(16, opponent=opponent)
    first, again = rollout(env, 5), rollout(env, 5)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    fresh = rollout(ButtonUpVectorEnv(16, opponent=opponent), 5)
    assert all(np.array_equal(a, b) for a, b in zip(first, fresh, strict=True))
    other_seed = rollout(env, 6)
    assert not all(np.array_equal(a, b) for a, b in zip(first, other_seed, strict=True))


def opponent_moves(env: ButtonUpVectorEnv, steps: int = 60) -> list[tuple[State, int]]:
    """(position, slot) of every opponent move in ``steps`` steps of random agents (of a
    numpy env, whose moves go through its engine's ``move``; the compiled env equals it, see
    test_compiled.py)."""
    assert env.backend == "numpy"
    moves: list[tuple[State, int]] = []
    play = env._backend.move

    def spy(batch: Any, idx: np.ndarray, slots: np.ndarray) -> np.ndarray:
        states = env.states()
        for i, slot in zip(idx, slots, strict=True):
            if env._to_move[i] != env._agent[i]:
                moves.append((states[i], int(slot)))
        return play(batch, idx, slots)

    env._backend.move = spy
    rollout(env, 3, steps)
    return moves


def test_perfect_opponent_plays_only_the_best_moves_of_the_match() -> None:
    """In a match, ``perfect`` lifts a move of the best probability of winning the match, at
    the game's own score and starter; it breaks ties among them at random."""
    moves = opponent_moves(ButtonUpVectorEnv(32, opponent="perfect", backend="numpy", target=5))
    assert len(moves) > 1000
    assert len({s.score_pair for s, _ in moves}) > 5  # several scores, and both starters
    assert {s.starter for s, _ in moves} == {"R", "B"}
    tied = 0
    for state, slot in moves:
        best = best_moves(match_move_values(state))
        assert slot in best
        tied += len(best) > 1
    assert tied and len({m for s, m in moves if len(best_moves(match_move_values(s))) > 1}) > 1


@pytest.mark.parametrize(
    ("opponent", "episode"), [("margin", "match"), ("margin", "round"), ("perfect", "round")]
)
def test_the_margin_player_plays_only_the_best_round_margins(opponent: str, episode: str) -> None:
    """``margin`` plays every round for its largest margin; so does ``perfect`` in a
    one-round episode, which pays the round."""
    env = ButtonUpVectorEnv(32, opponent=opponent, backend="numpy", episode=episode)
    moves = opponent_moves(env)
    assert len(moves) > 1000
    for state, slot in moves:
        values = solver.move_values(state)
        assert values[slot] == max(values.values())
    # and it breaks ties among them at random
    tied = [
        (s, m)
        for s, m in moves
        if list(solver.move_values(s).values()).count(max(solver.move_values(s).values())) > 1
    ]
    assert len({m for _, m in tied}) > 1


def greedy_candidates(state: State) -> set[int]:
    """The moves GreedyBot chooses among (its docstring's rule, with the rules engine)."""
    scored = {}
    for slot in state.legal_moves():
        after = state.play(slot)
        board, _ = sow(state.board, slot)
        extra = not after.round_over and after.to_move == state.to_move
        scored[slot] = (extra, immediate_margin(board, state.to_move))
    best = max(scored.values())
    return {slot for slot, key in scored.items() if key == best}


def test_greedy_opponent_plays_like_the_greedy_bot() -> None:
    moves = opponent_moves(ButtonUpVectorEnv(32, opponent="greedy", backend="numpy"))
    assert len(moves) > 1000
    bot = GreedyBot(seed=0)
    for state, slot in moves:
        candidates = greedy_candidates(state)
        assert slot in candidates
        assert bot.act(state) in candidates  # the same rule as the bot's


def test_random_opponent_plays_every_legal_move() -> None:
    moves = opponent_moves(ButtonUpVectorEnv(32, opponent="random", backend="numpy"))
    firsts = [
        slot == state.legal_moves()[0] for state, slot in moves if len(state.legal_moves()) == 3
    ]
    assert 0.25 < np.mean(firsts) < 0.42  # a third, uniformly


@pytest.mark.parametrize("spec", ["buttonup-ppo", str(MODEL)])
def test_onnx_opponent_plays_like_the_loaded_policy(spec: str) -> None:
    moves = opponent_moves(ButtonUpVectorEnv(16, opponent=spec, backend="numpy"), steps=30)
    policy = buttonup_env.load_policy(MODEL)
    assert len(moves) > 200
    assert all(policy.act(state) == slot for state, slot in moves)


def test_tables_match_the_solver_and_the_rules() -> None:
    t = game_tables()
    assert len(t.boards) == 315_480
    rng = np.random.default_rng(0)
    for index in rng.integers(len(t.boards), size=400):
        board = t.board(int(index))
        assert t.index_of(board) == index
        legal = list(State(board, "R").legal_moves())  # the same slots for either mover
        assert t.legal_slots[index].tolist() == legal + [-1] * (3 - len(legal))
        for color in COLORS:
            state = State(board, color)
            if state.round_over:
                assert not t.legal[index].any()
                continue
            values = solver.move_values(state)
            mover = COLORS.index(color)
            assert {s: int(t.move_values[index, mover, s]) for s in values} == values
            best = [s for s in legal if values[s] == max(values.values())]
            slots, count = t.margin_choices[0][index, mover], t.margin_choices[1][index, mover]
            assert (slots.tolist(), int(count)) == (best + [-1] * (3 - len(best)), len(best))


def test_pool_opponents_are_drawn_per_episode(tmp_path: Path) -> None:
    import shutil

    shutil.copy(MODEL, tmp_path / "step_000000000.onnx")
    pool = OpponentPool(tmp_path, OpponentMix(snapshots=1, perfect=1, greedy=1, random=1))
    env = ButtonUpVectorEnv(64, opponent=pool, episode="round")
    rollout(env, 0, steps=30)
    drawn = set(env._opponent.tolist())
    assert drawn == {0, 1, 3, 4}  # the random, greedy and perfect bots, and the snapshot
    assert len(env._players) == 5  # the four bots (margin unused), then the snapshot


def pool_batch(folder: Path, num_envs: int = 32, prioritized: float = 0.0) -> ButtonUpVectorEnv:
    """A training-like batch: a pool of sampling snapshots and the bots, random starts."""
    mix = OpponentMix(snapshots=2, perfect=1, greedy=1, random=1, prioritized=prioritized)
    pool = OpponentPool(folder, mix, refresh_seconds=float("inf"))
    return ButtonUpVectorEnv(
        num_envs,
        opponent=pool,
        episode="round",
        reward="round",
        encoding="afterstates",
        random_start=0.5,
    )


def play(env: ButtonUpVectorEnv, obs: np.ndarray, rng: np.random.Generator, steps: int) -> list:
    seen = [obs]
    for _ in range(steps):
        masks = env.action_masks()
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, reward, terminated, _, info = env.step(actions)
        seen += [obs, reward, terminated, info["final_obs"][info["_final_obs"]]]
    return seen


@pytest.mark.parametrize("prioritized", [0.0, 3.0])
def test_a_restored_state_steps_like_the_original(tmp_path: Path, prioritized: float) -> None:
    """With prioritized self-play the learner's results against the snapshots are part of
    the state: they decide which snapshot plays next."""
    import json
    import shutil

    for step in (0, 1, 2):  # the same network under three names: snapshots that all sample
        shutil.copy(MODEL, tmp_path / f"step_{step:09d}.onnx")
    env = pool_batch(tmp_path, prioritized=prioritized)
    obs, _ = env.reset(seed=11)
    obs = play(env, obs, np.random.default_rng(1), 25)[-4]
    saved = json.loads(json.dumps(env.get_state()))  # it survives JSON
    positions = env.states()
    assert saved["snapshots"], "the snapshots played before the state was taken"
    assert saved["results"], "rounds against snapshots ended before the state was taken"
    rest = play(env, obs, np.random.default_rng(2), 40)

    again = pool_batch(tmp_path, prioritized=prioritized)
    again.set_state(saved)
    assert again.pool.results == saved["results"]
    np.testing.assert_array_equal(again.observe(), obs)
    assert again.states() == positions
    replay = play(again, again.observe(), np.random.default_rng(2), 40)
    assert len(replay) == len(rest)
    assert all(np.array_equal(a, b) for a, b in zip(rest, replay, strict=True))
    # and not by chance: going on without the saved generators plays other games
    other = pool_batch(tmp_path)
    other.reset(seed=12)
    drifted = play(other, other.observe(), np.random.default_rng(2), 40)
    assert not all(np.array_equal(a, b) for a, b in zip(rest, drifted, strict=True))


def test_the_batch_reports_every_round_against_a_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What prioritized self-play draws by: the pool hears of every finished round against
    each snapshot, scored 1 / 0.5 / 0 for the learner (no decay here, so the sums are exact)."""
    import shutil

    monkeypatch.setattr(OpponentPool, "RESULT_DECAY", 1.0)
    for step in (0, 1):
        shutil.copy(MODEL, tmp_path / f"step_{step:09d}.onnx")
    mix = OpponentMix(snapshots=1, perfect=0, greedy=0, random=0, newest=0.5, prioritized=1)
    pool = OpponentPool(tmp_path, mix, refresh_seconds=float("inf"))
    env = ButtonUpVectorEnv(16, opponent=pool, episode="round", reward="round")
    env.reset(seed=3)
    rng = np.random.default_rng(3)
    expected = {name: [0.0, 0.0] for name in ("step_000000000.onnx", "step_000000001.onnx")}
    for _ in range(60):
        names = [env._players[i].policy.path.name for i in env._opponent]
        masks = env.action_masks()
        _, reward, terminated, _, _ = env.step(
            np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        )
        for i in np.flatnonzero(terminated):
            expected[names[i]][0] += (np.sign(reward[i]) + 1) / 2
            expected[names[i]][1] += 1
    assert all(rounds > 20 for _, rounds in expected.values())
    assert set(pool.results) == set(expected)
    for name, (score, rounds) in expected.items():
        assert pool.results[name] == pytest.approx([score, rounds])


def test_set_state_refuses_a_state_of_another_batch(tmp_path: Path) -> None:
    import shutil

    shutil.copy(MODEL, tmp_path / "step_000000000.onnx")
    env = pool_batch(tmp_path)
    env.reset(seed=0)
    play(env, env.observe(), np.random.default_rng(0), 20)
    saved = env.get_state()
    with pytest.raises(ValueError, match="saved state is of 32 envs; this batch has 8"):
        pool_batch(tmp_path, num_envs=8).set_state(saved)
    (tmp_path / "step_000000000.onnx").rename(tmp_path / "gone.onnx")
    with pytest.raises(ValueError, match=r"snapshot step_000000000\.onnx is not in"):
        pool_batch(tmp_path).set_state(saved)
    with pytest.raises(RuntimeError, match="reset"):
        ButtonUpVectorEnv(2).get_state()


@pytest.fixture(scope="module")
def poisoned_batch(tmp_path_factory: pytest.TempPathFactory) -> tuple[ButtonUpVectorEnv, dict]:
    """A training-like batch (two snapshots and the bots, compiled) and a state of its games
    after a few steps, as JSON gives it back."""
    folder = tmp_path_factory.mktemp("pool")
    for step in (0, 1):
        shutil.copy(MODEL, folder / f"step_{step:09d}.onnx")
    env = pool_batch(folder, num_envs=4)
    env.reset(seed=5)
    rng = np.random.default_rng(5)
    for _ in range(12):
        env.step(np.array([rng.choice(np.flatnonzero(m)) for m in env.action_masks()]))
    state = json.loads(json.dumps(env.get_state()))
    assert state["snapshots"], "the snapshots played"
    return env, state


POISON = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-3, 40),
    st.sampled_from([10**9, 315_479, 315_480, 2**63 - 1, 2**63, -(2**63) - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.lists(st.integers(-2, 5), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
"""What a damaged or crafted state may hold in place of a value."""


def poisoned(data: st.DataObject, state: dict) -> dict:
    """``state`` with one array, one item of an array, or one other part replaced by
    poison."""
    state = copy.deepcopy(state)
    arrays = state["arrays"]
    key = data.draw(st.sampled_from([*ButtonUpVectorEnv.STATE_ARRAYS, *state]))
    if key not in arrays:
        state[key] = data.draw(POISON)
    elif data.draw(st.booleans()):  # the whole array
        arrays[key] = data.draw(st.one_of(POISON, st.lists(POISON, max_size=6)))
    else:  # one item, or one number of a row
        row = data.draw(st.integers(0, len(arrays[key]) - 1))
        if isinstance(arrays[key][row], list) and data.draw(st.booleans()):
            arrays[key][row][data.draw(st.integers(0, 1))] = data.draw(POISON)
        else:
            arrays[key][row] = data.draw(POISON)
    return state


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_poisoned_state_is_refused_in_one_sentence_or_played_on(
    data: st.DataObject, poisoned_batch: tuple[ButtonUpVectorEnv, dict]
) -> None:
    """Every array (and every other part) of a saved state poisoned in turn: ``set_state``
    refuses it in one sentence and leaves the batch as it was, or takes it and the batch
    steps on (a board or an opponent number the kernels cannot index would kill the
    process: the test would crash, not fail)."""
    env, saved = poisoned_batch
    env.set_state(saved)
    before = json.dumps(env.get_state())
    state = poisoned(data, saved)
    try:
        env.set_state(state)
    except ValueError as error:
        assert str(error) and "\n" not in str(error), repr(error)
        assert json.dumps(env.get_state()) == before, "a refused state changed the batch"
        return
    for _ in range(4):
        obs, reward, _, _, _ = env.step(env.action_masks().argmax(axis=1))
        assert np.isfinite(obs).all() and np.isfinite(reward).all()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_state_in_range_is_played_on(
    data: st.DataObject, poisoned_batch: tuple[ButtonUpVectorEnv, dict]
) -> None:
    """The other side of the checks: any boards (of rounds under way), colours, scores up to
    the largest a match reaches, and opponents the batch holds are taken, and the batch plays
    on from them, in every encoding the envs' policies read."""
    env, saved = poisoned_batch
    tables, n = env.tables, env.num_envs
    boards = np.flatnonzero(~tables.over)
    state = copy.deepcopy(saved)
    arrays = state["arrays"]
    colour = st.integers(0, 1)
    arrays["_board"] = [int(boards[data.draw(st.integers(0, len(boards) - 1))]) for _ in range(n)]
    arrays["_agent"] = arrays["_to_move"] = data.draw(st.lists(colour, min_size=n, max_size=n))
    arrays["_starter"] = data.draw(st.lists(colour, min_size=n, max_size=n))
    score = st.integers(0, env.target - 1 + MAX_ROUND_MARGIN)
    arrays["_score"] = [data.draw(st.lists(score, min_size=2, max_size=2)) for _ in range(n)]
    players = 3 + len(saved["snapshots"])
    arrays["_opponent"] = data.draw(st.lists(st.integers(0, players - 1), min_size=n, max_size=n))
    env.set_state(state)
    for _ in range(4):
        obs, reward, _, _, _ = env.step(env.action_masks().argmax(axis=1))
        assert np.isfinite(obs).all() and np.isfinite(reward).all()


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [  # the cases: a board or an opponent of 10**9 killed the process, a score played
        ("_board", 10**9, "_board[0] is 1000000000; it must be a board number from 0 to"),
        ("_opponent", 10**9, "_opponent[0] is 1000000000; it must be an opponent's number"),
        ("_score", [10**9, 0], "_score[0][0] is 1000000000; it must be a score from 0 to 32"),
    ],
)
def test_a_number_out_of_range_is_refused(
    key: str, value: object, says: str, poisoned_batch: tuple[ButtonUpVectorEnv, dict]
) -> None:
    env, saved = poisoned_batch
    state = copy.deepcopy(saved)
    state["arrays"][key][0] = value
    with pytest.raises(ValueError, match=f"^the saved state's {re.escape(says)}"):
        env.set_state(state)


def test_pure_self_play_pool_needs_a_snapshot(tmp_path: Path) -> None:
    pool = OpponentPool(tmp_path, OpponentMix(snapshots=1, perfect=0, greedy=0, random=0))
    env = ButtonUpVectorEnv(4, opponent=pool)
    with pytest.raises(ValueError, match="pure self-play needs the learner's first snapshot"):
        env.reset(seed=0)


def test_make_vec_returns_the_batched_env() -> None:
    envs = gym.make_vec(
        "ButtonUp-v1",
        num_envs=3,
        vectorization_mode="vector_entry_point",
        opponent="greedy",
        target=5,
    )
    assert isinstance(envs.unwrapped, ButtonUpVectorEnv)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert envs.num_envs == 3 and envs.unwrapped.target == 5
    obs, info = envs.reset(seed=0)
    assert obs.shape == (3, 247) and obs.dtype == np.float32
    assert info["action_mask"].shape == (3, 9) and info["action_mask"].dtype == np.int8
    assert envs.observation_space.contains(obs)
    np.testing.assert_array_equal(envs.unwrapped.action_masks(), info["action_mask"] == 1)
    # the vector entry point is also what make_vec gives when no mode is named
    assert isinstance(gym.make_vec("ButtonUp-v1", num_envs=2).unwrapped, ButtonUpVectorEnv)
    # and "sync" still gives single ButtonUp-v1 envs
    assert isinstance(
        gym.make_vec("ButtonUp-v1", 2, vectorization_mode="sync"), gym.vector.SyncVectorEnv
    )


def test_render_ansi() -> None:
    env = ButtonUpVectorEnv(2, render_mode="ansi")
    env.reset(seed=0)
    texts = env.render()
    assert len(texts) == 2 and all("slot 0" in t or "0" in t for t in texts)
    assert ButtonUpVectorEnv(2).render() is None


@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        ("bench_vector.py", ["--reference", "nowhere"], "no benchmarks/bench_vector.py there"),
        pytest.param(  # each refusal by one script here, by both with -m slow
            "bench_vector.py",
            ["--only-reference"],
            "--only-reference needs --reference DIR",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "bench_league.py",
            ["--reference", "nowhere"],
            "no benchmarks/bench_league.py there",
            marks=pytest.mark.slow,
        ),
        ("bench_league.py", ["--only-reference"], "--only-reference needs --reference DIR"),
    ],
)
def test_the_benchmarks_refuse_a_bad_reference(script: str, args: list[str], message: str) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert message in done.stderr.splitlines()[-1]  # argparse: the usage, then one error line


def test_the_match_perfect_bot_refuses_an_unsolved_target_in_a_batch() -> None:
    """Beyond the targets the match is solved for, the batched env and the arena refuse the
    match's perfect player in one sentence; the margin player plays on."""
    from buttonup_env.players.arena import make_player, play_pairs

    with pytest.raises(ValueError, match="solved for targets up to 100, not 101"):
        ButtonUpVectorEnv(2, opponent="perfect", target=101)
    ButtonUpVectorEnv(2, opponent="margin", target=101).reset(seed=0)
    ButtonUpVectorEnv(2, opponent="perfect", target=101, episode="round").reset(seed=0)
    with pytest.raises(ValueError, match=r"'perfect-0\.5' plays the match perfectly"):
        play_pairs([make_player("random"), make_player("perfect-0.5")], [(0, 1)], 1, target=150)
    (result,) = play_pairs([make_player("random"), make_player("margin")], [(0, 1)], 1, target=150)
    assert result.matches == 1


def test_random_scores_start_matches_at_every_score() -> None:
    """With random_score, a share of the matches start at a score drawn below the target,
    the starter holding the fewer points as the starting rule has it, and play on to the
    target by the rules; without it, at 0-0."""
    env = ButtonUpVectorEnv(4000, random_score=0.5, target=4, backend="numpy")
    env.reset(seed=7)
    scores = [tuple(s) for s in env._score.tolist()]
    at_zero = scores.count((0, 0)) / len(scores)
    assert 0.5 < at_zero < 0.56  # half drawn, 1 in 16 of those 0-0 too: 0.53
    assert set(scores) == {(r, b) for r in range(4) for b in range(4)}
    starter = env._batch.starter
    own, other = env._score[np.arange(4000), starter], env._score[np.arange(4000), 1 - starter]
    assert (own <= other).all()  # no match reaches a score where the leader starts
    for colour in (0, 1):  # each colour starts on equal points, and each starts behind
        assert ((own == other) & (starter == colour)).any()
        assert ((own < other) & (starter == colour)).any()
    assert all(s.score_pair in scores for s in env.states()[:50])
    check_batch(16, 40, seed=2, random_score=1.0, target=3)  # the rules engine agrees
    check_batch(16, 40, seed=3, random_score=0.5, random_start=0.5, target=4)  # and both
    for bad, says in ((1.5, "probability"), (0.3, "needs episode='match'")):
        with pytest.raises(ValueError, match=says):
            ButtonUpVectorEnv(2, random_score=bad, episode="round" if bad == 0.3 else "match")


@pytest.mark.parametrize("weight", [0.0, 0.25, 1.0])
def test_the_rounds_margins_weigh_what_training_says(weight: float) -> None:
    """With reward="round", every round pays its margin / 18 times round_reward_weight, and
    the match still pays +1 or -1: the same games, their rewards told apart by the margins."""
    envs = [
        ButtonUpVectorEnv(32, reward=reward, target=3, backend="numpy")
        for reward in ("round", "match")
    ]
    envs[0].round_reward_weight = weight
    outs = [env.reset(seed=5) for env in envs]
    rng = np.random.default_rng(5)
    margins = 0
    for _ in range(60):
        mask = outs[0][1]["action_mask"]
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        before = envs[0]._batch.agent.copy()
        steps = [env.step(actions) for env in envs]
        info = steps[0][4]
        expected = steps[1][1].copy()
        if "_round_points" in info:
            for i in np.flatnonzero(info["_round_points"]):
                r, b = info["round_points"][i]
                margin = (r - b) if before[i] == 0 else (b - r)
                expected[i] += weight * margin / 18
                margins += margin != 0
        np.testing.assert_allclose(steps[0][1], expected, rtol=1e-6, atol=1e-7)
        outs = [(s[0], s[4]) for s in steps]
    assert margins > 10


def test_truncated_rounds_end_an_episode_where_the_match_goes_on() -> None:
    """With truncate_rounds, a round that ends while its match goes on truncates the learner's
    episode: the final observation is the next round's first, the match carries on (its score
    kept), and only a match's end terminates."""
    env = ButtonUpVectorEnv(64, truncate_rounds=True, target=4, backend="numpy")
    plain = ButtonUpVectorEnv(64, target=4, backend="numpy")
    outs = [e.reset(seed=8) for e in (env, plain)]
    rng = np.random.default_rng(8)
    truncations = terminations = 0
    for _ in range(80):
        mask = outs[0][1]["action_mask"]
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        steps = [e.step(actions) for e in (env, plain)]
        (obs, reward, terminated, truncated, info), other = steps
        np.testing.assert_array_equal(obs, other[0])  # the same games
        np.testing.assert_array_equal(reward, other[1])
        np.testing.assert_array_equal(terminated, other[2])
        assert not (terminated & truncated).any() and not other[3].any()
        if "_round_points" in info:
            assert np.array_equal(truncated, info["_round_points"] & ~terminated)
        if truncated.any():
            np.testing.assert_array_equal(info["final_obs"][truncated], obs[truncated])
            assert np.array_equal(info["_final_obs"], terminated | truncated)
        truncations += int(truncated.sum())
        terminations += int(terminated.sum())
        outs = [(s[0], s[4]) for s in steps]
    assert truncations > 50 and terminations > 5
    with pytest.raises(ValueError, match="truncate_rounds=True"):
        ButtonUpVectorEnv(2, truncate_rounds=True, episode="round")
