"""How a run's workers find each other: the torchrun variables read and checked, and the
rendezvous bounded in time.

**The variables.** ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` (set by torchrun, or by :func:`training.launch.launch` for
its children) are read by :func:`read_environment`: a value that cannot work (``abc``, a rank
beyond the workers, a port beyond 65,535) is one sentence at once, never a traceback, and
never a wait for workers that cannot come.

**The time.** Joining the others ends within :data:`RENDEZVOUS_TIMEOUT` (``train.py
--rendezvous-timeout``): an address where nothing listens, or a worker that never comes, is one
sentence after it, not a C++ trace after ten minutes.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta

RENDEZVOUS_TIMEOUT = timedelta(minutes=2)
"""How long a worker waits by default for the others to join the run (``train.py
--rendezvous-timeout``): longer than a worker takes to start (importing torch, a few seconds
on a loaded machine), far shorter than torch's own ten minutes."""

MAX_RENDEZVOUS_SECONDS = 24 * 3600
"""The longest ``--rendezvous-timeout``: a day."""

MAX_WORKERS = 2**20
"""The most workers ``WORLD_SIZE`` may give (the bound of a run's ``workers``)."""

_WHOLE = re.compile(r"[0-9]+")
_HOST = re.compile(r"[A-Za-z0-9._:\[\]%-]{1,253}")


class RendezvousError(ValueError):
    """A worker's environment that cannot work, or a rendezvous that failed; the message is
    one sentence."""


@dataclass(frozen=True)
class WorkerEnvironment:
    """What torchrun (or :func:`training.launch.launch`) told this worker, checked."""

    rank: int
    size: int
    address: str
    """``MASTER_ADDR``: where the rendezvous is."""
    port: int
    """``MASTER_PORT``."""


def _whole(environ: Mapping[str, str], name: str, low: int, high: int, what: str) -> int:
    text = environ[name]
    if not _WHOLE.fullmatch(text) or not low <= int(text) <= high:
        raise RendezvousError(
            f"{name} is {text[:40]!r}; it must be a whole number from {low:,} to {high:,} ({what})"
        )
    return int(text)


def read_environment(environ: Mapping[str, str]) -> WorkerEnvironment | None:
    """This worker's place among the workers from the variables ``environ`` holds, or None
    without ``WORLD_SIZE`` (a run of one process). Raises :class:`RendezvousError` in one
    sentence for a value that cannot work."""
    if "WORLD_SIZE" not in environ:
        return None
    size = _whole(environ, "WORLD_SIZE", 1, MAX_WORKERS, "the number of workers")
    if size > 1 and "RANK" not in environ:
        raise RendezvousError(
            f"WORLD_SIZE is {size} but RANK is not set; each worker needs its rank, 0 to "
            f"{size - 1} (torchrun sets both)"
        )
    rank = 0
    if "RANK" in environ:
        rank = _whole(environ, "RANK", 0, size - 1, f"this worker's rank among {size}")
    local_size = size
    if "LOCAL_WORLD_SIZE" in environ:
        local_size = _whole(environ, "LOCAL_WORLD_SIZE", 1, size, "the workers on this machine")
    if "LOCAL_RANK" in environ:
        _whole(environ, "LOCAL_RANK", 0, local_size - 1, "this worker's rank on this machine")
    if size == 1:
        return WorkerEnvironment(rank, size, "", 0)
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if name not in environ:
            raise RendezvousError(
                f"WORLD_SIZE is {size} but {name} is not set; the workers meet at "
                "MASTER_ADDR:MASTER_PORT (torchrun sets both)"
            )
    address = environ["MASTER_ADDR"]
    if not _HOST.fullmatch(address):
        raise RendezvousError(
            f"MASTER_ADDR is {address[:40]!r}; it must be a host name or an IP address"
        )
    port = _whole(environ, "MASTER_PORT", 1, 65535, "a TCP port")
    return WorkerEnvironment(rank, size, address, port)


def check_timeout(seconds: float) -> timedelta:
    """``--rendezvous-timeout`` as a duration; :class:`RendezvousError` unless it is a
    number of seconds from 1 to :data:`MAX_RENDEZVOUS_SECONDS`."""
    if not 1 <= seconds <= MAX_RENDEZVOUS_SECONDS:
        raise RendezvousError(
            f"--rendezvous-timeout must be from 1 to {MAX_RENDEZVOUS_SECONDS:,} seconds, "
            f"got {seconds:g}"
        )
    return timedelta(seconds=seconds)


def wait_reachable(address: str, port: int, timeout: timedelta) -> timedelta:
    """Wait until a TCP connection to ``address:port`` opens, at most ``timeout``; return the
    time left. ``TimeoutError`` in one sentence when it never did: torch's store, given the
    same timeout, tries twice and gives up only after twice as long."""
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((address, port), timeout=max(0.1, min(left, 5.0))):
                return timedelta(seconds=max(1.0, deadline - time.monotonic()))
        except OSError as error:
            if time.monotonic() + 0.25 >= deadline:
                reason = error.strerror or type(error).__name__
                raise TimeoutError(f"nothing answered at {address}:{port} ({reason})") from None
        time.sleep(0.25)


@contextlib.contextmanager
def native_log_held() -> Iterator[None]:
    """Within it, what torch's C++ code writes to the standard error is held back (a
    rendezvous that fails logs each retry with a C++ stack trace): written out when the
    block ends well, dropped when it raises, whose sentence says what went wrong."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no standard error to hold
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        done = False
        try:
            yield
            done = True
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if done:
                held.seek(0)
                with contextlib.suppress(OSError):
                    os.write(2, held.read()[-(1 << 16) :])
