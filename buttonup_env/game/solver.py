"""Exact solver of a round of Button Up!.

The value of a position is the round's final margin (mover's strength minus the opponent's) when
both players then play to maximise their own margin. Two facts make the whole game small:

* sowing skips empty slots, so a position is the *ring* of its non-empty stacks in clockwise
  order; where the ring starts does not matter (rotations are merged);
* seen from the player to move (``M`` own buttons, ``O`` the opponent's, ``W`` white spies) the
  value no longer depends on who is red.

Every position reachable from the 1,680 set-ups is one of 12,804 such canonical rings
(:func:`solve_all` fills the table). The table is shared by every caller in the process.
"""

from __future__ import annotations

from .rules import LAYOUTS, Color, State

Ring = tuple[str, ...]

_TO_MOVER = {"R": str.maketrans("RB", "MO"), "B": str.maketrans("BR", "MO")}
_SWAP = str.maketrans("MO", "OM")

# canonical ring -> (value, values of lifting each ring position; None where not legal)
_TABLE: dict[Ring, tuple[int, tuple[int | None, ...]]] = {}
_MARGIN: dict[str, int] = {}


def canonical(ring: Ring) -> tuple[Ring, int]:
    """The least rotation of ``ring`` and the offset it starts at: a ring's name up to rotation
    (sowing skips empty slots, so rotations of a ring play alike)."""
    best, offset = ring, 0
    for i in range(1, len(ring)):
        rotated = ring[i:] + ring[:i]
        if rotated < best:
            best, offset = rotated, i
    return best, offset


def final_margin(stack: str) -> int:
    """The mover's strength minus the opponent's in a final stack written in M/O/W."""
    value = _MARGIN.get(stack)
    if value is None:
        value = 0
        for height, button in enumerate(stack, start=1):
            if button == "M":
                value += height
            elif button == "O":
                value -= height
        _MARGIN[stack] = value
    return value


def lift(ring: Ring, i: int) -> tuple[Ring, bool]:
    """Sow ring position ``i`` (:func:`buttonup_env.game.rules.sow` on a ring): the ring after
    the move, starting just after the lifted stack, and whether the mover moves again (the
    caller ignores that flag when one stack is left: the round is over)."""
    stack = ring[i]
    others = ring[i + 1 :] + ring[:i]
    k, m = len(stack), len(others)
    if k <= m:
        child = tuple(s + b for s, b in zip(others, stack, strict=False)) + others[k:]
        return child, others[k - 1][-1] == stack[-1]
    child = tuple(s + b for s, b in zip(others[: m - 1], stack, strict=False))
    return (*child, others[m - 1] + stack[m - 1 :]), False


def _child_value(ring: Ring, i: int) -> int:
    """Value, for the mover of ``ring``, of lifting position ``i`` and then perfect play."""
    child, extra_turn = lift(ring, i)
    if len(child) == 1:
        return final_margin(child[0])
    if extra_turn:
        return _solve(canonical(child)[0])
    return -_solve(canonical(swap_sides(child))[0])


def swap_sides(ring: Ring) -> Ring:
    """``ring`` seen from the other player (M and O exchanged): the opponent's view after a
    move that hands over the turn."""
    return tuple(s.translate(_SWAP) for s in ring)


def _solve(ring: Ring) -> int:
    """Value of a canonical ring (memoised; depth at most eight)."""
    entry = _TABLE.get(ring)
    if entry is None:
        values = tuple(_child_value(ring, i) if "W" in s else None for i, s in enumerate(ring))
        entry = (max(v for v in values if v is not None), values)
        _TABLE[ring] = entry
    return entry[0]


def mover_view(board: tuple[str, ...], mover: Color) -> Ring:
    """The non-empty stacks of ``board`` in slot order, written from ``mover``'s side: ``M``
    for the mover's buttons, ``O`` for the opponent's, ``W`` for the white spies."""
    table = _TO_MOVER[mover]
    return tuple(stack.translate(table) for stack in board if stack)


def ring_of(state: State) -> tuple[Ring, tuple[int, ...]]:
    """The ring of ``state`` seen from the mover, and the slot of each ring position."""
    table = _TO_MOVER[state.to_move]
    slots = tuple(slot for slot, stack in enumerate(state.board) if stack)
    return tuple(state.board[s].translate(table) for s in slots), slots


def _entry(state: State) -> tuple[tuple[int | None, ...], int, tuple[int, ...]]:
    if state.round_over:
        raise ValueError(f"the round is over on {state.notation!r}; there is no move to value")
    ring, slots = ring_of(state)
    least, offset = canonical(ring)
    _solve(least)
    return _TABLE[least][1], offset, slots


def move_values(state: State) -> dict[int, int]:
    """``{slot: value}`` for every legal move of ``state`` (see the module docstring)."""
    values, offset, slots = _entry(state)
    n = len(slots)
    return dict(sorted((slots[(j + offset) % n], v) for j, v in enumerate(values) if v is not None))


def value(state: State) -> int:
    """The round margin for the player to move under perfect play (the final margin if over)."""
    if state.round_over:
        stack = next(s for s in state.board if s)
        return final_margin(stack.translate(_TO_MOVER[state.to_move]))
    return max(move_values(state).values())


def margin_for(state: State, color: Color) -> int:
    """``value(state)`` from ``color``'s side."""
    v = value(state)
    return v if color == state.to_move else -v


def solve_all() -> int:
    """Solve every position reachable from the 1,680 set-ups; return the table's size."""
    for layout in LAYOUTS:
        ring = tuple(s.translate(_TO_MOVER["R"]) for s in layout)
        _solve(canonical(ring)[0])
    return len(_TABLE)


def table_size() -> int:
    """How many canonical positions have been solved so far in this process."""
    return len(_TABLE)


def clear_table() -> None:
    """Forget every solved position (for benchmarks of a cold start)."""
    _TABLE.clear()
    _MARGIN.clear()
