"""The numba kernels of the batched engine: the compiled passes of
:class:`~buttonup_env.engine.numba_backend.NumbaBackend`.

Each kernel plays one operation of the engine on a whole
:class:`~buttonup_env.engine.batch.Batch` (the games' arrays, taken whole as a named tuple),
the same operation as the numpy backend's method of that name
(:class:`~buttonup_env.engine.numpy_backend.NumpyBackend`, the readable reference): the same
moves, the same draws from the same generators in the same order, the same observations. The
tests compare the two after every step.

A kernel is a few flat passes over the batch, or over the games of the current ply (one game
after another inside a pass, so that the look-ups of different games overlap in the CPU,
prefetching a few games ahead), reading one 64-byte record per board (:func:`board_records`)
that holds everything a move needs. The passes that draw random numbers (the bots' tie-breaks,
new layouts, colours, starters, random starts) go through the games in their order, so that
every draw is the numpy backend's; the observations and masks are passes of their own.

The generators are numpy's: a kernel draws through the bit generator's own functions
(``Generator.bit_generator.ctypes``, the C interface numpy documents), so a draw here
advances the same generator state as a draw in Python, and ``get_state`` / ``set_state``
save and restore both. Bounded integers use numpy's own method (Lemire's, on 32-bit draws),
so that ``integers(n)`` here equals ``Generator.integers(n, size=k)`` drawn in one call.

Nothing compiles on import: numba compiles each kernel when it is first called (a few
seconds in all) and caches the machine code (``cache=True``): next to this file when that
folder is writable, otherwise in numba's user-wide cache folder (``~/.cache/numba``, or
``$NUMBA_CACHE_DIR`` when set), from where later processes load it in a fraction of a second.
Numba checks a cached kernel against this file alone, so the kernels call nothing outside it
but numba itself (the reward arithmetic of :func:`~buttonup_env.engine.batch.round_reward` is
spelled out here); the constants they read from other modules are the game's fixed facts.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.extending import intrinsic

from ..game.encoding import BOARD_FEATURES, MAX_LEGAL, STACK_FEATURES, TO_GO
from ..game.rules import LAYOUTS, MAX_ROUND_MARGIN, NUM_SLOTS
from .batch import BLACK, MAX_PLIES, POLICY, POLICY_MOVE, RED, Status
from .tables import GameTables

NUM_LAYOUTS = len(LAYOUTS)

# --- compiling -------------------------------------------------------------------------------


def compile_kernel(function: Callable[..., Any]) -> Any:
    """``function`` as a numba dispatcher that compiles on first call and caches its code.

    Without any writable cache folder (a read-only package and home) numba refuses
    ``cache=True``; the kernels then compile in every process instead.
    """
    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(function)


# --- the generators ----------------------------------------------------------------------------
# A generator is passed to the kernels as three addresses (a row of ``generator_addresses``):
# its bit generator's state, and its next_uint32 and next_double functions.
STATE, NEXT_UINT32, NEXT_DOUBLE = 0, 1, 2
MAIN, RANDOM_BOT, GREEDY_BOT, MARGIN_BOT = 0, 1, 2, 3
"""Rows of the address array: the batch's own generator, then each bot's."""


def generator_addresses(generators: list[np.random.Generator]) -> np.ndarray:
    """(len(generators), 3) uint64: the state and draw functions of each bit generator.

    The addresses stay valid while the generators live (the env holds them); setting a bit
    generator's ``state`` writes into the same memory.
    """
    rows = []
    for generator in generators:
        c = generator.bit_generator.ctypes
        rows.append(
            [
                c.state_address,
                ctypes.cast(c.next_uint32, ctypes.c_void_p).value,
                ctypes.cast(c.next_double, ctypes.c_void_p).value,
            ]
        )
    return np.array(rows, dtype=np.uint64)


def _call_bit_generator(result: ir.Type) -> Callable[..., Any]:
    """An intrinsic calling a bit generator function (``address``) on its ``state``."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        pointer = ir.IntType(8).as_pointer()
        function = builder.inttoptr(args[0], ir.FunctionType(result, [pointer]).as_pointer())
        return builder.call(function, [builder.inttoptr(args[1], pointer)])

    return codegen


@intrinsic
def _next_uint32(typingctx: Any, address: Any, state: Any) -> Any:
    return types.uint32(types.uint64, types.uint64), _call_bit_generator(ir.IntType(32))


@intrinsic
def _next_double(typingctx: Any, address: Any, state: Any) -> Any:
    return types.float64(types.uint64, types.uint64), _call_bit_generator(ir.DoubleType())


@numba.njit(inline="always")
def _random(g: np.ndarray, row: int) -> float:
    """``Generator.random()`` of generator ``row``."""
    return _next_double(g[row, NEXT_DOUBLE], g[row, STATE])


@numba.njit(inline="always")
def _below(g: np.ndarray, row: int, n: int) -> int:
    """``Generator.integers(n)`` of generator ``row`` (numpy's method for int64 results below
    2**32: Lemire's multiply-and-shift on 32-bit draws, rejecting the biased ones)."""
    limit = np.uint32(n - 1)
    if limit == 0:
        return 0
    span = np.uint64(limit) + np.uint64(1)
    m = np.uint64(_next_uint32(g[row, NEXT_UINT32], g[row, STATE])) * span
    leftover = m & np.uint64(0xFFFFFFFF)
    if leftover < span:
        threshold = np.uint64((np.uint32(0xFFFFFFFF) - limit) % np.uint32(span))
        while leftover < threshold:
            m = np.uint64(_next_uint32(g[row, NEXT_UINT32], g[row, STATE])) * span
            leftover = m & np.uint64(0xFFFFFFFF)
    return np.int64(m >> np.uint64(32))


@intrinsic
def _prefetch_row(typingctx: Any, table: Any, row: Any) -> Any:
    """Ask the CPU to start loading row ``row`` of a C-ordered 2-D ``table`` into its caches
    (``llvm.prefetch``). Passes over the batch prefetch a few envs ahead: a board's row is a
    random place in a large table, and waiting for each in turn would cost its full latency."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array = context.make_array(signature.args[0])(context, builder, args[0])
        columns = cgutils.unpack_tuple(builder, array.shape, 2)[1]
        row = context.cast(builder, args[1], signature.args[1], types.intp)
        pointer = builder.gep(array.data, [builder.mul(row, columns)])
        byte = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32])
        )
        # a read, kept in all cache levels, of data
        builder.call(function, [builder.bitcast(pointer, byte), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(table, row), codegen


AHEAD = 16
"""How many envs ahead a pass prefetches its look-ups."""


def _sample(g, row, doubles, bounds, integers):
    """``doubles[i]``: ``random()`` of generator ``row``, one at a time; then ``integers[j, i]``:
    ``integers(bounds[j])``. For the tests that hold these draws to numpy's."""
    for i in range(len(doubles)):
        doubles[i] = _random(g, row)
    for j in range(len(bounds)):
        for i in range(integers.shape[1]):
            integers[j, i] = _below(g, row, bounds[j])


sample = compile_kernel(_sample)


# --- the board records -------------------------------------------------------------------------
# One row of 16 int32 (64 bytes, one cache line) per board, all that a move reads:
NEXT = 0  # columns 0-8: the board after lifting slot s (-1 where s is not legal)
FLAGS = 9  # bit s: lifting s earns another turn; bit 9 + s: s is legal; bit 18 + s: lifting s
# ends the round; bits 27-28: the number of legal slots; bit 29: the round is over
LEGAL_BIT, ENDS_BIT, COUNT_SHIFT, OVER_BIT = 9, 18, 27, 29
RANDOM = 10  # the random bot's candidates: the legal slots, in increasing order
GREEDY = 11  # 11 + mover: the greedy bot's candidates (mover 0 Red, 1 Black)
MARGIN_MOVES = 13  # 13 + mover: the round solver's best moves (the margin player's)
MARGIN = 15  # Red's strength minus Black's in the final stack (0 before the round's end)
# A candidates word holds up to three slots, 4 bits each, and their number in bits 12-13.


def _candidates(slots: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Candidate words from (..., 3) slots (-1 padded) and their (...) numbers."""
    words = counts.astype(np.int32) << 12
    for k in range(MAX_LEGAL):
        words |= np.where(slots[..., k] >= 0, slots[..., k], 0).astype(np.int32) << (4 * k)
    return words


def _aligned(rows: int, columns: int, dtype: type) -> np.ndarray:
    """A (rows, columns) array of zeros whose first row starts on a 64-byte boundary."""
    size = np.dtype(dtype).itemsize
    memory = np.zeros(rows * columns + 64 // size, dtype=dtype)
    start = (-memory.ctypes.data % 64) // size
    return memory[start : start + rows * columns].reshape(rows, columns)


@functools.lru_cache(maxsize=2)
def board_records(tables: GameTables) -> np.ndarray:
    """(boards, 16) int32: each board's record (the layout above), one cache line each."""
    n = len(tables.boards)
    records = _aligned(n, 16, np.int32)
    records[:, NEXT : NEXT + NUM_SLOTS] = tables.next_board
    child = np.where(tables.legal, tables.next_board, 0)
    flags = np.zeros(n, dtype=np.int64)
    for slot in range(NUM_SLOTS):
        flags |= tables.extra_turn[:, slot].astype(np.int64) << slot
        flags |= tables.legal[:, slot].astype(np.int64) << (LEGAL_BIT + slot)
        ends = tables.legal[:, slot] & tables.over[child[:, slot]]
        flags |= ends.astype(np.int64) << (ENDS_BIT + slot)
    flags |= tables.num_legal.astype(np.int64) << COUNT_SHIFT
    flags |= tables.over.astype(np.int64) << OVER_BIT
    records[:, FLAGS] = flags
    records[:, RANDOM] = _candidates(tables.legal_slots, tables.num_legal)
    records[:, GREEDY : GREEDY + 2] = _candidates(*tables.greedy_choices)
    records[:, MARGIN_MOVES : MARGIN_MOVES + 2] = _candidates(*tables.margin_choices)
    records[:, MARGIN] = tables.final_margin
    return records


# Observation records, int16, one row per board: the stacks an observation shows, then
AFTER_FLAGS = 27  # views only: bit 2a, view a's move earns another turn; bit 2a + 1, it ends
# the round
# and in the last column the mask: bit s, slot s is legal; bits 9-10, the number of legal slots.
PLACES = {"slots": NUM_SLOTS, "ring": MAX_LEGAL * NUM_SLOTS, "afterstates": MAX_LEGAL * NUM_SLOTS}
"""How many stacks an observation shows: the nine slots, or three views of nine places."""


@functools.lru_cache(maxsize=6)
def observation_records(tables: GameTables, encoding: str) -> np.ndarray:
    """(boards, 16) int16 for ``slots`` (32 bytes: the nine slots' stacks), (boards, 32) for
    ``ring`` and ``afterstates`` (64 bytes: the three views' stacks, 0 for none, and the
    afterstate flags); the mask in the last column (the layout above)."""
    n = len(tables.boards)
    records = _aligned(n, 16 if encoding == "slots" else 32, np.int16)
    if encoding == "slots":
        records[:, :NUM_SLOTS] = tables.boards
    else:
        views = tables.afterstate_views if encoding == "afterstates" else tables.ring_views
        records[:, : MAX_LEGAL * NUM_SLOTS] = views.reshape(n, -1)
        if encoding == "afterstates":
            flags = tables.afterstate_flags.reshape(n, -1).astype(np.int16)
            records[:, AFTER_FLAGS] = sum(flags[:, k] << k for k in range(2 * MAX_LEGAL))
    legal = sum(tables.legal[:, s].astype(np.int16) << s for s in range(NUM_SLOTS))
    records[:, -1] = legal | (tables.num_legal.astype(np.int16) << NUM_SLOTS)
    return records


# --- the game ----------------------------------------------------------------------------------
# A ply is a list of games (``ply.envs[:count]``, ascending) and each one's slot
# (``ply.slot[env]``); see buttonup_env.engine.batch.Ply. Each kernel first takes the arrays it
# needs out of the named tuples it gets, once, outside its loops: numba counts references on
# an array each time it is taken out of a tuple or handed to a function (even an inlined one),
# so nothing inside a loop does either.


@numba.njit(inline="always")
def _moves_and_round_ends(batch, ply, count, rules, records, g, out):
    """Play the ply and end the rounds that end (the numpy backend's ``play_moves``: its
    ``move``, then its ``end_rounds``). Returns how many rounds ended, their games in
    ``ply.ended`` (ascending)."""
    envs, slot, ended_envs = ply.envs, ply.slot, ply.ended
    board, to_move, agent, starter = batch.board, batch.to_move, batch.agent, batch.starter
    score, done = batch.score, batch.done
    reward, round_points, has_points = out.reward, out.round_points, out.has_points
    ended = 0
    for k in range(count):  # pass 1: sow (the board's record holds the move's outcome)
        i = envs[k]
        b, s = board[i], slot[i]
        flags = records[b, FLAGS]
        board[i] = records[b, NEXT + s]
        if (flags >> s) & 1 == 0:  # no extra turn: the turn passes
            to_move[i] = 1 - to_move[i]
        if (flags >> (ENDS_BIT + s)) & 1:
            ended_envs[ended] = i
            ended += 1
    for k in range(ended):  # pass 2, in the order of the games: the rounds that ended
        i = ended_envs[k]
        margin = np.int64(records[board[i], MARGIN])  # Red's
        red, black = max(margin, 0), max(-margin, 0)
        score[i, 0] += red
        score[i, 1] += black
        round_points[i, 0] = red
        round_points[i, 1] = black
        has_points[i] = True
        agent_margin = margin if agent[i] == RED else -margin
        # round_reward and match_reward of buttonup_env.engine.batch, spelled out
        if rules.round_reward:
            reward[i] += agent_margin / MAX_ROUND_MARGIN
        if rules.round_episodes:
            if not rules.round_reward:
                reward[i] += np.sign(agent_margin)
            done[i] = True
        elif max(score[i, 0], score[i, 1]) >= rules.target:  # the match is won
            winner = RED if score[i, 0] >= score[i, 1] else BLACK
            reward[i] += 1.0 if winner == agent[i] else -1.0
            done[i] = True
        else:
            # the starting rule: the player behind on points starts; after a tie, the one
            # who did not start the round before
            if score[i, 0] == score[i, 1]:
                starter[i] = 1 - starter[i]
            else:
                starter[i] = RED if score[i, 0] < score[i, 1] else BLACK
            to_move[i] = starter[i]
            board[i] = _below(g, MAIN, NUM_LAYOUTS)  # the next round's layout
    return ended


def _agent_moves(batch, actions, by_slot, raise_illegal, records, ply, out):
    """The agents' actions (the numpy backend's ``agent_moves``): the legal ones become the
    ply; returns (the first game with an illegal action or -1, the ply's count)."""
    board, done, envs, slot = batch.board, batch.done, ply.envs, ply.slot
    illegal, reward = out.illegal, out.reward
    n = len(actions)
    first = -1
    count = 0
    for i in range(n):  # is each action a legal move, and of which slot
        if i + AHEAD < n:
            _prefetch_row(records, board[i + AHEAD])
        flags = records[board[i], FLAGS]
        a = actions[i]
        if by_slot:
            legal = (flags >> (LEGAL_BIT + a)) & 1 == 1
            s = a
        else:  # the a-th legal slot
            legal = a < (flags >> COUNT_SHIFT) & 3
            s = (records[board[i], RANDOM] >> (4 * a)) & 15
        illegal[i] = not legal
        if legal:
            slot[i] = s
            envs[count] = i
            count += 1
        elif first < 0:
            first = i
    if first >= 0 and not raise_illegal:  # the illegal actions end their episodes
        for i in range(n):
            if illegal[i]:
                reward[i] = -1.0
                done[i] = True
    return first, count


def _play_moves(batch, ply, count, rules, records, g, out):
    """Play ``ply.slot`` in the games ``ply.envs[:count]`` and end the rounds that end (the
    numpy backend's ``play_moves``): returns how many ended, their games in ``ply.ended``."""
    return _moves_and_round_ends(batch, ply, count, rules, records, g, out)


def _bot_plies(batch, ply, count, kinds, rules, records, g, out):
    """The opponents' plies while bots alone are to move (the numpy backend's ``bot_plies``):
    returns (a Status, the current ply's count)."""
    envs, slot, draws = ply.envs, ply.slot, ply.draws
    board, to_move, agent = batch.board, batch.to_move, batch.agent
    done, opponent = batch.done, batch.opponent
    for _ in range(MAX_PLIES):
        # pass 1: keep the games whose opponent is to move, and draw each bot's number from
        # its generator
        pending = 0
        policies = 0
        for k in range(count):
            i = envs[k]
            if done[i] or to_move[i] == agent[i]:
                continue
            envs[pending] = i
            pending += 1
            kind = kinds[opponent[i]]
            if kind == POLICY:
                slot[i] = POLICY_MOVE
                policies += 1
            else:
                draws[i] = _random(g, RANDOM_BOT + kind)
        count = pending
        if count == 0:
            return Status.WAITING, 0
        for k in range(count):  # pass 2: each bot's slot, one of its candidates
            if k + AHEAD < count:
                _prefetch_row(records, board[envs[k + AHEAD]])
            i = envs[k]
            kind = kinds[opponent[i]]
            if kind == POLICY:
                continue
            b = board[i]
            if kind == 0:
                word = records[b, RANDOM]
            elif kind == 1:
                word = records[b, GREEDY + to_move[i]]
            else:
                word = records[b, MARGIN_MOVES + to_move[i]]
            choice = np.int64(draws[i] * ((word >> 12) & 3))  # uniformly among them
            slot[i] = (word >> (4 * choice)) & 15
        if policies > 0:
            return Status.POLICIES, count
        _moves_and_round_ends(batch, ply, count, rules, records, g, out)  # passes 3 and 4
    return Status.RUNAWAY, count


def _start_episodes(batch, envs, agent_color, first, ply, g):
    """New episodes in the games ``envs`` (the numpy backend's ``start_episodes``): every
    colour, then every starter, then every layout, drawn in that order."""
    board, to_move, agent, starter = batch.board, batch.to_move, batch.agent, batch.starter
    score, done, ply_envs = batch.score, batch.done, ply.envs
    for i in envs:
        agent[i] = _below(g, MAIN, 2) if agent_color < 0 else agent_color
    for i in envs:
        starter[i] = _below(g, MAIN, 2) if first < 0 else first
    for k in range(len(envs)):
        i = envs[k]
        to_move[i] = starter[i]
        score[i, 0] = 0
        score[i, 1] = 0
        board[i] = _below(g, MAIN, NUM_LAYOUTS)
        done[i] = False
        ply_envs[k] = i


def _random_starts(batch, envs, rules, records, ply, g):
    """``random_start`` in the new rounds of ``envs`` (the numpy backend's
    ``random_starts``): whether each starts so, how many moves each, then the first move of
    each, the second... (``ply.chosen`` and ``ply.moves`` hold the first two)."""
    board, to_move, agent = batch.board, batch.to_move, batch.agent
    chosen, moves = ply.chosen, ply.moves
    probability, most = rules.random_start, rules.random_start_moves
    for i in envs:
        chosen[i] = _random(g, MAIN) < probability
    for i in envs:
        if chosen[i]:
            moves[i] = 1 + _below(g, MAIN, most)
    for k in range(most):
        for i in envs:
            if chosen[i] and moves[i] > k:  # six moves leave three stacks: no round ends
                b = board[i]
                word = records[b, RANDOM]
                s = (word >> (4 * np.int64(_random(g, MAIN) * ((word >> 12) & 3)))) & 15
                board[i] = records[b, NEXT + s]  # sow, as play_moves does
                if (records[b, FLAGS] >> s) & 1 == 0:
                    to_move[i] = 1 - to_move[i]
    for i in envs:
        if chosen[i]:
            agent[i] = to_move[i]


# --- observations and masks --------------------------------------------------------------------


class View(NamedTuple):
    """What the observation kernel reads for one encoding (see :func:`view`)."""

    records: np.ndarray
    """:func:`observation_records` of the encoding (of the one it extends, for a match
    encoding)."""
    planes: np.ndarray
    """The tables' ``flat_planes``: 27 floats per (side, stack)."""
    num_stacks: int
    """Stacks in the tables (the planes seen by Black start here)."""
    places: int
    """Stacks an observation shows (:data:`PLACES`)."""
    flags: bool
    """The afterstates' two flags follow each view."""
    match: int
    """What the encoding sees of the match beyond the score: 0 nothing, ``STARTER`` (1)
    whether the player started the round (``match-slots``), ``AFTER`` (2) the match after each
    view's move (``match-afterstates``)."""
    margins: np.ndarray
    """For ``AFTER``, ``(boards, 3)`` int8: Red's margin where view a's move ends the round (0
    elsewhere); empty otherwise."""


STARTER, AFTER = 1, 2
"""``View.match``: the encodings that see the match (buttonup_env.game.encoding)."""
MATCH_FEATURES = 2 * TO_GO + 1
"""The floats a ``match-afterstates`` view adds to an ``afterstates`` one."""
MATCHES = {"match-slots": ("slots", STARTER), "match-afterstates": ("afterstates", AFTER)}
"""Each match encoding: the encoding it extends, and its ``View.match``."""


@functools.lru_cache(maxsize=6)
def view(tables: GameTables, encoding: str) -> View:
    """The :class:`View` of ``encoding`` (its records built once per process)."""
    extends, match = MATCHES.get(encoding, (encoding, 0))
    margins = np.zeros((0, MAX_LEGAL), dtype=np.int8)
    if match == AFTER:
        slots = tables.legal_slots.astype(np.int64)
        child = tables.next_board[np.arange(len(tables.boards))[:, None], np.maximum(slots, 0)]
        ends = (slots >= 0) & tables.over[np.maximum(child, 0)]
        margins = np.where(ends, tables.final_margin[np.maximum(child, 0)], 0).astype(np.int8)
    return View(
        observation_records(tables, extends),
        tables.flat_planes,
        len(tables.stacks),
        PLACES[extends],
        extends == "afterstates",
        match,
        np.ascontiguousarray(margins),
    )


def _observe(batch, target, view, envs, own, at_envs, out, masks):
    """The observations of the games ``envs`` from the side of ``own`` (one colour per game)
    into ``out`` (row j, or row ``envs[j]`` when ``at_envs``) and their masks into ``masks``
    (row j): the numpy backend's ``observe``. Two passes: the planes to copy (one record per
    board) and the masks, then the copying, 27 floats per stack."""
    board, score = batch.board, batch.score
    records, planes, num_stacks = view.records, view.planes, view.num_stacks
    places, flags = view.places, view.flags
    width = records.shape[1]
    by_slot = places == NUM_SLOTS
    n = len(envs)
    ids = np.empty((n, places + 1), dtype=np.int32)
    for j in range(n):  # pass 1: which planes, and the masks
        if j + AHEAD < n:
            _prefetch_row(records, board[envs[j + AHEAD]])
        b = board[envs[j]]
        side = own[j] * num_stacks
        for p in range(places):
            ids[j, p] = records[b, p] + side
        if flags:
            ids[j, places] = records[b, AFTER_FLAGS]
        mask = records[b, width - 1]
        if by_slot:
            for s in range(NUM_SLOTS):
                masks[j, s] = (mask >> s) & 1
        else:
            count = (mask >> NUM_SLOTS) & 3
            for a in range(MAX_LEGAL):
                masks[j, a] = 1 if a < count else 0
    size = BOARD_FEATURES + 2 if flags else BOARD_FEATURES  # floats per view
    match, margins, starter = view.match, view.margins, batch.starter
    if match == AFTER:
        size += MATCH_FEATURES  # and the match after the view's move
    gap = size - BOARD_FEATURES  # between the views: the afterstate flags (and the match)
    for j in range(n):  # pass 2: the planes, then the scores or the flags (and the match)
        i = envs[j]
        o = i if at_envs else j
        for p in range(places):  # place p % 9 of view p // 9 (for slots: slot p)
            plane = ids[j, p]
            first = STACK_FEATURES * p + gap * (p // NUM_SLOTS)
            for f in range(STACK_FEATURES):
                out[o, first + f] = planes[plane, f]
        if by_slot:  # own score / target, the opponent's (capped at 1, divided in float64
            # as ButtonUp-v0 does), 1 / target; with match-slots, whether own started
            mine = score[i, 0] if own[j] == RED else score[i, 1]
            theirs = score[i, 1] if own[j] == RED else score[i, 0]
            out[o, 243] = min(mine / target, 1.0)
            out[o, 244] = min(theirs / target, 1.0)
            out[o, 245] = 1.0 / target
            if match == STARTER:
                out[o, 246] = 1.0 if starter[i] == own[j] else 0.0
        elif flags:
            bits = ids[j, places]
            for a in range(MAX_LEGAL):
                out[o, size * a + 243] = (bits >> (2 * a)) & 1
                out[o, size * a + 244] = (bits >> (2 * a + 1)) & 1
            if match != AFTER:
                continue
            # the match after each legal view's move (the numpy backend's with_match): the
            # one-hots of own points to go and the opponent's, and whether own starts the
            # round that follows; zeros past the legal moves
            b = board[i]
            count = (records[b, width - 1] >> NUM_SLOTS) & 3
            for a in range(MAX_LEGAL):
                first = size * a + BOARD_FEATURES + 2
                for f in range(MATCH_FEATURES):
                    out[o, first + f] = 0.0
                if a >= count:
                    continue
                margin = np.int64(margins[b, a])
                red, black = score[i, 0] + max(margin, 0), score[i, 1] + max(-margin, 0)
                starts = starter[i]
                if (bits >> (2 * a + 1)) & 1:  # the move ends the round: the starting rule
                    starts = (BLACK if red > black else RED) if red != black else 1 - starts
                mine, theirs = (red, black) if own[j] == RED else (black, red)
                out[o, first + min(max(target - mine, 0), TO_GO - 1)] = 1.0
                out[o, first + TO_GO + min(max(target - theirs, 0), TO_GO - 1)] = 1.0
                out[o, first + 2 * TO_GO] = 1.0 if starts == own[j] else 0.0


def _masks(boards, records, by_slot, out):
    """int8 masks of the legal actions on ``boards``: over the nine slots, or the three
    views."""
    for i in range(len(boards)):
        flags = records[boards[i], FLAGS]
        if by_slot:
            for s in range(NUM_SLOTS):
                out[i, s] = (flags >> (LEGAL_BIT + s)) & 1
        else:
            count = (flags >> COUNT_SHIFT) & 3
            for a in range(MAX_LEGAL):
                out[i, a] = 1 if a < count else 0


agent_moves = compile_kernel(_agent_moves)
play_moves = compile_kernel(_play_moves)
bot_plies = compile_kernel(_bot_plies)
start_episodes = compile_kernel(_start_episodes)
random_starts = compile_kernel(_random_starts)
observe = compile_kernel(_observe)
masks = compile_kernel(_masks)
