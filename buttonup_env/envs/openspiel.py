"""Button Up! as an OpenSpiel game, ``python_button_up``, and the package's players as OpenSpiel
bots and policies.

Needs the ``openspiel`` extra (``pip install buttonup-env[openspiel]``); the rest of the package
never imports this module. Importing it (or ``buttonup_env.openspiel``) registers the game
with ``pyspiel.register_game``, as OpenSpiel's own Python games do::

    import pyspiel
    import buttonup_env.openspiel

    game = pyspiel.load_game("python_button_up", {"episode": "round", "first": "R"})

**Parameters** (:data:`PARAMETERS`; a bad value raises ``ValueError`` in one sentence):

* ``target`` (default 15): the points that win a match, 1 to 1,000.
* ``episode``: ``"match"`` (default) or ``"round"``, one round from 0-0.
* ``layout``: the first round's layout in the notation of ``docs/rules.md``
  (``"B W W B B R W R R"``); empty (default): chance draws it.
* ``first``: ``"R"`` or ``"B"``, who starts the first round; empty (default): chance draws it.
  Later rounds follow the starting rule.
* ``max_rounds``: a match that has no winner when its ``max_rounds``-th round ends is a draw (0
  to both). OpenSpiel needs a bound on a game's length, and tied rounds (equal strengths, about
  one round in twenty) could go on forever. 0 (default) means ``2 * target + 19``: the most
  rounds in which someone scores (``2 * target - 1``) and twenty tied rounds, so that only a
  match with more than twenty tied rounds is cut short.

**Players.** Player 0 is Red and player 1 is Black (:data:`PLAYER_COLORS`). An action is the
slot to lift, 0 to 8 (``action_to_string`` says ``"slot 4"``).

**Chance.** A chance node draws each round's layout (1,680 outcomes of probability 1/1,680)
and, before the first round's layout, its starter (2 outcomes of 1/2), unless ``layout`` or
``first`` fixes them; with both, the first round has no chance node. An outcome is its action
id: layout ``i`` is :data:`buttonup_env.game.rules.LAYOUTS` ``[i]`` (the 1,680 set-ups, sorted),
starter 0 is Red and 1 is Black (:data:`STARTERS`). They come in the order in which
:class:`buttonup_env.game.match.Match` and the PettingZoo env draw them from a
``numpy.random.Generator``, ``integers(2)`` for the starter and ``integers(0, 1680)`` for each
layout: fed the same numbers, two programs play the same match.

**Returns.** For a match, +1 to the winner and -1 to the loser (0 and 0 when ``max_rounds`` cuts
it short). For a round, player 0 gets Red's round margin (Red's strength minus Black's in the
final stack) and player 1 its negative: OpenSpiel's exploitability is then in round points, the
unit of :mod:`buttonup_env.players.exploit`. The game is zero-sum and pays only at the end; its
``GameInfo`` is exact (:func:`game_info`).

**Observations.** The game has perfect information. ``str(state)`` is the board in the rules'
notation, then a line with the round, who started it, who is to move and the score. The
observation string and the information state string of either player are ``str(state)``. The
observation tensor of player ``p`` is the env's ``match-slots`` encoding
(:class:`buttonup_env.game.encoding.MatchSlotEncoding`, 247 floats: the board, the score and
who started the round) of the position from ``p``'s side, so the mover's tensor is what
``ButtonUp-v1``'s agent observes; before the first layout is drawn it is all zeros. There is no
information state tensor.

A state holds one immutable :class:`Node`, so OpenSpiel's clones (a deep copy of every attribute)
copy one reference; its serialization is OpenSpiel's own (the action history and the pickled
node). **Never load a state string someone else wrote**: ``game.deserialize_state`` and
``pyspiel.deserialize_game_and_state`` unpickle it, which runs any code it names (pyspiel does
this for every Python game, and calls no override of ours). :func:`state_from_history`
rebuilds a state from the game's parameters and the action history instead, checking every
action.

Parameters, actions and players are checked with one sentence each: a ``max_rounds`` above
:data:`MAX_ROUNDS` (OpenSpiel's 32-bit lengths), an ``action_to_string`` of an action that does
not exist, a player of :func:`bot` or :func:`policy` that chooses an illegal slot.

:func:`bot` and :func:`policy` turn any player of the package (a bot's name, ``perfect-P``, a
shipped policy, an ``.onnx`` file, an object with ``act(state)``) into a ``pyspiel.Bot`` and an
OpenSpiel ``Policy``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyspiel
from open_spiel.python import policy as openspiel_policy

from ..game.encoding import MatchSlotEncoding
from ..game.records import shown
from ..game.rules import (
    COLORS,
    DEFAULT_TARGET,
    LAYOUTS,
    MAX_ROUND_MARGIN,
    MOVES_PER_ROUND,
    NUM_SLOTS,
    Board,
    Color,
    State,
    check_target,
    format_board,
    is_whole_number,
)
from ..players.bots import Player, check_target_for
from ..players.exploit import behaviour_of
from .env import make_opponent
from .interface import EPISODES, check_choice

GAME_NAME = "python_button_up"
"""The short name the game is registered under: ``pyspiel.load_game("python_button_up")``."""

PLAYER_COLORS: tuple[Color, Color] = ("R", "B")
"""The colour of each player id: 0 is Red, 1 is Black."""

STARTERS: tuple[Color, Color] = COLORS
"""The first round's starter by chance outcome: 0 is Red, 1 is Black."""

LAYOUT_IDS: dict[Board, int] = {layout: i for i, layout in enumerate(LAYOUTS)}
"""The chance outcome (action id) of each layout: its place in ``LAYOUTS``."""

TIED_ROUNDS = 20
"""The tied rounds a match may have before ``max_rounds`` (at its default) can cut it short."""

MAX_ROUNDS = 1_000_000
"""The largest ``max_rounds``: OpenSpiel holds a game's length in 32-bit integers, which 19
actions a round (a layout and at most 18 moves) would overflow from 113 million rounds. A
million is far beyond any match (to 1,000 points with twenty tied rounds: 2,019)."""

PARAMETERS: dict[str, Any] = {
    "target": DEFAULT_TARGET,
    "episode": "match",
    "layout": "",
    "first": "",
    "max_rounds": 0,
}
"""The game's parameters and their defaults (an empty ``layout`` or ``first``: drawn)."""

_ENCODING = MatchSlotEncoding()
_NAMES = {"R": "Red", "B": "Black"}
_PLAYER = {"R": 0, "B": 1}
_STARTER_OUTCOMES = [(0, 0.5), (1, 0.5)]
_LAYOUT_OUTCOMES = [(i, 1.0 / len(LAYOUTS)) for i in range(len(LAYOUTS))]

GAME_TYPE = pyspiel.GameType(
    short_name=GAME_NAME,
    long_name="Python Button Up!",
    dynamics=pyspiel.GameType.Dynamics.SEQUENTIAL,
    chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
    information=pyspiel.GameType.Information.PERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.ZERO_SUM,
    reward_model=pyspiel.GameType.RewardModel.TERMINAL,
    max_num_players=2,
    min_num_players=2,
    provides_information_state_string=True,
    provides_information_state_tensor=False,
    provides_observation_string=True,
    provides_observation_tensor=True,
    parameter_specification=PARAMETERS,
)
"""The fixed facts of the game, whatever its parameters."""


# --- parameters --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """A game's parameters, checked: what every state of the game copies at construction."""

    target: int
    episode: str
    layout: Board | None
    """The first round's layout, or None when chance draws it."""
    first: Color | None
    """Who starts the first round, or None when chance draws it."""
    max_rounds: int
    """The round after which a match without a winner is a draw (``max_rounds`` 0 resolved)."""

    @property
    def rounds(self) -> int:
        """The most rounds an episode can have."""
        return self.max_rounds if self.episode == "match" else 1

    @property
    def chance_nodes(self) -> int:
        """The most chance nodes an episode can have."""
        return (self.first is None) + (self.layout is None) + (self.rounds - 1)


def game_settings(params: Mapping[str, Any]) -> Settings:
    """``params`` (any of :data:`PARAMETERS`, the rest at their defaults) checked.

    Raises ``ValueError`` in one sentence for an unknown episode kind, a layout that is not
    nine single buttons (three of each colour), a target outside 1 to 1,000, a ``first`` other
    than ``"R"``, ``"B"`` or empty, or a ``max_rounds`` outside 0 to :data:`MAX_ROUNDS`.
    """
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise ValueError(
            f"{GAME_NAME} has no parameter {', '.join(map(repr, unknown))}; its parameters "
            f"are {', '.join(map(repr, PARAMETERS))}"
        )
    values = {**PARAMETERS, **params}
    check_choice("episode", values["episode"], EPISODES)
    target = check_target(values["target"])
    layout_text = values["layout"]
    layout = None
    if layout_text != "":
        layout = tuple(layout_text.split()) if isinstance(layout_text, str) else None
        if layout not in LAYOUT_IDS:
            raise ValueError(
                f"layout={shown(layout_text)} is not allowed; a layout is nine single buttons, "
                "three each of R, B and W, separated by spaces (e.g. 'B W W B B R W R R'), or "
                "empty for a layout drawn by chance"
            )
    first = values["first"]
    if first not in ("", *COLORS):
        raise ValueError(
            f"first={shown(first)} is not allowed; use 'R' (Red starts the first round), 'B', "
            "or leave it empty for a starter drawn by chance"
        )
    max_rounds = values["max_rounds"]
    if not is_whole_number(max_rounds) or not 0 <= max_rounds <= MAX_ROUNDS:
        raise ValueError(
            f"max_rounds={shown(max_rounds)} is not allowed; use a whole number of rounds from 1 "
            f"to {MAX_ROUNDS:,}, or 0 for 2 * target + {TIED_ROUNDS - 1}"
        )
    return Settings(
        target=target,
        episode=values["episode"],
        layout=layout,
        first=first or None,
        max_rounds=int(max_rounds) or 2 * target - 1 + TIED_ROUNDS,
    )


@functools.lru_cache(maxsize=256)
def _largest_margin(layout: Board, firsts: tuple[Color, ...]) -> int:
    """The largest round margin, either way, that a round from ``layout`` can end with when
    one of ``firsts`` starts it (every final position is visited once)."""
    largest = 0
    seen: set[tuple[Board, Color]] = set()
    stack = [State.new_round(layout, first) for first in firsts]
    while stack:
        state = stack.pop()
        key = (state.board, state.to_move)
        if key in seen:
            continue
        seen.add(key)
        if state.round_over:
            strength = state.strength
            largest = max(largest, abs(strength["R"] - strength["B"]))
        else:
            stack.extend(state.child(slot) for slot in state.legal_moves())
    return largest


def game_info(game: Settings) -> pyspiel.GameInfo:
    """The exact ``GameInfo`` of a game with these settings."""
    if game.episode == "match":
        utility = 1.0
    elif game.layout is None:
        utility = float(MAX_ROUND_MARGIN)
    else:
        firsts = COLORS if game.first is None else (game.first,)
        utility = float(_largest_margin(game.layout, firsts))
    layouts_drawn = game.layout is None or game.rounds > 1
    return pyspiel.GameInfo(
        num_distinct_actions=NUM_SLOTS,
        max_chance_outcomes=len(LAYOUTS) if layouts_drawn else 2 * (game.first is None),
        num_players=2,
        min_utility=-utility,
        max_utility=utility,
        utility_sum=0.0,
        max_game_length=MOVES_PER_ROUND * game.rounds,
    )


# --- the game ----------------------------------------------------------------------------------


class Node(NamedTuple):
    """Everything a state of the game holds, immutable: OpenSpiel clones a Python state by deep
    copying its attributes, and copying a node is copying a reference."""

    game: Settings
    position: State | None
    """The position (``None`` until the first round's layout is drawn)."""
    first: Color | None
    """The first round's starter, while its layout is still to be drawn."""
    round: int
    """The round in progress (or just finished), from 1."""
    player: int
    """The player to move, ``pyspiel.PlayerId.CHANCE`` or ``pyspiel.PlayerId.TERMINAL``."""
    returns: tuple[float, float]
    """Each player's return (0, 0 until the end)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Node:
        return self

    @property
    def draws_starter(self) -> bool:
        """True at the chance node that draws who starts the first round."""
        return self.position is None and self.first is None

    def apply(self, action: int) -> Node:
        """The node after ``action`` (a slot, or the chance outcome at a chance node)."""
        game, position = self.game, self.position
        if self.player == pyspiel.PlayerId.CHANCE:
            if self.draws_starter:
                first = STARTERS[_outcome(action, len(STARTERS), "starter")]
                if game.layout is None:
                    return self._replace(first=first)
                return self._playing(State.new_round(game.layout, first, target=game.target))
            layout = LAYOUTS[_outcome(action, len(LAYOUTS), "layout")]
            if position is None:
                assert self.first is not None
                start = State.new_round(layout, self.first, target=game.target)
                return self._replace(first=None)._playing(start)
            return self._replace(round=self.round + 1)._playing(position.next_round(layout))
        if position is None or self.player < 0:
            raise ValueError(f"no player moves in this state; {_status(self)}")
        return self._playing(position.play(action))

    def _playing(self, position: State) -> Node:
        """This node at ``position``, whoever is to move there (or the end of the episode)."""
        if not position.round_over:
            return self._replace(position=position, player=_PLAYER[position.to_move])
        strength = position.strength
        margin = float(strength["R"] - strength["B"])
        if self.game.episode == "round":
            returns = (margin, -margin)
        elif position.match_over:
            returns = (1.0, -1.0) if position.winner == "R" else (-1.0, 1.0)
        elif self.round < self.game.max_rounds:
            return self._replace(position=position, player=pyspiel.PlayerId.CHANCE)
        else:
            returns = (0.0, 0.0)
        return self._replace(position=position, player=pyspiel.PlayerId.TERMINAL, returns=returns)


def initial_node(game: Settings) -> Node:
    """The start of an episode: a chance node unless ``layout`` and ``first`` are both given."""
    node = Node(game, None, game.first, 1, pyspiel.PlayerId.CHANCE, (0.0, 0.0))
    if game.layout is not None and game.first is not None:
        return node._replace(first=None)._playing(
            State.new_round(game.layout, game.first, target=game.target)
        )
    return node


def _outcome(action: int, outcomes: int, what: str) -> int:
    if not is_whole_number(action) or not 0 <= action < outcomes:
        raise ValueError(
            f"chance outcome {shown(action)} does not exist; a {what} is 0 to {outcomes - 1}"
        )
    return int(action)


def _slot(action: object) -> int:
    """``action`` as a slot, 0 to 8; ``ValueError`` in one sentence for anything else."""
    if not is_whole_number(action) or not 0 <= action < NUM_SLOTS:  # type: ignore[operator]
        raise ValueError(
            f"action {shown(action)} is not a slot; a player's action is a slot from 0 to "
            f"{NUM_SLOTS - 1}"
        )
    return int(action)  # type: ignore[call-overload]


def _score(position: State) -> str:
    red, black = position.score_pair
    return f"Red {red} - {black} Black, target {position.target}"


def _status(node: Node) -> str:
    """The second line of ``str(state)``: the round, who started it, who moves, the score."""
    position, game = node.position, node.game
    if position is None:
        score = f"Red 0 - 0 Black, target {game.target}"
        if node.first is None:
            return f"round 1: chance draws who starts; {score}"
        return f"round 1: chance draws the layout, {_NAMES[node.first]} starts; {score}"
    head = f"round {node.round}, {_NAMES[position.starter]} started"
    if not position.round_over:
        return f"{head}: {_NAMES[position.to_move]} to move; {_score(position)}"
    strength = position.strength
    head += f": over, strength Red {strength['R']}, Black {strength['B']}; {_score(position)}"
    if node.player == pyspiel.PlayerId.CHANCE:
        return f"{head}; chance draws the layout of round {node.round + 1}"
    if game.episode == "match":
        winner = position.winner
        head += f"; {_NAMES[winner]} wins the match" if winner else "; a draw after max_rounds"
    return head


class ButtonUpState(pyspiel.State):
    """A state of ``python_button_up`` (see the module docstring); :attr:`position` is the
    rules' :class:`~buttonup_env.game.rules.State`."""

    def __init__(self, game: ButtonUpGame) -> None:
        super().__init__(game)
        self.node: Node = game.initial_node
        """Everything the state holds (one immutable value)."""

    @property
    def position(self) -> State | None:
        """The position of the round in progress or just finished (None before the first
        round's layout is drawn)."""
        return self.node.position

    def current_player(self) -> int:
        """The player to move, ``PlayerId.CHANCE`` or ``PlayerId.TERMINAL``."""
        return self.node.player

    def _legal_actions(self, player: int) -> list[int]:
        """The legal slots, in increasing order."""
        return list(self.node.position.legal_moves())  # type: ignore[union-attr]

    def chance_outcomes(self) -> list[tuple[int, float]]:
        """Who starts the first round (0 Red, 1 Black) or the layout (an index of ``LAYOUTS``),
        with their probabilities."""
        return _STARTER_OUTCOMES if self.node.draws_starter else _LAYOUT_OUTCOMES

    def _apply_action(self, action: int) -> None:
        self.node = self.node.apply(action)

    def _action_to_string(self, player: int, action: int) -> str:
        """The name of ``action`` of ``player``; ``ValueError`` for an action that does not
        exist (a slot outside 0 to 8, a chance outcome outside this chance node's)."""
        if player == pyspiel.PlayerId.CHANCE:
            if self.node.draws_starter:
                return f"{_NAMES[STARTERS[_outcome(action, len(STARTERS), 'starter')]]} starts"
            return f"layout {format_board(LAYOUTS[_outcome(action, len(LAYOUTS), 'layout')])}"
        if player not in (0, 1):
            raise ValueError(
                f"player {shown(player)} does not exist; the players are 0 (Red) and 1 (Black), "
                f"and {pyspiel.PlayerId.CHANCE} is chance"
            )
        return f"slot {_slot(action)}"

    def is_terminal(self) -> bool:
        return self.node.player == pyspiel.PlayerId.TERMINAL

    def returns(self) -> list[float]:
        return list(self.node.returns)

    def __str__(self) -> str:
        node = self.node
        board = ". " * (NUM_SLOTS - 1) + "." if node.position is None else node.position.notation
        return f"{board}\n{_status(node)}"


class BoardObserver:
    """OpenSpiel's observer of ``python_button_up``: the string of either player is
    ``str(state)``; with ``tensor=True``, the tensor of player ``p`` is the ``match-slots``
    encoding from ``p``'s side (zeros before the first layout is drawn)."""

    def __init__(self, tensor: bool) -> None:
        self.tensor = np.zeros(_ENCODING.size, np.float32) if tensor else None
        self.dict = {} if self.tensor is None else {"observation": self.tensor}

    def set_from(self, state: ButtonUpState, player: int) -> None:
        if self.tensor is None:
            return
        position = state.node.position
        if position is None:
            self.tensor.fill(0.0)
        else:
            self.tensor[:] = _ENCODING.encode(position, PLAYER_COLORS[player])

    def string_from(self, state: ButtonUpState, player: int) -> str:
        return str(state)


class PrivateObserver:
    """The private part of an observation: empty, the game has perfect information."""

    tensor = None
    dict: dict[str, np.ndarray] = {}  # noqa: RUF012

    def set_from(self, state: ButtonUpState, player: int) -> None:
        pass

    def string_from(self, state: ButtonUpState, player: int) -> str:
        return ""


class ButtonUpGame(pyspiel.Game):
    """``python_button_up`` (see the module docstring for its parameters)."""

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        params = dict(params or {})
        checked = game_settings(params)
        super().__init__(GAME_TYPE, game_info(checked), params)
        self.settings = checked
        """The game's parameters, checked."""
        self.initial_node = initial_node(checked)
        """The node every new initial state starts from."""

    def new_initial_state(self) -> ButtonUpState:
        """The start of an episode."""
        return ButtonUpState(self)

    def max_chance_nodes_in_history(self) -> int:
        """The most chance nodes an episode can have."""
        return self.settings.chance_nodes

    def make_py_observer(
        self, iig_obs_type: pyspiel.IIGObservationType | None = None, params: Any = None
    ) -> BoardObserver | PrivateObserver:
        """The observer OpenSpiel asks for: the board (and the tensor, for observations) for
        public information, nothing for private information alone."""
        if params:
            raise ValueError(f"{GAME_NAME} observations take no parameters, got {shown(params)}")
        if iig_obs_type is None:
            return BoardObserver(tensor=True)
        if not iig_obs_type.public_info:
            return PrivateObserver()
        return BoardObserver(tensor=not iig_obs_type.perfect_recall)


pyspiel.register_game(GAME_TYPE, ButtonUpGame)


# --- the package's players in OpenSpiel ---------------------------------------------------------


def position_of(state: pyspiel.State) -> State:
    """The rules' position of a ``python_button_up`` state where a player is to move."""
    node = getattr(state, "node", None)
    if not isinstance(node, Node):
        raise ValueError(f"{shown(str(state))} is not a state of {GAME_NAME}")
    if node.position is None or node.player < 0:
        raise ValueError(f"no player moves in this state; {_status(node)}")
    return node.position


def _check_game(game: pyspiel.Game) -> None:
    if not isinstance(game, ButtonUpGame):
        raise ValueError(f"{shown(str(game))} is not {GAME_NAME}; load it with pyspiel.load_game")


PlayerSpec = str | Path | Player


def _legal_choice(player: object, position: State, slot: object) -> int:
    """``slot``, a legal move of ``position`` that ``player`` chose; ``ValueError`` otherwise."""
    legal = position.legal_moves()
    if not is_whole_number(slot) or slot not in legal:
        raise ValueError(
            f"{shown(player)} chose slot {shown(slot)}, which is not legal on "
            f"{position.notation!r} (legal: {', '.join(map(str, legal))})"
        )
    return int(slot)  # type: ignore[call-overload]


class PlayerBot(pyspiel.Bot):
    """A player of the package (``act(state) -> slot``) as an OpenSpiel bot."""

    def __init__(self, player: Player) -> None:
        pyspiel.Bot.__init__(self)
        self.player = player
        """The package's player that chooses the moves."""

    def step(self, state: pyspiel.State) -> int:
        """The slot the player lifts in ``state``; ``ValueError`` in one sentence when the
        player chooses a slot that is not legal there."""
        position = position_of(state)
        return _legal_choice(self.player, position, self.player.act(position))

    def restart_at(self, state: pyspiel.State) -> None:
        """Nothing to do: the player reads the whole position at every step."""

    def inform_action(self, state: pyspiel.State, player_id: int, action: int) -> None:
        """Nothing to do: the player reads the whole position at every step."""

    def __repr__(self) -> str:
        return f"PlayerBot({self.player!r})"


def bot(player: PlayerSpec, game: pyspiel.Game, seed: int | None = None) -> PlayerBot:
    """``player`` as a ``pyspiel.Bot`` of ``game`` (a ``python_button_up``): ``"random"``,
    ``"greedy"``, ``"perfect"``, a graded ``"perfect-P"`` (their random choices drawn from
    ``seed``), the name of a shipped policy (``"buttonup-ppo"``), a path to an exported
    ``.onnx`` policy, or any object with ``act(state) -> slot``."""
    _check_game(game)
    return PlayerBot(_player(player, game, seed))


class PlayerPolicy(openspiel_policy.Policy):
    """A player of the package as an OpenSpiel ``Policy`` for both players: the probability of
    each legal slot, zeros included, as :mod:`buttonup_env.players.exploit` reads it (a bot's
    exact move distribution, or the one move of a deterministic policy)."""

    def __init__(self, game: pyspiel.Game, player: Player) -> None:
        super().__init__(game, [0, 1])
        self.player = player
        """The package's player whose moves these are."""
        self._behaviour = behaviour_of(player)

    def action_probabilities(
        self, state: pyspiel.State, player_id: int | None = None
    ) -> dict[int, float]:
        """``{slot: probability}`` for every legal slot of ``state``; ``ValueError`` in one
        sentence when the player would choose a slot that is not legal there."""
        position = position_of(state)
        probabilities = self._behaviour(position)
        for slot, probability in probabilities.items():
            if probability > 0:
                _legal_choice(self.player, position, slot)
        return {slot: float(probabilities.get(slot, 0.0)) for slot in position.legal_moves()}


def _player(player: PlayerSpec, game: pyspiel.Game, seed: int | None = None) -> Player:
    """The package's player ``player`` names, for ``game``: ``perfect`` plays the game's
    episode (the match, or one round); refused in one sentence for a match whose target the
    match is not solved for."""
    settings = game_settings(game.get_parameters())
    objective = "round" if settings.episode == "round" else "match"
    made = make_opponent(player, seed, objective)
    check_target_for(made, settings.target if objective == "match" else 1)
    return made


def policy(player: PlayerSpec, game: pyspiel.Game) -> PlayerPolicy:
    """``player`` (anything :func:`bot` takes) as an OpenSpiel ``Policy`` of ``game``, which
    OpenSpiel's ``exploitability`` and ``nash_conv`` accept."""
    _check_game(game)
    return PlayerPolicy(game, _player(player, game))


# --- states from others --------------------------------------------------------------------------


def state_from_history(
    game: pyspiel.Game | Mapping[str, Any], history: Sequence[object]
) -> ButtonUpState:
    """The state that ``history`` (action ids, as ``state.history()`` gives them) reaches in
    ``game``, a ``python_button_up`` game or its parameters (``game.get_parameters()``).

    This is how to rebuild a state someone else sent: OpenSpiel's own state strings
    (``state.serialize()``, ``game.deserialize_state``, ``pyspiel.deserialize_game_and_state``)
    hold the state's attributes as a pickle, which runs any code it names when it is read; a
    game's parameters and a list of whole numbers run nothing. Every action is checked as it
    is played: ``ValueError`` in one sentence naming the first that is not a chance outcome
    of its chance node or a legal slot of its position, and for bad parameters.
    """
    if not isinstance(game, ButtonUpGame):
        if isinstance(game, pyspiel.Game):
            _check_game(game)
        game = ButtonUpGame(dict(game))
    if isinstance(history, str | bytes) or not isinstance(history, Sequence):
        raise ValueError(f"the history must be a list of action ids, not {type(history).__name__}")
    longest = game.max_history_length()
    if len(history) > longest:
        raise ValueError(
            f"the history has {len(history):,} actions; an episode of this game has at most "
            f"{longest:,}"
        )
    state = game.new_initial_state()
    for number, action in enumerate(history, start=1):
        try:
            if state.is_terminal():
                raise ValueError("the episode is over")
            if not is_whole_number(action):
                raise ValueError("an action id is a whole number")
            if state.is_chance_node():
                state.node.apply(action)  # checks the outcome (a Node is immutable)
            elif action not in (legal := state.legal_actions()):
                notation = position_of(state).notation
                raise ValueError(
                    f"slot {action} is not legal on {notation!r}, whose legal slots are "
                    f"{', '.join(map(str, legal))}"
                )
        except ValueError as error:
            raise ValueError(
                f"action {number} of the history, {shown(action)}, is not allowed there: {error}"
            ) from None
        state.apply_action(int(action))  # type: ignore[call-overload]
    return state
