"""The ratings part of ``training/report.py`` (``--ratings``): every snapshot of a run rated
against a fixed ladder of bots beside its exact exploitability, their rank correlation, and
the pictures."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from buttonup_env.game.folders import FolderError
from buttonup_env.ui.cli import fail
from training.plots import pyplot, save_figure
from training.runfolder import EvalRow, RunFiles
from training.studies import first_line


@dataclass(frozen=True)
class Ladder:
    """What the snapshots are rated against: the ladder's ``players``, ``matches`` against it
    (shared among its players), and the ``seed`` of the matches."""

    players: tuple[str, ...]
    matches: int
    seed: int


def check_folder(folder: Path, named: bool) -> None:
    """End the report with one error line when the run folder ``folder`` holds a symbolic
    link, a device or a pipe (or, unless ``named`` by the user, is a link itself): its files
    could lead a read, or the ratings written there, outside it."""
    try:
        RunFiles(folder).check_tree(named)
    except FolderError as error:
        fail(str(error))


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


RATINGS_FILE = "ratings.jsonl"
"""Where a run folder keeps its snapshots' ratings and exploitability (one JSON row each)."""


def rated_folders(paths: tuple[Path, ...]) -> list[Path]:
    """The run folders among ``paths`` (a run folder, or a folder of them) that have snapshots."""
    folders = []
    for path in paths:
        runs = [path] if (path / "config.json").is_file() else sorted(path.iterdir())
        for run in runs:
            if list((run / "snapshots").glob("step_*.onnx")):
                check_folder(run, named=run == path)
                folders.append(run)
    return folders


def snapshot_ratings(run_dir: Path, ladder: Ladder) -> list[dict[str, Any]]:
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
        RunFiles(run_dir).read(path, 64 << 20)  # a regular file of the folder, not a link
        kept = {row["snapshot"]: row for row in read_json_lines(path)}
    except (ValueError, TypeError, KeyError, OSError):  # FolderError is a ValueError
        kept = {}  # missing or damaged: measure again
    settings = {
        "ladder": list(ladder.players),
        "ladder_matches": ladder.matches,
        "seed": ladder.seed,
    }
    rows = []
    for snapshot in tqdm(run_snapshots(run_dir), desc=run_dir.name, unit="snapshot", leave=False):
        row = kept.get(snapshot.name)
        if not isinstance(row, dict) or any(row.get(k) != v for k, v in settings.items()):
            try:  # a PolicyError too: a policy past its time limit, say
                policy = load_policy(snapshot)
                rating = rate_against_ladder(policy, ladder.players, ladder.matches, ladder.seed)
                exploitable = exploitability(policy).exploitability
            except ValueError as error:
                fail(f"{snapshot} cannot be rated ({first_line(error)})")
            row = {
                "snapshot": snapshot.name,
                "steps": snapshot_steps(snapshot),
                **settings,
                **rating,
                "exploitability": exploitable,
            }
        rows.append(row)
    try:
        RunFiles(run_dir).write(path, "".join(json.dumps(row) + "\n" for row in rows).encode())
    except FolderError as error:
        fail(str(error))
    return rows


def ratings_report(folders: list[Path], ladder: Ladder, out: Path) -> tuple[str, dict]:
    """For each run: its snapshots' ratings and exploitability, their rank correlation, and
    ratings-RUN.png."""
    import scipy.stats

    from buttonup_env.players.league import ladder_ratings

    fixed = ladder_ratings(tuple(ladder.players))
    text = [
        "## Ratings against the ladder",
        "",
        f"Each snapshot rated against the ladder {', '.join(ladder.players)} "
        f"({ladder.matches} matches, seed {ladder.seed}; the ladder's ratings held "
        f"fixed at {', '.join(f'{n} {v:.0f}' for n, v in fixed.items())}), beside its exact "
        "exploitability (round points a best response gains per round). Spearman's rank "
        "correlation: -1 when the rating orders the snapshots exactly as the exploitability "
        "does.",
    ]
    figures = {}
    for run_dir in folders:
        rows = snapshot_ratings(run_dir, ladder)
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
            evals = RunFiles(run_dir).read_evaluations()
        except FolderError as error:
            fail(str(error))
        plot_ratings(run_dir.name, rows, [r for r in evals if r.elo is not None], fixed, rho, out)
    return "\n".join(text), figures


def plot_ratings(
    name: str,
    rows: list[dict[str, Any]],
    evals: list[EvalRow],
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
        x = np.array([row.steps for row in evals]) / 1e6
        left.plot(x, [row.elo for row in evals], color="tab:orange", label="periodic evaluation")
        left.fill_between(
            x,
            [row.elo_low for row in evals],
            [row.elo_high for row in evals],
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
