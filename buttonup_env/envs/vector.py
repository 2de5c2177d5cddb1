"""``ButtonUpVectorEnv``: thousands of ButtonUp-v1 games stepped together.

``gymnasium.make_vec("ButtonUp-v1", num_envs=N)`` returns it (``"ButtonUp-v0"``: with v0's
observation). The games are a
:class:`~buttonup_env.engine.batch.Batch` of the batched engine (:mod:`buttonup_env.engine`),
played by one of its backends: compiled numba kernels (``backend="numba"``, the default) or
numpy array operations (``backend="numpy"``, the readable reference that the tests replay with
the rules engine), the same games bit for bit. This module adds what makes them an env: the
arguments, the opponents (the engine plays the bots; an ONNX policy is one batched inference
call for all the envs it plays in), seeding, autoreset, the info dict, saving and restoring.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ..engine.backend import make_backend
from ..engine.batch import (
    BOT_KINDS,
    MAX_PLIES,
    POLICY_MOVE,
    RED,
    Batch,
    Generators,
    Outcome,
    Rules,
    Status,
)
from ..engine.tables import game_tables
from ..game.encoding import ENCODINGS, Encoding
from ..game.rules import (
    COLORS,
    DEFAULT_TARGET,
    MAX_ROUND_MARGIN,
    NUM_SLOTS,
    State,
    check_target,
    is_whole_number,
)
from ..players.batched import BotPlayer, PolicyPlayer, Positions, check_legal, choose_together
from ..players.bots import BOT_NAMES
from ..players.shipped import shipped_policies
from .interface import (
    COLOR_CHOICES,
    EPISODES,
    ILLEGAL_ACTIONS,
    REWARDS,
    check_choice,
    interrupted,
    reset_options,
)
from .saved_state import STATE_ARRAYS, Shape, check_state

ENCODING_SIZES = {name: encoding.size for name, encoding in ENCODINGS.items()}
"""Observation sizes of the encodings (see :mod:`buttonup_env.game.encoding`)."""

_COLOR_NAMES = np.array(COLORS)  # "R", "B" by colour number, for info["agent_color"]


def check_random_start(
    random_start: float, moves: int, episode: str, agent_color: str | None
) -> None:
    """``ValueError`` in one sentence unless ``random_start`` is a probability, ``moves``
    (``random_start_moves``) 1 to 6, and random starts come with the agent's colour drawn."""
    if not (isinstance(random_start, int | float) and 0.0 <= random_start <= 1.0):
        raise ValueError(
            f"random_start={random_start!r} is not allowed; use a probability in [0, 1]"
        )
    if not is_whole_number(moves) or not 1 <= moves <= 6:
        raise ValueError(
            f"random_start_moves={moves!r} is not allowed; use 1 to 6 (a "
            "round has 8 moves and a start must leave the agent a decision)"
        )
    if random_start and agent_color is not None:
        raise ValueError(
            f"random_start={random_start!r} needs agent_color=None: the agent takes the side "
            "to move after the random moves"
        )


def check_random_score(random_score: float, episode: str) -> None:
    """``ValueError`` in one sentence unless ``random_score`` is a probability, and random
    scores come with match episodes."""
    if not (isinstance(random_score, int | float) and 0.0 <= random_score <= 1.0):
        raise ValueError(
            f"random_score={random_score!r} is not allowed; use a probability in [0, 1]"
        )
    if random_score and episode != "match":
        raise ValueError(
            f"random_score={random_score!r} needs episode='match': a one-round episode is "
            "played from 0-0"
        )


def check_truncate_rounds(truncate_rounds: bool, episode: str) -> None:
    """``ValueError`` in one sentence unless ``truncate_rounds`` is a bool, True only with
    match episodes."""
    if truncate_rounds not in (False, True) or (truncate_rounds and episode != "match"):
        raise ValueError(
            f"truncate_rounds={truncate_rounds!r} is not allowed; use False, or True with "
            "episode='match' (a one-round episode ends with its round)"
        )


def _batch_array(field: str) -> property:
    return property(
        lambda self: getattr(self._batch, field),
        doc=f"The batch's ``{field}`` array (:class:`~buttonup_env.engine.batch.Batch`).",
    )


# --- the environment -------------------------------------------------------------------------


class ButtonUpVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` games of ButtonUp-v1, stepped together by compiled kernels.

    ## Description
    The same game as :class:`~buttonup_env.envs.env.ButtonUpEnv`, argument for argument: each of the
    ``num_envs`` envs is one agent against an opponent inside the env, whose moves (extra
    turns included) are played inside :meth:`step`. Nothing loops over the envs in Python: a
    step is look-ups in :class:`~buttonup_env.engine.tables.GameTables`, where every board the game
    can reach has a number.

    The games are played by the batched engine (:mod:`buttonup_env.engine`): a
    :class:`~buttonup_env.engine.batch.Batch` of arrays and a backend chosen once. The default
    backend, ``"numba"`` (:class:`~buttonup_env.engine.numba_backend.NumbaBackend`), runs
    compiled kernels: flat passes over the whole batch for the agents' moves, the bots' replies,
    the ends of rounds, new episodes and the observations. Nothing compiles on import; the first
    ``reset`` and ``step`` of a process compile the kernels (a few seconds), and numba caches the
    machine code on disk, so later processes load it in a fraction of a second (the cache lives
    next to the package, or in numba's user-wide folder, ``~/.cache/numba``, when the package
    folder is read-only; ``$NUMBA_CACHE_DIR`` overrides both). ``backend="numpy"``
    (:class:`~buttonup_env.engine.numpy_backend.NumpyBackend`) plays the same games, bit for
    bit, with numpy array operations: the readable reference, with no compilation, several
    times slower. A policy opponent (an ONNX file, a shipped policy, the pool's snapshots) is
    one batched inference call per ply of its moves, between the engine's calls.

    ## Action Space
    ``MultiDiscrete([9] * num_envs)``: the slot each env's agent lifts (with
    ``encoding="ring"`` or ``"afterstates"``: ``MultiDiscrete([3] * num_envs)``, action ``a``
    lifting the ``a``-th legal slot, as :class:`~buttonup_env.envs.wrappers.RingObservation` does).
    Actions must be an integer array of shape ``(num_envs,)``; values outside the action
    range raise ``ValueError``; a legal-range value that is not a legal move is an illegal
    action (see Rewards).

    ## Observation Space
    ``Box(0, 1, (num_envs, 247), float32)``: each row is exactly ButtonUp-v1's observation of
    that env's position, score and the round's starter, from its agent's side (``encoding``
    ``"slots"``: ButtonUp-v0's, 246). ``encoding="ring"`` (729), ``"afterstates"`` (735) or
    ``"match-afterstates"`` (864) give the view encodings of :mod:`buttonup_env.game.encoding`
    instead.

    ## Starting State, Rewards, Episode End
    As ButtonUp-v1: each env draws its agent's colour (unless ``agent_color``), the first
    round's starter and every round's layout from the env's seeded generator; later rounds
    follow the starting rule; rewards are ButtonUp-v1's for ``reward`` and ``episode``; an
    illegal action ends that env's episode with -1 (``illegal_action="raise"``:
    ``ValueError``, and no env moves). Episodes are never truncated (but with ``truncate_rounds``).

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
    ``gymnasium.make_vec("ButtonUp-v1", num_envs=N, ...)`` or ``ButtonUpVectorEnv(N, ...)``:

    * ``num_envs``: how many games (>= 1).
    * ``opponent``: ``"random"`` (default), ``"greedy"``, ``"margin"``, ``"perfect"`` (the
      match, read at each env's score and starter; the round in one-round episodes), the name
      of a shipped
      policy (``"buttonup-ppo"``), a path to an exported ``.onnx`` policy (or a policy loaded
      with :func:`buttonup_env.load_policy`), or an
      :class:`~buttonup_env.players.selfplay.OpponentPool` (the training pool: a new opponent per
      episode, for each env).
    * ``agent_color``, ``target``, ``reward``, ``episode``, ``illegal_action``: as ButtonUp-v1.
    * ``encoding``: ``"match-slots"`` (default, ButtonUp-v1's observation), ``"slots"``
      (ButtonUp-v0's), ``"ring"``, ``"afterstates"`` or ``"match-afterstates"``, or one of
      those encodings of :mod:`buttonup_env.game.encoding` (such as
      another env's :attr:`encoding`). The attribute ``encoding`` is the encoding itself, an
      object with ``name`` and ``size``, as ``ButtonUpEnv.encoding`` and a policy's are.
    * ``random_start`` (default 0, for training; needs ``agent_color=None``): the probability
      that an episode's first round starts after 1 to ``random_start_moves`` (default 6)
      uniformly random moves, played by whoever is to move, the agent then taking the side to
      move, so that it meets positions off the usual paths.
      0 is ButtonUp-v1's game.
    * ``truncate_rounds`` (default False, for training; needs ``episode="match"``): each round
      of a match ends an episode for the learner, truncated (not terminated: the match goes
      on), its final observation the next round's first (the same as the step's observation).
      A learner then bootstraps a round's end from its own value of the next round's start, as
      a time limit's end is bootstrapped, instead of waiting for the match's result; the match's
      last round is terminated as before.
    * ``random_score`` (default 0, for training; needs ``episode="match"``): the probability
      that a match starts at a score drawn below the target (each player's points 0 to
      target - 1), so that the agent meets every score, not only those its matches reach. The
      first round's starter has the fewer points, as the starting rule has it after a round
      (on equal points either starts): a match reaches no other score and starter. 0 is
      ButtonUp-v1's game.
    * ``backend``: ``"numba"`` (default, compiled) or ``"numpy"`` (the reference). Both give
      the same games, observations and generator states for the same seed, on one thread: to
      use more cores, step a batch in each of several processes.

    A ``step()`` or ``reset()`` that an exception stops part-way (a policy opponent that
    fails, Ctrl-C) leaves the batch half-played: the next ``step()`` and :meth:`get_state`
    raise ``RuntimeError`` until ``reset()`` (or :meth:`set_state`).

    ``reset(seed=...)`` makes the whole batch reproducible: the draws, the bots' tie-breaks
    and the sampling of stochastic policies all come from generators seeded from it.
    ``reset(options={"agent_color": ..., "first": ...})`` fixes them for every env's episode.

    ## Version History
    * v1: ``"match-slots"`` by default (the round's starter in the observation), the match
      encodings, and ``"perfect"`` playing the match (see ButtonUp-v1).
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
        encoding: str | Encoding = "match-slots",
        render_mode: str | None = None,
        random_start: float = 0.0,
        random_start_moves: int = 6,
        backend: str = "numba",
        random_score: float = 0.0,
        truncate_rounds: bool = False,
    ) -> None:
        encoding = getattr(encoding, "name", encoding)  # an encoding, or its name
        self._check_arguments(
            num_envs, agent_color, reward, episode, illegal_action, encoding, render_mode
        )
        check_random_start(random_start, random_start_moves, episode, agent_color)
        check_random_score(random_score, episode)
        check_truncate_rounds(truncate_rounds, episode)
        self.truncate_rounds = bool(truncate_rounds)
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
        self.random_score = float(random_score)
        self.round_reward_weight = 1.0
        """With ``reward="round"``: how much every round's margin / 18 counts in the reward
        (1: as ButtonUp-v1 pays it). Training may change it between steps, to fade the
        rounds' margins out of a match's reward (``training/train.py --margin-weight-end``);
        it is not saved by :meth:`get_state`."""
        self.tables = game_tables()
        rules = Rules(
            target=self.target,
            round_episodes=episode == "round",
            round_reward=reward == "round",
            random_start=self.random_start,
            random_start_moves=self.random_start_moves,
        )
        self._backend = make_backend(backend, self.tables, rules, self.num_envs)
        self.backend: str = backend
        """The engine's backend: ``"numba"`` or ``"numpy"``."""

        actions = ENCODINGS[encoding].actions
        self.single_action_space = spaces.Discrete(actions)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        size = ENCODING_SIZES[encoding]
        self.single_observation_space = spaces.Box(0.0, 1.0, (size,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)

        objective = "round" if episode == "round" else "match"  # what "perfect" plays for
        self._bots = {name: BotPlayer(name, self.tables, objective) for name in BOT_NAMES}
        self.pool = None
        self._players: list[Any] = []
        self._set_opponent(opponent)
        if opponent == "perfect" or getattr(getattr(self.pool, "mix", None), "perfect", 0):
            self._bots["perfect"].check_target(self.target)

        self._batch = Batch.zeros(self.num_envs)
        self._all = np.arange(self.num_envs)
        self._kinds_of: tuple[Any, ...] = ()
        self._kinds = np.zeros(0, dtype=np.int64)
        self._reset_called = False
        self._unfinished: str | None = None
        """The call (``"step()"``, ``"reset()"``) an exception stopped part-way, until the
        next reset or :meth:`set_state`: the batch is then half-played."""
        self._options: dict[str, Any] = {}
        self._seed_generators(None)

    def _check_arguments(
        self,
        num_envs: int,
        agent_color: object,
        reward: object,
        episode: object,
        illegal_action: object,
        encoding: object,
        render_mode: object,
    ) -> None:
        """``ValueError`` in one sentence for an argument the env does not take."""
        if not is_whole_number(num_envs) or num_envs < 1:
            raise ValueError(f"num_envs={num_envs!r} is not allowed; use a whole number >= 1")
        check_choice("agent_color", agent_color, COLOR_CHOICES)
        check_choice("reward", reward, REWARDS)
        check_choice("episode", episode, EPISODES)
        check_choice("illegal_action", illegal_action, ILLEGAL_ACTIONS)
        check_choice("encoding", encoding, tuple(ENCODING_SIZES))
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))

    # The batch's arrays, by the names get_state saves them under.
    _board = _batch_array("board")
    _to_move = _batch_array("to_move")
    _agent = _batch_array("agent")
    _starter = _batch_array("starter")
    _score = _batch_array("score")
    _opponent = _batch_array("opponent")
    _done = _batch_array("done")

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
        self._players = [PolicyPlayer(repr(policy), policy, self.tables)]

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
        self._batch.opponent[idx] = opponent

    def _record_snapshot_rounds(self, idx: np.ndarray, agent_margin: np.ndarray) -> None:
        """Tell the pool how the rounds in ``idx`` against its snapshots ended."""
        opponent = self._batch.opponent[idx]
        snapshot = opponent >= len(BOT_NAMES)  # the players after the bots are snapshots
        if not snapshot.any():
            return
        scores = (np.sign(agent_margin) + 1) / 2  # 1 won, 0.5 drawn, 0 lost
        for index in np.unique(opponent[snapshot]):  # only those whose rounds just ended
            name = self._players[index].policy.path.name
            self.pool.record(name, scores[opponent == index])  # type: ignore[union-attr]

    def _snapshot_player(self, path: Path) -> int:
        index = self._snapshot_ids.get(path)
        if index is None:
            policy = self.pool.snapshot_policy(path)  # type: ignore[union-attr]
            player = PolicyPlayer(repr(policy), policy, self.tables, self._policy_rng)
            index = self._snapshot_ids[path] = len(self._players)
            self._players.append(player)
        return index

    def _player_kinds(self) -> np.ndarray:
        """Each player's kind for the engine: its bot kind, or ``POLICY`` for a policy, whose
        moves the env chooses (rebuilt when the players change)."""
        players = tuple(self._players)
        if players != self._kinds_of:
            self._kinds = np.array([player.kind for player in players], dtype=np.int64)
            self._kinds_of = players
        return self._kinds

    # --- seeding -----------------------------------------------------------------------------
    def _seed_generators(self, seed: int | None) -> None:
        sequence = np.random.SeedSequence(seed)
        main, random_bot, greedy, margin, policies, perfect = sequence.spawn(6)
        self._rng = np.random.default_rng(main)
        self._np_random = self._rng
        self._np_random_seed = seed
        children = {"random": random_bot, "greedy": greedy, "margin": margin, "perfect": perfect}
        for name, child in children.items():
            self._bots[name].rng = np.random.default_rng(child)
        self._policy_rng = np.random.default_rng(policies)
        for player in self._players:
            if isinstance(player, PolicyPlayer):
                player.rng = self._policy_rng
        bots = tuple(self._bots[name].rng for name in BOT_KINDS)
        self._backend.generators = Generators(self._rng, bots)  # type: ignore[arg-type]

    # --- observations ------------------------------------------------------------------------
    def encode(self, encoding: str, idx: np.ndarray | slice, own: np.ndarray) -> np.ndarray:
        """Observations of the envs ``idx`` in ``encoding``, from the side of ``own`` (one
        colour per env: 0 Red, 1 Black), as the single env's encodings give them."""
        envs = np.ascontiguousarray(self._all[idx])
        own = np.array(np.broadcast_to(own, envs.shape), dtype=np.int64)  # writable, C order
        return self._backend.observe(self._batch, encoding, envs, own)[0]

    def action_masks(self) -> np.ndarray:
        """Boolean masks of the legal actions, (num_envs, 9) or (num_envs, 3)."""
        if not self._reset_called:
            raise RuntimeError("call reset() before action_masks()")
        return self._backend.masks(self.encoding.name, self._batch.board).view(bool)

    def _observation_and_mask(self) -> tuple[np.ndarray, np.ndarray]:
        """The agents' observations and their int8 masks."""
        return self._backend.observe(self._batch, self.encoding.name, self._all, self._batch.agent)

    # --- the game ----------------------------------------------------------------------------
    def _start_episodes(self, idx: np.ndarray) -> None:
        """New matches (or rounds) in the envs ``idx``: colours, starters, layouts, then the
        opponents and the random starts. They are the engine's current ply afterwards."""
        color = self._options.get("agent_color", self.agent_color_choice)
        first = self._options.get("first")
        self._backend.start_episodes(
            self._batch,
            idx,
            -1 if color is None else COLORS.index(color),
            -1 if first is None else COLORS.index(first),
        )
        self._draw_opponents(idx)  # from the batch's own generator, after the layouts
        self._backend.random_starts(self._batch, idx)
        if self.random_score:
            self._random_scores(idx)

    def _random_scores(self, idx: np.ndarray) -> None:
        """With probability ``random_score``, a match in ``idx`` starts at a score below the
        target: two points drawn uniformly, the fewer given to the round's starter (the
        starting rule; the starter and any random moves are already played). From the batch's
        own generator, after the opponents: the same draws for both backends."""
        rng, target = self._rng, self.target
        drawn = idx[rng.random(len(idx)) < self.random_score]
        points = np.sort(rng.integers(0, target, size=(len(drawn), 2)), axis=1)
        starts = self._batch.starter[drawn] == RED
        self._batch.score[drawn] = np.where(starts[:, None], points, points[:, ::-1])

    def _play_moves(self, count: int, out: Outcome) -> None:
        """Play the engine's current ply of ``count`` envs; tell the pool how its rounds
        ended."""
        ended = self._backend.play_moves(self._batch, count, out)
        if ended and self.pool is not None:
            idx = self._backend.ply.ended[:ended].copy()
            points = out.round_points[idx]
            margin = points[:, 0] - points[:, 1]  # Red's
            agent_margin = np.where(self._batch.agent[idx] == RED, margin, -margin)
            self._record_snapshot_rounds(idx, agent_margin)

    def _play_opponents(self, count: int, out: Outcome) -> None:
        """Let the opponents of the ply's ``count`` envs move until each waits for its agent:
        the engine plays the bots; the policies choose here, one call per policy a ply."""
        for _ in range(MAX_PLIES):
            status, count = self._backend.bot_plies(self._batch, count, self._player_kinds(), out)
            if status == Status.WAITING:
                return
            if status == Status.RUNAWAY:
                break
            self._policy_moves(self._backend.ply.envs[:count])
            self._play_moves(count, out)
        raise RuntimeError("the opponents did not hand the move back (a bug in buttonup_env)")

    def _policy_moves(self, ply: np.ndarray) -> None:
        """Fill in the policies' moves of the ply ``ply`` (where the engine's slot is
        ``POLICY_MOVE``): one inference call per policy for all the envs it plays in, and one
        encoding of the observations for all the policies that read the same encoding."""
        slot = self._backend.ply.slot
        pending = ply[slot[ply] == POLICY_MOVE]
        which = self._batch.opponent[pending]
        order = np.argsort(which, kind="stable")  # by player; within one, in the ply's order
        pending, which = pending[order], which[order]
        numbers, counts = np.unique(which, return_counts=True)
        players = [self._players[k] for k in numbers]
        boards = self._batch.board[pending]
        mover = self._batch.to_move[pending]
        slots = np.empty(len(pending), dtype=np.int64)
        encodings = [None if p.encoding is None else p.encoding.name for p in players]
        ends = np.cumsum(counts)
        for i, player in enumerate(players):  # a bot that reads the match: its own call
            if encodings[i] is None:
                rows = np.arange(ends[i] - counts[i], ends[i])
                envs = pending[rows]
                slots[rows] = player.choose(
                    Positions(
                        boards[rows],
                        mover[rows],
                        self._batch.score[envs],
                        self.target,
                        self._batch.starter[envs],
                    )
                )
        for name in dict.fromkeys(e for e in encodings if e is not None):  # by encoding
            mine = [i for i, e in enumerate(encodings) if e == name]
            rows = (
                slice(None)  # one encoding (a run's pool): every row, in order
                if len(mine) == len(players)
                else np.concatenate([np.arange(ends[i] - counts[i], ends[i]) for i in mine])
            )
            observations = self.encode(name, pending[rows], mover[rows])
            group = [players[i] for i in mine]
            slots[rows] = choose_together(group, counts[mine], boards[rows], observations)
        check_legal(self.tables, boards, slots, lambda row: self._players[which[row]].name)
        slot[pending] = slots

    def _info(self, out: Outcome, mask: np.ndarray) -> dict[str, Any]:
        info: dict[str, Any] = {
            "action_mask": mask,
            "agent_color": _COLOR_NAMES[self._batch.agent],
        }
        if out.has_points.any():
            info["round_points"] = out.round_points
            info["_round_points"] = out.has_points
        return info

    # --- the Gymnasium API -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new episode in every env (seeding everything when ``seed`` is given)."""
        if seed is not None and (not is_whole_number(seed) or seed < 0):
            raise ValueError(f"seed={seed!r} is not allowed; use None or a whole number >= 0")
        options = reset_options(options)
        self._unfinished = "reset()"
        if seed is not None or not self._reset_called:
            self._seed_generators(None if seed is None else int(seed))
        self._options = options
        self._reset_called = True
        out = Outcome.zeros(self.num_envs)
        self._start_episodes(self._all)
        self._play_opponents(self.num_envs, out)
        obs, mask = self._observation_and_mask()
        self._unfinished = None
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
        if self._unfinished is not None:
            raise interrupted(self._unfinished)
        actions = self._check_actions(actions)
        n = self.num_envs
        out = Outcome.zeros(n)
        raise_illegal = self.illegal_action == "raise"
        self._unfinished = "step()"  # until every env waits for its agent again
        bad, count = self._backend.agent_moves(
            self._batch, actions, self.encoding.actions == NUM_SLOTS, raise_illegal, out
        )
        if bad >= 0 and raise_illegal:
            self._unfinished = None  # no env moved
            raise ValueError(f"illegal action in env {bad}: {self._illegal(bad, actions)}")
        self._play_moves(count, out)
        self._play_opponents(count, out)
        if self.reward_mode == "round" and self.round_reward_weight != 1.0:
            self._weigh_margins(out)

        terminated = self._batch.done.copy()
        info_extra: dict[str, Any] = {"illegal_action": out.illegal}
        ended = np.flatnonzero(terminated)
        if len(ended):
            final_obs = np.zeros((n, *self.single_observation_space.shape), np.float32)
            agents = self._batch.agent[ended]
            self._backend.observe(self._batch, self.encoding.name, ended, agents, final_obs)
            info_extra["final_obs"] = final_obs
            info_extra["_final_obs"] = terminated
            self._start_episodes(ended)
            self._play_opponents(len(ended), out)  # the new episodes' opening moves
        obs, mask = self._observation_and_mask()
        truncated = np.zeros(n, dtype=bool)
        if self.truncate_rounds:  # a round ended and the match goes on: its next observation
            truncated = out.has_points & ~terminated  # is the final one of the round's episode
            if truncated.any():
                final_obs = info_extra.get("final_obs")
                if final_obs is None:
                    final_obs = np.zeros((n, *self.single_observation_space.shape), np.float32)
                final_obs[truncated] = obs[truncated]
                info_extra["final_obs"] = final_obs
                info_extra["_final_obs"] = terminated | truncated
        info = self._info(out, mask)
        info.update(info_extra)
        self._unfinished = None
        return obs, out.reward, terminated, truncated, info

    def _weigh_margins(self, out: Outcome) -> None:
        """Pay the rounds that ended in this step their margin / 18 times
        :attr:`round_reward_weight`, instead of once (before any episode restarts: the
        agents are those of the rounds)."""
        ended = np.flatnonzero(out.has_points)
        points = out.round_points[ended]
        margin = (points[:, 0] - points[:, 1]) / MAX_ROUND_MARGIN  # Red's
        agent = np.where(self._batch.agent[ended] == RED, margin, -margin)
        out.reward[ended] += (self.round_reward_weight - 1.0) * agent

    def _illegal(self, env: int, actions: np.ndarray) -> str:
        state = self._state(env)
        legal = state.legal_moves()
        if self.encoding.actions == NUM_SLOTS:
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
        batch = self._batch
        return State(
            self.tables.board(int(batch.board[i])),
            COLORS[batch.to_move[i]],
            {"R": int(batch.score[i, 0]), "B": int(batch.score[i, 1])},
            self.target,
            COLORS[batch.starter[i]],
        )

    # --- saving and restoring ------------------------------------------------------------------
    STATE_ARRAYS = STATE_ARRAYS
    """The arrays :meth:`get_state` saves by these names, under ``"arrays"``: the batch's
    (:class:`~buttonup_env.engine.batch.Batch`) fields of those names, without the
    underscore."""

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
        if self._unfinished is not None:  # a half-played batch is no state to go on from
            raise interrupted(self._unfinished, "get_state()")
        players = [p for p in self._players if isinstance(p, PolicyPlayer)]
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

        Every part of ``state`` is checked before anything is restored
        (:mod:`buttonup_env.envs.saved_state`): its keys, each array's shape, type and range
        (a board number, a colour, a score a match can reach, an opponent the batch holds),
        the batch at rest (each agent to move on a board with a move to make), the reset
        options, every generator's state, and the opponents (as many envs and policies as
        this batch, each snapshot a file of the pool's folder). Raises ``ValueError`` in one
        sentence for a state that cannot belong to this batch; nothing it accepts can crash
        a later step.
        """
        policies = sum(isinstance(p, PolicyPlayer) for p in self._players)
        shape = Shape(
            num_envs=self.num_envs,
            tables=self.tables,
            target=self.target,
            snapshot_dir=None if self.pool is None else self.pool.snapshot_dir,
            players=len(self._players),
            policies=policies,
        )
        checked = check_state(state, shape)
        if self.pool is not None:
            self._players = [self._bots[name] for name in BOT_NAMES]
            self._snapshot_ids = {}
            for path in checked.snapshots:
                self._snapshot_player(path)
        for name, array in checked.arrays.items():
            getattr(self, name)[...] = array
        self._options = dict(state["options"])
        self._np_random_seed = state["seed"]
        self._rng.bit_generator.state = state["rng"]
        for name, bot in self._bots.items():
            bot.rng.bit_generator.state = state["bots"][name]
        self._policy_rng.bit_generator.state = state["policy_rng"]
        if self.pool is not None:
            self.pool.results = copy.deepcopy(state["results"])
        self._reset_called = True
        self._unfinished = None

    def observe(self) -> np.ndarray:
        """The agents' current observations (what the last ``reset`` or ``step`` returned,
        or the restored state's after :meth:`set_state`)."""
        if not self._reset_called:
            raise RuntimeError("call reset() before observe()")
        return self._observation_and_mask()[0]

    @property
    def agent_colors(self) -> list[str]:
        """Each env's agent colour in the current episode."""
        return [COLORS[c] for c in self._batch.agent]

    def render(self) -> tuple[str, ...] | None:
        """Text of every env's position with ``render_mode="ansi"`` (None without a mode)."""
        if self.render_mode is None or not self._reset_called:
            return None
        from .render import ansi

        return tuple(
            ansi(state, agent_color=color)
            for state, color in zip(self.states(), self.agent_colors, strict=True)
        )
