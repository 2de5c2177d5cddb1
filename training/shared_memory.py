"""The workers' gradient exchange through shared memory, for workers on one machine: where
the processor's store order allows it, faster than gloo's sockets (on a 2-core virtual
machine a backward pass with gloo's exchange took 3.3 times as long,
benchmarks/bench_exchange.py). :class:`~training.distributed.WorkerGroup` opens it; it knows
of the group only what :class:`Peers` says."""

from __future__ import annotations

import contextlib
import mmap
import os
import platform
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch as th


class Peers(Protocol):
    """What the exchange needs of the workers' group: this worker's rank of ``size``, the
    workers it started (``children``), two collectives, and the error for a lost worker."""

    rank: int
    size: int
    children: list[Any]

    @property
    def leader(self) -> bool: ...

    def share(self, value: Any = None) -> Any: ...

    def every(self, value: bool) -> bool: ...

    def lost(self, error: BaseException) -> Exception: ...


TOTAL_STORE_ORDER = {"x86_64", "amd64", "i386", "i686", "x86"}
"""Processor architectures (``platform.machine()``) whose stores become visible to other cores
in program order (x86's total store order): there a worker that sees another's counter
advance sees the gradients written before it, without fences, which Python cannot issue."""


class SharedGradients:
    """The workers' gradient exchange through one shared memory map, for workers on one
    machine: a slot of gradients per worker, and per worker two counters of exchanges (one
    cache line each), the ones it has written and the ones it has read.

    In exchange ``i`` a worker waits until every worker has read exchange ``i - 1`` (its slot
    is then free), writes its gradients into its slot, counts ``i`` written, waits until every
    worker has written ``i``, reads every slot, and counts ``i`` read (:meth:`done`). The
    waiting spins, yielding the core to whatever else wants it, and looks every half second
    whether the others' processes are alive: a dead one raises the group's error for a lost
    worker (``WorkerLost``), as a failed gloo collective does, and so does silence for
    :attr:`timeout`. It is
    used only on processors with total store order (:data:`TOTAL_STORE_ORDER`), where the
    counters' order is the gradients' order.

    Worker 0 makes the map (a temporary file, in ``/dev/shm`` where there is one) and writes
    a random token into it; the others open the file and read the token back. Only when every
    worker found it do they use the map, and the file is deleted as soon as all have mapped
    it (the memory lives until the last one closes it): otherwise they use gloo."""

    WRITTEN, READ, PID = 0, 1, 2
    """Columns of a worker's counter line: exchanges written, exchanges read, process id."""
    LINE = 8
    """int64 numbers per worker's counter line (64 bytes: one cache line)."""

    def __init__(self, group: Peers, memory: mmap.mmap, numel: int, dtype: th.dtype):
        self.group = group
        self.memory = memory
        size, line = group.size, self.LINE
        self.counters = np.frombuffer(memory, dtype=np.int64, count=size * line).reshape(size, line)
        offset = self.counters.nbytes
        self.slots = [
            th.frombuffer(
                memory, dtype=dtype, count=numel, offset=offset + rank * numel * dtype.itemsize
            )
            for rank in range(size)
        ]
        self.count = 0
        self.timeout = timedelta(minutes=10)
        """How long :meth:`exchange` waits for the others before it gives up on them (the
        group's collective timeout: :meth:`open` sets it)."""
        self.counters[group.rank, self.PID] = os.getpid()

    @classmethod
    def open(
        cls, group: Peers, numel: int, dtype: th.dtype, timeout: timedelta = timedelta(minutes=10)
    ) -> SharedGradients | None:
        """The exchange of ``numel`` gradients of type ``dtype`` for ``group``, or None when
        its workers cannot all map the same memory. Every worker calls it at once."""
        if platform.machine().lower() not in TOTAL_STORE_ORDER:
            return None
        size = group.size
        counters = size * cls.LINE * 8
        length = counters + size * numel * dtype.itemsize
        token = os.urandom(16).hex().encode()  # in worker 0's slot, which its gradients overwrite
        made = None
        if group.leader:
            folder = "/dev/shm" if os.path.isdir("/dev/shm") else None
            with contextlib.suppress(OSError):
                fd, made = tempfile.mkstemp(prefix="buttonup-gradients-", dir=folder)
                with os.fdopen(fd, "r+b") as file:
                    file.truncate(length)  # zeros: the counters start at 0
                    if hasattr(os, "posix_fallocate"):  # no room: an error now, not SIGBUS later
                        os.posix_fallocate(file.fileno(), 0, length)
                    file.seek(counters)
                    file.write(token)
        memory = None
        try:  # the file goes however this ends (a worker lost in the collectives, say)
            path, shown = group.share([made, token.decode()])  # JSON: text, not bytes
            token = str(shown).encode()
            if isinstance(path, str):
                with contextlib.suppress(OSError, ValueError), open(path, "r+b") as file:
                    candidate = mmap.mmap(file.fileno(), length)
                    if candidate[counters : counters + len(token)] == token:
                        memory = candidate
                    else:
                        candidate.close()
            mapped = group.every(memory is not None)
        finally:
            if made is not None:
                with contextlib.suppress(OSError):
                    os.unlink(made)
        if not mapped:
            if memory is not None:
                memory.close()
            return None
        exchange = cls(group, memory, numel, dtype)
        exchange.timeout = timeout
        return exchange

    def exchange(self, mine: th.Tensor) -> list[th.Tensor]:
        """Write ``mine`` and return every worker's gradients of this exchange, in rank order
        (views of the shared memory, valid until :meth:`done`)."""
        self.count += 1
        self._wait(self.READ, self.count - 1)
        self.slots[self.group.rank].copy_(mine)
        self.counters[self.group.rank, self.WRITTEN] = self.count
        self._wait(self.WRITTEN, self.count)
        return self.slots

    def done(self) -> None:
        """Count this exchange read: the others may write their next gradients."""
        self.counters[self.group.rank, self.READ] = self.count

    def _wait(self, column: int, count: int) -> None:
        counts = self.counters[:, column]
        if (counts >= count).all():
            return
        start = last_look = time.monotonic()
        while not (counts >= count).all():
            os.sched_yield()
            now = time.monotonic()
            if now - last_look > 0.5:
                last_look = now
                self._look(now - start)

    def _look(self, waited: float) -> None:
        """Raise the group's error when another worker's process is gone, or after
        :attr:`timeout` of waiting."""
        for child in self.group.children:
            if child.poll() is not None:
                raise self.group.lost(RuntimeError("a worker's process is gone"))
        for rank, pid in enumerate(self.counters[:, self.PID]):
            if rank != self.group.rank and pid > 0 and not alive(int(pid)):
                raise self.group.lost(RuntimeError(f"worker {rank}'s process is gone"))
        if waited > self.timeout.total_seconds():
            raise self.group.lost(RuntimeError("the gradient exchange timed out"))

    def close(self) -> None:
        """Unmap the memory (the views of it go first)."""
        del self.counters, self.slots
        with contextlib.suppress(BufferError):
            self.memory.close()


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a dead child not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    return True
