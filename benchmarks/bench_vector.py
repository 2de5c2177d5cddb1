"""Agent steps per second of the batched env, beside CartPole's vector env and ButtonUp-v0.

    python benchmarks/bench_vector.py [--sizes 1 64 1024 4096] [--seconds 2] [--repeats 3]

For each batch size, back to back in this process and ``--repeats`` times (medians are
reported; the machine is shared and noisy, so ratios measured back to back mean most):

* ``ButtonUpVectorEnv`` against the random and against the perfect opponent (observations
  included, the 246-float ``slots`` encoding);
* Gymnasium's ``CartPoleVectorEnv`` (``gym.make_vec("CartPole-v1", vectorization_mode=
  "vector_entry_point")``);
* ButtonUp-v0 in a ``SyncVectorEnv`` (``vectorization_mode="sync"``), one game at a time.

Every env is driven by the same cheap batched player: a uniformly random legal action,
drawn with one array operation per step. A step of N envs counts as N agent steps. Each
measurement steps for about ``--seconds`` (at least 3 steps). Then the resident memory of a
process holding a 4,096-env batch, tables included, is measured in a fresh subprocess.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import buttonup_env  # noqa: F401  (registers ButtonUp-v0 and its vector entry point)
from buttonup_env.vector import ButtonUpVectorEnv


def legal_player(rng: np.random.Generator) -> Callable[[np.ndarray], np.ndarray]:
    """A uniformly random legal action per row of the masks, with array operations."""

    def act(masks: np.ndarray) -> np.ndarray:
        return (masks * rng.random(masks.shape)).argmax(axis=1)

    return act


def rate(env: gym.vector.VectorEnv, masked: bool, seconds: float) -> float:
    """Agent steps per second of ``env`` stepped for about ``seconds``."""
    rng = np.random.default_rng(0)
    act = legal_player(rng)
    n = env.num_envs
    _, info = env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while True:
        if masked:
            actions = act(info["action_mask"])
        else:
            actions = rng.integers(2, size=n)
        _, _, _, _, info = env.step(actions)
        steps += 1
        elapsed = time.perf_counter() - start
        if steps >= 3 and elapsed >= seconds:
            return steps * n / elapsed


def resident_memory(num_envs: int) -> tuple[float, float]:
    """MiB resident in a fresh process: with gymnasium and the package imported, then also
    holding ``num_envs`` envs (tables and a few steps included)."""
    code = f"""
import numpy as np, gymnasium, buttonup_env
from buttonup_env.vector import ButtonUpVectorEnv
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
base = rss()
env = ButtonUpVectorEnv({num_envs}, opponent="perfect", encoding="afterstates")
_, info = env.reset(seed=0)
for _ in range(20):
    _, _, _, _, info = env.step(info["action_mask"].argmax(axis=1))
print(base, rss())
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    base, full = map(float, done.stdout.split())
    return base, full


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024, 4096])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (medians are reported)")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    args = parser.parse_args()
    if args.repeats < 1 or min(args.sizes) < 1 or not args.seconds > 0:
        parser.error(
            f"--repeats and --sizes must be >= 1 and --seconds > 0, got {args.repeats}, "
            f"{args.sizes} and {args.seconds}"
        )
    makers: dict[str, tuple[Callable[[int], gym.vector.VectorEnv], bool]] = {
        "ButtonUpVectorEnv, random opponent": (
            lambda n: ButtonUpVectorEnv(n, opponent="random"),
            True,
        ),
        "ButtonUpVectorEnv, perfect opponent": (
            lambda n: ButtonUpVectorEnv(n, opponent="perfect"),
            True,
        ),
        "CartPoleVectorEnv": (
            lambda n: gym.make_vec("CartPole-v1", n, vectorization_mode="vector_entry_point"),
            False,
        ),
        "ButtonUp-v0 in SyncVectorEnv": (
            lambda n: gym.make_vec("ButtonUp-v0", n, vectorization_mode="sync"),
            True,
        ),
    }
    ButtonUpVectorEnv(1)  # load (or build) the tables before timing anything
    print(
        f"agent steps per second, median of {args.repeats} repeats of about {args.seconds:g} s each"
    )
    header = f"  {'num_envs':>8}" + "".join(f"  {name:>36}" for name in makers)
    print(header + f"  {'ButtonUp random / CartPole':>28}")
    for n in args.sizes:
        envs = {name: make(n) for name, (make, _) in makers.items()}
        rates: dict[str, list[float]] = {name: [] for name in makers}
        ratios = []
        for _ in range(args.repeats):
            for name, (_, masked) in makers.items():
                rates[name].append(rate(envs[name], masked, args.seconds))
            ratios.append(
                rates["ButtonUpVectorEnv, random opponent"][-1] / rates["CartPoleVectorEnv"][-1]
            )
        row = f"  {n:>8,}" + "".join(
            f"  {statistics.median(rates[name]):>36,.0f}" for name in makers
        )
        print(row + f"  {statistics.median(ratios):>28.2f}", flush=True)
    if not args.no_memory:
        base, full = resident_memory(4096)
        print(
            f"resident memory: {full:,.0f} MiB for a process holding 4,096 envs against the "
            f"perfect opponent, afterstates encoding (tables included); {base:,.0f} MiB before "
            f"making the env, so the env takes {full - base:,.0f} MiB"
        )


if __name__ == "__main__":
    main()
