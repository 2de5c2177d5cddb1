"""Smoke test of an installed wheel, run by .ci/wheel_smoke.sh in a fresh virtual environment.

    python wheel_smoke.py core RECORDS.jsonl     # after: pip install buttonup_env-*.whl
    python wheel_smoke.py policy                 # after: pip install "buttonup_env-*.whl[policy]"

It runs from an empty folder outside the clone, so everything it uses must come from the
installed package: the import, ButtonUp-v1, the batched env's compiled kernels, the shipped
agent (package data), and the two commands. ``core`` checks that the plain install needs only
gymnasium, numpy and numba; ``policy``
that the shipped agent loads by name and plays. RECORDS.jsonl is a file of valid records.
Exits with a one-line message at the first check that fails.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

import buttonup_env
from buttonup_env import RandomBot, State
from buttonup_env.game.records import write_records
from buttonup_env.players.evaluation import evaluate
from buttonup_env.players.shipped import SHIPPED_DIR, shipped_policies

BIN = Path(sys.executable).parent
# every slot in turn, over and over: the illegal ones are refused, the legal ones played
PIPED_MOVES = "".join(f"{slot}\n" for slot in range(9)) * 80


def check(condition: bool, message: str) -> None:
    if not condition:
        sys.exit(f"wheel smoke test FAILED: {message}")


def run(command: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)


def installed_package() -> None:
    package = Path(buttonup_env.__file__).resolve().parent
    check("site-packages" in package.parts, f"buttonup_env imported from {package}")
    check(
        importlib.metadata.version("buttonup-env") == buttonup_env.__version__,
        "the installed version differs from buttonup_env.__version__",
    )
    core = [r for r in importlib.metadata.requires("buttonup-env") or [] if "extra ==" not in r]
    names = sorted(r.split(">")[0].split("=")[0].split("<")[0].strip() for r in core)
    check(names == ["gymnasium", "numba", "numpy"], f"the core install requires {core}")
    check(importlib.util.find_spec("torch") is None, "torch is installed; nothing here needs it")
    check("buttonup-ppo" in shipped_policies(), f"no buttonup-ppo in {SHIPPED_DIR}")
    check((SHIPPED_DIR / "buttonup-ppo.json").is_file(), "the shipped agent's card is missing")
    print(f"buttonup-env {buttonup_env.__version__} from {package}; shipped: {shipped_policies()}")


def env_steps(opponent: str) -> None:
    env = gym.make("ButtonUp-v1", opponent=opponent)
    _, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated) and steps < 1000:
        action = rng.choice(np.flatnonzero(info["action_mask"]))
        _, reward, terminated, truncated, info = env.step(action)
        steps += 1
    check(terminated and reward in (1.0, -1.0), f"the match against {opponent} did not end")
    print(f"ButtonUp-v1 against {opponent}: a match in {steps} steps, reward {reward:+.0f}")


def batched_env() -> None:
    """The compiled batched env from the installed package plays the numpy env's games."""
    envs = [
        gym.make_vec("ButtonUp-v1", num_envs=64, opponent="perfect", backend=backend)
        for backend in ("numba", "numpy")
    ]
    outs = [env.reset(seed=0) for env in envs]
    rng = np.random.default_rng(0)
    for _ in range(50):
        mask = outs[0][-1]["action_mask"]
        actions = (mask * rng.random(mask.shape)).argmax(axis=1)
        outs = [env.step(actions) for env in envs]
        for a, b in zip(outs[0][:3], outs[1][:3], strict=True):
            check(np.array_equal(a, b), "the compiled batched env left the numpy env's game")
    print("the batched env: 50 steps of 64 games, compiled and numpy alike")


def replay(records: Path) -> None:
    ours = Path("played.jsonl")
    match = buttonup_env.Match(np.random.default_rng(1), target=5)
    bots = {"R": RandomBot(seed=2), "B": RandomBot(seed=3)}
    while not match.over:
        match.play(bots[match.state.to_move].act(match.state))
        if match.state.round_over and not match.over:
            match.next_round()
    write_records(ours, [match.record("smoke")])
    result = run([str(BIN / "buttonup-replay"), str(records), str(ours)])
    check(result.returncode == 0, f"buttonup-replay exited {result.returncode}: {result.stdout}")
    check(" 0 invalid" in result.stdout, f"buttonup-replay said {result.stdout!r}")
    print(result.stdout.strip().splitlines()[-1])


def play(opponent: str) -> None:
    command = [str(BIN / "buttonup-play"), "--opponent", opponent, "--target", "1", "--seed", "4"]
    result = run(command, PIPED_MOVES)
    check(result.returncode == 0, f"buttonup-play exited {result.returncode}: {result.stderr}")
    check("Match over:" in result.stdout, "buttonup-play did not finish the match")
    print(next(line for line in result.stdout.splitlines() if line.startswith("Match over:")))


def core(records: Path) -> None:
    installed_package()
    check(importlib.util.find_spec("onnxruntime") is None, "onnxruntime came with the core")
    env_steps("random")
    batched_env()
    replay(records)
    play("perfect")
    try:
        buttonup_env.load_policy("buttonup-ppo")
    except ImportError as error:
        check("buttonup-env[policy]" in str(error), f"unhelpful ImportError: {error}")
        print(f"without the policy extra: {error}")
    else:
        check(False, "load_policy worked without onnxruntime")


def policy() -> None:
    installed_package()
    agent = buttonup_env.load_policy("buttonup-ppo")
    state = State.from_notation("B W W B B R W R R", to_move="R")
    check(agent.act(state) in state.legal_moves(), "the shipped agent chose an illegal slot")
    result = evaluate(agent, RandomBot(), matches=20, seed=0, regret=False)
    print(f"buttonup-ppo against the random bot: {result.summary().splitlines()[0]}")
    check(result.wins > result.losses, "the shipped agent lost most matches to the random bot")
    env_steps("buttonup-ppo")
    play("buttonup-ppo")


if __name__ == "__main__":
    stage = sys.argv[1] if len(sys.argv) > 1 else ""
    if stage == "core" and len(sys.argv) == 3:
        core(Path(sys.argv[2]))
    elif stage == "policy" and len(sys.argv) == 2:
        policy()
    else:
        sys.exit("usage: python wheel_smoke.py core RECORDS.jsonl | policy")
    print(f"wheel smoke test ({stage}) passed")
