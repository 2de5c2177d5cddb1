"""Self-play MaskablePPO training for Button Up!.

    python training/train.py                   # the full run behind the shipped buttonup-ppo
    python training/train.py --preset quick    # a few minutes: a first agent to look at
    python training/train.py --resume runs/NAME

What runs of it gave, each with its command, is in the results log, docs/experiments.md; the
settings and presets are training/config.py's (``TrainConfig``, ``PRESETS``).

Every run writes to its own folder ``runs/NAME`` (training/runfolder.py): ``config.json``,
TensorBoard logs (``tb/``), checkpoints (``checkpoints/latest.pt`` and ``latest.json``, every
``checkpoint_every`` steps and on Ctrl-C: tensors and JSON, read back without unpickling
anything), the opponent snapshots (``snapshots/``), the periodic evaluations
(``eval.jsonl``), and at the end the exported policies ``final.onnx`` and ``best.onnx`` with
their cards.

Ctrl-C (or kill) lets the update, evaluation or checkpoint under way finish, saves a checkpoint
and exits with 130; ``--resume`` continues from there. A second Ctrl-C stops at once.

Several processes train one run together (``--workers``: every core of this machine by
default; ``torchrun -m training.train`` across machines), data-parallel on torch.distributed:
training/distributed.py. Worker 0 alone writes the run folder and prints.

What the agent learns from: by default the match to 15, +1 or -1 when it ends, each round an
episode whose return is the value of the next round's start (``--bootstrap-rounds``);
``--objective round`` learns one round from 0-0, paid its margin (own strength minus the
opponent's, divided by the largest margin, 18; ``--reward sign``: +1, 0 or -1). The exact
solver never enters the loss or the reward; it only judges (the regret and exploitability
figures, and which snapshot is kept as ``best``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
import sys

from buttonup_env.game.files import reason
from buttonup_env.ui.cli import OutputError, fail, run_cli
from training.config import RunConfig, TrainConfig, parse_config, resolve
from training.distributed import MAX_LOCAL_WORKERS, WorkerGroup, WorkerLost
from training.launch import from_environment
from training.rendezvous import RENDEZVOUS_TIMEOUT, RendezvousError, check_timeout
from training.runfolder import RunFolderError
from training.trainer import Resume, RunStopped, train

RENDEZVOUS_FLAG = "--rendezvous-timeout"
RENDEZVOUS_HELP = f"""
{RENDEZVOUS_FLAG} SECONDS: how long a worker waits for the others to join the run (default
{RENDEZVOUS_TIMEOUT.total_seconds():g}); past it the run stops in one sentence. It is not a
setting of the run: config.json does not keep it, and each command line may give it.
"""


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    argv, seconds = take_rendezvous_timeout(argv)
    config = parse_config(argv, description=f"{__doc__}{RENDEZVOUS_HELP}")
    try:  # a worker that torchrun started, or one that worker 0 started (--workers N)
        timeout = check_timeout(seconds)
        group = from_environment(timeout)
    except RendezvousError as error:
        fail(str(error))
    except WorkerLost as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    run: RunConfig | Resume | None = None
    if group is None or group.leader:
        try:
            run = resolve_command_line(config, group)
        except ValueError as error:
            if group is not None:
                group.share_files(None)  # the other workers stop too
                group.close()
            fail(str(error))
    try:
        command = shlex.join(["python", "training/train.py", *argv])
        train(run, command, group=group, rendezvous=timeout)
    except (RunFolderError, OutputError) as error:  # a run folder that cannot be resumed, or
        fail(str(error))  # a file of it that cannot be written
    except OSError as error:  # a file that cannot be written: a full disk, say
        fail(f"cannot write {error.filename or 'a file of the run'} ({reason(error)})")
    except RunStopped as stop:  # interrupted (130), or refused by worker 0 (2)
        raise SystemExit(stop.status) from None
    except WorkerLost as error:  # worker 0 says it, with the checkpoint and how to go on
        if group is None or group.leader or not group.launched:
            where = "" if group is None or group.leader else f"worker {group.rank}: "
            print(f"error: {where}{error}", file=sys.stderr)
        raise SystemExit(1) from None


def take_rendezvous_timeout(argv: list[str]) -> tuple[list[str], float]:
    """``argv`` without ``--rendezvous-timeout SECONDS`` (or ``=SECONDS``), and the seconds
    it gives (the default without it); one sentence for a value that is not a number."""
    rest, seconds, index = [], RENDEZVOUS_TIMEOUT.total_seconds(), 0
    while index < len(argv):
        arg = argv[index]
        if arg != RENDEZVOUS_FLAG and not arg.startswith(f"{RENDEZVOUS_FLAG}="):
            rest.append(arg)
            index += 1
            continue
        given = arg.partition("=")[2] if "=" in arg else None
        if given is None:
            given = argv[index + 1] if index + 1 < len(argv) else ""
            index += 1
        index += 1
        try:
            seconds = float(given) if given.isascii() else math.nan
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds):
            fail(f"{RENDEZVOUS_FLAG} takes a number of seconds, got {given[:40]!r}")
    return rest, seconds


def resolve_command_line(config: TrainConfig, group: WorkerGroup | None) -> RunConfig | Resume:
    """What the command line ``config`` asks for: a new run, resolved (``ValueError`` for a
    bad setting), or one to resume; under torchrun with ``--workers`` the workers torchrun
    started (``group``)."""
    if group is not None:
        if config.workers not in ("auto", group.size):
            raise ValueError(
                f"--workers {config.workers}, but torchrun started {group.size} workers; "
                "leave --workers out under torchrun"
            )
        config = dataclasses.replace(config, workers=group.size)
    elif isinstance(config.workers, int) and config.workers > MAX_LOCAL_WORKERS:
        raise ValueError(
            f"--workers {config.workers} is more than this machine starts: at most "
            f"{MAX_LOCAL_WORKERS} (four per logical CPU; torchrun starts more across machines)"
        )
    if config.resume is not None:
        return Resume(config.resume, None if config.workers == "auto" else config.workers)
    return resolve(config)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore::DeprecationWarning")
    run_cli(main)
