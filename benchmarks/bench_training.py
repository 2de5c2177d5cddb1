"""Training throughput: the default training setup, that of commit 0a25748, and SB3 PPO on CartPole.

    python benchmarks/bench_training.py [--steps 131072] [--repeats 5] [--warmup 16384]
                                        [--reference DIR]
    python benchmarks/bench_training.py --profile [--steps 65536]
    python benchmarks/bench_training.py --workers [--steps 1048576] [--repeats 3]

Three learners run one after the other, ``--repeats`` times, each for ``--steps`` environment
steps; the figures are medians of steps per second (rollouts and gradient updates together),
and the ratios are taken within each repeat (the machine is shared and noisy). Each learner
first runs ``--warmup`` steps untimed in the process that times it, as timeit and
pytest-benchmark warm up: the first calls of a process (numba's kernels loaded from their
cache, torch's and onnxruntime's first passes) cost a training run once, not every rollout:

* ``default``: exactly the default training run's model, envs and opponent pool
  (training/train.py's defaults: pure self-play, against snapshots of the learner; the
  first is written before the first step, as train.py does), without its periodic
  evaluations and checkpoints;
* ``default, numpy env``: the same with the batched env's numpy backend (``backend="numpy"``,
  the reference implementation beside the compiled kernels);
* ``before``: the defaults of commit 0a25748, the baseline of the fast self-play recipe (64
  envs x 64 steps, separate float32 actor and critic layers with the dense first layer, the
  pooled critic, two torch threads, the numpy env, three rounds in four at random starts, the
  newest snapshot in half of the rounds, sb3-contrib's own rollout buffer), the same
  otherwise;
* ``CartPole-v1``: SB3's PPO with its default hyperparameters and MlpPolicy, 8 envs;
* with ``--reference DIR``, ``reference``: the default training setup of another checkout of
  this repository, its own code and its own defaults, timed in a subprocess (``DIR`` first on
  its ``sys.path``) in each repeat beside the others. ``before`` runs today's code with the old
  defaults, so it also gains from every change of the code that is not a default (the sparse
  first layer, for one); ``reference`` is the old default as it really ran. For the defaults
  before the fast self-play recipe::

      git worktree add --detach ../buttonup-0a25748 0a25748
      python benchmarks/bench_training.py --reference ../buttonup-0a25748

  The checkout needs a ``benchmarks/bench_training.py`` with ``buttonup(config, steps)``,
  ``TrainConfig`` and ``resolve`` (commit 0a25748 and later have them).

For the ButtonUp setups it also reports where the time goes: the share spent collecting
rollouts (env steps and the policy's forward passes) against the gradient updates.

``--workers`` instead times whole runs of training/train.py, the default training (its
periodic evaluations and checkpoints put past the end), with ``--workers 1``, ``2`` and the
machine's physical cores where it has more (``auto``), one after the other in each repeat: the
steps of all workers per second of worker 0's training time (the ``train_seconds`` of its last
checkpoint: the processes' start and the final judging left out), and the ratios to one worker
within each repeat.

``--profile`` instead runs the default setup once with timers around the batched env's step
and the ONNX snapshots' inference, and splits the run's time: the gradient updates, and in the
rollouts the env's step (the snapshots' inference, the kernels, SB3VecEnv's infos) and the
rest (the policy's forward passes, SB3's rollout buffer).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import checkouts  # benchmarks/checkouts.py, beside this script
import torch as th
from sb3_contrib.common.maskable.buffers import MaskableRolloutBuffer
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from buttonup_env.envs.vector import ButtonUpVectorEnv
from training import factories
from training.config import SELF_PLAY, TrainConfig, resolve
from training.distributed import auto_workers
from training.factories import make_model, write_snapshot
from training.factories import make_vec_env as make_training_envs

BEFORE = dict(
    n_envs=64,
    n_steps=64,
    shared=False,
    bfloat16=False,
    threads=2,
    random_start=0.75,
    opponents=dataclasses.replace(SELF_PLAY, newest=0.5),
    critic="pooled",
    active_features=False,
)
"""The training defaults of commit 0a25748, which the ``before`` setup times on the numpy env and
sb3-contrib's own rollout buffer, as that commit ran them."""


class NumpyBatch(ButtonUpVectorEnv):
    """The batched env on its numpy backend, for ``factories.make_vec_env`` to build."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, backend="numpy", **kwargs)  # type: ignore[arg-type]


@contextlib.contextmanager
def numpy_backend() -> Iterator[None]:
    """train.py's batched env on the numpy backend while inside."""
    compiled = factories.ButtonUpVectorEnv
    factories.ButtonUpVectorEnv = NumpyBatch
    try:
        yield
    finally:
        factories.ButtonUpVectorEnv = compiled


@contextlib.contextmanager
def sb3_rollout_buffer() -> Iterator[None]:
    """train.py's models with sb3-contrib's own rollout buffer (instead of TensorRolloutBuffer)
    while inside."""
    faster = factories.TensorRolloutBuffer
    factories.TensorRolloutBuffer = MaskableRolloutBuffer
    try:
        yield
    finally:
        factories.TensorRolloutBuffer = faster


class TimeSplit(BaseCallback):
    """Wall time spent collecting rollouts and in the updates between them."""

    def __init__(self) -> None:
        super().__init__()
        self.rollout = self.update = 0.0
        self._mark = time.perf_counter()

    def _on_rollout_start(self) -> None:
        now = time.perf_counter()
        self.update += now - self._mark
        self._mark = now

    def _on_rollout_end(self) -> None:
        now = time.perf_counter()
        self.rollout += now - self._mark
        self._mark = now

    def _on_training_end(self) -> None:
        self._on_rollout_start()

    def _on_step(self) -> bool:
        return True


def buttonup(config: TrainConfig, steps: int) -> tuple[float, float]:
    """Steps per second, and the share of the time spent collecting rollouts, of ``config``
    trained in this one process (so at one worker's learning rates, whatever ``workers``
    resolved to)."""
    config = dataclasses.replace(config, workers=1)
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder)
        (run_dir / "snapshots").mkdir()
        venv = make_training_envs(config, run_dir)
        model = make_model(config, venv)
        write_snapshot(model, run_dir)  # as train.py does: pure self-play's first opponent
        split = TimeSplit()
        start = time.perf_counter()
        split._mark = start
        model.learn(steps, callback=split)
        rate = model.num_timesteps / (time.perf_counter() - start)
        venv.close()
        return rate, split.rollout / (split.rollout + split.update)


@contextlib.contextmanager
def timed(owner: type, name: str, totals: dict[str, float]) -> Iterator[None]:
    """Add the wall time of every call of ``owner.name`` to ``totals[name]`` while inside."""
    method = getattr(owner, name)

    def wrapper(*args: object, **kwargs: object) -> object:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            totals[name] += time.perf_counter() - start

    totals[name] = 0.0
    setattr(owner, name, wrapper)
    try:
        yield
    finally:
        setattr(owner, name, method)


def profile(config: TrainConfig, steps: int) -> None:
    """Where one run of ``config`` spends its time: timers around the env's step, the ONNX
    snapshots' inference, and the rollouts and updates (TimeSplit)."""
    from buttonup_env.learn.sb3 import SB3VecEnv
    from buttonup_env.players.policy import OnnxPolicy

    totals: dict[str, float] = {}
    with (
        timed(SB3VecEnv, "step_wait", totals),
        timed(ButtonUpVectorEnv, "step", totals),
        timed(OnnxPolicy, "logits", totals),
    ):
        with tempfile.TemporaryDirectory() as folder:
            run_dir = Path(folder)
            (run_dir / "snapshots").mkdir()
            venv = make_training_envs(config, run_dir)
            model = make_model(config, venv)
            write_snapshot(model, run_dir)
            split = TimeSplit()
            start = time.perf_counter()
            split._mark = start
            model.learn(steps, callback=split)
            total = time.perf_counter() - start
            venv.close()
    rows = [
        ("collecting rollouts", split.rollout),
        ("  the batched env's step, SB3VecEnv.step_wait", totals["step_wait"]),
        ("    ButtonUpVectorEnv.step", totals["step"]),
        ("      the ONNX snapshots' inference (OnnxPolicy.logits)", totals["logits"]),
        (
            "      the rest: the kernels and the Python around them",
            totals["step"] - totals["logits"],
        ),
        ("    SB3VecEnv's infos (one dict per env)", totals["step_wait"] - totals["step"]),
        (
            "  the rest: the policy's forward passes, SB3's buffer",
            split.rollout - totals["step_wait"],
        ),
        ("gradient updates", split.update),
    ]
    print(
        f"where a default run of {steps:,} steps spends its time: {total:.1f} s, "
        f"{steps / total:,.0f} steps a second"
    )
    for label, seconds in rows:
        print(f"  {label:58s} {seconds:7.2f} s  {100 * seconds / total:5.1f}%")


REFERENCE_CHILD = """
import json, sys
import torch as th
sys.path.insert(0, sys.argv[1] + "/benchmarks")
import bench_training as bench
config = bench.resolve(bench.TrainConfig())
th.set_num_threads(config.threads)
if int(sys.argv[3]):
    bench.buttonup(config, int(sys.argv[3]))  # warm-up, untimed
rate, share = bench.buttonup(config, int(sys.argv[2]))
print(json.dumps(dict(rate=rate, share=share, threads=config.threads, n_envs=config.n_envs,
                      n_steps=config.n_steps, batch_size=config.batch_size)))
"""
"""What the subprocess of ``--reference`` runs: the checkout's own benchmark of its default."""


def setup(name: str, config: TrainConfig, steps: int) -> tuple[float, float]:
    """:func:`buttonup` for one of main()'s setups: ``default``, ``default, numpy env`` (the
    numpy backend) or ``before`` (the numpy backend and sb3-contrib's rollout buffer)."""
    th.set_num_threads(config.threads)
    with contextlib.ExitStack() as stack:
        if name != "default":
            stack.enter_context(numpy_backend())
        if name == "before":
            stack.enter_context(sb3_rollout_buffer())
        return buttonup(config, steps)


def cartpole(steps: int) -> float:
    venv = make_vec_env("CartPole-v1", n_envs=8, seed=0)
    model = PPO("MlpPolicy", venv, seed=0, device="cpu")
    start = time.perf_counter()
    model.learn(steps)
    return model.num_timesteps / (time.perf_counter() - start)


def train_py(workers: int, steps: int) -> float:
    """Steps per second of training of ``python training/train.py --workers WORKERS`` with the
    default training for ``steps`` steps (in a temporary folder), by its last checkpoint."""
    never = str(10**10)  # past the end: the largest interval a run takes
    with tempfile.TemporaryDirectory() as runs:
        args = ["--workers", str(workers), "--total-steps", str(steps), "--minutes", "0",
                "--eval-every", never, "--checkpoint-every", never, "--eval-matches", "2",
                "--ladder-matches", "0", "--final-eval-matches", "2", "--no-progress",
                "--runs-dir", runs, "--run-name", "bench"]  # fmt: skip
        root = Path(__file__).resolve().parent.parent
        paths = [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]
        done = subprocess.run(
            [sys.executable, str(root / "training" / "train.py"), *args],
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(paths)),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            raise SystemExit(
                f"train.py --workers {workers} failed (exit {done.returncode}):\n{tail}"
            )
        latest = json.loads((Path(runs) / "bench" / "checkpoints" / "latest.json").read_text())
        return float(latest["steps"] / latest["progress"]["train_seconds"])


def workers_row(steps: int, repeats: int) -> None:
    """Print the steps per second of train.py with 1, 2 and all physical cores' workers."""
    counts = sorted({1, 2, auto_workers()})
    rates: dict[int, list[float]] = {n: [] for n in counts}
    for _ in range(repeats):
        for workers in counts:
            rates[workers].append(train_py(workers, steps))
    print(
        f"train.py steps per second (all workers, per second of training), median of {repeats} "
        f"repeats of {steps:,} steps, the default training"
    )
    for workers in counts:
        print(f"  --workers {workers}: {statistics.median(rates[workers]):>8,.0f}")
    for workers in counts[1:]:
        ratios = [m / o for m, o in zip(rates[workers], rates[1], strict=True)]
        print(
            f"workers {workers} / workers 1: {statistics.median(ratios):.2f} (per repeat: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + ")"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=131_072, help="steps per learner and repeat")
    parser.add_argument("--repeats", type=int, default=5, help="repeats (medians are reported)")
    parser.add_argument(
        "--warmup",
        type=int,
        default=16_384,
        help="steps each learner first runs untimed in the process that times it (0: none)",
    )
    parser.add_argument("--profile", action="store_true", help="where a default run's time goes")
    parser.add_argument(
        "--workers",
        action="store_true",
        help="time train.py with --workers 1, 2 and all physical cores instead",
    )
    parser.add_argument(
        "--reference",
        type=Path,
        metavar="DIR",
        help="also time the default setup of this checkout (e.g. a git worktree of 0a25748), "
        "its own code, in a subprocess in each repeat",
    )
    args = parser.parse_args()
    if min(args.steps, args.repeats) < 1:
        parser.error(f"--steps and --repeats must be >= 1, got {args.steps} and {args.repeats}")
    if args.warmup < 0:
        parser.error(f"--warmup must be >= 0 (0: no warm-up), got {args.warmup}")
    if args.profile and args.reference is not None:
        parser.error(
            "--reference times a checkout beside the default; --profile times only the "
            "default, give one of them"
        )
    commit = None
    if args.reference is not None:
        try:
            commit = checkouts.describe(args.reference, "bench_training.py")
        except ValueError as error:
            parser.error(str(error))
    if args.workers:
        workers_row(args.steps, args.repeats)
        return
    default = resolve(TrainConfig())
    before = resolve(dataclasses.replace(default, **BEFORE))
    if args.profile:
        th.set_num_threads(default.threads)
        profile(default, args.steps)
        return
    setups = (("default", default), ("default, numpy env", default), ("before", before))
    names = (*(name for name, _ in setups), "CartPole-v1", "reference")
    rates: dict[str, list[float]] = {name: [] for name in names}
    shares: dict[str, list[float]] = {name: [] for name in (*dict(setups), "reference")}
    described = ""
    if args.warmup:  # first calls (numba's kernels loaded, torch's first passes), untimed
        cartpole(args.warmup)
        for name, config in setups:
            setup(name, config, args.warmup)
    for _ in range(args.repeats):
        if args.reference is not None:
            timed_there = checkouts.run(args.reference, REFERENCE_CHILD, args.steps, args.warmup)
            rates["reference"].append(timed_there["rate"])
            shares["reference"].append(timed_there["share"])
            described = (
                f"{timed_there['n_envs']:.0f} envs x {timed_there['n_steps']:.0f}, batch "
                f"{timed_there['batch_size']:.0f}, {timed_there['threads']:.0f} "
                f"thread{'s' if timed_there['threads'] > 1 else ''}"
            )
        th.set_num_threads(default.threads)
        rates["CartPole-v1"].append(cartpole(args.steps))
        for name, config in setups:
            rate, share = setup(name, config, args.steps)
            rates[name].append(rate)
            shares[name].append(share)
    med = {name: statistics.median(values) for name, values in rates.items() if values}
    print(f"training steps per second, median of {args.repeats} repeats of {args.steps:,} steps")
    for name, config in setups:
        print(
            f"  ButtonUp {name:18s} ({config.n_envs} envs x {config.n_steps}, batch "
            f"{config.batch_size}, {'shared' if config.shared else 'separate'} "
            f"{'x'.join(map(str, config.hidden))} {'bfloat16' if config.bfloat16 else 'float32'}"
            f"{', active features' if config.active_features else ''}"
            f", {config.critic} critic, {config.threads} "
            f"thread{'s' if config.threads > 1 else ''}): "
            f"{med[name]:>8,.0f}  ({100 * statistics.median(shares[name]):.0f}% of the time "
            "collecting rollouts, the rest in updates)"
        )
    if commit is not None:
        print(
            f"  ButtonUp reference, {commit}'s own code and defaults ({described}): "
            f"{med['reference']:>8,.0f}  ({100 * statistics.median(shares['reference']):.0f}% "
            "of the time collecting rollouts, the rest in updates)"
        )
    print(f"  CartPole-v1, SB3 PPO MlpPolicy, 8 envs: {med['CartPole-v1']:>8,.0f}")
    compiled = [d / p for d, p in zip(rates["default"], rates["default, numpy env"], strict=True)]
    print(
        f"default / default with the numpy env: {statistics.median(compiled):.2f} (per repeat: "
        + ", ".join(f"{r:.2f}" for r in compiled)
        + ")"
    )
    speedups = [d / p for d, p in zip(rates["default"], rates["before"], strict=True)]
    print(
        f"default / before: {statistics.median(speedups):.2f} (per repeat: "
        + ", ".join(f"{r:.2f}" for r in speedups)
        + ")"
    )
    if commit is not None:
        against = [d / r for d, r in zip(rates["default"], rates["reference"], strict=True)]
        print(
            f"default / reference ({commit}): {statistics.median(against):.2f} (per repeat: "
            + ", ".join(f"{r:.2f}" for r in against)
            + ")"
        )
    ratios = [d / c for d, c in zip(rates["default"], rates["CartPole-v1"], strict=True)]
    print(
        f"default / CartPole-v1: {statistics.median(ratios):.2f} (per repeat: "
        + ", ".join(f"{r:.2f}" for r in ratios)
        + ")"
    )


if __name__ == "__main__":
    main()
