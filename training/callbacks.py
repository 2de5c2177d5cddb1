"""What runs inside SB3's ``learn()``: the stop request (Ctrl-C, kill), the clock and the
budgets, the schedules, the workers' agreement at each rollout, and the periodic work
(snapshots, evaluations, checkpoints, the progress bar)."""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import ConstantSchedule
from tqdm import tqdm

from buttonup_env.learn.round_starts import RoundStartValues
from buttonup_env.players.selfplay import SNAPSHOT_GLOB
from training.checkpoints import Checkpoints, Progress
from training.config import RunConfig, learning_rates
from training.distributed import Team, WorkerLost, digest
from training.factories import refresh_pools, write_snapshot
from training.periodic import evaluate_learner
from training.resume import ResumePoint, take_resume_point
from training.runfolder import EvalRow, RunFolder
from training.typed_json import from_json, to_json

# --- the budget ----------------------------------------------------------------------------


def run_progress(config: RunConfig, steps: int, progress: Progress) -> float:
    """How far the run is, from 0 to 1: by steps, or by time when that is further along."""
    done = steps / config.total_steps
    if config.minutes:
        done = max(done, progress.train_seconds / (60 * config.minutes))
    return min(done, 1.0)


def budget_spent(config: RunConfig, steps: int, progress: Progress) -> bool:
    """True once the run has its total_steps, or its minutes of training time."""
    return run_progress(config, steps, progress) >= 1.0


def stop_reason(config: RunConfig, steps: int, progress: Progress) -> str:
    """Which budget ended the run, in a sentence."""
    minutes = progress.train_seconds / 60
    if steps >= config.total_steps:
        return f"training stopped: {steps:,} steps done (--total-steps), in {minutes:.1f} minutes"
    return (
        f"training stopped: the time budget of {config.minutes:g} minutes is spent (--minutes), "
        f"at step {steps:,} of {config.total_steps:,}"
    )


def next_multiple(steps: int, every: int) -> int:
    """The first multiple of ``every`` after ``steps``: when something periodic is due next."""
    return (steps // every + 1) * every


# --- stopping -----------------------------------------------------------------------------


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


def save_latest(model: MaskablePPO, run: RunFolder, progress: Progress, team: Team) -> None:
    """Write the checkpoint ``latest`` with ``progress``. Every worker calls it at the same
    step: worker 0 gathers their resume points into ``progress.resume_others`` (each worker's
    ``progress.resume`` is its own) and the digests of their weights, which must be its own,
    and writes it."""
    mine = to_json(progress.resume) if team.together and progress.resume is not None else None
    gathered = team.gather([mine, digest(model.policy) if team.together else ""])
    if gathered is None:
        return
    if not all(isinstance(g, list) and len(g) == 2 and isinstance(g[1], str) for g in gathered):
        raise WorkerLost("a worker sent what is not a resume point and a digest")
    digests = [g[1] for g in gathered]
    if len(set(digests)) > 1:
        raise RuntimeError(
            "the workers' weights differ (their SHA-256 digests: "
            f"{', '.join(d[:12] for d in digests)}); every update should keep them equal"
        )
    progress.resume_others = ()
    if progress.resume is not None:  # the others' as JSON, read back as this reads a file
        progress.resume_others = tuple(
            from_json(ResumePoint, g[0], f"worker {rank}'s resume point")
            for rank, g in enumerate(gathered[1:], start=1)
        )
    Checkpoints(run).save(model, progress)


# --- the callbacks ------------------------------------------------------------------------


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
    """Linear decay of the entropy coefficient, of the learning rate if ``learning_rate_end``
    is set, and of the rounds' margins in the reward if their weights are not 1, over the
    whole run (steps or time budget)."""

    def __init__(self, config: RunConfig, progress: Progress) -> None:
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
        if (c.margin_weight, c.margin_weight_end) != (1.0, 1.0):  # the margins' schedule
            weight = c.margin_weight + (c.margin_weight_end - c.margin_weight) * done
            self.training_env.set_attr("round_reward_weight", weight)
            self.logger.record("train/margin_weight", weight)

    def _on_step(self) -> bool:
        return True


class Agree(BaseCallback):
    """With several workers, the first callback of each: the steps of every worker count (SB3
    counts this worker's), and at each rollout's start the workers agree on worker 0's training
    time, which the time budget and the schedules follow, and on stopping: when any worker was
    asked to stop (Ctrl-C, kill, a pruned trial) or the time budget is spent, every worker
    stops at the rollout's first step, as one process would within it."""

    def __init__(
        self, team: Team, config: RunConfig, progress: Progress, stop: StopRequest, envs: int
    ) -> None:
        super().__init__()
        self.team = team
        self.config = config
        self.progress = progress
        self.stop = stop
        self.others = (team.size - 1) * envs  # the steps of the other workers at each step
        self.requested = False
        """Whether a worker was asked to stop (agreed at the last rollout's start)."""
        self.out_of_time = False
        """Whether the time budget was spent (agreed at the last rollout's start)."""

    def _on_rollout_start(self) -> None:
        seconds, self.requested = self.team.agree(self.progress.train_seconds, self.stop.requested)
        self.progress.train_seconds = seconds
        minutes = self.config.minutes
        self.out_of_time = bool(minutes) and seconds >= 60 * minutes

    def _on_step(self) -> bool:
        self.model.num_timesteps += self.others
        return True


def new_best(progress: Progress, row: EvalRow, objective: str) -> bool:
    """Whether the periodic evaluation ``row`` makes a new best checkpoint: the first one, or
    the lowest figure of :data:`training.runfolder.BEST_BY` for the run's ``objective`` so far
    (the match regret against the perfect bot for a match run, the round regret for a round
    run). A new best goes into ``progress`` (its figure and step)."""
    figure = row.best_figure(objective)
    best = math.inf if progress.best_regret is None else progress.best_regret
    if progress.best_steps is not None and not figure < best:
        return False
    progress.best_regret = None if math.isinf(figure) else figure
    progress.best_steps = row.steps
    return True


class Periodic(BaseCallback):
    """Snapshots, evaluations and checkpoints at fixed step intervals, and the progress bar.

    With several workers every worker takes each snapshot (worker 0 writes it, the others a
    copy) and each checkpoint (worker 0 gathers their resume points); worker 0 evaluates, with
    worker 1 rating against the ladder meanwhile, and shows the bar. An exception of
    ``on_eval`` is then held (``failure``) and asks the run to stop, so that the workers stop
    together."""

    def __init__(
        self,
        run: RunFolder,
        progress: Progress,
        stop: StopRequest,
        on_eval: Callable[[EvalRow], None] | None,
        team: Team,
        agree: Agree | None = None,
        round_starts: RoundStartValues | None = None,
    ) -> None:
        super().__init__()
        self.run = run
        # the table of round starts that the rounds are valued by: resume points hold it
        self.round_starts = round_starts
        self.config = run.config
        self.progress = progress  # saved in every checkpoint
        self.stop = stop
        self.on_eval = on_eval
        self.team = team
        self.agree = agree
        self.failure: Exception | None = None
        self.bar: tqdm | None = None

    @property
    def steps(self) -> int:
        """Steps trained so far (read from the model: SB3 updates ``num_timesteps`` late)."""
        return self.model.num_timesteps

    def _on_training_start(self) -> None:
        if self.config.progress and self.team.leader:
            # in per mille of the run: the bar follows whichever budget binds, steps or minutes
            self.bar = tqdm(
                total=1000,
                initial=self._permille(),
                bar_format="{percentage:3.0f}%|{bar}| {desc} [{elapsed}<{remaining}]",
                dynamic_ncols=True,
                smoothing=0.05,
                mininterval=1.0 if sys.stderr.isatty() else 30.0,  # few lines in logs
            )
            self._describe(self.bar)

    def _permille(self) -> int:
        return int(1000 * run_progress(self.config, self.steps, self.progress))

    def _describe(self, bar: tqdm) -> None:
        """The bar's text: steps of total_steps, and minutes of the budget when there is one."""
        c = self.config
        text = f"{self.steps:,}/{c.total_steps:,} steps"
        if c.minutes:
            text += f", {self.progress.train_seconds / 60:.1f}/{c.minutes:g} min"
        bar.set_description_str(text, refresh=False)

    def _on_rollout_start(self) -> None:
        # SB3 calls this after the previous update, so the weights match num_timesteps
        c, p, steps = self.config, self.progress, self.steps
        if steps >= p.next_snapshot:
            p.next_snapshot = next_multiple(steps, c.snapshot_every)
            self.snapshot()
        snapshots = len(list((self.run.path / "snapshots").glob(SNAPSHOT_GLOB)))
        self.logger.record("pool/size", min(snapshots, c.opponents.max_snapshots))
        if steps >= p.next_eval:
            p.next_eval = next_multiple(steps, c.eval_every)
            self.evaluate_learner()
        # the last thing before the rollout's first step: where a resumed run starts again
        p.resume = take_resume_point(self.model, self.round_starts)
        if steps >= p.next_checkpoint:
            p.next_checkpoint = next_multiple(steps, c.checkpoint_every)
            save_latest(self.model, self.run, p, self.team)

    def _on_step(self) -> bool:
        if self.bar is not None:
            permille = self._permille()
            if permille > self.bar.n:
                self._describe(self.bar)
                self.bar.update(permille - self.bar.n)
        if self.agree is not None:  # several workers: they stop as agreed at the rollout's start
            if self.agree.requested or self.agree.out_of_time:
                return False
        elif self.stop.requested:
            return False
        if self.steps >= self.config.total_steps:
            # stop exactly at the budget (SB3 would finish the rollout under way), except on a
            # rollout's last step: then SB3 finishes it, makes its update, and learn() ends
            return self.locals.get("n_steps", -2) + 1 == self.model.n_steps
        return self.agree is not None or not budget_spent(self.config, self.steps, self.progress)

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def snapshot(self) -> Path:
        path = write_snapshot(self.model, self.run.path, self.team)
        refresh_pools(self.training_env)  # the new snapshot plays from the next episode on
        return path

    def evaluate_learner(self, together: bool = True) -> None:
        """Evaluate the learner (:func:`training.periodic.evaluate_learner`); worker 0 logs the
        figures, saves the best checkpoint (the lowest figure of
        :data:`training.runfolder.BEST_BY` for the run's objective), writes the row, prints it
        and hands it to ``on_eval``. Without ``together`` worker 0 evaluates alone."""
        p = self.progress
        minutes = round(p.train_seconds / 60, 2)
        policy, steps = self.model.policy, self.steps
        done = evaluate_learner(policy, steps, minutes, self.config, self.team, together)
        if done is None:  # another worker's part is done
            return
        done.log(self.logger)
        row = done.row
        p.last_eval_steps = self.steps
        if new_best(p, row, self.config.objective):
            Checkpoints(self.run).save(self.model, p, name="best")
        self.run.append_eval(row)
        (self.bar.write if self.bar is not None else print)(row.message())
        if self.on_eval is None:
            return
        if not self.team.together:
            self.on_eval(row)
            return
        try:
            self.on_eval(row)
        except Exception as error:  # the other workers are on their way to the next rollout
            self.failure = error
            self.stop.requested = True
