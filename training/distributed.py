"""Data-parallel training on torch.distributed: one run trained by several processes, the
workers, on one machine (``train.py --workers N``) or on several (``torchrun``); and who does
what among them.

A run's processes are a team: :class:`WorkerGroup` for several workers, :class:`Solo` for a
run of one process, which answers the same questions (its collectives give back what it
holds). The rank logic lives here, in their methods: worker 0 is the :attr:`~Team.leader`
(it reads and writes the run folder, prints, shows the progress bar, plays the periodic
evaluation's matches against the bots, exports at the end); :meth:`~Team.rater` says which
worker plays the rating matches against the ladder meanwhile; :meth:`~Team.share_file` gives
every worker worker 0's new snapshot.

Every worker steps its own batched env and collects its own rollouts, its seeds derived from
the run's seed and its rank (:func:`rank_seed`), and computes the gradients of its own
minibatches. Before every optimizer step the gradients are averaged over the workers
(:meth:`WorkerGroup.average_gradients`), so the weights, worker 0's at the start
(:meth:`WorkerGroup.broadcast_parameters`), stay the same bit for bit on every worker; the
gradient norm is clipped on the averages. Every worker runs the same steps, minibatches and
epochs, and meets the others at the same points: each rollout's start
(:meth:`WorkerGroup.agree`: worker 0's clock, and whether any worker was asked to stop), each
snapshot (:meth:`Team.share_file`) and each checkpoint (:meth:`WorkerGroup.gather`: every
worker's resume point, which worker 0 writes). training/trainer.py says what happens there.

``train.py --workers N`` makes this process worker 0 and starts workers 1 to N-1 as its
children (:func:`training.launch.launch`); ``torchrun`` starts every worker itself, and each
finds its rank in the environment (:func:`training.launch.from_environment`). The process
group is gloo for CPU tensors (the network trains on the CPU), with NCCL beside it for CUDA
tensors where there is CUDA.

Workers on one machine average their gradients through shared memory
(:class:`~training.shared_memory.SharedGradients`) rather than gloo's sockets: they meet
there 16 times a rollout, and on a 2-core virtual
machine a backward pass with gloo's exchange took 3.3 times as long
(benchmarks/bench_exchange.py), and a 2-worker run went 1.3 times as fast.

What travels between workers is tensors, JSON (:meth:`WorkerGroup.share`,
:meth:`WorkerGroup.gather`) and files' bytes (:meth:`Team.share_files`), never a pickle:
a peer's bytes are read as JSON and checked, so nothing another process sends can run code
here. The workers meet as :mod:`training.rendezvous` says: for ``--workers N`` on loopback
only, each proving with the run's secret that this run started it before anything is shared.

A worker that dies makes the next collective of the others fail: at once when its connections
close (gloo sees them close) or its process is gone (the shared-memory exchange looks), after
:data:`COLLECTIVE_TIMEOUT` when it hangs. The collectives here raise :class:`WorkerLost` then,
and worker 0 says which worker it was when it started it.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
import torch.distributed as dist
from torch import nn

from training.messages import WorkerLost, checked_length, decode, encode, file_sizes
from training.rendezvous import proof, proven
from training.shared_memory import SharedGradients

COLLECTIVE_TIMEOUT = timedelta(minutes=10)
"""How long a worker waits for the others at a collective before it gives up on them: longer
than worker 0's longest work alone (a periodic evaluation, a checkpoint) while the others
wait."""

MAX_LOCAL_WORKERS = 4 * (os.cpu_count() or 1)
"""The most workers ``train.py --workers N`` starts on this machine: four per logical CPU
(torchrun, which starts the workers itself, is not bounded by it)."""


MAX_AUTO_WORKERS = 8
"""The most workers ``--workers auto`` starts: each worker adds its rollout to every update,
and beyond 8 the run's minibatch (8 x batch_size) is larger than the runs measured."""


def physical_cores() -> int:
    """The physical cores this process may run on: the CPUs of its affinity, two hardware
    threads of one core counted once (read from Linux's ``/sys``; elsewhere, or where it cannot
    be read, the logical CPUs)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            return len(cpus)
        cores.add((package, core))
    return max(1, len(cores))


def auto_workers() -> int:
    """What ``--workers auto`` gives: the physical cores, at most :data:`MAX_AUTO_WORKERS`."""
    return min(physical_cores(), MAX_AUTO_WORKERS)


class Stranger(WorkerLost):
    """A process that did not know the run's secret joined the rendezvous: the run stops
    before it shares anything."""


def rank_seed(seed: int, rank: int) -> int:
    """Worker ``rank``'s seed: the run's ``seed`` for worker 0 (so one worker trains exactly as
    a run without workers), for the others a number drawn from numpy's ``SeedSequence`` of
    (``seed``, ``rank``), far from the seeds of other runs and other workers."""
    if rank == 0:
        return seed
    return int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])


def backend() -> str:
    """The process group's backend: gloo for CPU tensors, and NCCL for CUDA ones where torch
    has CUDA."""
    return "cpu:gloo,cuda:nccl" if th.cuda.is_available() else "gloo"


def digest(module: nn.Module) -> str:
    """A SHA-256 of ``module``'s parameters, byte for byte (workers compare theirs)."""
    sha = hashlib.sha256()
    for parameter in module.parameters():
        sha.update(parameter.detach().cpu().contiguous().numpy().tobytes())
    return sha.hexdigest()


class Team(abc.ABC):
    """The processes that train a run together, as one of them sees them: its ``rank`` of
    ``size``. The roles (who writes, who prints, who rates) are answered here, for
    :class:`Solo` and :class:`WorkerGroup` alike."""

    rank: int
    size: int

    @property
    def leader(self) -> bool:
        """Worker 0: it reads and writes the run folder, prints, shows the progress bar,
        plays the periodic evaluations' matches against the bots and exports at the end."""
        return self.rank == 0

    @property
    def together(self) -> bool:
        """Several workers: they agree at each rollout's start on the time and on stopping,
        and meet at every snapshot and checkpoint."""
        return self.size > 1

    def say(self, message: str) -> None:
        """Print ``message`` once for the run: worker 0 prints, the others do not."""
        if self.leader:
            print(message)

    def rater(self, together: bool) -> int:
        """The worker that plays a periodic evaluation's rating matches against the ladder:
        worker 1 while worker 0 plays the bots' matches, when several workers evaluate
        ``together`` (every one calls at the same step), else worker 0 itself."""
        return 1 if together and self.together else 0

    def share_file(self, path: Path, write: Callable[[Path], object]) -> None:
        """Worker 0 writes ``path`` with ``write``, and every other worker a copy of its bytes
        (into its own mirror of the run folder)."""
        if self.leader:
            write(path)
        data = self.share_bytes(path.read_bytes() if self.leader and self.together else None)
        if not self.leader:
            path.write_bytes(data)

    # --- the collectives: every worker calls each at the same point of the run

    @abc.abstractmethod
    def share(self, value: Any = None) -> Any:
        """Worker 0's ``value`` (JSON: None, booleans, numbers, text, lists, dicts), on every
        worker."""

    @abc.abstractmethod
    def share_bytes(self, data: bytes | None = None) -> bytes:
        """Worker 0's ``data``, on every worker."""

    def share_files(self, files: dict[str, bytes] | None = None) -> dict[str, bytes] | None:
        """Worker 0's ``files`` (their bytes by relative path), on every worker; None when
        worker 0 gives None (it refused the run)."""
        header = self.share(None if files is None else [[n, len(d)] for n, d in files.items()])
        if header is None:
            return None
        sizes = file_sizes(header)
        data = self.share_bytes(b"".join(files.values()) if files is not None else None)
        if sum(sizes.values()) != len(data):
            raise WorkerLost(f"worker 0 sent {len(data):,} bytes of files said to hold more")
        shared, start = {}, 0
        for name, size in sizes.items():
            shared[name], start = data[start : start + size], start + size
        return shared

    @abc.abstractmethod
    def gather(self, value: Any) -> list[Any] | None:
        """Every worker's ``value`` (JSON, or an exception: on worker 0 a
        :class:`~training.messages.WorkerFailed` saying it) in rank order, on worker 0 (None
        on the others)."""

    @abc.abstractmethod
    def agree(self, seconds: float, stop: bool) -> tuple[float, bool]:
        """Worker 0's ``seconds`` (its training time), and whether any worker's ``stop`` is
        true, on every worker."""

    @abc.abstractmethod
    def broadcast_parameters(self, module: nn.Module) -> None:
        """Give every worker worker 0's parameters of ``module``."""

    @abc.abstractmethod
    def average_gradients(
        self, parameters: Iterable[nn.Parameter], shared_memory: bool = True
    ) -> bool:
        """Average the gradients of ``parameters`` over the workers at the end of every
        backward pass; whether they go through shared memory."""

    @abc.abstractmethod
    def close(self) -> None:
        """Leave the team."""


@dataclass
class Solo(Team):
    """A run of one process, without torch.distributed: the team of one, whose collectives
    give back what it holds and whose other calls do nothing."""

    rank: int = 0
    size: int = 1
    launched: bool = False
    children: list[subprocess.Popen] = field(default_factory=list)

    def share(self, value: Any = None) -> Any:
        return value

    def share_bytes(self, data: bytes | None = None) -> bytes:
        return data or b""

    def gather(self, value: Any) -> list[Any] | None:
        return [value]

    def agree(self, seconds: float, stop: bool) -> tuple[float, bool]:
        return seconds, stop

    def broadcast_parameters(self, module: nn.Module) -> None:
        """Nothing to share."""

    def average_gradients(
        self, parameters: Iterable[nn.Parameter], shared_memory: bool = True
    ) -> bool:
        """Nothing to average: the gradients are this process's own."""
        return False

    def close(self) -> None:
        """Nothing to leave."""


@dataclass
class WorkerGroup(Team):
    """This process's place among the run's workers: its ``rank`` of ``size``, and the
    process group that joins them (made by :func:`training.launch.launch` or
    :func:`training.launch.from_environment`)."""

    rank: int
    size: int
    children: list[subprocess.Popen] = field(default_factory=list)
    """Workers 1 to N-1 when this process started them (:func:`training.launch.launch`)."""
    launched: bool = False
    """Started by ``train.py --workers N`` (not torchrun)."""
    _exchanges: list[SharedGradients] = field(default_factory=list, repr=False)

    # --- the collectives; each raises WorkerLost when another worker is gone

    def _collective(self, what: str) -> contextlib.AbstractContextManager[None]:
        return _lost_on_failure(self, what)

    def share(self, value: Any = None) -> Any:
        """Worker 0's ``value`` (JSON), on every worker: its text sent as bytes, read back
        as JSON (never unpickled)."""
        data = self.share_bytes(encode(value) if self.leader else None)
        return value if self.leader else decode(data, 0)

    def share_bytes(self, data: bytes | None = None) -> bytes:
        """Worker 0's ``data``, on every worker: its length, then its bytes, as tensors."""
        with self._collective("sharing worker 0's data"):
            length = th.tensor([len(data or b"") if self.leader else 0], dtype=th.int64)
            dist.broadcast(length, src=0)
            size = checked_length(int(length[0]), 0)
            if size == 0:
                return b""
            if self.leader:
                buffer = th.frombuffer(bytearray(data or b""), dtype=th.uint8)
            else:
                buffer = th.empty(size, dtype=th.uint8)
            dist.broadcast(buffer, src=0)
        return data or b"" if self.leader else buffer.numpy().tobytes()

    def gather(self, value: Any) -> list[Any] | None:
        """Every worker's ``value`` (JSON, or an exception) in rank order, on worker 0 (None
        on the others): each one's length, then its bytes padded to the longest, as tensors;
        worker 0 reads each as JSON (never unpickled)."""
        data = encode(value)
        with self._collective("gathering the workers' states"):
            lengths = [th.zeros(1, dtype=th.int64) for _ in range(self.size)]
            dist.all_gather(lengths, th.tensor([len(data)], dtype=th.int64))
            sizes = [checked_length(int(n[0]), rank) for rank, n in enumerate(lengths)]
            mine = th.zeros(max(sizes), dtype=th.uint8)
            mine[: len(data)] = th.frombuffer(bytearray(data), dtype=th.uint8)
            every = [th.empty_like(mine) for _ in range(self.size)] if self.leader else None
            dist.gather(mine, every, dst=0)
        if every is None:
            return None
        return [
            decode(t[:n].numpy().tobytes(), rank)
            for rank, (t, n) in enumerate(zip(every, sizes, strict=True))
        ]

    def check_secret(self, secret: str, timeout: timedelta) -> None:
        """Raise :class:`Stranger` unless every worker proves within ``timeout`` that it
        knows the run's ``secret`` (:func:`~training.rendezvous.proof`, gathered as tensors):
        called once the workers have met, before anything else passes between them."""
        mine = th.frombuffer(bytearray(proof(secret, self.rank, self.size)), dtype=th.uint8)
        every = [th.empty_like(mine) for _ in range(self.size)]
        try:
            work = dist.all_gather(every, mine, async_op=True)
            if work is not None:
                work.wait(timeout)
        except (RuntimeError, OSError) as error:
            raise Stranger(
                f"a worker did not show within {timeout.total_seconds():g} s that it knows "
                f"the run's secret, so this run may not have started it "
                f"({' '.join(str(error).split())[:120]}); the run stopped before sharing anything"
            ) from None
        for rank, shown in enumerate(every):
            if rank != self.rank and not proven(secret, rank, self.size, shown.numpy().tobytes()):
                raise Stranger(
                    f"the process that joined the run as worker {rank} does not know the run's "
                    "secret, so this run did not start it; the run stopped before sharing "
                    "anything with it"
                )

    def agree(self, seconds: float, stop: bool) -> tuple[float, bool]:
        """Worker 0's ``seconds`` (its training time), and whether any worker's ``stop`` is
        true, on every worker."""
        mine = th.tensor([seconds, float(stop)], dtype=th.float64)
        every = [th.empty_like(mine) for _ in range(self.size)]
        with self._collective("agreeing on the rollout"):
            dist.all_gather(every, mine)
        return float(every[0][0]), any(bool(v[1]) for v in every)

    def every(self, value: bool) -> bool:
        """Whether ``value`` is true on every worker."""
        mine = th.tensor([float(bool(value))])
        every = [th.empty_like(mine) for _ in range(self.size)]
        with self._collective("agreeing"):
            dist.all_gather(every, mine)
        return all(bool(v[0]) for v in every)

    def broadcast_parameters(self, module: nn.Module) -> None:
        """Give every worker worker 0's parameters of ``module``."""
        with self._collective("sharing the weights"), th.no_grad():
            for parameter in module.parameters():
                dist.broadcast(parameter.data, src=0)

    def average_gradients(
        self, parameters: Iterable[nn.Parameter], shared_memory: bool = True
    ) -> bool:
        """Average the gradients of ``parameters`` over the workers at the end of every
        backward pass, before anything reads them (the gradient clipping, the optimizer step).

        A hook on each parameter counts the gradients accumulated; the last one gathers every
        worker's gradients as one flat tensor and replaces each with the sum in rank order
        divided by the number of workers: the same bits on every worker. The gradients go
        through shared memory when every worker can map it
        (:class:`~training.shared_memory.SharedGradients`; ``shared_memory`` False: never),
        otherwise through gloo's ``all_gather`` (on this machine a third of the time of an
        ``all_reduce`` of the same tensor). Every parameter must get a gradient in every
        backward pass (the policy's do). Every worker calls this at the same point of the run.
        Returns whether the gradients go through shared memory."""
        parameters = [p for p in parameters if p.requires_grad]
        sizes = [p.numel() for p in parameters]
        dtypes = {p.dtype for p in parameters}
        on_cpu = all(p.device.type == "cpu" for p in parameters) and len(dtypes) == 1
        exchange = (
            SharedGradients.open(self, sum(sizes), *dtypes, timeout=COLLECTIVE_TIMEOUT)
            if shared_memory and on_cpu
            else None
        )
        if exchange is not None:
            self._exchanges.append(exchange)
        received: list[th.Tensor] = []
        count = 0

        def hook(_: nn.Parameter) -> None:
            nonlocal count
            count += 1
            if count < len(parameters):
                return
            count = 0
            mine = th.cat([p.grad.reshape(-1) for p in parameters])  # type: ignore[union-attr]
            if exchange is not None:
                every = exchange.exchange(mine)
            else:
                if not received:
                    received.extend(th.empty_like(mine) for _ in range(self.size))
                with self._collective("averaging the gradients"):
                    dist.all_gather(received, mine)
                every = received
            total = every[0].clone()
            for other in every[1:]:
                total += other
            total /= self.size
            if exchange is not None:
                exchange.done()  # the others may write their next gradients now
            for parameter, part in zip(parameters, total.split(sizes), strict=True):
                parameter.grad.copy_(part.view_as(parameter.grad))  # type: ignore[union-attr]

        for parameter in parameters:
            parameter.register_post_accumulate_grad_hook(hook)
        return exchange is not None

    # --- the end

    def lost(self, error: BaseException, joining: timedelta | None = None) -> WorkerLost:
        """A :class:`WorkerLost` for ``error``, a failed collective (or, ``joining``, the
        rendezvous of that timeout): which worker is gone and how, when this process started
        it; otherwise what the collective said."""
        deadline = time.monotonic() + 2.0  # a dead child's sockets close before it is reaped
        while time.monotonic() < deadline:
            dead = [child for child in self.children if child.poll() not in (None, 0)]
            if dead or not self.children:
                break
            time.sleep(0.05)
        for rank, child in enumerate(self.children, start=1):
            code = child.poll()
            if code is not None and code != 0:
                how = (
                    f"was killed by {signal.Signals(-code).name}"
                    if code < 0 and -code in signal.valid_signals()
                    else f"exited with status {code}"
                )
                return WorkerLost(f"worker {rank} (process {child.pid}) {how}")
        text = " ".join(str(error).split())
        if joining is not None:
            return WorkerLost(
                f"the workers did not all join within {joining.total_seconds():g} s "
                f"(--rendezvous-timeout; {text[:120]})"
            )
        if "timed out" in text.lower() or "timeout" in text.lower():
            minutes = COLLECTIVE_TIMEOUT.total_seconds() / 60
            return WorkerLost(f"a worker did not answer for {minutes:g} minutes ({text[:120]})")
        return WorkerLost(f"another worker is gone ({text[:160]})")

    def close(self) -> None:
        """Leave the process group; worker 0 waits for the children it started (a minute at
        most, then ends them)."""
        for exchange in self._exchanges:
            exchange.close()
        self._exchanges.clear()
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
        deadline = time.monotonic() + 60
        for child in self.children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


@contextlib.contextmanager
def _lost_on_failure(group: WorkerGroup, what: str) -> Any:
    """Turn a failed collective into :class:`WorkerLost`."""
    try:
        yield
    except WorkerLost:
        raise
    except (RuntimeError, OSError) as error:
        raise group.lost(error) from None
