"""How a run's workers meet, and who may (training/rendezvous.py, training/launch.py,
training/messages.py): the torchrun variables refused in one sentence, a rendezvous bounded in
time, a ``--workers 2`` run that a process it did not start (another user's, ``nobody`` when
the tests run as root) cannot join, and nothing a peer sends unpickled. The refusals and the
parts run here; whatever starts workers or waits on a socket is slow."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from commands import run
from test_training import ROOT, TINY, TRAIN

from training.messages import BadMessage, WorkerFailed, decode, encode, file_sizes
from training.rendezvous import (
    RENDEZVOUS_TIMEOUT,
    SECRET,
    RendezvousError,
    loopback_store,
    proof,
    proven,
    read_environment,
)

GOOD = {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


class Marker:
    """Unpickled, it makes the folder ``path``: the code a pickle from a peer would run."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.makedirs, (self.path,))


# --- the variables ----------------------------------------------------------------------------

BAD_VARIABLES = [
    ({"WORLD_SIZE": "abc"}, "WORLD_SIZE is 'abc'; it must be a whole number from 1 to"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE is '0'; it must be a whole number from 1 to"),
    ({"WORLD_SIZE": "-2"}, "WORLD_SIZE is '-2'; it must be a whole number from 1 to"),
    ({"WORLD_SIZE": "\u0662"}, "WORLD_SIZE is '\u0662'; it must be a whole number from 1 to"),
    ({**GOOD, "RANK": "x"}, "RANK is 'x'; it must be a whole number from 0 to 1"),
    ({**GOOD, "RANK": "5"}, "RANK is '5'; it must be a whole number from 0 to 1"),
    ({**GOOD, "RANK": " 1"}, "RANK is ' 1'; it must be a whole number from 0 to 1"),
    ({**GOOD, "LOCAL_RANK": "7"}, "LOCAL_RANK is '7'; it must be a whole number from 0 to 1"),
    ({**GOOD, "LOCAL_RANK": "abc"}, "LOCAL_RANK is 'abc'; it must be a whole number from 0"),
    ({**GOOD, "LOCAL_WORLD_SIZE": "3"}, "LOCAL_WORLD_SIZE is '3'; it must be a whole number"),
    ({**GOOD, "MASTER_PORT": "99999"}, "MASTER_PORT is '99999'; it must be a whole number from 1"),
    ({**GOOD, "MASTER_PORT": "0"}, "MASTER_PORT is '0'; it must be a whole number from 1 to"),
    ({**GOOD, "MASTER_PORT": "http"}, "MASTER_PORT is 'http'; it must be a whole number from 1"),
    ({**GOOD, "MASTER_ADDR": "a b"}, "MASTER_ADDR is 'a b'; it must be a host name or an IP"),
    ({"WORLD_SIZE": "2", "RANK": "1"}, "WORLD_SIZE is 2 but MASTER_ADDR is not set"),
    ({"WORLD_SIZE": "2"}, "WORLD_SIZE is 2 but RANK is not set"),
    ({**GOOD, SECRET: "short"}, f"{SECRET} must be 32 to 256 printable ASCII characters"),
]


@pytest.mark.parametrize(("variables", "words"), BAD_VARIABLES)
def test_bad_worker_variables_are_refused_in_one_sentence_at_once(
    variables: dict[str, str], words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``abc`` and ``x`` gave a traceback, ``WORLD_SIZE=0`` a missing MASTER_ADDR, and
    ``RANK=5 WORLD_SIZE=2`` waited for ever."""
    with pytest.raises(RendezvousError, match=re.escape(words)):
        read_environment(variables)
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    start = time.monotonic()
    done = run(TRAIN, *TINY, "--runs-dir", tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [f"error: {read_error(variables)}"]
    assert time.monotonic() - start < 10
    assert not list(tmp_path.iterdir())  # nothing started


def read_error(variables: dict[str, str]) -> str:
    try:
        read_environment(variables)
    except RendezvousError as error:
        return str(error)
    raise AssertionError(variables)


def test_good_variables_give_the_workers_place() -> None:
    found = read_environment({**GOOD, "LOCAL_RANK": "1", SECRET: "k" * 32})
    assert found is not None
    assert (found.rank, found.size, found.address, found.port) == (1, 2, "127.0.0.1", 29500)
    assert found.secret == "k" * 32
    assert read_environment({}) is None
    alone = read_environment({"WORLD_SIZE": "1"})
    assert alone is not None and alone.size == 1  # one worker: no rendezvous needed


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf", "1e9", "", "\u0661"])
def test_a_bad_rendezvous_timeout_is_refused_in_one_sentence(value: str, tmp_path: Path) -> None:
    done = run(TRAIN, *TINY, "--runs-dir", tmp_path, "--rendezvous-timeout", value)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: --rendezvous-timeout "), line


def test_the_rendezvous_timeout_is_a_minute_or_two_and_no_setting_of_the_run(
    tmp_path: Path,
) -> None:
    assert timedelta(minutes=1) <= RENDEZVOUS_TIMEOUT <= timedelta(minutes=2)
    done = run(TRAIN, *TINY, "--total-steps", "128", "--runs-dir", tmp_path, "--run-name", "a",
               "--rendezvous-timeout=30")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert not [key for key in config if "rendezvous" in key]  # not a setting of the run,
    assert "--rendezvous-timeout" not in config["command"]  # and its command leaves it out


# --- who may join -----------------------------------------------------------------------------


def listening(pid: int | str = "self") -> list[tuple[str, int]]:
    """The addresses and ports on which process ``pid`` listens (TCP, Linux's ``/proc``), in
    the order of their descriptors (the socket made first, first)."""
    inodes = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes[link[8:-1]] = int(fd.name)
    found = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].split(":")
            words = range(0, len(address), 8)  # each 32-bit word in the machine's byte order
            raw = b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in words)
            found.append((inodes[fields[9]], socket.inet_ntop(family, raw), int(port, 16)))
    return [(address, port) for _, address, port in sorted(found)]


def test_the_store_of_a_run_listens_on_loopback_only() -> None:
    """torch's TCPStore listened on every interface (``*:PORT``) before."""
    store = loopback_store(2, timedelta(seconds=5))
    assert ("127.0.0.1", store.port) in listening()
    assert all(address == "127.0.0.1" for address, port in listening() if port == store.port)
    del store


def test_a_workers_proof_shows_its_place_and_the_secret_not() -> None:
    secret = "s" * 64
    shown = proof(secret, 1, 2)
    assert proven(secret, 1, 2, shown)
    assert not proven(secret, 0, 2, shown)  # another worker's place
    assert not proven("t" * 64, 1, 2, shown)  # another run's
    assert secret.encode() not in shown and len(shown) == 32


def test_nothing_a_peer_sends_is_unpickled(tmp_path: Path) -> None:
    """A peer's bytes are read as JSON only: a pickle is refused, and its code never runs."""
    marker = tmp_path / "ran"
    with pytest.raises(BadMessage, match=r"worker 1 sent \d+ bytes that are not JSON"):
        decode(pickle.dumps(Marker(marker)), 1)
    for data in (b"[" * 100_000, b"9" * 5000, b"\xff\xfe", b'{"value": 1, "x": 2}', b"[]"):
        with pytest.raises(BadMessage):
            decode(data, 1)
    assert not marker.exists()
    assert decode(encode({"a": [1, 2.5, None]}), 1) == {"a": [1, 2.5, None]}
    failed = decode(encode(ValueError("a sentence")), 1)
    assert isinstance(failed, WorkerFailed) and str(failed) == "worker 1: ValueError: a sentence"


@pytest.mark.parametrize(
    "header",
    [
        [["../x", 1]],
        [["/etc/passwd", 1]],
        [["snapshots/../../x", 1]],
        [["a", 1], ["a", 2]],
        [["a", -1]],
        [["a", True]],
        [["a", 1, 2]],
        {"a": 1},
        "a",
    ],
)
def test_a_list_of_files_that_leads_outside_the_copy_is_refused(header: object) -> None:
    with pytest.raises(BadMessage, match="not one of a run folder"):
        file_sizes(header)


# --- slow: workers and sockets ----------------------------------------------------------------

TWO = [*TINY, "--workers", "2", "--hidden", "16", "16"]


@pytest.mark.slow
def test_an_unreachable_rendezvous_fails_within_its_timeout(tmp_path: Path) -> None:
    """Nothing listens at 127.0.0.2: before, a C++ trace after ten minutes, then a retry."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(TRAIN), *TINY, "--runs-dir", str(tmp_path),
         "--rendezvous-timeout", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **GOOD, "MASTER_ADDR": "127.0.0.2",
             "MASTER_PORT": str(free_port())},
    )  # fmt: skip
    seconds = time.monotonic() - start
    assert done.returncode == 1, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert (
        line.startswith("error: worker 1 could not meet the other workers at 127.0.0.2:")
        and "within 3 s (--rendezvous-timeout;" in line
    ), line
    assert seconds < 3 + 30, seconds  # the timeout, the imports and one retry's delay


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


STRANGER = """
import datetime, os, sys
import torch.distributed as dist
port = int(sys.stdin.readline())
if os.geteuid() == 0:  # another user: nobody
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
print("uid", os.getuid(), flush=True)
wait = datetime.timedelta(seconds=60)
store = dist.TCPStore("127.0.0.1", port, 2, is_master=False, timeout=wait)
print("in the store", flush=True)
dist.init_process_group("gloo", store=store, rank=1, world_size=2, timeout=wait)
print("in the group", flush=True)
box = [None]
dist.broadcast_object_list(box, src=0)  # what worker 0 shares first: the run's files
print("received", repr(box[0])[:200], flush=True)
"""


def non_loopback_interface() -> str | None:
    """An interface of this machine with an IPv4 address other than loopback's (Linux)."""
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:  # SIOCGIFADDR: the interface's address
                address = socket.inet_ntoa(fcntl.ioctl(probe.fileno(), 0x8915, request)[20:24])
            except OSError:
                continue
            if not address.startswith("127."):
                return name
    return None


@pytest.mark.slow
def test_a_process_this_run_did_not_start_cannot_join_it(tmp_path: Path) -> None:
    """A process of another user (``nobody`` when the tests run as root) connects to the
    store of a ``--workers 2`` run as soon as it listens, long before worker 1 has imported
    torch, and joins as worker 1. Before: the store listened on every interface, the stranger
    joined, and worker 0 sent it the run's files (and would have unpickled what it sent at the
    next checkpoint). Now: the store and gloo listen on loopback (even with gloo told to use
    another interface), the stranger cannot prove the run's secret, and gets nothing."""
    stranger = subprocess.Popen(
        [sys.executable, "-c", STRANGER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    other = non_loopback_interface()
    worker0 = subprocess.Popen(
        [sys.executable, str(TRAIN), *TWO, "--total-steps", "256", "--runs-dir", str(tmp_path),
         "--run-name", "run", "--rendezvous-timeout", "10"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore",
             **({"GLOO_SOCKET_IFNAME": other} if other else {})},
        start_new_session=True,
    )  # fmt: skip
    try:
        first: list[tuple[str, int]] = []
        deadline = time.monotonic() + 120
        while not first and worker0.poll() is None:
            assert time.monotonic() < deadline, "worker 0 never listened"
            with contextlib.suppress(OSError):
                first = listening(worker0.pid)
            time.sleep(0.005)
        seen = set(first)
        assert stranger.stdin is not None
        stranger.stdin.write(f"{first[0][1]}\n")  # the store: the socket worker 0 made first
        stranger.stdin.flush()
        while worker0.poll() is None and time.monotonic() < deadline:  # gloo's sockets too
            with contextlib.suppress(OSError):  # its /proc entries may vanish meanwhile
                seen |= set(listening(worker0.pid))
            time.sleep(0.05)
        _, err = worker0.communicate(timeout=max(1, deadline - time.monotonic()))
    finally:
        for process in (worker0, stranger):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    said = stranger.communicate(timeout=30)[0]
    assert "in the store" in said, said  # it did reach the store
    assert "received" not in said, said  # and got nothing of the run
    assert seen and all(address == "127.0.0.1" for address, _ in seen), seen
    if worker0.returncode == 1:  # the stranger came first, as worker 1
        (line,) = err.strip().splitlines()
        assert line.startswith("error: ") and "this run" in line and "secret" in line, line
    else:  # worker 1 came first: the stranger is not in the run
        assert worker0.returncode == 0, err[-3000:]


WORKER_0 = """
from training.launch import from_environment
group = from_environment()
try:
    print("gathered", group.gather(["worker 0's"]), flush=True)
except Exception as error:
    print("refused:", error, flush=True)
"""

HOSTILE_PEER = """
import os, pickle
import torch as th
import torch.distributed as dist

class Marker:
    def __reduce__(self):
        return (os.makedirs, (os.environ["MARKER"],))

dist.init_process_group("gloo", init_method="env://", rank=1, world_size=2)
payload = th.frombuffer(bytearray(pickle.dumps(Marker())), dtype=th.uint8)
sizes = [th.zeros(1, dtype=th.long) for _ in range(2)]
dist.all_gather(sizes, th.tensor([len(payload)], dtype=th.long))  # as gather_object frames it
padded = th.zeros(int(max(s.item() for s in sizes)), dtype=th.uint8)
padded[: len(payload)] = payload
dist.gather(padded, None, dst=0)
"""


@pytest.mark.slow
def test_worker_0_never_unpickles_what_a_peer_sends(tmp_path: Path) -> None:
    """A peer that joined (under torchrun, without a secret) sends a pickle where worker 0
    gathers the workers' resume points: ``gather_object`` unpickled it, running its code as
    the training user. Now it is read as JSON, refused in one sentence, and never runs."""
    marker = tmp_path / "ran"
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(ROOT), **GOOD,
           "MASTER_PORT": str(free_port()), "MARKER": str(marker)}  # fmt: skip
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "RANK": str(rank)},
            start_new_session=True,
        )
        for rank, script in enumerate((WORKER_0, HOSTILE_PEER))
    ]
    try:
        out, err = processes[0].communicate(timeout=120)
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert not marker.exists(), "worker 0 ran the peer's pickle"
    assert out.startswith("refused: worker 1 sent ") and "not JSON" in out, out + err[-2000:]
