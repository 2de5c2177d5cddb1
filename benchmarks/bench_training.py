"""Training throughput: the default training setup beside plain SB3 PPO on CartPole-v1.

    python benchmarks/bench_training.py [--steps 65536] [--repeats 3]

Both learn for ``--steps`` environment steps with the same number of envs (a DummyVecEnv of
``n_envs`` from training/train.py's defaults), one after the other, ``--repeats`` times; the
figures are medians of steps per second (rollouts and gradient updates together) and the ratio
is taken within each repeat. The ButtonUp side is exactly the default training run's model,
envs and opponent pool, without its periodic evaluations and checkpoints. CartPole uses SB3's
default PPO hyperparameters with the same n_steps as the training run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "training"))

from train import TrainConfig, make_model, resolve
from train import make_vec_env as make_training_envs


def buttonup(config: TrainConfig, steps: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder)
        (run_dir / "snapshots").mkdir()
        venv = make_training_envs(config, run_dir)
        model = make_model(config, venv)
        start = time.perf_counter()
        model.learn(steps)
        return model.num_timesteps / (time.perf_counter() - start)


def cartpole(config: TrainConfig, steps: int) -> float:
    venv = make_vec_env("CartPole-v1", n_envs=config.n_envs, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=config.n_steps, seed=0, device="cpu")
    start = time.perf_counter()
    model.learn(steps)
    return model.num_timesteps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=65_536, help="steps per side and repeat")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (medians are reported)")
    args = parser.parse_args()
    if min(args.steps, args.repeats) < 1:
        parser.error(f"--steps and --repeats must be >= 1, got {args.steps} and {args.repeats}")
    config = resolve(TrainConfig())
    th.set_num_threads(config.threads)
    ours, theirs, ratios = [], [], []
    for _ in range(args.repeats):
        cart = cartpole(config, args.steps)
        button = buttonup(config, args.steps)
        ours.append(button)
        theirs.append(cart)
        ratios.append(button / cart)
    print(
        f"training steps per second, {config.n_envs} envs, median of {args.repeats} repeats "
        f"of {args.steps:,} steps"
    )
    print(
        f"  ButtonUp default training (MaskablePPO, {config.encoding}): "
        f"{statistics.median(ours):,.0f}"
    )
    print(
        f"  CartPole-v1, SB3 PPO MlpPolicy:                      {statistics.median(theirs):,.0f}"
    )
    print(
        f"ratio: {statistics.median(ratios):.2f} (median of the per-repeat ratios: "
        + ", ".join(f"{r:.2f}" for r in ratios)
        + ")"
    )


if __name__ == "__main__":
    main()
