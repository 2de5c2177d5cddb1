"""Sweeps and many-seed runs of training/train.py on Optuna, from one laptop to many machines.

    python training/tune.py --study lr --trials 20                  # a sweep of the default space
    python training/tune.py --study lr --trials 20 --space my.toml -- --n-envs 4
    python training/tune.py --study quick10 --seeds 10              # one configuration, 10 seeds
    python training/tune.py --study lr --trials 20 --storage postgresql+psycopg://USER:PW@HOST/DB
    python training/report.py --study quick10                       # the table and the plots

Every trial is a real training, by train.py's own code, into its own run folder
RUNS_DIR/STUDY/trial-NNNN (train.py's output goes to trial-NNNN.log beside it). The flags
given after -- go to train.py: any but --preset, --seed, --total-steps, --run-name, --runs-dir,
--resume and --progress, which tune.py sets. A sweep samples the settings of its space file
(TOML; see training/spaces/default.toml) on top of those. Its objective is the regret against
the perfect bot at the last periodic evaluation (lower is better), and every periodic
evaluation is reported to Optuna, whose median pruner stops a trial doing worse than the median
of the earlier trials at the same step. --seeds K runs the one configuration with the seeds SEED
to SEED + K - 1 instead, one trial each, without pruning.

Every process that runs the same command on the same storage is a worker of the same study:
on one machine with the default SQLite file RUNS_DIR/optuna.db, on several with a PostgreSQL
URL. The study ends with --trials finished (complete or pruned) trials across all workers: a
worker starts a trial only while fewer are finished or under way, and waits while the rest run
elsewhere. A worker killed mid-trial stops sending heartbeats; once it has been silent for
twice --heartbeat seconds, another worker marks its trial failed (failed trials are not
retried) and runs a new one in its place (with --seeds, with the seed it had). Ctrl-C stops a
worker once its training has saved a checkpoint; its trial is marked failed.

Each trial's attributes (optuna-dashboard shows them): place (its place among the --trials),
seed, worker, run_dir, command (the train.py command that repeats it), config, evals (the
periodic evaluations so far) and final (the figures at its end: round regret, match regret and
win rate against each bot, the best regret, the exact exploitability). The run folder gets
them in trial.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import signal
import socket
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import optuna
import tyro
from optuna.trial import FrozenTrial, Trial, TrialState

from buttonup_env.ui.cli import fail, run_cli
from training.config import RunConfig, resolve
from training.runfolder import EVAL_BOTS, EvalRow, train_flags
from training.search_space import (
    DEFAULT_SPACE,
    base_config,
    check_space,
    check_train_args,
    load_space,
    sample,
    with_settings,
)
from training.studies import final_figures, first_line, open_storage, open_study, safe_url
from training.trainer import RunStopped, train
from training.typed_json import to_json

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

FAILURES_IN_A_ROW = 3
"""A worker stops when this many of its trials in a row failed (a broken setup, not bad luck)."""

STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass
class TuneConfig:
    """Optuna sweeps and many-seed runs of training/train.py (flags after -- go to train.py)."""

    study: str
    """Name of the study (letters, digits, '.', '_', '-'); its run folders go to RUNS_DIR/STUDY."""
    trials: int | None = None
    """Finished (complete + pruned) trials the study ends with, across all workers. A sweep
    needs it; with --seeds it is K; with --resume the study's last value."""
    storage: str | None = None
    """Optuna storage URL (default: sqlite:///RUNS_DIR/optuna.db). For workers on several
    machines: postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE."""
    space: Path | None = None
    """Search space of a sweep, a TOML file (default: training/spaces/default.toml)."""
    steps: int | None = None
    """Environment steps per trial (default: the preset's total_steps; a time budget that
    the preset sets still applies)."""
    seeds: int | None = None
    """Instead of a sweep, run the fixed configuration (--preset and the flags after --) with
    the seeds SEED .. SEED + K - 1, one trial each, for a many-seed result."""
    preset: Literal["full", "quick", "smoke"] = "quick"
    """train.py's preset under every trial (intervals and evaluation sizes; see train.py)."""
    seed: int = 0
    """The seed of every trial of a sweep; the first seed with --seeds."""
    runs_dir: Path = Path("runs")
    """Where the study's folder of run folders (and the default SQLite storage) go."""
    resume: bool = False
    """Continue or join the existing study STUDY with the settings it was created with (space,
    steps, seeds, preset, seed, pruner, train.py flags): only --trials, --storage, --runs-dir
    and --heartbeat are read from this command."""
    pruner: Literal["median", "none"] = "median"
    """median: stop a sweep's trial whose regret is worse than the median of the earlier
    trials at the same step (never at step 0 or at the end); none: never."""
    startup_trials: int = 5
    """Complete trials before the median pruner stops any."""
    exploitability: bool = True
    """Measure each complete trial's exact exploitability (of the policy it hands over:
    averaged.onnx, or final.onnx with --average-last 0; a best response over all 1,680 set-ups:
    about 5-20 s on this project's 2-core machine)."""
    heartbeat: int = 30
    """Seconds between a running trial's heartbeats; a trial silent for twice as long (its
    worker was killed) is marked failed by the next worker that looks."""


class PlacesTaken(Exception):
    """Every place among the study's trials was taken by an earlier trial while this one was
    being created (two workers asked at the same moment): this trial is not run."""


class TrialError(Exception):
    """A trial that cannot run or failed; the message is one line for the progress output."""


# --- the workers -------------------------------------------------------------------------


class Worker:
    """One process working on a study: it runs trials until the study has ``trials``
    finished ones (counting every worker's)."""

    def __init__(
        self,
        study: optuna.Study,
        settings: dict[str, Any],
        trials: int,
        runs_dir: Path,
        poll_seconds: float,
    ) -> None:
        self.study = study
        self.settings = settings
        self.trials = trials
        self.study_dir = runs_dir / study.study_name
        self.poll_seconds = poll_seconds
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.current: int | None = None
        self.failed_in_a_row = 0

    def counts(self) -> tuple[int, int]:
        """Trials finished (complete + pruned) and under way, across all workers."""
        states = [t.state for t in self.study.get_trials(deepcopy=False)]
        finished = sum(state in FINISHED for state in states)
        return finished, states.count(TrialState.RUNNING)

    def run(self) -> None:
        waiting = False
        while True:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                optuna.storages.fail_stale_trials(self.study)  # trials of killed workers
            finished, running = self.counts()
            if finished >= self.trials:
                return
            if finished + running >= self.trials:
                if not waiting:
                    print(
                        f"waiting: {finished} of {self.trials} trials finished, the other "
                        f"{running} under way on other workers",
                        flush=True,
                    )
                waiting = True
                time.sleep(self.poll_seconds)
                continue
            waiting = False
            self.study.optimize(
                self.objective, n_trials=1, catch=(Exception,), callbacks=[self.progress]
            )
            self.current = None
            if self.failed_in_a_row >= FAILURES_IN_A_ROW:
                print(
                    f"error: {self.failed_in_a_row} trials in a row failed on this worker; "
                    f"stopping (the lines above and the trials' logs in {self.study_dir} say why)",
                    file=sys.stderr,
                )
                raise SystemExit(1)

    def claim_place(self, trial: Trial) -> int:
        """This trial's place among the ``trials``: the first one that no earlier trial still
        counting (running, complete or pruned) holds. Trial numbers follow creation (Optuna
        locks the study row to number them), so two workers never take the same place."""
        while True:
            earlier = [
                t
                for t in self.study.get_trials(deepcopy=False)
                if t.number < trial.number and t.state in (TrialState.RUNNING, *FINISHED)
            ]
            if any(
                t.state == TrialState.RUNNING and "place" not in t.user_attrs for t in earlier
            ):  # a worker is claiming right now: its place is known in a moment
                time.sleep(0.2)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    optuna.storages.fail_stale_trials(self.study)
                continue
            held = {t.user_attrs.get("place") for t in earlier}
            free = [place for place in range(self.trials) if place not in held]
            if not free:
                raise PlacesTaken(f"the other {self.trials} trials were under way already")
            trial.set_user_attr("place", free[0])
            return free[0]

    def objective(self, trial: Trial) -> float:
        """Run one trial; record why it failed, if it does, in its ``error`` attribute."""
        self.current = trial.number
        trial.set_user_attr("worker", self.name)
        try:
            return self.run_trial(trial)
        except optuna.TrialPruned:
            raise
        except PlacesTaken as error:
            trial.set_user_attr("places_taken", True)
            trial.set_user_attr("error", str(error))
            raise
        except RunStopped as stop:  # the training stopped: Ctrl-C / kill (130) or refused (2)
            if stop.status == 130:
                trial.set_user_attr("error", "interrupted (Ctrl-C or kill)")
                raise KeyboardInterrupt from None
            message = f"train.py stopped with exit status {stop.status}"
            trial.set_user_attr("error", message)
            raise TrialError(message) from None
        except KeyboardInterrupt:
            trial.set_user_attr("error", "interrupted (Ctrl-C or kill)")
            raise
        except Exception as error:
            trial.set_user_attr(
                "error", first_line(error) if isinstance(error, TrialError) else repr(error)
            )
            log = self.study_dir / f"trial-{trial.number:04d}.log"
            if log.parent.is_dir():
                with open(log, "a", encoding="utf-8") as handle:
                    traceback.print_exc(file=handle)
            raise

    def run_trial(self, trial: Trial) -> float:
        settings = self.settings
        place = self.claim_place(trial)
        seeds = settings["mode"] == "seeds"
        seed = settings["seed"] + (place if seeds else 0)
        run_name = f"trial-{trial.number:04d}"
        try:
            sampled = with_settings(
                base_config(settings, seed),
                sample(trial, settings["space"]),
                f"trial {trial.number}",
            )
            config = resolve(
                dataclasses.replace(
                    sampled, runs_dir=self.study_dir, run_name=run_name, progress=False
                )
            )
        except ValueError as error:
            raise TrialError(f"train.py refuses the sampled configuration: {error}") from None
        run_dir = self.study_dir / run_name
        if run_dir.exists():
            raise TrialError(f"{run_dir} exists already (from an earlier study of that name?)")
        command = shlex.join(["python", "training/train.py", *train_flags(config)])
        for key, value in {
            "seed": seed,
            "run_dir": str(run_dir),
            "command": command,
            "config": to_json(config),
        }.items():
            trial.set_user_attr(key, value)

        evals: list[EvalRow] = []

        def on_eval(row: EvalRow) -> None:
            evals.append(row)
            trial.set_user_attr("evals", to_json(evals))
            trial.report(row.regret_perfect, row.steps)
            if not budget_reached(config, row) and trial.should_prune():
                raise optuna.TrialPruned(f"pruned at step {row.steps:,}")

        self.study_dir.mkdir(parents=True, exist_ok=True)
        with (
            open(self.study_dir / f"{run_name}.log", "w", encoding="utf-8") as log,
            contextlib.redirect_stdout(log),
        ):
            try:
                train(config, command, on_eval)
            except optuna.TrialPruned:
                self.record(trial, run_dir, evals, "pruned", measure=False)
                raise
        final = self.record(trial, run_dir, evals, "complete", settings["exploitability"])
        return float(final["regret_perfect"])

    def record(
        self, trial: Trial, run_dir: Path, evals: list[EvalRow], state: str, measure: bool
    ) -> dict[str, Any]:
        """Store the trial's final figures (attribute ``final`` and the run's trial.json)."""
        objective = trial.user_attrs.get("config", {}).get("objective", "round")
        final = final_figures(run_dir, evals, measure, objective)
        trial.set_user_attr("final", final)
        card = {
            "study": self.study.study_name,
            "trial": trial.number,
            "state": state,
            **{k: trial.user_attrs.get(k) for k in ("place", "seed", "worker", "command")},
            "params": trial.params,
            "final": final,
            "evals": to_json(evals),
        }
        (run_dir / "trial.json").write_text(json.dumps(card, indent=2) + "\n")
        return final

    def progress(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """One line per trial that ends on this worker."""
        attrs = trial.user_attrs
        finished, _ = self.counts()
        tail = f"[{finished}/{self.trials} finished]"
        if trial.state == TrialState.COMPLETE:
            self.failed_in_a_row = 0
            line = f"trial {trial.number} complete  {figures_line(attrs['final'])}"
        elif trial.state == TrialState.PRUNED:
            self.failed_in_a_row = 0
            final = attrs.get("final", {})
            line = f"trial {trial.number} pruned at step {final.get('steps', 0):,}  " + (
                f"regret {final['regret_perfect']:.3f}" if "regret_perfect" in final else ""
            )
        elif attrs.get("places_taken"):
            line = f"trial {trial.number} not run: {attrs.get('error')} (marked failed)"
        else:
            self.failed_in_a_row += 1
            line = f"trial {trial.number} failed: {attrs.get('error', 'see its log')}"
        seed = f"  seed {attrs['seed']}" if "seed" in attrs else ""
        where = f"  {attrs['run_dir']}" if "run_dir" in attrs else ""
        print(f"{line}{seed}  {tail}{where}", flush=True)


def budget_reached(config: RunConfig, row: EvalRow) -> bool:
    """Whether the evaluation ``row`` is the one at the end of the training (its steps, or the
    time budget of a train.py that has --minutes): pruning there would stop nothing."""
    minutes = config.minutes
    return row.steps >= config.total_steps or bool(minutes and row.minutes >= minutes)


def report_stale(study: optuna.Study, trial: FrozenTrial) -> None:
    """Say so when this worker fails the trial of a worker that stopped sending heartbeats."""
    where = trial.user_attrs.get("worker", "an unknown worker")
    print(
        f"trial {trial.number} of {where} sent no heartbeat for a while: marked failed "
        f"(not retried; another trial takes its place)",
        flush=True,
    )


def figures_line(final: dict[str, Any]) -> str:
    """A trial's final figures in a few words, for its progress line."""
    parts = [f"regret {final['regret_perfect']:.3f} at step {final['steps']:,}"]
    if final.get("match_regret_perfect") is not None:
        parts.append(f"match regret {final['match_regret_perfect']:.5f}")
    parts.append(
        "win rate "
        + " ".join(f"{name} {100 * final[f'win_rate_{name}']:.0f}%" for name in EVAL_BOTS)
    )
    if "exploitability" in final:
        parts.append(f"exploitability {final['exploitability']:.2f}")
    return "  ".join(parts)


# --- main --------------------------------------------------------------------------------


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """tune.py's own flags, and train.py's (after ``--``)."""
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


def new_settings(config: TuneConfig, train_args: list[str]) -> dict[str, Any]:
    """The study's settings from this command (JSON types: the study stores them)."""
    if config.seeds is not None:
        if config.space is not None:
            fail("--space is for sweeps; --seeds runs one fixed configuration (flags after --)")
        if config.trials is not None and config.trials != config.seeds:
            fail(f"--seeds {config.seeds} runs {config.seeds} trials; leave out --trials")
    elif config.trials is None:
        fail("give --trials N (the sweep's number of finished trials), or --seeds K")
    check_train_args(train_args)
    space_path = config.space or DEFAULT_SPACE
    settings: dict[str, Any] = {
        "mode": "sweep" if config.seeds is None else "seeds",
        "preset": config.preset,
        "steps": config.steps,
        "seed": config.seed,
        "seeds": config.seeds,
        "train_args": list(train_args),
        "space": {},
        "pruner": config.pruner if config.seeds is None else "none",
        "startup_trials": config.startup_trials,
        "exploitability": config.exploitability,
    }
    try:
        resolve(base_config(settings, config.seed))
    except ValueError as error:
        fail(f"the train.py flags after -- are refused: {error}")
    if config.seeds is None:
        settings["space"] = load_space(space_path)
        check_space(settings["space"], settings, space_path)
    return settings


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    tune_args, train_args = split_argv(argv)
    config = tyro.cli(TuneConfig, args=tune_args, description=__doc__)
    if not STUDY_NAME.fullmatch(config.study):
        fail(f"--study {config.study!r}: use letters, digits, '.', '_' and '-' (a folder name)")
    for name in ("trials", "steps", "seeds", "heartbeat"):
        value = getattr(config, name)
        if value is not None and value < 1:
            fail(f"--{name} must be >= 1, got {value}")
    if config.startup_trials < 0:
        fail(f"--startup-trials must be >= 0, got {config.startup_trials}")
    if config.seed < 0:
        fail(f"--seed must be >= 0, got {config.seed}")
    if config.resume and train_args:
        fail("--resume takes the train.py flags from the study; give none after --")
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # the progress lines say what happened
    settings = None if config.resume else new_settings(config, train_args)

    url = config.storage
    if url is None:
        config.runs_dir.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{config.runs_dir / 'optuna.db'}"
    storage = open_storage(url, config.heartbeat, on_stale=report_stale)
    study, settings = open_study(storage, config.study, settings, url)
    trials = config.trials or (settings["seeds"] if settings["mode"] == "seeds" else None)
    trials = trials or study.user_attrs.get("trials")
    if trials is None:
        fail(f"study {config.study!r} has no number of trials yet; give --trials")
    study.set_user_attr("trials", trials)

    what = (
        f"{trials} seeds from {settings['seed']}"
        if settings["mode"] == "seeds"
        else f"a sweep of {len(settings['space'])} parameters, {trials} trials"
    )
    finished = sum(t.state in FINISHED for t in study.get_trials(deepcopy=False))
    print(
        f"study {config.study} in {safe_url(url)}: {what}, {finished} finished so far; "
        f"run folders in {config.runs_dir / config.study}",
        flush=True,
    )
    worker = Worker(study, settings, trials, config.runs_dir, min(5.0, config.heartbeat))
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # kill: like Ctrl-C
    try:
        worker.run()
    except KeyboardInterrupt:
        which = "" if worker.current is None else f"; trial {worker.current} is marked failed"
        print(f"\ninterrupted{which}. The same command goes on with the study.", flush=True)
        raise SystemExit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    where = f" --storage {shlex.quote(safe_url(url))}" if config.storage is not None else ""
    if config.storage is None and config.runs_dir != Path("runs"):
        where = f" --runs-dir {shlex.quote(str(config.runs_dir))}"
    summarize(study, where)


def summarize(study: optuna.Study, where: str) -> None:
    """The study's totals and the report command (``where``: its storage flags)."""
    trials = study.get_trials(deepcopy=False)
    count = {state: sum(t.state == state for t in trials) for state in TrialState}
    line = (
        f"study {study.study_name}: {count[TrialState.COMPLETE]} complete, "
        f"{count[TrialState.PRUNED]} pruned, {count[TrialState.FAIL]} failed"
    )
    if count[TrialState.COMPLETE]:
        best = study.best_trial
        line += f"; best: trial {best.number}, regret {best.value:.3f}"
    print(f"{line}\nreport: python training/report.py --study {study.study_name}{where}")


if __name__ == "__main__":
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    run_cli(main)
