"""How a run's workers find each other, and who may: the torchrun variables read and checked,
the rendezvous bounded in time, and for ``train.py --workers N`` a rendezvous on loopback that
only the workers this run started can join.

**The variables.** ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` (set by torchrun, or by :func:`training.launch.launch` for
its children) are read by :func:`read_environment`: a value that cannot work (``abc``, a rank
beyond the workers, a port beyond 65,535) is one sentence at once, never a traceback, and
never a wait for workers that cannot come.

**The time.** Joining the others ends within :data:`RENDEZVOUS_TIMEOUT` (``train.py
--rendezvous-timeout``): an address where nothing listens, or a worker that never comes, is one
sentence after it, not a C++ trace after ten minutes.

**Who.** ``train.py --workers N`` starts its workers itself, all on this machine: its store
listens on 127.0.0.1 only (:func:`loopback_store`, not on every interface), the gloo sockets
too (:func:`gloo_on_loopback`), and the workers prove that this run started them with a
secret of the run (:func:`new_secret`, given to each in its environment, which other users
cannot read), checked (:func:`proof`) before the run shares anything. A process of another
user can still reach a port on loopback; it cannot pass that check, and nothing it sends is
ever unpickled (:mod:`training.distributed` sends tensors and JSON only).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch.distributed as dist

RENDEZVOUS_TIMEOUT = timedelta(minutes=2)
"""How long a worker waits by default for the others to join the run (``train.py
--rendezvous-timeout``): longer than a worker takes to start (importing torch, a few seconds
on a loaded machine), far shorter than torch's own ten minutes."""

MAX_RENDEZVOUS_SECONDS = 24 * 3600
"""The longest ``--rendezvous-timeout``: a day."""

SECRET = "BUTTONUP_ENV_WORKER_SECRET"
"""The environment variable that gives a worker the run's secret (32 to 256 printable ASCII
characters, no spaces): :func:`training.launch.launch` sets it for the workers it starts;
under torchrun you may set it, the same on every machine, and the workers check it too."""

MAX_WORKERS = 2**20
"""The most workers ``WORLD_SIZE`` may give (the bound of a run's ``workers``)."""

_WHOLE = re.compile(r"[0-9]+")
_HOST = re.compile(r"[A-Za-z0-9._:\[\]%-]{1,253}")
_SECRET = re.compile(r"[!-~]{32,256}")


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
    secret: str | None = None
    """The run's secret, when the worker was given one (:data:`SECRET`)."""


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
    secret = environ.get(SECRET)
    if secret is not None and not _SECRET.fullmatch(secret):
        raise RendezvousError(
            f"{SECRET} must be 32 to 256 printable ASCII characters without spaces, the same "
            f"for every worker (openssl rand -hex 32 makes one), got {len(secret)} characters"
        )
    if size == 1:
        return WorkerEnvironment(rank, size, "", 0, secret)
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
    return WorkerEnvironment(rank, size, address, port, secret)


def check_timeout(seconds: float) -> timedelta:
    """``--rendezvous-timeout`` as a duration; :class:`RendezvousError` unless it is a
    number of seconds from 1 to :data:`MAX_RENDEZVOUS_SECONDS`."""
    if not 1 <= seconds <= MAX_RENDEZVOUS_SECONDS:
        raise RendezvousError(
            f"--rendezvous-timeout must be from 1 to {MAX_RENDEZVOUS_SECONDS:,} seconds, "
            f"got {seconds:g}"
        )
    return timedelta(seconds=seconds)


def loopback_store(size: int, timeout: timedelta) -> dist.TCPStore:
    """Worker 0's ``TCPStore`` for ``size`` workers on this machine, listening on 127.0.0.1
    only, at a free port (its ``port``). torch's store listens on every interface when it
    makes its socket itself, so it is handed one made here."""
    import torch.distributed as dist

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(max(64, size))
        port = listener.getsockname()[1]
    except BaseException:
        listener.close()
        raise
    return dist.TCPStore(
        "127.0.0.1",
        port,
        size,
        is_master=True,
        timeout=timeout,
        wait_for_workers=False,
        master_listen_fd=listener.detach(),  # the store owns the socket from here
    )


def loopback_interface() -> str:
    """The name of this machine's loopback interface (``lo`` on Linux, ``lo0`` on macOS)."""
    with contextlib.suppress(OSError, AttributeError):
        for _, name in socket.if_nameindex():
            if name in ("lo", "lo0"):
                return name
    return "lo"


GLOO_INTERFACE = "GLOO_SOCKET_IFNAME"
"""The variable that tells gloo on which interface to listen (else where the host name
resolves, which may be every machine's network)."""


@contextlib.contextmanager
def gloo_on_loopback() -> Iterator[None]:
    """Within it, a gloo process group made in this process listens on loopback only (the
    variable gloo reads, set and then put back)."""
    before = os.environ.get(GLOO_INTERFACE)
    os.environ[GLOO_INTERFACE] = loopback_interface()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(GLOO_INTERFACE, None)
        else:
            os.environ[GLOO_INTERFACE] = before


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


def new_secret() -> str:
    """A run's secret: 256 random bits, in hex."""
    return secrets.token_hex(32)


def proof(secret: str, rank: int, size: int) -> bytes:
    """What worker ``rank`` of ``size`` sends to show that it knows the run's ``secret``
    (an HMAC-SHA256 of its place, which tells nothing of the secret)."""
    message = f"buttonup-env worker {rank} of {size}".encode()
    return hmac.new(secret.encode("ascii"), message, hashlib.sha256).digest()


def proven(secret: str, rank: int, size: int, shown: bytes) -> bool:
    """Whether ``shown`` is worker ``rank``'s :func:`proof` of ``secret``."""
    return hmac.compare_digest(proof(secret, rank, size), shown)
