"""A league table: every player rated on one Elo scale, with 95% intervals.

    python training/league.py --players random greedy perfect-0.1 perfect buttonup-ppo --matches 200
    python training/league.py --players random greedy perfect runs/NAME --json league.json

Plays ``--matches`` matches (to the target, 15 points) between the pairs of players, a round
robin up to 12 players, and beyond that each player against its ``--neighbours`` next ones in
the order given plus every bot (``--schedule``), seats and starters alternating, reproducible
from ``--seed``. The results are fitted with Bradley-Terry on the Elo scale (a gap of 400 is
odds of 10 to 1 in a match), the random bot fixed at 0 (without it, the first player), and a
prior of ``--prior`` extra matches per pair split evenly, which keeps ratings finite when a
pair never loses. Prints the table (player, rating, 95% interval, matches); ``--json FILE``
writes ratings and pairs, ``--plot FILE`` a picture of the ladder (neither replaces an
existing file without ``--force``, nor a player's file, nor the other).

A player is ``random``, ``greedy``, ``perfect``, a graded bot ``perfect-P`` (a random legal
move with probability P, the perfect move otherwise: ``perfect-0.3``), the name of a shipped
policy (``buttonup-ppo``), a path to an exported ``.onnx`` policy, or a training run's folder
(all its snapshots, ``snapshots/step_N.onnx``). See docs/league.md.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro
from tqdm import tqdm

from buttonup_env.game.rules import MAX_TARGET
from buttonup_env.players.arena import PairResult, make_player, play_pairs, player_specs
from buttonup_env.players.batched import BatchedPlayer
from buttonup_env.players.league import ANCHOR, PRIOR_MATCHES, LeagueTable, fit_ratings, schedule
from buttonup_env.ui.cli import check_outputs, run_cli, write_output
from training.bounds import Matches, Seed, code_version
from training.plots import figure_png, pyplot
from training.typed_json import Range, check_fields

MAX_PLAYERS = 1_000
"""The most players of a league."""


@dataclass
class LeagueArgs:
    """Rate players against each other on one Elo scale (Bradley-Terry, random bot at 0)."""

    players: tuple[str, ...] = ()
    """The players: random, greedy, perfect, perfect-P, a shipped policy's name, an .onnx file
    or a training run's folder (its snapshots)."""
    matches: Matches = 200
    """Matches per pair of players."""
    seed: Seed = 0
    """Seed of the layouts and the bots' random moves (each pair's from it and the names)."""
    target: Annotated[int, Range(1, MAX_TARGET)] = 15
    """Points that win a match."""
    schedule: Literal["auto", "round-robin", "neighbours"] = "auto"
    """Which pairs meet: auto (a round robin up to 12 players, else neighbours), round-robin,
    or neighbours (each player against its --neighbours next ones, and every bot against
    everyone)."""
    neighbours: Annotated[int, Range(1, MAX_PLAYERS)] = 2
    """With the neighbours schedule: how many of the next players each one meets."""
    prior: float = PRIOR_MATCHES
    """Extra matches per pair that met, half won by each side: the prior of the fit."""
    json: Path | None = None
    """Write ratings and pairs to this JSON file (its folder must exist)."""
    plot: Path | None = None
    """Draw the ladder (ratings with their intervals) to this PNG file (its folder must
    exist)."""
    force: bool = False
    """Replace the --json and --plot files if they exist (without it, an existing file is kept
    and the command stops before any match)."""
    progress: bool = True
    """Show a progress bar."""


def check(args: LeagueArgs) -> None:
    """``ValueError`` with one sentence for a bad argument."""
    if len(args.players) < 2 and not (args.players and Path(args.players[0]).is_dir()):
        raise ValueError(  # one run folder is enough: its snapshots are the players
            f"--players needs at least two players, got {len(args.players)}; e.g. --players "
            "random greedy perfect, or a training run's folder"
        )
    if len(args.players) > MAX_PLAYERS:
        raise ValueError(
            f"--players names {len(args.players)} players; a league has at most {MAX_PLAYERS:,}"
        )
    if not 0 < args.prior < float("inf"):
        raise ValueError(f"--prior must be a number of matches > 0, got {args.prior}")
    check_fields(args)


def plot_ladder(table: LeagueTable, path: Path, title: str = "") -> None:
    """The ratings, best at the top, with their intervals (PNG, written atomically;
    ``ValueError`` in one sentence when it cannot be written)."""
    plt = pyplot()

    names = list(table.ratings)[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.32 * len(names)), dpi=100)
    for row, name in enumerate(names):
        rating = table.ratings[name]
        low, high = rating.interval
        ax.plot([low, high], [row, row], color="tab:blue", lw=2, alpha=0.6)
        ax.plot([rating.elo], [row], "o", color="tab:blue")
        ax.annotate(
            f"{rating.elo:.0f}",
            (rating.elo, row),
            xytext=(0, 5),
            textcoords="offset points",
            ha="center",
            fontsize=7,
        )
    ax.set_yticks(range(len(names)), names, fontsize=8)
    fixed = ", ".join(f"{n} at {v:g}" for n, v in table.fixed.items())
    ax.set(xlabel=f"Elo (Bradley-Terry; {fixed}); bars: 95% intervals", title=title)
    ax.grid(True, axis="x", lw=0.3)
    fig.tight_layout()
    write_output(path, figure_png(fig))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = tyro.cli(LeagueArgs, args=argv, description=__doc__)
    try:
        check(args)
        named = player_specs(args.players)
        if len(named) > MAX_PLAYERS:  # a run folder gives all its snapshots
            raise ValueError(
                f"--players gives {len(named):,} players, its run folders' snapshots counted; "
                f"a league has at most {MAX_PLAYERS:,}"
            )
        files = [("--players", spec) for name, spec in named if Path(spec).exists()]
        check_outputs([("--json", args.json), ("--plot", args.plot)], files, args.force)
        names = [name for name, _ in named]
        pairs = schedule(names, args.schedule, args.neighbours)
        players = [make_player(spec, name) for name, spec in named]
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    total = len(pairs) * args.matches
    start = time.perf_counter()
    try:
        results = play(args, players, pairs, total)
    except ValueError as error:  # a policy that failed as it played (PolicyError): its time
        print(f"error: {error}", file=sys.stderr)  # limit, logits that are not finite, ...
        return 2
    seconds = time.perf_counter() - start
    anchor = ANCHOR if ANCHOR in names else names[0]
    table = fit_ratings(results, fixed={anchor: 0.0}, prior=args.prior)
    print(
        f"{len(names)} players, {len(pairs)} pairs, {args.matches} matches a pair "
        f"({total:,} matches in {seconds:.1f} s), seed {args.seed}; {anchor} fixed at 0"
    )
    print(table.table())
    command = shlex.join(["python", "training/league.py", *argv])
    try:
        write_results(args, table, command, seconds)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def play(
    args: LeagueArgs, players: list[BatchedPlayer], pairs: list[tuple[int, int]], total: int
) -> list[PairResult]:
    """The matches of the league, with a progress bar of its ``total`` matches."""
    with tqdm(total=total, unit="match", disable=not args.progress, leave=False) as bar:
        return play_pairs(
            players,
            pairs,
            args.matches,
            seed=args.seed,
            target=args.target,
            progress=lambda done: bar.update(done - bar.n),
        )


def write_results(args: LeagueArgs, table: LeagueTable, command: str, seconds: float) -> None:
    """Write the --json and --plot files asked for (``ValueError`` in one sentence when one
    cannot be written)."""
    if args.json is not None:
        card = {
            "command": command,
            "code_version": code_version(),
            "made": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "seed": args.seed,
            "matches_per_pair": args.matches,
            "target": args.target,
            "schedule": args.schedule,
            "seconds": round(seconds, 2),
            **table.to_dict(),
        }
        write_output(args.json, (json.dumps(card, indent=2) + "\n").encode())
        print(f"ratings written to {args.json}")
    if args.plot is not None:
        plot_ladder(table, args.plot, f"{args.matches} matches a pair, seed {args.seed}")
        print(f"ladder drawn in {args.plot}")


if __name__ == "__main__":
    run_cli(main)
