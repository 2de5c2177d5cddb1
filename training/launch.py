"""Starting a run's workers and joining them: ``train.py --workers N`` makes this process
worker 0 and starts the others as its children (:func:`launch`); a worker that torchrun or
:func:`launch` started finds its place in the environment (:func:`from_environment`).

Both wait for the others at most the rendezvous timeout (``train.py --rendezvous-timeout``,
:data:`~training.rendezvous.RENDEZVOUS_TIMEOUT` by default), and a worker whose variables cannot
work says so at once (:func:`~training.rendezvous.read_environment`). The workers that
:func:`launch` starts meet on loopback only and prove with the run's secret that it started
them, before anything is shared (:mod:`training.rendezvous`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

from training.distributed import COLLECTIVE_TIMEOUT, WorkerGroup, WorkerLost, backend
from training.rendezvous import (
    GLOO_INTERFACE,
    RENDEZVOUS_TIMEOUT,
    SECRET,
    RendezvousError,
    WorkerEnvironment,
    gloo_on_loopback,
    loopback_interface,
    loopback_store,
    native_log_held,
    new_secret,
    read_environment,
    wait_reachable,
)

LAUNCHED = "BUTTONUP_ENV_WORKER"
"""Set in the environment of a worker that ``train.py --workers N`` started (not torchrun)."""

ROOT = Path(__file__).resolve().parent.parent
"""The folder that holds the ``training`` package: the children import it from there."""


def launch(
    size: int,
    timeout: timedelta = RENDEZVOUS_TIMEOUT,
    command: Sequence[str] | None = None,
) -> WorkerGroup:
    """Make this process worker 0 of ``size`` workers on this machine: start workers 1 to
    ``size`` - 1 as its children (``command``, by default ``python -m training.train``, told
    their rank by the environment as torchrun tells it; they die with this process), and join
    them, waiting at most ``timeout`` for them.

    The store and the gloo sockets listen on loopback only, and each child is given the
    run's secret in its environment (which other users cannot read); every worker proves it
    before anything is shared (:class:`~training.distributed.Stranger` otherwise)."""
    store = loopback_store(size, timeout)
    secret = new_secret()
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    common = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(store.port),
        "WORLD_SIZE": str(size),
        "LOCAL_WORLD_SIZE": str(size),
        "PYTHONPATH": os.pathsep.join(paths),
        GLOO_INTERFACE: loopback_interface(),
        SECRET: secret,
        LAUNCHED: "1",
    }
    seconds = f"{timeout.total_seconds():g}"
    command = command or [sys.executable, "-m", "training.train", "--rendezvous-timeout", seconds]
    children = [
        subprocess.Popen(
            list(command),
            env={**common, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdin=subprocess.DEVNULL,
        )
        for rank in range(1, size)
    ]
    group = WorkerGroup(0, size, children, launched=True)
    try:
        with gloo_on_loopback(), native_log_held():
            dist.init_process_group(
                backend(), store=store, rank=0, world_size=size, timeout=COLLECTIVE_TIMEOUT
            )
        group.check_secret(secret, timeout)
    except BaseException as error:
        for child in children:
            child.kill()
        lost = error if isinstance(error, WorkerLost) else group.lost(error, timeout)
        group.close()
        raise lost from None
    return group


def from_environment(timeout: timedelta = RENDEZVOUS_TIMEOUT) -> WorkerGroup | None:
    """This process's place among the workers when torchrun (or :func:`launch`) started it:
    ``RANK`` and ``WORLD_SIZE`` in the environment, joined in a process group at
    ``MASTER_ADDR:MASTER_PORT`` within ``timeout``. None without ``WORLD_SIZE``, or with one
    worker (then no process group is made: a single worker trains as a run without workers).

    Raises :class:`~training.rendezvous.RendezvousError` at once for variables that cannot
    work, and :class:`~training.distributed.WorkerLost` when the others cannot be met within
    ``timeout`` or a worker does not know the run's secret (when it has one: always for the
    workers :func:`launch` starts)."""
    found = read_environment(os.environ)
    os.environ.pop(SECRET, None)  # for this process alone, not for what it may start
    if found is None or found.size == 1:
        return None
    launched = os.environ.get(LAUNCHED) == "1"
    if launched:
        die_with_parent()
        if found.secret is None:
            raise RendezvousError(f"{LAUNCHED} is set but {SECRET} is not: no run started this")
    group = WorkerGroup(found.rank, found.size, launched=launched)
    try:
        with native_log_held():
            dist.init_process_group(
                backend(),
                store=_store(found, launched, timeout),
                rank=found.rank,
                world_size=found.size,
                timeout=COLLECTIVE_TIMEOUT,
            )
    except (RuntimeError, OSError, ValueError) as error:
        text = " ".join(str(error).split())[:200]
        where = f"{found.address}:{found.port}"
        raise WorkerLost(
            f"worker {found.rank} could not meet the other workers at {where} within "
            f"{timeout.total_seconds():g} s (--rendezvous-timeout; {text})"
        ) from None
    if found.secret is not None:
        group.check_secret(found.secret, timeout)
    return group


def _store(found: WorkerEnvironment, launched: bool, timeout: timedelta) -> dist.Store:
    """The store the workers meet in: worker 0's on loopback for a worker :func:`launch`
    started; else torchrun's (``env://``: worker 0 makes it, or torchrun's agent holds it),
    under the key prefix ``init_process_group`` gives it."""
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    if launched or found.rank != 0 or agent:  # a client: the store must answer in time
        timeout = wait_reachable(found.address, found.port, timeout)
    if launched:
        return dist.TCPStore(
            found.address, found.port, found.size, is_master=False, timeout=timeout
        )
    store, _, _ = next(
        dist.rendezvous("env://", rank=found.rank, world_size=found.size, timeout=timeout)
    )
    return dist.PrefixStore("default_pg", store)


def die_with_parent() -> None:
    """Have Linux end this process (SIGKILL) when the process that started it dies: a worker
    without worker 0 has nothing left to do (elsewhere its next collective fails instead)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before the line above
            os._exit(1)
