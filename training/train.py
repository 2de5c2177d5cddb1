"""Self-play MaskablePPO training for Button Up!.

    python training/train.py                   # the full run behind the shipped buttonup-ppo
    python training/train.py --preset quick    # a few minutes: a first agent to look at
    python training/train.py --resume runs/NAME

What runs of it gave, each with its command, is in the results log, docs/experiments.md; the
settings and presets are training/config.py's (``TrainConfig``, ``PRESETS``).

Every run writes to its own folder ``runs/NAME`` (training/runfolder.py): ``config.json``,
TensorBoard logs (``tb/``), checkpoints (``checkpoints/latest.pt`` and ``latest.json``, every
``checkpoint_every`` steps and on Ctrl-C: tensors and JSON, read back without unpickling
anything), the opponent snapshots (``snapshots/``), the periodic evaluations
(``eval.jsonl``), and at the end the exported policies ``final.onnx`` and ``best.onnx`` with
their cards.

Ctrl-C (or kill) lets the update, evaluation or checkpoint under way finish, saves a checkpoint
and exits with 130; ``--resume`` continues from there. A second Ctrl-C stops at once.

Several processes train one run together (``--workers``: every core of this machine by
default; ``torchrun -m training.train`` across machines), data-parallel on torch.distributed:
training/workers.py. Worker 0 alone writes the run folder and prints.

What the agent learns from: the round margin (own strength minus the opponent's, divided by
the largest margin, 18) at the end of each one-round episode (``--reward sign``: +1, 0 or -1
for winning, tying or losing the round). The exact solver never enters the loss or the
reward; it only judges (the regret figures, and which snapshot is kept as ``best``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import gymnasium as gym
import numpy as np
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.utils import ConstantSchedule
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv
from tqdm import tqdm

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.envs.wrappers import RingObservation
from buttonup_env.game.encoding import ENCODINGS
from buttonup_env.learn.onnx_writer import export_onnx
from buttonup_env.learn.sb3 import SB3VecEnv, TensorRolloutBuffer
from buttonup_env.players.arena import evaluate_many
from buttonup_env.players.bots import BOT_NAMES
from buttonup_env.players.league import rate_against_ladder
from buttonup_env.players.policy import OnnxPolicy
from buttonup_env.players.selfplay import SNAPSHOT_GLOB, OpponentMix, OpponentPool
from buttonup_env.ui.cli import OutputError, fail, reason, run_cli
from training.common import learning_curve
from training.config import TrainConfig, learning_rates, make_policy, parse_config, resolve
from training.export import checkpoint_training, export_with_card
from training.runfolder import (
    Checkpoint,
    Progress,
    RunFolder,
    RunFolderError,
    read_evaluations,
    snapshot_path,
    take_resume_point,
    write_in,
)
from training.typed_json import FieldError
from training.workers import (
    MAX_LOCAL_WORKERS,
    WorkerGroup,
    WorkerLost,
    digest,
    from_environment,
    launch,
    rank_seed,
)

PERIODIC_EVAL_SEED = 1000
"""Layouts of the periodic evaluations (the same at every evaluation, so rows compare)."""


class PoolEnv(gym.Wrapper):
    """A training env that lets the trainer tell its opponent pool about a new snapshot
    (``venv.env_method("refresh_pool")``, also across processes)."""

    def __init__(self, env: gym.Env, pool: OpponentPool) -> None:
        super().__init__(env)
        self.pool = pool

    def refresh_pool(self) -> None:
        self.pool.refresh()

    def action_masks(self) -> np.ndarray:
        return self.env.get_wrapper_attr("action_masks")()


# --reward as ButtonUp-v0's reward argument (with episode="round": the margin / 18, or the sign)
ENV_REWARD = {"margin": "round", "sign": "match"}


def make_env(snapshot_dir: Path, mix: OpponentMix, encoding: str, reward: str) -> gym.Env:
    """One training env: ButtonUp-v0 seen through ``encoding``, one round per episode, the
    round's ``reward`` (margin / 18 or sign) at its end, and the opponent pool as opponent.
    The pool takes in a new snapshot when the trainer says so (never on a timer: which
    snapshot plays must not depend on timing)."""
    pool = OpponentPool(snapshot_dir, mix, refresh_seconds=math.inf)
    env = gym.make("ButtonUp-v0", opponent=pool, episode="round", reward=ENV_REWARD[reward])
    return PoolEnv(RingObservation(env, encoding=encoding), pool)


def make_worker_env(snapshot_dir: Path, mix: OpponentMix, encoding: str, reward: str) -> gym.Env:
    """``make_env`` in a SubprocVecEnv worker. Ctrl-C in a terminal reaches the whole process
    group; the workers ignore it and leave the stopping to the main process (``StopRequest``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return make_env(snapshot_dir, mix, encoding, reward)


def make_vec_env(config: TrainConfig, run_dir: Path, seed: int | None = None) -> VecEnv:
    """``n_envs`` training envs (seeded with ``seed``, default the config's), their opponent
    pools reading the snapshots of ``run_dir``."""
    if config.vec_env == "batched":
        # the trainer refreshes the pool after each snapshot: no timing in which one plays
        pool = OpponentPool(run_dir / "snapshots", config.opponents, refresh_seconds=math.inf)
        batch = ButtonUpVectorEnv(
            config.n_envs,
            opponent=pool,
            episode="round",
            reward=ENV_REWARD[config.reward],
            encoding=config.encoding,
            random_start=config.random_start,
        )
        venv: VecEnv = SB3VecEnv(batch)
        venv.seed(config.seed if seed is None else seed)
        return venv
    subproc = config.vec_env == "subproc"
    make = functools.partial(
        make_worker_env if subproc else make_env,
        run_dir / "snapshots",
        config.opponents,
        config.encoding,
        config.reward,
    )
    fns = [make] * config.n_envs
    venv = SubprocVecEnv(fns) if subproc else DummyVecEnv(fns)
    venv.seed(config.seed if seed is None else seed)
    return venv


def make_model(
    config: TrainConfig, venv: VecEnv, tensorboard_log: Path | None = None
) -> MaskablePPO:
    """A new MaskablePPO with ``config``'s network (made by ``config.make_policy``) and
    hyperparameters."""
    return MaskablePPO(
        lambda observation_space, action_space, lr_schedule: make_policy(config, lr_schedule),
        venv,
        learning_rate=learning_rates(config)[0],
        n_steps=config.n_steps,
        rollout_buffer_class=TensorRolloutBuffer,
        # with active_features the minibatches come as lists of active features already
        rollout_buffer_kwargs=(
            dict(view_size=ENCODINGS[config.encoding].view_size) if config.active_features else {}
        ),
        batch_size=config.batch_size,
        n_epochs=config.n_epochs,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        ent_coef=config.ent_coef_start,
        seed=config.seed,
        device="cpu",
        tensorboard_log=None if tensorboard_log is None else str(tensorboard_log),
    )


def write_snapshot(model: MaskablePPO, run_dir: Path, group: WorkerGroup | None = None) -> Path:
    """Add the learner as it is now to the opponent pool (``snapshots/step_N.onnx``). With
    several workers, worker 0 writes it and every other worker a copy of its bytes, into the
    folder its own pool reads."""
    path = snapshot_path(run_dir, model.num_timesteps)
    if group is None or group.leader:
        export_onnx(model.policy, path, {"steps": model.num_timesteps})
    if group is not None:
        data = group.share(path.read_bytes() if group.leader else None)
        if not group.leader:
            path.write_bytes(data)
    return path


# --- the run -------------------------------------------------------------------------------


def train(
    config: TrainConfig,
    command: str,
    on_eval: Callable[[dict], None] | None = None,
    group: WorkerGroup | None = None,
) -> Path:
    """Run a training, or resume one (``config.resume``); return the run folder.

    A new run's ``config`` is resolved (``training.config.resolve``); ``command`` is the
    command line that started it, for its config.json. ``on_eval`` is called with each periodic
    evaluation's row once it is in ``eval.jsonl`` (training/tune.py reports it to Optuna); an
    exception it raises ends the training, after the checkpoint is saved, and leaves
    ``train`` (the pruning of a trial). A run folder that cannot be resumed raises
    ``RunFolderError`` or ``FieldError``, before anything is trained.

    With ``group`` None this process is the run's first worker, and starts the others when the
    run has several (``config.workers``; training/workers.py). Under torchrun ``group`` is this
    process's place among the workers: worker 0 reads and writes the run folder and sends the
    others what they read of it; they ignore ``config``. A worker gone mid-run raises
    ``WorkerLost`` on the others, once worker 0 has saved a checkpoint.
    """
    scratch = None
    if group is None or group.leader:
        try:
            run, checkpoint = open_run(config, command, None if group is None else group.size)
        except (RunFolderError, FieldError):
            if group is not None:
                group.share(None)  # the other workers stop too
            raise
        if group is None and run.config.workers > 1:  # type: ignore[operator]
            if run.config.workers > MAX_LOCAL_WORKERS:  # type: ignore[operator]
                raise RunFolderError(
                    f"{run.path}/config.json asks for {run.config.workers} workers; this "
                    f"machine starts at most {MAX_LOCAL_WORKERS} (four per logical CPU)"
                )
            group = launch(run.config.workers)  # type: ignore[arg-type]
        if group is not None:
            group.share(run.worker_files(checkpoint is not None))
    else:
        files = group.share()
        if files is None:  # worker 0 refused the run, and said why
            group.close()
            raise SystemExit(2)
        scratch = Path(tempfile.mkdtemp(prefix=f"buttonup-worker{group.rank}-"))
        run = RunFolder.mirror(files, scratch)
        checkpoint = run.read_checkpoint("latest") if "checkpoints/latest.json" in files else None
    try:
        return train_worker(run, checkpoint, on_eval, group)
    finally:
        if group is not None:
            group.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def open_run(
    config: TrainConfig, command: str, workers: int | None
) -> tuple[RunFolder, Checkpoint | None]:
    """The run folder of ``config``: a new one (``config`` resolved), or the one
    ``config.resume`` names with its latest checkpoint, the evaluations and snapshots past it
    removed (a run killed after that checkpoint left them; it writes them again). ``workers``:
    the workers torchrun started, which must be the run's; None for the run's own number,
    which ``config.workers`` may give again but not change."""
    if config.resume is None:
        return RunFolder.create(config, command), None
    run = RunFolder.open(config.resume)
    asked = config.workers if workers is None else workers
    if asked not in ("auto", run.config.workers):
        how = "leave --workers out" if workers is None else f"start {run.config.workers} in all"
        raise RunFolderError(
            f"{run.path} was trained by {run.config.workers} worker(s) and resumes with as many, "
            f"not {asked}: each worker's games and generators are in its checkpoint; {how}"
        )
    checkpoint = run.read_checkpoint("latest")
    run.finish_checkpoint("latest", checkpoint)  # a save that a kill stopped part-way
    run.read_evaluations()  # checked now: the learning curve reads them after training
    run.forget_after(checkpoint.steps)
    return run, checkpoint


def worker_config(config: TrainConfig, rank: int) -> TrainConfig:
    """What worker ``rank`` of the run ``config`` trains with: the run's settings (its own
    ``n_envs`` games, its own minibatches of ``batch_size``, as CleanRL's multi-GPU PPO: a
    worker's share of a rollout and an update is a whole process's work, so that adding workers
    adds throughput) and its own seed (``training.workers.rank_seed``)."""
    return dataclasses.replace(config, seed=rank_seed(config.seed, rank))


def train_worker(
    run: RunFolder,
    checkpoint: Checkpoint | None,
    on_eval: Callable[[dict], None] | None,
    group: WorkerGroup | None,
) -> Path:
    """This worker's part of the run in ``run`` (from ``checkpoint`` when it resumes): its
    envs and model, its training, and for worker 0 the export at the end."""
    config = run.config
    rank = 0 if group is None else group.rank
    mine = worker_config(config, rank)
    progress = Progress() if checkpoint is None else checkpoint.progress
    th.set_num_threads(config.threads)
    # without a saved env state (dummy, subproc), a resumed run must not replay the layouts
    # of its start: the seed is offset by the steps done
    venv = make_vec_env(mine, run.path, mine.seed + (checkpoint.steps if checkpoint else 0))
    model = make_model(mine, venv, tensorboard_log=run.folder("tb") if rank == 0 else None)
    try:
        if group is not None:
            group.average_gradients(model.policy.parameters())
        if checkpoint is None:
            if group is not None:
                group.broadcast_parameters(model.policy)  # worker 0's initial weights
            write_snapshot(model, run.path, group)  # pure self-play has an opponent from the start
            progress.next_snapshot = config.snapshot_every  # type: ignore[assignment]
            budget = f" or {config.minutes:g} minutes" if config.minutes else ""
            workers = f" with {config.workers} workers" if group is not None else ""
            say(group, f"training in {run.path} for {config.total_steps:,} steps{budget}{workers}")
        else:  # the weights, the optimiser, and with the batched env its games
            run.load_checkpoint(model, checkpoint, rank=rank)
            say(
                group,
                f"resuming {run.path} at step {model.num_timesteps:,} of {config.total_steps:,}",
            )
        finished = learn(model, run, progress, on_eval, group)
        if finished and rank == 0:
            finish(model, run, progress)
    except KeyboardInterrupt:  # a second Ctrl-C, or one during the export: --resume redoes it
        finished = False
    except WorkerLost as error:
        if rank == 0:
            draw_learning_curve(run.path)
            raise WorkerLost(
                f"{error}: the run stopped at step {model.num_timesteps:,}, checkpoint saved; "
                f"continue it with: python training/train.py --resume {run.path}"
            ) from None
        raise
    finally:  # learn() made a logger: its TensorBoard writer holds a thread and a file open
        venv.close()  # (tune.py runs many trainings in one process)
        if hasattr(model, "_logger"):
            model.logger.close()
    if not finished:
        if rank == 0:
            stopped(model, run.path)
        raise SystemExit(130)
    return run.path


def say(group: WorkerGroup | None, message: str) -> None:
    """Print ``message`` once for the run: worker 0 prints, the other workers do not."""
    if group is None or group.leader:
        print(message)


def learn(
    model: MaskablePPO,
    run: RunFolder,
    progress: Progress,
    on_eval: Callable[[dict], None] | None,
    group: WorkerGroup | None = None,
) -> bool:
    """Train ``model`` until its budget is spent or a stop is asked (Ctrl-C or kill: the update,
    evaluation or checkpoint under way finishes first), then save a checkpoint; return whether
    the budget was spent. The learning curve ends with an evaluation where training did.

    With several workers (``group``) every worker trains; they stop together, as they agree at
    each rollout's start (:class:`Agree`), and worker 0 writes what is written."""
    config = run.config
    stop = StopRequest(quiet=group is not None and not group.leader)
    agree = None if group is None else Agree(group, config, progress, stop, model.n_envs)
    periodic = Periodic(run, progress, stop, on_eval, group, agree)
    callbacks = [Clock(progress), Schedules(config, progress), periodic]
    with stop:
        try:
            if model.num_timesteps < config.total_steps:  # type: ignore[operator]
                model.learn(
                    config.total_steps - model.num_timesteps,  # type: ignore[operator]
                    callback=CallbackList([agree, *callbacks] if agree else callbacks),
                    reset_num_timesteps=False,
                    tb_log_name="ppo",
                )
        except BaseException:  # a second Ctrl-C (maybe mid-update), on_eval's exception, or
            save_on_exit(model, run, progress, stop.requested, True, group)  # a worker lost
            raise
        requested = stop.requested if agree is None else agree.requested
        save_on_exit(model, run, progress, requested, False, group)
        if periodic.failure is not None:  # on_eval's, held until every worker had stopped
            raise periodic.failure
        if group is not None and not group.leader:
            return not requested and budget_spent(config, model.num_timesteps, progress)
        if requested or not budget_spent(config, model.num_timesteps, progress):
            return False
        print(stop_reason(config, model.num_timesteps, progress))
        if progress.last_eval_steps != model.num_timesteps:  # the other workers are done
            periodic.evaluate(together=False)
            model.logger.dump(model.num_timesteps)
            run.save_checkpoint(model, progress)
        return not stop.requested


def save_on_exit(
    model: MaskablePPO,
    run: RunFolder,
    progress: Progress,
    stop_requested: bool,
    broken_off: bool,
    group: WorkerGroup | None = None,
) -> None:
    """The checkpoint written when ``model.learn`` ends, with the point a resumed run goes on
    from (``progress.resume``, kept by :class:`Periodic` at each rollout's start):

    - learn broken off by an exception (a second Ctrl-C, maybe mid-update, or a worker lost):
      no resume point, a resumed run starts new episodes; worker 0 writes it alone;
    - an update since the last resume point: a new one, at the start of the next rollout;
    - stopped (``stop_requested``) within a rollout whose steps reached no update: the step
      count goes back to the rollout's start (the weights are unchanged since), where a
      resumed run plays the rollout again exactly;
    - the budget spent within such a rollout: no resume point (the run is over; a resume of
      it only exports it again).
    """
    point = progress.resume
    if point is None or broken_off:
        progress.resume = None
    elif point.n_updates != model._n_updates:
        progress.resume = take_resume_point(model)
    elif stop_requested:
        model.num_timesteps = point.steps
    else:
        progress.resume = None
    if broken_off and group is not None:  # the other workers may be gone: no collective
        progress.resume_others = ()
        if group.leader:
            run.save_checkpoint(model, progress)
        return
    save_latest(model, run, progress, group)


def save_latest(
    model: MaskablePPO, run: RunFolder, progress: Progress, group: WorkerGroup | None
) -> None:
    """Write the checkpoint ``latest`` with ``progress``. With several workers every worker
    calls it at the same step: worker 0 gathers their resume points into
    ``progress.resume_others`` (each worker's ``progress.resume`` is its own) and the digests
    of their weights, which must be its own, and writes it."""
    if group is None:
        run.save_checkpoint(model, progress)
        return
    gathered = group.gather((progress.resume, digest(model.policy)))
    if gathered is None:
        return
    points, digests = zip(*gathered, strict=True)
    if len(set(digests)) > 1:
        raise RuntimeError(
            "the workers' weights differ (their SHA-256 digests: "
            f"{', '.join(d[:12] for d in digests)}); every update should keep them equal"
        )
    progress.resume_others = tuple(points[1:]) if points[0] is not None else ()
    run.save_checkpoint(model, progress)


def stopped(model: MaskablePPO, run_dir: Path) -> NoReturn:
    """Leave an interrupted run: say how to continue it, exit with 130 (as after Ctrl-C)."""
    draw_learning_curve(run_dir)
    print(
        f"\ninterrupted at step {model.num_timesteps:,}; checkpoint saved. Continue with:\n"
        f"  python training/train.py --resume {run_dir}"
    )
    raise SystemExit(130)


def finish(model: MaskablePPO, run: RunFolder, progress: Progress) -> None:
    """Export the final policy and the lowest-regret checkpoint with their cards, each judged
    against the random and the perfect bot (``final_eval_matches`` matches each), and print
    the figures."""
    draw_learning_curve(run.path)
    matches = run.config.final_eval_matches
    minutes = round(progress.train_seconds / 60, 1)
    policies = [(run.export_path("final"), model.policy, model.num_timesteps)]
    trainings = [{"checkpoint": "latest", "steps": model.num_timesteps, "minutes": minutes}]
    if run.has_checkpoint("best"):
        best_policy, best = run.load_policy("best")
        training = checkpoint_training(run, "best", best)
        training["chosen_by"] = "lowest regret against the perfect bot in periodic evaluations"
        policies.append((run.export_path("best"), best_policy, best.steps))
        trainings.append(training)
    print(
        f"\nexporting and judging {' and '.join(p.name for p, _, _ in policies)}: {matches} "
        "matches against the random and the perfect bot each"
    )
    rows = []
    for (path, policy, steps), training in zip(policies, trainings, strict=True):
        results = export_with_card(
            policy, path, run.card_config(), training, matches, matches, quiet=True
        )
        rows.append((path, steps, results["random"], results["perfect"]))
    print(
        f"{'':12s} {'steps':>11s}   {'against random: won, regret':>27s}   "
        "against perfect: won, regret"
    )
    for path, steps, rand, perfect in rows:
        print(
            f"{path.name:12s} {steps:>11,}   {rand.wins:>9}/{rand.matches} "
            f"({100 * rand.win_rate:5.1f}%), {rand.mean_regret:.3f}   {perfect.wins:>9}/"
            f"{perfect.matches} ({100 * perfect.win_rate:5.1f}%), {perfect.mean_regret:.3f}"
        )
    best_path = run.path / "best.onnx"
    print(
        "(regret: round points lost per decision against the exact solver's best move; "
        "0 is perfect play)\n"
        f"policy: {policies[0][0]} (card: {policies[0][0].with_suffix('.json')})\n"
        f"lowest-regret checkpoint: {best_path}\n"
        "judge it with 500 matches against the perfect bot and the exact exploitability:\n"
        f"  python training/evaluate.py --model {best_path} --opponent perfect --matches 500\n"
        f"  python training/evaluate.py --model {best_path} --opponent best-response"
    )


def draw_learning_curve(run_dir: Path) -> None:
    """``learning_curve.png`` from the run's periodic evaluations (drawn when training stops,
    not after every evaluation: matplotlib takes about half a second a picture)."""
    png = learning_curve(read_evaluations(run_dir), run_dir.name)
    if png is not None:
        write_in(run_dir, run_dir / "learning_curve.png", png)


# --- the budget and the callbacks ----------------------------------------------------------


def run_progress(config: TrainConfig, steps: int, progress: Progress) -> float:
    """How far the run is, from 0 to 1: by steps, or by time when that is further along."""
    done = steps / config.total_steps  # type: ignore[operator]
    if config.minutes:
        done = max(done, progress.train_seconds / (60 * config.minutes))
    return min(done, 1.0)


def budget_spent(config: TrainConfig, steps: int, progress: Progress) -> bool:
    """True once the run has its total_steps, or its minutes of training time."""
    return run_progress(config, steps, progress) >= 1.0


def stop_reason(config: TrainConfig, steps: int, progress: Progress) -> str:
    """Which budget ended the run, in a sentence."""
    minutes = progress.train_seconds / 60
    if steps >= config.total_steps:  # type: ignore[operator]
        return f"training stopped: {steps:,} steps done (--total-steps), in {minutes:.1f} minutes"
    return (
        f"training stopped: the time budget of {config.minutes:g} minutes is spent (--minutes), "
        f"at step {steps:,} of {config.total_steps:,}"
    )


class StopRequest:
    """Ctrl-C and ``kill`` (SIGTERM) during training, inside a ``with`` block.

    The first signal only asks the run to stop: the update, evaluation or checkpoint under way
    finishes, and training stops at the next environment step (``Periodic`` asks), so the
    checkpoint written then holds whole updates and the evaluation log has no gap. A second
    signal stops at once (``KeyboardInterrupt``). The previous handlers come back on exit.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, quiet: bool = False) -> None:
        self.requested = False
        self.quiet = quiet  # a worker other than worker 0: it says nothing
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopRequest:
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        if self.quiet:
            return
        # a raw write: print() here could re-enter a buffered write that the signal interrupted
        os.write(
            sys.stderr.fileno(),
            b"\nstopping once the work under way is saved (press Ctrl-C again to stop at once)\n",
        )


class Clock(BaseCallback):
    """Counts training wall time across resumes (``progress.train_seconds``)."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress
        self.last = time.monotonic()

    def _on_step(self) -> bool:
        now = time.monotonic()
        self.progress.train_seconds += now - self.last
        self.last = now
        return True


class Schedules(BaseCallback):
    """Linear decay of the entropy coefficient, and of the learning rate if
    ``learning_rate_end`` is set, over the whole run (steps or time budget)."""

    def __init__(self, config: TrainConfig, progress: Progress) -> None:
        super().__init__()
        self.config = config
        self.progress = progress  # its train_seconds, kept by Clock

    def _on_rollout_start(self) -> None:
        done = run_progress(self.config, self.num_timesteps, self.progress)
        c = self.config
        self.model.ent_coef = c.ent_coef_start + (c.ent_coef_end - c.ent_coef_start) * done
        self.logger.record("train/ent_coef", self.model.ent_coef)
        start, end = learning_rates(c)
        if end is not None:  # SB3 reads lr_schedule before each update
            self.model.lr_schedule = ConstantSchedule(start + (end - start) * done)

    def _on_step(self) -> bool:
        return True


class Agree(BaseCallback):
    """With several workers, the first callback of each: the steps of every worker count (SB3
    counts this worker's), and at each rollout's start the workers agree on worker 0's training
    time, which the time budget and the schedules follow, and on stopping: when any worker was
    asked to stop (Ctrl-C, kill, a pruned trial) or the time budget is spent, every worker
    stops at the rollout's first step, as one process would within it."""

    def __init__(
        self,
        group: WorkerGroup,
        config: TrainConfig,
        progress: Progress,
        stop: StopRequest,
        envs: int,
    ) -> None:
        super().__init__()
        self.group = group
        self.config = config
        self.progress = progress
        self.stop = stop
        self.others = (group.size - 1) * envs  # the steps of the other workers at each step
        self.requested = False
        """Whether a worker was asked to stop (agreed at the last rollout's start)."""
        self.out_of_time = False
        """Whether the time budget was spent (agreed at the last rollout's start)."""

    def _on_rollout_start(self) -> None:
        seconds, self.requested = self.group.agree(self.progress.train_seconds, self.stop.requested)
        self.progress.train_seconds = seconds
        minutes = self.config.minutes
        self.out_of_time = bool(minutes) and seconds >= 60 * minutes  # type: ignore[operator]

    def _on_step(self) -> bool:
        self.model.num_timesteps += self.others
        return True


def next_multiple(steps: int, every: int) -> int:
    """The first multiple of ``every`` after ``steps``: when something periodic is due next."""
    return (steps // every + 1) * every


class Periodic(BaseCallback):
    """Snapshots, evaluations and checkpoints at fixed step intervals, and the progress bar.

    With several workers (``group``) every worker takes each snapshot (worker 0 writes it, the
    others a copy) and each checkpoint (worker 0 gathers their resume points); worker 0
    evaluates, with worker 1 rating against the ladder meanwhile, and shows the bar. An
    exception of ``on_eval`` is then held (``failure``) and asks the run to stop, so that the
    workers stop together."""

    def __init__(
        self,
        run: RunFolder,
        progress: Progress,
        stop: StopRequest,
        on_eval: Callable[[dict], None] | None = None,
        group: WorkerGroup | None = None,
        agree: Agree | None = None,
    ) -> None:
        super().__init__()
        self.run = run
        self.config = run.config
        self.progress = progress  # saved in every checkpoint
        self.stop = stop
        self.on_eval = on_eval
        self.group = group
        self.agree = agree
        self.leader = group is None or group.leader
        self.failure: Exception | None = None
        self.bar: tqdm | None = None

    @property
    def steps(self) -> int:
        """Steps trained so far (read from the model: SB3 updates ``num_timesteps`` late)."""
        return self.model.num_timesteps

    def _on_training_start(self) -> None:
        if self.config.progress and self.leader:
            # in per mille of the run: the bar follows whichever budget binds, steps or minutes
            self.bar = tqdm(
                total=1000,
                initial=self._permille(),
                bar_format="{percentage:3.0f}%|{bar}| {desc} [{elapsed}<{remaining}]",
                dynamic_ncols=True,
                smoothing=0.05,
                mininterval=1.0 if sys.stderr.isatty() else 30.0,  # few lines in logs
            )
            self._describe()

    def _permille(self) -> int:
        return int(1000 * run_progress(self.config, self.steps, self.progress))

    def _describe(self) -> None:
        """The bar's text: steps of total_steps, and minutes of the budget when there is one."""
        c = self.config
        text = f"{self.steps:,}/{c.total_steps:,} steps"
        if c.minutes:
            text += f", {self.progress.train_seconds / 60:.1f}/{c.minutes:g} min"
        self.bar.set_description_str(text, refresh=False)  # type: ignore[union-attr]

    def _on_rollout_start(self) -> None:
        # SB3 calls this after the previous update, so the weights match num_timesteps
        c, p, steps = self.config, self.progress, self.steps
        if steps >= p.next_snapshot:
            p.next_snapshot = next_multiple(steps, c.snapshot_every)  # type: ignore[arg-type]
            self.snapshot()
        snapshots = len(list((self.run.path / "snapshots").glob(SNAPSHOT_GLOB)))
        self.logger.record("pool/size", min(snapshots, c.opponents.max_snapshots))
        if steps >= p.next_eval:
            p.next_eval = next_multiple(steps, c.eval_every)  # type: ignore[arg-type]
            self.evaluate()
        # the last thing before the rollout's first step: where a resumed run starts again
        p.resume = take_resume_point(self.model)
        if steps >= p.next_checkpoint:
            p.next_checkpoint = next_multiple(steps, c.checkpoint_every)  # type: ignore[arg-type]
            save_latest(self.model, self.run, p, self.group)

    def _on_step(self) -> bool:
        if self.bar is not None:
            permille = self._permille()
            if permille > self.bar.n:
                self._describe()
                self.bar.update(permille - self.bar.n)
        if self.agree is not None:  # several workers: they stop as agreed at the rollout's start
            if self.agree.requested or self.agree.out_of_time:
                return False
        elif self.stop.requested:
            return False
        if self.steps >= self.config.total_steps:  # type: ignore[operator]
            # stop exactly at the budget (SB3 would finish the rollout under way), except on a
            # rollout's last step: then SB3 finishes it, makes its update, and learn() ends
            return self.locals.get("n_steps", -2) + 1 == self.model.n_steps
        return self.agree is not None or not budget_spent(self.config, self.steps, self.progress)

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def snapshot(self) -> Path:
        path = write_snapshot(self.model, self.run.path, self.group)
        refresh_pools(self.training_env)  # the new snapshot plays from the next episode on
        return path

    def evaluate(self, together: bool = True) -> None:
        """Evaluate the learner against the fixed bots and rate it against the ladder; worker
        0 writes the row, the best checkpoint and the message. With several workers and
        ``together`` (every worker calls it at the same step), worker 1 plays the ladder's
        matches while worker 0 plays the bots' (their weights are equal, so is the policy
        each exports), halving the time the others wait; the figures are those one process
        gets. Without ``together`` worker 0 plays both."""
        c, p = self.config, self.progress
        helper = self.group is not None and together and self.group.size > 1 and c.ladder_matches
        rank = 0 if self.group is None else self.group.rank
        if rank > (1 if helper else 0):
            if helper:
                self.group.gather(None)  # type: ignore[union-attr]
            return
        with tempfile.TemporaryDirectory() as folder:  # this process's own, not the run's
            path = Path(folder) / "policy.onnx"
            export_onnx(self.model.policy, path, {"steps": self.steps})
            player = OnnxPolicy(path)  # evaluate_many plays it as arena.MEASURED, by no path

        def rate() -> dict[str, Any]:
            return rate_against_ladder(player, c.ladder, c.ladder_matches, PERIODIC_EVAL_SEED)

        if rank == 1:
            try:
                rating: Any = rate()
            except Exception as error:  # worker 0 raises it, as it would have itself
                rating = error
            self.group.gather(rating)  # type: ignore[union-attr]
            return
        row: dict[str, Any] = {"steps": self.steps, "minutes": round(p.train_seconds / 60, 2)}
        results = evaluate_many(player, BOT_NAMES, c.eval_matches, seed=PERIODIC_EVAL_SEED)  # type: ignore[arg-type]
        for name, result in zip(BOT_NAMES, results, strict=True):  # all the matches at once
            row[f"win_rate_{name}"] = result.win_rate
            row[f"regret_{name}"] = result.mean_regret
            self.logger.record(f"eval/win_rate_{name}", result.win_rate)
            self.logger.record(f"eval/regret_vs_{name}", result.mean_regret)
            self.logger.record(f"eval/round_margin_{name}", result.mean_round_margin)
            if name == "perfect":  # where in a round the mistakes sit (the first moves, so far)
                row["regret_by_move_perfect"] = result.to_dict()["regret_by_move"]
                self.logger.record("eval/regret_vs_perfect_first_move", result.regret_by_move[0])
        if c.ladder_matches:  # the rating on the league's scale, against a fixed ladder
            if helper:
                rating = self.group.gather(None)[1]  # type: ignore[union-attr,index]
                if isinstance(rating, Exception):
                    raise rating
            else:
                rating = rate()
            row.update(rating)
            for key in ("elo", "elo_low", "elo_high"):
                self.logger.record(f"eval/{key}", row[key])
        regret = float(row["regret_perfect"])
        p.last_eval_steps = self.steps
        if p.best_regret is None or regret < p.best_regret:
            p.best_regret, p.best_steps = regret, self.steps
            self.run.save_checkpoint(self.model, p, name="best")
        self.run.append_eval(row)
        message = f"step {self.steps:>10,}  regret vs perfect {regret:.3f}  win rate: " + ", ".join(
            f"{n} {100 * float(row[f'win_rate_{n}']):.0f}%" for n in BOT_NAMES
        )
        message += f"  Elo {row['elo']:.0f}" if "elo" in row else ""
        (self.bar.write if self.bar is not None else print)(message)
        if self.on_eval is None:
            return
        if self.group is None:
            self.on_eval(row)
            return
        try:
            self.on_eval(row)
        except Exception as error:  # the other workers are on their way to the next rollout
            self.failure = error
            self.stop.requested = True


def refresh_pools(venv: VecEnv) -> None:
    """Have the opponent pools of ``venv`` re-read the snapshot folder at their next draw."""
    batch = getattr(venv, "env", None)
    if isinstance(batch, ButtonUpVectorEnv):
        if batch.pool is not None:
            batch.pool.refresh()
    else:
        venv.env_method("refresh_pool")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    config = parse_config(argv, description=__doc__)
    try:  # a worker that torchrun started, or one that worker 0 started (--workers N)
        group = from_environment()
    except WorkerLost as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    if group is None or group.leader:
        try:
            config = checked(config, group)
        except ValueError as error:
            if group is not None:
                group.share(None)  # the other workers stop too
                group.close()
            fail(str(error))
    try:
        train(config, shlex.join(["python", "training/train.py", *argv]), group=group)
    except (RunFolderError, FieldError, OutputError) as error:  # a run folder that cannot be
        fail(str(error))  # resumed, or a file of it that cannot be written
    except OSError as error:  # a file that cannot be written: a full disk, say
        fail(f"cannot write {error.filename or 'a file of the run'} ({reason(error)})")
    except WorkerLost as error:  # worker 0 says it, with the checkpoint and how to go on
        if group is None or group.leader or not group.launched:
            where = "" if group is None or group.leader else f"worker {group.rank}: "
            print(f"error: {where}{error}", file=sys.stderr)
        raise SystemExit(1) from None


def checked(config: TrainConfig, group: WorkerGroup | None) -> TrainConfig:
    """The command line's ``config``, resolved for a new run (``ValueError`` for a bad
    setting); under torchrun with ``--workers`` the workers torchrun started (``group``)."""
    if group is not None:
        if config.workers not in ("auto", group.size):
            raise ValueError(
                f"--workers {config.workers}, but torchrun started {group.size} workers; "
                "leave --workers out under torchrun"
            )
        config = dataclasses.replace(config, workers=group.size)
    elif isinstance(config.workers, int) and config.workers > MAX_LOCAL_WORKERS:
        raise ValueError(
            f"--workers {config.workers} is more than this machine starts: at most "
            f"{MAX_LOCAL_WORKERS} (four per logical CPU; torchrun starts more across machines)"
        )
    return config if config.resume is not None else resolve(config)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore::DeprecationWarning")
    run_cli(main)
