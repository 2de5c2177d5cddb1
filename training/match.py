"""The match solved, in figures and a picture.

    python training/match.py
    python training/match.py --target 15 --plot docs/images/equity.png --json match.json

Solves the match to ``--target`` exactly (``buttonup_env.game.equity``) and prints: how long the
table took, the first round's starter's probability of winning under perfect play of the
match, what a round's result is worth (at 0-0 after Red started: a tie, winning by one, by
two), how many score states value some larger margin less than a smaller one, the margin
player's match exploitability (a best response's probability of winning beyond 0.5) and how
often perfect play of the match beats it. ``--plot FILE`` draws the equity table (Red's
probability of winning from each round start, one panel per starter, and the starter's edge);
``--json FILE`` writes the figures. Neither replaces an existing file without ``--force``.
See docs/match.md.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import tyro

from buttonup_env.game import equity
from buttonup_env.game.rules import MAX_ROUND_MARGIN
from buttonup_env.players.best_response import match_best_response, match_result
from buttonup_env.players.bots import MarginBot, PerfectBot
from buttonup_env.ui.cli import check_outputs, run_cli, write_output
from training.plots import figure_png, pyplot
from training.typed_json import Range, check_fields


@dataclass
class MatchArgs:
    """The match solved: its equity table, what a round's result is worth, and the margin
    player's match exploitability."""

    target: Annotated[int, Range(1, equity.MAX_SOLVED_TARGET)] = 15
    """Points that win a match (the match is solved for 1 to 100)."""
    plot: Path | None = None
    """Draw the equity table to this PNG file (its folder must exist)."""
    json: Path | None = None
    """Write the figures to this JSON file (its folder must exist)."""
    force: bool = False
    """Replace the --plot and --json files if they exist."""


@dataclass
class MatchFigures:
    """The figures :func:`main` prints."""

    target: int
    seconds: float
    """Time to solve the table (the rounds' graph included, when this process has not built
    it yet)."""
    first_starter: float
    """The first round's starter's probability of winning, under perfect play of the match."""
    after_tie: float
    """At 0-0 after Red started: Black's probability after a tied round (Black starts next)."""
    after_win_by_one: float
    """... after Black won it by one point (Red, behind, starts next)."""
    after_win_by_two: float
    """... after Black won it by two points."""
    not_monotone: int
    """Score states (of 2 * target ** 2) where some larger margin is worth less."""
    margin_exploitability: float
    """The margin player's match exploitability."""
    margin_best_response: dict[str, float]
    """The best response's probability by who starts the first round: the player or its
    opponent."""
    perfect_against_margin: float
    """Perfect play of the match's probability of winning against the margin player."""


def _worth(table: equity.EquityTable, r: int, b: int, starter: int) -> np.ndarray:
    """Red's probability after each Red margin from -18 to 18 of a round at ``(r, b)``."""
    return equity.utilities(table.target, [(r, b, starter)], table.red, True)[:, 0]


def figures(target: int) -> MatchFigures:
    """Everything :func:`main` prints, computed."""
    start = time.perf_counter()
    table = equity.match_equity(target)
    seconds = time.perf_counter() - start
    worth = _worth(table, 0, 0, 0)
    zero = MAX_ROUND_MARGIN
    not_monotone = sum(
        bool(np.any(np.diff(_worth(table, r, b, s)) < -1e-15))
        for r in range(target)
        for b in range(target)
        for s in (0, 1)
    )
    solved = match_best_response(MarginBot(), target)
    return MatchFigures(
        target=target,
        seconds=seconds,
        first_starter=table.first_starter,
        after_tie=1.0 - worth[zero],
        after_win_by_one=1.0 - worth[zero - 1] if target > 1 else 1.0,
        after_win_by_two=1.0 - worth[zero - 2] if target > 2 else 1.0,
        not_monotone=not_monotone,
        margin_exploitability=solved.exploitability,
        margin_best_response={
            "the player starts": solved.wins[("R", "R")],
            "its opponent starts": solved.wins[("R", "B")],
        },
        perfect_against_margin=match_result(PerfectBot(), MarginBot(), target),
    )


def report(f: MatchFigures) -> str:
    """The figures as the lines :func:`main` prints."""
    return "\n".join(
        [
            f"the match to {f.target}, solved exactly in {f.seconds:.2f} s (cold)",
            f"perfect play of the match: the first round's starter wins "
            f"{100 * f.first_starter:.3f}%",
            f"at 0-0 after Red started, Black wins {100 * f.after_tie:.2f}% after a tied round "
            f"(Black starts next), {100 * f.after_win_by_one:.2f}% after winning it by one (Red "
            f"starts next), {100 * f.after_win_by_two:.2f}% after winning it by two",
            f"score states where a larger margin is worth less: {f.not_monotone} of "
            f"{2 * f.target**2}",
            f"the margin player's match exploitability: {f.margin_exploitability:.4f} (a best "
            f"response wins {100 * f.margin_best_response['the player starts']:.2f}% of the "
            "matches the margin player starts, "
            f"{100 * f.margin_best_response['its opponent starts']:.2f}% of those it starts "
            "itself)",
            f"perfect play of the match wins {100 * f.perfect_against_margin:.3f}% against the "
            "margin player",
        ]
    )


def plot_equity(table: equity.EquityTable) -> bytes:
    """Red's probability of winning from every round start, one panel per starter, and the
    starter's edge, as PNG bytes."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), dpi=100)
    panels = [
        (table.red[:, :, 0], "Red starts the round", "RdBu_r", (0, 1)),
        (table.red[:, :, 1], "Black starts the round", "RdBu_r", (0, 1)),
    ]
    edge = table.red[:, :, 0] - table.red[:, :, 1]
    panels.append((edge, "the starter's edge (Red starts minus Black starts)", "viridis", None))
    for ax, (data, title, cmap, limits) in zip(axes, panels, strict=True):
        vmin, vmax = limits if limits else (float(data.min()), float(data.max()))
        image = ax.imshow(data.T, origin="lower", cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set(xlabel="Red's points", ylabel="Black's points", title=title)
        ticks = range(0, table.target, max(1, table.target // 7))
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle(
        f"Red's probability of winning the match to {table.target} from the start of a round, "
        "under perfect play of the match"
    )
    fig.tight_layout()
    return figure_png(fig)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = tyro.cli(MatchArgs, args=argv, description=__doc__)
    try:
        check_fields(args)
        check_outputs([("--plot", args.plot), ("--json", args.json)], force=args.force)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    found = figures(args.target)
    print(report(found))
    outputs: list[tuple[Path, bytes]] = []
    if args.plot is not None:
        outputs.append((args.plot, plot_equity(equity.match_equity(args.target))))
    if args.json is not None:
        data: dict[str, Any] = asdict(found)
        outputs.append((args.json, (json.dumps(data, indent=2) + "\n").encode()))
    try:
        for path, content in outputs:
            write_output(path, content)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    run_cli(main)
