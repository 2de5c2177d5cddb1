"""``ButtonUp-v1``: the checkers of Gymnasium and SB3, seeding, masks, rewards and arguments."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import buttonup_env
from buttonup_env.envs.env import ButtonUpEnv, make_opponent
from buttonup_env.envs.render import WINDOW_CAPTION, HumanRenderer
from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.envs.wrappers import ActionMaskObservation, RingObservation
from buttonup_env.game.rules import MAX_TARGET, State, next_starter, other
from buttonup_env.players.bots import GradedBot, GreedyBot, RandomBot
from buttonup_env.players.policy import PolicyError


@pytest.fixture
def fast_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """Human-mode frames without the 0.5 s pace of render_fps=2 (set before the env is made)."""
    monkeypatch.setitem(ButtonUpEnv.metadata, "render_fps", 1000)


@contextmanager
def warnings_as_errors(*allowed: str) -> Iterator[None]:
    """Turn every warning into an error, except those whose message matches ``allowed``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for message in allowed:
            warnings.filterwarnings("ignore", message=message)
        yield


def make(**kwargs: Any) -> ButtonUpEnv:
    return gym.make("ButtonUp-v1", **kwargs).unwrapped  # type: ignore[return-value]


def decode(obs: np.ndarray, agent: str) -> tuple[str, ...]:
    """The board an observation shows, in R/B/W letters."""
    letters = {0: agent, 1: other(agent), 2: "W"}  # type: ignore[arg-type]
    planes = obs[:243].reshape(9, 9, 3)
    board = []
    for slot in range(9):
        stack = ""
        for height in range(9):
            (on,) = np.flatnonzero(planes[slot, height]) if planes[slot, height].any() else (None,)
            if on is None:
                assert not planes[slot, height:].any(), "no gaps inside a stack"
                break
            assert planes[slot, height].sum() == 1
            stack += letters[int(on)]
        board.append(stack)
    return tuple(board)


def run_episode(
    env: gym.Env, seed: int, action_seed: int, options: dict[str, Any] | None = None
) -> dict[str, list[Any]]:
    """Play one episode with legal moves drawn from a seeded generator; return what was seen."""
    rng = np.random.default_rng(action_seed)
    obs, info = env.reset(seed=seed, options=options)
    seen: dict[str, list[Any]] = {
        "obs": [obs],
        "rewards": [],
        "opponent_moves": [info["opponent_moves"]],
        "masks": [info["action_mask"]],
        "infos": [info],
        "agent_color": [info["agent_color"]],
        "terminated": [],
    }
    while True:
        legal = np.flatnonzero(info["action_mask"])
        action = int(rng.choice(legal))
        obs, reward, terminated, truncated, info = env.step(action)
        assert not truncated
        assert "illegal_action" not in info
        seen["obs"].append(obs)
        seen["rewards"].append(reward)
        seen["opponent_moves"].append(info["opponent_moves"])
        seen["masks"].append(info["action_mask"])
        seen["infos"].append(info)
        seen["terminated"].append(terminated)
        if terminated:
            return seen


# --- the checkers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"render_mode": "human"},
        {"render_mode": "ansi"},
        {"render_mode": "rgb_array"},
        {"reward": "round", "episode": "round", "opponent": "greedy"},
        {"opponent": "perfect", "agent_color": "B", "target": 3},
    ],
)
def test_gymnasium_check_env(kwargs: dict[str, Any], fast_frames: None) -> None:
    """With its render checks: every run also makes the env in each declared render mode."""
    env = make(**kwargs)
    with warnings_as_errors():
        gym_check_env(env)
    env.close()


def test_gymnasium_check_env_human_without_pygame(
    fast_frames: None, no_pygame: None, capsys: pytest.CaptureFixture[str]
) -> None:
    env = make(render_mode="human")
    with warnings_as_errors():
        gym_check_env(env)
    assert "Button Up!  Red 0 - 0 Black" in capsys.readouterr().out


def test_sb3_check_env() -> None:
    with warnings_as_errors():
        sb3_check_env(make(), warn=True)
        sb3_check_env(make(reward="round", episode="round"), warn=True)


def test_make_in_a_fresh_process() -> None:
    script = textwrap.dedent(
        """
        import sys
        import gymnasium
        assert "buttonup_env" not in sys.modules
        gymnasium.make("buttonup_env:ButtonUp-v1", render_mode="human")
        assert "pygame" not in sys.modules, "pygame is imported on the first frame only"
        env = gymnasium.make("buttonup_env:ButtonUp-v1", opponent="greedy")
        obs, info = env.reset(seed=0)
        assert obs.shape == (247,), obs.shape
        assert info["action_mask"].any()
        env.step(int(info["action_mask"].argmax()))
        assert "ButtonUp-v1" in gymnasium.registry
        print("ok", type(env.unwrapped).__name__)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok ButtonUpEnv"


def test_registered_on_import() -> None:
    for version in ("v1", "v0"):
        assert f"ButtonUp-{version}" in gym.registry
        assert gym.spec(f"ButtonUp-{version}").entry_point == "buttonup_env.envs.env:ButtonUpEnv"
        assert isinstance(gym.make(f"ButtonUp-{version}").unwrapped, buttonup_env.ButtonUpEnv)


def test_spaces() -> None:
    env = make()
    assert env.action_space == gym.spaces.Discrete(9)
    assert env.observation_space.shape == (247,)
    assert env.observation_space.dtype == np.float32
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32
    assert env.observation_space.contains(obs)


# --- seeding ------------------------------------------------------------------------------------


@pytest.mark.parametrize("opponent", ["random", "greedy", "perfect"])
def test_same_seed_same_trajectory(opponent: str) -> None:
    runs = [
        run_episode(make(opponent=opponent, target=8), seed=123, action_seed=5) for _ in range(2)
    ]
    a, b = runs
    assert len(a["obs"]) == len(b["obs"])
    for x, y in zip(a["obs"], b["obs"], strict=True):
        assert np.array_equal(x, y)
    assert a["rewards"] == b["rewards"]
    assert a["opponent_moves"] == b["opponent_moves"]
    assert a["agent_color"] == b["agent_color"]
    assert [i["state"] for i in a["infos"]] == [i["state"] for i in b["infos"]]
    other_seed = run_episode(make(opponent=opponent, target=8), seed=124, action_seed=5)
    assert [i["state"] for i in other_seed["infos"]] != [i["state"] for i in a["infos"]]


def test_reset_with_the_same_seed_on_one_env() -> None:
    env = make(opponent="random")
    first = run_episode(env, seed=77, action_seed=1)
    run_episode(env, seed=78, action_seed=2)
    again = run_episode(env, seed=77, action_seed=1)
    assert first["rewards"] == again["rewards"]
    assert first["opponent_moves"] == again["opponent_moves"]
    assert [i["state"] for i in first["infos"]] == [i["state"] for i in again["infos"]]


# --- masks --------------------------------------------------------------------------------------


def test_mask_at_reset() -> None:
    env = make()
    for seed in range(200):
        obs, info = env.reset(seed=seed)
        mask = info["action_mask"]
        assert mask.dtype == np.int8
        assert mask.shape == (9,)
        assert mask.any()
        assert np.array_equal(mask, env.action_masks().astype(np.int8))
        assert env.action_masks().dtype == bool
        state = info["state"]
        assert tuple(np.flatnonzero(mask)) == state.legal_moves()
        assert state.to_move == info["agent_color"]
        assert state.moves_played == len(info["opponent_moves"])
        assert decode(obs, info["agent_color"]) == state.board


def test_mask_and_observation_along_episodes() -> None:
    env = make(opponent="greedy", target=6)
    for seed in range(5):
        seen = run_episode(env, seed=seed, action_seed=seed)
        for obs, mask, info in zip(
            seen["obs"][:-1], seen["masks"][:-1], seen["infos"][:-1], strict=True
        ):
            state = info["state"]
            assert tuple(np.flatnonzero(mask)) == state.legal_moves()
            assert decode(obs, info["agent_color"]) == state.board
            agent = info["agent_color"]
            score = state.score
            assert obs[243] == pytest.approx(min(score[agent] / 6, 1))
            assert obs[244] == pytest.approx(min(score[other(agent)] / 6, 1))
            assert obs[245] == pytest.approx(1 / 6)


def test_mask_after_the_end_is_all_ones() -> None:
    env = make(target=3)
    seen = run_episode(env, seed=3, action_seed=3)
    assert seen["masks"][-1].dtype == np.int8
    assert seen["masks"][-1].tolist() == [1] * 9
    assert env.action_masks().all()
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    _, info = env.reset(seed=4)
    assert tuple(np.flatnonzero(info["action_mask"])) == info["state"].legal_moves()
    assert not env.action_masks().all()  # at most three stacks hold a white button


def test_action_masks_before_reset() -> None:
    with pytest.raises(RuntimeError, match="reset"):
        make().action_masks()
    with pytest.raises(RuntimeError, match="reset"):
        make().step(0)


# --- illegal actions ----------------------------------------------------------------------------


def illegal_actions(state: State) -> list[Any]:
    """The slots of ``Discrete(9)`` that are not legal moves in ``state`` (empty, or no white)."""
    legal = state.legal_moves()
    return [s for s in range(9) if s not in legal]


def test_illegal_action_ends_the_episode() -> None:
    env = make()
    _, info = env.reset(seed=0)
    for action in illegal_actions(info["state"]):
        _, info = env.reset(seed=0)
        before = info["state"]
        obs, reward, terminated, truncated, info = env.step(action)
        assert reward == -1.0
        assert terminated and not truncated
        assert info["illegal_action"] is True
        assert info["state"] == before  # the action is not played
        assert info["action_mask"].tolist() == [1] * 9
        assert env.observation_space.contains(obs)


OUTSIDE_THE_SPACE = {
    # an action that is no element of Discrete(9): -> what the message shows
    "12": (12, "12"),
    "9": (9, "9"),
    "-1": (-1, "-1"),
    "a huge int": (10**30, "1000000000000000000000000000000"),
    "3.7": (3.7, "3.7"),
    "a float slot": (3.0, "3.0"),
    "float32": (np.float32(2), "np.float32(2.0)"),
    "str": ("3", "'3'"),
    "bool": (True, "True"),
    "None": (None, "None"),
    "a list": ([3], "[3]"),
    "a 1-d array": (np.array([3]), "array([3])"),
    "a float array": (np.array(3.0), "array(3.)"),
}


@pytest.mark.parametrize("illegal_action", ["end", "raise"])
@pytest.mark.parametrize("case", list(OUTSIDE_THE_SPACE))
def test_an_action_outside_the_action_space_raises(case: str, illegal_action: str) -> None:
    """Not a move at all: ValueError in every mode, like the batched env; the episode goes on."""
    action, shown = OUTSIDE_THE_SPACE[case]
    env = make(illegal_action=illegal_action, agent_color="R")
    _, info = env.reset(seed=0, options={"first": "R"})
    assert not env.action_space.contains(action) or isinstance(action, bool)
    with pytest.raises(ValueError, match="is not in the action space Discrete") as error:
        env.step(action)
    assert f"action {shown} is not" in str(error.value)
    assert env.state == info["state"]
    _, _, _, _, info = env.step(info["state"].legal_moves()[0])  # the episode goes on
    assert "illegal_action" not in info


@pytest.mark.parametrize("case", ["12", "-1", "3.7", "str"])
def test_the_batched_env_refuses_the_same_actions(case: str) -> None:
    action, _ = OUTSIDE_THE_SPACE[case]
    batch = ButtonUpVectorEnv(1)
    batch.reset(seed=0)
    with pytest.raises(ValueError):
        batch.step(np.array([action]))


def test_a_zero_dimensional_integer_array_is_its_slot() -> None:
    """Discrete(9).contains takes np.array(3); the env plays it as slot 3."""
    env, plain = make(agent_color="R"), make(agent_color="R")
    _, info = env.reset(seed=0, options={"first": "R"})
    plain.reset(seed=0, options={"first": "R"})
    slot = info["state"].legal_moves()[0]
    assert env.action_space.contains(np.array(slot))
    got = env.step(np.array(slot))
    expected = plain.step(slot)
    assert "illegal_action" not in got[4]
    assert got[4]["state"] == expected[4]["state"] and got[1] == expected[1]


def test_legal_step_has_no_illegal_flag() -> None:
    env = make()
    _, info = env.reset(seed=0)
    _, _, _, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    assert "illegal_action" not in info


def test_illegal_action_raise() -> None:
    env = make(illegal_action="raise")
    _, info = env.reset(seed=1)
    state = info["state"]
    bad = illegal_actions(state)[0]
    with pytest.raises(ValueError, match=f"slot {bad}"):
        env.step(bad)
    # nothing happened: the episode goes on from the same position
    assert env.state == state
    legal = state.legal_moves()
    env.step(legal[0])


def test_numpy_action() -> None:
    env = make()
    _, info = env.reset(seed=2)
    action = np.int64(np.flatnonzero(info["action_mask"])[0])
    _, _, _, _, info = env.step(action)
    assert "illegal_action" not in info


# --- rewards ------------------------------------------------------------------------------------


def margin(points: dict[str, int], agent: str) -> int:
    return points[agent] - points[other(agent)]  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(8))
def test_round_reward_round_episode(seed: int) -> None:
    env = make(reward="round", episode="round", opponent="greedy")
    seen = run_episode(env, seed=seed, action_seed=seed)
    final_info = seen["infos"][-1]
    final = final_info["state"]
    assert final.round_over
    agent = final_info["agent_color"]
    expected = margin(final.round_points, agent) / 18
    strength = final.strength
    assert expected == (strength[agent] - strength[other(agent)]) / 18
    assert all(r == 0 for r in seen["rewards"][:-1])
    assert seen["rewards"][-1] == pytest.approx(expected)
    assert sum(seen["rewards"]) == pytest.approx(expected)
    assert final_info["round_points"] == final.round_points


@pytest.mark.parametrize("seed", range(8))
def test_match_reward_round_episode(seed: int) -> None:
    env = make(reward="match", episode="round")
    seen = run_episode(env, seed=seed, action_seed=seed)
    final_info = seen["infos"][-1]
    expected = np.sign(margin(final_info["state"].round_points, final_info["agent_color"]))
    assert seen["rewards"][:-1] == [0.0] * (len(seen["rewards"]) - 1)
    assert seen["rewards"][-1] == expected


@pytest.mark.parametrize("seed", range(6))
def test_match_reward(seed: int) -> None:
    env = make(reward="match", target=10)
    seen = run_episode(env, seed=seed, action_seed=seed)
    final_info = seen["infos"][-1]
    final = final_info["state"]
    assert final.match_over
    won = final.winner == final_info["agent_color"]
    assert seen["rewards"][-1] == (1.0 if won else -1.0)
    assert all(r == 0 for r in seen["rewards"][:-1])
    assert seen["terminated"] == [False] * (len(seen["terminated"]) - 1) + [True]


@pytest.mark.parametrize("seed", range(6))
def test_round_reward_over_a_match(seed: int) -> None:
    env = make(reward="round", target=10, opponent="greedy")
    seen = run_episode(env, seed=seed, action_seed=seed)
    agent = seen["agent_color"][0]
    rounds = 0
    for reward, info, terminated in zip(
        seen["rewards"], seen["infos"][1:], seen["terminated"], strict=True
    ):
        if "round_points" not in info:
            assert reward == 0
            continue
        rounds += 1
        expected = margin(info["round_points"], agent) / 18
        if terminated:
            expected += 1.0 if info["state"].winner == agent else -1.0
        assert reward == pytest.approx(expected)
    final = seen["infos"][-1]["state"]
    assert rounds >= 1
    assert sum(p for p in final.score.values()) > 0


def test_score_carries_over_rounds_in_a_match() -> None:
    env = make(target=12, agent_color="R")
    seen = run_episode(env, seed=10, action_seed=10)
    score = {"R": 0, "B": 0}
    for info in seen["infos"][1:]:
        if "round_points" in info:
            score = {c: score[c] + info["round_points"][c] for c in score}
            assert info["state"].score == score
    assert max(score.values()) >= 12


@pytest.mark.parametrize("seed", range(4))
def test_later_rounds_follow_the_starting_rule(seed: int) -> None:
    env = make(target=20, opponent="greedy")
    seen = run_episode(env, seed=seed, action_seed=seed)
    previous = seen["infos"][0]["state"]
    new_rounds = 0
    for info, terminated in zip(seen["infos"][1:], seen["terminated"], strict=True):
        state = info["state"]
        if "round_points" in info and not terminated:
            new_rounds += 1
            assert state.starter == next_starter(state.score, previous.starter)
            assert state.moves_played <= 3  # the opponent's opening moves, if it starts
            if state.starter == info["agent_color"]:
                assert state.moves_played == 0
        previous = state
    assert new_rounds >= 1


# --- colours, opponents, options ----------------------------------------------------------------


def test_agent_color_fixed_or_drawn() -> None:
    for color in ("R", "B"):
        env = make(agent_color=color)
        for seed in range(10):
            _, info = env.reset(seed=seed)
            assert info["agent_color"] == env.agent_color == color
            assert info["state"].to_move == color
    env = make()
    drawn = {env.reset(seed=seed)[1]["agent_color"] for seed in range(30)}
    assert drawn == {"R", "B"}
    starters = {env.reset(seed=seed)[1]["state"].starter for seed in range(30)}
    assert starters == {"R", "B"}


def test_reset_options() -> None:
    env = make(agent_color="R")
    for seed in range(10):
        _, info = env.reset(seed=seed, options={"agent_color": "B", "first": "R"})
        state = info["state"]
        assert info["agent_color"] == env.agent_color == "B"
        assert state.starter == "R"
        assert len(info["opponent_moves"]) >= 1  # Red, the opponent, moved first
        assert state.to_move == "B"
    for seed in range(10):
        _, info = env.reset(seed=seed, options={"first": "R"})
        assert info["agent_color"] == "R"  # the colour option held for one episode only
        assert info["state"].starter == "R"
        assert info["opponent_moves"] == []
        assert info["state"].moves_played == 0
    _, info = env.reset(seed=0, options={"first": "B"})
    assert info["state"].starter == "B"
    assert len(info["opponent_moves"]) >= 1
    with pytest.warns(UserWarning, match=r"unknown reset option\(s\) \['colour'\] ignored"):
        _, info = env.reset(seed=0, options={"colour": "B"})
    assert info["agent_color"] == "R"  # the unknown key changed nothing
    with pytest.raises(ValueError, match="'G'"):
        env.reset(options={"agent_color": "G"})
    with pytest.raises(ValueError, match="'X'"):
        env.reset(options={"first": "X"})


BAD_OPTIONS = {
    # reset(options=...) -> what the one-sentence ValueError names
    "a string": ("R", "options='R' is not allowed; reset options are a dict"),
    "a list of pairs": ([("first", "R")], "options=[('first', 'R')] is not allowed"),
    "a number": (3, "options=3 is not allowed"),
    "a list as a colour": ({"first": ["R"]}, "options['first']=['R'] is not allowed"),
    "a 0-d array as a colour": ({"agent_color": np.array("R")}, "options['agent_color']=array"),
    "a lower-case colour": ({"first": "r"}, "options['first']='r' is not allowed; use one of"),
    "a long string": ({"first": "R" * 1000}, "options['first']='RRRR"),
}


@pytest.mark.parametrize("env_kind", ["single", "batched"])
@pytest.mark.parametrize("case", list(BAD_OPTIONS))
def test_bad_reset_options_get_one_sentence(case: str, env_kind: str) -> None:
    options, message = BAD_OPTIONS[case]
    env = make() if env_kind == "single" else ButtonUpVectorEnv(2)
    with pytest.raises(ValueError) as error:
        env.reset(seed=0, options=options)
    text = str(error.value)
    assert message in text and "\n" not in text and len(text) < 200, text


@pytest.mark.parametrize("env_kind", ["single", "batched", "pettingzoo"])
def test_unknown_reset_options_are_ignored_with_one_warning_in_every_env(env_kind: str) -> None:
    """One rule for the three envs (buttonup_env.envs.interface.reset_options): a key that is no
    option is named in a warning, with the allowed ones, and changes nothing."""
    if env_kind == "pettingzoo":
        pytest.importorskip("pettingzoo")
        from buttonup_env.envs.pettingzoo import ButtonUpAEC

        env: Any = ButtonUpAEC()
    else:
        env = make(agent_color="R") if env_kind == "single" else ButtonUpVectorEnv(2)

    def start() -> Any:  # the position that the seeded reset gives
        if env_kind == "pettingzoo":
            return env.position
        return env.states()[0] if env_kind == "batched" else env.unwrapped.state

    env.reset(seed=3)
    expected = start()
    with pytest.warns(UserWarning) as caught:
        env.reset(seed=3, options={1: "R", "x": "B", "first": None})
    (warning,) = caught
    text = str(warning.message)
    assert text.startswith("unknown reset option(s) ['x', 1] ignored; allowed: ")
    assert "'first'" in text and "\n" not in text
    assert start() == expected


@pytest.mark.parametrize("target", [MAX_TARGET + 1, 10**30, 10**400])
def test_a_target_beyond_the_cap_is_refused_in_one_sentence(target: int) -> None:
    for make_env in (
        lambda: ButtonUpEnv(target=target),
        lambda: ButtonUpVectorEnv(2, target=target),
    ):
        with pytest.raises(ValueError, match=f"from 1 to {MAX_TARGET}") as error:
            make_env()
        assert len(str(error.value)) < 120
    env = ButtonUpEnv(target=MAX_TARGET, agent_color="R")  # the cap itself is a match
    obs, info = env.reset(seed=0)
    assert info["state"].target == MAX_TARGET and obs[245] == pytest.approx(1 / MAX_TARGET)


class RecordingPlayer:
    """Plays the lowest legal slot and remembers what it saw."""

    def __init__(self) -> None:
        self.seen: list[State] = []
        self.rngs: list[np.random.Generator] = []

    def reset(self, rng: np.random.Generator) -> None:
        self.rngs.append(rng)

    def act(self, state: State) -> int:
        self.seen.append(state)
        return state.legal_moves()[0]


def test_opponent_object() -> None:
    player = RecordingPlayer()
    env = make(opponent=player, agent_color="B")
    seen = run_episode(env, seed=0, action_seed=0, options={"first": "R"})
    assert len(player.rngs) == 1
    assert player.rngs[0] is env.np_random
    assert player.seen
    assert all(state.to_move == "R" for state in player.seen)
    moves = [m for ms in seen["opponent_moves"] for m in ms]
    assert moves == [state.legal_moves()[0] for state in player.seen]


def test_object_without_reset_is_fine() -> None:
    class Lowest:
        def act(self, state: State) -> int:
            return state.legal_moves()[0]

    run_episode(make(opponent=Lowest(), target=3), seed=0, action_seed=0)


def test_opponent_playing_an_illegal_move() -> None:
    class Cheat:
        def act(self, state: State) -> int:
            return next(s for s in range(9) if s not in state.legal_moves())

    env = make(opponent=Cheat(), agent_color="B")
    with pytest.raises(ValueError, match="illegal move"):
        env.reset(seed=0, options={"first": "R"})


class Breaking:
    """An opponent that plays its lowest legal slot until its ``moves``-th move, which raises
    ``error`` instead: Ctrl-C, onnxruntime failing, a policy whose logits broke."""

    def __init__(self, error: BaseException, moves: int) -> None:
        self.error, self.moves, self.calls = error, moves, 0

    def act(self, state: State) -> int:
        self.calls += 1
        if self.calls == self.moves:
            raise self.error
        return state.legal_moves()[0]


BREAKS = {
    "Ctrl-C": KeyboardInterrupt(),
    "an onnxruntime error": RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION"),
    "a PolicyError": PolicyError("p.onnx gave logits that are not finite"),
}
HALF_PLAYED = (
    r"^the last {} stopped part-way with an exception, which left the game half-played; "
    r"call reset\(\) before step\(\)$"
)


@pytest.mark.parametrize("error", list(BREAKS))
def test_a_step_the_opponent_breaks_off_leaves_the_env_needing_reset(error: str) -> None:
    """The agent's move is made, the opponent's is not: no later step() is taken for either,
    until reset() starts a new game."""
    env = gym.make("ButtonUp-v1", opponent=Breaking(BREAKS[error], moves=3), agent_color="R")
    _, info = env.reset(seed=0, options={"first": "R"})
    with pytest.raises(type(BREAKS[error])):
        for _ in range(20):
            _, _, _, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    half_played = env.unwrapped.state
    assert half_played.to_move == "B" and half_played.legal_moves()  # the opponent's turn
    for action in range(9):
        with pytest.raises(RuntimeError, match=HALF_PLAYED.format(r"step\(\)")):
            env.step(action)
    assert env.unwrapped.state is half_played
    _, info = env.reset(seed=1)  # a new game: the opponent plays again
    env.step(int(np.flatnonzero(info["action_mask"])[0]))


def test_a_reset_the_opponent_breaks_off_leaves_the_env_needing_reset() -> None:
    env = make(opponent=Breaking(KeyboardInterrupt(), moves=1), agent_color="B")
    with pytest.raises(KeyboardInterrupt):
        env.reset(seed=0, options={"first": "R"})  # the opponent opens
    with pytest.raises(RuntimeError, match=HALF_PLAYED.format(r"reset\(\)")):
        env.step(0)
    _, info = env.reset(seed=0, options={"first": "R"})
    env.step(int(np.flatnonzero(info["action_mask"])[0]))


def test_an_illegal_action_refused_with_raise_breaks_nothing() -> None:
    """illegal_action="raise" refuses the action before anything moves: the game goes on."""
    env = make(illegal_action="raise", agent_color="R")
    _, info = env.reset(seed=0, options={"first": "R"})
    with pytest.raises(ValueError, match="illegal action"):
        env.step(int(np.flatnonzero(info["action_mask"] == 0)[0]))
    env.step(int(np.flatnonzero(info["action_mask"])[0]))


def test_an_opponent_may_answer_with_a_0d_array() -> None:
    """A 0-d integer array is a slot, for the opponent's act() as for step()."""
    as_array = make(opponent=Cheating(lambda state: np.array(state.legal_moves()[-1])), target=3)
    as_int = make(opponent=Cheating(lambda state: state.legal_moves()[-1]), target=3)
    seen = run_episode(as_array, seed=0, action_seed=0)["opponent_moves"]
    assert seen == run_episode(as_int, seed=0, action_seed=0)["opponent_moves"] and any(seen)
    with pytest.raises(ValueError, match=r"made an illegal move: slot array\(\[1, 2\]\) does"):
        make(opponent=Cheating(lambda state: np.array([1, 2])), agent_color="B").reset(
            seed=0, options={"first": "R"}
        )


class Cheating:
    """An opponent whose answer is ``move(state)``, whatever it is."""

    def __init__(self, move: Any) -> None:
        self.move = move

    def act(self, state: State) -> object:
        return self.move(state)


@pytest.mark.parametrize("mode", [1, 2.5, b"ansi", ["ansi"]])
def test_gymnasium_make_refuses_a_render_mode_of_another_type_in_one_sentence(mode: Any) -> None:
    """Gymnasium's make() calls .endswith on an unlisted render mode: the env's own check
    speaks first."""
    with pytest.raises(ValueError, match=r"^render_mode=.* is not allowed; use one of None, "):
        gym.make("ButtonUp-v1", render_mode=mode)


def test_set_opponent_between_episodes() -> None:
    env = make(agent_color="B")
    env.reset(seed=0)
    player = RecordingPlayer()
    before = env.opponent
    env.set_opponent(player)
    assert env.opponent is before  # the episode under way keeps its opponent
    run_episode(env, seed=1, action_seed=1, options={"first": "R"})
    assert env.opponent is player
    assert player.seen
    env.set_opponent("greedy")
    env.reset(seed=2)
    assert isinstance(env.opponent, GreedyBot)
    calls = len(player.seen)
    run_episode(env, seed=1, action_seed=1, options={"first": "R"})
    assert len(player.seen) == calls
    with pytest.raises(ValueError, match="42"):
        env.set_opponent(42)  # type: ignore[arg-type]


def test_opponent_by_name() -> None:
    assert isinstance(make(opponent="random").opponent, RandomBot)
    assert isinstance(make(opponent="greedy").opponent, GreedyBot)
    graded = make(opponent="perfect-0.3").opponent
    assert isinstance(graded, GradedBot) and graded.p == 0.3
    with pytest.raises(ValueError, match="'perfect-x' is not a graded bot"):
        make(opponent="perfect-x")


def test_make_opponent_seeds_a_bots_choices() -> None:
    state = State.from_notation("B W W B B R W R R", "R")
    one, again, other_ = (make_opponent("random", seed=s) for s in (3, 3, 4))
    choices = [one.act(state) for _ in range(20)]
    assert (
        choices == [again.act(state) for _ in range(20)] != [other_.act(state) for _ in range(20)]
    )


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"reward": "x"}, "reward='x'"),
        ({"episode": "game"}, "episode='game'"),
        ({"target": 0}, "target=0"),
        ({"target": -3}, "target=-3"),
        ({"target": 2.5}, "target=2.5"),
        ({"target": True}, "target=True"),
        ({"agent_color": "G"}, "agent_color='G'"),
        ({"illegal_action": "ignore"}, "illegal_action='ignore'"),
        ({"render_mode": "window"}, "render_mode='window'"),
        ({"opponent": "nonsense"}, "'nonsense'"),
        ({"opponent": 42}, "42"),
        ({"opponent": None}, "None"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("(", r"\(")) as error:
        ButtonUpEnv(**kwargs)
    assert "use" in str(error.value)  # the message says what to do instead


# --- rendering ----------------------------------------------------------------------------------


def test_render_ansi() -> None:
    env = make(render_mode="ansi", agent_color="R")
    _, info = env.reset(seed=0)
    text = env.render()
    assert isinstance(text, str)
    for slot in range(9):
        assert f"slot {slot}" in text
    assert "0 - 0" in text
    assert "(you)" in text
    state = info["state"]
    for slot, stack in enumerate(state.board):
        assert f"slot {slot}: {stack or '.'}" in text


def test_render_ansi_shows_the_score() -> None:
    env = make(render_mode="ansi", target=30)
    _, info = env.reset(seed=2)
    while not any(info["state"].score.values()):
        _, _, terminated, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        assert not terminated
    score = info["state"].score
    text = env.render()
    assert f"{score['R']} - {score['B']}" in text
    assert "0 - 0" not in text
    assert "target 30" in text


def test_render_rgb_array() -> None:
    env = make(render_mode="rgb_array")
    env.reset(seed=0)
    image = env.render()
    assert isinstance(image, np.ndarray)
    assert image.ndim == 3 and image.shape[2] == 3
    assert image.shape[0] > 50 and image.shape[1] > 50
    assert image.dtype == np.uint8
    colours = np.unique(image.reshape(-1, 3), axis=0)
    assert len(colours) > 5
    env.step(int(env.action_masks().argmax()))
    assert not np.array_equal(env.render(), image)


def test_render_without_mode() -> None:
    env = make()
    env.reset(seed=0)
    assert env.render() is None


def test_render_modes_are_declared() -> None:
    assert ButtonUpEnv.metadata["render_modes"] == ["human", "ansi", "rgb_array"]
    assert make(render_mode="human").render_mode == "human"


def window_pixels() -> np.ndarray:
    """What the window shows, as an (height, width, 3) uint8 picture."""
    import pygame

    return pygame.surfarray.array3d(pygame.display.get_surface()).transpose(1, 0, 2)


def twin_episode(human: ButtonUpEnv, twin: ButtonUpEnv, seed: int) -> Iterator[None]:
    """Play the same episode in both envs (legal moves from a seeded generator); yield after
    the reset and after every step, when both show the same position."""
    _, info = human.reset(seed=seed)
    twin.reset(seed=seed)
    yield
    rng = np.random.default_rng(seed)
    terminated = False
    while not terminated:
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        _, _, terminated, _, info = human.step(action)
        twin.step(action)
        assert human.state == twin.state
        yield


def test_render_human_window_shows_the_rgb_array_picture(fast_frames: None) -> None:
    pygame = pytest.importorskip("pygame")
    env = make(render_mode="human", target=5, opponent="greedy")
    twin = make(render_mode="rgb_array", target=5, opponent="greedy")
    frames = 0
    for _ in twin_episode(env, twin, seed=3):
        assert pygame.display.get_caption()[0] == WINDOW_CAPTION
        picture = twin.render()
        assert window_pixels().shape == picture.shape == (400, 400, 3)
        np.testing.assert_array_equal(window_pixels(), picture)
        frames += 1
    assert frames > 8, "a match to 5 points has more than one round"
    # render() draws the position too (the same picture) and returns None
    pygame.display.get_surface().fill((0, 0, 0))
    assert env.render() is None
    np.testing.assert_array_equal(window_pixels(), twin.render())
    env.close()
    assert not pygame.display.get_init(), "close() closes the window"
    env.close()  # twice is fine
    assert env.render() is None  # after close(), a frame opens the window again
    np.testing.assert_array_equal(window_pixels(), twin.render())
    env.close()


def test_render_human_without_pygame_prints_the_board(
    fast_frames: None, no_pygame: None, capsys: pytest.CaptureFixture[str]
) -> None:
    def printed() -> str:
        captured = capsys.readouterr()
        assert captured.err == "", "stdout only, no warnings"
        return captured.out

    env = make(render_mode="human", agent_color="B")
    twin = make(render_mode="ansi", agent_color="B")
    episode = twin_episode(env, twin, seed=5)
    next(episode)
    note, board = printed().split("\n", 1)
    assert note == (
        "Button Up! is shown as text: pygame is not installed (pip install pygame shows a window)."
    )
    assert board == twin.render() + "\n"
    assert "(you)" in board
    steps = 0
    for _ in episode:  # each step prints the board once, and no more notes
        assert printed() == twin.render() + "\n"
        steps += 1
    assert steps > 1
    assert env.render() is None
    assert printed() == twin.render() + "\n"
    env.close()
    assert env.render() is None
    assert printed() == twin.render() + "\n"


def test_render_human_without_a_display_prints_the_board(
    fast_frames: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pygame = pytest.importorskip("pygame")
    pygame.display.quit()
    monkeypatch.setenv("SDL_VIDEODRIVER", "no-such-driver")
    env = make(render_mode="human")
    env.reset(seed=0)
    note, board = capsys.readouterr().out.split("\n", 1)
    assert note.startswith("Button Up! is shown as text: no window could be opened (")
    assert board.startswith("Button Up!  Red 0 - 0 Black")
    env.close()


def test_human_frames_are_paced_at_render_fps(no_pygame: None) -> None:
    state = State.new_round(buttonup_env.LAYOUTS[0], "R")
    renderer = HumanRenderer(fps=20)
    start = time.monotonic()
    renderer.show(state)
    first = time.monotonic() - start
    for _ in range(3):
        renderer.show(state)
    assert time.monotonic() - start >= 3 / 20
    assert first < 3 / 20, "the first frame does not wait"
    with pytest.raises(ValueError, match="fps=0 is not allowed"):
        HumanRenderer(fps=0)


# --- versions -----------------------------------------------------------------------------------


def test_v1_observes_who_started_the_round_and_v0_does_not() -> None:
    """ButtonUp-v1's observation is v0's and one feature: 1 when the agent started the round
    under way; info and ``env.starter`` say who did."""
    for first in ("R", "B"):
        v1 = gym.make("ButtonUp-v1", agent_color="R")
        v0 = gym.make("ButtonUp-v0", agent_color="R")
        new, info = v1.reset(seed=3, options={"first": first})
        old, _ = v0.reset(seed=3, options={"first": first})
        assert old.shape == (246,) and new.shape == (247,)
        np.testing.assert_array_equal(new[:246], old)
        assert new[246] == (first == "R")
        assert info["starter"] == v1.unwrapped.starter == first
        assert info["state"].starter == first


def test_a_policy_made_for_v0_still_loads_and_plays(
    tmp_path: Path, linear_policy: Callable[[Path, str, int], Path]
) -> None:
    """A policy of ButtonUp-v0's afterstates encoding, which its file names, plays in
    ButtonUp-v1 (as an opponent, and from the agent's side)."""
    from buttonup_env import load_policy

    old = linear_policy(tmp_path / "v0.onnx", "afterstates", 0)
    env = gym.make("ButtonUp-v1", opponent=str(old), target=3)
    policy = load_policy(old)
    assert policy.encoding.name == "afterstates"
    _, info = env.reset(seed=4)
    for _ in range(200):
        state = info["state"]
        _, _, terminated, _, info = env.step(policy.act(state))
        assert not info.get("illegal_action", False)
        if terminated:
            break
    assert terminated


def test_the_perfect_opponent_plays_the_game_of_the_episode() -> None:
    from buttonup_env.players.bots import PerfectBot

    assert make(opponent="perfect").opponent.objective == "match"  # type: ignore[attr-defined]
    assert make(opponent="perfect", episode="round").opponent.objective == "round"  # type: ignore[attr-defined]
    env = make(opponent="perfect-0.3", episode="round")
    assert env.opponent.objective == "round"  # type: ignore[attr-defined]
    env.set_opponent(PerfectBot())
    with pytest.raises(ValueError, match="solved for targets up to 100, not 200"):
        make(opponent="perfect", target=200)
    with pytest.raises(ValueError, match="solved for targets up to 100"):
        make(opponent="margin", target=200).set_opponent("perfect")


# --- vector envs and the ring wrapper -----------------------------------------------------------


def test_make_vec() -> None:
    envs = gym.make_vec("ButtonUp-v1", num_envs=2, vectorization_mode="sync")
    try:
        obs, infos = envs.reset(seed=0)
        assert obs.shape == (2, 247)
        assert infos["action_mask"].shape == (2, 9)
        for _ in range(40):
            actions = np.array([int(np.flatnonzero(m)[0]) for m in infos["action_mask"]])
            obs, rewards, _, truncated, infos = envs.step(actions)
            assert obs.shape == (2, 247)
            assert rewards.shape == (2,)
            assert not truncated.any()
            assert infos["action_mask"].any(axis=1).all()
    finally:
        envs.close()


def ring_env(**kwargs: Any) -> RingObservation:
    return RingObservation(make(**kwargs))


def test_ring_observation() -> None:
    env = ring_env(episode="round", opponent="greedy")
    assert env.observation_space.shape == (729,)
    assert env.action_space == gym.spaces.Discrete(3)
    rng = np.random.default_rng(0)
    for seed in range(10):
        obs, info = env.reset(seed=seed)
        while True:
            game = env.unwrapped
            state = game.state
            legal = state.legal_moves()
            assert obs.shape == (729,)
            assert obs.dtype == np.float32
            mask = info["action_mask"]
            assert mask.dtype == np.int8
            assert mask.tolist() == [1] * len(legal) + [0] * (3 - len(legal))
            assert np.array_equal(env.action_masks(), mask.astype(bool))
            views = obs.reshape(3, 243)
            assert not views[len(legal) :].any()
            stacks = [s for s in state.board if s]
            for a, slot in enumerate(legal):  # view a starts at the a-th legal slot
                start = [s for s in range(9) if state.board[s]].index(slot)
                ring = stacks[start:] + stacks[:start]
                shown = decode(views[a], game.agent_color)
                assert list(shown[: len(ring)]) == ring
                assert not any(shown[len(ring) :])
            action = int(rng.integers(len(legal)))
            expected = state.play(legal[action])
            obs, _, terminated, _, info = env.step(action)
            for move in info["opponent_moves"]:  # action a lifted legal_moves()[a]
                expected = expected.play(move)
            assert game.state == expected
            if terminated:
                assert info["action_mask"].tolist() == [1, 1, 1]
                break


def test_ring_observation_illegal_action() -> None:
    env, raising = ring_env(), ring_env(illegal_action="raise")
    seed = next(seed for seed in range(100) if env.reset(seed=seed)[1]["action_mask"].sum() < 3)
    _, info = env.reset(seed=seed)
    bad = int(info["action_mask"].sum())  # in Discrete(3), but no legal move behind it
    _, reward, terminated, _, info = env.step(bad)
    assert reward == -1.0 and terminated
    assert info["illegal_action"] is True
    raising.reset(seed=seed)
    with pytest.raises(ValueError, match="illegal action"):
        raising.step(bad)
    for wrapped in (env, raising):  # outside Discrete(3): not a move at all
        wrapped.reset(seed=seed)
        with pytest.raises(ValueError, match=r"action 5 is not in the action space Discrete\(3\)"):
            wrapped.step(5)


WRAPPED = ".*different from the unwrapped version.*"


def test_ring_observation_check_env_core() -> None:
    """Reset, step, spaces and determinism of the wrapper (without re-making it from its spec)."""
    with warnings_as_errors(WRAPPED):
        gym_check_env(ring_env(), skip_render_check=True, skip_close_check=True)
        sb3_check_env(ring_env(), warn=True)


def test_ring_observation_check_env() -> None:
    """The full checker re-makes the env from ``env.spec``, which needs the wrapper's arguments."""
    with warnings_as_errors(WRAPPED):
        gym_check_env(ring_env())


def test_ring_observation_can_be_made_from_its_spec() -> None:
    env = ring_env(episode="round")
    again = gym.make(env.spec)
    assert isinstance(again, RingObservation)
    assert again.observation_space.shape == (729,)


def test_ring_observation_only_wraps_button_up() -> None:
    with pytest.raises(ValueError, match="ButtonUp"):
        RingObservation(gym.make("CartPole-v1"))


# --- ActionMaskObservation: the mask in the observation --------------------------------------


@pytest.mark.parametrize("ring", [False, True], ids=["slots", "afterstates"])
def test_action_mask_observation_observes_the_mask(ring: bool) -> None:
    inner = RingObservation(make(), "afterstates") if ring else make()
    env = ActionMaskObservation(inner)
    actions = 3 if ring else 9
    assert env.observation_space["action_mask"] == gym.spaces.Box(0, 1, (actions,), np.bool_)
    obs, info = env.reset(seed=4)
    rng = np.random.default_rng(4)
    for _ in range(400):
        assert env.observation_space.contains(obs)
        np.testing.assert_array_equal(obs["action_mask"], info["action_mask"].astype(bool))
        masks = inner.action_masks() if ring else env.unwrapped.action_masks()
        np.testing.assert_array_equal(obs["action_mask"], masks)
        action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, reward, terminated, _, info = env.step(action)
        assert "illegal_action" not in info
        if terminated:
            assert obs["action_mask"].all() and abs(reward) == 1.0
            obs, info = env.reset()


def test_action_mask_observation_check_env() -> None:
    with warnings_as_errors(WRAPPED):
        gym_check_env(ActionMaskObservation(make()), skip_render_check=True)
        sb3_check_env(ActionMaskObservation(make()), warn=True)
    with pytest.raises(ValueError, match="ActionMaskObservation wraps ButtonUp-v1"):
        ActionMaskObservation(gym.make("CartPole-v1"))
