"""The compiled batched env (``backend="numba"``) against its numpy reference, bit for bit.

test_vector.py replays the numpy env's transitions with the rules engine; here the compiled
env must give exactly what the numpy env gives for the same arguments, seed and actions:
observations, rewards, terminations, every info key, the generators' states and the pool's
results (``get_state``). So compiled == numpy == rules engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_vector import CONFIGS, MODEL, pool_batch

from buttonup_env.engine import kernels
from buttonup_env.envs import vector
from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.game.encoding import ENCODINGS
from buttonup_env.players.batched import PolicyPlayer
from buttonup_env.players.selfplay import OpponentMix, OpponentPool

ROOT = Path(__file__).resolve().parent.parent


def assert_same(a: Any, b: Any, what: str) -> None:
    """The same value: dicts key for key (in order), arrays in dtype, shape and every bit."""
    if isinstance(a, dict):
        assert list(a) == list(b), f"{what}: keys {list(a)} != {list(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{what}[{key!r}]")
        return
    if isinstance(a, tuple):
        assert len(a) == len(b), what
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{what}[{k}]")
        return
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape), (
        f"{what}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
    )
    assert a.tobytes() == b.tobytes(), what


def random_actions(
    rng: np.random.Generator, mask: np.ndarray, actions_n: int, illegal_rate: float
) -> np.ndarray:
    """A random legal action per env, a random one (often illegal) in ``illegal_rate`` of them."""
    actions = (mask * rng.random(mask.shape)).argmax(axis=1)
    wild = rng.random(len(mask)) < illegal_rate
    actions[wild] = rng.integers(actions_n, size=int(wild.sum()))
    return actions


def compare(
    envs: list[ButtonUpVectorEnv], steps: int, seed: int, illegal_rate: float = 0.03
) -> int:
    """Step the compiled env (first) and the numpy env with the same actions; every output
    and the whole state must agree after every step. Returns the env steps compared."""
    compiled, reference = envs
    assert (compiled.backend, reference.backend) == ("numba", "numpy")
    outs = [env.reset(seed=seed) for env in envs]
    assert_same(outs[0], outs[1], "reset")
    rng = np.random.default_rng(seed)
    for step in range(steps):
        mask = outs[0][-1]["action_mask"]
        actions = random_actions(rng, mask, compiled.single_action_space.n, illegal_rate)
        outs = [env.step(actions) for env in envs]
        assert_same(outs[0][:4], outs[1][:4], f"step {step}")
        assert_same(outs[0][4], outs[1][4], f"step {step} info")
        assert json.dumps(compiled.get_state()) == json.dumps(reference.get_state()), step
    assert compiled.states() == reference.states()
    assert_same(compiled.action_masks(), reference.action_masks(), "action_masks()")
    assert_same(compiled.observe(), reference.observe(), "observe()")
    return compiled.num_envs * steps


def both(num_envs: int, **kwargs: Any) -> list[ButtonUpVectorEnv]:
    return [ButtonUpVectorEnv(num_envs, backend=b, **kwargs) for b in ("numba", "numpy")]


def test_the_kernels_draw_what_numpy_draws() -> None:
    """``random()`` and ``integers(n)`` drawn one at a time in a kernel are numpy's array
    draws, and leave the generator exactly where numpy leaves it."""
    bounds = np.array([1, 2, 3, 6, 1680, 2**31 + 5], dtype=np.int64)
    for size in (0, 1, 5, 1000):
        mine, theirs = np.random.default_rng(size), np.random.default_rng(size)
        doubles = np.empty(size)
        integers = np.empty((len(bounds), size), dtype=np.int64)
        addresses = kernels.generator_addresses([mine])
        kernels.sample(addresses, kernels.MAIN, doubles, bounds, integers)
        np.testing.assert_array_equal(doubles, theirs.random(size))
        for row, bound in zip(integers, bounds, strict=True):
            np.testing.assert_array_equal(row, theirs.integers(bound, size=size))
        assert mine.bit_generator.state == theirs.bit_generator.state
        assert mine.integers(7, size=3).tolist() == theirs.integers(7, size=3).tolist()


@pytest.mark.parametrize(
    ("steps", "at_least"), [(45, 20_000), pytest.param(230, 100_000, marks=pytest.mark.slow)]
)
def test_every_transition_equals_the_numpy_reference(steps: int, at_least: int) -> None:
    """The configurations of test_vector's rules-engine replay, as many transitions (random
    actions, 3% of them random and mostly illegal): all encodings, the three bots, random
    starts, round and match episodes and rewards."""
    total = sum(compare(both(64, **config), steps, seed=k) for k, config in enumerate(CONFIGS))
    assert total >= at_least


@pytest.mark.parametrize("spec", ["buttonup-ppo", str(MODEL)])
def test_a_policy_opponent_equals_the_numpy_reference(spec: str) -> None:
    assert compare(both(16, opponent=spec), 60, seed=2) == 960


def pool_env(folder: Path, prioritized: float, backend: str) -> ButtonUpVectorEnv:
    """test_vector's training-like batch (``pool_batch``) with the given backend."""
    like = pool_batch(folder, prioritized=prioritized)
    return ButtonUpVectorEnv(
        like.num_envs,
        opponent=like.pool,
        episode=like.episode,
        reward=like.reward_mode,
        encoding=like.encoding,
        random_start=like.random_start,
        backend=backend,
    )


@pytest.mark.parametrize("prioritized", [0.0, 3.0])
def test_the_training_pool_equals_the_numpy_reference(tmp_path: Path, prioritized: float) -> None:
    """Sampling snapshots and the bots drawn per episode, random starts, prioritized
    self-play (the results decide the draws): the pool's results are part of get_state."""
    for step in (0, 1, 2):
        shutil.copy(MODEL, tmp_path / f"step_{step:09d}.onnx")
    envs = [pool_env(tmp_path, prioritized, backend) for backend in ("numba", "numpy")]
    compare(envs, 100, seed=4)
    assert envs[0].pool.results and envs[0].pool.results == envs[1].pool.results
    assert len(envs[0]._players) == 7  # the four bots and the three snapshots played


def test_a_pool_in_match_episodes_equals_the_numpy_reference(tmp_path: Path) -> None:
    shutil.copy(MODEL, tmp_path / "step_000000000.onnx")
    mix = OpponentMix(snapshots=1, perfect=1, greedy=1, random=1)
    envs = [
        ButtonUpVectorEnv(48, opponent=OpponentPool(tmp_path, mix), backend=backend)
        for backend in ("numba", "numpy")
    ]
    compare(envs, 80, seed=5)
    assert set(envs[0]._opponent.tolist()) == {0, 1, 3, 4}  # random, greedy, perfect, snapshot


@pytest.mark.parametrize("opponent", ["random", "perfect", str(MODEL)])
def test_a_batch_with_no_legal_agent_move(opponent: str) -> None:
    """Every agent's action illegal: every episode ends with -1 and restarts, and nothing
    else moves (no agent's slot may be played as its opponent's move)."""
    envs = both(32, opponent=opponent)
    outs = [env.reset(seed=7) for env in envs]
    for _ in range(3):
        mask = outs[0][-1]["action_mask"]
        illegal = (1 - mask).argmax(axis=1)  # a slot that cannot be lifted, in every env
        assert not mask[np.arange(32), illegal].any()
        outs = [env.step(illegal) for env in envs]
        assert_same(outs[0], outs[1], "all illegal")
        _, reward, terminated, _, info = outs[0]
        assert terminated.all() and info["illegal_action"].all()
        np.testing.assert_array_equal(reward, -1.0)
        assert envs[0].states() == envs[1].states()
        assert all(state.score == {"R": 0, "B": 0} for state in envs[0].states())
        for state, color in zip(envs[0].states(), envs[0].agent_colors, strict=True):
            assert state.to_move == color
            assert sum(map(len, state.board)) == 9  # every button still on the board


def test_illegal_action_raise_is_the_same_and_moves_nobody() -> None:
    envs = both(16, illegal_action="raise", encoding="ring")
    outs = [env.reset(seed=3) for env in envs]
    outs = [env.step(outs[0][-1]["action_mask"].argmax(axis=1)) for env in envs]
    mask = outs[0][-1]["action_mask"]
    actions = mask.argmax(axis=1)
    bad = int(np.flatnonzero(mask.sum(axis=1) < 3)[-1])  # an env with an action to get wrong
    actions[bad] = 2
    saved = [json.dumps(env.get_state()) for env in envs]
    messages = []
    for env in envs:
        with pytest.raises(ValueError, match=f"illegal action in env {bad}: action 2 has") as error:
            env.step(actions)
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    assert [json.dumps(env.get_state()) for env in envs] == saved


def test_encode_equals_the_numpy_reference() -> None:
    """``encode`` (what policy opponents see) for any envs, side and encoding."""
    envs = both(40, opponent="greedy", episode="round", reward="round")
    compare(envs, 15, seed=8)
    rng = np.random.default_rng(8)
    for encoding in ENCODINGS:
        for idx in (slice(None), slice(3, 30, 4), rng.permutation(40)[:17], np.array([5])):
            rows = np.arange(40)[idx]
            own = rng.integers(2, size=len(rows))
            assert_same(
                envs[0].encode(encoding, idx, own), envs[1].encode(encoding, idx, own), encoding
            )


def test_an_illegal_policy_move_is_refused_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy that returns an illegal slot (a broken file, say) stops the step with the
    same one-sentence error."""

    def illegal(players: list[PolicyPlayer], counts: Any, boards: np.ndarray, obs: Any) -> Any:
        return players[0].tables.legal[boards].argmin(axis=1)  # the first illegal slot

    monkeypatch.setattr(vector, "choose_together", illegal)
    messages = []
    for env in both(4, opponent=str(MODEL), agent_color="B", target=5):
        with pytest.raises(
            ValueError, match=r"made an illegal move: slot \d, which is not legal on '"
        ) as error:
            env.reset(seed=0, options={"first": "R"})
        messages.append(str(error.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_what_step_returns_is_the_callers_to_keep(backend: str) -> None:
    """Later steps never change an array that reset or step returned (nor its info)."""
    env = ButtonUpVectorEnv(64, opponent="random", backend=backend, target=2)
    kept: list[Any] = []
    out = env.reset(seed=1)
    rng = np.random.default_rng(1)
    for _ in range(30):
        kept.append((out, [np.copy(a) for a in arrays(out)]))
        out = env.step(random_actions(rng, out[-1]["action_mask"], 9, 0.05))
        env.action_masks()[:] = False  # what the caller does with its own copies
        env.observe()[:] = 0.5
    assert any("final_obs" in info for (*_, info), _ in kept)
    for returned, copies in kept:
        for array, copy in zip(arrays(returned), copies, strict=True):
            assert_same(array, copy, "a returned array changed")


def arrays(out: tuple[Any, ...]) -> list[np.ndarray]:
    """Every array of a reset's or step's return, its info's included."""
    *values, info = out
    return [np.asarray(v) for v in values] + [np.asarray(v) for v in info.values()]


@pytest.mark.parametrize(  # numba is the default backend; numpy is its reference, checked slow
    "backend", ["numba", pytest.param("numpy", marks=pytest.mark.slow)]
)
def test_a_pickled_or_copied_batch_steps_like_the_original(backend: str) -> None:
    """A copy has generators of its own: it must draw from them, never from the original's."""
    import copy
    import pickle

    env = ButtonUpVectorEnv(32, opponent="perfect", backend=backend, target=3)
    env.reset(seed=6)
    rng = np.random.default_rng(6)
    for _ in range(5):
        env.step(random_actions(rng, env.action_masks(), 9, 0.0))
    copies = [pickle.loads(pickle.dumps(env)), copy.deepcopy(env)]
    actions = [random_actions(rng, env.action_masks(), 9, 0.05) for _ in range(12)]
    outs = [[e.step(a) for a in actions] for e in (env, *copies)]
    for other in outs[1:]:
        for step, (a, b) in enumerate(zip(outs[0], other, strict=True)):
            assert_same(a, b, f"step {step}")
    assert json.dumps(copies[0].get_state()) == json.dumps(env.get_state())


@pytest.mark.parametrize(
    "kwargs, named",
    [
        (dict(backend="jax"), "backend='jax'"),
        (dict(backend=None), "backend=None"),
    ],
)
def test_bad_backend_arguments(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(".", r"\.")):
        ButtonUpVectorEnv(2, **kwargs)


def run_python(code: str, env: dict[str, str] | None = None) -> str:
    """What ``code`` prints in a new process (with ``env`` as its whole environment)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_nothing_compiles_on_import() -> None:
    """numba is imported when a compiled env is made, and compiles at its first reset."""
    out = run_python(
        """
        import sys
        import buttonup_env, buttonup_env.envs.vector
        from buttonup_env.envs.vector import ButtonUpVectorEnv
        ButtonUpVectorEnv(2, backend="numpy").reset(seed=0)
        print("numba" in sys.modules)
        env = ButtonUpVectorEnv(2)
        from buttonup_env.engine import kernels
        print("numba" in sys.modules, len(kernels.start_episodes.signatures))
        env.reset(seed=0)
        print(len(kernels.start_episodes.signatures))
        """,
        dict(os.environ),
    )
    assert out.split() == ["False", "True", "0", "1"]


CACHE_PROBE = """
import time
start = time.perf_counter()
import numpy as np
from buttonup_env.engine import kernels
from buttonup_env.envs.vector import ButtonUpVectorEnv
env = ButtonUpVectorEnv(16, opponent="perfect", episode="round", random_start=0.5)
_, info = env.reset(seed=0)
for _ in range(20):
    _, _, _, _, info = env.step(info["action_mask"].argmax(axis=1))
hits = sum(sum(k.stats.cache_hits.values()) for k in (kernels.play_moves, kernels.bot_plies,
           kernels.start_episodes, kernels.random_starts, kernels.agent_moves,
           kernels.observe))
print(hits, round(time.perf_counter() - start, 2))
"""


@pytest.mark.slow
def test_a_read_only_package_caches_in_the_user_cache_folder(tmp_path: Path) -> None:
    """Installed read-only, the package compiles once into numba's user-wide cache folder
    (``$XDG_CACHE_HOME/numba``), and the next process loads the kernels from there. With no
    writable cache folder at all it still works, compiling in every process."""
    from buttonup_env.engine.tables import FORMAT, cache_dir

    package = tmp_path / "site" / "buttonup_env"
    shutil.copytree(ROOT / "buttonup_env", package, ignore=shutil.ignore_patterns("__pycache__"))
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "tables").mkdir()  # this process's tables, to save the child a walk
    shutil.copy(cache_dir() / f"tables-v{FORMAT}.npz", tmp_path / "tables")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"} | {
        "PYTHONPATH": str(package.parent),
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "BUTTONUP_CACHE_DIR": str(tmp_path / "tables"),
    }

    def run_read_only(code: str, also: Path | None = None) -> str:
        """``code`` in a process that sees the package folder (and ``also``) read-only."""
        if os.geteuid() != 0:  # permissions hold: take away the write bits
            for folder in [package, *([also] if also else [])]:
                for path in [folder, *folder.rglob("*")]:
                    path.chmod(path.stat().st_mode & ~0o222)
            return run_python(code, env)
        if shutil.which("unshare") is None:
            pytest.skip("as root, a read-only folder needs unshare and a bind mount")
        mounts = " && ".join(
            f"mount --bind {f} {f} && mount -o remount,bind,ro {f}"
            for f in [package, *([also] if also else [])]
        )
        script = tmp_path / "probe.py"
        script.write_text(textwrap.dedent(code))
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             f"{mounts} && exec {sys.executable} {script}"],
            capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
        if done.returncode != 0 and "mount" in done.stderr and "permission" in done.stderr.lower():
            pytest.skip(f"no read-only bind mount here: {done.stderr.strip()}")
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = run_read_only(CACHE_PROBE).split()
    assert not (package / "__pycache__").exists() or not any(
        p.suffix in (".nbi", ".nbc") for p in (package / "__pycache__").iterdir()
    )
    cached = list((home / ".cache" / "numba").rglob("kernels._play_moves-*.nbi"))
    assert cached, "the kernels are cached in the user-wide folder"
    second = run_read_only(CACHE_PROBE).split()
    assert int(first[0]) == 0 and int(second[0]) >= 6, (first, second)
    # a read-only home too: nowhere to cache, and the env works all the same
    shutil.rmtree(home / ".cache" / "numba")
    third = run_read_only(CACHE_PROBE, also=home).split()
    assert int(third[0]) == 0
    assert not (home / ".cache" / "numba").exists()


def test_matches_at_random_scores_equal_the_numpy_reference() -> None:
    """Matches that start at random scores (training's random_score) play the same games on
    both backends."""
    envs = both(48, opponent="perfect", encoding="match-afterstates", random_score=0.5, target=6)
    assert compare(envs, 60, seed=3) == 48 * 60
