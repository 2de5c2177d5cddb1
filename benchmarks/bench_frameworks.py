"""Button Up! in other frameworks: OpenSpiel playouts beside OpenSpiel's own games, and TorchRL's
wrappers beside the bare envs.

    python benchmarks/bench_frameworks.py [--seconds 2] [--steps 3000] [--repeats 5]

OpenSpiel: random playouts per second, from the initial state to the end, every chance outcome
drawn from its probabilities and every move uniformly among the legal ones, of
``python_button_up`` (a match to 15; one round; one round from a fixed layout and starter,
which has no chance node) beside OpenSpiel's C++ ``tic_tac_toe`` and
``connect_four`` and its Python ``python_tic_tac_toe``. All are driven by the same Python loop,
one after the other for about ``--seconds`` each in every repeat, and the ratio to
``python_tic_tac_toe`` is taken within each repeat. Actions per second (chance outcomes
included) are shown beside them, since the games have playouts of very different lengths.

TorchRL: agent steps per second of ``TransformedEnv(GymWrapper(ActionMaskObservation(
ButtonUp-v0)), ActionMask())`` and of ``PettingZooWrapper(env(), use_mask=True)``, each
stepped ``--steps`` times by ``rollout`` with TorchRL's masked random actions, beside the bare
``ButtonUp-v0`` and PettingZoo env stepped as often by a Python loop drawing random legal
slots; the ratio wrapped / bare is taken within each repeat. torch runs on one thread.

Figures are medians of ``--repeats`` repeats (the machine is shared and noisy, so only ratios
measured back to back mean much). Needs the ``openspiel`` and ``torchrl`` extras.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pyspiel
import torch
from open_spiel.python import games as _openspiel_python_games  # noqa: F401  (python_tic_tac_toe)
from torchrl.envs import GymWrapper, PettingZooWrapper, TransformedEnv
from torchrl.envs.transforms import ActionMask

import buttonup_env.openspiel  # noqa: F401  (registers python_button_up, and ButtonUp-v0)
from buttonup_env.envs.wrappers import ActionMaskObservation
from buttonup_env.pettingzoo import env as pettingzoo_env

GAMES = {
    "python_button_up (match)": ("python_button_up", {}),
    "python_button_up (round)": ("python_button_up", {"episode": "round"}),
    "python_button_up (fixed)": (
        "python_button_up",
        {"episode": "round", "layout": "B W W B B R W R R", "first": "R"},
    ),
    "tic_tac_toe (C++)": ("tic_tac_toe", {}),
    "connect_four (C++)": ("connect_four", {}),
    "python_tic_tac_toe": ("python_tic_tac_toe", {}),
}
REFERENCE = "python_tic_tac_toe"


def playouts(game: pyspiel.Game, seconds: float, rng: random.Random) -> tuple[float, float]:
    """Random playouts of ``game`` for about ``seconds``: (playouts, actions) per second."""
    count = actions = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        state = game.new_initial_state()
        while not state.is_terminal():
            if state.is_chance_node():
                outcomes, probabilities = zip(*state.chance_outcomes(), strict=True)
                action = rng.choices(outcomes, probabilities)[0]
            else:
                legal = state.legal_actions()
                action = legal[int(rng.random() * len(legal))]
            state.apply_action(action)
            actions += 1
        count += 1
        if time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - start
    return count / elapsed, actions / elapsed


def bare_gym(steps: int, rng: np.random.Generator) -> float:
    env = gym.make("ButtonUp-v0")
    _, info = env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        legal = np.flatnonzero(info["action_mask"])
        _, _, terminated, truncated, info = env.step(int(legal[int(rng.random() * len(legal))]))
        if terminated or truncated:
            _, info = env.reset()
    return steps / (time.perf_counter() - start)


def wrapped_gym(steps: int, rng: np.random.Generator) -> float:
    env = TransformedEnv(GymWrapper(ActionMaskObservation(gym.make("ButtonUp-v0"))), ActionMask())
    env.set_seed(int(rng.integers(1 << 31)))
    start = time.perf_counter()
    env.rollout(steps, break_when_any_done=False)
    return steps / (time.perf_counter() - start)


def bare_pettingzoo(steps: int, rng: np.random.Generator) -> float:
    env = pettingzoo_env()
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        observation, _, termination, truncation, _ = env.last()
        if termination or truncation:
            env.reset()
            observation = env.last()[0]
        legal = np.flatnonzero(observation["action_mask"])
        env.step(int(legal[int(rng.random() * len(legal))]))
    return steps / (time.perf_counter() - start)


def wrapped_pettingzoo(steps: int, rng: np.random.Generator) -> float:
    env = PettingZooWrapper(pettingzoo_env(), use_mask=True, seed=int(rng.integers(1 << 31)))
    start = time.perf_counter()
    env.rollout(steps, break_when_any_done=False)
    return steps / (time.perf_counter() - start)


TORCHRL: dict[str, tuple[Callable[[int, np.random.Generator], float], ...]] = {
    "ButtonUp-v0": (bare_gym, wrapped_gym),
    "PettingZoo AEC env": (bare_pettingzoo, wrapped_pettingzoo),
}


def show(values: list[float]) -> str:
    return ", ".join(f"{v:.3g}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per game and repeat")
    parser.add_argument("--steps", type=int, default=3000, help="TorchRL steps per env and repeat")
    parser.add_argument("--repeats", type=int, default=5, help="repeats (medians are reported)")
    args = parser.parse_args()
    if args.seconds <= 0 or min(args.steps, args.repeats) < 1:
        parser.error(
            f"--seconds must be > 0 and --steps, --repeats >= 1, got {args.seconds}, "
            f"{args.steps} and {args.repeats}"
        )
    torch.set_num_threads(1)
    games = {name: pyspiel.load_game(short, params) for name, (short, params) in GAMES.items()}
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in games}
    ratios: dict[str, list[float]] = {name: [] for name in games}
    torchrl: dict[str, list[tuple[float, float]]] = {name: [] for name in TORCHRL}
    for repeat in range(args.repeats):
        for name, game in games.items():
            rates[name].append(playouts(game, args.seconds, random.Random(repeat)))
        for name in games:
            ratios[name].append(rates[name][-1][0] / rates[REFERENCE][-1][0])
        for name, (bare, wrapped) in TORCHRL.items():
            rng = np.random.default_rng(repeat)
            torchrl[name].append((bare(args.steps, rng), wrapped(args.steps, rng)))

    print(f"OpenSpiel: random playouts, median of {args.repeats} repeats of {args.seconds:g} s")
    print(f"  {'game':26s} {'playouts/s':>11s} {'actions/s':>11s}  playouts / {REFERENCE}'s")
    for name, values in rates.items():
        per_second = statistics.median(p for p, _ in values)
        actions = statistics.median(a for _, a in values)
        ratio = statistics.median(ratios[name])
        print(f"  {name:26s} {per_second:>11,.0f} {actions:>11,.0f}  {ratio:.3g}")
    print(f"TorchRL: agent steps per second, median of {args.repeats} repeats of {args.steps:,}")
    print(f"  {'env':20s} {'bare':>9s} {'TorchRL':>9s}  TorchRL / bare (per repeat)")
    for name, values in torchrl.items():
        bare = statistics.median(b for b, _ in values)
        wrapped = statistics.median(w for _, w in values)
        each = [w / b for b, w in values]
        print(
            f"  {name:20s} {bare:>9,.0f} {wrapped:>9,.0f}  {statistics.median(each):.3f} "
            f"({show(each)})"
        )


if __name__ == "__main__":
    main()
