"""Observations: how a position becomes numbers, shared by the env, the bots and the policies.

Three encodings, all from one player's point of view (``own`` buttons, the ``opponent``'s,
white spies — never raw red/black, so one policy serves both seats):

``slots`` (the observation of ``ButtonUp-v0``, 246 floats in ``[0, 1]``)
    For slot ``s`` (0-8), height ``h`` (0 = bottom, up to 8) and channel ``c`` (0 own, 1 the
    opponent's, 2 white), feature ``27*s + 3*h + c`` is 1 when that button is there. Then
    ``243``: own score / target, ``244``: the opponent's score / target (both capped at 1), and
    ``245``: 1 / target. The action is the slot to lift.

The two others are for policies that look at one *view* per legal move. Sowing skips empty
slots, so only the *ring* of non-empty stacks in clockwise order matters, and at most three
stacks (those holding a white button) can be lifted, so there are three views; view ``a``
belongs to the ``a``-th legal slot in increasing order, the action ``a`` lifts that slot
(:meth:`RingEncoding.slot`), and a view with no legal move behind it is all zeros. A ring is
written as ``9 x 27`` planes laid out like the ``slots`` encoding with ring places in place of
slots (places past the last stack are zeros). A network that scores every view with the same
weights sees the game's rotation symmetry for free. The match score is not part of these:
policies on them play every round for the largest margin.

``ring`` (729 floats in ``{0, 1}``)
    View ``a``: the ring read clockwise starting at the stack to lift. Feature
    ``243*a + 27*i + 3*h + c``.

``afterstates`` (735 floats in ``{0, 1}``; what the shipped policies see)
    View ``a``: the position *after* the move — the ring read clockwise from the first stack
    that received a button (the rules engine computes it; no solver is involved), then two
    flags: the move earns another turn, and the move ends the round. Feature
    ``245*a + 27*i + 3*h + c`` for the ring, ``245*a + 243`` and ``245*a + 244`` for the flags.

Two encodings see the match as well, for players of the match, whose best move depends on the
score and on who started the round (it decides who starts the next one after equal scores):

``match-slots`` (247 floats; the observation of ``ButtonUp-v1``)
    The ``slots`` encoding, then feature 246: 1 when the player started the round under way.

``match-afterstates`` (864 floats in ``{0, 1}``)
    Each view of ``afterstates`` (245 features), then the match after the move (43 features):
    the points the player still needs to reach the target, one-hot over 0 (the match is won)
    to 20 (20 or more), the same for the opponent, and 1 when the player starts the round that
    the position after the move belongs to. A move that ends the round adds the round's points
    to the score, and its round is the next one (whose starter the starting rule gives). View
    ``a`` is features ``288*a`` to ``288*a + 287``: ``288*a + 245 + k`` is the player's ``k``
    points to go, ``288*a + 266 + k`` the opponent's, ``288*a + 287`` the start. Every feature
    is 0 or 1, at most 14 of them 1 in a view, as the first layer of the shipped policies'
    network reads them fastest (:mod:`buttonup_env.learn.active`).

Each encoding says what it sees of the match (``sees_score``, ``sees_starter``): a player that
sees neither plays a round alike at every score.
"""

from __future__ import annotations

import struct
from typing import ClassVar

import numpy as np

from .rules import (
    CLOCKWISE_AFTER,
    NUM_SLOTS,
    Color,
    State,
    is_whole_number,
    next_starter,
    other,
    round_points,
    sow,
    strength,
)

HEIGHTS = 9
CHANNELS = 3
STACK_FEATURES = HEIGHTS * CHANNELS  # 27
BOARD_FEATURES = NUM_SLOTS * STACK_FEATURES  # 243

_PLANES: dict[Color, dict[str, np.ndarray]] = {"R": {}, "B": {}}
_PLANE_BYTES: dict[Color, dict[str, bytes]] = {"R": {}, "B": {}}
_SCORES = struct.Struct("=3f")  # native float32, like the plane bytes


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
        _PLANE_BYTES[own][stack] = planes.tobytes()
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
    actions: ClassVar[int] = NUM_SLOTS
    sees_score: ClassVar[bool] = True
    sees_starter: ClassVar[bool] = False

    def mask(self, state: State) -> np.ndarray:
        """Boolean mask over the nine slots: True where the slot may be lifted."""
        return legal_mask(state)

    def slot(self, state: State, action: int) -> int:
        """The slot that ``action`` lifts: the action is the slot."""
        return int(action)

    def encode(self, state: State, own: Color) -> np.ndarray:
        """The observation of ``state`` for player ``own``."""
        # Joining cached bytes is several times faster than filling an array slot by slot.
        cache = _PLANE_BYTES[own]
        board = state.board
        try:
            planes = b"".join(map(cache.__getitem__, board))
        except KeyError:
            planes = b"".join([_plane_bytes(stack, own) for stack in board])
        key = (state.score_pair, state.target, own)
        scores = _SCORE_BYTES.get(key)
        if scores is None:
            scores = _SCORE_BYTES[key] = _score_bytes(*key)
        return np.frombuffer(bytearray(planes + scores), np.float32)


def _score_bytes(score: tuple[int, int], target: int, own: Color) -> bytes:
    """Features 243-245 of the ``slots`` encoding as float32 bytes."""
    own_score, other_score = score if own == "R" else score[::-1]
    return _SCORES.pack(min(own_score / target, 1.0), min(other_score / target, 1.0), 1.0 / target)


_SCORE_BYTES: dict[tuple[tuple[int, int], int, Color], bytes] = {}


MAX_LEGAL = 3
"""At most three stacks hold a white button, so a position has at most three legal moves."""

_ZERO_PLACE = bytes(STACK_FEATURES * 4)
_ZERO_VIEW = bytes(BOARD_FEATURES * 4)


class RingEncoding:
    """The ``ring`` encoding (see the module docstring): what the shipped policies observe."""

    name: ClassVar[str] = "ring"
    view_size: ClassVar[int] = BOARD_FEATURES
    size: ClassVar[int] = MAX_LEGAL * view_size  # 729
    actions: ClassVar[int] = MAX_LEGAL
    sees_score: ClassVar[bool] = False
    sees_starter: ClassVar[bool] = False

    def encode(self, state: State, own: Color | None = None) -> np.ndarray:
        """The three views of ``state`` for ``own`` (default: the player to move)."""
        own = state.to_move if own is None else own
        cache = _PLANE_BYTES[own]
        ring = [
            cache[stack] if stack in cache else _plane_bytes(stack, own)
            for stack in state.board
            if stack
        ]
        n = len(ring)
        padding = _ZERO_PLACE * (NUM_SLOTS - n)
        starts = [i for i, stack in enumerate(s for s in state.board if s) if "W" in stack]
        if n == 1:
            starts = []  # the round is over: nothing can be lifted
        views = [b"".join(ring[p:] + ring[:p]) + padding for p in starts]
        views.extend([_ZERO_VIEW] * (MAX_LEGAL - len(views)))
        return np.frombuffer(bytearray(b"".join(views)), np.float32)

    def mask(self, state: State) -> np.ndarray:
        """Boolean mask over the three actions: True for each legal move."""
        mask = np.zeros(MAX_LEGAL, dtype=bool)
        mask[: len(state.legal_moves())] = True
        return mask

    def slot(self, state: State, action: int) -> int:
        """The slot that action ``action`` lifts. Raises ``ValueError`` if there is no such move."""
        legal = state.legal_moves()
        if not is_whole_number(action) or action not in range(len(legal)):
            raise ValueError(
                f"action {action!r} is not legal on {state.notation!r}: the actions are the "
                f"legal slots {list(legal)} in order, so 0 to {len(legal) - 1}"
            )
        return legal[int(action)]

    def action(self, state: State, slot: int) -> int:
        """The action that lifts ``slot`` (which must be legal)."""
        legal = state.legal_moves()
        if slot not in legal:
            raise ValueError(f"slot {slot!r} is not legal on {state.notation!r}; legal: {legal}")
        return legal.index(slot)


_FLAGS = struct.Struct("<2f")


class AfterstateEncoding(RingEncoding):
    """The ``afterstates`` encoding (see the module docstring): the position after each move."""

    name: ClassVar[str] = "afterstates"
    view_size: ClassVar[int] = BOARD_FEATURES + 2
    size: ClassVar[int] = MAX_LEGAL * view_size  # 735

    def encode(self, state: State, own: Color | None = None) -> np.ndarray:
        """One view per legal move: the ring after it, from ``own``'s side, and two flags."""
        own = state.to_move if own is None else own
        cache = _PLANE_BYTES[own]
        views = []
        for slot in state.legal_moves():
            board, extra_turn = sow(state.board, slot)
            stacks = [board[s] for s in CLOCKWISE_AFTER[slot] if board[s]]
            over = len(stacks) == 1
            ring = [cache[s] if s in cache else _plane_bytes(s, own) for s in stacks]
            views.append(
                b"".join(ring)
                + _ZERO_PLACE * (NUM_SLOTS - len(ring))
                + _FLAGS.pack(float(extra_turn and not over), float(over))
            )
        views.extend([_ZERO_AFTER_VIEW] * (MAX_LEGAL - len(views)))
        return np.frombuffer(bytearray(b"".join(views)), np.float32)


_ZERO_AFTER_VIEW = bytes(AfterstateEncoding.view_size * 4)


TO_GO = 21
"""The one-hot of a player's points to go in a ``match-afterstates`` view: 0 (won) to 20 (20 or
more)."""


def _match(score: tuple[int, int], target: int, starter: Color, own: Color) -> np.ndarray:
    """The 43 match features of a ``match-afterstates`` view (see the module docstring)."""
    mine, theirs = score if own == "R" else score[::-1]
    out = np.zeros(2 * TO_GO + 1, dtype=np.float32)
    out[min(max(target - mine, 0), TO_GO - 1)] = 1.0
    out[TO_GO + min(max(target - theirs, 0), TO_GO - 1)] = 1.0
    out[-1] = float(starter == own)
    return out


class MatchSlotEncoding(SlotEncoding):
    """The ``match-slots`` encoding (see the module docstring): ``ButtonUp-v1``'s observation,
    the ``slots`` encoding and whether the player started the round under way."""

    name: ClassVar[str] = "match-slots"
    size: ClassVar[int] = BOARD_FEATURES + 4
    sees_starter: ClassVar[bool] = True

    def encode(self, state: State, own: Color) -> np.ndarray:
        """The observation of ``state`` for player ``own``."""
        out = np.empty(self.size, dtype=np.float32)
        out[:-1] = super().encode(state, own)
        out[-1] = float(state.starter == own)
        return out


class MatchAfterstateEncoding(AfterstateEncoding):
    """The ``match-afterstates`` encoding (see the module docstring): the ``afterstates`` views,
    each with the match after its move."""

    name: ClassVar[str] = "match-afterstates"
    view_size: ClassVar[int] = AfterstateEncoding.view_size + 2 * TO_GO + 1
    size: ClassVar[int] = MAX_LEGAL * view_size  # 864
    sees_score: ClassVar[bool] = True
    sees_starter: ClassVar[bool] = True

    def encode(self, state: State, own: Color | None = None) -> np.ndarray:
        """One view per legal move: the ``afterstates`` view and the match after the move."""
        own = state.to_move if own is None else own
        base = super().encode(state, own).reshape(MAX_LEGAL, AfterstateEncoding.view_size)
        out = np.zeros((MAX_LEGAL, self.view_size), dtype=np.float32)
        out[:, : AfterstateEncoding.view_size] = base
        for a, slot in enumerate(state.legal_moves()):
            board, _ = sow(state.board, slot)
            score, starter = state.score_pair, state.starter
            if sum(1 for stack in board if stack) == 1:  # the move ends the round
                points = round_points(strength("".join(board)))
                score = (score[0] + points["R"], score[1] + points["B"])
                starter = next_starter({"R": score[0], "B": score[1]}, starter)
            out[a, AfterstateEncoding.view_size :] = _match(score, state.target, starter, own)
        return out.reshape(-1)


Encoding = SlotEncoding | RingEncoding
"""An observation encoding: a :class:`SlotEncoding` or a :class:`RingEncoding` (which
:class:`AfterstateEncoding` is)."""

ENCODINGS: dict[str, Encoding] = {
    SlotEncoding.name: SlotEncoding(),
    RingEncoding.name: RingEncoding(),
    AfterstateEncoding.name: AfterstateEncoding(),
    MatchSlotEncoding.name: MatchSlotEncoding(),
    MatchAfterstateEncoding.name: MatchAfterstateEncoding(),
}
"""The encodings by name (the name is stored in every exported policy)."""
