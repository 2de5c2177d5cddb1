"""Time limits for onnxruntime: a policy's run that overruns its limit is stopped.

onnxruntime can stop a run from another thread: a run's ``RunOptions.terminate`` is read
before every node it computes, inside a ``Loop``'s or ``Scan``'s body too, and the run then
raises. :func:`run` gives each run a limit, and one watchdog thread per process (started with
the first run) sets ``terminate`` on every run past its limit. Runs started inside
:func:`within` a :class:`Group` are stopped together by :func:`stop` (the web app's workers,
as the server shuts down, so that no worker thread is left inside onnxruntime when the
interpreter ends: a thread that comes back from onnxruntime after that aborts the process).

What a single node computes is not interrupted: that is bounded by the shapes a policy file
may have (:func:`buttonup_env.players.onnx_graph.check_sizes`), so a run stops at most one
node's time after its limit.

The cost of a run's watch is a lock taken twice; the watchdog is woken only when it waits for
nothing or the new limit is nearer than the one it waits for, so back-to-back runs (training's
opponents) do not wake it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any


class TimeLimit(RuntimeError):
    """A run was stopped because it overran its limit (the message says how long that was)."""


class Stopped(RuntimeError):
    """A run was stopped, or refused, because its :class:`Group` was stopped."""


class Group:
    """Runs that are stopped together (:func:`within`, :func:`stop`)."""

    def __init__(self) -> None:
        self.stopped = False


class _Run:
    __slots__ = ("deadline", "group", "options", "stopped")

    def __init__(self, options: Any, deadline: float, group: Group | None) -> None:
        self.options = options
        self.deadline = deadline
        self.group = group
        self.stopped = ""
        """Why the run was stopped ("limit", "stop"), or empty."""


class _Watchdog:
    """The runs under way and the thread that stops those past their limit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._ended = threading.Condition(self._lock)
        self._runs: dict[int, _Run] = {}
        self._thread: threading.Thread | None = None
        self._wakes_at = float("inf")
        """When the thread wakes next (inf: when told)."""
        self._local = threading.local()

    def _options(self) -> Any:
        """This thread's ``RunOptions`` (one per thread, reused run after run)."""
        options = getattr(self._local, "options", None)
        if options is None:
            import onnxruntime as ort

            options = self._local.options = ort.RunOptions()
            options.log_severity_level = 4  # onnxruntime's own lines would repeat the sentence
        return options

    def run(self, session: Any, outputs: list[str], feeds: dict[str, Any], seconds: float) -> Any:
        options = self._options()
        group = getattr(self._local, "group", None)
        entry = _Run(options, time.monotonic() + seconds, group)
        with self._lock:
            if group is not None and group.stopped:
                raise Stopped("its computations were stopped")
            options.terminate = False
            self._runs[id(entry)] = entry
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="buttonup-onnx-watchdog", daemon=True
                )
                self._thread.start()
            elif entry.deadline < self._wakes_at:
                self._changed.notify()
        try:
            return session.run(outputs, feeds, options)
        except Exception:
            if entry.stopped == "limit":
                raise TimeLimit(f"it ran longer than {seconds:g} s and was stopped") from None
            if entry.stopped == "stop":
                raise Stopped("its computations were stopped") from None
            raise
        finally:
            with self._lock:
                del self._runs[id(entry)]
                if entry.group is not None:
                    self._ended.notify_all()

    def _watch(self) -> None:
        with self._lock:
            while True:
                now = time.monotonic()
                pending = []
                for entry in self._runs.values():
                    if entry.stopped:
                        continue
                    if entry.deadline <= now:
                        entry.stopped = "limit"
                        entry.options.terminate = True
                    else:
                        pending.append(entry.deadline)
                self._wakes_at = min(pending, default=float("inf"))
                self._changed.wait(None if not pending else self._wakes_at - now)

    def stop(self, group: Group) -> None:
        with self._lock:
            group.stopped = True
            for entry in self._runs.values():
                if entry.group is group and not entry.stopped:
                    entry.stopped = "stop"
                    entry.options.terminate = True

    @contextlib.contextmanager
    def within(self, group: Group) -> Iterator[None]:
        previous = getattr(self._local, "group", None)
        self._local.group = group
        try:
            yield
        finally:
            self._local.group = previous

    def running(self, group: Group | None = None) -> int:
        with self._lock:
            return sum(group is None or e.group is group for e in self._runs.values())

    def wait(self, group: Group, seconds: float) -> bool:
        end = time.monotonic() + seconds
        with self._lock:
            while any(e.group is group for e in self._runs.values()):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._ended.wait(left)
        return True


_WATCHDOG = _Watchdog()
if hasattr(os, "register_at_fork"):  # a forked child has the parent's lock, not its thread
    os.register_at_fork(after_in_child=_WATCHDOG.__init__)


def run(session: Any, outputs: list[str], feeds: dict[str, Any], seconds: float) -> Any:
    """``session.run(outputs, feeds)`` stopped after ``seconds`` (:class:`TimeLimit`), or when
    the :class:`Group` it runs :func:`within` is stopped (:class:`Stopped`, also for a run
    that would start after that); any other error of onnxruntime as it is."""
    return _WATCHDOG.run(session, outputs, feeds, seconds)


def current() -> Group | None:
    """The :class:`Group` this thread's runs belong to now (None outside :func:`within`): a
    computation that hands runs to other threads enters it there too."""
    return getattr(_WATCHDOG._local, "group", None)


def within(group: Group | None) -> contextlib.AbstractContextManager[None]:
    """The runs that this thread starts in this ``with`` block belong to ``group``."""
    return _WATCHDOG.within(group)


def stop(group: Group) -> None:
    """Stop the runs of ``group`` under way now, and refuse its later ones (:class:`Stopped`)."""
    _WATCHDOG.stop(group)


def running(group: Group | None = None) -> int:
    """How many runs are under way in this process (of ``group`` only, when given)."""
    return _WATCHDOG.running(group)


def wait(group: Group, seconds: float) -> bool:
    """Wait at most ``seconds`` until no run of ``group`` is under way (every thread that ran
    one is back from onnxruntime); False when some still are."""
    return _WATCHDOG.wait(group, seconds)
