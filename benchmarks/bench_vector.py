"""Agent steps per second of the batched env, beside CartPole's vector env, ButtonUp-v0 and pgx.

    python benchmarks/bench_vector.py [--sizes 1 64 1024 4096] [--seconds 2] [--repeats 3]
                                      [--pgx] [--pgx-one-thread] [--no-sync] [--no-memory]
                                      [--no-compile] [--reference DIR] [--only-reference]

For each batch size, back to back in this process and ``--repeats`` times (medians are
reported; the machine is shared and noisy, so ratios measured back to back mean most):

* ``ButtonUpVectorEnv`` (the compiled default, one thread) against the random and against the
  perfect opponent, observations included (its default ``match-slots`` encoding, 247 floats);
  against the random one also counting the time in ``step`` alone (``step only``: the
  player's time left out), in the encoding training reads (``match-afterstates``, 864
  floats), and with ``backend="numpy"``, the reference implementation;
* Gymnasium's ``CartPoleVectorEnv`` (``gym.make_vec("CartPole-v1", vectorization_mode=
  "vector_entry_point")``);
* ButtonUp-v0 in a ``SyncVectorEnv`` (``vectorization_mode="sync"``), one game at a time
  (``--no-sync`` leaves it out);
* with ``--pgx`` (the ``bench`` extra: ``pip install -e ".[bench]"``): pgx's tic_tac_toe and
  connect_four, ``jit(vmap(auto_reset(step)))`` with the random legal actions drawn inside the
  same jitted call, on JAX's CPU backend (``--pgx-one-thread``: XLA on one thread). Their
  compile times (the first call, tracing included) are printed per size.

Every ButtonUp and CartPole env is driven by the same cheap batched player: a uniformly random
legal action, drawn with one array operation per step and counted in the time (except in
the ``step only`` row; pgx draws its actions inside its jitted step). A step of N
envs counts as N agent steps (for pgx: N moves of one player). Each measurement steps for
about ``--seconds`` (at least 3 steps).

Then, each in fresh subprocesses: the compile time of the compiled env (its first reset and
step in a process with an empty numba cache, then again in a second process that loads the
cache), and the resident memory of a process holding a 4,096-env batch, tables included.

``--reference DIR`` also times another checkout of this repository (a ``git worktree`` of an
earlier commit) beside this one: at each size, ``--repeats`` times, the ``ButtonUpVectorEnv``
rows against the random and the perfect opponent and the random one's step alone, each
checkout in a fresh subprocess running its own ``benchmarks/bench_vector.py`` (its ``rate``),
the two alternating; it prints both checkouts' medians and the median of the per-repeat
ratios. ``--only-reference`` runs that comparison alone::

    git worktree add --detach ../buttonup-d2d4121 d2d4121
    python benchmarks/bench_vector.py --sizes 4096 --repeats 9 --only-reference \
        --reference ../buttonup-d2d4121
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import checkouts  # benchmarks/checkouts.py, beside this script
import gymnasium as gym
import numpy as np

import buttonup_env  # noqa: F401  (registers ButtonUp-v0 and its vector entry point)
from buttonup_env.envs.vector import ButtonUpVectorEnv


def legal_player(rng: np.random.Generator) -> Callable[[np.ndarray], np.ndarray]:
    """A uniformly random legal action per row of the masks, with array operations."""

    def act(masks: np.ndarray) -> np.ndarray:
        return (masks * rng.random(masks.shape)).argmax(axis=1)

    return act


def rate(env: gym.vector.VectorEnv, masked: bool, seconds: float, step_only: bool = False) -> float:
    """Agent steps per second of ``env`` stepped for about ``seconds`` (``step_only``: of the
    time in ``env.step`` alone, the player's left out)."""
    rng = np.random.default_rng(0)
    act = legal_player(rng)
    n = env.num_envs
    _, info = env.reset(seed=0)
    steps, start, stepping = 0, time.perf_counter(), 0.0
    while True:
        if masked:
            actions = act(info["action_mask"])
        else:
            actions = rng.integers(2, size=n)
        before = time.perf_counter()
        _, _, _, _, info = env.step(actions)
        stepping += time.perf_counter() - before
        steps += 1
        elapsed = time.perf_counter() - start
        if steps >= 3 and elapsed >= seconds:
            return steps * n / (stepping if step_only else elapsed)


class PgxGame:
    """A pgx game stepped by ``jit(vmap(auto_reset(step)))``, random legal actions included."""

    def __init__(self, name: str, num_envs: int) -> None:
        import jax
        import jax.numpy as jnp
        import pgx
        from pgx.experimental import auto_reset

        self.num_envs = num_envs
        env = pgx.make(name)
        step = jax.vmap(auto_reset(env.step, env.init))

        def play(state: Any, key: Any) -> tuple[Any, Any]:
            """One step of every game, the next key too: one jitted call a step."""
            key, act, reset = jax.random.split(key, 3)
            logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
            action = jax.random.categorical(act, logits, axis=-1)
            return step(state, action, jax.random.split(reset, num_envs)), key

        self._play = jax.jit(play)
        self._state = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.PRNGKey(0), num_envs))
        self._key = jax.random.PRNGKey(1)
        start = time.perf_counter()
        self._step()  # the first call traces and compiles
        self.compile_seconds = time.perf_counter() - start

    def _step(self) -> None:
        self._state, self._key = self._play(self._state, self._key)
        self._state.observation.block_until_ready()

    def rate(self, seconds: float) -> float:
        steps, start = 0, time.perf_counter()
        while True:
            self._step()
            steps += 1
            elapsed = time.perf_counter() - start
            if steps >= 3 and elapsed >= seconds:
                return steps * self.num_envs / elapsed


def run_python(code: str, env: dict[str, str] | None = None) -> list[float]:
    """The numbers ``code`` prints, run in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    return [float(x) for x in done.stdout.split()]


FIRST_USE = """
import time
from buttonup_env.envs.vector import ButtonUpVectorEnv
env = ButtonUpVectorEnv(64, opponent="perfect", episode="round", random_start=0.5)
start = time.perf_counter()
_, info = env.reset(seed=0)
env.step(info["action_mask"].argmax(axis=1))
env.action_masks()
print(time.perf_counter() - start)
"""


def compile_seconds() -> tuple[float, float]:
    """Seconds of a compiled env's first reset and step (every kernel compiled), in a process
    with an empty numba cache, then in a second process loading that cache."""
    with tempfile.TemporaryDirectory() as cache:
        first = run_python(FIRST_USE, {"NUMBA_CACHE_DIR": cache})[0]
        cached = run_python(FIRST_USE, {"NUMBA_CACHE_DIR": cache})[0]
    return first, cached


def resident_memory(num_envs: int, backend: str) -> tuple[float, float]:
    """MiB resident in a fresh process: with gymnasium and the package imported, then also
    holding ``num_envs`` envs (tables, compiled kernels and a few steps included)."""
    code = f"""
import numpy as np, gymnasium, buttonup_env
from buttonup_env.envs.vector import ButtonUpVectorEnv
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
base = rss()
env = ButtonUpVectorEnv({num_envs}, opponent="perfect", encoding="afterstates", backend="{backend}")
_, info = env.reset(seed=0)
for _ in range(20):
    _, _, _, _, info = env.step(info["action_mask"].argmax(axis=1))
print(base, rss())
"""
    base, full = run_python(code)
    return base, full


STEP_ONLY = "ButtonUpVectorEnv, random, step only"
"""The random opponent's figure over the time in ``step`` alone, the random player's left out."""

REFERENCE_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1] + "/benchmarks")
import bench_vector as bench
n, seconds = int(sys.argv[2]), float(sys.argv[3])
rates = {}
for name, opponent, step_only in (("random", "random", False), ("perfect", "perfect", False),
                                  ("random, step only", "random", True)):
    env = bench.ButtonUpVectorEnv(n, opponent=opponent)
    bench.rate(env, True, min(seconds, 0.5))  # untimed: the kernels loaded, the caches warm
    rates[name] = bench.rate(env, True, seconds, step_only=step_only)
print(json.dumps(rates))
"""
"""What each subprocess of ``--reference`` runs: the checkout's own ``rate`` of its
``ButtonUpVectorEnv`` (``sys.argv``: the checkout, the number of envs, the seconds)."""


def compare_checkouts(reference: str, sizes: list[int], seconds: float, repeats: int) -> None:
    """Print this checkout's ``ButtonUpVectorEnv`` rates beside ``reference``'s (see the
    module docstring)."""
    commit = checkouts.describe(Path(reference), "bench_vector.py")
    print(
        f"this checkout ({checkouts.describe(checkouts.HERE, 'bench_vector.py')}) against "
        f"{commit}: agent steps per second, each checkout in its own subprocess, median of "
        f"{repeats} alternating repeats of about {seconds:g} s"
    )
    for n in sizes:
        here, there = checkouts.side_by_side(Path(reference), repeats, REFERENCE_CHILD, n, seconds)
        for name in here[0]:
            mine = [r[name] for r in here]
            theirs = [r[name] for r in there]
            ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
            print(
                f"  {n:>6,} envs, {name:18s} this {statistics.median(mine):>12,.0f}  "
                f"{commit} {statistics.median(theirs):>12,.0f}  ratio "
                f"{statistics.median(ratios):.3f} (per repeat: "
                + ", ".join(f"{r:.2f}" for r in ratios)
                + ")"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024, 4096])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (medians are reported)")
    parser.add_argument("--pgx", action="store_true", help="add pgx's tic_tac_toe, connect_four")
    parser.add_argument("--pgx-one-thread", action="store_true", help="XLA on one thread")
    parser.add_argument("--no-sync", action="store_true", help="leave out the SyncVectorEnv")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    parser.add_argument("--no-compile", action="store_true", help="skip the compile times")
    parser.add_argument(
        "--reference",
        metavar="DIR",
        help="also time the ButtonUpVectorEnv of this checkout (e.g. a git worktree of an "
        "earlier commit), its own code, beside this one's",
    )
    parser.add_argument(
        "--only-reference", action="store_true", help="run the --reference comparison alone"
    )
    args = parser.parse_args()
    if args.repeats < 1 or min(args.sizes) < 1 or not args.seconds > 0:
        parser.error(
            f"--repeats and --sizes must be >= 1 and --seconds > 0, got {args.repeats}, "
            f"{args.sizes} and {args.seconds}"
        )
    if args.only_reference and args.reference is None:
        parser.error("--only-reference needs --reference DIR")
    if args.reference is not None:
        try:
            checkouts.describe(Path(args.reference), "bench_vector.py")
        except ValueError as error:
            parser.error(str(error))
        if args.only_reference:
            compare_checkouts(args.reference, args.sizes, args.seconds, args.repeats)
            return
    if args.pgx:
        if args.pgx_one_thread:  # before jax is imported
            os.environ["XLA_FLAGS"] = (
                "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
            )
        try:
            import jax  # noqa: F401
            import pgx  # noqa: F401
        except ImportError:
            parser.error('--pgx needs jax and pgx: pip install -e ".[bench]"')

    makers: dict[str, tuple[Callable[[int], Any], bool]] = {
        "ButtonUpVectorEnv, random": (lambda n: ButtonUpVectorEnv(n, opponent="random"), True),
        "ButtonUpVectorEnv, perfect": (lambda n: ButtonUpVectorEnv(n, opponent="perfect"), True),
        STEP_ONLY: (lambda n: ButtonUpVectorEnv(n, opponent="random"), True),
        "ButtonUpVectorEnv, random, match-afterstates": (
            lambda n: ButtonUpVectorEnv(n, opponent="random", encoding="match-afterstates"),
            True,
        ),
    }
    makers["ButtonUpVectorEnv, random, numpy"] = (
        lambda n: ButtonUpVectorEnv(n, opponent="random", backend="numpy"),
        True,
    )
    makers["CartPoleVectorEnv"] = (
        lambda n: gym.make_vec("CartPole-v1", n, vectorization_mode="vector_entry_point"),
        False,
    )
    if not args.no_sync:
        makers["ButtonUp-v0 in SyncVectorEnv"] = (
            lambda n: gym.make_vec("ButtonUp-v0", n, vectorization_mode="sync"),
            True,
        )
    if args.pgx:
        for game in ("tic_tac_toe", "connect_four"):
            makers[f"pgx {game}"] = (lambda n, game=game: PgxGame(game, n), False)

    warm = ButtonUpVectorEnv(2)  # the tables built, the kernels compiled
    warm.reset(seed=0)
    warm.step(warm.action_masks().argmax(axis=1))
    print(
        f"agent steps per second, median of {args.repeats} repeats of about {args.seconds:g} s "
        "each, by number of envs"
    )
    rates: dict[str, dict[int, float]] = {name: {} for name in makers}
    ratios: dict[str, dict[int, float]] = {"random": {}, "perfect": {}}
    compiles: dict[str, dict[int, float]] = {}
    for n in args.sizes:
        envs = {name: make(n) for name, (make, _) in makers.items()}
        for name, env in envs.items():
            if isinstance(env, PgxGame):
                compiles.setdefault(name, {})[n] = env.compile_seconds
        measured: dict[str, list[float]] = {name: [] for name in makers}
        per_repeat: dict[str, list[float]] = {"random": [], "perfect": []}
        for _ in range(args.repeats):
            for name, (_, masked) in makers.items():
                env = envs[name]
                value = env.rate(args.seconds) if isinstance(env, PgxGame) else (
                    rate(env, masked, args.seconds, step_only=name == STEP_ONLY)
                )  # fmt: skip
                measured[name].append(value)
            for kind in per_repeat:
                per_repeat[kind].append(
                    measured[f"ButtonUpVectorEnv, {kind}"][-1] / measured["CartPoleVectorEnv"][-1]
                )
        for name in makers:
            rates[name][n] = statistics.median(measured[name])
        for kind in per_repeat:
            ratios[kind][n] = statistics.median(per_repeat[kind])
        del envs

    width = max(map(len, makers)) + 2
    print(f"{'':{width}}" + "".join(f"{n:>13,}" for n in args.sizes))
    for name in makers:
        print(f"{name:{width}}" + "".join(f"{rates[name][n]:>13,.0f}" for n in args.sizes))
    for kind in ratios:
        print(
            f"{kind + ' / CartPole':{width}}"
            + "".join(f"{ratios[kind][n]:>13.2f}" for n in args.sizes)
        )
    for name, seconds in compiles.items():
        print(
            f"{name + ' compile (s)':{width}}" + "".join(f"{seconds[n]:>13.2f}" for n in args.sizes)
        )
    if not args.no_compile:
        first, cached = compile_seconds()
        print(
            f"compile on first use: {first:.1f} s for the first reset and step of a process with "
            f"an empty numba cache (every kernel), {cached:.2f} s in the next process (from the "
            "cache)"
        )
    if args.reference is not None:
        compare_checkouts(args.reference, args.sizes, args.seconds, args.repeats)
    if not args.no_memory:
        for backend in ("numba", "numpy"):
            base, full = resident_memory(4096, backend)
            print(
                f"resident memory ({backend}): {full:,.0f} MiB for a process holding 4,096 envs "
                f"against the perfect opponent, afterstates encoding (tables included); "
                f"{base:,.0f} MiB before making the env, so the env takes {full - base:,.0f} MiB"
            )


if __name__ == "__main__":
    main()
