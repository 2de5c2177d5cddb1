"""Data-parallel training (training/distributed.py): several worker processes train one run, on one
machine (``train.py --workers N``) or under torchrun (two nodes over localhost). The runs are
tiny, but every one starts processes that import torch, so all but the refusals and the
shared-memory gradient exchange (tried between threads) are slow."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch as th
from commands import run
from test_training import (
    ROOT,
    TINY,
    TRAIN,
    eval_rows,
    interrupt_training,
    run_outputs,
    scalar_events,
)

from buttonup_env.players.league import DEFAULT_LADDER, rate_against_ladder
from buttonup_env.players.policy import OnnxPolicy
from training import scratch, shared_memory, tune
from training.config import TrainConfig, learning_rates, resolve
from training.distributed import (
    MAX_AUTO_WORKERS,
    WorkerLost,
    auto_workers,
    physical_cores,
    rank_seed,
)
from training.periodic import PERIODIC_EVAL_SEED
from training.runfolder import snapshot_path
from training.shared_memory import SharedGradients

TWO = [*TINY, "--workers", "2", "--hidden", "16", "16"]
"""The tiny training with two workers, each stepping its two games (a rollout of both is 256
steps)."""

AT = TINY.index("--workers")
TORCHRUN = [*TINY[:AT], *TINY[AT + 2 :], "--hidden", "16", "16"]
"""The same under torchrun, which gives the number of workers."""


def start(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(TRAIN), *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
        start_new_session=True,
    )


def finish(process: subprocess.Popen, timeout: float = 300) -> tuple[str, str]:
    """``process``'s output once it ends (:func:`finish_together`)."""
    return finish_together([process], timeout)[0]


def finish_together(
    processes: list[subprocess.Popen], timeout: float = 300
) -> list[tuple[str, str]]:
    """Every process's output, read at once (the one read last must not stall on a full pipe,
    nor lose its output when another hangs). After ``timeout`` every process still running
    and those it started get SIGABRT (started with ``PYTHONFAULTHANDLER=1``, a Python process
    then prints every thread's stack), then SIGKILL (and the process group each leads), and the
    test fails with every output."""
    outputs: list[tuple[str, str] | None] = [None] * len(processes)

    def read(index: int) -> None:
        outputs[index] = processes[index].communicate()

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(processes))]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    for reader in readers:
        reader.join(max(0.0, deadline - time.monotonic()))
    hung = [p for p in processes if p.poll() is None]
    for process in hung:
        for pid in [*descendants(process.pid), process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGABRT)
    if hung:
        time.sleep(5)  # the stacks are written
    for process in hung:
        for pid in [*descendants(process.pid), process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):  # its group too, when it leads one
            os.killpg(process.pid, signal.SIGKILL)
    for reader in readers:
        reader.join(60)
    texts = [out or ("", "") for out in outputs]
    if hung:
        shown = "\n".join(
            f"--- process {i} (pid {p.pid}, exit {p.returncode}) stdout:\n{out[-3000:]}\n"
            f"--- stderr:\n{err[-12000:]}"
            for i, (p, (out, err)) in enumerate(zip(processes, texts, strict=True))
        )
        pytest.fail(
            f"{len(hung)} of {len(processes)} processes still ran after {timeout} s:\n{shown}"
        )
    return texts


def descendants(pid: int) -> list[int]:
    """Every process ``pid`` started, and theirs (Linux), deepest first."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for child in children(pid):
            found += [*descendants(child), child]
    return found


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"no {path} after {timeout} s"
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def trained(runs: Path, name: str, *args: str | Path) -> Path:
    done = subprocess.run(
        [sys.executable, str(TRAIN), *map(str, args), "--runs-dir", str(runs), "--run-name", name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return runs / name


# --- settings ---------------------------------------------------------------------------------


def test_auto_is_the_physical_cores_capped_and_dividing_the_work() -> None:
    assert 1 <= physical_cores() <= (os.cpu_count() or 1)
    assert auto_workers() == min(physical_cores(), MAX_AUTO_WORKERS)
    assert resolve(TrainConfig(preset="smoke")).workers == auto_workers()
    assert resolve(TrainConfig(preset="smoke", workers=3)).workers == 3


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--workers", "0"], "--workers must be auto or a whole number >= 1, got 0"),
        (["--workers", "-2"], "--workers must be auto or a whole number >= 1, got -2"),
        (["--workers", "100000"], "--workers 100000 is more than this machine starts"),
    ],
)
def test_bad_workers_are_refused_in_one_sentence(
    args: list[str], words: str, tmp_path: Path
) -> None:
    done = run(TRAIN, *TINY, *args, "--runs-dir", tmp_path)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr


def test_a_run_folder_asking_for_more_workers_than_the_machine_starts_is_refused(
    tmp_path: Path,
) -> None:
    done = run(TRAIN, *TINY, "--total-steps", "128", "--runs-dir", tmp_path, "--run-name", "one")
    assert done.returncode == 0, done.stderr[-3000:]
    config = tmp_path / "one" / "config.json"
    config.write_text(config.read_text().replace('"workers": 1', '"workers": 100000'))
    done = run(TRAIN, "--resume", tmp_path / "one")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "asks for 100000 workers; this machine starts at most" in lines[0]


def test_worker_seeds_differ_and_worker_0_keeps_the_runs_seed() -> None:
    assert rank_seed(7, 0) == 7
    seeds = {rank_seed(seed, rank) for seed in range(3) for rank in range(1, 9)}
    assert len(seeds) == 24 and not seeds & {0, 1, 2}


def test_a_resume_with_another_number_of_workers_is_refused(tmp_path: Path) -> None:
    done = run(TRAIN, *TINY, "--total-steps", "128", "--runs-dir", tmp_path, "--run-name", "one")
    assert done.returncode == 0, done.stderr[-3000:]
    done = run(TRAIN, "--resume", tmp_path / "one", "--workers", "2")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "was trained by 1 worker(s) and resumes with as many, not 2" in lines[0]


def test_tune_trials_take_one_worker_unless_told() -> None:
    settings = {"train_args": [], "preset": "smoke", "steps": 256}
    assert tune.base_config(settings, 0).workers == 1
    settings["train_args"] = ["--workers", "2"]
    assert tune.base_config(settings, 0).workers == 2


# --- the shared-memory gradient exchange, between threads standing in for workers -----------


@dataclass
class Board:
    """What a group of threads shares: a barrier and the values passed at it."""

    size: int
    barrier: threading.Barrier = field(init=False)
    values: list[Any] = field(init=False)

    def __post_init__(self) -> None:
        self.barrier = threading.Barrier(self.size, timeout=30)
        self.values = [None] * self.size


@dataclass
class ThreadWorker:
    """Worker ``rank`` of threads in this process: the part of ``WorkerGroup`` that
    ``SharedGradients`` uses (its collectives, done at a barrier)."""

    rank: int
    board: Board
    children: list[subprocess.Popen] = field(default_factory=list)
    tamper: Any = None
    """What this worker receives from worker 0's ``share`` instead of its value."""

    @property
    def size(self) -> int:
        return self.board.size

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def _pass(self, value: Any) -> list[Any]:
        self.board.values[self.rank] = value
        self.board.barrier.wait()
        values = list(self.board.values)
        self.board.barrier.wait()
        return values

    def share(self, value: Any = None) -> Any:
        shared = self._pass(value)[0]
        return shared if self.tamper is None else self.tamper

    def every(self, value: bool) -> bool:
        return all(self._pass(value))

    def lost(self, error: BaseException) -> WorkerLost:
        return WorkerLost(str(error))


def on_threads(size: int, work: Any, **tamper: Any) -> list[Any]:
    """``work(worker)`` on ``size`` threads, one worker each; what each returned, in rank
    order (an exception of one is raised here)."""
    board = Board(size)
    results: list[Any] = [None] * size
    errors: list[BaseException] = []

    def one(rank: int) -> None:
        try:
            results[rank] = work(ThreadWorker(rank, board, tamper=tamper.get(str(rank))))
        except BaseException as error:
            errors.append(error)
            board.barrier.abort()

    threads = [threading.Thread(target=one, args=(rank,)) for rank in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    if errors:
        raise errors[0]
    return results


def gradients(rank: int, round_: int, numel: int = 1000) -> th.Tensor:
    return th.randn(numel, generator=th.Generator().manual_seed(1000 * round_ + rank))


def test_shared_gradients_give_every_worker_every_workers_gradients_of_each_exchange() -> None:
    rounds = 40

    def work(worker: ThreadWorker) -> list[list[th.Tensor]]:
        exchange = SharedGradients.open(worker, 1000, th.float32)  # type: ignore[arg-type]
        assert exchange is not None
        seen = []
        for round_ in range(rounds):
            every = exchange.exchange(gradients(worker.rank, round_))
            seen.append([slot.clone() for slot in every])
            exchange.done()
        exchange.close()
        return seen

    for seen in on_threads(3, work):
        for round_, every in enumerate(seen):  # nothing of another exchange, and rank order
            for rank, slot in enumerate(every):
                assert th.equal(slot, gradients(rank, round_))


def test_shared_gradients_are_not_used_unless_every_worker_maps_the_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def work(worker: ThreadWorker) -> SharedGradients | None:
        return SharedGradients.open(worker, 10, th.float32)  # type: ignore[arg-type]

    made: list[str] = []
    mkstemp = shared_memory.tempfile.mkstemp

    def recorded(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, path = mkstemp(*args, **kwargs)
        made.append(path)
        return fd, path

    monkeypatch.setattr(shared_memory.tempfile, "mkstemp", recorded)
    assert on_threads(2, work, **{"1": ("/nonexistent/map", b"token")}) == [None, None]
    assert on_threads(2, work, **{"1": (None, b"token")}) == [None, None]

    def no_room(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shared_memory.os, "posix_fallocate", no_room, raising=False)
    assert on_threads(2, work) == [None, None]
    assert len(made) == 3 and not any(Path(path).exists() for path in made)  # deleted
    monkeypatch.undo()
    monkeypatch.setattr(shared_memory.tempfile, "mkstemp", recorded)

    def lost(self: ThreadWorker, value: bool) -> bool:
        raise WorkerLost("worker 1 is gone")

    monkeypatch.setattr(ThreadWorker, "every", lost)
    with pytest.raises(WorkerLost):
        on_threads(2, work)
    assert len(made) == 4 and not Path(made[-1]).exists()  # deleted all the same
    monkeypatch.setattr(shared_memory.platform, "machine", lambda: "aarch64")  # weak store order
    assert on_threads(2, work) == [None, None]
    assert len(made) == 4  # nothing made


def test_a_gone_or_silent_worker_ends_a_shared_gradient_exchange(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    opened = on_threads(2, lambda worker: SharedGradients.open(worker, 10, th.float32))
    exchange, other = opened
    assert exchange is not None and other is not None
    other.counters[1, SharedGradients.PID] = gone.pid  # worker 1 never writes, and is gone
    start = time.monotonic()
    with pytest.raises(WorkerLost, match="worker 1's process is gone"):
        exchange.exchange(th.zeros(10))
    assert time.monotonic() - start < 5
    other.counters[1, SharedGradients.PID] = os.getpid()  # alive, and silent
    exchange.timeout = timedelta(seconds=1)  # the group's COLLECTIVE_TIMEOUT, shortened
    with pytest.raises(WorkerLost, match="timed out"):
        exchange.exchange(th.zeros(10))


# --- scratch copies -------------------------------------------------------------------------


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def test_the_sweep_removes_the_stale_copies_of_this_user_and_nothing_else(
    tmp_path: Path,
) -> None:
    """A worker killed with ``kill -9`` left its copy (the run's config, snapshots, its
    checkpoint) behind for good before."""
    namespace = scratch._namespace()
    gone, alive = dead_pid(), os.getppid()

    def folder(name: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        (path / "config.json").write_text("{}")
        return path

    stale = folder(f"buttonup-worker1-{namespace}-{gone}-abc123")
    kept = [
        folder(f"buttonup-worker1-{namespace}-{alive}-abc123"),  # its worker is alive
        folder(f"buttonup-worker1-{namespace + 1}-{gone}-abc123"),  # another namespace's
        folder(f"buttonup-worker1-{gone}-abc123"),  # not a name this version gives
        folder(f"other-{namespace}-{gone}-abc123"),
    ]
    victim = folder("victim")
    link = tmp_path / f"buttonup-worker2-{namespace}-{gone}-abc123"
    link.symlink_to(victim)  # a link of that name is never followed
    if os.geteuid() == 0:  # another user's folder of that name is never touched
        theirs = folder(f"buttonup-worker3-{namespace}-{gone}-abc123")
        os.chown(theirs, 65534, 65534)
        kept.append(theirs)
    assert scratch.sweep(tmp_path) == [stale]
    assert not stale.exists()
    assert all(path.is_dir() for path in kept) and (victim / "config.json").exists()
    assert link.is_symlink()
    made = scratch.make(1, tmp_path)
    assert made.name.startswith(f"buttonup-worker1-{namespace}-{os.getpid()}-")
    assert made.stat().st_mode & 0o777 == 0o700  # no one else reads the run's files there
    assert scratch.sweep(tmp_path) == [] and made.exists()  # its process is alive


# --- whole runs -------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_workers_same_seed_same_run(tmp_path: Path) -> None:
    args = [*TWO, "--total-steps", "512", "--seed", "3"]
    first = trained(tmp_path, "a", *args)
    config = json.loads((first / "config.json").read_text())
    assert config["workers"] == 2
    rows = eval_rows(first)
    assert [row["steps"] for row in rows] == [0, 256, 512]  # the steps of both workers
    expected = run_outputs(first)
    again = run_outputs(trained(tmp_path, "b", *args))
    assert again.keys() == expected.keys()
    for key in expected:
        assert again[key] == expected[key], f"{key} differs between two runs with one seed"
    one = run_outputs(trained(tmp_path, "c", *args[:-2], "--seed", "3", "--workers", "1"))
    assert one["step_000000000.onnx"] == expected["step_000000000.onnx"]  # worker 0's start
    assert one["final.onnx"] != expected["final.onnx"]  # other games on worker 1


@pytest.fixture(scope="module")
def two_worker_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-worker run of 512 steps: two rollouts, each with an evaluation."""
    runs = tmp_path_factory.mktemp("two")
    return trained(runs, "a", *TWO, "--total-steps", "512", "--ladder-matches", "60")


@pytest.mark.slow
def test_worker_1_rates_the_policy_that_worker_0_evaluates(two_worker_run: Path) -> None:
    # two workers evaluate together: worker 1 plays the ladder's matches, worker 0 the bots'
    rows = eval_rows(two_worker_run)
    assert [row["steps"] for row in rows] == [0, 256, 512]
    for row in rows[:2]:  # the last: worker 0's alone, once the other had stopped
        snapshot = OnnxPolicy(snapshot_path(two_worker_run, row["steps"]))  # that step's weights
        rating = rate_against_ladder(snapshot, DEFAULT_LADDER, 60, PERIODIC_EVAL_SEED)
        assert {key: row[key] for key in rating} == rating, row["steps"]
    assert rows[0]["elo"] != rows[1]["elo"]  # the ladder tells the two policies apart


@pytest.mark.slow
def test_two_workers_learn_at_root_two_times_the_rate(two_worker_run: Path) -> None:
    """Each update's minibatch is twice one worker's: the rates (2e-3 down to 2e-4 over the
    run, set at each rollout's start) are times the square root of 2 (SB3 logs the rate)."""
    [events] = scalar_events(two_worker_run, "train/learning_rate")
    expected = [math.sqrt(2) * rate for rate in (2e-3, 1.1e-3)]  # at progress 0 and 1/2
    assert [event.value for event in events] == pytest.approx(expected, rel=1e-5)


def test_the_learning_rates_grow_with_the_square_root_of_the_workers() -> None:
    one = resolve(TrainConfig(preset="smoke", workers=1))
    assert learning_rates(one) == (one.learning_rate, one.learning_rate_end)
    four = dataclasses.replace(one, workers=4)
    assert learning_rates(four) == (2 * one.learning_rate, 2 * one.learning_rate_end)  # type: ignore[operator]
    constant = dataclasses.replace(four, learning_rate_end=None)
    assert learning_rates(constant) == (2 * one.learning_rate, None)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "kill-9"])
def test_two_workers_resume_bit_for_bit(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = [*TWO, "--total-steps", "2048", "--snapshot-every", "256", "--eval-every", "256",
            "--checkpoint-every", "256"]  # fmt: skip
    whole = trained(tmp_path, "whole", *args)
    stopped = tmp_path / "stopped"
    scratch = tmp_path / "tmp"  # where the workers keep their copies of the run
    scratch.mkdir()
    if how == "ctrl-c":
        steps = interrupt_training(stopped, "--workers", "2")
    else:
        process = start(*args, "--runs-dir", tmp_path, "--run-name", "stopped",
                        env={"TMPDIR": str(scratch)})  # fmt: skip
        latest = stopped / "checkpoints" / "latest.json"
        wait_for(latest, process)
        while json.loads(latest.read_text())["steps"] < 768:  # then a rollout from the next
            assert process.poll() is None
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGKILL)  # worker 0 and its children at once
        finish(process)
        steps = json.loads((stopped / "checkpoints" / "latest.json").read_text())["steps"]
        assert len(list(scratch.glob("buttonup-worker1-*"))) == 1  # no one could remove it
    assert steps % 128 == 0 and 0 < steps < 2048
    monkeypatch.setenv("TMPDIR", str(scratch))  # worker 0 of the resumed run is this process
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    resumed = run(TRAIN, "--resume", stopped)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not list(scratch.glob("buttonup-worker*"))  # the killed copy swept, the new removed
    assert f"resuming {stopped} at step {steps:,} of 2,048" in resumed.stdout
    expected, got = run_outputs(whole), run_outputs(stopped)
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key] == expected[key], f"{key} differs after the resume at {steps}"


@pytest.mark.slow
def test_a_killed_worker_ends_the_run_with_a_checkpoint(tmp_path: Path) -> None:
    args = [*TWO, "--total-steps", "100000", "--checkpoint-every", "256"]
    scratch = tmp_path / "tmp"  # where the workers keep their copies of the run
    scratch.mkdir()
    process = start(*args, "--runs-dir", tmp_path, "--run-name", "lost",
                    env={"TMPDIR": str(scratch)})  # fmt: skip
    wait_for(tmp_path / "lost" / "checkpoints" / "latest.json", process)
    (worker,) = children(process.pid)
    assert len(list(scratch.glob("buttonup-worker1-*"))) == 1
    os.kill(worker, signal.SIGKILL)
    _, err = finish(process, timeout=120)
    assert not list(scratch.glob("buttonup-worker*"))  # worker 0 removed the killed one's copy
    assert process.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.fullmatch(
        rf"error: worker 1 \(process {worker}\) was killed by SIGKILL: the run stopped at step "
        rf"[\d,]+, checkpoint saved; continue it with: python training/train.py --resume "
        rf"{re.escape(str(tmp_path / 'lost'))}",
        lines[0],
    ), lines[0]
    latest = json.loads((tmp_path / "lost" / "checkpoints" / "latest.json").read_text())
    stopped_at = int(re.search(r"step ([\d,]+)", lines[0])[1].replace(",", ""))  # type: ignore[index]
    assert latest["steps"] == stopped_at > 0 and latest["progress"]["resume"] is None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_over_localhost_train_as_two_workers(tmp_path: Path) -> None:
    """Two torchrun launches, one node each, meet at a c10d rendezvous on 127.0.0.1 and train
    the run that ``--workers 2`` trains, byte for byte."""
    args = [*TORCHRUN, "--total-steps", "512", "--seed", "5"]
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
               "--nproc-per-node", "1", "--rdzv-backend", "c10d",
               "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", "two-nodes",
               "-m", "training.train", *args, "--run-name", "run"]  # fmt: skip
    nodes = [
        subprocess.Popen(
            [*command, "--runs-dir", str(tmp_path / f"node{node}")],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={
                **os.environ,
                "PYTHONWARNINGS": "ignore",
                "PYTHONPATH": str(ROOT),
                "PYTHONFAULTHANDLER": "1",  # stacks on SIGABRT, should the pair hang,
                "PYTHONUNBUFFERED": "1",  # and every line printed before it
            },
            start_new_session=True,
        )
        for node in range(2)
    ]
    outputs = finish_together(nodes)
    for node, (_, err) in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, err[-3000:]
    written = [p for p in (tmp_path / "node0", tmp_path / "node1") if (p / "run").exists()]
    assert len(written) == 1  # worker 0 alone writes the run folder
    two = trained(tmp_path, "two", *args, "--workers", "2")
    expected, got = run_outputs(two), run_outputs(written[0] / "run")
    for key in expected:
        assert got[key] == expected[key], f"{key} differs between torchrun and --workers 2"
