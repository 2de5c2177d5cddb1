"""The league: its batched matches beside the same matches one at a time, the fit, and the cost
of one rating against the ladder beside a periodic evaluation of training.

    python benchmarks/bench_league.py [--repeats 3] [--matches 200] [--reference DIR]
                                      [--only-reference]

1. A league of 8 players (random, greedy, perfect-0.5, perfect-0.25, perfect-0.1, perfect-0.05,
   perfect, buttonup-ppo), ``--matches`` a pair, round robin (28 pairs): the batched matches
   (``play_pairs``) and the Bradley-Terry fit with its intervals (``fit_ratings``).
2. The reference: the same players' moves one game at a time with their ``act(state)``
   (``evaluate`` of ``ActPlayer``s, no regret measured), 1/20 of the matches of every pair,
   scaled up.
3. One rating of the shipped agent against the default ladder (300 matches, as
   ``training/train.py`` does at every periodic evaluation) beside that evaluation's own
   matches in the quick preset (50 against each bot, with the regret).

Medians of the repeats, all in this process, one after the other.

``--reference DIR`` also times another checkout of this repository (a ``git worktree`` of an
earlier commit) beside this one: the batched matches of 1. and the rating of 3., each checkout
in a fresh subprocess running its own ``benchmarks/bench_league.py`` (a warm-up, then the
median of three), the two alternating ``--repeats`` times; it prints both checkouts' medians
and the median of the per-repeat ratios (this checkout's time over the reference's).
``--only-reference`` runs that comparison alone::

    git worktree add --detach ../buttonup-d2d4121 d2d4121
    python benchmarks/bench_league.py --repeats 9 --only-reference --reference ../buttonup-d2d4121
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import checkouts  # benchmarks/checkouts.py, beside this script

from buttonup_env.engine.tables import game_tables
from buttonup_env.players.arena import make_player, play_pairs
from buttonup_env.players.batched import ActPlayer
from buttonup_env.players.bots import BOT_NAMES, make_bot
from buttonup_env.players.evaluation import evaluate
from buttonup_env.players.league import (
    fit_ratings,
    ladder_ratings,
    rate_against_ladder,
    round_robin,
)
from buttonup_env.players.policy import load_policy

PLAYERS = (
    "random",
    "greedy",
    "perfect-0.5",
    "perfect-0.25",
    "perfect-0.1",
    "perfect-0.05",
    "perfect",
    "buttonup-ppo",
)


def one_at_a_time(name: str) -> ActPlayer:
    """The player ``name`` asked for its moves by ``act(state)``, one game at a time."""
    return ActPlayer(name, load_policy(name) if name == "buttonup-ppo" else make_bot(name))


def median_time(work: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


REFERENCE_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1] + "/benchmarks")
import bench_league as bench
matches = int(sys.argv[2])
bench.game_tables()
players = [bench.make_player(name) for name in bench.PLAYERS]
pairs = bench.round_robin(len(players))
play = lambda: bench.play_pairs(players, pairs, matches, seed=0)
play()  # untimed: the policy's session, the caches warm
policy = bench.load_policy("buttonup-ppo")
bench.ladder_ratings()
rate = lambda: bench.rate_against_ladder(policy, matches=300, seed=1000)
rate()
print(json.dumps({"batched matches": bench.median_time(play, 3),
                  "one rating": bench.median_time(rate, 3)}))
"""
"""What each subprocess of ``--reference`` runs: the checkout's own players, league and timer
(``sys.argv``: the checkout, the matches a pair)."""


def compare_checkouts(reference: str, matches: int, repeats: int) -> None:
    """Print this checkout's league times beside ``reference``'s (see the module
    docstring)."""
    commit = checkouts.describe(Path(reference), "bench_league.py")
    here, there = checkouts.side_by_side(Path(reference), repeats, REFERENCE_CHILD, matches)
    print(
        f"this checkout ({checkouts.describe(checkouts.HERE, 'bench_league.py')}) against "
        f"{commit}: seconds, each checkout in its own subprocess (median of 3 after a "
        f"warm-up), median of {repeats} alternating repeats"
    )
    for name in here[0]:
        mine = [r[name] for r in here]
        theirs = [r[name] for r in there]
        ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
        print(
            f"  {name:16s} this {statistics.median(mine):.3f} s  {commit} "
            f"{statistics.median(theirs):.3f} s  time ratio {statistics.median(ratios):.3f} "
            "(per repeat: " + ", ".join(f"{r:.2f}" for r in ratios) + ")"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="repeats (medians are reported)")
    parser.add_argument("--matches", type=int, default=200, help="matches per pair")
    parser.add_argument(
        "--reference",
        metavar="DIR",
        help="also time the league of this checkout (e.g. a git worktree of an earlier "
        "commit), its own code, beside this one's",
    )
    parser.add_argument(
        "--only-reference", action="store_true", help="run the --reference comparison alone"
    )
    args = parser.parse_args()
    if args.repeats < 1 or args.matches < 20:
        parser.error(
            f"--repeats must be >= 1 and --matches >= 20, got {args.repeats} and {args.matches}"
        )
    if args.only_reference and args.reference is None:
        parser.error("--only-reference needs --reference DIR")
    if args.reference is not None:
        try:
            checkouts.describe(Path(args.reference), "bench_league.py")
        except ValueError as error:
            parser.error(str(error))
        if args.only_reference:
            compare_checkouts(args.reference, args.matches, args.repeats)
            return
    game_tables()
    players = [make_player(name) for name in PLAYERS]
    pairs = round_robin(len(players))
    total = len(pairs) * args.matches
    results = play_pairs(players, pairs, args.matches, seed=0)  # warm: the policy's session
    play = median_time(lambda: play_pairs(players, pairs, args.matches, seed=0), args.repeats)
    fit = median_time(lambda: fit_ratings(results), args.repeats)

    share = args.matches // 20

    def reference() -> None:
        for i, j in pairs:
            evaluate(one_at_a_time(PLAYERS[i]), one_at_a_time(PLAYERS[j]), share, regret=False)

    single = median_time(reference, args.repeats) * args.matches / share

    policy = load_policy("buttonup-ppo")
    ladder_ratings()
    rating = median_time(lambda: rate_against_ladder(policy, matches=300, seed=1000), args.repeats)

    def periodic() -> None:
        for name in BOT_NAMES:
            evaluate(policy, make_bot(name), 50, seed=1000)

    evaluation = median_time(periodic, args.repeats)

    print(f"league of {len(players)} players, {len(pairs)} pairs, {args.matches} matches a pair "
          f"({total:,} matches), medians of {args.repeats}:")  # fmt: skip
    print(f"  batched matches: {play:.2f} s ({total / play:,.0f} matches/s)")
    print(f"  the fit and its intervals: {fit:.2f} s")
    print(f"  the same matches one at a time: {single:.1f} s (from 1/20 of them), "
          f"{single / play:.0f}x the batched time")  # fmt: skip
    print(f"one rating against the default ladder (300 matches): {rating:.3f} s")
    print(f"a quick-preset periodic evaluation (3 x 50 matches with regret): {evaluation:.3f} s "
          f"(the rating adds {100 * rating / evaluation:.0f}%)")  # fmt: skip
    if args.reference is not None:
        compare_checkouts(args.reference, args.matches, args.repeats)


if __name__ == "__main__":
    main()
