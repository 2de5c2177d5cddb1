"""The exact solver: a cold solve of the whole game, and the cost of a move on a solved position.

    python benchmarks/bench_solver.py [--repeats 5]

The cold solve clears the solver's table and solves every position reachable from the 1,680
set-ups. ``act`` is PerfectBot.act on positions along random games once everything is solved.
Medians of the repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from buttonup_env.game import solver
from buttonup_env.game.rules import LAYOUTS, State
from buttonup_env.players.bots import PerfectBot, RandomBot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="repeats (medians are reported)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    cold = []
    for _ in range(args.repeats):
        solver.clear_table()
        start = time.perf_counter()
        size = solver.solve_all()
        cold.append(time.perf_counter() - start)
    rng = np.random.default_rng(0)
    walker = RandomBot(rng)
    states = []
    for i in range(2000):
        state = State.new_round(LAYOUTS[int(rng.integers(len(LAYOUTS)))], "RB"[i % 2])
        while not state.round_over:
            states.append(state)
            state = state.play(walker.act(state))
    bot = PerfectBot(0)
    per_act = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for state in states:
            bot.act(state)
        per_act.append((time.perf_counter() - start) / len(states))
    print(f"canonical positions: {size:,}")
    print(
        f"cold solve of all 1,680 set-ups: {statistics.median(cold):.3f} s "
        f"(median of {args.repeats})"
    )
    print(
        f"PerfectBot.act on a solved position: {1e6 * statistics.median(per_act):.1f} us "
        f"(median over {len(states):,} positions x {args.repeats})"
    )


if __name__ == "__main__":
    main()
