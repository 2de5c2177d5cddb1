"""``ButtonUpVectorEnv``: thousands of ButtonUp-v0 games stepped together.

``gymnasium.make_vec("ButtonUp-v0", num_envs=N)`` returns it. Every board a game can reach is
numbered once (:mod:`buttonup_env.engine.tables`), so a step of the whole batch is a handful of
look-ups: the board after the move, the extra turn, the legal slots, the observation planes,
and the opponents' choices (the exact solver's, the greedy bot's and the random bot's come
from tables too; an ONNX policy is one batched inference call for all the envs it plays in).

Two implementations play the same games bit for bit: numba kernels
(:mod:`buttonup_env.engine.kernels`, ``backend="numba"``, the default) and the numpy array
operations written out in this module (``backend="numpy"``), the readable reference that the
tests replay with the rules engine.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ..engine.tables import RED, GameTables, game_tables
from ..game.encoding import ENCODINGS, MAX_LEGAL, RingEncoding, SlotEncoding
from ..game.rules import (
    COLORS,
    DEFAULT_TARGET,
    LAYOUTS,
    NUM_SLOTS,
    State,
    check_target,
    is_whole_number,
)
from ..players.bots import BOT_NAMES
from ..players.shipped import shipped_policies
from .interface import (
    COLOR_CHOICES,
    EPISODES,
    ILLEGAL_ACTIONS,
    REWARDS,
    check_choice,
    match_reward,
    reset_options,
    round_reward,
)

Encoding = SlotEncoding | RingEncoding
"""An observation encoding of :mod:`buttonup_env.game.encoding`."""

ENCODING_SIZES = {name: encoding.size for name, encoding in ENCODINGS.items()}
"""Observation sizes of the encodings (see :mod:`buttonup_env.game.encoding`)."""
BACKENDS = ("numba", "numpy")
"""How a batch is stepped: compiled kernels (:mod:`buttonup_env.engine.kernels`) or numpy."""


_COLOR_NAMES = np.array(COLORS)  # "R", "B" by colour number, for info["agent_color"]
_NO_CONTEXT = contextlib.nullcontext()


@contextlib.contextmanager
def _numba_threads(numba: Any, threads: int) -> Iterator[None]:
    """numba's parallel loops on ``threads`` threads, then back to what they were."""
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        yield
    finally:
        numba.set_num_threads(before)


# --- batched players -------------------------------------------------------------------------


def _draw(slots: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One of the first ``counts[i]`` entries of each row ``slots[i]``, uniformly at random."""
    k = (rng.random(len(counts)) * counts).astype(np.int64)
    return slots[np.arange(len(counts)), k].astype(np.int64)


class BatchedBot:
    """A built-in bot as a batched env's opponent: its candidate moves come from a table, ties
    broken at random with its own generator (which the env seeds).

    The batched env's opponents take arrays and return slots, as
    :class:`~buttonup_env.players.arena.BatchedPlayer` does: :meth:`choose` gets the board numbers
    (of :func:`~buttonup_env.engine.tables.game_tables`), the colour to move there (0 Red, 1 Black)
    and, for a player with an :attr:`encoding`, the observations in it. Unlike the arena's
    players they draw their own random numbers: the env seeds their generators at reset.
    """

    encoding: Encoding | None = None
    """A bot reads the board numbers only: it needs no observations."""

    def __init__(self, name: str, tables: GameTables) -> None:
        self.name = name
        self.tables = tables
        self.rng = np.random.default_rng()
        if name == "random":
            self.slots, self.counts = tables.legal_slots, tables.num_legal
        else:  # per board and mover: flatten to one index, board * 2 + mover
            slots, counts = getattr(tables, f"{name}_choices")
            self.slots, self.counts = slots.reshape(-1, MAX_LEGAL), counts.reshape(-1)

    def choose(
        self, boards: np.ndarray, mover: np.ndarray, observations: np.ndarray | None = None
    ) -> np.ndarray:
        """A legal slot on each of ``boards`` for the colour ``mover``."""
        rows = boards if self.name == "random" else 2 * boards + mover
        return _draw(self.slots[rows], self.counts[rows], self.rng)

    def __repr__(self) -> str:
        return f"{self.name} bot"


class BatchedPolicy:
    """An exported ONNX policy as a batched env's opponent: one inference call for all the
    games it plays (see :class:`BatchedBot` for what :meth:`choose` gets)."""

    def __init__(self, policy: Any, tables: GameTables) -> None:
        self.policy = policy
        self.tables = tables
        self.encoding: Encoding = policy.encoding
        """The encoding of the observations :meth:`choose` needs (an object of
        :mod:`buttonup_env.game.encoding`, as ``ButtonUpEnv.encoding`` is)."""
        self.rng = np.random.default_rng()

    def choose(
        self, boards: np.ndarray, mover: np.ndarray, observations: np.ndarray | None = None
    ) -> np.ndarray:
        """A legal slot on each of ``boards``, from the policy's logits on ``observations``
        (the games' observations in :attr:`encoding`, from the side of ``mover``)."""
        if observations is None:
            raise ValueError(f"a policy chooses from observations in {self.encoding.name!r}")
        logits = self.policy.logits(observations).astype(np.float64)
        legal = (
            self.tables.legal_int8
            if self.encoding.name == "slots"
            else self.tables.legal_views_int8
        )
        logits = np.where(legal[boards].view(bool), logits, -np.inf)
        if not self.policy.deterministic:  # sample from the softmax (Gumbel-max)
            logits = logits + self.rng.gumbel(size=logits.shape)
        action = logits.argmax(axis=1)
        if self.encoding.name == "slots":
            return action
        return self.tables.legal_slots[boards, action].astype(np.int64)

    def __repr__(self) -> str:
        return repr(self.policy)


# --- the environment -------------------------------------------------------------------------


class ButtonUpVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` games of ButtonUp-v0, stepped together by compiled kernels.

    ## Description
    The same game as :class:`~buttonup_env.envs.env.ButtonUpEnv`, argument for argument: each of the
    ``num_envs`` envs is one agent against an opponent inside the env, whose moves (extra
    turns included) are played inside :meth:`step`. Nothing loops over the envs in Python: a
    step is look-ups in :class:`~buttonup_env.engine.tables.GameTables`, where every board the game
    can reach has a number.

    The step is compiled with numba (:mod:`buttonup_env.engine.kernels`): flat passes over the whole
    batch for the agents' moves, the bots' replies, the ends of rounds, new episodes and the
    observations. Nothing compiles on import; the first ``reset`` and ``step`` of a process
    compile the kernels (3 to 7 seconds on a 2-core machine, depending on its load), and numba
    caches the machine code on disk, so later processes load it in 0.3 to 0.7 s (the cache lives
    next to the package, or in numba's user-wide folder, ``~/.cache/numba``, when the package
    folder is read-only; ``$NUMBA_CACHE_DIR`` overrides both). A policy opponent (an ONNX file, a
    shipped policy, the pool's snapshots) is one batched inference call per ply of its moves,
    between kernel calls. ``backend="numpy"`` plays the same games, bit for bit, with numpy
    array operations (the readable reference; no compilation, several times slower).

    ## Action Space
    ``MultiDiscrete([9] * num_envs)``: the slot each env's agent lifts (with
    ``encoding="ring"`` or ``"afterstates"``: ``MultiDiscrete([3] * num_envs)``, action ``a``
    lifting the ``a``-th legal slot, as :class:`~buttonup_env.envs.wrappers.RingObservation` does).
    Actions must be an integer array of shape ``(num_envs,)``; values outside the action
    range raise ``ValueError``; a legal-range value that is not a legal move is an illegal
    action (see Rewards).

    ## Observation Space
    ``Box(0, 1, (num_envs, 246), float32)``: each row is exactly ButtonUp-v0's observation of
    that env's position and score, from its agent's side. ``encoding="ring"`` (729) or
    ``"afterstates"`` (735) give the view encodings of :mod:`buttonup_env.game.encoding` instead.

    ## Starting State, Rewards, Episode End
    As ButtonUp-v0: each env draws its agent's colour (unless ``agent_color``), the first
    round's starter and every round's layout from the env's seeded generator; later rounds
    follow the starting rule; rewards are ButtonUp-v0's for ``reward`` and ``episode``; an
    illegal action ends that env's episode with -1 (``illegal_action="raise"``:
    ``ValueError``, and no env moves). Episodes are never truncated.

    ## Autoreset
    ``metadata["autoreset_mode"]`` is ``AutoresetMode.SAME_STEP``: an env whose episode ends
    in a step is reset in that same step; the step returns the new episode's first
    observation and mask, and the last observation of the finished episode in
    ``info["final_obs"]`` (rows where ``info["_final_obs"]`` is True).

    ## Information
    ``info`` after :meth:`reset` and :meth:`step` (arrays over the envs):

    * ``action_mask`` (``int8``, (num_envs, 9) or (num_envs, 3)): the legal actions of the
      observation returned. :meth:`action_masks` gives the same as booleans.
    * ``agent_color`` (``"<U1"``): ``"R"`` or ``"B"`` for each env's current episode.
    * ``illegal_action`` (bool): the step's action was illegal in that env.
    * ``round_points`` ((num_envs, 2) int, Red then Black) with the mask ``_round_points``:
      the points of the last round that ended in the step, for the envs where one did.
    * ``final_obs``, ``_final_obs``: see Autoreset.

    Every array that :meth:`reset` and :meth:`step` return (observations, rewards,
    terminations, the info arrays) is new: it is the caller's to keep, and later steps never
    change it. :meth:`states` gives every env's position as a
    :class:`~buttonup_env.game.rules.State`.

    ## Arguments
    ``gymnasium.make_vec("ButtonUp-v0", num_envs=N, ...)`` or ``ButtonUpVectorEnv(N, ...)``:

    * ``num_envs``: how many games (>= 1).
    * ``opponent``: ``"random"`` (default), ``"greedy"``, ``"perfect"``, the name of a shipped
      policy (``"buttonup-ppo"``), a path to an exported ``.onnx`` policy (or a policy loaded
      with :func:`buttonup_env.load_policy`), or an
      :class:`~buttonup_env.players.selfplay.OpponentPool` (the training pool: a new opponent per
      episode, for each env).
    * ``agent_color``, ``target``, ``reward``, ``episode``, ``illegal_action``: as ButtonUp-v0.
    * ``encoding``: ``"slots"`` (default, ButtonUp-v0's observation), ``"ring"`` or
      ``"afterstates"``, or one of those encodings of :mod:`buttonup_env.game.encoding` (such as
      another env's :attr:`encoding`). The attribute ``encoding`` is the encoding itself, an
      object with ``name`` and ``size``, as ``ButtonUpEnv.encoding`` and a policy's are.
    * ``random_start`` (default 0, for training; needs ``episode="round"`` and
      ``agent_color=None``): the probability that a round starts after 1 to
      ``random_start_moves`` (default 6) uniformly random moves, played by whoever is to move,
      the agent then taking the side to move, so that it meets positions off the usual paths.
      0 is ButtonUp-v0's game.
    * ``backend``: ``"numba"`` (default, compiled) or ``"numpy"`` (the reference). Both give
      the same games, observations and generator states for the same seed.
    * ``threads`` (default 1, ``backend="numba"`` only): threads for the passes that write the
      observations and masks (numba's parallel loops; the game logic, which draws the random
      numbers, stays on one thread, so the games do not depend on it). At most numba's
      ``NUMBA_NUM_THREADS`` (the number of CPUs unless set). On a shared 2-core machine at
      4,096 envs one thread was the faster (two: 0.97 to 0.98 times, see
      ``benchmarks/README.md``); two can only pay off where a second core is idle.

    ``reset(seed=...)`` makes the whole batch reproducible: the draws, the bots' tie-breaks
    and the sampling of stochastic policies all come from generators seeded from it.
    ``reset(options={"agent_color": ..., "first": ...})`` fixes them for every env's episode.

    ## Version History
    * v0: initial version.
    """

    metadata = {  # noqa: RUF012
        "autoreset_mode": AutoresetMode.SAME_STEP,
        "render_modes": ["ansi"],
    }

    def __init__(
        self,
        num_envs: int = 1,
        opponent: str | Path | Any = "random",
        agent_color: str | None = None,
        target: int = DEFAULT_TARGET,
        reward: str = "match",
        episode: str = "match",
        illegal_action: str = "end",
        encoding: str | Encoding = "slots",
        render_mode: str | None = None,
        random_start: float = 0.0,
        random_start_moves: int = 6,
        backend: str = "numba",
        threads: int = 1,
    ) -> None:
        if not is_whole_number(num_envs) or num_envs < 1:
            raise ValueError(f"num_envs={num_envs!r} is not allowed; use a whole number >= 1")
        if not (isinstance(random_start, int | float) and 0.0 <= random_start <= 1.0):
            raise ValueError(
                f"random_start={random_start!r} is not allowed; use a probability in [0, 1]"
            )
        if not is_whole_number(random_start_moves) or not 1 <= random_start_moves <= 6:
            raise ValueError(
                f"random_start_moves={random_start_moves!r} is not allowed; use 1 to 6 (a "
                "round has 8 moves and a start must leave the agent a decision)"
            )
        if random_start and (episode != "round" or agent_color is not None):
            raise ValueError(
                f"random_start={random_start!r} needs episode='round' and agent_color=None: the "
                "agent takes the side to move after the random moves"
            )
        check_choice("agent_color", agent_color, COLOR_CHOICES)
        check_choice("reward", reward, REWARDS)
        check_choice("episode", episode, EPISODES)
        check_choice("illegal_action", illegal_action, ILLEGAL_ACTIONS)
        encoding = getattr(encoding, "name", encoding)  # an encoding, or its name
        check_choice("encoding", encoding, tuple(ENCODING_SIZES))
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        check_choice("backend", backend, BACKENDS)
        self._kernels: Any = None
        if backend == "numba":
            from ..engine import kernels  # imports numba (nothing compiles until the first reset)

            self._kernels = kernels
            limit = kernels.numba.config.NUMBA_NUM_THREADS
            if not is_whole_number(threads) or not 1 <= threads <= limit:
                raise ValueError(
                    f"threads={threads!r} is not allowed; use a whole number from 1 to {limit} "
                    "(numba's NUMBA_NUM_THREADS)"
                )
        elif threads != 1:
            raise ValueError(
                f"threads={threads!r} needs backend='numba'; the numpy backend runs on one thread"
            )
        self.backend = backend
        self.threads = int(threads)
        self.num_envs = int(num_envs)
        self.target = check_target(target)
        self.agent_color_choice = agent_color
        self.reward_mode = reward
        self.episode = episode
        self.illegal_action = illegal_action
        self.encoding: Encoding = ENCODINGS[encoding]
        """The observations' encoding (an object of :mod:`buttonup_env.game.encoding`, as
        ``ButtonUpEnv.encoding`` is; the argument is its name)."""
        self.render_mode = render_mode
        self.random_start = float(random_start)
        self.random_start_moves = int(random_start_moves)
        self.tables = game_tables()

        actions = NUM_SLOTS if encoding == "slots" else MAX_LEGAL
        self.single_action_space = spaces.Discrete(actions)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        size = ENCODING_SIZES[encoding]
        self.single_observation_space = spaces.Box(0.0, 1.0, (size,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)

        self._bots = {name: BatchedBot(name, self.tables) for name in BOT_NAMES}
        self.pool = None
        self._players: list[Any] = []
        self._set_opponent(opponent)

        n = self.num_envs
        self._board = np.zeros(n, dtype=np.int64)
        self._to_move = np.zeros(n, dtype=np.int64)
        self._agent = np.zeros(n, dtype=np.int64)
        self._starter = np.zeros(n, dtype=np.int64)
        self._score = np.zeros((n, 2), dtype=np.int64)
        self._opponent = np.zeros(n, dtype=np.int64)  # index into self._players
        self._done = np.zeros(n, dtype=bool)
        self._reset_called = False
        self._options: dict[str, Any] = {}
        self._seed_generators(None)
        if self._kernels is not None:
            self._setup_compiled()

    # --- opponents ---------------------------------------------------------------------------
    def _set_opponent(self, opponent: Any) -> None:
        from ..players.selfplay import OpponentPool

        if isinstance(opponent, OpponentPool):
            self.pool = opponent
            self._players = [self._bots[name] for name in BOT_NAMES]
            self._snapshot_ids: dict[Path, int] = {}
            return
        if isinstance(opponent, str) and opponent in BOT_NAMES:
            self._players = [self._bots[opponent]]
            return
        policy = None
        if isinstance(opponent, str | Path):
            path = Path(opponent)
            if opponent not in shipped_policies() and path.suffix != ".onnx" and not path.is_file():
                names = ", ".join(map(repr, (*BOT_NAMES, *shipped_policies())))
                raise ValueError(
                    f"opponent {str(opponent)!r} is not a bot name, a shipped policy or a policy "
                    f"file; use one of {names}, a path to an exported .onnx policy, or an "
                    "OpponentPool"
                )
            from ..players.policy import load_policy

            policy = load_policy(opponent)
        elif callable(getattr(opponent, "logits", None)) and hasattr(opponent, "encoding"):
            policy = opponent
        if policy is None or policy.encoding.name not in ENCODING_SIZES:
            raise ValueError(
                f"opponent {opponent!r} cannot play a batch; use one of "
                f"{', '.join(map(repr, BOT_NAMES))}, a path to an exported .onnx policy, a policy "
                "from load_policy, or an OpponentPool"
            )
        self._players = [BatchedPolicy(policy, self.tables)]

    def _draw_opponents(self, idx: np.ndarray) -> None:
        """Choose the opponent of every env in ``idx`` for its new episode."""
        if self.pool is None:
            return  # one opponent for all
        kinds, which, snapshots = self.pool.draw(self._rng, len(idx))
        opponent = np.empty(len(idx), dtype=np.int64)
        for kind, name in enumerate(self.pool.KINDS):
            if name != "snapshots":
                opponent[kinds == kind] = BOT_NAMES.index(name)
        drawn = kinds == self.pool.KINDS.index("snapshots")
        if drawn.any():
            ids = np.empty(len(snapshots), dtype=np.int64)
            for j in np.unique(which[drawn]):
                ids[j] = self._snapshot_player(snapshots[j])
            opponent[drawn] = ids[which[drawn]]
        self._opponent[idx] = opponent

    def _record_snapshot_rounds(self, idx: np.ndarray, agent_margin: np.ndarray) -> None:
        """Tell the pool how the rounds in ``idx`` against its snapshots ended."""
        opponent = self._opponent[idx]
        snapshot = opponent >= len(BOT_NAMES)  # the players after the bots are snapshots
        if not snapshot.any():
            return
        scores = (np.sign(agent_margin) + 1) / 2  # 1 won, 0.5 drawn, 0 lost
        for index in np.unique(opponent[snapshot]):  # only those whose rounds just ended
            name = self._players[index].policy.path.name  # type: ignore[attr-defined]
            self.pool.record(name, scores[opponent == index])  # type: ignore[union-attr]

    def _snapshot_player(self, path: Path) -> int:
        index = self._snapshot_ids.get(path)
        if index is None:
            player = BatchedPolicy(self.pool.snapshot_policy(path), self.tables)  # type: ignore[union-attr]
            player.rng = self._policy_rng
            index = self._snapshot_ids[path] = len(self._players)
            self._players.append(player)
        return index

    # --- seeding -----------------------------------------------------------------------------
    def _seed_generators(self, seed: int | None) -> None:
        sequence = np.random.SeedSequence(seed)
        main, random_bot, greedy, perfect, policies = sequence.spawn(5)
        self._rng = np.random.default_rng(main)
        self._np_random = self._rng
        self._np_random_seed = seed
        for name, child in zip(BOT_NAMES, (random_bot, greedy, perfect), strict=True):
            self._bots[name].rng = np.random.default_rng(child)
        self._policy_rng = np.random.default_rng(policies)
        for player in self._players:
            if isinstance(player, BatchedPolicy):
                player.rng = self._policy_rng

    # --- observations ------------------------------------------------------------------------
    def encode(self, encoding: str, idx: np.ndarray | slice, own: np.ndarray) -> np.ndarray:
        """Observations of the envs ``idx`` in ``encoding``, from the side of ``own`` (one
        colour per env: 0 Red, 1 Black), as the single env's encodings give them."""
        if self._kernels is not None:
            rows = np.ascontiguousarray(self._rows[idx])
            own = np.array(np.broadcast_to(own, rows.shape), dtype=np.int64)  # writable, C order
            out = np.empty((len(rows), ENCODING_SIZES[encoding]), dtype=np.float32)
            self._compiled_encode(encoding, rows, own, out, scatter=False)
            return out
        return self.tables.observations(
            encoding, self._board[idx], own, self._score[idx], self.target
        )

    def _observe(self, idx: np.ndarray | slice) -> np.ndarray:
        """The agents' observations of the envs ``idx``."""
        return self.encode(self.encoding.name, idx, self._agent[idx])

    def _mask(self, encoding: str, boards: np.ndarray) -> np.ndarray:
        """Boolean masks of the legal actions on ``boards`` in ``encoding``."""
        return self._mask_int8(encoding, boards).view(bool)

    def _mask_int8(self, encoding: str, boards: np.ndarray) -> np.ndarray:
        if self._kernels is not None:
            out = np.empty((len(boards), NUM_SLOTS if encoding == "slots" else MAX_LEGAL), np.int8)
            masks = self._kernels.masks[self.threads > 1]
            with self._numba_threads():
                masks(np.ascontiguousarray(boards), self._records, encoding == "slots", out)
            return out
        if encoding == "slots":
            return self.tables.legal_int8[boards]
        return self.tables.legal_views_int8[boards]

    def action_masks(self) -> np.ndarray:
        """Boolean masks of the legal actions, (num_envs, 9) or (num_envs, 3)."""
        if not self._reset_called:
            raise RuntimeError("call reset() before action_masks()")
        return self._mask(self.encoding.name, self._board)

    # --- the game ----------------------------------------------------------------------------
    def _start_episodes(self, idx: np.ndarray) -> None:
        """New matches (or rounds) in the envs ``idx``; the opponents play up to the agent."""
        k = len(idx)
        color = self._options.get("agent_color", self.agent_color_choice)
        if color is None:
            self._agent[idx] = self._rng.integers(2, size=k)
        else:
            self._agent[idx] = COLORS.index(color)
        first = self._options.get("first")
        if first is None:
            self._starter[idx] = self._rng.integers(2, size=k)
        else:
            self._starter[idx] = COLORS.index(first)
        self._to_move[idx] = self._starter[idx]
        self._score[idx] = 0
        self._board[idx] = self._rng.integers(len(LAYOUTS), size=k)
        self._done[idx] = False
        self._draw_opponents(idx)
        self._random_starts(idx)

    def _random_starts(self, idx: np.ndarray) -> None:
        """With ``random_start``: play 1 to ``random_start_moves`` random moves in some of the
        new rounds ``idx`` (whoever is to move plays them), so rounds start all over the game;
        the agent then plays the side to move (its colour is drawn anyway), so the opponent
        cannot end the round before the agent's first decision."""
        if not self.random_start:
            return
        chosen = idx[self._rng.random(len(idx)) < self.random_start]
        moves = self._rng.integers(1, self.random_start_moves + 1, size=len(chosen))
        out = self._new_out()  # no round can end: six moves leave three stacks
        for k in range(self.random_start_moves):
            going = chosen[moves > k]
            boards = self._board[going]
            slots = _draw(self.tables.legal_slots[boards], self.tables.num_legal[boards], self._rng)
            self._move(going, slots, out)
        self._agent[chosen] = self._to_move[chosen]

    def _move(self, idx: np.ndarray, slots: np.ndarray, out: dict[str, np.ndarray]) -> None:
        """Play the legal ``slots`` in the envs ``idx``; end the rounds that end."""
        t = self.tables
        board = self._board[idx]
        flat = board * NUM_SLOTS + slots
        child = t.next_flat[flat]
        mover = self._to_move[idx]
        self._board[idx] = child
        self._to_move[idx] = np.where(t.extra_flat[flat], mover, 1 - mover)
        over = t.over[child]
        if over.any():
            self._end_rounds(idx[over], out)

    def _end_rounds(self, idx: np.ndarray, out: dict[str, np.ndarray]) -> None:
        """Score the finished rounds in ``idx``; end the episodes or set up the next rounds."""
        margin = self.tables.final_margin[self._board[idx]].astype(np.int64)  # Red's
        points = np.stack([np.maximum(margin, 0), np.maximum(-margin, 0)], axis=1)
        self._score[idx] += points
        out["round_points"][idx] = points
        out["_round_points"][idx] = True
        agent_margin = np.where(self._agent[idx] == RED, margin, -margin)
        if self.pool is not None:
            self._record_snapshot_rounds(idx, agent_margin)
        reward = out["reward"]
        reward[idx] += round_reward(
            agent_margin, self.reward_mode == "round", self.episode == "round"
        )
        if self.episode == "round":
            self._done[idx] = True
            return
        score = self._score[idx]
        won = score.max(axis=1) >= self.target
        if won.any():
            ended = idx[won]
            winner = score[won].argmax(axis=1)
            reward[ended] += match_reward(winner == self._agent[ended])
            self._done[ended] = True
        going = idx[~won]
        if len(going):
            score = score[~won]
            tied = score[:, 0] == score[:, 1]
            starter = np.where(tied, 1 - self._starter[going], score.argmin(axis=1))
            self._starter[going] = starter
            self._to_move[going] = starter
            self._board[going] = self._rng.integers(len(LAYOUTS), size=len(going))

    def _choices(
        self, player: BatchedBot | BatchedPolicy, idx: np.ndarray, mover: np.ndarray
    ) -> np.ndarray:
        """``player``'s slots in the envs ``idx``, where ``mover`` is to move."""
        obs = None if player.encoding is None else self.encode(player.encoding.name, idx, mover)
        return player.choose(self._board[idx], mover, obs)

    def _play_opponents(self, out: dict[str, np.ndarray]) -> None:
        """Let the opponents move until every live env waits for its agent."""
        for _ in range(10 * NUM_SLOTS):  # far more than any chain of opponent moves
            pending = np.flatnonzero(~self._done & (self._to_move != self._agent))
            if not len(pending):
                return
            slots = np.empty(len(pending), dtype=np.int64)
            boards = self._board[pending]
            mover = self._to_move[pending]
            if len(self._players) == 1:
                slots[:] = self._choices(self._players[0], pending, mover)
            else:
                which = self._opponent[pending]
                for k in np.unique(which):
                    sel = which == k
                    slots[sel] = self._choices(self._players[k], pending[sel], mover[sel])
            if not self.tables.legal[boards, slots].all():  # a broken policy file, say
                bad = np.flatnonzero(~self.tables.legal[boards, slots])[0]
                player = self._players[self._opponent[pending[bad]]]
                board = " ".join(s or "." for s in self.tables.board(boards[bad]))
                raise ValueError(
                    f"the opponent {player!r} made an illegal move: slot {slots[bad]} on {board!r}"
                )
            self._move(pending, slots, out)
        raise RuntimeError("the opponents did not hand the move back (a bug in buttonup_env)")

    def _new_out(self) -> dict[str, np.ndarray]:
        n = self.num_envs
        return {
            "reward": np.zeros(n, dtype=np.float64),
            "round_points": np.zeros((n, 2), dtype=np.int64),
            "_round_points": np.zeros(n, dtype=bool),
        }

    def _info(self, out: dict[str, np.ndarray], mask: np.ndarray | None = None) -> dict[str, Any]:
        info: dict[str, Any] = {
            "action_mask": self._mask_int8(self.encoding.name, self._board)
            if mask is None
            else mask,
            "agent_color": _COLOR_NAMES[self._agent],
        }
        if out["_round_points"].any():
            info["round_points"] = out["round_points"]
            info["_round_points"] = out["_round_points"]
        return info

    # --- the compiled step (backend="numba"; the numpy methods above are its reference) ------
    def _setup_compiled(self) -> None:
        """The board records and the scratch arrays the kernels work in."""
        n = self.num_envs
        self._records = self._kernels.board_records(self.tables)
        self._rows = np.arange(n)
        self._envs = np.zeros(n, dtype=np.int64)  # the envs of the current ply: envs[:count]
        self._slot = np.full(n, -1, dtype=np.int64)  # each env's move in the current ply
        self._draws = np.zeros(n, dtype=np.float64)  # the bots' tie-breaking draws
        self._ended = np.zeros(n, dtype=np.int64)  # the envs whose round ended in the last ply
        self._chosen = np.zeros(n, dtype=bool)  # the new rounds that start at random
        self._start_moves = np.zeros(n, dtype=np.int64)  # how many random moves they get
        self._address_generators: tuple[np.random.Generator, ...] = ()
        self._addresses = np.zeros((0, 3), dtype=np.uint64)
        self._bot_players: tuple[Any, ...] = ()
        self._player_bot = np.zeros(0, dtype=np.int64)

    def __getstate__(self) -> dict[str, Any]:
        """For pickling and deep copies: without the kernels' module and the raw addresses of
        this object's generators (a copy has generators of its own), which are made again."""
        state = self.__dict__.copy()
        if state.get("_kernels") is not None:
            state["_kernels"] = None
            state["_records"] = None
            state["_address_generators"] = ()
            state["_addresses"] = np.zeros((0, 3), dtype=np.uint64)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.backend == "numba":
            from ..engine import kernels

            self._kernels = kernels
            self._records = kernels.board_records(self.tables)

    def _generator_addresses(self) -> np.ndarray:
        """Where the kernels find the batch's and the bots' generators (rows: kernels.MAIN,
        RANDOM_BOT, GREEDY_BOT, PERFECT_BOT); rebuilt when a generator is replaced."""
        bots = self._bots
        generators = (self._rng, bots["random"].rng, bots["greedy"].rng, bots["perfect"].rng)
        if generators != self._address_generators:  # Generators compare by identity
            self._addresses = self._kernels.generator_addresses(list(generators))
            self._address_generators = generators  # held, so that the addresses stay valid
        return self._addresses

    def _player_bots(self) -> np.ndarray:
        """For each of ``self._players``, its bot (0 random, 1 greedy, 2 perfect) or -1 for a
        policy, which the kernels leave to Python."""
        players = tuple(self._players)
        if players != self._bot_players:
            self._player_bot = np.array(
                [BOT_NAMES.index(p.name) if isinstance(p, BatchedBot) else -1 for p in players],
                dtype=np.int64,
            )
            self._bot_players = players
        return self._player_bot

    def _numba_threads(self) -> Any:
        """A context in which numba's parallel loops use ``self.threads`` threads."""
        if self.threads == 1:
            return _NO_CONTEXT
        return _numba_threads(self._kernels.numba, self.threads)

    def _compiled_encode(
        self, encoding: str, rows: np.ndarray, own: np.ndarray, out: np.ndarray, scatter: bool
    ) -> np.ndarray:
        """Observations of the envs ``rows`` into ``out`` (row j, or row ``rows[j]`` when
        ``scatter``), as :meth:`encode`; returns their int8 masks."""
        k, t = self._kernels, self.tables
        places = k.PLACES[encoding]
        ids = np.empty((len(rows), places + 1), dtype=np.int32)  # scratch: the planes to copy
        masks = np.empty((len(rows), NUM_SLOTS if encoding == "slots" else MAX_LEGAL), np.int8)
        with self._numba_threads():
            k.observe[self.threads > 1](
                rows,
                scatter,
                self._board,
                own,
                self._score,
                self.target,
                k.observation_records(t, encoding),
                t.flat_planes,
                len(t.stacks),
                places,
                encoding == "afterstates",
                ids,
                out,
                masks,
            )
        return masks

    def _observation_and_mask(self) -> tuple[np.ndarray, np.ndarray]:
        """The agents' observations and their int8 masks (in one pass with the kernels)."""
        if self._kernels is None:
            return self._observe(slice(None)), self._mask_int8(self.encoding.name, self._board)
        obs = np.empty((self.num_envs, *self.single_observation_space.shape), np.float32)
        return obs, self._compiled_encode(self.encoding.name, self._rows, self._agent, obs, False)

    def _compiled_start(self, idx: np.ndarray) -> None:
        """New episodes in the envs ``idx`` (as :meth:`_start_episodes`); they are the
        current ply's envs afterwards."""
        k = self._kernels
        color = self._options.get("agent_color", self.agent_color_choice)
        first = self._options.get("first")
        k.start_episodes(
            idx,
            -1 if color is None else COLORS.index(color),
            -1 if first is None else COLORS.index(first),
            self._board,
            self._to_move,
            self._agent,
            self._starter,
            self._score,
            self._done,
            self._generator_addresses(),
        )
        if self.pool is not None:
            self._draw_opponents(idx)  # with the same generator, in Python
        if self.random_start:
            k.random_starts(
                idx,
                self.random_start,
                self.random_start_moves,
                self._board,
                self._to_move,
                self._agent,
                self._records,
                self._generator_addresses(),
                self._chosen,
                self._start_moves,
            )
        self._envs[: len(idx)] = idx

    def _compiled_moves(self, count: int, out: dict[str, np.ndarray]) -> None:
        """Play ``self._slot`` in the envs ``self._envs[:count]`` (as :meth:`_move`); tell the
        pool how its rounds ended."""
        ended = self._kernels.play_moves(
            self._envs,
            count,
            self._slot,
            self._board,
            self._to_move,
            self._agent,
            self._starter,
            self._score,
            self._done,
            self._records,
            self.episode == "round",
            self.reward_mode == "round",
            self.target,
            self._generator_addresses(),
            out["reward"],
            out["round_points"],
            out["_round_points"],
            self._ended,
        )
        if ended and self.pool is not None:
            idx = self._ended[:ended].copy()
            points = out["round_points"][idx]
            margin = points[:, 0] - points[:, 1]  # Red's
            self._record_snapshot_rounds(idx, np.where(self._agent[idx] == RED, margin, -margin))

    def _compiled_play_opponents(self, count: int, out: dict[str, np.ndarray]) -> None:
        """Let the opponents of the envs ``self._envs[:count]`` move until each waits for its
        agent (as :meth:`_play_opponents`): the bots' plies in a kernel, the policies' here."""
        for _ in range(10 * NUM_SLOTS):  # far more than any chain of opponent moves
            status, count = self._kernels.bot_plies(
                self._envs,
                count,
                self._board,
                self._to_move,
                self._agent,
                self._starter,
                self._score,
                self._done,
                self._opponent,
                self._player_bots(),
                self._records,
                self.episode == "round",
                self.reward_mode == "round",
                self.target,
                self._generator_addresses(),
                out["reward"],
                out["round_points"],
                out["_round_points"],
                self._ended,
                self._slot,
                self._draws,
            )
            if status == 0:
                return
            if status == 2:
                break
            self._policy_moves(self._envs[:count])
            self._compiled_moves(count, out)
        raise RuntimeError("the opponents did not hand the move back (a bug in buttonup_env)")

    def _policy_moves(self, ply: np.ndarray) -> None:
        """Fill in the policies' moves of the ply ``ply`` (where ``self._slot`` is -2): one
        inference call per policy for all the envs it plays in."""
        pending = ply[self._slot[ply] == -2]
        mover = self._to_move[pending]
        slots = np.empty(len(pending), dtype=np.int64)
        which = self._opponent[pending]
        for k in np.unique(which):
            sel = which == k
            slots[sel] = self._choices(self._players[k], pending[sel], mover[sel])
        boards = self._board[pending]
        legal = (slots >= 0) & (slots < NUM_SLOTS)
        legal[legal] = self.tables.legal[boards[legal], slots[legal]]
        if not legal.all():  # a broken policy file, say
            bad = np.flatnonzero(~legal)[0]
            player = self._players[self._opponent[pending[bad]]]
            board = " ".join(s or "." for s in self.tables.board(boards[bad]))
            raise ValueError(
                f"the opponent {player!r} made an illegal move: slot {slots[bad]} on {board!r}"
            )
        self._slot[pending] = slots

    def _compiled_step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """:meth:`step` with the kernels (``actions`` checked)."""
        n = self.num_envs
        out = self._new_out()
        illegal = np.empty(n, dtype=bool)
        raise_illegal = self.illegal_action == "raise"
        bad, count = self._kernels.agent_moves(
            actions,
            self.encoding.name == "slots",
            self._board,
            self._records,
            raise_illegal,
            self._slot,
            illegal,
            self._done,
            out["reward"],
            self._envs,
        )
        if bad >= 0 and raise_illegal:
            raise ValueError(f"illegal action in env {bad}: {self._illegal(bad, actions)}")
        self._compiled_moves(count, out)
        self._compiled_play_opponents(count, out)

        terminated = self._done.copy()
        info_extra: dict[str, Any] = {"illegal_action": illegal}
        ended = np.flatnonzero(terminated)
        if len(ended):
            final_obs = np.zeros((n, *self.single_observation_space.shape), np.float32)
            self._compiled_encode(self.encoding.name, ended, self._agent[ended], final_obs, True)
            info_extra["final_obs"] = final_obs
            info_extra["_final_obs"] = terminated
            self._compiled_start(ended)
            self._compiled_play_opponents(len(ended), out)  # the new episodes' opening moves
        obs, mask = self._observation_and_mask()
        info = self._info(out, mask)
        info.update(info_extra)
        return obs, out["reward"], terminated, np.zeros(n, dtype=bool), info

    # --- the Gymnasium API -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new episode in every env (seeding everything when ``seed`` is given)."""
        if seed is not None and (not is_whole_number(seed) or seed < 0):
            raise ValueError(f"seed={seed!r} is not allowed; use None or a whole number >= 0")
        options = reset_options(options)
        if seed is not None or not self._reset_called:
            self._seed_generators(None if seed is None else int(seed))
        self._options = options
        self._reset_called = True
        out = self._new_out()
        if self._kernels is None:
            self._start_episodes(np.arange(self.num_envs))
            self._play_opponents(out)
        else:
            self._compiled_start(np.arange(self.num_envs))
            self._compiled_play_opponents(self.num_envs, out)
        obs, mask = self._observation_and_mask()
        return obs, self._info(out, mask)

    def _check_actions(self, actions: Any) -> np.ndarray:
        array = np.asarray(actions)
        n = self.num_envs
        limit = self.single_action_space.n
        if array.shape != (n,) or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(
                f"actions must be an integer array of shape ({n},), one slot per env; got "
                f"{array.dtype} of shape {array.shape}"
            )
        if array.min() < 0 or array.max() >= limit:
            bad = np.flatnonzero((array < 0) | (array >= limit))[0]
            raise ValueError(
                f"action {array[bad]} of env {bad} is out of range; actions are 0 to {limit - 1}"
            )
        return array.astype(np.int64, copy=False)  # read, never written

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Every env's agent moves; the opponents reply; finished episodes restart."""
        if not self._reset_called:
            raise RuntimeError("call reset() before step()")
        actions = self._check_actions(actions)
        if self._kernels is not None:
            return self._compiled_step(actions)
        t = self.tables
        board = self._board
        if self.encoding.name == "slots":
            slots = actions
        else:
            slots = t.legal_slots[board, actions].astype(np.int64)
        legal = (slots >= 0) & t.legal[board, np.maximum(slots, 0)]
        if not legal.all():
            bad = int(np.flatnonzero(~legal)[0])
            if self.illegal_action == "raise":
                raise ValueError(f"illegal action in env {bad}: {self._illegal(bad, actions)}")
        out = self._new_out()
        illegal = ~legal
        out["reward"][illegal] = -1.0
        self._done[illegal] = True
        live = np.flatnonzero(legal)
        self._move(live, slots[live], out)
        self._play_opponents(out)

        terminated = self._done.copy()
        info_extra: dict[str, Any] = {"illegal_action": illegal}
        ended = np.flatnonzero(terminated)
        if len(ended):
            final_obs = np.zeros((self.num_envs, *self.single_observation_space.shape), np.float32)
            final_obs[ended] = self._observe(ended)
            info_extra["final_obs"] = final_obs
            info_extra["_final_obs"] = terminated
            self._start_episodes(ended)
            self._play_opponents(out)  # the new episodes' opening moves (they cannot end them)
        obs = self._observe(slice(None))
        info = self._info(out)
        info.update(info_extra)
        return obs, out["reward"], terminated, np.zeros(self.num_envs, dtype=bool), info

    def _illegal(self, env: int, actions: np.ndarray) -> str:
        state = self._state(env)
        legal = state.legal_moves()
        if self.encoding.name == "slots":
            return state.why_illegal(int(actions[env]))
        return (
            f"action {int(actions[env])} has no legal move behind it; the actions are the legal "
            f"slots {list(legal)} in order, so 0 to {len(legal) - 1}"
        )

    def states(self) -> list[State]:
        """Every env's current position (for checking and debugging; not fast)."""
        if not self._reset_called:
            raise RuntimeError("call reset() before states()")
        return [self._state(i) for i in range(self.num_envs)]

    def _state(self, i: int) -> State:
        """Env ``i``'s position as a :class:`State`."""
        return State(
            self.tables.board(int(self._board[i])),
            COLORS[self._to_move[i]],
            {"R": int(self._score[i, 0]), "B": int(self._score[i, 1])},
            self.target,
            COLORS[self._starter[i]],
        )

    # --- saving and restoring ------------------------------------------------------------------
    STATE_ARRAYS = ("_board", "_to_move", "_agent", "_starter", "_score", "_opponent", "_done")
    """The arrays :meth:`get_state` saves by these names, under ``"arrays"``."""

    @property
    def num_opponents(self) -> int:
        """The opponents the batch holds (the bots, then the policies or snapshots that have
        played): the numbers in the ``_opponent`` array run from 0 to this, excluded."""
        return len(self._players)

    def get_state(self) -> dict[str, Any]:
        """Everything the batch needs to go on exactly from here, as plain JSON-ready data.

        The positions, scores, agent colours, opponents and every generator's state (the
        batch's own, each bot's and the policies'); with an
        :class:`~buttonup_env.players.selfplay.OpponentPool`, the names of the snapshots that have
        played, in the order the batch loaded them, and the learner's results against them
        (what prioritized self-play draws by). Restore it with
        :meth:`set_state` on a batch built with the same arguments: the two then step the same.
        ``training/train.py`` keeps it in its checkpoints, so that a resumed run goes on as if
        it had never stopped.
        """
        if not self._reset_called:
            raise RuntimeError("call reset() before get_state()")
        players = [p for p in self._players if isinstance(p, BatchedPolicy)]
        return {
            "num_envs": self.num_envs,
            "arrays": {name: getattr(self, name).tolist() for name in self.STATE_ARRAYS},
            "options": dict(self._options),
            "seed": self._np_random_seed,
            "rng": self._rng.bit_generator.state,
            "bots": {name: bot.rng.bit_generator.state for name, bot in self._bots.items()},
            "policy_rng": self._policy_rng.bit_generator.state,
            "snapshots": [] if self.pool is None else [Path(p).name for p in self._snapshot_ids],
            "results": {} if self.pool is None else copy.deepcopy(self.pool.results),
            "policies": len(players),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Go back to a state from :meth:`get_state` (of a batch with the same arguments).

        Raises ``ValueError`` when it cannot belong to this batch (another number of envs or
        of policy opponents, or a snapshot missing from the pool's folder).
        """
        if state.get("num_envs") != self.num_envs:
            raise ValueError(
                f"the saved state is of {state.get('num_envs')!r} envs; this batch has "
                f"{self.num_envs}"
            )
        snapshots = list(state["snapshots"])
        if self.pool is not None:
            self._players = [self._bots[name] for name in BOT_NAMES]
            self._snapshot_ids = {}
            for name in snapshots:
                path = self.pool.snapshot_dir / name
                if not path.is_file():
                    raise ValueError(
                        f"the saved state's opponent snapshot {name} is not in "
                        f"{self.pool.snapshot_dir}"
                    )
                self._snapshot_player(path)
        policies = sum(isinstance(p, BatchedPolicy) for p in self._players)
        if policies != state["policies"]:
            raise ValueError(
                f"the saved state has {state['policies']} policy opponents; this batch has "
                f"{policies}"
            )
        for name in self.STATE_ARRAYS:
            array = getattr(self, name)
            array[...] = np.asarray(state["arrays"][name], dtype=array.dtype)
        self._options = dict(state["options"])
        self._np_random_seed = state["seed"]
        self._rng.bit_generator.state = state["rng"]
        for name, bot in self._bots.items():
            bot.rng.bit_generator.state = state["bots"][name]
        self._policy_rng.bit_generator.state = state["policy_rng"]
        if self.pool is not None:
            self.pool.results = copy.deepcopy(state.get("results", {}))
        self._reset_called = True

    def observe(self) -> np.ndarray:
        """The agents' current observations (what the last ``reset`` or ``step`` returned,
        or the restored state's after :meth:`set_state`)."""
        if not self._reset_called:
            raise RuntimeError("call reset() before observe()")
        return self._observe(slice(None))

    @property
    def agent_colors(self) -> list[str]:
        """Each env's agent colour in the current episode."""
        return [COLORS[c] for c in self._agent]

    def render(self) -> tuple[str, ...] | None:
        """Text of every env's position with ``render_mode="ansi"`` (None without a mode)."""
        if self.render_mode is None or not self._reset_called:
            return None
        from .render import ansi

        return tuple(
            ansi(state, agent_color=color)
            for state, color in zip(self.states(), self.agent_colors, strict=True)
        )
