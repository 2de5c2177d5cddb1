"""Where the web app's players think: threads beside the event loop, with a time limit.

A bot's or a policy's move (onnxruntime's inference, the solver's search), a hint and a
replay are computed in a worker thread, never on the event loop: while one is computed, the
server goes on answering every other request, and it still handles Ctrl-C and SIGTERM.

* **Time limit.** A request waits at most :data:`MOVE_SECONDS` for each computation, then gets
  a sentence saying that it took too long (:class:`TooSlow`).
* **At most** :data:`MAX_WORKERS` **at once.** A computation that has not ended keeps its
  thread until it does; when every thread is taken, a request is refused at once
  (:class:`Busy`) instead of waiting in a queue behind the slow ones.
* **Daemon threads.** A computation that never ends cannot keep the server from exiting; when
  the server stops, :meth:`Workers.stop` answers every request still waiting (:class:`Stopping`),
  so it ends at once instead of being cancelled.

* **Policies are stopped, not only left.** A policy's run in onnxruntime has a time limit of
  its own (:mod:`buttonup_env.players.deadline`): one that overruns it is stopped and its
  thread is free again, so policies that run long cannot take every thread for good. When the
  server stops, :meth:`Workers.stop` stops every policy's run under way at once, and
  :meth:`Workers.settle` waits until every thread is back from onnxruntime: a thread that comes
  back while the interpreter ends aborts the process.

A policy file that passes the loader's checks cannot make a run endless (see
:mod:`buttonup_env.players.onnx_graph`); the limits are for what the checks might miss, a
player given in Python and a machine under load.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ...players import deadline

T = TypeVar("T")

MOVE_SECONDS = 10.0
"""How long a request waits for one move, hint or replay (an exported policy takes about a
millisecond; a cold solver a fraction of a second)."""

MAX_WORKERS = 8
"""How many computations may run at once."""


class TooSlow(RuntimeError):
    """A computation did not end within its time limit; the message says what took long."""


class Busy(RuntimeError):
    """Every worker thread is taken by a computation that has not ended."""


class Stopping(RuntimeError):
    """The server is stopping: the computation's result is no longer awaited."""


def _settle(future: asyncio.Future[T], value: T | None, error: BaseException | None) -> None:
    if future.done():  # the request stopped waiting (time limit, disconnect)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)  # type: ignore[arg-type]


class Workers:
    """Runs computations in daemon threads, at most ``limit`` at once, each awaited for at
    most ``seconds`` (see the module docstring)."""

    def __init__(self, limit: int = MAX_WORKERS, seconds: float = MOVE_SECONDS) -> None:
        if limit < 1 or not seconds > 0:
            raise ValueError(f"limit={limit!r}, seconds={seconds!r}: need at least 1 and > 0")
        self.limit = limit
        self.seconds = seconds
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: set[asyncio.Future[Any]] = set()
        self._stopped = False
        self._runs = deadline.Group()
        """The policies' runs in onnxruntime started by these workers' threads."""

    @property
    def running(self) -> int:
        """How many computations run now (those past their time limit included)."""
        return self._running

    async def run(self, compute: Callable[[], T], what: str) -> T:
        """``compute()``'s result, computed in a worker thread.

        ``what`` names the computation in the sentences of :class:`TooSlow` (``the policy
        x.onnx choosing a move``) and :class:`Busy`. An exception of ``compute`` is raised here.
        """
        if self._stopped:
            raise Stopping("the server is stopping")
        with self._lock:
            if self._running >= self.limit:
                raise Busy(
                    f"the server is busy: {self._running} computations are still running, "
                    f"which is as many as it runs at once; try again in a moment"
                )
            self._running += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def work() -> None:
            value: T | None = None
            error: BaseException | None = None
            try:
                with deadline.within(self._runs):
                    value = compute()
            except BaseException as raised:  # handed to the request, which raises it
                error = raised
            finally:
                with self._lock:
                    self._running -= 1
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(_settle, future, value, error)

        threading.Thread(target=work, name="buttonup-web-worker", daemon=True).start()
        self._waiting.add(future)
        try:
            return await asyncio.wait_for(future, self.seconds)
        except (asyncio.TimeoutError, deadline.TimeLimit):  # the request's limit or the run's
            raise TooSlow(f"{what} took longer than {self.seconds:g} s") from None
        finally:
            self._waiting.discard(future)

    def stop(self) -> None:
        """Answer every request still waiting with :class:`Stopping`, and any later one too,
        and stop the policies' runs under way (called on the event loop, as the server
        begins to stop)."""
        self._stopped = True
        deadline.stop(self._runs)
        for future in list(self._waiting):
            if not future.done():
                future.set_exception(Stopping("the server is stopping"))

    def settle(self, seconds: float = 1.0) -> bool:
        """Stop the policies' runs under way (as :meth:`stop` does) and wait at most
        ``seconds`` until no thread of these workers is inside onnxruntime (a stopped run ends
        at its next node); False when one still is. Safe once the event loop has closed."""
        deadline.stop(self._runs)
        return deadline.wait(self._runs, seconds)
