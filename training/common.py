"""Helpers shared by the training scripts: code version, model cards, Optuna storages."""

from __future__ import annotations

import io
import json
import re
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import buttonup_env
from buttonup_env.players.evaluation import EvaluationResult
from buttonup_env.ui.cli import fail, write_output
from training.typed_json import Range

ROOT = Path(__file__).resolve().parent.parent

MAX_MATCHES = 100_000
"""The most matches a command plays against one opponent (a few minutes on one core)."""
Matches = Annotated[int, Range(1, MAX_MATCHES)]
"""A number of matches, as the scripts' flags and a run's config take it."""
Seed = Annotated[int, Range(0, 2**32 - 1)]
"""A seed, as the scripts' flags and a run's config take it (numpy's legacy seeding, which
some of the libraries use, takes 32 bits)."""

CODE_VERSION = r"buttonup-env [0-9A-Za-z.+-]{1,40} \([0-9A-Za-z._+-]{1,80}\)"
"""What :func:`code_version` gives (``buttonup-env 0.1.0 (d2d4121+dirty)``), as a regular
expression: a code version read from a file is printed and copied only when it is one."""


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file of a run folder (one object); a damaged one ends the script with one
    error line."""
    try:
        data = json.loads(path.read_bytes())
    except RecursionError:
        fail(f"{path} is damaged (its JSON is nested too deeply)")
    except (OSError, ValueError) as error:
        fail(f"{path} is damaged ({error})")
    if not isinstance(data, dict):
        fail(f"{path} is damaged (a JSON object was expected, not {type(data).__name__})")
    return data


def code_version() -> str:
    """The package version and the git commit (with ``+dirty`` when files were changed)."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty=+dirty"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return f"buttonup-env {buttonup_env.__version__} ({commit})"


def write_card(
    model_path: Path,
    config: dict[str, Any],
    training: dict[str, Any],
    evaluations: dict[str, tuple[str, EvaluationResult]],
    extra: dict[str, Any] | None = None,
    exported_with: str | None = None,
) -> Path:
    """Write ``NAME.json`` beside ``NAME.onnx``: how it was made and what it measured.

    ``evaluations`` maps an opponent name to (the evaluate.py command that reproduces the
    figures, the result). ``exported_with`` is the code version of the export (default: now;
    take it before writing the model, or a model written inside the repository makes it dirty).
    """
    card = {
        "model": model_path.name,
        "made": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": config.get("command"),
        "code_version": config.get("code_version"),
        "exported_with": exported_with or code_version(),
        "seed": config.get("seed"),
        "config": {k: v for k, v in config.items() if k not in ("command", "code_version")},
        "training": training,
        "evaluation": {
            name: {"command": command, **result.to_dict()}
            for name, (command, result) in evaluations.items()
        },
    }
    card.update(extra or {})
    path = model_path.with_suffix(".json")
    write_output(path, (json.dumps(card, indent=2) + "\n").encode())
    return path


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON Lines file, one a line. ``ValueError`` naming the line when
    one is not (``OSError`` when the file cannot be read)."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except RecursionError:
            raise ValueError(f"line {number} is nested too deeply") from None
        except ValueError as error:
            raise ValueError(f"line {number}: {error}") from None
        if not isinstance(row, dict):
            raise ValueError(f"line {number} is not a JSON object")
        rows.append(row)
    return rows


def regret_ticks(regrets: list[float]) -> list[float]:
    """The labelled ticks of a learning curve's log regret axis: 1-2-5 steps from 0.002 to 2,
    those within a factor of 2 of the regrets plotted (a fixed list would leave the lower part
    of a good run's curve unlabelled, and ``set_yticks`` widens the axis to any tick outside
    the data)."""
    positive = [r for r in regrets if r > 0]
    low, high = min(positive, default=0.05), max(positive, default=2)
    steps = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2)
    return [t for t in steps if low / 2 < t < 2 * high]


def pyplot() -> Any:
    """matplotlib's ``pyplot`` drawing into files only (the Agg backend: no window, no display
    needed), imported when the first figure is drawn, so that the scripts start without it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_png(fig: Any) -> bytes:
    """A matplotlib figure as PNG bytes (written by the caller through a checked path; the
    figure is closed)."""
    plt = pyplot()

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def save_figure(fig: Any, path: Path) -> None:
    """Write a matplotlib figure as the PNG ``path`` (atomically; ``ValueError`` in one
    sentence when it cannot be written)."""
    write_output(path, figure_png(fig))


def learning_curve(rows: list[dict[str, Any]], title: str = "") -> bytes | None:
    """Win rates against the bots and regret against the solver over steps, as PNG bytes,
    from the periodic evaluations ``rows`` (checked ones:
    :func:`training.runfolder.read_evaluations`); None when there are none."""
    if not rows:
        return None
    plt = pyplot()

    steps = [row["steps"] / 1e6 for row in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), dpi=100)
    for name, colour in (("random", "tab:green"), ("greedy", "tab:orange"), ("perfect", "tab:red")):
        left.plot(
            steps,
            [100 * row[f"win_rate_{name}"] for row in rows],
            marker=".",
            color=colour,
            label=f"against {name}",
        )
    left.set(
        xlabel="environment steps (millions)",
        ylabel="matches won (%)",
        ylim=(-2, 102),
        title="win rate in periodic evaluations",
    )
    left.axhline(50, color="grey", lw=0.6, ls=":")
    left.legend(loc="center right", fontsize=8)
    right.plot(steps, [row["regret_perfect"] for row in rows], marker=".", color="tab:blue")
    right.set(
        xlabel="environment steps (millions)",
        ylabel="round points per decision",
        title="mean regret against the solver (matches vs perfect)",
        yscale="log",
    )
    ticks = regret_ticks([row["regret_perfect"] for row in rows])
    right.set_yticks(ticks, [f"{t:g}" for t in ticks])
    right.minorticks_off()
    right.axhline(0.1, color="grey", lw=0.6, ls=":")
    right.grid(True, lw=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return figure_png(fig)


# --- Optuna storages (training/tune.py and training/report.py) ---------------------------------


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


def final_figures(run_dir: Path, evals: list[dict[str, Any]], measure: bool) -> dict[str, Any]:
    """A trial's figures at its end: the last periodic evaluation (regret and win rate against
    each bot), the lowest regret of all and its step, and the exact exploitability of the final
    policy (``measure``, for a trial that finished)."""
    final: dict[str, Any] = {}
    if evals:
        last = evals[-1]
        final = {k: last[k] for k in last if k.startswith(("regret_", "win_rate_"))}
        final["steps"] = last["steps"]
        final["minutes"] = last.get("minutes")
        best = min(evals, key=lambda row: row["regret_perfect"])
        final["best_regret"] = best["regret_perfect"]
        final["best_steps"] = best["steps"]
    policy = run_dir / "final.onnx"
    if measure and policy.is_file():
        from buttonup_env.players.exploit import exploitability
        from buttonup_env.players.policy import load_policy

        final["exploitability"] = exploitability(load_policy(policy)).exploitability
    return final
