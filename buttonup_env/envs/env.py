"""The ``ButtonUp-v1`` Gymnasium environment (and ``ButtonUp-v0``, its observation without the
round's starter)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..game.encoding import ENCODINGS, legal_mask
from ..game.rules import (
    DEFAULT_TARGET,
    NUM_SLOTS,
    Color,
    State,
    check_target,
    is_whole_number,
    other,
    random_layout,
    round_points,
)
from ..players.bots import BOT_NAMES, Player, check_target_for, graded_p, make_bot
from ..players.shipped import shipped_policies
from .interface import (
    COLOR_CHOICES,
    EPISODES,
    ILLEGAL_ACTIONS,
    OBSERVATIONS,
    RENDER_MODES,
    REWARDS,
    RenderModes,
    action_slot,
    as_slot,
    check_choice,
    interrupted,
    match_reward,
    reset_options,
    round_reward,
)
from .render import EnvRenderer


def make_opponent(
    spec: str | Path | Player, seed: int | None = None, objective: str = "match"
) -> Player:
    """A player from an opponent spec: ``"random"``, ``"greedy"``, ``"margin"``,
    ``"perfect"``, a graded ``"perfect-P"`` (a bot's random choices drawn from ``seed``), the
    name of a shipped policy (``"buttonup-ppo"``), a path to an exported policy, or any object
    with ``act(state)``. ``objective`` is what ``perfect`` and ``perfect-P`` play for: the match,
    or in a one-round episode the round (:class:`~buttonup_env.players.bots.PerfectBot`)."""
    if isinstance(spec, str) and (spec in BOT_NAMES or graded_p(spec) is not None):
        return make_bot(spec, seed, objective)
    if isinstance(spec, str | Path):
        path = Path(spec)
        if spec in shipped_policies() or path.suffix in (".onnx", ".zip") or path.exists():
            from ..players.policy import load_policy

            return load_policy(spec)
        raise ValueError(
            f"opponent {str(spec)!r} is not a bot name, a shipped policy or a policy file; use "
            f"{_opponent_choices()}"
        )
    if callable(getattr(spec, "act", None)):
        return spec
    raise ValueError(f"opponent {spec!r} has no act(state) method; use {_opponent_choices()}")


def _opponent_choices() -> str:
    names = ", ".join(repr(name) for name in (*BOT_NAMES, *shipped_policies()))
    return (
        f"one of {names}, a graded bot 'perfect-P' (e.g. 'perfect-0.3'), a path to an "
        "exported .onnx policy, or an object with act(state)"
    )


class ButtonUpEnv(gym.Env[np.ndarray, np.int64]):
    """Button Up!, one agent against an opponent that lives inside the environment.

    ## Description
    Button Up! is a two-player game of nine buttons — three red, three black, three white
    spies — on nine slots in a circle. A move lifts a stack that holds a white button and sows
    it clockwise from the bottom, one button on each following stack; a move whose last button
    lands on its own colour earns another turn. After eight moves one stack is left: each
    button scores its height, and the stronger colour scores the difference in points.
    Rounds are played until a player reaches the target. ``docs/rules.md`` has the full rules.

    One episode is one match (or one round, with ``episode="round"``). The agent plays one
    colour; the opponent's moves, its extra turns included, are played inside :meth:`step`.
    The agent's own extra turns come back as consecutive steps.

    ## Action Space
    ``Discrete(9)``: the slot to lift. A slot is legal when it holds a stack with at least one
    white button. :meth:`action_masks` gives the legal slots. An action outside ``Discrete(9)``
    (12, -1, 3.7, ``"3"``) raises ``ValueError``; a slot that is not legal in the position is
    an illegal action (see ``illegal_action``). A 0-d integer array is its slot.

    ## Observation Space
    ``Box(0, 1, (247,), float32)``, from the agent's point of view (the ``match-slots`` encoding
    of :mod:`buttonup_env.game.encoding`): for slot ``s``, height ``h`` (0 = bottom) and channel
    ``c`` (0 the agent's buttons, 1 the opponent's, 2 white), feature ``27*s + 3*h + c`` is 1
    when that button is there; feature 243 is the agent's score / target, 244 the opponent's
    score / target (both capped at 1), 245 is 1 / target, and 246 is 1 when the agent started
    the round under way (on equal scores it decides who starts the next round, so perfect play
    of the match needs it). ``ButtonUp-v0`` observes the first 246 (``encoding="slots"``).

    ## Starting State
    The agent's colour is ``agent_color`` or drawn at random; every round's layout is drawn
    uniformly among the 1,680 set-ups; the first round's starter is drawn at random (later
    rounds follow the starting rule: fewer points starts, on equal points whoever did not start
    the last round). All draws use the environment's seeded generator. If the opponent starts,
    its moves are already played when :meth:`reset` returns.

    ## Rewards
    * ``reward="match"`` (default): +1 on the step that wins the match, -1 on the step that
      loses it, 0 otherwise. With ``episode="round"``: +1 / -1 / 0 for winning, losing or
      tying the round.
    * ``reward="round"``: at the end of every round, the round's margin (the agent's strength
      minus the opponent's) divided by 18, the largest possible margin; plus the +1 / -1 of the
      match on its last step. With ``episode="round"``: the margin / 18 alone.
    * An illegal action (with ``illegal_action="end"``): -1, and the episode ends.

    ## Episode End
    Terminated when the match is decided (with ``episode="round"``, when the round ends) or
    after an illegal action with ``illegal_action="end"``. Never truncated: a round always has
    exactly eight moves, so a match always ends.

    ## Information
    ``info`` after :meth:`reset` and :meth:`step`:

    * ``action_mask`` (``int8``, 9): 1 on the legal slots. At the end of an episode, where no
      move exists, it is all ones (as in pgx), so masked sampling never fails; call
      ``reset()`` before the next ``step()`` (stepping a finished episode raises RuntimeError,
      and so does stepping after a ``step()`` or ``reset()`` that an exception stopped
      part-way: an opponent that failed, Ctrl-C).
    * ``state``: the :class:`~buttonup_env.game.rules.State` (position, score, target, the
      round's starter).
    * ``agent_color``: ``"R"`` or ``"B"``.
    * ``starter``: who started the round under way, ``"R"`` or ``"B"`` (also ``env.starter``).
    * ``opponent_moves``: the slots the opponent lifted during this step, in order.
    * ``round_points``: at the end of a round, the points of the round ``{"R": .., "B": ..}``.
    * ``illegal_action``: True when the step's action was illegal (only then present).

    ## Arguments
    ``gymnasium.make("ButtonUp-v1", ...)`` (``"ButtonUp-v0"``: with ``encoding="slots"``):

    * ``opponent``: ``"random"`` (default), ``"greedy"``, ``"margin"`` (plays every round for
      its largest margin), ``"perfect"`` (plays the game perfectly: the match, or with
      ``episode="round"`` the round, where it plays as ``"margin"``; a match to at most 100
      points, the targets the match is solved for), a graded bot ``"perfect-P"`` (a random move
      with probability P, else as ``"perfect"``), the name of a shipped
      policy (``"buttonup-ppo"``, see :mod:`buttonup_env.players.shipped`), a path to an exported
      ``.onnx`` policy, or any object with ``act(state) -> slot``. If it has ``reset(rng)``, it
      is called at every reset with the environment's generator. It can be replaced between
      episodes with :meth:`set_opponent`.
    * ``agent_color``: ``"R"``, ``"B"`` or ``None`` (default: drawn at every reset).
    * ``target``: points that win a match (default 15, at most
      :data:`~buttonup_env.game.rules.MAX_TARGET`, 1,000).
    * ``reward``: ``"match"`` (default) or ``"round"``, see Rewards.
    * ``episode``: ``"match"`` (default) or ``"round"``: one round per episode, from 0-0.
    * ``illegal_action``: ``"end"`` (default: episode ends with -1) or ``"raise"``
      (``ValueError``).
    * ``encoding``: the observation, ``"match-slots"`` (default, ``ButtonUp-v1``) or
      ``"slots"`` (``ButtonUp-v0``: without the starter).
    * ``render_mode``: ``"human"`` (a window drawn after every reset and step, with pygame
      installed, else the text board printed to stdout; :meth:`render` returns None),
      ``"ansi"`` (text) or ``"rgb_array"`` (a picture of the circle).

    ``reset(options=...)`` accepts ``{"agent_color": "R"|"B", "first": "R"|"B"}`` for one
    episode (:func:`buttonup_env.envs.interface.reset_options`): another value raises
    ``ValueError``, another key is ignored with a warning.

    ## Version History
    * v1: the observation says who started the round (feature 246: 247 floats), which perfect
      play of the match needs; ``info["starter"]``. The ``"perfect"`` opponent plays the
      match perfectly (the round in one-round episodes); ``"margin"`` plays every round for
      its largest margin, as ``"perfect"`` did.
    * v0: initial version (246 floats). Kept, so that policies trained on its observation go
      on loading and playing (their files name their encoding).
    """

    metadata = {"render_modes": RenderModes(RENDER_MODES), "render_fps": 2}  # noqa: RUF012

    def __init__(
        self,
        opponent: str | Path | Player = "random",
        agent_color: Color | None = None,
        target: int = DEFAULT_TARGET,
        reward: str = "match",
        episode: str = "match",
        illegal_action: str = "end",
        render_mode: str | None = None,
        encoding: str = "match-slots",
    ) -> None:
        check_choice("agent_color", agent_color, COLOR_CHOICES)
        check_choice("encoding", encoding, OBSERVATIONS)
        check_choice("reward", reward, REWARDS)
        check_choice("episode", episode, EPISODES)
        check_choice("illegal_action", illegal_action, ILLEGAL_ACTIONS)
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        target = check_target(target)
        self.objective = "round" if episode == "round" else "match"
        """What a perfect player plays for in this env's episodes."""
        self.opponent = make_opponent(opponent, objective=self.objective)
        check_target_for(self.opponent, target)
        self._next_opponent: Player | None = None
        self.agent_color_choice = agent_color
        self.target = target
        self.reward_mode = reward
        self.per_round = reward == "round"
        """Whether every round pays its margin (``reward="round"``)."""
        self.episode = episode
        self.illegal_action = illegal_action
        self.render_mode = render_mode
        self._renderer = EnvRenderer(render_mode, self.metadata["render_fps"])
        self.encoding = ENCODINGS[encoding]
        self.observation_space = spaces.Box(0.0, 1.0, (self.encoding.size,), np.float32)
        self.action_space = spaces.Discrete(NUM_SLOTS)
        self.state: State | None = None
        self.agent_color: Color = "R"
        self._done = False
        self._last_move: int | None = None
        self._unfinished: str | None = None
        """The call (``"step()"``, ``"reset()"``) an exception stopped part-way, until the
        next reset: the game is then half-played, and :meth:`step` refuses it."""

    # ------------------------------------------------------------------------------------------
    def set_opponent(self, opponent: str | Path | Player) -> None:
        """Replace the opponent from the next :meth:`reset` on (the current episode keeps its own).

        Takes the same values as the ``opponent`` argument; a bad one raises ``ValueError`` now.
        """
        player = make_opponent(opponent, objective=self.objective)
        check_target_for(player, self.target)
        self._next_opponent = player

    @property
    def starter(self) -> Color:
        """Who started the round under way (``RuntimeError`` before :meth:`reset`)."""
        if self.state is None:
            raise RuntimeError("call reset() before asking who started the round")
        return self.state.starter

    @property
    def episode_over(self) -> bool:
        """True from the step that ends the episode to the next reset."""
        return self._done

    def action_masks(self) -> np.ndarray:
        """Boolean mask of the legal slots (all True once the episode is over)."""
        return self._mask(bool)

    def _mask(self, dtype: type) -> np.ndarray:
        if self.state is None:
            raise RuntimeError("call reset() before action_masks()")
        if self._done:
            return np.ones(NUM_SLOTS, dtype=dtype)
        return legal_mask(self.state, dtype)

    def _obs(self) -> np.ndarray:
        assert self.state is not None
        return self.encoding.encode(self.state, self.agent_color)

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` completed with the mask, the state and the agent's colour."""
        info["action_mask"] = self._mask(np.int8)
        info["state"] = self.state
        info["agent_color"] = self.agent_color
        info["starter"] = self.state.starter if self.state is not None else None
        return info

    def _new_round(self, first: Color | None = None) -> None:
        """Set up a round: the match's first (``first`` starts) or the next one."""
        layout = random_layout(self.np_random)
        self._last_move = None
        if first is None:
            assert self.state is not None
            self.state = self.state.next_round(layout)
        else:
            self.state = State.new_round(layout, first, target=self.target)

    def _draw_color(self) -> Color:
        return "R" if self.np_random.integers(2) == 0 else "B"

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new match (or round); play the opponent's opening moves if it starts."""
        options = reset_options(options)
        self._unfinished = "reset()"
        super().reset(seed=seed)
        agent_color = options.get("agent_color", self.agent_color_choice)
        first = options.get("first")
        self.agent_color = self._draw_color() if agent_color is None else agent_color
        if first is None:
            first = self._draw_color()
        if self._next_opponent is not None:
            self.opponent, self._next_opponent = self._next_opponent, None
        reset_opponent = getattr(self.opponent, "reset", None)
        if callable(reset_opponent):
            reset_opponent(self.np_random)
        self._new_round(first)
        self._done = False
        self._last_move = None
        reward, info_extra = self._advance()
        # from a set-up a player makes at most 3 moves in a row (tests/test_rules.py), so the
        # opponent cannot finish a round before the agent moves
        assert reward == 0.0 and not self._done
        if self._renderer.human:
            self.render()
        self._unfinished = None
        return self._obs(), self._info(info_extra)

    def _advance(self) -> tuple[float, dict[str, Any]]:
        """Play the opponent until it is the agent's turn or the episode ends.

        Returns the reward earned meanwhile and the step's ``info`` without its mask and state
        (:meth:`_info` adds them). Called after every agent move; this is the hot path.
        """
        reward = 0.0
        opponent_moves: list[int] = []
        extra: dict[str, Any] = {"opponent_moves": opponent_moves}
        agent = self.agent_color
        opponent = self.opponent
        state = self.state
        assert state is not None
        while True:
            legal = state.legal_moves()
            if legal:
                if state.to_move == agent:
                    return reward, extra
                slot = as_slot(opponent.act(state))  # a 0-d array is its number, as in step()
                if not is_whole_number(slot) or slot not in legal:
                    raise ValueError(
                        f"the opponent {opponent!r} made an illegal move: {state.why_illegal(slot)}"
                    )
                slot = int(slot)
                self._last_move = slot
                self.state = state = state.child(slot)
                opponent_moves.append(slot)
                continue
            # the round is over
            strength = state.strength
            extra["round_points"] = round_points(strength)
            margin = strength[agent] - strength[other(agent)]
            reward += float(round_reward(margin, self.per_round, self.episode == "round"))
            if self.episode == "round":
                self._done = True
                return reward, extra
            if state.match_over:
                reward += match_reward(state.winner == agent)
                self._done = True
                return reward, extra
            self._new_round()
            state = self.state

    def step(
        self, action: np.int64 | int
    ) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Play the agent's move, then the opponent's until the agent moves again or it ends."""
        state = self.state
        if self._unfinished is not None:
            raise interrupted(self._unfinished)
        if state is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        slot = action_slot(action)  # ValueError outside Discrete(9)
        legal = state.legal_moves()
        if slot not in legal:
            message = state.why_illegal(slot)
            if self.illegal_action == "raise":
                raise ValueError(f"illegal action: {message}")
            self._done = True
            if self._renderer.human:
                self.render()
            return (
                self._obs(),
                -1.0,
                True,
                False,
                self._info({"illegal_action": True, "opponent_moves": []}),
            )
        self._unfinished = "step()"  # until the opponent has answered
        self._last_move = slot
        self.state = state.child(slot)
        reward, info = self._advance()
        if self._renderer.human:
            self.render()
        self._unfinished = None
        return self._obs(), reward, self._done, False, self._info(info)

    def render(self) -> str | np.ndarray | None:  # type: ignore[override]
        """Text (``ansi``) or a picture (``rgb_array``) of the position; None without a mode.

        With ``render_mode="human"`` it shows the position (reset and step already do) and
        returns None.
        """
        return self._renderer.render(self.state, self._last_move, self.agent_color)

    def close(self) -> None:
        """Close the window of ``render_mode="human"``, if one is open."""
        self._renderer.close()
