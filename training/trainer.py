"""A training run from start to end: :func:`train` opens (or resumes) the run folder, starts
the other workers when the run has several, trains, saves a checkpoint when it stops, and at
the end exports the final policy and the best checkpoint (by the run's objective:
:data:`training.runfolder.BEST_BY`) with their cards.

What it is made of lives below: the envs and the model (:mod:`training.factories`), what runs
inside SB3's ``learn()`` (:mod:`training.callbacks`), the periodic evaluation
(:mod:`training.periodic`), the folder and its checkpoints (:mod:`training.runfolder`,
:mod:`training.checkpoints`, :mod:`training.resume`), the cards (:mod:`training.cards`) and the
workers (:mod:`training.distributed`). A run that stops early raises :class:`RunStopped` with
the exit status ``train.py`` gives it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import CallbackList

from buttonup_env.learn.round_starts import RoundStartValues
from buttonup_env.learn.sb3 import BootstrapTruncated
from training import scratch as scratch_copies
from training.callbacks import (
    Agree,
    Clock,
    Periodic,
    Schedules,
    StopRequest,
    budget_spent,
    save_latest,
    stop_reason,
)
from training.cards import checkpoint_training, export_with_card
from training.checkpoints import Checkpoint, Checkpoints, Progress
from training.config import RunConfig
from training.distributed import MAX_LOCAL_WORKERS, Solo, Team, WorkerGroup, WorkerLost
from training.factories import make_model, make_vec_env, worker_config, write_snapshot
from training.launch import launch
from training.plots import learning_curve
from training.rendezvous import RENDEZVOUS_TIMEOUT
from training.resume import batched_env, take_resume_point, updates_done
from training.runfolder import BEST_BY, EvalRow, RunFolder, RunFolderError


class RunStopped(Exception):
    """A run that stopped before its budget was spent: interrupted (Ctrl-C, kill: ``status``
    130, a checkpoint saved) or refused by worker 0 (2, which said why). ``train.py`` exits
    with the status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the run stopped (exit status {status})")
        self.status = status


@dataclass(frozen=True)
class Resume:
    """A run to resume: its folder, and the workers the command line asks for (None: as many
    as the run has; it may not ask for another number)."""

    path: Path
    workers: int | None = None


def train(
    config: RunConfig | Resume | None,
    command: str,
    on_eval: Callable[[EvalRow], None] | None = None,
    group: WorkerGroup | None = None,
    rendezvous: timedelta = RENDEZVOUS_TIMEOUT,
) -> Path:
    """Run a training of ``config``, or resume one (``config`` a :class:`Resume`); return the
    run folder.

    ``command`` is the command line that started it, for its config.json. ``on_eval`` is
    called with each periodic evaluation's row once it is in ``eval.jsonl`` (training/tune.py
    reports it to Optuna); an exception it raises ends the training, after the checkpoint is
    saved, and leaves ``train`` (the pruning of a trial). A run folder that cannot be resumed
    raises :class:`~training.runfolder.RunFolderError`, before anything is trained.

    With ``group`` None this process is the run's first worker, and starts the others when the
    run has several (``config.workers``; :mod:`training.distributed`). Under torchrun
    ``group`` is this process's place among the workers: worker 0 reads and writes the run
    folder and sends the others what they read of it; they ignore ``config`` (None). A worker gone
    mid-run raises ``WorkerLost`` on the others, once worker 0 has saved a checkpoint. Worker 0
    waits at most ``rendezvous`` for the workers it starts.

    The other workers keep their copy of the folder in a scratch folder of their own
    (:mod:`training.scratch`), removed when they end; worker 0 removes those of workers
    killed before they could, once its workers have ended, and every run those that earlier
    runs' killed workers left.
    """
    scratch_copies.sweep()
    scratch = None
    if group is None or group.leader:
        if config is None:
            raise ValueError("worker 0 trains the run it is given: config is None")
        run, checkpoint, team = lead(config, command, group, rendezvous)
    else:
        files = group.share_files()
        if files is None:  # worker 0 refused the run, and said why
            group.close()
            raise RunStopped(2)
        scratch = scratch_copies.make(group.rank)
        run = RunFolder.mirror(files, scratch)
        has_latest = "checkpoints/latest.json" in files
        checkpoint = Checkpoints(run).read("latest") if has_latest else None
        team = group
    try:
        return train_worker(run, checkpoint, on_eval, team)
    finally:
        team.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        elif team.together:  # worker 0: its workers have ended, killed ones too
            scratch_copies.sweep()


def lead(
    config: RunConfig | Resume,
    command: str,
    group: WorkerGroup | None,
    rendezvous: timedelta = RENDEZVOUS_TIMEOUT,
) -> tuple[RunFolder, Checkpoint | None, Team]:
    """Worker 0's start: the run folder and its checkpoint (:func:`open_run`), the other
    workers started when the run has several and ``group`` is None (waiting at most
    ``rendezvous`` for them), and what the others read of the folder sent to them."""
    try:
        run, checkpoint = open_run(config, command, None if group is None else group.size)
    except RunFolderError:
        if group is not None:
            group.share_files(None)  # the other workers stop too
        raise
    team: Team = group or Solo()
    if group is None and run.config.workers > 1:
        if run.config.workers > MAX_LOCAL_WORKERS:
            raise RunFolderError(
                f"{run.path}/config.json asks for {run.config.workers} workers; this "
                f"machine starts at most {MAX_LOCAL_WORKERS} (four per logical CPU)"
            )
        team = launch(run.config.workers, rendezvous)
    if team.together:
        team.share_files(run.worker_files(checkpoint is not None))
    return run, checkpoint, team


def open_run(
    config: RunConfig | Resume, command: str, workers: int | None
) -> tuple[RunFolder, Checkpoint | None]:
    """The run folder: a new one for ``config``, or the one ``config`` resumes with its latest
    checkpoint, the evaluations and snapshots past it removed (a run killed after that
    checkpoint left them; it writes them again). ``workers``: the workers torchrun started,
    which must be the run's; None for the run's own number, which the command line may give
    again but not change."""
    if isinstance(config, RunConfig):
        return RunFolder.create(config, command), None
    run = RunFolder.open(config.path)
    asked = config.workers if workers is None else workers
    if asked not in (None, run.config.workers):
        how = "leave --workers out" if workers is None else f"start {run.config.workers} in all"
        raise RunFolderError(
            f"{run.path} was trained by {run.config.workers} worker(s) and resumes with as many, "
            f"not {asked}: each worker's games and generators are in its checkpoint; {how}"
        )
    checkpoints = Checkpoints(run)
    checkpoint = checkpoints.read("latest")
    checkpoints.finish("latest", checkpoint)  # a save that a kill stopped part-way
    run.read_evaluations()  # checked now: the learning curve reads them after training
    run.forget_after(checkpoint.steps)
    return run, checkpoint


def train_worker(
    run: RunFolder,
    checkpoint: Checkpoint | None,
    on_eval: Callable[[EvalRow], None] | None,
    team: Team,
) -> Path:
    """This worker's part of the run in ``run`` (from ``checkpoint`` when it resumes): its
    envs and model, its training, and for worker 0 the export at the end."""
    config = run.config
    mine = worker_config(config, team.rank)
    progress = Progress() if checkpoint is None else checkpoint.progress
    th.set_num_threads(config.threads)
    # without a saved env state (dummy, subproc), a resumed run must not replay the layouts
    # of its start: the seed is offset by the steps done
    venv = make_vec_env(mine, run.path, mine.seed + (checkpoint.steps if checkpoint else 0))
    model = make_model(mine, venv, tensorboard_log=run.folder("tb") if team.leader else None)
    table = round_start_values(model, config)
    try:
        start(model, run, checkpoint, progress, team, table)
        finished = learn(model, run, progress, on_eval, team, table)
        if finished and team.leader:
            finish(model, run, progress)
    except KeyboardInterrupt:  # a second Ctrl-C, or one during the export: --resume redoes it
        finished = False
    except WorkerLost as error:
        if team.leader:
            draw_learning_curve(run)
            raise WorkerLost(
                f"{error}: the run stopped at step {model.num_timesteps:,}, checkpoint saved; "
                f"continue it with: python training/train.py --resume {run.path}"
            ) from None
        raise
    finally:  # learn() made a logger: its TensorBoard writer holds a thread and a file open
        venv.close()  # (tune.py runs many trainings in one process)
        logger = getattr(model, "logger", None)  # none when learn() never ran
        if logger is not None:
            logger.close()
    if not finished:
        if team.leader:
            stopped(model, run)
        raise RunStopped(130)
    return run.path


def round_start_values(model: MaskablePPO, config: RunConfig) -> RoundStartValues | None:
    """The table of the match at round starts that ``model``'s bootstrapped rounds are valued
    by (``--bootstrap-values table`` or ``scaled-table``), learnt from its batched env's rounds;
    None where the critic values them or no round is bootstrapped."""
    envs = batched_env(model)  # bootstrapped rounds need the batched env (check())
    if not config.bootstrap_rounds or config.bootstrap_values == "critic" or envs is None:
        return None
    return RoundStartValues(envs)


def start(
    model: MaskablePPO,
    run: RunFolder,
    checkpoint: Checkpoint | None,
    progress: Progress,
    team: Team,
    table: RoundStartValues | None = None,
) -> None:
    """Set ``model`` off: a new run's first weights (worker 0's) and first snapshot, or the
    checkpoint of a resumed one (and its ``table`` of round starts); and say so."""
    config = run.config
    team.average_gradients(model.policy.parameters())
    if checkpoint is not None:  # the weights, the optimiser, and with the batched env its games
        Checkpoints(run).load(model, checkpoint, rank=team.rank, round_starts=table)
        team.say(f"resuming {run.path} at step {model.num_timesteps:,} of {config.total_steps:,}")
        return
    team.broadcast_parameters(model.policy)  # worker 0's initial weights
    write_snapshot(model, run.path, team)  # pure self-play has an opponent from the start
    progress.next_snapshot = config.snapshot_every
    budget = f" or {config.minutes:g} minutes" if config.minutes else ""
    workers = f" with {config.workers} workers" if team.together else ""
    team.say(f"training in {run.path} for {config.total_steps:,} steps{budget}{workers}")


def learn(
    model: MaskablePPO,
    run: RunFolder,
    progress: Progress,
    on_eval: Callable[[EvalRow], None] | None,
    team: Team,
    table: RoundStartValues | None = None,
) -> bool:
    """Train ``model`` until its budget is spent or a stop is asked (Ctrl-C or kill: the update,
    evaluation or checkpoint under way finishes first), then save a checkpoint; return whether
    the budget was spent. The learning curve ends with an evaluation where training did.

    With several workers every worker trains; they stop together, as they agree at each
    rollout's start (:class:`~training.callbacks.Agree`), and worker 0 writes what is
    written."""
    config = run.config
    stop = StopRequest(quiet=not team.leader)
    agree = Agree(team, config, progress, stop, model.n_envs) if team.together else None
    periodic = Periodic(run, progress, stop, on_eval, team, agree, table)
    callbacks = [Clock(progress), Schedules(config, progress), periodic]
    if config.bootstrap_rounds:  # first: its rewards are those the rollout buffer is given
        scaled = table is not None and config.bootstrap_values == "scaled-table"
        callbacks.insert(0, BootstrapTruncated(table, scaled))
    with stop:
        try:
            if model.num_timesteps < config.total_steps:
                model.learn(
                    config.total_steps - model.num_timesteps,
                    callback=CallbackList([agree, *callbacks] if agree else callbacks),
                    reset_num_timesteps=False,
                    tb_log_name="ppo",
                )
        except BaseException:  # a second Ctrl-C (maybe mid-update), on_eval's exception, or
            save_on_exit(model, run, progress, stop.requested, True, team, table)  # a worker lost
            raise
        requested = stop.requested if agree is None else agree.requested
        save_on_exit(model, run, progress, requested, False, team, table)
        if periodic.failure is not None:  # on_eval's, held until every worker had stopped
            raise periodic.failure
        if not team.leader:
            return not requested and budget_spent(config, model.num_timesteps, progress)
        if requested or not budget_spent(config, model.num_timesteps, progress):
            return False
        print(stop_reason(config, model.num_timesteps, progress))
        if progress.last_eval_steps != model.num_timesteps:  # the other workers are done
            periodic.evaluate_learner(together=False)
            model.logger.dump(model.num_timesteps)
            Checkpoints(run).save(model, progress)
        return not stop.requested


def save_on_exit(
    model: MaskablePPO,
    run: RunFolder,
    progress: Progress,
    stop_requested: bool,
    broken_off: bool,
    team: Team,
    table: RoundStartValues | None = None,
) -> None:
    """The checkpoint written when ``model.learn`` ends, with the point a resumed run goes on
    from (``progress.resume``, kept by :class:`~training.callbacks.Periodic` at each rollout's
    start):

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
    elif point.n_updates != updates_done(model):
        progress.resume = take_resume_point(model, table)
    elif stop_requested:
        model.num_timesteps = point.steps
    else:
        progress.resume = None
    if broken_off and team.together:  # the other workers may be gone: no collective
        progress.resume_others = ()
        if team.leader:
            Checkpoints(run).save(model, progress)
        return
    save_latest(model, run, progress, team)


def stopped(model: MaskablePPO, run: RunFolder) -> None:
    """Leave an interrupted run: say how to continue it (``train`` then exits with 130, as
    after Ctrl-C)."""
    draw_learning_curve(run)
    print(
        f"\ninterrupted at step {model.num_timesteps:,}; checkpoint saved. Continue with:\n"
        f"  python training/train.py --resume {run.path}"
    )


def finish(model: MaskablePPO, run: RunFolder, progress: Progress) -> None:
    """Export the final policy, the best checkpoint and the averaged policy (the final
    weights averaged with the snapshots of the run's last ``average_last``) with their cards,
    each judged against the random, the margin and the perfect bot (``final_eval_matches``
    matches each), and print the figures."""
    draw_learning_curve(run)
    matches = run.config.final_eval_matches
    minutes = round(progress.train_seconds / 60, 1)
    steps = model.num_timesteps
    final = {"checkpoint": "latest", "steps": steps, "minutes": minutes}
    policies = [(run.export_path("final"), model.policy, steps, None)]
    trainings = [final]
    checkpoints = Checkpoints(run)
    if checkpoints.exists("best"):
        best_policy, best = checkpoints.load_policy("best")
        training = checkpoint_training(checkpoints, "best", best)
        chosen_by = BEST_BY[run.config.objective][1]
        training["chosen_by"] = f"{chosen_by} in periodic evaluations"
        policies.append((run.export_path("best"), best_policy, best.steps, None))
        trainings.append(training)
    averaged = None
    if run.config.average_last > 0:
        averaged = run.averaged_snapshots(steps)
        policies.append((run.export_path("averaged"), model.policy, steps, averaged))
        trainings.append(final)
    print(
        f"\nexporting and judging {', '.join(p.name for p, *_ in policies)}: {matches} "
        "matches against the random, the margin and the perfect bot each"
    )
    rows = []
    for (path, policy, steps, snapshots), training in zip(policies, trainings, strict=True):
        results = export_with_card(
            policy,
            path,
            run.card_config(),
            training,
            matches,
            matches,
            quiet=True,
            margin_matches=matches,
            average_with=snapshots,
        )
        rows.append((path, steps, results["random"], results["margin"], results["perfect"]))
    print(
        f"{'':13s} {'steps':>11s}   {'against random: won, regret':>27s}   "
        "against margin: won   against perfect: won, regret, match regret"
    )
    for path, steps, rand, margin, perfect in rows:
        print(
            f"{path.name:13s} {steps:>11,}   {rand.wins:>9}/{rand.matches} "
            f"({100 * rand.win_rate:5.1f}%), {rand.mean_regret:.3f}   {margin.wins:>9}/"
            f"{margin.matches} ({100 * margin.win_rate:5.1f}%)   {perfect.wins:>9}/"
            f"{perfect.matches} ({100 * perfect.win_rate:5.1f}%), {perfect.mean_regret:.3f}, "
            f"{perfect.mean_match_regret:.5f}"
        )
    print(closing(run, None if averaged is None else len(averaged)))


def closing(run: RunFolder, averaged: int | None) -> str:
    """What training prints last: the policy to use (``averaged.onnx``, of ``averaged``
    snapshots; for None ``final.onnx``), the others, and how to judge it."""
    best = run.path / "best.onnx"
    policy = run.path / ("final.onnx" if averaged is None else "averaged.onnx")
    share = f"the last {100 * run.config.average_last:g}% of the steps"
    if averaged is None:
        made = ""
    elif averaged:
        snapshots = f"{averaged} snapshot{'' if averaged == 1 else 's'}"
        made = f"the last weights averaged with the {snapshots} of {share}; "
    else:
        made = f"the last weights alone: no snapshot was taken in {share}; "
    lines = [
        "(regret: round points lost per decision against the exact solver's best move; match "
        "regret: the probability of winning the match lost per decision; 0 is perfect play)",
        f"policy: {policy} ({made}card: {policy.with_suffix('.json')})",
        f"best checkpoint ({BEST_BY[run.config.objective][1]}): {best}",
    ]
    if averaged is not None:
        lines.append(f"last weights: {run.path / 'final.onnx'}")
    lines += [
        "judge the policy with 500 matches against the perfect bot, the exact exploitability "
        "(of the match and the round) and the audit of every decision at 0-0:",
        f"  python training/evaluate.py --model {policy} --opponent perfect --matches 500",
        f"  python training/evaluate.py --model {policy} --opponent best-response",
        f"  python training/evaluate.py --model {policy} --audit",
    ]
    return "\n".join(lines)


def draw_learning_curve(run: RunFolder) -> None:
    """``learning_curve.png`` from the run's periodic evaluations (drawn when training stops,
    not after every evaluation: matplotlib takes about half a second a picture)."""
    png = learning_curve(run.read_evaluations(), run.path.name)
    if png is not None:
        run.write(run.path / "learning_curve.png", png)
