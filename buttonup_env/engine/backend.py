"""Choosing a backend: what both of them offer, and :func:`make_backend`."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from .batch import Batch, Generators, Outcome, Ply, Rules, Status
from .numpy_backend import NumpyBackend
from .tables import GameTables

BACKENDS = ("numba", "numpy")
"""The backends by name: :class:`~buttonup_env.engine.numba_backend.NumbaBackend` (compiled
kernels) and :class:`~buttonup_env.engine.numpy_backend.NumpyBackend` (the reference)."""


class Backend(Protocol):
    """What both backends offer a batch's step (documented in
    :class:`~buttonup_env.engine.numpy_backend.NumpyBackend`)."""

    name: str
    tables: GameTables
    rules: Rules
    ply: Ply
    generators: Generators | None

    def start_episodes(
        self, batch: Batch, envs: np.ndarray, agent_color: int, first: int
    ) -> None: ...

    def random_starts(self, batch: Batch, envs: np.ndarray) -> None: ...

    def agent_moves(
        self, batch: Batch, actions: np.ndarray, by_slot: bool, raise_illegal: bool, out: Outcome
    ) -> tuple[int, int]: ...

    def play_moves(self, batch: Batch, count: int, out: Outcome) -> int: ...

    def bot_plies(
        self, batch: Batch, count: int, kinds: np.ndarray, out: Outcome
    ) -> tuple[Status, int]: ...

    def observe(
        self,
        batch: Batch,
        encoding: str,
        envs: np.ndarray,
        own: np.ndarray,
        out: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]: ...

    def masks(self, encoding: str, boards: np.ndarray) -> np.ndarray: ...


def make_backend(name: str, tables: GameTables, rules: Rules, num_envs: int) -> Backend:
    """The backend ``name`` (one of :data:`BACKENDS`) for a batch of ``num_envs`` games under
    ``rules``. Raises ``ValueError`` in a sentence for another name."""
    if not (isinstance(name, str) and name in BACKENDS):
        raise ValueError(
            f"backend={name!r} is not allowed; use one of {', '.join(map(repr, BACKENDS))}"
        )
    if name == "numpy":
        return NumpyBackend(tables, rules, num_envs)
    from .numba_backend import NumbaBackend  # imports numba (compiles nothing)

    return NumbaBackend(tables, rules, num_envs)
