"""Players that choose their moves in many games at once: the one protocol of the batched env's
opponents and the arena's players (:class:`BatchedPlayer`), its three kinds, and the one check
that what they chose is legal.

A batched player gets :class:`Positions`: for each game where it is to move, the board number
(of :func:`~buttonup_env.engine.tables.game_tables`), the colour to move (0 Red, 1 Black), the
match score, the target and the round's starter, the observations in the player's
:attr:`~BatchedPlayer.encoding` when it reads some, and random numbers for its move; it
returns a legal slot for each game. :class:`BotPlayer` plays a bot from the tables,
:class:`PolicyPlayer` an exported policy in one inference call (policies of one encoding
choose together: :func:`choose_together`), :class:`ActPlayer` any player with
``act(state)``, one game at a time. The batched env and the arena play them all; the engine
plays the plain bots itself inside its plies (their :attr:`~BatchedPlayer.kind`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..engine.batch import BOT_KINDS, POLICY
from ..engine.numpy_backend import bot_moves, match_moves
from ..engine.tables import GameTables, game_tables
from ..game.encoding import Encoding
from ..game.equity import MAX_SOLVED_TARGET
from ..game.rules import COLORS, NUM_SLOTS, State
from .bots import BOT_NAMES, GRADED_PREFIX, check_objective, graded_name, graded_p

UNIFORMS = 2
"""Random numbers a player may use for each move (in ``[0, 1)``)."""


@dataclass(frozen=True)
class Positions:
    """The games where a player is to move, one row each."""

    boards: np.ndarray
    """Board numbers (of :func:`~buttonup_env.engine.tables.game_tables`)."""
    mover: np.ndarray
    """The colour to move: 0 Red, 1 Black."""
    score: np.ndarray
    """The match score, Red's then Black's points (rows of two)."""
    target: int
    """Points that win the match."""
    starter: np.ndarray
    """Who started the round under way."""
    uniforms: np.ndarray | None = None
    """``UNIFORMS`` random numbers in ``[0, 1)`` per game (None: the player draws its own)."""
    observations: np.ndarray | None = None
    """The games' observations in the player's encoding, from the mover's side (None: the
    player computes them if it reads any)."""


class BatchedPlayer(Protocol):
    """A player that chooses its moves in many games at once (see the module)."""

    name: str
    kind: int
    """The engine's number of a bot it plays from its tables inside its plies
    (:data:`~buttonup_env.engine.batch.BOT_KINDS`), or ``POLICY``: the caller asks
    ``choose``."""
    encoding: Encoding | None
    """The encoding of the observations it reads; None when it reads the board numbers
    only."""

    def choose(self, at: Positions) -> np.ndarray: ...


class BotPlayer:
    """A bot: ``random``, ``greedy``, ``margin``, ``perfect``, or a graded ``perfect-P``, which
    lifts a uniformly random legal slot with probability ``P`` and plays as the perfect bot
    otherwise (ties between equal moves broken uniformly). Uniform 0 of a move decides a random
    one, uniform 1 picks the slot; without uniforms it draws its own from :attr:`rng`.

    ``objective`` is what ``perfect`` and ``perfect-P`` play for (see
    :class:`~buttonup_env.players.bots.PerfectBot`): the match (the default; its moves read the
    match's values at each game's score and starter,
    :func:`~buttonup_env.engine.numpy_backend.match_moves`), or the round (one-round episodes:
    the margin player's moves, from the tables). The random, greedy and margin bots, and
    ``perfect`` of the round, are the engine's own table bots (their ``kind``)."""

    encoding: Encoding | None = None

    def __init__(
        self, name: str, tables: GameTables | None = None, objective: str = "match"
    ) -> None:
        self.tables = tables if tables is not None else game_tables()
        p = graded_p(name)
        if name not in BOT_NAMES and p is None:
            raise ValueError(
                f"{name!r} is not a bot; use {', '.join(BOT_NAMES)} or {GRADED_PREFIX}P"
            )
        self.objective = check_objective(objective)
        self.name = graded_name(p) if p is not None else name
        self.p = 1.0 if name == "random" else (p if p is not None else 0.0)
        table = "margin" if name == "perfect" and objective == "round" else name
        self.kind = BOT_KINDS.index(table) if table in BOT_KINDS else POLICY
        if name in ("random", "greedy", "margin"):
            self.base = name
        else:  # perfect and the graded bots
            self.base = "margin" if objective == "round" else "match"
        """What plays the moves that are not random: a table bot of the engine, or the match."""
        self.rng = np.random.default_rng()
        """The generator of its own numbers (the batched env seeds it)."""

    def check_target(self, target: int) -> None:
        """``ValueError`` in one sentence when the bot reads the solved match and ``target``
        is beyond the targets it is solved for."""
        if self.base == "match" and self.p < 1.0 and target > MAX_SOLVED_TARGET:
            raise ValueError(
                f"{self.name!r} plays the match perfectly, which is solved for targets up to "
                f"{MAX_SOLVED_TARGET}, not {target}; use a smaller target or 'margin'"
            )

    def choose(self, at: Positions) -> np.ndarray:
        """The bot's slots."""
        t, boards, mover = self.tables, at.boards, at.mover
        uniforms = at.uniforms
        if uniforms is None:
            uniforms = self.rng.random((len(boards), UNIFORMS))
        random = BOT_KINDS.index("random")
        if self.p >= 1.0:
            return bot_moves(t, random, boards, mover, uniforms[:, 1])
        if self.base == "match":
            slots = match_moves(t, boards, mover, at.score, at.starter, at.target, uniforms[:, 1])
        else:
            slots = bot_moves(t, BOT_KINDS.index(self.base), boards, mover, uniforms[:, 1])
        if self.p > 0.0:
            wild = uniforms[:, 0] < self.p
            if wild.any():
                slots[wild] = bot_moves(t, random, boards[wild], mover[wild], uniforms[wild, 1])
        return slots

    def __repr__(self) -> str:
        if self.objective == "round" and self.name not in ("random", "greedy", "margin"):
            return f"BotPlayer({self.name!r}, objective='round')"
        return f"BotPlayer({self.name!r})"


class PolicyPlayer:
    """An exported policy (anything with ``logits(obs)`` and an ``encoding``, as
    :func:`buttonup_env.load_policy` gives): one inference for all the games where it is to
    move, then its best legal action in each (the first of equal logits, as its ``act``), or,
    given a generator (``rng``) and a policy that samples (``deterministic`` false), an
    action drawn from its softmax."""

    kind = POLICY

    def __init__(
        self,
        name: str,
        policy: Any,
        tables: GameTables | None = None,
        rng: np.random.Generator | None = None,
    ) -> None:
        if not callable(getattr(policy, "logits", None)) or not hasattr(policy, "encoding"):
            raise ValueError(f"{policy!r} is not a policy: it needs logits(obs) and an encoding")
        self.name = name
        self.policy = policy
        self.encoding: Encoding = policy.encoding
        self.tables = tables if tables is not None else game_tables()
        self.rng = rng

    def choose(self, at: Positions) -> np.ndarray:
        """The policy's slots (observations computed from the positions when not given)."""
        obs = at.observations
        if obs is None:
            from ..engine.numba_backend import observations  # numba only when it is used

            t, name = self.tables, self.encoding.name
            obs = observations(t, name, at.boards, at.mover, at.score, at.target, at.starter)
        return choose_together([self], np.array([len(at.boards)]), at.boards, obs)

    def __repr__(self) -> str:
        return repr(self.policy)


def choose_together(
    players: Sequence[PolicyPlayer],
    counts: np.ndarray,
    boards: np.ndarray,
    observations: np.ndarray,
) -> np.ndarray:
    """The slots several policies of one encoding choose: ``players[i]`` on the next
    ``counts[i]`` of ``boards`` and ``observations``. Each policy takes its rows in one
    inference call and draws its noise (when it samples) from its own generator, in the order
    of ``players``; masking the illegal moves, picking and naming the slots is done once for
    all the rows, so that a pool of many small groups pays for those once a ply."""
    encoding, tables = players[0].encoding, players[0].tables
    logits = np.empty((len(boards), encoding.actions))
    start = 0
    for player, count in zip(players, counts.tolist(), strict=True):
        rows = slice(start, start + count)
        logits[rows] = player.policy.logits(observations[rows])
        if player.rng is not None and not player.policy.deterministic:  # Gumbel-max sampling
            logits[rows] += player.rng.gumbel(size=(count, encoding.actions))
        start += count
    slots = encoding.actions == NUM_SLOTS
    legal = tables.legal_int8 if slots else tables.legal_views_int8
    action = np.where(legal[boards].view(bool), logits, -np.inf).argmax(axis=1)
    return action if slots else tables.legal_slots[boards, action].astype(np.int64)


class ActPlayer:
    """Any player with ``act(state) -> slot`` (see :class:`buttonup_env.players.bots.Player`)
    as a batched one: asked for each game in turn, its :class:`~buttonup_env.game.rules.State`
    built from the positions. It draws its random numbers itself."""

    kind = POLICY
    encoding: Encoding | None = None

    def __init__(self, name: str, player: Any, tables: GameTables | None = None) -> None:
        self.name = name
        self.player = player
        self.tables = tables if tables is not None else game_tables()

    def choose(self, at: Positions) -> np.ndarray:
        """The slot the player's ``act`` returns in each game."""
        slots = np.empty(len(at.boards), dtype=np.int64)
        for i, board in enumerate(at.boards.tolist()):
            red, black = (int(v) for v in at.score[i])
            state = State(
                self.tables.board(board),
                COLORS[at.mover[i]],
                {"R": red, "B": black},
                at.target,
                COLORS[at.starter[i]],
            )
            slots[i] = self.player.act(state)
        return slots

    def __repr__(self) -> str:
        return repr(self.player)


def check_legal(
    tables: GameTables, boards: np.ndarray, slots: np.ndarray, name_of: Callable[[int], str]
) -> None:
    """``ValueError`` in one sentence when a slot of ``slots`` is not a legal move on its
    board of ``boards``, naming the player that chose it (``name_of(row)``): a broken policy
    file, say. The batched env and the arena check every move they ask a player for."""
    legal = (slots >= 0) & (slots < NUM_SLOTS)
    legal[legal] = tables.legal[boards[legal], slots[legal]]
    if legal.all():
        return
    bad = int(np.flatnonzero(~legal)[0])
    board = " ".join(s or "." for s in tables.board(int(boards[bad])))
    raise ValueError(
        f"the player {name_of(bad)!r} made an illegal move: slot {slots[bad]}, which is not "
        f"legal on {board!r}"
    )
