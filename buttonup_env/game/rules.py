"""The rules of Button Up! (``docs/rules.md``), with no dependency beyond the standard library.

A :class:`State` is an immutable position: the nine slots, whose turn it is, the match score,
the target and who started the current round. Every rule lives in exactly one function here:

* :func:`sow` — lifting a stack, sowing it clockwise, overflow and the extra turn
  (:func:`sow_counting_stacks` also says how many stacks are left);
* :func:`white_slots` — which stacks may be lifted;
* :func:`strength` — the scoring of a final stack;
* :func:`round_points` — who scores what for a round;
* :func:`next_starter` — who starts the next round of a match;
* :func:`random_layout` — the random set-up of a round.

The fixed facts of the game sit beside them: :data:`NUM_SLOTS`, :data:`MOVES_PER_ROUND`,
:data:`MAX_ROUND_MARGIN`, :data:`LAYOUTS` and the targets a match may have.

Nothing here knows about Gymnasium, numpy arrays, torch or Stable-Baselines3.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

Color = Literal["R", "B"]
COLORS: tuple[Color, Color] = ("R", "B")
BUTTONS = "RBW"
NUM_SLOTS = 9
"""Slots on the circle, numbered 0 to 8 clockwise."""
MOVES_PER_ROUND = 8
"""Moves in every round: each move leaves one stack fewer, from nine to one."""
DEFAULT_TARGET = 15
MAX_TARGET = 1000
"""The largest target a match may have. A round scores at most 18 points (and often none), so
a match to 1,000 is already hundreds of rounds; larger targets only make episodes that never
end in practice (and numbers that overflow the batched env's arrays)."""
MAX_ROUND_MARGIN = 18
"""The largest round margin (one player's strength minus the other's in the final stack): own
buttons at heights 7, 8 and 9 (24), the opponent's at 1, 2 and 3 (6)."""

Board = tuple[str, ...]


def other(color: Color) -> Color:
    """The opponent of ``color``."""
    return "B" if color == "R" else "R"


_OTHER: dict[str, Color] = {"R": "B", "B": "R"}


def is_whole_number(value: object) -> bool:
    """True for ``int`` and numpy integers, False for bools, floats and everything else."""
    return type(value) is int or (
        isinstance(value, numbers.Integral) and not isinstance(value, bool)
    )


def _check_color(value: object, what: str) -> Color:
    if value not in COLORS:
        raise ValueError(f"{what} must be 'R' or 'B', got {value!r}")
    return value  # type: ignore[return-value]


def _all_layouts() -> tuple[Board, ...]:
    """Every way to place three buttons of each colour on the nine slots: Red's three slots,
    then Black's among the six left (84 x 20), not all 9! orders of the buttons."""
    layouts = []
    for red in itertools.combinations(range(NUM_SLOTS), 3):
        rest = [slot for slot in range(NUM_SLOTS) if slot not in red]
        for black in itertools.combinations(rest, 3):
            layout = ["W"] * NUM_SLOTS
            for slot in red:
                layout[slot] = "R"
            for slot in black:
                layout[slot] = "B"
            layouts.append(tuple(layout))
    return tuple(sorted(layouts))


LAYOUTS: tuple[Board, ...] = _all_layouts()
"""The 1,680 possible set-ups of a round (nine single buttons, three of each colour), sorted."""


class RandomSource(Protocol):
    """What :func:`random_layout` needs of a generator (``numpy.random.Generator`` has it)."""

    def integers(self, low: int, high: int) -> int: ...


def random_layout(rng: RandomSource) -> Board:
    """Draw a round's set-up uniformly among the 1,680 colourings, using ``rng``."""
    return LAYOUTS[int(rng.integers(0, len(LAYOUTS)))]


def parse_board(text: str) -> Board:
    """Read a board in the notation of ``docs/rules.md`` (``"B . . BW BW R W R R"``).

    Raises ``ValueError`` naming the text when it is not nine slots of ``R``/``B``/``W`` or ``.``
    holding three buttons of each colour.
    """
    if not isinstance(text, str):
        raise ValueError(f"a board must be a string such as 'B . . BW BW R W R R', got {text!r}")
    parts = text.split()
    if len(parts) != NUM_SLOTS:
        raise ValueError(
            f"board {text!r} has {len(parts)} slots; a board is {NUM_SLOTS} slots separated by "
            "spaces, each a stack of R/B/W from bottom to top or '.' when empty"
        )
    return _check_board(tuple("" if p == "." else p for p in parts), text)


def _check_board(board: tuple[object, ...], text: str | None = None) -> Board:
    """``board`` if it is nine stacks of R/B/W holding three buttons of each colour."""
    shown = repr(text) if text is not None else repr(board)
    if len(board) != NUM_SLOTS:
        raise ValueError(f"board {shown} has {len(board)} slots; a board has {NUM_SLOTS}")
    for slot, stack in enumerate(board):
        if not isinstance(stack, str) or stack.strip(BUTTONS):
            raise ValueError(
                f"board {shown}: slot {slot} is {stack!r}; a slot is a stack of the letters "
                "R, B, W (bottom to top), empty when the slot is"
            )
    counts = {c: sum(s.count(c) for s in board) for c in BUTTONS}  # type: ignore[union-attr]
    if any(n != 3 for n in counts.values()):
        raise ValueError(
            f"board {shown} holds {counts['R']} R, {counts['B']} B and {counts['W']} W; "
            "a board holds exactly three buttons of each colour"
        )
    return board  # type: ignore[return-value]


def format_board(board: Sequence[str]) -> str:
    """Write a board in the notation of ``docs/rules.md``."""
    return " ".join(stack or "." for stack in board)


_SLOTS = range(NUM_SLOTS)
CLOCKWISE_AFTER: tuple[tuple[int, ...], ...] = tuple(
    tuple((slot + step) % NUM_SLOTS for step in range(1, NUM_SLOTS)) for slot in range(NUM_SLOTS)
)
"""For each slot, the other slots in clockwise order starting just after it."""


def sow(board: Board, slot: int) -> tuple[Board, bool]:
    """Lift the stack on ``slot`` and sow it; return the new board and whether it earns a turn.

    The caller guarantees that the move is legal (see :meth:`State.legal_moves`). The returned
    flag is the sowing rule alone: it is true when ``k <= m`` and the last button sown has the
    colour of the button it landed on. :meth:`State.play` voids it when the round ends.
    """
    new, extra_turn, _ = sow_counting_stacks(board, slot)
    return new, extra_turn


def sow_counting_stacks(board: Board, slot: int) -> tuple[Board, bool, int]:
    """:func:`sow`, plus how many stacks are left after the move (the lifted slot empties and
    no slot fills, so one fewer than before): 1 when the move ends the round."""
    stack = board[slot]
    targets = [s for s in CLOCKWISE_AFTER[slot] if board[s]]
    k, m = len(stack), len(targets)
    new = list(board)
    new[slot] = ""
    if k == 1:  # the most common move, spelled out: it is on every step's hot path
        target = targets[0]
        new[target] += stack
        return tuple(new), board[target][-1] == stack, m
    # zip stops at the shorter sequence on purpose (strict=False, left out: it cost ~17% here)
    if k <= m:
        for button, target in zip(stack, targets):  # noqa: B905
            new[target] += button
        return tuple(new), board[targets[k - 1]][-1] == stack[-1], m
    for button, target in zip(stack[: m - 1], targets):  # noqa: B905
        new[target] += button
    new[targets[m - 1]] += stack[m - 1 :]
    return tuple(new), False, m


def white_slots(board: Board) -> tuple[int, ...]:
    """The slots whose stack holds a white button, in increasing order: the legal moves, unless
    the round is over (one stack left)."""
    return tuple([slot for slot in _SLOTS if "W" in board[slot]])


def strength(stack: str) -> dict[Color, int]:
    """Each player's strength in a final stack: the sum of their buttons' heights (bottom = 1)."""
    red = black = 0
    for height, button in enumerate(stack, start=1):
        if button == "R":
            red += height
        elif button == "B":
            black += height
    return {"R": red, "B": black}


def round_points(strengths: Mapping[Color, int]) -> dict[Color, int]:
    """Points scored in a round: the stronger player scores the difference, the other 0."""
    diff = strengths["R"] - strengths["B"]
    return {"R": max(diff, 0), "B": max(-diff, 0)}


def next_starter(score: Mapping[Color, int], previous_starter: Color) -> Color:
    """Who starts the next round: fewer points; on equal points, who did not start the last one."""
    if score["R"] != score["B"]:
        return "R" if score["R"] < score["B"] else "B"
    return other(previous_starter)


def _layout(layout: Sequence[str] | str) -> Board:
    """A round's set-up as a board; ``ValueError`` unless nine single buttons, three per colour."""
    board = parse_board(layout) if isinstance(layout, str) else tuple(layout)
    if board not in _LAYOUT_SET:
        raise ValueError(
            f"layout {format_board(board)!r} is not a set-up: a round starts with nine "
            "single buttons, three of each colour"
        )
    return board


def _valid_target(target: object) -> bool:
    return is_whole_number(target) and 1 <= target <= MAX_TARGET  # type: ignore[operator]


def check_target(target: object) -> int:
    """``target`` as an int; ``ValueError`` unless it is a whole number of points from 1 to
    :data:`MAX_TARGET`."""
    if not _valid_target(target):
        shown = repr(target) if len(repr(target)) <= 40 else repr(target)[:37] + "..."
        raise ValueError(
            f"target={shown} is not allowed; use a whole number of points from 1 to {MAX_TARGET}"
        )
    return int(target)  # type: ignore[call-overload]


class State:
    """An immutable position of a match: the round in progress and the match around it.

    Attributes:
        board: the nine slots, each the stack from bottom to top as a string ('' when empty).
        to_move: ``"R"`` or ``"B"``, the player to move (for a finished round: who would move).
        target: the points that win the match.
        starter: the player who started the current round.

    ``score`` is the match score; once the round is over it includes the round's points.
    """

    __slots__ = ("_hash", "_legal", "_score", "board", "starter", "target", "to_move")

    board: Board
    to_move: Color
    target: int
    starter: Color
    _score: tuple[int, int]

    def __init__(
        self,
        board: Sequence[str],
        to_move: Color,
        score: Mapping[Color, int] | None = None,
        target: int = DEFAULT_TARGET,
        starter: Color | None = None,
    ) -> None:
        board = _check_board(tuple(board))
        _check_color(to_move, "to_move")
        if starter is None:
            starter = to_move
        _check_color(starter, "starter")
        target = check_target(target)
        score = {"R": 0, "B": 0} if score is None else score
        if not isinstance(score, Mapping) or set(score) != {"R", "B"}:
            raise ValueError(f'score must be a mapping {{"R": int, "B": int}}, got {score!r}')
        for color in COLORS:
            value = score[color]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"score[{color!r}] must be a whole number >= 0, got {value!r}")
        setattr_ = object.__setattr__
        setattr_(self, "board", board)
        setattr_(self, "to_move", to_move)
        setattr_(self, "target", target)
        setattr_(self, "starter", starter)
        setattr_(self, "_score", (score["R"], score["B"]))
        setattr_(self, "_hash", None)
        setattr_(self, "_legal", None)

    @classmethod
    def from_notation(
        cls,
        board: str,
        to_move: Color,
        score: Mapping[Color, int] | None = None,
        target: int = DEFAULT_TARGET,
        starter: Color | None = None,
    ) -> State:
        """A position from a board in the notation of ``docs/rules.md`` (``"B . . BW BW R W R R"``).

        ``score`` is ``{"R": int, "B": int}`` (default 0-0). ``starter`` (who started this round,
        used by the starting rule of the next round) defaults to ``to_move``.
        """
        return cls(parse_board(board), to_move, score, target, starter)

    @classmethod
    def new_round(
        cls,
        layout: Sequence[str] | str,
        first: Color,
        score: Mapping[Color, int] | None = None,
        target: int = DEFAULT_TARGET,
    ) -> State:
        """The start of a round: nine single buttons (three per colour), ``first`` to move."""
        board = _layout(layout)
        if score is None and first in COLORS and _valid_target(target):
            return _make(board, first, (0, 0), target, first)  # the common, fast case
        return cls(board, first, score, target, first)

    # ----------------------------------------------------------------------------------------
    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"State is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"State is immutable; cannot delete {name!r}")

    def _key(self) -> tuple[object, ...]:
        return (self.board, self.to_move, self._score, self.target, self.starter)

    def __eq__(self, other_: object) -> bool:
        if not isinstance(other_, State):
            return NotImplemented
        return self._key() == other_._key()

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(self._key()))
        return self._hash  # type: ignore[return-value]

    def __repr__(self) -> str:
        return (
            f"State.from_notation({self.notation!r}, {self.to_move!r}, score={self.score!r}, "
            f"target={self.target!r}, starter={self.starter!r})"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (State, (self.board, self.to_move, self.score, self.target, self.starter))

    # ----------------------------------------------------------------------------------------
    @property
    def notation(self) -> str:
        """The board in the notation of ``docs/rules.md``."""
        return format_board(self.board)

    @property
    def score(self) -> dict[Color, int]:
        """The match score ``{"R": int, "B": int}``; after a round ends it includes its points."""
        return {"R": self._score[0], "B": self._score[1]}

    @property
    def score_pair(self) -> tuple[int, int]:
        """The match score as ``(Red's points, Black's points)``: :attr:`score` as a tuple,
        without making a dict (for the encodings' hot path)."""
        return self._score

    @property
    def stacks(self) -> int:
        """How many slots hold a stack."""
        return NUM_SLOTS - self.board.count("")

    @property
    def moves_played(self) -> int:
        """Moves played so far in this round (each move empties one slot)."""
        return NUM_SLOTS - self.stacks

    @property
    def round_over(self) -> bool:
        """True when one stack remains: the round has had its eight moves."""
        return self.board.count("") == NUM_SLOTS - 1

    @property
    def match_over(self) -> bool:
        """True when the round is over and a player has reached the target."""
        return self.round_over and max(self._score) >= self.target

    @property
    def winner(self) -> Color | None:
        """The match winner once the match is over, else ``None``."""
        if not self.match_over:
            return None
        return "R" if self._score[0] >= self.target else "B"

    def _final_stack(self) -> str:
        if not self.round_over:
            raise ValueError(
                f"the round is not over ({self.stacks} stacks remain on {self.notation!r}); "
                "strength and points exist only once one stack remains"
            )
        return "".join(self.board)  # every other slot is empty

    @property
    def strength(self) -> dict[Color, int]:
        """Each player's strength in the final stack; ``ValueError`` before the round ends."""
        return strength(self._final_stack())

    @property
    def round_points(self) -> dict[Color, int]:
        """The points scored in this round. Raises ``ValueError`` before the round ends."""
        return round_points(self.strength)

    def legal_moves(self) -> tuple[int, ...]:
        """The slots that may be lifted, in increasing order (none once the round is over)."""
        legal = self._legal
        if legal is None:
            board = self.board
            if board.count("") == NUM_SLOTS - 1:
                legal = ()
            else:
                legal = white_slots(board)
            object.__setattr__(self, "_legal", legal)
        return legal

    def play(self, slot: int) -> State:
        """The position after ``to_move`` lifts ``slot``, with the extra turn applied.

        When the move ends the round (one stack left) the round's points are added to the score.
        Raises ``ValueError`` for a finished round or an illegal slot.
        """
        if slot not in self.legal_moves() or not is_whole_number(slot):
            raise ValueError(self.why_illegal(slot))
        return self.child(int(slot))

    def child(self, slot: int) -> State:
        """The position after ``to_move`` lifts ``slot``, which the caller has checked is one
        of :meth:`legal_moves` (an ``int``): :meth:`play` without its checks, for the
        environments' hot paths. Anything else gives a wrong position or an error that says
        nothing useful; :meth:`play` and :meth:`why_illegal` say what is wrong instead."""
        board, extra_turn, stacks = sow_counting_stacks(self.board, slot)
        mover = self.to_move
        if stacks == 1:  # the round is over
            points = round_points(strength("".join(board)))  # the one stack left
            score = (self._score[0] + points["R"], self._score[1] + points["B"])
            return _make(board, _OTHER[mover], score, self.target, self.starter, ())
        # handing the legal moves over now saves legal_moves() a second look at the board
        to_move = mover if extra_turn else _OTHER[mover]
        return _make(board, to_move, self._score, self.target, self.starter, white_slots(board))

    def why_illegal(self, slot: object) -> str:
        """Why ``slot`` cannot be lifted here, in one sentence: the slot and the legal ones, or
        that the round is over (for a slot that is not among :meth:`legal_moves`)."""
        legal = self.legal_moves()
        if not legal:  # only a finished round has no legal move
            return (
                f"the round is over (final stack {self._final_stack()!r}); no move can be played"
                + ("; the match is over" if self.match_over else "; start the next round")
            )
        allowed = ", ".join(map(str, legal))
        if not is_whole_number(slot) or not 0 <= slot < NUM_SLOTS:  # type: ignore[operator]
            return (
                f"slot {slot!r} does not exist; slots are 0 to 8 and the legal ones are {allowed}"
            )
        if not self.board[slot]:
            return f"slot {slot} is empty; the legal slots are {allowed}"
        return (
            f"slot {slot} ({self.board[slot]}) holds no white button; the legal slots are {allowed}"
        )

    def next_round(self, layout: Sequence[str] | str) -> State:
        """The first position of the next round of the match, set up with ``layout``.

        The starter follows the starting rule: fewer points, or on equal points whoever did not
        start this round. Raises ``ValueError`` if this round is not over or the match is already
        won.
        """
        if not self.round_over:
            raise ValueError(
                f"the round is not over ({self.stacks} stacks remain); finish it before the next"
            )
        if self.match_over:
            raise ValueError(
                f"the match is over: {self.winner} won {self._score[0]}-{self._score[1]} "
                f"(target {self.target}); there is no next round"
            )
        first = next_starter(self.score, self.starter)
        board = _layout(layout)
        return _make(board, first, self._score, self.target, first)


_LAYOUT_SET = frozenset(LAYOUTS)

# Slot setters, faster than object.__setattr__ on the hot path of State.play
_SET_BOARD, _SET_TO_MOVE, _SET_TARGET, _SET_STARTER, _SET_SCORE, _SET_HASH, _SET_LEGAL = (
    State.__dict__[name].__set__
    for name in ("board", "to_move", "target", "starter", "_score", "_hash", "_legal")
)


def _make(
    board: Board,
    to_move: Color,
    score: tuple[int, int],
    target: int,
    starter: Color,
    legal: tuple[int, ...] | None = None,
) -> State:
    """A state from values already known to be valid: the fast path of :meth:`State.play`.

    ``legal``, when given, must be the board's legal moves (None: computed when first asked).
    """
    state = _new(State)
    _SET_BOARD(state, board)
    _SET_TO_MOVE(state, to_move)
    _SET_TARGET(state, target)
    _SET_STARTER(state, starter)
    _SET_SCORE(state, score)
    _SET_HASH(state, None)
    _SET_LEGAL(state, legal)
    return state


_new = object.__new__
