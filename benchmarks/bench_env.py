"""Environment steps per second: ButtonUp-v0 beside CartPole-v1 and PettingZoo's connect_four_v3.

    python benchmarks/bench_env.py [--steps 100000] [--repeats 5]

Every env runs in the same process, one after the other, ``--repeats`` times; the figures are
medians, and the ratio to CartPole-v1 is taken within each repeat (the machine is shared and
noisy, so only ratios measured back to back mean much). Each env is made with
``gymnasium.make`` (its usual wrappers included) and driven by the same cheap random player:
ButtonUp-v0 by a uniformly random legal slot against the env's random opponent (the opponent's
moves happen inside ``step``), CartPole-v1 by a random action, connect_four_v3 by a random legal
column for whichever agent is to move. Episodes are reset when they end.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np

import buttonup_env  # noqa: F401  (registers ButtonUp-v0)


def buttonup(steps: int, draws: list[float]) -> float:
    env = gym.make("ButtonUp-v0")
    _, info = env.reset(seed=0)
    start = time.perf_counter()
    for i in range(steps):
        legal = info["state"].legal_moves()
        _, _, terminated, truncated, info = env.step(legal[int(draws[i] * len(legal))])
        if terminated or truncated:
            _, info = env.reset()
    return steps / (time.perf_counter() - start)


def cartpole(steps: int, draws: list[float]) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    start = time.perf_counter()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(int(draws[i] * 2))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def connect_four(steps: int, draws: list[float]) -> float | None:
    try:  # needs pettingzoo and pygame (pip install pettingzoo pygame)
        from pettingzoo.classic import connect_four_v3
    except ImportError:
        print("connect_four_v3 skipped: pip install pettingzoo pygame")
        return None
    env = connect_four_v3.env()
    env.reset(seed=0)
    start = time.perf_counter()
    for i in range(steps):
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.reset()
            continue
        legal = np.flatnonzero(obs["action_mask"])
        env.step(int(legal[int(draws[i] * len(legal))]))
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000, help="steps per env and repeat")
    parser.add_argument("--repeats", type=int, default=5, help="repeats (medians are reported)")
    args = parser.parse_args()
    if min(args.steps, args.repeats) < 1:
        parser.error(f"--steps and --repeats must be >= 1, got {args.steps} and {args.repeats}")
    draws = np.random.default_rng(0).random(args.steps).tolist()
    rates: dict[str, list[float]] = {"ButtonUp-v0": [], "CartPole-v1": [], "connect_four_v3": []}
    ratios: list[float] = []
    for _ in range(args.repeats):
        cart = cartpole(args.steps, draws)
        button = buttonup(args.steps, draws)
        four = connect_four(args.steps, draws)
        rates["CartPole-v1"].append(cart)
        rates["ButtonUp-v0"].append(button)
        if four is not None:
            rates["connect_four_v3"].append(four)
        ratios.append(button / cart)
    print(f"steps per second, median of {args.repeats} repeats of {args.steps:,} steps")
    for name, values in rates.items():
        if values:
            print(f"  {name:16s} {statistics.median(values):>10,.0f}")
    print(
        f"ButtonUp-v0 / CartPole-v1: {statistics.median(ratios):.2f} (median of the per-repeat "
        "ratios: " + ", ".join(f"{r:.2f}" for r in ratios) + ")"
    )


if __name__ == "__main__":
    main()
