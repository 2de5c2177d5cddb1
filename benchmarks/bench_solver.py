"""The exact solvers: the round's and the match's cold solves, a move on a solved position,
and the match exploitability of a bot and of the shipped policy.

    python benchmarks/bench_solver.py [--repeats 5] [--no-policy]

The round's cold solve clears the solver's table and solves every position reachable from the
1,680 set-ups. The match's cold solve is the equity table to 15 in a new interpreter (the
rounds' graph included), timed inside it, on one core (``taskset -c 0`` where there is one).
``act`` is MarginBot.act (the round) and PerfectBot.act (the match) on positions along random
games once everything is solved. Medians of the repeats; the exploitability figures are one
run each.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

from buttonup_env.game import solver
from buttonup_env.game.rules import LAYOUTS, State
from buttonup_env.players.best_response import match_best_response
from buttonup_env.players.bots import MarginBot, PerfectBot, RandomBot

COLD_MATCH = """
import time
start = time.perf_counter()
from buttonup_env.game.equity import match_equity
match_equity(15)
print(time.perf_counter() - start)
"""


def cold_match_table() -> float:
    """Seconds to import the solver and solve the table to 15 in a new interpreter."""
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    done = subprocess.run(
        [*pin, sys.executable, "-c", COLD_MATCH], capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip())


def per_act(bot: object, states: list[State], repeats: int) -> float:
    """Median seconds of ``bot.act`` over ``states``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for state in states:
            bot.act(state)  # type: ignore[attr-defined]
        times.append((time.perf_counter() - start) / len(states))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="repeats (medians are reported)")
    parser.add_argument(
        "--no-policy", action="store_true", help="skip the shipped policy's match exploitability"
    )
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
    PerfectBot(0).act(states[0])  # the equity table, solved once
    margin_act = per_act(MarginBot(0), states, args.repeats)
    perfect = PerfectBot(0)
    perfect_act = per_act(perfect, states, args.repeats)
    match_cold = [cold_match_table() for _ in range(args.repeats)]
    print(f"canonical positions: {size:,}")
    print(
        f"cold solve of all 1,680 set-ups (the round): {statistics.median(cold):.3f} s "
        f"(median of {args.repeats})"
    )
    print(
        f"cold solve of the match to 15 (a new interpreter, one core): "
        f"{statistics.median(match_cold):.3f} s (median of {args.repeats}; "
        f"{min(match_cold):.3f} to {max(match_cold):.3f})"
    )
    print(
        f"MarginBot.act on a solved position: {1e6 * margin_act:.1f} us; PerfectBot.act (the "
        f"match, 0-0): {1e6 * perfect_act:.1f} us (medians over {len(states):,} positions x "
        f"{args.repeats})"
    )
    solved = match_best_response(MarginBot(), 15)
    print(f"match exploitability of the margin bot: {solved.summary()}")
    if not args.no_policy:
        from buttonup_env import load_policy

        solved = match_best_response(load_policy("buttonup-ppo"), 15)
        print(f"match exploitability of buttonup-ppo: {solved.summary()}")


if __name__ == "__main__":
    main()
