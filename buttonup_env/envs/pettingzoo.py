"""Button Up! as a PettingZoo AEC environment: both players are agents.

Needs the ``pettingzoo`` extra (``pip install buttonup-env[pettingzoo]``); the rest of the package
never imports this module. Following the PettingZoo convention::

    from buttonup_env.pettingzoo import env

    game = env(render_mode="ansi")
    game.reset(seed=0)
    for agent in game.agent_iter():
        observation, reward, termination, truncation, info = game.last()
        action = None if termination or truncation else int(observation["action_mask"].argmax())
        game.step(action)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from ..game.encoding import ENCODINGS, legal_mask
from ..game.rules import (
    DEFAULT_TARGET,
    NUM_SLOTS,
    Color,
    State,
    check_target,
    random_layout,
    round_points,
)
from .interface import (
    OBSERVATIONS,
    RENDER_MODES,
    REWARDS,
    action_slot,
    check_choice,
    interrupted,
    match_reward,
    reset_options,
    round_reward,
)
from .render import EnvRenderer

AGENT_COLORS: dict[str, Color] = {"red": "R", "black": "B"}
"""The agents and the colour each one plays."""

COLOR_AGENTS: dict[Color, str] = {color: agent for agent, color in AGENT_COLORS.items()}
"""The agent that plays each colour."""

RESET_OPTIONS = ("first",)
"""The keys of ``reset(options=...)``: who starts the first round (both colours are agents)."""

ObsDict = dict[str, np.ndarray]


def env(**kwargs: Any) -> AECEnv[str, ObsDict, np.int64]:
    """A :class:`ButtonUpAEC` in PettingZoo's standard wrappers for a masked, discrete game.

    An illegal action ends the game with -1 for the agent that played it and 0 for the other
    (``TerminateIllegalWrapper``); an action outside ``Discrete(9)`` fails an assertion
    (``AssertOutOfBoundsWrapper``); calls out of order (``step`` before ``reset``, ...) raise
    (``OrderEnforcingWrapper``). Keyword arguments go to :class:`ButtonUpAEC`.
    """
    game: AECEnv[str, ObsDict, np.int64] = ButtonUpAEC(**kwargs)
    game = wrappers.TerminateIllegalWrapper(game, illegal_reward=-1)
    game = wrappers.AssertOutOfBoundsWrapper(game)
    game = wrappers.OrderEnforcingWrapper(game)
    return game


class ButtonUpAEC(AECEnv[str, ObsDict, np.int64]):
    """Button Up!, Red against Black, both played by agents.

    ## Description
    Button Up! is a two-player game of nine buttons — three red, three black, three white
    spies — on nine slots in a circle. A move lifts a stack that holds a white button and sows
    it clockwise from the bottom, one button on each following stack; a move whose last button
    lands on its own colour earns another turn. After eight moves one stack is left: each
    button scores its height, and the stronger colour scores the difference in points.
    Rounds are played until a player reaches the target. ``docs/rules.md`` has the full rules.

    The agents are ``"red"`` (plays ``R``) and ``"black"`` (plays ``B``). One episode is one
    match; its rounds follow each other inside the episode. ``agent_selection`` is always the
    player to move, so an extra turn gives the same agent consecutive steps. Use
    :func:`env` to get it in PettingZoo's standard wrappers.

    ## Action Space
    ``Discrete(9)`` for each agent: the slot to lift. A slot is legal when it holds a stack
    with at least one white button; ``observation["action_mask"]`` gives the legal slots.

    ## Observation Space
    ``Dict`` with two entries, for each agent from its own point of view:

    * ``observation``: ``Box(0, 1, (247,), float32)``, the ``match-slots`` encoding of
      :mod:`buttonup_env.game.encoding` (the observation of ``ButtonUp-v1``): for slot ``s``,
      height ``h`` (0 = bottom) and channel ``c`` (0 the agent's buttons, 1 the opponent's,
      2 white), feature ``27*s + 3*h + c`` is 1 when that button is there; feature 243 is the
      agent's score / target, 244 the opponent's score / target (both capped at 1), 245 is
      1 / target and 246 is 1 when the agent started the round under way (it decides who
      starts after equal scores). ``encoding="slots"``: the first 246 (v0's observation).
    * ``action_mask``: ``Box(0, 1, (9,), int8)``, 1 on the legal slots when it is the agent's
      turn; all zeros for the agent that is not to move and once the match is over.

    ## Starting State
    Every round's layout is drawn uniformly among the 1,680 set-ups; the first round's starter
    is drawn at random unless ``reset(options={"first": "R" | "B"})`` names it. Later rounds
    follow the starting rule: fewer points starts, on equal points whoever did not start the
    last round. All draws use the environment's generator ``np_random``, seeded by
    ``reset(seed=...)``.

    ## Rewards
    * ``reward="match"`` (default): +1 to the match winner and -1 to the loser on the move that
      decides the match, 0 otherwise.
    * ``reward="round"``: at the end of every round, each agent also gets the round's margin
      (its strength minus the opponent's) divided by 18, the largest possible margin.
    * An illegal action (with the wrappers of :func:`env`): -1 to the agent that played it,
      0 to the other, and the episode ends. Without them, :meth:`step` raises ``ValueError``.

    Rewards are zero-sum. As in every AEC environment, ``last()`` gives an agent the rewards it
    collected since its previous move.

    ## Episode End
    Both agents are terminated when the match is decided (or, with the wrappers of :func:`env`,
    after an illegal action, which also sets their truncations). Never truncated otherwise: a
    round always has exactly eight moves, so a match always ends.

    ## Information
    ``infos[agent]``, rewritten after every move, holds numbers only and the same keys every
    time, so that frameworks which turn infos into tensors (TorchRL's ``PettingZooWrapper``)
    can read them:

    * ``round_over``: True after the move that ended a round.
    * ``round_points``: ``int64`` (2,), the points Red and Black scored in the round that the
      move ended; zeros after any other move.

    The position (a :class:`~buttonup_env.game.rules.State`: board, score, target, player to
    move, who started the round) is :attr:`position` (``env.unwrapped.position`` through the
    wrappers of :func:`env`); after a round ends it is already the first position of the next
    round unless the match is over. Each agent's colour is :data:`AGENT_COLORS`.

    ## Arguments
    ``buttonup_env.envs.pettingzoo.env(...)`` or ``ButtonUpAEC(...)``:

    * ``target``: points that win a match (default 15).
    * ``reward``: ``"match"`` (default) or ``"round"``, see Rewards.
    * ``encoding``: ``"match-slots"`` (default) or ``"slots"`` (v0's observation).
    * ``render_mode``: ``"human"`` (a window drawn after :meth:`reset` and after every move,
      with pygame installed, else the text board printed to stdout; :meth:`render` returns
      None), ``"ansi"`` (text) or ``"rgb_array"`` (a picture of the circle).

    ``reset(options=...)`` accepts ``{"first": "R" | "B"}`` for one episode: who starts the
    first round (:func:`buttonup_env.envs.interface.reset_options`, as in ``ButtonUp-v1``: another
    value raises ``ValueError``, another key is ignored with a warning).

    ## Version History
    * v1: the observation says who started the round (247 floats).
    * v0: initial version (246 floats: ``encoding="slots"``).
    """

    metadata = {  # noqa: RUF012
        "name": "buttonup_v1",
        "render_modes": list(RENDER_MODES),
        "is_parallelizable": False,
        "render_fps": 2,
    }

    def __init__(
        self,
        target: int = DEFAULT_TARGET,
        reward: str = "match",
        render_mode: str | None = None,
        encoding: str = "match-slots",
    ) -> None:
        super().__init__()
        check_choice("reward", reward, REWARDS)
        check_choice("encoding", encoding, OBSERVATIONS)
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        target = check_target(target)
        self.target = target
        self.reward_mode = reward
        self.per_round = reward == "round"
        """Whether every round pays its margin (``reward="round"``)."""
        self.render_mode = render_mode
        self._renderer = EnvRenderer(render_mode, self.metadata["render_fps"])
        self.encoding = ENCODINGS[encoding]
        self.possible_agents = list(AGENT_COLORS)
        self.agents = []
        self.observation_spaces = {
            agent: spaces.Dict(
                {
                    "observation": spaces.Box(0.0, 1.0, (self.encoding.size,), np.float32),
                    "action_mask": spaces.Box(0, 1, (NUM_SLOTS,), np.int8),
                }
            )
            for agent in self.possible_agents
        }
        self.action_spaces = {agent: spaces.Discrete(NUM_SLOTS) for agent in self.possible_agents}
        self.position: State | None = None
        """The current position (``None`` before :meth:`reset`)."""
        self._np_random: np.random.Generator | None = None
        self._last_move: int | None = None
        self._unfinished: str | None = None
        """The call (``"step()"``, ``"reset()"``) an exception stopped part-way, until the
        next reset: the game is then half-played, and :meth:`step` refuses it."""

    # ------------------------------------------------------------------------------------------
    @property
    def np_random(self) -> np.random.Generator:
        """The generator that draws the layouts and the first starter (seeded by ``reset``)."""
        if self._np_random is None:
            self._np_random, _ = seeding.np_random()
        return self._np_random

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        """The same ``Dict`` space for both agents (see Observation Space)."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        """``Discrete(9)``: the slot to lift."""
        return self.action_spaces[agent]

    def observe(self, agent: str) -> ObsDict:
        """``agent``'s observation: the position from its side and its action mask."""
        state = self._require_position("observe()")
        color = AGENT_COLORS[agent]
        if state.to_move == color and not state.round_over:
            mask = legal_mask(state, np.int8)
        else:
            mask = np.zeros(NUM_SLOTS, dtype=np.int8)
        return {"observation": self.encoding.encode(state, color), "action_mask": mask}

    def _require_position(self, what: str) -> State:
        if self.position is None:
            raise RuntimeError(f"call reset() before {what}")
        return self.position

    def _infos(self, points: dict[Color, int] | None = None) -> dict[str, dict[str, Any]]:
        """Every agent's info after a move that ended a round with ``points`` (None: did not)."""
        red, black = (0, 0) if points is None else (points["R"], points["B"])
        return {
            agent: {
                "round_over": points is not None,
                "round_points": np.array([red, black], np.int64),
            }
            for agent in self.agents
        }

    # ------------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start a new match: draw the first layout, and the starter unless ``options`` names it."""
        first = reset_options(options, RESET_OPTIONS).get("first")
        self._unfinished = "reset()"
        if seed is not None:
            self._np_random, _ = seeding.np_random(seed)
        if first is None:
            first = "R" if self.np_random.integers(2) == 0 else "B"
        self.position = State.new_round(random_layout(self.np_random), first, target=self.target)
        self._last_move = None
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = self._infos()
        self.agent_selection = COLOR_AGENTS[first]
        if self._renderer.human:
            self.render()
        self._unfinished = None

    def step(self, action: np.int64 | int | None) -> None:
        """Play ``agent_selection``'s move; the next agent is the player to move after it.

        When the move ends a round, the next round is set up at once (unless the match is
        over). A terminated agent must step with ``None``. Raises ``ValueError`` for an illegal
        action (the wrappers of :func:`env` turn it into a loss instead), and
        ``RuntimeError`` after a step or reset that an exception stopped part-way, until the
        next reset.
        """
        if self._unfinished is not None:
            raise interrupted(self._unfinished)
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        state = self._require_position("step()")
        legal = state.legal_moves()
        slot = action_slot(action)  # ValueError outside Discrete(9)
        if slot not in legal:
            raise ValueError(f"illegal action by {agent!r}: {state.why_illegal(slot)}")
        self._unfinished = "step()"  # until the next agent is chosen
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        self._last_move = slot
        state = state.child(slot)
        points = None
        if state.round_over:
            strength = state.strength
            points = round_points(strength)
            margin = strength["R"] - strength["B"]  # Red's; Black's is its negative
            for name, sign in (("red", 1), ("black", -1)):
                self.rewards[name] += round_reward(sign * margin, self.per_round, False)
            if state.match_over:
                winner = COLOR_AGENTS[state.winner]  # type: ignore[index]
                for name in self.agents:
                    self.rewards[name] += match_reward(name == winner)
                self.terminations = dict.fromkeys(self.agents, True)
            else:
                state = state.next_round(random_layout(self.np_random))
                self._last_move = None
        self.position = state
        self.infos = self._infos(points)
        self.agent_selection = COLOR_AGENTS[state.to_move]
        self._accumulate_rewards()
        if self._renderer.human:
            self.render()
        self._unfinished = None

    # ------------------------------------------------------------------------------------------
    def render(self) -> str | np.ndarray | None:  # type: ignore[override]
        """Text (``ansi``) or a picture (``rgb_array``) of the position; None without a mode.

        With ``render_mode="human"`` it shows the position (reset and step already do) and
        returns None.
        """
        return self._renderer.render(self.position, self._last_move)

    def close(self) -> None:
        """Close the window of ``render_mode="human"``, if one is open."""
        self._renderer.close()
