"""The whole game as arrays: every reachable board, its moves and their values.

From the 1,680 set-ups, 315,480 different boards can be reached. :func:`game_tables` numbers
them and gives, as numpy arrays indexed by board number (and slot), everything the batched
engine (:mod:`buttonup_env.engine`) needs to play thousands of games with array look-ups: the
board after each move, whether it earns another turn, the legal slots, the final margin, the
greedy bot's and the exact solver's choices, and the planes of the observation encodings.

The tables come from the rules engine (:func:`buttonup_env.game.rules.sow`), walked breadth first
from every set-up, which takes a few seconds; the result is cached on disk (in
``$BUTTONUP_CACHE_DIR``, default ``~/.cache/buttonup-env``) and in memory, so later processes
load it in a fraction of a second. The move values are computed here from the tables by
backward induction and checked against :mod:`buttonup_env.game.solver` in the tests.

Colours are numbers here: 0 is Red, 1 is Black.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

import numpy as np

from ..game.encoding import CHANNELS, MAX_LEGAL, STACK_FEATURES
from ..game.equity import round_graph
from ..game.rules import CLOCKWISE_AFTER, LAYOUTS, NUM_SLOTS, sow_counting_stacks, white_slots
from ..game.solver import canonical, mover_view

RED, BLACK = 0, 1
FORMAT = 2
"""Version of the cached file; bump it whenever what is cached changes."""
_BOARDS_REACHABLE = 315_480


def cache_dir() -> Path:
    """Where the tables are cached: ``$BUTTONUP_CACHE_DIR`` or ``~/.cache/buttonup-env``."""
    env = os.environ.get("BUTTONUP_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "buttonup-env"


def _walk() -> dict[str, np.ndarray]:
    """Number every reachable board, breadth first from the set-ups (the slow part)."""
    index: dict[tuple[str, ...], int] = {}
    boards: list[tuple[str, ...]] = []
    for layout in LAYOUTS:
        index[layout] = len(boards)
        boards.append(layout)
    next_board = []
    extra_turn = []
    i = 0
    while i < len(boards):
        board = boards[i]
        row = [-1] * NUM_SLOTS
        extra = [False] * NUM_SLOTS
        if board.count("") < NUM_SLOTS - 1:
            for slot in white_slots(board):
                child, turn, stacks = sow_counting_stacks(board, slot)
                j = index.get(child)
                if j is None:
                    j = index[child] = len(boards)
                    boards.append(child)
                row[slot] = j
                extra[slot] = turn and stacks > 1  # the round's last move earns nothing
        next_board.append(row)
        extra_turn.append(extra)
        i += 1
    stacks = sorted({stack for board in boards for stack in board}, key=lambda s: (len(s), s))
    stack_id = {stack: k for k, stack in enumerate(stacks)}  # "" is 0
    return {
        "format": np.array(FORMAT),
        "stacks": np.array(stacks),
        "boards": np.array([[stack_id[s] for s in b] for b in boards], dtype=np.int16),
        "next_board": np.array(next_board, dtype=np.int32),
        "extra_turn": np.array(extra_turn, dtype=bool),
        "ring_nodes": _ring_nodes(boards),
    }


def _ring_nodes(boards: list[tuple[str, ...]]) -> np.ndarray:
    """(NB, 2): the node of :func:`buttonup_env.game.equity.round_graph` of each board seen by
    Red (0) and by Black (1) as the mover; -1 once the round is over."""
    graph = round_graph()
    out = np.full((len(boards), 2), -1, dtype=np.int32)
    for colour in (RED, BLACK):
        mover = "R" if colour == RED else "B"
        for i, board in enumerate(boards):
            ring = mover_view(board, mover)
            if len(ring) > 1:
                out[i, colour] = graph.index[canonical(ring)[0]]
    return out


def _load_or_walk() -> dict[str, np.ndarray]:
    path = cache_dir() / f"tables-v{FORMAT}.npz"
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
        if int(arrays["format"]) == FORMAT and len(arrays["boards"]) == _BOARDS_REACHABLE:
            return arrays
    except (OSError, ValueError, KeyError):
        pass  # missing or damaged: walk again
    arrays = _walk()
    try:  # atomically, so that processes starting together never read half a file
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz", delete=False) as tmp:
            np.savez_compressed(tmp, **arrays)
        os.replace(tmp.name, path)
    except OSError:
        pass  # a read-only home: the tables just stay in memory
    return arrays


class GameTables:
    """The game as arrays (see the module docstring). Use :func:`game_tables` to get one.

    Attributes (``NB`` boards, ``S`` distinct stacks; board 0 to 1,679 are the set-ups, in the
    order of :data:`buttonup_env.game.rules.LAYOUTS`):

    * ``stacks`` (S,): each stack as a string, bottom to top; stack 0 is the empty slot.
    * ``boards`` (NB, 9) int16: the stack on each slot.
    * ``next_board`` (NB, 9) int32: the board after lifting each slot (-1 where illegal).
    * ``extra_turn`` (NB, 9) bool: the move earns another turn (never the round's last move).
    * ``legal`` (NB, 9) bool, ``legal_slots`` (NB, 3) int8: the legal slots (increasing,
      -1 after the last one), ``num_legal`` (NB,).
    * ``over`` (NB,) bool: one stack left, the round is over.
    * ``final_margin`` (NB,) int16: Red's strength minus Black's in the final stack (0 before).
    * ``board_margin`` (NB,) int16: the same counting every stack as final (the greedy bot's
      measure).
    * ``move_values`` (NB, 2, 9) int8: the exact round value of each legal move for the mover
      (``[board, colour, slot]``; -128 where illegal), ``margin_moves`` the best ones (the
      margin player's candidates).
    * ``greedy_moves`` (NB, 2, 9) bool: the moves the greedy bot chooses among.
    * ``ring_nodes`` (NB, 2) int32: the position of
      :func:`buttonup_env.game.equity.round_graph` that each board is with Red (0) or Black
      (1) to move (-1 once the round is over): where the match's values are read.
    """

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.stacks: tuple[str, ...] = tuple(str(s) for s in arrays["stacks"])
        self.boards = arrays["boards"]
        self.next_board = arrays["next_board"]
        self.extra_turn = arrays["extra_turn"]
        self.ring_nodes = arrays["ring_nodes"]
        self.legal = self.next_board >= 0
        self.num_legal = self.legal.sum(axis=1).astype(np.int8)
        self.legal_int8 = self.legal.astype(np.int8)
        self.legal_views_int8 = (np.arange(MAX_LEGAL) < self.num_legal[:, None]).astype(np.int8)
        self.legal_slots = _first_columns(self.legal, MAX_LEGAL)
        self.num_stacks = (self.boards != 0).sum(axis=1).astype(np.int8)
        self.over = self.num_stacks == 1
        self.layouts = np.arange(len(LAYOUTS), dtype=np.int32)

        # strength of each stack for Red and Black, then the margins
        red = np.zeros(len(self.stacks), dtype=np.int16)
        black = np.zeros(len(self.stacks), dtype=np.int16)
        for k, stack in enumerate(self.stacks):
            red[k] = sum(h for h, b in enumerate(stack, start=1) if b == "R")
            black[k] = sum(h for h, b in enumerate(stack, start=1) if b == "B")
        self.stack_margin = red - black
        self.board_margin = self.stack_margin[self.boards].sum(axis=1, dtype=np.int16)
        self.final_margin = np.where(self.over, self.board_margin, 0).astype(np.int16)

        self.move_values = self._solve()
        best = self.move_values.max(axis=2, keepdims=True)
        self.margin_moves = self.legal[:, None, :] & (self.move_values == best)
        self.greedy_moves = self._greedy()
        # the same choices as lists, for drawing one with a single look-up (see choices())
        self.random_choices = self.legal_slots, self.num_legal
        self.margin_choices = self._choices(self.margin_moves)
        self.greedy_choices = self._choices(self.greedy_moves)

        # 27 observation features of every stack, seen by Red (0) and by Black (1)
        planes = np.zeros((2, len(self.stacks), STACK_FEATURES), dtype=np.float32)
        for k, stack in enumerate(self.stacks):
            for height, button in enumerate(stack):
                for own in (RED, BLACK):
                    channel = 2 if button == "W" else int((button == "R") == (own == BLACK))
                    planes[own, k, CHANNELS * height + channel] = 1.0
        self.planes = planes
        self.flat_planes = planes.reshape(-1, STACK_FEATURES)  # row own * S + stack
        self.next_flat = self.next_board.ravel()  # index board * 9 + slot
        self.extra_flat = self.extra_turn.ravel()

    # ------------------------------------------------------------------------------------
    def _child_values(self, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Move values (rows, 2, 9) of boards ``rows``, from the values of their children."""
        child = self.next_board[rows]
        legal = child >= 0
        child = np.where(legal, child, 0)
        out = np.full((len(rows), 2, NUM_SLOTS), -128, dtype=np.int16)
        final = self.final_margin[child]
        over = self.over[child]
        extra = self.extra_turn[rows]
        for mover in (RED, BLACK):
            sign = 1 if mover == RED else -1
            again = values[child, mover]  # the mover moves again
            handed = -values[child, 1 - mover]  # the opponent moves
            value = np.where(over, sign * final, np.where(extra, again, handed))
            out[:, mover, :] = np.where(legal, value, -128)
        return out

    def _solve(self) -> np.ndarray:
        """Backward induction over the boards by number of stacks (children have one fewer)."""
        values = np.zeros((len(self.boards), 2), dtype=np.int16)  # best move value for the mover
        moves = np.full((len(self.boards), 2, NUM_SLOTS), -128, dtype=np.int8)
        for stacks in range(2, NUM_SLOTS + 1):
            rows = np.flatnonzero(self.num_stacks == stacks)
            child_values = self._child_values(values, rows)
            moves[rows] = child_values
            values[rows] = child_values.max(axis=2)
        return moves

    def _greedy(self) -> np.ndarray:
        """The greedy bot's candidates: earn a turn if possible, then the best board margin."""
        child = np.where(self.legal, self.next_board, 0)
        extra = self.extra_turn.astype(np.int16) * 1000
        out = np.zeros((len(self.boards), 2, NUM_SLOTS), dtype=bool)
        for mover, sign in ((RED, 1), (BLACK, -1)):
            score = np.where(self.legal, extra + sign * self.board_margin[child], -10_000)
            out[:, mover, :] = self.legal & (score == score.max(axis=1, keepdims=True))
        return out

    @staticmethod
    def _choices(moves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(NB, 2, 3) candidate slots (-1 padded) and (NB, 2) their number, from a mask."""
        return _first_columns(moves, MAX_LEGAL), moves.sum(axis=2).astype(np.int8)

    # ------------------------------------------------------------------------------------
    @functools.cached_property
    def _board_numbers(self) -> tuple[dict[str, int], dict[bytes, int]]:
        """Each stack's number, and each board's by its row of stack numbers as bytes (for
        :meth:`index_of`; built when first used)."""
        rows = np.ascontiguousarray(self.boards)
        keys = rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel().tolist()
        boards = {key: number for number, key in enumerate(keys)}
        return {stack: number for number, stack in enumerate(self.stacks)}, boards

    def index_of(self, board: tuple[str, ...]) -> int:
        """The number of a reachable board; ``ValueError`` for one no game can reach."""
        stacks, boards = self._board_numbers
        try:
            row = np.array([stacks[stack] for stack in board], dtype=self.boards.dtype)
            return boards[row.tobytes()]  # a row of another length is no key either
        except KeyError:
            raise ValueError(
                f"board {' '.join(s or '.' for s in board)!r} cannot be reached from a set-up"
            ) from None

    def board(self, index: int) -> tuple[str, ...]:
        """Board ``index`` as nine stack strings."""
        return tuple(self.stacks[k] for k in self.boards[index])

    @functools.cached_property
    def ring_views(self) -> np.ndarray:
        """(NB, 3, 9) stack ids: for each legal move, the ring read from the lifted stack."""
        return self._views(self.boards, lambda slot: [slot, *CLOCKWISE_AFTER[slot]])

    @functools.cached_property
    def afterstate_views(self) -> np.ndarray:
        """(NB, 3, 9) stack ids: for each legal move, the ring after it, read from the first
        stack after the lifted slot."""
        return self._views(None, lambda slot: list(CLOCKWISE_AFTER[slot]))

    @functools.cached_property
    def afterstate_flags(self) -> np.ndarray:
        """(NB, 3, 2) float32: for each legal move, [earns another turn, ends the round]."""
        slots = self.legal_slots.astype(np.int64)
        live = slots >= 0
        rows = np.arange(len(self.boards))[:, None]
        safe = np.where(live, slots, 0)
        child = self.next_board[rows, safe]
        flags = np.stack(
            [live & self.extra_turn[rows, safe], live & self.over[np.where(live, child, 0)]],
            axis=2,
        )
        return flags.astype(np.float32)

    def _views(self, boards: np.ndarray | None, order: object) -> np.ndarray:
        """Stack ids read in ``order(slot)`` for each legal slot, empty slots squeezed out.

        ``boards`` None reads the board after the move, otherwise the board itself.
        """
        out = np.zeros((len(self.boards), MAX_LEGAL, NUM_SLOTS), dtype=np.int16)
        for a in range(MAX_LEGAL):
            slots = self.legal_slots[:, a].astype(np.int64)
            for slot in range(NUM_SLOTS):
                rows = np.flatnonzero(slots == slot)
                if not len(rows):
                    continue
                source = self.boards[rows] if boards is not None else None
                if source is None:
                    source = self.boards[self.next_board[rows, slot]]
                read = source[:, order(slot)]  # type: ignore[operator]
                # squeeze out the empty slots, keeping the order
                places = _first_columns(read != 0, read.shape[1])
                read = np.where(places >= 0, np.take_along_axis(read, places, axis=1), 0)
                out[rows, a, : read.shape[1]] = read
        return out


def _first_columns(mask: np.ndarray, width: int) -> np.ndarray:
    """The columns (last axis) of each row's first ``width`` True entries, in increasing order,
    then -1: what a stable sort of ``~mask`` gives, by each entry's rank among its row's."""
    rank = np.cumsum(mask, axis=-1, dtype=np.int16) - 1
    keep = mask & (rank < width)
    out = np.full((*mask.shape[:-1], width), -1, dtype=np.int8)
    *rows, columns = np.nonzero(keep)
    out[(*rows, rank[keep])] = columns
    return out


@functools.lru_cache(maxsize=1)
def game_tables() -> GameTables:
    """The game tables of this process (built or loaded from the disk cache when first asked)."""
    return GameTables(_load_or_walk())
