"""The league: its batched matches beside the same matches one at a time, the fit, and the cost
of one rating against the ladder beside a periodic evaluation of training.

    python benchmarks/bench_league.py [--repeats 3] [--matches 200]

1. A league of 8 players (random, greedy, perfect-0.5, perfect-0.25, perfect-0.1, perfect-0.05,
   perfect, buttonup-ppo), ``--matches`` a pair, round robin (28 pairs): the batched matches
   (``play_pairs``) and the Bradley-Terry fit with its intervals (``fit_ratings``).
2. The reference: the same players' matches one at a time with their ``act(state)``
   (``evaluate``, no regret measured), 1/20 of the matches of every pair, scaled up.
3. One rating of the shipped agent against the default ladder (300 matches, as
   ``training/train.py`` does at every periodic evaluation) beside that evaluation's own
   matches in the quick preset (50 against each bot, with the regret).

Medians of the repeats, all in this process, one after the other.
"""

from __future__ import annotations

import argparse
import statistics
import time

from buttonup_env.engine.tables import game_tables
from buttonup_env.players.arena import make_player, play_pairs
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


def one_at_a_time(name: str) -> object:
    return load_policy(name) if name == "buttonup-ppo" else make_bot(name)


def median_time(work: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="repeats (medians are reported)")
    parser.add_argument("--matches", type=int, default=200, help="matches per pair")
    args = parser.parse_args()
    if args.repeats < 1 or args.matches < 20:
        parser.error(
            f"--repeats must be >= 1 and --matches >= 20, got {args.repeats} and {args.matches}"
        )
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


if __name__ == "__main__":
    main()
