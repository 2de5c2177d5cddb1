"""The sweep part of ``training/report.py``: the best trials of a study with their
parameters, each parameter's importance (Optuna's fANOVA) and effect, and the plots."""

from __future__ import annotations

import statistics
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from training.plots import pyplot, save_figure


def sweep_report(study: Any, top: int, out: Path) -> tuple[str, dict]:
    """The best ``top`` trials, the parameters' effects, and the plots of a sweep."""
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
        f"### Best trials (up to {top})",
        "",
        "| rank | trial | regret | win rate against perfect (%) | lowest regret (step) | "
        + " | ".join(params)
        + " |",
        "|---" * (5 + len(params)) + "|",
    ]
    best_rows = best_trials(complete[:top], params, text)
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


def best_trials(trials: list, params: list[str], text: list[str]) -> list[dict[str, Any]]:
    """The table's rows of the best ``trials`` (added to ``text``), and their figures."""
    rows = []
    for rank, t in enumerate(trials, start=1):
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
        rows.append({"trial": t.number, "regret": t.value, "params": t.params})
    return rows


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
