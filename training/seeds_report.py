"""The many-seed part of ``training/report.py``: for each figure at the end of training, the
interquartile mean over the runs of each group with a 95% stratified bootstrap interval
(rliable), the learning curves with their intervals, and the time to quality."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from buttonup_env.ui.cli import fail
from training.plots import pyplot, save_figure
from training.runfolder import EVAL_BOTS, EvalRow

FIGURES = {
    "regret_perfect": "regret against the perfect bot (round points per decision)",
    **{f"win_rate_{bot}": f"win rate against the {bot} bot (%)" for bot in EVAL_BOTS},
    "exploitability": "exploitability (round points per round)",
}
"""The figures of a many-seed report, in its order: key in a trial's ``final`` -> label."""

PERCENT = {f"win_rate_{bot}" for bot in EVAL_BOTS}
"""Figures stored as fractions and shown as percentages."""


@dataclass
class Run:
    """One training's figures at its end and its periodic evaluations."""

    name: str
    final: dict[str, Any]
    evals: list[EvalRow] = field(default_factory=list)
    seed: int | None = None


@dataclass(frozen=True)
class Bootstrap:
    """The bootstrap of the intervals: ``reps`` resamples, seeded with ``seed``."""

    reps: int
    seed: int


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


CURVES = ("regret_perfect", *(f"win_rate_{bot}" for bot in EVAL_BOTS))
"""The figures of the learning curves (every periodic evaluation has them)."""


def curve_figures(row: EvalRow) -> list[float]:
    """The figures of :data:`CURVES` in the periodic evaluation ``row``, in that order."""
    return [row.regret_perfect, *(row.win_rate(bot) for bot in EVAL_BOTS)]


def curve_estimates(
    runs: list[Run], reps: int, seed: int
) -> tuple[list[int], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The steps that all the runs' periodic evaluations have, and for each figure of CURVES
    its IQM over the runs at those steps and the 95% interval (2 x steps). One bootstrap for
    all: a resample of the runs carries their whole curves, every figure."""
    import scipy.stats
    from rliable import library as rly

    common = sorted(set.intersection(*({row.steps for row in run.evals} for run in runs)))
    if not common:
        return [], {}
    rows = [{row.steps: curve_figures(row) for row in run.evals} for run in runs]
    scores = np.array(
        [[by_step[s][k] for k in range(len(CURVES)) for s in common] for by_step in rows],
        dtype=float,
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


def seeds_report(groups: dict[str, list[Run]], bootstrap: Bootstrap, out: Path) -> tuple[str, dict]:
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
        points, intervals = interval_estimates(scores, bootstrap.reps, bootstrap.seed)
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
    plot_curves(groups, bootstrap, out / "curves.png")
    plot_intervals(figures, out / "final.png")
    text = [
        "## Many-seed results",
        "",
        "Figures at the end of each run: the last periodic evaluation (matches against each "
        "bot) and the exact exploitability of the final policy. IQM: the mean of the middle "
        f"half of the runs; 95% CI: stratified bootstrap with {bootstrap.reps:,} resamples "
        f"(rliable, seed {bootstrap.seed}). Win rates in %.",
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


def reached(evals: list[EvalRow], level: float) -> dict[str, Any] | None:
    """The first periodic evaluation with a regret against the perfect bot at or below
    ``level`` (its steps and training minutes), or None."""
    for row in evals:
        if row.regret_perfect <= level:
            return {"steps": row.steps, "minutes": row.minutes}
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
            rows = [row for row in run.evals if row.regret_perfect > 0]
            regret = [row.regret_perfect for row in rows]
            shown += regret
            label = group if k == 0 else None
            style = dict(color=f"C{index}", marker=".", lw=1, label=label)
            by_time.plot([row.minutes for row in rows], regret, **style)
            by_steps.plot([row.steps / 1e6 for row in rows], regret, **style)
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


def plot_curves(groups: dict[str, list[Run]], bootstrap: Bootstrap, path: Path) -> None:
    plt = pyplot()

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), dpi=100)
    for index, (group, runs) in enumerate(groups.items()):
        runs = [run for run in runs if run.evals]
        if not runs:
            continue
        steps, curves = curve_estimates(runs, bootstrap.reps, bootstrap.seed)
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
