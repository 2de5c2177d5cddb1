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
    "match_regret_perfect": "match regret against the perfect bot (winning probability per "
    "decision)",
    "regret_perfect": "regret against the perfect bot (round points per decision)",
    **{f"win_rate_{bot}": f"win rate against the {bot} bot (%)" for bot in EVAL_BOTS},
    "match_exploitability": "match exploitability (winning probability)",
    "exploitability": "exploitability (round points per round)",
}
"""The figures of a many-seed report, in its order: key in a trial's ``final`` -> label (a
figure no run has is left out: the match regret of rows written before it was measured, the
match exploitability unless measured)."""

PERCENT = {f"win_rate_{bot}" for bot in EVAL_BOTS}
"""Figures stored as fractions and shown as percentages."""

DIGITS = {"match_regret_perfect": 5, "match_exploitability": 4}
"""The decimals of the figures shown with more than three (the match's are small)."""


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


CURVES = ("regret_perfect", "match_regret_perfect", *(f"win_rate_{bot}" for bot in EVAL_BOTS))
"""The figures of the learning curves (every periodic evaluation has them, but the match
regret, which rows written before it was measured lack)."""


def curve_figure(row: EvalRow, key: str) -> float | None:
    """The figure ``key`` of :data:`CURVES` in the periodic evaluation ``row`` (None: not in
    the row)."""
    return getattr(row, key)


def curve_estimates(
    runs: list[Run], reps: int, seed: int
) -> tuple[list[int], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The steps that all the runs' periodic evaluations have, and for each figure of CURVES
    that all their rows have its IQM over the runs at those steps and the 95% interval (2 x
    steps). One bootstrap for all: a resample of the runs carries their whole curves, every
    figure."""
    import scipy.stats
    from rliable import library as rly

    common = sorted(set.intersection(*({row.steps for row in run.evals} for run in runs)))
    if not common:
        return [], {}
    keys = [
        key
        for key in CURVES
        if all(curve_figure(row, key) is not None for run in runs for row in run.evals)
    ]
    rows = [{row.steps: row for row in run.evals} for run in runs]
    scores = np.array(
        [[curve_figure(by_step[s], key) for key in keys for s in common] for by_step in rows],
        dtype=float,
    ).reshape(len(runs), 1, len(keys) * len(common))  # runs x tasks (one) x figure-steps
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
        for i, key in enumerate(keys)
    }


def show(key: str, value: float) -> str:
    return f"{100 * value:.1f}" if key in PERCENT else f"{value:.{DIGITS.get(key, 3)}f}"


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
        "bot: the match regret, in the probability of winning the match lost per decision, and "
        "the round regret, in round points) and the exact exploitability of the policy each "
        "run hands over (averaged.onnx, or final.onnx for a run without one; the round's, and "
        "the match's when measured). IQM: the mean of the middle "
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
    if any(row.match_regret_perfect is not None for r in all_runs(groups) for row in r.evals):
        quality_text, figures["time_to_quality_match"] = time_to_quality(groups, "match")
        text += ["", quality_text]
    return "\n".join(text), figures


def all_runs(groups: dict[str, list[Run]]) -> list[Run]:
    return [run for runs in groups.values() for run in runs]


QUALITY_LEVELS = (0.1, 0.05, 0.02, 0.01)
"""The regrets against the perfect bot of the time-to-quality table."""

MATCH_QUALITY_LEVELS = (0.002, 0.001, 0.0005, 0.0002)
"""The match regrets against the perfect bot of the match's time-to-quality table."""

QUALITY = {
    "round": ("regret_perfect", "regret", QUALITY_LEVELS),
    "match": ("match_regret_perfect", "match regret", MATCH_QUALITY_LEVELS),
}
"""By level: the figure of the time-to-quality table, its name and its levels."""


def reached(evals: list[EvalRow], level: float, key: str = "regret_perfect") -> dict | None:
    """The first periodic evaluation with a regret against the perfect bot (``key``: the
    round's or the match's) at or below ``level`` (its steps and training minutes), or
    None."""
    for row in evals:
        figure = getattr(row, key)
        if figure is not None and figure <= level:
            return {"steps": row.steps, "minutes": row.minutes}
    return None


def time_to_quality(
    groups: dict[str, list[Run]], level_of: str = "round"
) -> tuple[str, dict[str, Any]]:
    """For each run: the steps and training minutes to its first periodic evaluation at or
    below each level of regret against the perfect bot (:data:`QUALITY`: the round's
    regret, or the match's)."""
    key, name, levels = QUALITY[level_of]
    head = " | ".join(f"{name} <= {level:g}" for level in levels)
    lines = [
        "## Time to quality" + (" (the match)" if level_of == "match" else ""),
        "",
        f"Training minutes (and steps) to the first periodic evaluation with a {name} against "
        "the perfect bot at or below each level (`-`: not reached). Periodic evaluations come "
        "every `eval_every` steps, so a level is reached at most that many steps before the "
        "figure.",
        "",
        f"| group | run | seed | {head} |",
        "|---|---|---|" + "---|" * len(levels),
    ]
    figures: dict[str, Any] = {}
    for group, runs in groups.items():
        for run in runs:
            found = [reached(run.evals, level, key) for level in levels]
            figures.setdefault(group, {})[run.name] = {
                str(level): hit for level, hit in zip(levels, found, strict=True)
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
    if level_of == "round":
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

    fig, grid = plt.subplots(2, 3, figsize=(14, 7), dpi=100)
    axes = dict(zip(CURVES, grid.flat, strict=False))
    grid.flat[-1].set_axis_off()
    drawn = set()
    for index, (group, runs) in enumerate(groups.items()):
        runs = [run for run in runs if run.evals]
        if not runs:
            continue
        steps, curves = curve_estimates(runs, bootstrap.reps, bootstrap.seed)
        x = np.array(steps) / 1e6
        colour = f"C{index}"
        for key, (point, interval) in curves.items():
            ax, scale = axes[key], 100 if key in PERCENT else 1
            ax.plot(x, scale * point, marker=".", color=colour, label=f"{group} ({len(runs)} runs)")
            ax.fill_between(x, scale * interval[0], scale * interval[1], color=colour, alpha=0.2)
            drawn.add(key)
    for key, ax in axes.items():
        ax.set(xlabel="environment steps (millions)", title=FIGURES[key].replace(" (", "\n("))
        ax.grid(True, lw=0.3)
        if key not in drawn:
            ax.text(0.5, 0.5, "not in these runs' evaluations", ha="center", transform=ax.transAxes)
    axes[CURVES[0]].legend(fontsize=8)
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
