"""The engine's fast backend: the numpy backend's operations as compiled numba kernels.

:class:`NumbaBackend` has the methods of :class:`~buttonup_env.engine.numpy_backend.NumpyBackend`
that a batch's step needs, over the same :class:`~buttonup_env.engine.batch.Batch`, and plays
the same games bit for bit. Each method is one call of a kernel of
:mod:`buttonup_env.engine.kernels`, handing it the batch, the ply and the step's outcome whole.

Importing this module imports numba; nothing compiles until a kernel is first called.

After its first call, a kernel is called straight through the machine code numba made for it
(:class:`Compiled`): numba's dispatcher types every argument of every call to choose that code,
which for named tuples of arrays takes longer than the kernels' own work on a small batch
(``benchmarks/README.md``). A backend hands each kernel arguments of the same types at every
call: its own batch, ply, records and generators' addresses, outcomes made by
``Outcome.zeros``, and the arrays its callers give, which it first makes contiguous int64 (or
checks, for an array it writes into).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..game.encoding import ENCODINGS, MAX_LEGAL
from ..game.rules import NUM_SLOTS
from . import kernels
from .batch import Batch, Generators, Outcome, Ply, Rules, Status
from .numpy_backend import MATCH_ENCODINGS
from .tables import GameTables

_STATUSES = tuple(Status)


class Compiled:
    """A kernel that numba's dispatcher runs once (compiling it, or loading it from the cache),
    then called through the machine code of that first call's argument types, which every later
    call must share (see the module docstring)."""

    def __init__(self, dispatcher: Any) -> None:
        self.dispatcher = dispatcher
        self._code: Any = None

    def __call__(self, *args: Any) -> Any:
        if self._code is not None:
            return self._code(*args)
        result = self.dispatcher(*args)
        types = tuple(self.dispatcher.typeof_pyval(arg) for arg in args)
        self._code = self.dispatcher.overloads[types].entry_point
        return result


def _games(envs: np.ndarray) -> np.ndarray:
    """``envs`` as the kernels read game numbers: contiguous int64 (a copy only if needed)."""
    return np.ascontiguousarray(envs, dtype=np.int64)


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
        """What is rebuilt rather than copied: the kernels, the records and the generators'
        addresses."""
        self._agent_moves = Compiled(kernels.agent_moves)
        self._play_moves = Compiled(kernels.play_moves)
        self._bot_plies = Compiled(kernels.bot_plies)
        self._start_episodes = Compiled(kernels.start_episodes)
        self._random_starts = Compiled(kernels.random_starts)
        self._observe = Compiled(kernels.observe)
        self._masks = Compiled(kernels.masks)
        self.records = kernels.board_records(self.tables)
        self._addresses = np.zeros((0, 3), dtype=np.uint64)
        if self._generators is not None:
            self.generators = self._generators

    def __getstate__(self) -> dict[str, Any]:
        """For pickling and deep copies: without the kernels, the records (shared by every
        batch of a process) and the raw addresses of this object's generators (a copy has
        generators of its own)."""
        kept = ("tables", "rules", "ply", "_generators")
        return {name: value for name, value in self.__dict__.items() if name in kept}

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
        self._start_episodes(
            batch, _games(envs), int(agent_color), int(first), self.ply, self._addresses
        )

    def random_starts(self, batch: Batch, envs: np.ndarray) -> None:
        if self.rules.random_start:
            self._random_starts(
                batch, _games(envs), self.rules, self.records, self.ply, self._addresses
            )

    # --- a step ----------------------------------------------------------------------------
    def agent_moves(
        self, batch: Batch, actions: np.ndarray, by_slot: bool, raise_illegal: bool, out: Outcome
    ) -> tuple[int, int]:
        return self._agent_moves(
            batch, _games(actions), bool(by_slot), bool(raise_illegal), self.records, self.ply, out
        )

    def play_moves(self, batch: Batch, count: int, out: Outcome) -> int:
        return self._play_moves(
            batch, self.ply, int(count), self.rules, self.records, self._addresses, out
        )

    def bot_plies(
        self, batch: Batch, count: int, kinds: np.ndarray, out: Outcome
    ) -> tuple[Status, int]:
        status, count = self._bot_plies(
            batch, self.ply, int(count), _games(kinds), self.rules, self.records,
            self._addresses, out,
        )  # fmt: skip
        return _STATUSES[status], count

    # --- observations ----------------------------------------------------------------------
    def observe(
        self,
        batch: Batch,
        encoding: str,
        envs: np.ndarray,
        own: np.ndarray,
        out: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        envs, own = _games(envs), _games(own)
        at_envs = out is not None
        if out is None:
            out = np.empty((len(envs), ENCODINGS[encoding].size), dtype=np.float32)
        elif not (out.dtype == np.float32 and out.ndim == 2 and out.flags.c_contiguous):
            raise ValueError(f"out must be a contiguous 2-D float32 array, not {out.dtype}")
        actions = ENCODINGS[encoding].actions
        masks = np.empty((len(envs), actions), np.int8)
        view = kernels.view(self.tables, encoding)
        self._observe(batch, self.rules.target, view, envs, own, at_envs, out, masks)
        return out, masks

    def masks(self, encoding: str, boards: np.ndarray) -> np.ndarray:
        slots = ENCODINGS[encoding].actions == NUM_SLOTS
        out = np.empty((len(boards), NUM_SLOTS if slots else MAX_LEGAL), np.int8)
        self._masks(_games(boards), self.records, slots, out)
        return out


def observations(
    tables: GameTables,
    encoding: str,
    boards: np.ndarray,
    own: np.ndarray,
    score: np.ndarray,
    target: int,
    starter: np.ndarray | None = None,
) -> np.ndarray:
    """The numpy backend's :func:`~buttonup_env.engine.numpy_backend.observations`, the same
    floats, made by the compiled observation kernel (about three times as fast for the match
    encodings): for players asked about many positions at once (exploitability, the audit)."""
    if not isinstance(encoding, str) or encoding not in ENCODINGS:  # an array has no hash
        raise ValueError(f"encoding={encoding!r} is not one of {sorted(ENCODINGS)}")
    n = len(boards)
    if starter is None:
        if encoding in MATCH_ENCODINGS:
            raise ValueError(f"the {encoding!r} encoding needs who started each round")
        starter = np.zeros(n, dtype=np.int64)
    zeros = np.zeros(n, dtype=np.int64)
    batch = Batch(
        board=_games(boards),
        to_move=zeros,
        agent=zeros,
        starter=_games(starter),
        score=np.ascontiguousarray(score, dtype=np.int64).reshape(n, 2),
        done=np.zeros(n, dtype=bool),
        opponent=zeros,
    )
    out = np.empty((n, ENCODINGS[encoding].size), dtype=np.float32)
    masks = np.empty((n, ENCODINGS[encoding].actions), dtype=np.int8)
    view = kernels.view(tables, encoding)
    kernels.observe(batch, target, view, np.arange(n), _games(own), False, out, masks)
    return out
