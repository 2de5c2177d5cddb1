"""Observations: how a position becomes numbers, shared by the env, the bots and the policies.

Two encodings, both from one player's point of view (``own`` buttons, the ``opponent``'s, white
spies — never raw red/black, so one policy serves both seats):

``slots`` (the observation of ``ButtonUp-v0``, 246 floats in ``[0, 1]``)
    For slot ``s`` (0-8), height ``h`` (0 = bottom, up to 8) and channel ``c`` (0 own, 1 the
    opponent's, 2 white), feature ``27*s + 3*h + c`` is 1 when that button is there. Then
    ``243``: own score / target, ``244``: the opponent's score / target (both capped at 1), and
    ``245``: 1 / target. The action is the slot to lift.

``ring`` (what the shipped policies see, 2,187 floats in ``{0, 1}``)
    Sowing skips empty slots, so only the *ring* of non-empty stacks in clockwise order matters.
    Ring position ``j`` is the ``j``-th non-empty slot counting from slot 0. The observation is
    nine *views*: view ``p`` is the ring read clockwise starting at ring position ``p``
    (``9 x 27`` planes as above, with ring positions in place of slots; view ``p`` is all zeros
    when ``p`` is past the last stack). Feature ``243*p + 27*i + 3*h + c``. The action is a ring
    position; :meth:`RingEncoding.slot` turns it back into a slot. A network that scores every
    view with the same weights sees the game's rotation symmetry for free. The match score is
    not part of it: policies on this encoding play every round for the largest margin.
"""

from __future__ import annotations

import struct
from typing import ClassVar

import numpy as np

from .rules import NUM_SLOTS, Color, State, other

HEIGHTS = 9
CHANNELS = 3
STACK_FEATURES = HEIGHTS * CHANNELS  # 27
BOARD_FEATURES = NUM_SLOTS * STACK_FEATURES  # 243

_PLANES: dict[Color, dict[str, np.ndarray]] = {"R": {}, "B": {}}
_PLANE_BYTES: dict[Color, dict[str, bytes]] = {"R": {}, "B": {}}
_SCORES = struct.Struct("<3f")


def stack_planes(stack: str, own: Color) -> np.ndarray:
    """The 27 features of one stack seen by ``own`` (read-only, cached)."""
    planes = _PLANES[own].get(stack)
    if planes is None:
        planes = np.zeros(STACK_FEATURES, dtype=np.float32)
        channel = {own: 0, other(own): 1, "W": 2}
        for height, button in enumerate(stack):
            planes[CHANNELS * height + channel[button]] = 1.0  # type: ignore[index]
        planes.flags.writeable = False
        _PLANES[own][stack] = planes
        _PLANE_BYTES[own][stack] = planes.astype("<f4").tobytes()
    return planes


def _plane_bytes(stack: str, own: Color) -> bytes:
    planes = _PLANE_BYTES[own].get(stack)
    if planes is None:
        stack_planes(stack, own)
        planes = _PLANE_BYTES[own][stack]
    return planes


_MASKS: dict[tuple[tuple[int, ...], type], np.ndarray] = {}


def legal_mask(state: State, dtype: type = bool) -> np.ndarray:
    """Mask over the nine slots, 1/True where the slot may be lifted (a fresh array)."""
    key = (state.legal_moves(), dtype)
    mask = _MASKS.get(key)
    if mask is None:
        mask = np.zeros(NUM_SLOTS, dtype=dtype)
        mask[list(key[0])] = 1
        _MASKS[key] = mask
    return mask.copy()


class SlotEncoding:
    """The ``slots`` encoding (see the module docstring): what ``ButtonUp-v0`` observes."""

    name: ClassVar[str] = "slots"
    size: ClassVar[int] = BOARD_FEATURES + 3

    def encode(self, state: State, own: Color) -> np.ndarray:
        """The observation of ``state`` for player ``own``."""
        # Joining cached bytes is several times faster than filling an array slot by slot.
        cache = _PLANE_BYTES[own]
        try:
            board = b"".join([cache[stack] for stack in state.board])
        except KeyError:
            board = b"".join([_plane_bytes(stack, own) for stack in state.board])
        red, black = state._score
        own_score, other_score = (red, black) if own == "R" else (black, red)
        target = state.target
        scores = _SCORES.pack(
            min(own_score / target, 1.0), min(other_score / target, 1.0), 1.0 / target
        )
        return np.frombuffer(bytearray(board + scores), dtype="<f4").astype(np.float32, copy=False)


def _view_index() -> np.ndarray:
    """``index[n, p, i]``: the ring position shown at place ``i`` of view ``p`` for ``n`` stacks.

    ``NUM_SLOTS`` (a row of zeros) where nothing is shown.
    """
    index = np.full((NUM_SLOTS + 1, NUM_SLOTS, NUM_SLOTS), NUM_SLOTS, dtype=np.intp)
    for n in range(1, NUM_SLOTS + 1):
        for p in range(n):
            for i in range(n):
                index[n, p, i] = (p + i) % n
    return index


class RingEncoding:
    """The ``ring`` encoding (see the module docstring): what the shipped policies observe."""

    name: ClassVar[str] = "ring"
    size: ClassVar[int] = NUM_SLOTS * BOARD_FEATURES  # 2187
    _INDEX: ClassVar[np.ndarray] = _view_index()

    def encode(self, state: State, own: Color | None = None) -> np.ndarray:
        """The nine views of ``state`` for ``own`` (default: the player to move)."""
        own = state.to_move if own is None else own
        rows = np.zeros((NUM_SLOTS + 1, STACK_FEATURES), dtype=np.float32)
        n = 0
        for stack in state.board:
            if stack:
                rows[n] = stack_planes(stack, own)
                n += 1
        return rows[self._INDEX[n]].reshape(self.size)

    @staticmethod
    def slots(state: State) -> list[int]:
        """The slot of each ring position."""
        return [slot for slot, stack in enumerate(state.board) if stack]

    def mask(self, state: State) -> np.ndarray:
        """Boolean mask over the nine ring positions: True where lifting is legal."""
        mask = np.zeros(NUM_SLOTS, dtype=bool)
        for position, slot in enumerate(self.slots(state)):
            mask[position] = "W" in state.board[slot] and not state.round_over
        return mask

    def slot(self, state: State, action: int) -> int:
        """The slot of ring position ``action``. Raises ``ValueError`` past the last stack."""
        slots = self.slots(state)
        if not 0 <= action < len(slots):
            raise ValueError(
                f"ring position {action!r} does not exist on {state.notation!r}; "
                f"there are {len(slots)} stacks (positions 0 to {len(slots) - 1})"
            )
        return slots[action]

    def action(self, state: State, slot: int) -> int:
        """The ring position of ``slot`` (which must hold a stack)."""
        slots = self.slots(state)
        if slot not in slots:
            raise ValueError(f"slot {slot!r} is empty or does not exist on {state.notation!r}")
        return slots.index(slot)


ENCODINGS: dict[str, SlotEncoding | RingEncoding] = {
    SlotEncoding.name: SlotEncoding(),
    RingEncoding.name: RingEncoding(),
}
"""The encodings by name (the name is stored in every exported policy)."""
