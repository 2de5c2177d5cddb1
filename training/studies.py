"""Optuna studies (``training/tune.py`` runs them, ``training/report.py`` reads them): the
storage, and a trial's final figures."""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buttonup_env.ui.cli import fail
from training.runfolder import EvalRow

if TYPE_CHECKING:
    import optuna


def safe_url(url: str) -> str:
    """A storage ``url`` with its password hidden (for messages)."""
    import sqlalchemy

    try:
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        return url


def first_line(error: object) -> str:
    """The first line of an error's message (database drivers add several)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def open_storage(
    url: str,
    heartbeat: int | None = None,
    on_stale: Callable[[Any, Any], None] | None = None,
    create: bool = True,
) -> Any:
    """Optuna's ``RDBStorage`` at ``url`` (tables created if new). An unreachable or malformed
    URL, or with ``create`` False a SQLite file that does not exist, ends the script with one
    error line. Workers give ``heartbeat`` (seconds between a running trial's heartbeats; one
    silent for twice as long is failed) and ``on_stale(study, trial)``, called for each trial
    this process fails so."""
    import optuna
    import sqlalchemy

    if "://" not in url:
        fail(f"--storage {url!r} is not a URL; for a SQLite file give sqlite:///PATH")
    connect_args: dict[str, Any] = {}
    if url.startswith("sqlite"):
        connect_args = {"timeout": 60}  # workers wait for each other's writes
        try:
            database = sqlalchemy.engine.make_url(url).database
        except sqlalchemy.exc.ArgumentError:
            database = None
        if not create and database and not Path(database).is_file():
            fail(f"--storage {url}: there is no such file ({database})")
    elif url.startswith("postgresql"):
        connect_args = {"connect_timeout": 10}
    attempts = 5
    for attempt in range(attempts):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    url,
                    engine_kwargs={"connect_args": connect_args},
                    heartbeat_interval=heartbeat,
                    grace_period=None if heartbeat is None else 2 * heartbeat,
                    heartbeat_stale_trial_callback=on_stale,
                )
        except ImportError:
            fail(
                f"--storage {safe_url(url)}: no database driver for it is installed (pip install "
                f'"buttonup-env[tune]" gives sqlite:/// and postgresql+psycopg://)'
            )
        except sqlalchemy.exc.ArgumentError as error:
            fail(f"--storage {safe_url(url)} is not a valid storage URL ({first_line(error)})")
        except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError) as error:
            reason = first_line(getattr(error, "orig", None) or error)
            # workers that create the tables at the same moment: the later ones try again
            # (seen as "UNIQUE constraint failed: alembic_version.version_num" under load)
            retry = re.search(r"already exists|duplicate|locked|unique constraint", reason, re.I)
            if retry and attempt < attempts - 1:
                time.sleep(1 + attempt)
                continue
            fail(f"--storage {safe_url(url)}: cannot open it ({reason})")
    raise AssertionError("not reached")


def final_figures(
    run_dir: Path,
    evals: list[EvalRow],
    measure: bool,
    objective: str = "round",
    match: bool = False,
) -> dict[str, Any]:
    """A trial's figures at its end: the last periodic evaluation (round regret, match regret
    and win rate against each bot), the best evaluation by the run's ``objective`` (the
    figure that chose its best checkpoint: ``training.runfolder.BEST_BY``) with its round and
    match regret and its step, and the exact exploitability of the policy the run hands over
    (:func:`handed_over`; ``measure``, for a trial that finished; with ``match`` the match's too,
    minutes for a policy that sees the score), named by its file in ``policy``."""
    final: dict[str, Any] = {}
    if evals:
        last = evals[-1]
        final = last.figures()
        final["steps"] = last.steps
        final["minutes"] = last.minutes
        best = min(evals, key=lambda row: row.best_figure(objective))
        final["best_regret"] = best.regret_perfect
        if best.match_regret_perfect is not None:
            final["best_match_regret"] = best.match_regret_perfect
        final["best_steps"] = best.steps
    policy = handed_over(run_dir)
    if (measure or match) and policy.is_file():
        from buttonup_env.players.best_response import match_exploitability
        from buttonup_env.players.exploit import exploitability
        from buttonup_env.players.policy import load_policy

        player = load_policy(policy)
        final["policy"] = policy.name
        if measure:
            final["exploitability"] = exploitability(player).exploitability
        if match:
            final["match_exploitability"] = match_exploitability(player)
    return final


def handed_over(run_dir: Path) -> Path:
    """The policy a finished run hands over: ``averaged.onnx`` (its last weights averaged with
    its last snapshots, the file training's closing lines name) where the run wrote one, else
    ``final.onnx`` (a run with ``--average-last 0``, or one older than the averaged file)."""
    averaged = run_dir / "averaged.onnx"
    return averaged if averaged.is_file() else run_dir / "final.onnx"


def make_pruner(settings: dict[str, Any]) -> optuna.pruners.BasePruner:
    """The median pruner for a sweep (never at step 0: the untrained policy), else none."""
    import optuna

    if settings["mode"] == "sweep" and settings["pruner"] == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=settings["startup_trials"], n_warmup_steps=1
        )
    return optuna.pruners.NopPruner()


def make_sampler() -> optuna.samplers.BaseSampler:
    """TPE; constant_liar keeps parallel workers from sampling the same point."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(constant_liar=True)


def open_study(
    storage: optuna.storages.RDBStorage, name: str, settings: dict[str, Any] | None, url: str
) -> tuple[optuna.Study, dict[str, Any]]:
    """Create or join the study ``name`` with ``settings``, or (``settings`` None: --resume)
    load it with its own. A study made with other settings, or none to resume, ends the script
    with one error line."""
    import optuna

    if settings is None:
        try:
            study = optuna.load_study(study_name=name, storage=storage)
        except KeyError:
            fail(
                f"--resume: there is no study {name!r} in {safe_url(url)}; "
                f"start it without --resume"
            )
        settings = study.user_attrs.get("tune")
        if not isinstance(settings, dict):
            fail(f"study {name!r} in {safe_url(url)} was not made by training/tune.py")
    study = optuna.create_study(
        study_name=name,
        storage=storage,
        direction="minimize",
        load_if_exists=True,
        sampler=make_sampler(),
        pruner=make_pruner(settings),
    )
    stored = study.user_attrs.get("tune")
    if stored is None:
        study.set_user_attr("tune", settings)
    elif stored != settings:
        differ = ", ".join(
            f"{key}: {stored.get(key)!r} there, {settings.get(key)!r} here"
            for key in sorted(set(stored) | set(settings))
            if stored.get(key) != settings.get(key)
        )
        fail(
            f"study {name!r} was created with other settings ({differ}); give the same ones, "
            f"or --resume to go on with the study's, or pick another --study"
        )
    return study, settings
