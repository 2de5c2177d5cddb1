"""How a run's workers meet (training/rendezvous.py, training/launch.py): the torchrun
variables refused in one sentence, and a rendezvous bounded in time. The refusals run here;
whatever starts workers or waits on a socket is slow."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from commands import run
from test_training import ROOT, TINY, TRAIN

from training.rendezvous import RENDEZVOUS_TIMEOUT, RendezvousError, read_environment

GOOD = {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


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
    found = read_environment({**GOOD, "LOCAL_RANK": "1"})
    assert found is not None
    assert (found.rank, found.size, found.address, found.port) == (1, 2, "127.0.0.1", 29500)
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


# --- slow: workers and sockets ----------------------------------------------------------------


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
