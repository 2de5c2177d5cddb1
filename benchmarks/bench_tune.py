"""The overhead of a tune.py trial over a plain train.py run of the same training.

    python benchmarks/bench_tune.py [--repeats 3] [--preset smoke]

Each of ``--repeats`` rounds, back to back, each in a fresh process and a new temporary
folder:

1. ``python training/train.py --preset PRESET`` and ``python training/tune.py --seeds 1
   --preset PRESET --no-exploitability`` (one trial of the same training in a new study on a
   new SQLite file): wall times, and their difference;
2. the same tune.py command run by ``tune.main`` with ``train`` timed: the seconds tune.py
   spends outside the training itself, once per worker (opening the storage and the study)
   and per trial (claiming its place, storing every periodic evaluation and the final
   figures, the heartbeat thread), which the noise of a shared machine hides in (1);
3. ``import train`` and ``import tune`` (Optuna and the rest on top of train.py's imports);
4. the exact exploitability of the final policy, which tune.py measures by default at the end
   of a complete trial.

Medians over the rounds are printed, with each round's figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAINING = ROOT / "training"

IN_PROCESS = """
import sys, time
from training import tune
spent = {"train": 0.0, "open_storage": 0.0, "open_study": 0.0}
def timing(name):
    function = getattr(tune, name)
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - start
    setattr(tune, name, timed)
for name in spent:
    timing(name)
start = time.perf_counter()
tune.main(sys.argv[1:])
total = time.perf_counter() - start
worker = spent["open_storage"] + spent["open_study"]
print(worker, total - spent["train"] - worker)
"""

EXPLOIT = """
import sys
from buttonup_env.players.exploit import exploitability
from buttonup_env.players.policy import load_policy
exploitability(load_policy(sys.argv[1]))
"""


def timed(args: list[str], cwd: Path) -> tuple[float, str]:
    """Wall time and output of ``python ARGS`` in ``cwd`` (a failure ends the benchmark)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return seconds, done.stdout


def line(label: str, values: list[float], sign: str = "") -> str:
    each = ", ".join(f"{v:{sign}.1f}" for v in values)
    return f"  {label:<48} {statistics.median(values):{sign}6.1f} s  ({each})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds (medians are reported)")
    parser.add_argument("--preset", choices=["smoke", "quick"], default="smoke")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    plain_args = [str(TRAINING / "train.py"), "--preset", args.preset, "--no-progress"]
    tune_flags = ["--study", "bench", "--seeds", "1", "--preset", args.preset]
    tune_flags.append("--no-exploitability")
    imports = "from training import {}"
    plain, trial, per_worker, per_trial = [], [], [], []
    import_train, import_tune, exploit = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            work = Path(folder) / str(repeat)
            work.mkdir()
            plain.append(timed([*plain_args, "--run-name", "plain"], work)[0])
            trial.append(timed([str(TRAINING / "tune.py"), *tune_flags], work)[0])
            flags = [*tune_flags, "--runs-dir", "runs-in-process"]
            seconds = timed(["-c", IN_PROCESS, *flags], work)[1].split()[-2:]
            per_worker.append(float(seconds[0]))
            per_trial.append(float(seconds[1]))
            import_train.append(timed(["-c", imports.format("train")], work)[0])
            import_tune.append(timed(["-c", imports.format("tune")], work)[0])
            policy = work / "runs" / "plain" / "final.onnx"
            exploit.append(timed(["-c", EXPLOIT, str(policy)], work)[0])
    print(f"one {args.preset} training, medians of {args.repeats} rounds (each round's figure)")
    print("1. whole commands, back to back (wall time)")
    print(line(f"train.py --preset {args.preset}", plain))
    print(line(f"tune.py --seeds 1 --preset {args.preset} (one trial)", trial))
    print(line("difference", [b - a for a, b in zip(plain, trial, strict=True)], "+"))
    print("2. inside one tune.py process, outside train()")
    print(line("once per worker: open the storage and the study", per_worker))
    print(line("per trial: the rest (place, records, heartbeat)", per_trial))
    print("3. imports in a fresh process")
    print(line("import train", import_train))
    print(line("import tune", import_tune))
    differences = [b - a for a, b in zip(import_train, import_tune, strict=True)]
    print(line("difference", differences, "+"))
    print("4. at the end of a complete trial, unless --no-exploitability")
    print(line("exact exploitability (process start included)", exploit))


if __name__ == "__main__":
    main()
