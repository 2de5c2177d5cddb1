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

What the agent learns from: the round margin (own strength minus the opponent's, divided by
the largest margin, 18) at the end of each one-round episode (``--reward sign``: +1, 0 or -1
for winning, tying or losing the round). The exact solver never enters the loss or the
reward; it only judges (the regret figures, and which snapshot is kept as ``best``).
"""

from __future__ import annotations

import functools
import math
import os
import shlex
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
from training.config import TrainConfig, make_policy, parse_config, resolve
from training.export import checkpoint_training, export_with_card
from training.runfolder import (
    Progress,
    RunFolder,
    RunFolderError,
    read_evaluations,
    snapshot_path,
    take_resume_point,
    write_in,
)
from training.typed_json import FieldError

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
        learning_rate=config.learning_rate,
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


def write_snapshot(model: MaskablePPO, run_dir: Path) -> Path:
    """Add the learner as it is now to the opponent pool (``snapshots/step_N.onnx``)."""
    path = snapshot_path(run_dir, model.num_timesteps)
    export_onnx(model.policy, path, {"steps": model.num_timesteps})
    return path


# --- the run -------------------------------------------------------------------------------


def train(config: TrainConfig, command: str, on_eval: Callable[[dict], None] | None = None) -> Path:
    """Run a training, or resume one (``config.resume``); return the run folder.

    A new run's ``config`` is resolved (``training.config.resolve``); ``command`` is the
    command line that started it, for its config.json. ``on_eval`` is called with each periodic
    evaluation's row once it is in ``eval.jsonl`` (training/tune.py reports it to Optuna); an
    exception it raises ends the training, after the checkpoint is saved, and leaves
    ``train`` (the pruning of a trial). A run folder that cannot be resumed raises
    ``RunFolderError`` or ``FieldError``, before anything is trained.
    """
    if config.resume is None:
        run, checkpoint = RunFolder.create(config, command), None
    else:
        run = RunFolder.open(config.resume)
        checkpoint = run.read_checkpoint("latest")
        run.read_evaluations()  # checked now: the learning curve reads them after training
    config = run.config
    progress = Progress() if checkpoint is None else checkpoint.progress
    th.set_num_threads(config.threads)
    # without a saved env state (dummy, subproc), a resumed run must not replay the layouts
    # of its start: the seed is offset by the steps done
    venv = make_vec_env(config, run.path, config.seed + (checkpoint.steps if checkpoint else 0))
    model = make_model(config, venv, tensorboard_log=run.folder("tb"))
    try:
        if checkpoint is None:
            write_snapshot(model, run.path)  # pure self-play has an opponent from the start
            progress.next_snapshot = config.snapshot_every
            budget = f" or {config.minutes:g} minutes" if config.minutes else ""
            print(f"training in {run.path} for {config.total_steps:,} steps{budget}")
        else:  # the weights, the optimiser, and with the batched env its games
            run.load_checkpoint(model, checkpoint)
            print(f"resuming {run.path} at step {model.num_timesteps:,} of {config.total_steps:,}")
        finished = learn(model, run, progress, on_eval)
        if finished:
            finish(model, run, progress)
    except KeyboardInterrupt:  # a second Ctrl-C, or one during the export: --resume redoes it
        finished = False
    finally:  # learn() made a logger: its TensorBoard writer holds a thread and a file open
        venv.close()  # (tune.py runs many trainings in one process)
        if hasattr(model, "_logger"):
            model.logger.close()
    if not finished:
        stopped(model, run.path)
    return run.path


def learn(
    model: MaskablePPO,
    run: RunFolder,
    progress: Progress,
    on_eval: Callable[[dict], None] | None,
) -> bool:
    """Train ``model`` until its budget is spent or a stop is asked (Ctrl-C or kill: the update,
    evaluation or checkpoint under way finishes first), then save a checkpoint; return whether
    the budget was spent. The learning curve ends with an evaluation where training did."""
    config = run.config
    stop = StopRequest()
    periodic = Periodic(run, progress, stop, on_eval)
    with stop:
        try:
            if model.num_timesteps < config.total_steps:
                model.learn(
                    config.total_steps - model.num_timesteps,
                    callback=CallbackList([Clock(progress), Schedules(config, progress), periodic]),
                    reset_num_timesteps=False,
                    tb_log_name="ppo",
                )
        except BaseException:  # a second Ctrl-C (maybe mid-update), or on_eval's exception
            save_on_exit(model, run, progress, stop.requested, broken_off=True)
            raise
        save_on_exit(model, run, progress, stop.requested, broken_off=False)
        if stop.requested or not budget_spent(config, model.num_timesteps, progress):
            return False
        print(stop_reason(config, model.num_timesteps, progress))
        if progress.last_eval_steps != model.num_timesteps:
            periodic.evaluate()
            model.logger.dump(model.num_timesteps)
            run.save_checkpoint(model, progress)
        return not stop.requested


def save_on_exit(
    model: MaskablePPO, run: RunFolder, progress: Progress, stop_requested: bool, broken_off: bool
) -> None:
    """The checkpoint written when ``model.learn`` ends, with the point a resumed run goes on
    from (``progress.resume``, kept by :class:`Periodic` at each rollout's start):

    - learn broken off by an exception (a second Ctrl-C, maybe mid-update): no resume point,
      a resumed run starts new episodes;
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

    def __init__(self) -> None:
        self.requested = False
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
        if c.learning_rate_end is not None:  # SB3 reads lr_schedule before each update
            rate = c.learning_rate + (c.learning_rate_end - c.learning_rate) * done
            self.model.lr_schedule = ConstantSchedule(rate)

    def _on_step(self) -> bool:
        return True


def next_multiple(steps: int, every: int) -> int:
    """The first multiple of ``every`` after ``steps``: when something periodic is due next."""
    return (steps // every + 1) * every


class Periodic(BaseCallback):
    """Snapshots, evaluations and checkpoints at fixed step intervals, and the progress bar."""

    def __init__(
        self,
        run: RunFolder,
        progress: Progress,
        stop: StopRequest,
        on_eval: Callable[[dict], None] | None = None,
    ) -> None:
        super().__init__()
        self.run = run
        self.config = run.config
        self.progress = progress  # saved in every checkpoint
        self.stop = stop
        self.on_eval = on_eval
        self.bar: tqdm | None = None

    @property
    def steps(self) -> int:
        """Steps trained so far (read from the model: SB3 updates ``num_timesteps`` late)."""
        return self.model.num_timesteps

    def _on_training_start(self) -> None:
        if self.config.progress:
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
            self.run.save_checkpoint(self.model, p)

    def _on_step(self) -> bool:
        if self.bar is not None:
            permille = self._permille()
            if permille > self.bar.n:
                self._describe()
                self.bar.update(permille - self.bar.n)
        if self.stop.requested:
            return False
        if self.steps >= self.config.total_steps:  # type: ignore[operator]
            # stop exactly at the budget (SB3 would finish the rollout under way), except on a
            # rollout's last step: then SB3 finishes it, makes its update, and learn() ends
            return self.locals.get("n_steps", -2) + 1 == self.model.n_steps
        return not budget_spent(self.config, self.steps, self.progress)

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def snapshot(self) -> Path:
        path = write_snapshot(self.model, self.run.path)
        refresh_pools(self.training_env)  # the new snapshot plays from the next episode on
        return path

    def evaluate(self) -> None:
        c, p = self.config, self.progress
        with tempfile.TemporaryDirectory() as folder:  # this process's own, not the run's
            path = Path(folder) / "policy.onnx"
            export_onnx(self.model.policy, path, {"steps": self.steps})
            player = OnnxPolicy(path)  # evaluate_many plays it as arena.MEASURED, by no path
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
            row.update(rate_against_ladder(player, c.ladder, c.ladder_matches, PERIODIC_EVAL_SEED))
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
        if self.on_eval is not None:
            self.on_eval(row)


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
    if config.resume is None:
        try:
            config = resolve(config)
        except ValueError as error:
            fail(str(error))
    try:
        train(config, shlex.join(["python", "training/train.py", *argv]))
    except (RunFolderError, FieldError, OutputError) as error:  # a run folder that cannot be
        fail(str(error))  # resumed, or a file of it that cannot be written
    except OSError as error:  # a file that cannot be written: a full disk, say
        fail(f"cannot write {error.filename or 'a file of the run'} ({reason(error)})")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore::DeprecationWarning")
    run_cli(main)
