"""Results of training/tune.py studies (or of run folders): a markdown table and PNG plots.

    python training/report.py --study quick10               # a study in runs/optuna.db
    python training/report.py --study quick10 lr3e4         # many-seed studies side by side
    python training/report.py --runs runs/quick10           # run folders (of tune.py or train.py)
    python training/report.py --runs runs/NAME --ratings    # and its snapshots' ratings
    python training/report.py --study lr --storage postgresql+psycopg://USER:PW@HOST/DB

Writes OUT/report.md (and prints it), report.json with the same figures, and PNG plots beside
them (OUT: runs/report-NAME by default, made if missing; its own folder must exist). An
existing report or plot there is kept unless ``--force`` is given: the report stops before any
work.

Many-seed results (studies made with --seeds, and run folders; each study or folder of runs is
a group): for each figure at the end of training (regret against the perfect bot, the win rate
against each bot, the exploitability), the interquartile mean (IQM: the mean of the middle half
of the runs) with a 95% stratified bootstrap confidence interval, computed with rliable
(Agarwal et al., "Deep RL at the edge of the statistical precipice", 2021); the same IQM and
intervals at every evaluation step for the learning curves (curves.png) and side by side for the
final figures (final.png). Only complete runs count.

Sweeps (a study made with --trials and a space): the best trials with their parameters, each
parameter's importance (Optuna's fANOVA) and the median regret for each of its values (or each
half of its range), the regret of every trial in order (history.png) and against each
parameter (params.png).

Ratings (``--ratings``, with run folders): every snapshot of a run rated against a fixed ladder
of bots (``buttonup_env.players.league.rate_against_ladder``) beside its exact exploitability, the
rank correlation of the two, and ratings-RUN.png: rating against steps (with the ratings logged by
the periodic evaluations) and rating against exploitability. See docs/league.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
import statistics
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import tyro

from buttonup_env.players.bots import BOT_NAMES
from buttonup_env.players.league import DEFAULT_LADDER
from buttonup_env.ui.cli import (
    Named,
    check_outputs,
    make_output_folder,
    run_cli,
    write_output,
)
from training.common import (
    Matches,
    Seed,
    code_version,
    fail,
    final_figures,
    first_line,
    open_storage,
    pyplot,
    read_json,
    read_json_lines,
    safe_url,
    save_figure,
)
from training.runfolder import (
    RunFolderError,
    check_tree,
    read_evaluations,
    read_in,
    write_in,
)
from training.typed_json import FieldError, Range, check_fields

FIGURES = {
    "regret_perfect": "regret against the perfect bot (round points per decision)",
    **{f"win_rate_{bot}": f"win rate against the {bot} bot (%)" for bot in BOT_NAMES},
    "exploitability": "exploitability (round points per round)",
}
"""The figures of a many-seed report, in its order: key in a trial's ``final`` -> label."""

PERCENT = {f"win_rate_{bot}" for bot in BOT_NAMES}
"""Figures stored as fractions and shown as percentages."""


@dataclass
class ReportConfig:
    """Tables and plots of tune.py studies or run folders (IQM and bootstrap CIs by rliable)."""

    study: tuple[str, ...] = ()
    """Studies to report: one sweep, or one or more many-seed studies (one group each)."""
    runs: tuple[Path, ...] = ()
    """Run folders, or folders of run folders (each such folder is one group)."""
    storage: str | None = None
    """Optuna storage URL of the studies (default: sqlite:///RUNS_DIR/optuna.db)."""
    runs_dir: Path = Path("runs")
    """Where the default storage is, and the default OUT."""
    out: Path | None = None
    """Folder for report.md, report.json and the plots (default: RUNS_DIR/report-NAME; made
    if missing, its own folder must exist)."""
    force: bool = False
    """Replace the report and plots in OUT if they exist (without it, an existing file is kept
    and the report stops before any work)."""
    reps: Annotated[int, Range(1, 1_000_000)] = 2000
    """Bootstrap resamples of the confidence intervals."""
    seed: Seed = 0
    """Seed of the bootstrap (of each interval: the same seed gives the same report) and of the
    matches of --ratings."""
    top: Annotated[int, Range(1, 10_000)] = 10
    """Best trials listed for a sweep."""
    exploitability: bool = True
    """Measure the exact exploitability of the final policy of run folders that have no
    trial.json (plain train.py runs: about 5-20 s each on a 2-core machine)."""
    ratings: bool = False
    """With --runs: rate every snapshot of each run against the ladder and measure its exact
    exploitability (about 5-20 s a snapshot, kept in the run's ratings.jsonl for next time);
    draws ratings-RUN.png (rating against steps, rating against exploitability) and adds a
    table with their rank correlation."""
    ladder: tuple[str, ...] = DEFAULT_LADDER
    """With --ratings: the reference players (see buttonup_env.players.league)."""
    ladder_matches: Matches = 1000
    """With --ratings: matches of each snapshot against the ladder, shared among its players."""


@dataclass
class Run:
    """One training's figures at its end and its periodic evaluations."""

    name: str
    final: dict[str, Any]
    evals: list[dict[str, Any]] = field(default_factory=list)
    seed: int | None = None


# --- reading ------------------------------------------------------------------------------


def load_study(storage: Any, name: str, url: str) -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        fail(f"there is no study {name!r} in {safe_url(url)}")


def study_runs(study: Any) -> list[Run]:
    """The complete trials of a study as runs."""
    from optuna.trial import TrialState

    return [
        Run(
            name=f"trial {t.number}",
            final=t.user_attrs.get("final", {}),
            evals=t.user_attrs.get("evals", []),
            seed=t.user_attrs.get("seed"),
        )
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    ]


def folder_runs(path: Path, measure: bool = True) -> list[Run]:
    """The finished runs in ``path``: the run folder itself, or the run folders in it. A run's
    figures come from tune.py's trial.json, or else as tune.py finds them: its last periodic
    evaluation and (``measure``) the exploitability of its final.onnx."""
    if not path.is_dir():
        fail(f"--runs {path}: no such folder")
    folders = (
        [path]
        if (path / "config.json").is_file()
        else sorted(p for p in path.iterdir() if (p / "config.json").is_file())
    )
    runs = []
    for folder in folders:
        if not (folder / "final.onnx").is_file():
            continue  # not finished: interrupted, pruned or under way
        checked(folder, named=folder == path)
        if (folder / "trial.json").is_file():
            card = read_json(folder / "trial.json")
            runs.append(
                Run(folder.name, card.get("final", {}), card.get("evals", []), card.get("seed"))
            )
            continue
        try:
            rows = read_evaluations(folder)
        except (RunFolderError, FieldError) as error:
            fail(str(error))
        if rows:
            try:
                final = final_figures(folder, rows, measure)
            except (OSError, ValueError) as error:
                fail(f"{folder / 'final.onnx'} cannot be measured ({first_line(error)})")
            seed = read_json(folder / "config.json").get("seed")
            seed = seed if type(seed) is int else None  # shown in the report: a number or none
            runs.append(Run(folder.name, final, rows, seed))
    if not runs:
        fail(f"--runs {path}: no finished run folder there (one with config.json and final.onnx)")
    return runs


def checked(folder: Path, named: bool) -> None:
    """End the report with one error line when the run folder ``folder`` holds a symbolic
    link, a device or a pipe (or, unless ``named`` by the user, is a link itself): its files
    could lead a read, or the ratings written there, outside it."""
    try:
        check_tree(folder, named)
    except RunFolderError as error:
        fail(str(error))


# --- many-seed results --------------------------------------------------------------------


@contextlib.contextmanager
def bootstrap_seed(seed: int) -> Iterator[None]:
    """Seed the bootstrap of one rliable call, and put numpy's global generator back after.

    rliable 1.2's ``StratifiedBootstrap.update_indices`` draws its resamples with
    ``np.random.choice``, numpy's global generator, whatever ``random_state`` says (so none is
    passed: arch only warns that it is deprecated); the only way to a reproducible interval is
    to seed that generator for the call.
    """
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(saved)


def interval_estimates(
    scores: dict[str, np.ndarray], reps: int, seed: int
) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """IQM and 95% stratified bootstrap interval of each group's scores (one per run), by
    rliable, the bootstrap seeded with ``seed`` for each group."""
    from rliable import library as rly
    from rliable import metrics

    points, intervals = {}, {}
    for group, values in scores.items():
        with bootstrap_seed(seed):
            point, interval = rly.get_interval_estimates(
                {group: np.asarray(values, dtype=float).reshape(-1, 1)},
                lambda s: np.array([metrics.aggregate_iqm(s)]),
                reps=reps,
            )
        points[group] = float(point[group][0])
        intervals[group] = (float(interval[group][0, 0]), float(interval[group][1, 0]))
    return points, intervals


CURVES = ("regret_perfect", *(f"win_rate_{bot}" for bot in BOT_NAMES))
"""The figures of the learning curves (every periodic evaluation has them)."""


def curve_estimates(
    runs: list[Run], reps: int, seed: int
) -> tuple[list[int], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The steps that all the runs' periodic evaluations have, and for each figure of CURVES
    its IQM over the runs at those steps and the 95% interval (2 x steps). One bootstrap for
    all: a resample of the runs carries their whole curves, every figure."""
    import scipy.stats
    from rliable import library as rly

    common = sorted(set.intersection(*({row["steps"] for row in run.evals} for run in runs)))
    if not common:
        return [], {}
    rows = [{row["steps"]: row for row in run.evals} for run in runs]
    scores = np.array(
        [[by_step[s][key] for key in CURVES for s in common] for by_step in rows], dtype=float
    ).reshape(len(runs), 1, len(CURVES) * len(common))  # runs x tasks (one) x figure-steps
    with bootstrap_seed(seed):
        point, interval = rly.get_interval_estimates(
            {"curves": scores},
            # metrics.aggregate_iqm of each figure-step's runs x tasks, all in one call
            lambda s: scipy.stats.trim_mean(s.reshape(-1, s.shape[-1]), 0.25, axis=0),
            reps=reps,
        )
    n = len(common)
    return common, {
        key: (point["curves"][i * n : (i + 1) * n], interval["curves"][:, i * n : (i + 1) * n])
        for i, key in enumerate(CURVES)
    }


def show(key: str, value: float) -> str:
    return f"{100 * value:.1f}" if key in PERCENT else f"{value:.3f}"


def seeds_report(groups: dict[str, list[Run]], config: ReportConfig, out: Path) -> tuple[str, dict]:
    """The many-seed table and plots; returns the markdown and the figures."""
    rows, figures = [], {}
    for key, label in FIGURES.items():
        scores = {
            group: np.array([run.final[key] for run in runs if key in run.final])
            for group, runs in groups.items()
        }
        scores = {group: values for group, values in scores.items() if len(values)}
        if not scores:
            continue
        points, intervals = interval_estimates(scores, config.reps, config.seed)
        for group, values in scores.items():
            low, high = intervals[group]
            entry = {
                "runs": len(values),
                "iqm": points[group],
                "ci95": [low, high],
                "median": float(np.median(values)),
                "mean": float(np.mean(values)),
                "min": float(np.min(values)),
                "max": float(np.max(values)),
            }
            figures.setdefault(key, {})[group] = entry
            rows.append(
                f"| {label} | {group} | {len(values)} | {show(key, points[group])} | "
                f"{show(key, low)} to {show(key, high)} | {show(key, entry['median'])} | "
                f"{show(key, entry['min'])} to {show(key, entry['max'])} |"
            )
    if not rows:
        fail("no complete run with final figures to report")
    lines = [
        "| figure | group | runs | IQM | 95% CI | median | min to max |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
    plot_curves(groups, config, out / "curves.png")
    plot_intervals(figures, out / "final.png")
    text = [
        "## Many-seed results",
        "",
        "Figures at the end of each run: the last periodic evaluation (matches against each "
        "bot) and the exact exploitability of the final policy. IQM: the mean of the middle "
        f"half of the runs; 95% CI: stratified bootstrap with {config.reps:,} resamples "
        f"(rliable, seed {config.seed}). Win rates in %.",
        "",
        *lines,
        "",
        "Learning curves (IQM and 95% CI at every evaluation step): `curves.png`; "
        "the final figures side by side: `final.png`.",
    ]
    seeds = {
        group: sorted(r.seed for r in runs if r.seed is not None) for group, runs in groups.items()
    }
    text += ["", *(f"- {group}: seeds {seeds[group]}" for group in groups)]
    quality_text, figures["time_to_quality"] = time_to_quality(groups)
    plot_time_to_quality(groups, out / "time_to_quality.png")
    text += ["", quality_text]
    return "\n".join(text), figures


QUALITY_LEVELS = (0.1, 0.05, 0.02, 0.01)
"""The regrets against the perfect bot of the time-to-quality table."""


def reached(evals: list[dict[str, Any]], level: float) -> dict[str, Any] | None:
    """The first periodic evaluation with a regret against the perfect bot at or below
    ``level`` (its steps and training minutes), or None."""
    for row in evals:
        if row["regret_perfect"] <= level:
            return {"steps": row["steps"], "minutes": row.get("minutes")}
    return None


def time_to_quality(groups: dict[str, list[Run]]) -> tuple[str, dict[str, Any]]:
    """For each run: the steps and training minutes to its first periodic evaluation at or
    below each of :data:`QUALITY_LEVELS` of regret against the perfect bot."""
    head = " | ".join(f"regret <= {level:g}" for level in QUALITY_LEVELS)
    lines = [
        "## Time to quality",
        "",
        "Training minutes (and steps) to the first periodic evaluation with a regret against the "
        "perfect bot at or below each level (`-`: not reached). Periodic evaluations come every "
        "`eval_every` steps, so a level is reached at most that many steps before the figure.",
        "",
        f"| group | run | seed | {head} |",
        "|---|---|---|" + "---|" * len(QUALITY_LEVELS),
    ]
    figures: dict[str, Any] = {}
    for group, runs in groups.items():
        for run in runs:
            found = [reached(run.evals, level) for level in QUALITY_LEVELS]
            figures.setdefault(group, {})[run.name] = {
                str(level): hit for level, hit in zip(QUALITY_LEVELS, found, strict=True)
            }
            cells = [
                "-"
                if hit is None
                else (
                    f"{hit['minutes']:.1f} min ({hit['steps'] / 1e6:.1f}M)"
                    if hit["minutes"] is not None
                    else f"{hit['steps'] / 1e6:.1f}M steps"
                )
                for hit in found
            ]
            seed = "-" if run.seed is None else str(run.seed)
            lines.append(f"| {group} | {run.name} | {seed} | " + " | ".join(cells) + " |")
    lines += ["", "The runs' regret against minutes and steps: `time_to_quality.png`."]
    return "\n".join(lines), figures


def plot_time_to_quality(groups: dict[str, list[Run]], path: Path) -> None:
    """Each run's regret against the perfect bot over training minutes and over steps."""
    plt = pyplot()

    fig, (by_time, by_steps) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    shown = [*QUALITY_LEVELS]  # the y range holds every level and every regret drawn
    for index, (group, runs) in enumerate(groups.items()):
        for k, run in enumerate(runs):
            rows = [row for row in run.evals if row["regret_perfect"] > 0]
            regret = [row["regret_perfect"] for row in rows]
            shown += regret
            label = group if k == 0 else None
            style = dict(color=f"C{index}", marker=".", lw=1, label=label)
            if all(row.get("minutes") is not None for row in rows):
                by_time.plot([row["minutes"] for row in rows], regret, **style)
            by_steps.plot([row["steps"] / 1e6 for row in rows], regret, **style)
    for ax, xlabel in ((by_time, "training minutes"), (by_steps, "environment steps (millions)")):
        ax.set(xlabel=xlabel, ylabel="regret against the perfect bot", yscale="log")
        ax.set_ylim(min(shown) / 1.5, max(shown) * 1.5)
        for level in QUALITY_LEVELS:
            ax.axhline(level, color="grey", lw=0.6, ls=":")
        ax.grid(True, lw=0.3, which="both")
    by_steps.legend(fontsize=8)
    fig.suptitle(
        "Time to quality: regret per decision against the exact solver, each run", fontsize=10
    )
    fig.tight_layout()
    save_figure(fig, path)


def plot_curves(groups: dict[str, list[Run]], config: ReportConfig, path: Path) -> None:
    plt = pyplot()

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), dpi=100)
    for index, (group, runs) in enumerate(groups.items()):
        runs = [run for run in runs if run.evals]
        if not runs:
            continue
        steps, curves = curve_estimates(runs, config.reps, config.seed)
        x = np.array(steps) / 1e6
        colour = f"C{index}"
        for ax, (key, (point, interval)) in zip(axes.flat, curves.items(), strict=True):
            scale = 100 if key in PERCENT else 1
            ax.plot(x, scale * point, marker=".", color=colour, label=f"{group} ({len(runs)} runs)")
            ax.fill_between(x, scale * interval[0], scale * interval[1], color=colour, alpha=0.2)
    for ax, key in zip(axes.flat, CURVES, strict=True):
        ax.set(xlabel="environment steps (millions)", title=FIGURES[key])
        ax.grid(True, lw=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("IQM over runs with 95% stratified bootstrap intervals", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)


def plot_intervals(figures: dict[str, dict[str, dict]], path: Path) -> None:
    plt = pyplot()

    fig, axes = plt.subplots(
        1, len(figures), figsize=(3.2 * len(figures), 2.8), dpi=100, squeeze=False
    )
    for ax, (key, by_group) in zip(axes[0], figures.items(), strict=True):
        scale = 100 if key in PERCENT else 1
        for row, entry in enumerate(by_group.values()):
            low, high = entry["ci95"]
            ax.barh(
                row, scale * (high - low), left=scale * low, height=0.6, color=f"C{row}", alpha=0.6
            )
            ax.plot([scale * entry["iqm"]] * 2, [row - 0.3, row + 0.3], color="black", lw=1.5)
        ax.set_yticks(range(len(by_group)), list(by_group))
        ax.set_title(FIGURES[key], fontsize=8)
        ax.grid(True, axis="x", lw=0.3)
    fig.tight_layout()
    save_figure(fig, path)


# --- sweeps -------------------------------------------------------------------------------


def sweep_report(study: Any, config: ReportConfig, out: Path) -> tuple[str, dict]:
    """The best trials, the parameters' effects, and the plots of a sweep."""
    import optuna
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    complete = sorted((t for t in trials if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    count = {state.name.lower(): sum(t.state == state for t in trials) for state in TrialState}
    params = list(study.user_attrs.get("tune", {}).get("space", {})) or sorted(
        {name for t in trials for name in t.params}
    )
    text = [
        "## Sweep",
        "",
        f"{count['complete']} complete, {count['pruned']} pruned, {count['fail']} failed trials. "
        "Objective: the regret against the perfect bot at the last periodic evaluation "
        "(round points per decision; lower is better).",
        "",
        f"### Best trials (up to {config.top})",
        "",
        "| rank | trial | regret | win rate against perfect (%) | lowest regret (step) | "
        + " | ".join(params)
        + " |",
        "|---" * (5 + len(params)) + "|",
    ]
    best_rows = []
    for rank, t in enumerate(complete[: config.top], start=1):
        final = t.user_attrs.get("final", {})
        values = [format_param(t.params.get(name)) for name in params]
        lowest = (
            f"{final['best_regret']:.3f} ({final['best_steps']:,})"
            if "best_regret" in final
            else ""
        )
        text.append(
            f"| {rank} | {t.number} | {t.value:.3f} | "
            f"{100 * final.get('win_rate_perfect', float('nan')):.1f} | {lowest} | "
            + " | ".join(values)
            + " |"
        )
        best_rows.append({"trial": t.number, "regret": t.value, "params": t.params})
    if not complete:
        text.append("| (no complete trial yet) |" + " |" * (4 + len(params)))
    if complete:
        best = complete[0]
        text += ["", f"Best trial {best.number}: `{best.user_attrs.get('command', '')}`"]

    importance: dict[str, float] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importance = dict(optuna.importance.get_param_importances(study))
    except (ValueError, RuntimeError) as error:
        text += ["", f"Parameter importance: not available ({error})."]
    text += [
        "",
        "### Parameters",
        "",
        "Importance: Optuna's fANOVA over the complete trials (the shares sum to 1). "
        "Then the median regret of the complete trials for each value of a choice, or for each "
        "half of a range (split at the median of the sampled values).",
        "",
        "| parameter | importance | values | trials | median regret |",
        "|---|---|---|---|---|",
    ]
    effects = {}
    for name in params:
        buckets = parameter_buckets(complete, name)
        effects[name] = {label: values for label, values in buckets}
        for index, (label, values) in enumerate(buckets):
            share = f"{importance[name]:.2f}" if index == 0 and name in importance else ""
            first = name if index == 0 else ""
            median = f"{statistics.median(values):.3f}" if values else ""
            text.append(f"| {first} | {share} | {label} | {len(values)} | {median} |")
    plot_history(trials, out / "history.png")
    plot_params(complete, params, out / "params.png")
    text += [
        "",
        "Every trial's regret in order: `history.png`; against each parameter: `params.png`.",
    ]
    figures = {"counts": count, "best": best_rows, "importance": importance, "effects": effects}
    return "\n".join(text), figures


def format_param(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return "" if value is None else str(value)


def parameter_buckets(trials: list, name: str) -> list[tuple[str, list[float]]]:
    """The complete trials' regrets grouped by ``name``'s value: each choice, or the two halves
    of a numeric range split at the median sampled value."""
    pairs = [(t.params[name], t.value) for t in trials if name in t.params]
    if not pairs:
        return [("(not sampled)", [])]
    values = [v for v, _ in pairs]
    if (
        all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        and len(set(values)) > 3
    ):
        middle = statistics.median(values)
        return [
            (f"below {middle:.3g}", [r for v, r in pairs if v < middle]),
            (f"{middle:.3g} and above", [r for v, r in pairs if v >= middle]),
        ]
    return [
        (format_param(choice), [r for v, r in pairs if v == choice])
        for choice in sorted(set(values), key=str)
    ]


def plot_history(trials: list, path: Path) -> None:
    plt = pyplot()
    from optuna.trial import TrialState

    fig, ax = plt.subplots(figsize=(7, 3.8), dpi=100)
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    pruned = [t for t in trials if t.state == TrialState.PRUNED and t.intermediate_values]
    ax.scatter([t.number for t in done], [t.value for t in done], label="complete", color="C0")
    ax.scatter(
        [t.number for t in pruned],
        [t.intermediate_values[max(t.intermediate_values)] for t in pruned],
        marker="x",
        color="C3",
        label="pruned (its last evaluation)",
    )
    if done:
        order = sorted(done, key=lambda t: t.number)
        best = np.minimum.accumulate([t.value for t in order])
        ax.step([t.number for t in order], best, where="post", color="C2", label="best so far")
    ax.set(xlabel="trial", ylabel="regret against the perfect bot", title="sweep history")
    ax.grid(True, lw=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


def plot_params(trials: list, params: list[str], path: Path) -> None:
    plt = pyplot()

    columns = min(3, max(1, len(params)))
    rows = max(1, -(-len(params) // columns))
    fig, axes = plt.subplots(
        rows, columns, figsize=(3.6 * columns, 3 * rows), dpi=100, squeeze=False
    )
    for ax in axes.flat[len(params) :]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, params, strict=False):
        pairs = [(t.params[name], t.value) for t in trials if name in t.params]
        values = [v for v, _ in pairs]
        if values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            ax.scatter(values, [r for _, r in pairs], s=14)
            if min(values) > 0 and max(values) / min(values) > 20:
                ax.set_xscale("log")
        else:
            labels = sorted({str(v) for v in values})
            ax.scatter([labels.index(str(v)) for v in values], [r for _, r in pairs], s=14)
            ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_title(name, fontsize=9)
        ax.grid(True, lw=0.3)
    axes.flat[0].set_ylabel("regret")
    fig.tight_layout()
    save_figure(fig, path)


# --- ratings of a run's snapshots --------------------------------------------------------

RATINGS_FILE = "ratings.jsonl"
"""Where a run folder keeps its snapshots' ratings and exploitability (one JSON row each)."""


def rated_folders(paths: tuple[Path, ...]) -> list[Path]:
    """The run folders among ``paths`` (a run folder, or a folder of them) that have snapshots."""
    folders = []
    for path in paths:
        runs = [path] if (path / "config.json").is_file() else sorted(path.iterdir())
        for run in runs:
            if list((run / "snapshots").glob("step_*.onnx")):
                checked(run, named=run == path)
                folders.append(run)
    return folders


def snapshot_ratings(run_dir: Path, config: ReportConfig) -> list[dict[str, Any]]:
    """Each snapshot's rating against the ladder and its exact exploitability, oldest first.

    Measured once and kept in ``RUN/ratings.jsonl``: a row is measured again only when the
    ladder, the matches or the seed differ from the ones it was measured with."""
    from tqdm import tqdm

    from buttonup_env.players.arena import run_snapshots, snapshot_steps
    from buttonup_env.players.exploit import exploitability
    from buttonup_env.players.league import rate_against_ladder
    from buttonup_env.players.policy import load_policy

    path = run_dir / RATINGS_FILE
    try:
        read_in(run_dir, path, 64 << 20)  # a regular file of the folder, not a link
        kept = {row["snapshot"]: row for row in read_json_lines(path)}
    except (ValueError, TypeError, KeyError, OSError):
        kept = {}  # missing or damaged: measure again
    settings = {
        "ladder": list(config.ladder),
        "ladder_matches": config.ladder_matches,
        "seed": config.seed,
    }
    rows = []
    for snapshot in tqdm(run_snapshots(run_dir), desc=run_dir.name, unit="snapshot", leave=False):
        row = kept.get(snapshot.name)
        if not isinstance(row, dict) or any(row.get(k) != v for k, v in settings.items()):
            try:
                policy = load_policy(snapshot)
                rating = rate_against_ladder(
                    policy, config.ladder, config.ladder_matches, config.seed
                )
            except ValueError as error:
                fail(f"{snapshot} cannot be rated ({first_line(error)})")
            row = {
                "snapshot": snapshot.name,
                "steps": snapshot_steps(snapshot),
                **settings,
                **rating,
                "exploitability": exploitability(policy).exploitability,
            }
        rows.append(row)
    try:
        write_in(run_dir, path, "".join(json.dumps(row) + "\n" for row in rows).encode())
    except RunFolderError as error:
        fail(str(error))
    return rows


def ratings_report(folders: list[Path], config: ReportConfig, out: Path) -> tuple[str, dict]:
    """For each run: its snapshots' ratings and exploitability, their rank correlation, and
    ratings-RUN.png."""
    import scipy.stats

    from buttonup_env.players.league import ladder_ratings

    ladder = ladder_ratings(tuple(config.ladder))
    text = [
        "## Ratings against the ladder",
        "",
        f"Each snapshot rated against the ladder {', '.join(config.ladder)} "
        f"({config.ladder_matches} matches, seed {config.seed}; the ladder's ratings held "
        f"fixed at {', '.join(f'{n} {v:.0f}' for n, v in ladder.items())}), beside its exact "
        "exploitability (round points a best response gains per round). Spearman's rank "
        "correlation: -1 when the rating orders the snapshots exactly as the exploitability "
        "does.",
    ]
    figures = {}
    for run_dir in folders:
        rows = snapshot_ratings(run_dir, config)
        elo = [row["elo"] for row in rows]
        exploit = [row["exploitability"] for row in rows]
        rho = float(scipy.stats.spearmanr(elo, exploit).statistic) if len(rows) > 2 else None
        if rho is not None and not np.isfinite(rho):  # all ratings or all figures equal
            rho = None
        figures[run_dir.name] = {"spearman": rho, "snapshots": rows}
        shown = "n/a (fewer than 3 snapshots, or no spread)" if rho is None else f"{rho:.3f}"
        text += [
            "",
            f"### {run_dir.name}",
            "",
            f"Spearman's rank correlation of rating and exploitability: {shown} over "
            f"{len(rows)} snapshots. Picture: `ratings-{run_dir.name}.png`.",
            "",
            "| snapshot | steps | Elo | 95% interval | exploitability |",
            "|---|---|---|---|---|",
            *(
                f"| {row['snapshot']} | {row['steps'] or 0:,} | {row['elo']:.0f} | "
                f"{row['elo_low']:.0f} to {row['elo_high']:.0f} | {row['exploitability']:.3f} |"
                for row in rows
            ),
        ]
        try:
            evals = read_evaluations(run_dir)
        except (RunFolderError, FieldError) as error:
            fail(str(error))
        plot_ratings(run_dir.name, rows, [r for r in evals if "elo" in r], ladder, rho, out)
    return "\n".join(text), figures


def plot_ratings(
    name: str,
    rows: list[dict[str, Any]],
    evals: list[dict[str, Any]],
    ladder: dict[str, float],
    rho: float | None,
    out: Path,
) -> None:
    """ratings-NAME.png: the snapshots' ratings against steps (and the periodic evaluations'
    ratings logged in training), and against exact exploitability; the ladder as dotted lines."""
    plt = pyplot()

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), dpi=100)
    steps = np.array([row["steps"] or 0 for row in rows]) / 1e6
    elo = np.array([row["elo"] for row in rows])
    error = np.array([[row["elo"] - row["elo_low"], row["elo_high"] - row["elo"]] for row in rows])
    left.errorbar(steps, elo, yerr=error.T, fmt="o", ms=4, capsize=2, label="snapshots")
    if evals:
        x = np.array([row["steps"] for row in evals]) / 1e6
        left.plot(x, [row["elo"] for row in evals], color="tab:orange", label="periodic evaluation")
        left.fill_between(
            x,
            [row["elo_low"] for row in evals],
            [row["elo_high"] for row in evals],
            color="tab:orange",
            alpha=0.2,
        )
    left.set(xlabel="environment steps (millions)", ylabel="Elo (random bot at 0)")
    left.set_title("rating against the ladder", fontsize=10)
    exploit = np.array([row["exploitability"] for row in rows])
    points = right.scatter(exploit, elo, c=steps, cmap="viridis", s=18, zorder=3)
    right.errorbar(exploit, elo, yerr=error.T, fmt="none", ecolor="grey", lw=0.6, zorder=2)
    fig.colorbar(points, ax=right, label="steps (millions)")
    if exploit.min() > 0 and exploit.max() > 10 * exploit.min():  # a log axis, plainly labelled
        from matplotlib.ticker import FuncFormatter, NullFormatter

        right.set_xscale("log")
        right.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        right.xaxis.set_minor_formatter(NullFormatter())
    correlation = "" if rho is None else f" (Spearman {rho:.2f})"
    right.set(xlabel="exact exploitability (round points per round)", ylabel="Elo")
    right.set_title(f"rating against exploitability{correlation}", fontsize=10)
    for ax in (left, right):
        for member, value in ladder.items():
            ax.axhline(value, color="grey", lw=0.5, ls=":")
            ax.annotate(member, (0, value), xycoords=("axes fraction", "data"), fontsize=6,
                        color="grey", xytext=(2, 1), textcoords="offset points")  # fmt: skip
        ax.grid(True, lw=0.3)
    left.legend(fontsize=8, loc="lower right")
    fig.suptitle(name, fontsize=10)
    fig.tight_layout()
    save_figure(fig, out / f"ratings-{name}.png")


# --- main ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> Path:
    argv = sys.argv[1:] if argv is None else argv
    config = tyro.cli(ReportConfig, args=argv, description=__doc__)
    if not config.study and not config.runs:
        fail("give --study NAME (a study of training/tune.py) or --runs FOLDER")
    if config.ratings and not config.runs:
        fail("--ratings rates the snapshots of run folders: give --runs FOLDER")
    if config.ratings:
        try:
            from buttonup_env.players.league import check_ladder

            ladder = check_ladder(config.ladder)
        except ValueError as error:
            fail(f"--ladder: {error}")
        config = dataclasses.replace(config, ladder=ladder)  # the players' names, normalised
        if config.ladder_matches < len(ladder):
            fail(f"--ladder-matches must be at least {len(ladder)}, got {config.ladder_matches}")
    try:
        check_fields(config)
    except ValueError as error:
        fail(str(error))

    for path in config.runs:
        if not path.is_dir():
            fail(f"--runs {path}: no such folder")
    groups: dict[str, list[Run]] = {}
    sweep = None
    sources = []
    if config.study:
        url = config.storage or f"sqlite:///{config.runs_dir / 'optuna.db'}"
        storage = open_storage(url, create=False)
        for name in config.study:
            study = load_study(storage, name, url)
            settings = study.user_attrs.get("tune", {})
            if settings.get("mode") == "sweep":
                if len(config.study) > 1 or config.runs:
                    fail(f"study {name!r} is a sweep: report it alone")
                sweep = study
            else:
                groups[name] = study_runs(study)
                if not groups[name]:
                    fail(f"study {name!r} has no complete trial yet")
            command = settings_command(settings, name, study.user_attrs.get("trials"))
            sources.append(
                f"study {name} in {safe_url(url)}" + (f": `{command}`" if settings else "")
            )
    run_groups = [(path, group_name(path)) for path in config.runs]
    names = list(groups) + [group for _, group in run_groups if group not in groups]
    name = sweep.study_name if sweep is not None else "-".join(dict.fromkeys(names))
    out = config.out or config.runs_dir / f"report-{name}"
    check_output_files(config, out, sweep is not None, url if config.study else None)
    for path, group in run_groups:
        groups.setdefault(group, []).extend(folder_runs(path, config.exploitability))
        sources.append(f"run folders in {path}")

    if sweep is not None:
        body, figures = sweep_report(sweep, config, out)
    else:
        body, figures = seeds_report(groups, config, out)
    if config.ratings:
        folders = rated_folders(config.runs)
        if not folders:
            fail(f"--ratings: no run folder with snapshots in {', '.join(map(str, config.runs))}")
        ratings_body, figures["ratings"] = ratings_report(folders, config, out)
        body += "\n\n" + ratings_body
    command = shlex.join(["python", "training/report.py", *argv])
    header = [
        f"# Report: {name}",
        "",
        f"Made {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by `{command}` ({code_version()}).",
        "",
        *(f"- {source}" for source in sources),
        "",
    ]
    text = "\n".join(header) + "\n" + body + "\n"
    write_output(out / "report.md", text.encode())
    card = {
        "command": command,
        "code_version": code_version(),
        "sources": sources,
        "bootstrap": {"reps": config.reps, "seed": config.seed, "confidence": 0.95},
        "figures": figures,
    }
    write_output(out / "report.json", (json.dumps(card, indent=2) + "\n").encode())
    print(text)
    print(f"wrote {out / 'report.md'}, report.json and the plots in {out}")
    return out


def group_name(path: Path) -> str:
    """The group of ``--runs PATH``: a run folder's parent's name, or a folder's own."""
    is_run = (path / "config.json").is_file()
    return path.resolve().parent.name if is_run else path.resolve().name


def check_output_files(config: ReportConfig, out: Path, sweep: bool, url: str | None) -> None:
    """Make the folder ``out`` (not its own folder) and check the files the report will write
    there (``buttonup_env.ui.cli.check_outputs``): none replaces an existing one without
    --force, nor the study's SQLite file; one error line otherwise, before any work."""
    pictures = ["history.png", "params.png"] if sweep else ["curves.png", "final.png"]
    pictures += [] if sweep else ["time_to_quality.png"]
    if config.ratings:
        pictures += [f"ratings-{run.name}.png" for run in rated_folders(config.runs)]
    inputs: list[Named] = []
    if url is not None and url.startswith("sqlite:///"):
        inputs.append(("--storage", url.removeprefix("sqlite:///")))
    try:
        make_output_folder("--out", out)
        files = ["report.md", "report.json", *pictures]
        check_outputs([("--out", out / file) for file in files], inputs, config.force)
    except ValueError as error:
        fail(str(error))


def settings_command(settings: dict[str, Any], name: str, trials: int | None) -> str:
    """The tune.py command of a study (without --storage and --space), from its settings."""
    args = ["python", "training/tune.py", "--study", name]
    if settings.get("mode") == "seeds":
        args += ["--seeds", str(settings["seeds"])]
    else:
        args += ["--trials", str(trials)]
    args += ["--preset", settings.get("preset", "?"), "--seed", str(settings.get("seed", 0))]
    if settings.get("steps") is not None:
        args += ["--steps", str(settings["steps"])]
    if settings.get("mode") == "sweep" and settings.get("pruner", "median") != "median":
        args += ["--pruner", settings["pruner"]]
    if settings.get("mode") == "sweep" and settings.get("startup_trials", 5) != 5:
        args += ["--startup-trials", str(settings["startup_trials"])]
    if settings.get("exploitability") is False:
        args.append("--no-exploitability")
    if settings.get("train_args"):
        args += ["--", *settings["train_args"]]
    return shlex.join(args)


if __name__ == "__main__":
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    run_cli(main)
