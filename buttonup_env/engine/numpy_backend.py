"""The engine's readable backend: a batch of games stepped with numpy array operations.

:class:`NumpyBackend` plays the games of a :class:`~buttonup_env.engine.batch.Batch` with
look-ups in :class:`~buttonup_env.engine.tables.GameTables`, a few array operations per move of
every game at once. It is the reference: the tests replay its games with the rules engine, and
hold the compiled backend (:class:`~buttonup_env.engine.numba_backend.NumbaBackend`) to it, bit
for bit. Its building blocks (:meth:`~NumpyBackend.move`, :meth:`~NumpyBackend.score_rounds`,
:meth:`~NumpyBackend.start_rounds`) are also the arena's (:mod:`buttonup_env.players.arena`).

The bots' choices (:func:`bot_moves`), the observations (:func:`observations`) and the masks
(:func:`action_masks`) are functions
of the tables, shared with the players that need them outside a batch.
"""

from __future__ import annotations

import numpy as np

from ..game.encoding import ENCODINGS, MAX_LEGAL, TO_GO
from ..game.equity import TIE_TOLERANCE, round_graph, round_values
from ..game.rules import LAYOUTS, MAX_ROUND_MARGIN, NUM_SLOTS
from .batch import (
    BOT_KINDS,
    MAX_PLIES,
    POLICY,
    POLICY_MOVE,
    RED,
    Batch,
    Generators,
    Outcome,
    Ply,
    Rules,
    Status,
    match_reward,
    round_reward,
)
from .tables import GameTables

NUM_LAYOUTS = len(LAYOUTS)


def pick(slots: np.ndarray, counts: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Entry ``floor(uniforms[i] * counts[i])`` of each row of ``slots``: with uniforms in
    ``[0, 1)``, one of the first ``counts[i]`` entries, uniformly."""
    k = (uniforms * counts).astype(np.int64)
    return slots[np.arange(len(counts)), k].astype(np.int64)


def bot_moves(
    tables: GameTables, kind: int, boards: np.ndarray, mover: np.ndarray, uniforms: np.ndarray
) -> np.ndarray:
    """The slots that bot ``kind`` (:data:`~buttonup_env.engine.batch.BOT_KINDS`) lifts on
    ``boards``, ``mover`` to move: one of its candidate moves (every legal slot for the random
    bot; ties kept for the others), chosen by ``uniforms`` (:func:`pick`)."""
    if BOT_KINDS[kind] == "random":
        return pick(tables.legal_slots[boards], tables.num_legal[boards], uniforms)
    slots, counts = getattr(tables, f"{BOT_KINDS[kind]}_choices")
    return pick(slots[boards, mover], counts[boards, mover], uniforms)


def match_values(
    tables: GameTables,
    boards: np.ndarray,
    mover: np.ndarray,
    score: np.ndarray,
    starter: np.ndarray,
    target: int,
) -> np.ndarray:
    """``(n, 3)``: the mover's probability of winning the match after each legal slot of
    ``boards`` (in increasing order; NaN past the last), under perfect play of the match, at
    each game's ``score`` (Red's, Black's points) and ``starter`` (0 Red, 1 Black): the values
    of :func:`buttonup_env.game.equity.match_move_values`, read from the rounds' values of
    :func:`buttonup_env.game.equity.round_values` through the tables' ``ring_nodes``."""
    n = round_graph().size
    slots = tables.legal_slots[boards].astype(np.int64)
    live = slots >= 0
    child = tables.next_board[boards[:, None], np.maximum(slots, 0)].astype(np.int64)
    child = np.maximum(child, 0)
    extra = tables.extra_turn[boards[:, None], np.maximum(slots, 0)]
    after = np.where(extra, mover[:, None], 1 - mover[:, None])
    rows = np.where(
        tables.over[child],
        2 * n + MAX_ROUND_MARGIN + tables.final_margin[child].astype(np.int64),
        after * n + tables.ring_nodes[child, after],
    )
    red = np.full(rows.shape, np.nan)
    columns = np.stack([score[:, 0], score[:, 1], starter], axis=1).astype(np.int64)
    distinct, which = np.unique(columns, axis=0, return_inverse=True)
    which = which.reshape(-1)
    for k, (r, b, s) in enumerate(distinct.tolist()):
        games = np.flatnonzero(which == k)
        red[games] = round_values(target, r, b, s)[rows[games]]
    mine = np.where(mover[:, None] == RED, red, 1.0 - red)
    return np.where(live, mine, np.nan)


def match_moves(
    tables: GameTables,
    boards: np.ndarray,
    mover: np.ndarray,
    score: np.ndarray,
    starter: np.ndarray,
    target: int,
    uniforms: np.ndarray,
) -> np.ndarray:
    """The slots perfect play of the match lifts: one of the moves of the best
    :func:`match_values` (within :data:`~buttonup_env.game.equity.TIE_TOLERANCE`), chosen by
    ``uniforms`` as :func:`pick` chooses."""
    values = match_values(tables, boards, mover, score, starter, target)
    top = np.nanmax(values, axis=1, keepdims=True)
    best = values >= top - TIE_TOLERANCE  # NaN (no move) compares False
    order = np.argsort(~best, axis=1, kind="stable")
    slots = np.take_along_axis(tables.legal_slots[boards].astype(np.int64), order, axis=1)
    return pick(slots, best.sum(axis=1), uniforms)


MATCH_ENCODINGS = {"match-slots": "slots", "match-afterstates": "afterstates"}
"""The encodings that see the match, and the encoding each one extends."""


def observations(
    tables: GameTables,
    encoding: str,
    boards: np.ndarray,
    own: np.ndarray,
    score: np.ndarray,
    target: int,
    starter: np.ndarray | None = None,
) -> np.ndarray:
    """Observations of ``boards`` in ``encoding`` from the side of ``own`` (one colour per
    board), with the match ``score`` (Red's then Black's points, one row per board) and who
    started each round (``starter``, 0 Red, 1 Black: needed by the match encodings): the
    floats of :mod:`buttonup_env.game.encoding` for those positions, gathered from the tables'
    planes."""
    if encoding in MATCH_ENCODINGS:
        if starter is None:
            raise ValueError(f"the {encoding!r} encoding needs who started each round")
        base = observations(tables, MATCH_ENCODINGS[encoding], boards, own, score, target)
        return with_match(tables, encoding, base, boards, own, score, starter, target)
    n = len(boards)
    side = own * len(tables.stacks)  # the planes seen by Red, then those seen by Black
    if encoding == "slots":
        obs = np.empty((n, ENCODINGS["slots"].size), dtype=np.float32)
        rows = tables.boards[boards] + side[:, None]
        planes = obs[:, :243].reshape(n, NUM_SLOTS, -1)
        np.take(tables.flat_planes, rows, axis=0, out=planes, mode="clip")
        mine = np.where(own == RED, score[:, 0], score[:, 1])
        theirs = np.where(own == RED, score[:, 1], score[:, 0])
        # as ButtonUp-v0: the division in float64, then float32
        obs[:, 243] = np.minimum(mine / target, 1.0)
        obs[:, 244] = np.minimum(theirs / target, 1.0)
        obs[:, 245] = 1.0 / target
        return obs
    views = tables.afterstate_views if encoding == "afterstates" else tables.ring_views
    rows = views[boards] + side[:, None, None]
    planes = tables.flat_planes[rows].reshape(n, MAX_LEGAL, -1)
    if encoding == "afterstates":
        planes = np.concatenate([planes, tables.afterstate_flags[boards]], axis=2)
    return planes.reshape(n, -1)


def with_match(
    tables: GameTables,
    encoding: str,
    base: np.ndarray,
    boards: np.ndarray,
    own: np.ndarray,
    score: np.ndarray,
    starter: np.ndarray,
    target: int,
) -> np.ndarray:
    """The observations of a match encoding from those of the encoding it extends (``base``,
    of the same positions): ``match-slots`` adds whether ``own`` started the round,
    ``match-afterstates`` the match after each view's move (see
    :mod:`buttonup_env.game.encoding`)."""
    n = len(boards)
    if encoding == "match-slots":
        obs = np.empty((n, base.shape[1] + 1), dtype=np.float32)
        obs[:, :-1] = base
        obs[:, -1] = starter == own
        return obs
    view = base.shape[1] // MAX_LEGAL
    obs = np.zeros((n, MAX_LEGAL, view + 2 * TO_GO + 1), dtype=np.float32)
    obs[:, :, :view] = base.reshape(n, MAX_LEGAL, view)
    slots = tables.legal_slots[boards].astype(np.int64)  # (n, 3), -1 past the legal ones
    live = slots >= 0
    child = tables.next_board[boards[:, None], np.maximum(slots, 0)]
    over = live & tables.over[np.maximum(child, 0)]
    margin = np.where(over, tables.final_margin[np.maximum(child, 0)], 0).astype(np.int64)
    red = score[:, 0, None] + np.maximum(margin, 0)
    black = score[:, 1, None] + np.maximum(-margin, 0)
    after = np.where(red != black, (red > black).astype(np.int64), 1 - starter[:, None])
    starts = np.where(over, after, starter[:, None])  # the next round's starter, or this one's
    mine = np.where(own[:, None] == RED, red, black)
    theirs = np.where(own[:, None] == RED, black, red)
    games, views = np.indices((n, MAX_LEGAL))
    obs[games, views, view + np.clip(target - mine, 0, TO_GO - 1)] = 1.0
    obs[games, views, view + TO_GO + np.clip(target - theirs, 0, TO_GO - 1)] = 1.0
    obs[:, :, -1] = starts == own[:, None]
    obs[~live] = 0.0
    return obs.reshape(n, -1)


def action_masks(tables: GameTables, encoding: str, boards: np.ndarray) -> np.ndarray:
    """int8 masks of the legal actions on ``boards``: over the nine slots for the slot
    encodings, over the three views of the legal slots otherwise."""
    slots = ENCODINGS[encoding].actions == NUM_SLOTS
    return (tables.legal_int8 if slots else tables.legal_views_int8)[boards]


class NumpyBackend:
    """A batch of games stepped with numpy: the readable reference of the engine.

    Made once for a batch of ``num_envs`` games under ``rules``; its ``generators`` are set by
    the caller before the first draw (and whenever it replaces them). Every method takes the
    :class:`~buttonup_env.engine.batch.Batch` to play and changes it in place; the games of a
    call are ascending arrays of game numbers (``envs``). Methods that play through a step also
    take its :class:`~buttonup_env.engine.batch.Outcome`, where the rewards and round points go.
    """

    name = "numpy"

    def __init__(self, tables: GameTables, rules: Rules, num_envs: int) -> None:
        self.tables = tables
        self.rules = rules
        self.ply = Ply.zeros(num_envs)
        """The current ply (see :class:`~buttonup_env.engine.batch.Ply`)."""
        self.generators: Generators | None = None

    # --- the game --------------------------------------------------------------------------
    def move(self, batch: Batch, envs: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Lift the legal ``slots`` in the games ``envs``: each board becomes the board after
        the move, and the turn passes unless the move earns another. Returns the games among
        ``envs`` whose round the move ended."""
        t = self.tables
        flat = batch.board[envs] * NUM_SLOTS + slots
        child = t.next_flat[flat]
        mover = batch.to_move[envs]
        batch.board[envs] = child
        batch.to_move[envs] = np.where(t.extra_flat[flat], mover, 1 - mover)
        return envs[t.over[child]]

    def score_rounds(self, batch: Batch, envs: np.ndarray) -> np.ndarray:
        """Score the finished rounds of the games ``envs``: the winner of each gets its margin
        in points. Returns the margins, Red's strength minus Black's (int64)."""
        margin = self.tables.final_margin[batch.board[envs]].astype(np.int64)
        batch.score[envs, 0] += np.maximum(margin, 0)
        batch.score[envs, 1] += np.maximum(-margin, 0)
        return margin

    def match_won(self, batch: Batch, envs: np.ndarray) -> np.ndarray:
        """Whether the match of each game ``envs`` is won: a player has the target."""
        return batch.score[envs].max(axis=1) >= self.rules.target

    def start_rounds(self, batch: Batch, envs: np.ndarray, layouts: np.ndarray) -> None:
        """Deal the next rounds of the matches ``envs`` on ``layouts``, by the starting rule:
        the player behind on points starts; after a tie, the one who did not start the round
        before."""
        score = batch.score[envs]
        tied = score[:, 0] == score[:, 1]
        starter = np.where(tied, 1 - batch.starter[envs], score.argmin(axis=1))
        batch.starter[envs] = starter
        batch.to_move[envs] = starter
        batch.board[envs] = layouts

    def end_rounds(self, batch: Batch, envs: np.ndarray, out: Outcome) -> None:
        """The rounds that ended in the games ``envs``: score them, pay the agents, end the
        episodes that end, and deal the next rounds of the others (their layouts drawn in the
        order of ``envs``)."""
        margin = self.score_rounds(batch, envs)
        out.round_points[envs, 0] = np.maximum(margin, 0)
        out.round_points[envs, 1] = np.maximum(-margin, 0)
        out.has_points[envs] = True
        rules = self.rules
        agent_margin = np.where(batch.agent[envs] == RED, margin, -margin)
        out.reward[envs] += round_reward(agent_margin, rules.round_reward, rules.round_episodes)
        if rules.round_episodes:
            batch.done[envs] = True
            return
        won = self.match_won(batch, envs)
        if won.any():
            over = envs[won]
            winner = batch.score[over].argmax(axis=1)
            out.reward[over] += match_reward(winner == batch.agent[over])
            batch.done[over] = True
        going = envs[~won]
        if len(going):
            layouts = self._main().integers(NUM_LAYOUTS, size=len(going))
            self.start_rounds(batch, going, layouts)

    # --- episodes --------------------------------------------------------------------------
    def start_episodes(self, batch: Batch, envs: np.ndarray, agent_color: int, first: int) -> None:
        """New episodes in the games ``envs``: the agent's colour (``agent_color``, or drawn
        when -1), the first round's starter (``first``, or drawn), a layout, 0-0. The draws
        come in this order: every colour, then every starter, then every layout. The games
        are the current ply afterwards (their opponents may be to move)."""
        rng = self._main()
        k = len(envs)
        batch.agent[envs] = rng.integers(2, size=k) if agent_color < 0 else agent_color
        batch.starter[envs] = rng.integers(2, size=k) if first < 0 else first
        batch.to_move[envs] = batch.starter[envs]
        batch.score[envs] = 0
        batch.board[envs] = rng.integers(NUM_LAYOUTS, size=k)
        batch.done[envs] = False
        self.ply.envs[:k] = envs

    def random_starts(self, batch: Batch, envs: np.ndarray) -> None:
        """With ``rules.random_start``: each new round of ``envs`` starts, with that
        probability, after 1 to ``random_start_moves`` random legal moves played by whoever is
        to move, and the agent then takes the side to move (so that it meets positions off
        the usual paths). The draws: whether each round starts so, how many moves each, then
        the first move of each, the second..."""
        rules = self.rules
        if not rules.random_start:
            return
        rng = self._main()
        chosen = envs[rng.random(len(envs)) < rules.random_start]
        moves = rng.integers(1, rules.random_start_moves + 1, size=len(chosen))
        t = self.tables
        for k in range(rules.random_start_moves):
            going = chosen[moves > k]
            boards = batch.board[going]
            slots = pick(t.legal_slots[boards], t.num_legal[boards], rng.random(len(going)))
            self.move(batch, going, slots)  # six moves leave three stacks: no round ends
        batch.agent[chosen] = batch.to_move[chosen]

    # --- a step ----------------------------------------------------------------------------
    def agent_moves(
        self, batch: Batch, actions: np.ndarray, by_slot: bool, raise_illegal: bool, out: Outcome
    ) -> tuple[int, int]:
        """Read the agents' ``actions`` (slots when ``by_slot``, otherwise the index of a
        legal slot in increasing order). The legal ones become the current ply (``ply.envs[:
        count]``, their slots in ``ply.slot``); ``out.illegal`` marks the others, whose
        episodes end with reward -1 unless ``raise_illegal`` (then nothing else changes: the
        caller raises). Returns the first game with an illegal action (-1 if none) and the
        ply's count."""
        t = self.tables
        board = batch.board
        slots = actions if by_slot else t.legal_slots[board, actions].astype(np.int64)
        legal = (slots >= 0) & t.legal[board, np.maximum(slots, 0)]
        illegal = ~legal
        out.illegal[:] = illegal
        first = int(np.argmax(illegal)) if illegal.any() else -1
        if first >= 0 and raise_illegal:
            return first, 0
        out.reward[illegal] = -1.0
        batch.done[illegal] = True
        envs = np.flatnonzero(legal)
        self.ply.envs[: len(envs)] = envs
        self.ply.slot[envs] = slots[envs]
        return first, len(envs)

    def play_moves(self, batch: Batch, count: int, out: Outcome) -> int:
        """Play the current ply: ``ply.slot`` in the games ``ply.envs[:count]`` (legal moves),
        then end the rounds that end. Returns how many ended; their games are
        ``ply.ended[:that]``."""
        envs = self.ply.envs[:count]
        ended = self.move(batch, envs, self.ply.slot[envs])
        if len(ended):
            self.end_rounds(batch, ended, out)
        self.ply.ended[: len(ended)] = ended
        return len(ended)

    def bot_plies(
        self, batch: Batch, count: int, kinds: np.ndarray, out: Outcome
    ) -> tuple[Status, int]:
        """The opponents' moves after a ply of ``count`` games, one ply after another, while
        bots alone are to move: each bot's slot drawn from its candidates with its own
        generator, in the order of the games. ``kinds[opponent]`` is an opponent's bot kind, or
        :data:`~buttonup_env.engine.batch.POLICY`. Returns the status and the current ply's
        count: with :attr:`Status.POLICIES` the ply holds the bots' slots and
        :data:`~buttonup_env.engine.batch.POLICY_MOVE` where a policy is to choose."""
        ply = self.ply
        for _ in range(MAX_PLIES):
            envs = ply.envs[:count]
            waiting = batch.done[envs] | (batch.to_move[envs] == batch.agent[envs])
            envs = envs[~waiting]
            count = len(envs)
            ply.envs[:count] = envs
            if not count:
                return Status.WAITING, 0
            kind = kinds[batch.opponent[envs]]
            slots = np.full(count, POLICY_MOVE, dtype=np.int64)
            for k, generator in enumerate(self._bots()):
                mine = kind == k
                if mine.any():
                    boards, mover = batch.board[envs[mine]], batch.to_move[envs[mine]]
                    uniforms = generator.random(int(mine.sum()))
                    slots[mine] = bot_moves(self.tables, k, boards, mover, uniforms)
            ply.slot[envs] = slots
            if (kind == POLICY).any():
                return Status.POLICIES, count
            self.play_moves(batch, count, out)
        return Status.RUNAWAY, count

    # --- observations ----------------------------------------------------------------------
    def observe(
        self,
        batch: Batch,
        encoding: str,
        envs: np.ndarray,
        own: np.ndarray,
        out: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Observations of the games ``envs`` in ``encoding`` from the side of ``own`` (one
        colour per game), and their int8 masks. Into a new array, one row per game, or with
        ``out`` into its rows ``envs``."""
        obs = observations(
            self.tables,
            encoding,
            batch.board[envs],
            own,
            batch.score[envs],
            self.rules.target,
            batch.starter[envs],
        )
        if out is not None:
            out[envs] = obs
            obs = out
        return obs, action_masks(self.tables, encoding, batch.board[envs])

    def masks(self, encoding: str, boards: np.ndarray) -> np.ndarray:
        """int8 masks of the legal actions on ``boards`` in ``encoding``."""
        return action_masks(self.tables, encoding, boards)

    # ---------------------------------------------------------------------------------------
    def _main(self) -> np.random.Generator:
        if self.generators is None:
            raise RuntimeError("the backend's generators are not set (a bug in buttonup_env)")
        return self.generators.main

    def _bots(self) -> tuple[np.random.Generator, ...]:
        self._main()
        return self.generators.bots  # type: ignore[union-attr]
