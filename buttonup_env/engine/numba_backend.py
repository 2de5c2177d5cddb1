"""The engine's fast backend: the numpy backend's operations as compiled numba kernels.

:class:`NumbaBackend` has the methods of :class:`~buttonup_env.engine.numpy_backend.NumpyBackend`
that a batch's step needs, over the same :class:`~buttonup_env.engine.batch.Batch`, and plays
the same games bit for bit. Each method is one call of a kernel of
:mod:`buttonup_env.engine.kernels`, handing it the batch, the ply and the step's outcome whole.

Importing this module imports numba; nothing compiles until a kernel is first called.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..game.encoding import ENCODINGS, MAX_LEGAL
from ..game.rules import NUM_SLOTS
from . import kernels
from .batch import Batch, Generators, Outcome, Ply, Rules, Status
from .tables import GameTables


class NumbaBackend:
    """A batch of games stepped by compiled kernels (see the module docstring); the methods
    are the numpy backend's, documented there."""

    name = "numba"

    def __init__(self, tables: GameTables, rules: Rules, num_envs: int) -> None:
        self.tables = tables
        self.rules = rules
        self.ply = Ply.zeros(num_envs)
        self._generators: Generators | None = None
        self._setup()

    def _setup(self) -> None:
        """What is rebuilt rather than copied: the records and the generators' addresses."""
        self.records = kernels.board_records(self.tables)
        self._addresses = np.zeros((0, 3), dtype=np.uint64)
        if self._generators is not None:
            self.generators = self._generators

    def __getstate__(self) -> dict[str, Any]:
        """For pickling and deep copies: without the records (shared by every batch of a
        process) and the raw addresses of this object's generators (a copy has generators of
        its own)."""
        state = self.__dict__.copy()
        del state["records"], state["_addresses"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    @property
    def generators(self) -> Generators | None:
        """The batch's generators; setting them gives the kernels their addresses (which stay
        valid while this object holds the generators)."""
        return self._generators

    @generators.setter
    def generators(self, generators: Generators) -> None:
        self._generators = generators
        self._addresses = kernels.generator_addresses([generators.main, *generators.bots])

    # --- episodes --------------------------------------------------------------------------
    def start_episodes(self, batch: Batch, envs: np.ndarray, agent_color: int, first: int) -> None:
        kernels.start_episodes(batch, envs, agent_color, first, self.ply, self._addresses)

    def random_starts(self, batch: Batch, envs: np.ndarray) -> None:
        if self.rules.random_start:
            kernels.random_starts(batch, envs, self.rules, self.records, self.ply, self._addresses)

    # --- a step ----------------------------------------------------------------------------
    def agent_moves(
        self, batch: Batch, actions: np.ndarray, by_slot: bool, raise_illegal: bool, out: Outcome
    ) -> tuple[int, int]:
        return kernels.agent_moves(
            batch, actions, by_slot, raise_illegal, self.records, self.ply, out
        )

    def play_moves(self, batch: Batch, count: int, out: Outcome) -> int:
        return kernels.play_moves(
            batch, self.ply, count, self.rules, self.records, self._addresses, out
        )

    def bot_plies(
        self, batch: Batch, count: int, kinds: np.ndarray, out: Outcome
    ) -> tuple[Status, int]:
        status, count = kernels.bot_plies(
            batch, self.ply, count, kinds, self.rules, self.records, self._addresses, out
        )
        return Status(status), count

    # --- observations ----------------------------------------------------------------------
    def observe(
        self,
        batch: Batch,
        encoding: str,
        envs: np.ndarray,
        own: np.ndarray,
        out: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        at_envs = out is not None
        if out is None:
            out = np.empty((len(envs), ENCODINGS[encoding].size), dtype=np.float32)
        masks = np.empty((len(envs), NUM_SLOTS if encoding == "slots" else MAX_LEGAL), np.int8)
        view = kernels.view(self.tables, encoding)
        kernels.observe(batch, self.rules.target, view, envs, own, at_envs, out, masks)
        return out, masks

    def masks(self, encoding: str, boards: np.ndarray) -> np.ndarray:
        out = np.empty((len(boards), NUM_SLOTS if encoding == "slots" else MAX_LEGAL), np.int8)
        kernels.masks(boards, self.records, encoding == "slots", out)
        return out
