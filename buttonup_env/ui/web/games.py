"""The games the web app plays; no HTTP here.

A :class:`Game` is a :class:`~buttonup_env.game.match.Match` with a player for each colour: a person
(moves come from the page) or a bot or policy (moves come from its ``act``). When a person
plays, the bots answer by themselves; when only bots play (watch mode) each of their moves waits
for :meth:`Game.step`, so the page sets the pace. Everything a game says comes from
:mod:`buttonup_env.ui.narration` (through :mod:`buttonup_env.ui.web.views`), so it reads as the
terminal game does. A bot's move is computed by :class:`~buttonup_env.ui.web.workers.Workers`,
beside the event loop and with a time limit; the game itself changes only on the event loop,
one request at a time. The players offered are :mod:`buttonup_env.ui.web.offered`'s, the store
of games :mod:`buttonup_env.ui.web.store`'s, the replays :mod:`buttonup_env.ui.web.replays`'s.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import numpy as np

from ...envs.render import COLOR_NAMES
from ...game.match import Match
from ...game.rules import COLORS, DEFAULT_TARGET, Color, State, is_whole_number
from ...players.bots import Player
from ..narration import (
    match_summary,
)
from .errors import IllegalMove, NotNow, PlayerFailed, ServerBusy
from .offered import OfferedPlayer
from .schemas import (
    HUMAN,
    Event,
    Players,
    PlayerView,
    StateView,
)
from .views import end_events, move_event, start_events, state_view
from .workers import Busy, Stopping, TooSlow, Workers


class Game:
    """A match between two players, each a person (``None``) or an offered player.

    ``seed`` draws the layouts and the first starter as ``buttonup-play --seed`` does, and seeds
    the bots' tie-breaks (the first bot gets the generator the terminal game gives its opponent).
    The bots' moves are computed by ``workers`` (by default a pool of this game's own).
    """

    def __init__(
        self,
        game_id: str,
        red: OfferedPlayer | None,
        black: OfferedPlayer | None,
        target: int = DEFAULT_TARGET,
        seed: int = 0,
        workers: Workers | None = None,
    ) -> None:
        self.id = game_id
        self.seed = seed
        self.workers = workers if workers is not None else Workers()
        self.match = Match(np.random.default_rng(seed), target=target, first=None)
        self.offered: dict[Color, OfferedPlayer | None] = {"R": red, "B": black}
        self.players: dict[Color, Player | None] = {}
        children = iter(np.random.SeedSequence(seed).spawn(2))
        for color in COLORS:
            offered = self.offered[color]
            if offered is None:
                self.players[color] = None
                continue
            player = offered.make()
            reset = getattr(player, "reset", None)
            if callable(reset):
                reset(np.random.default_rng(next(children)))
            self.players[color] = player
        humans = [c for c in COLORS if self.players[c] is None]
        self.human: Color | None = humans[0] if len(humans) == 1 else None
        """The person's colour when one person plays a bot (the texts then say "you")."""
        self.auto = bool(humans)
        """True when a person plays: the bots then answer by themselves."""
        self.round = 1
        self._previous: State | None = None
        self._answering = False

    @property
    def state(self) -> State:
        """The current position."""
        return self.match.state

    def players_view(self) -> Players:
        """Who plays each colour."""

        def view(color: Color) -> PlayerView:
            offered = self.offered[color]
            if offered is None:
                label = "you" if self.human == color else f"a person ({COLOR_NAMES[color]})"
                return PlayerView(key=HUMAN, label=label, human=True)
            return PlayerView(key=offered.key, label=offered.label, human=False)

        return Players(R=view("R"), B=view("B"))

    def view(self) -> StateView:
        """The current position as the page shows it."""
        return state_view(self.state, self.round)

    # --- what a request can do ---------------------------------------------------------------
    async def start(self) -> list[Event]:
        """The first round's start, and the bots' moves up to a person's turn."""
        with self._one_request():
            return start_events(self.state, self.round, self.human, None) + await self._answer()

    async def move(self, slot: int) -> list[Event]:
        """A person lifts ``slot``; then the bots answer up to a person's turn or the round end.

        Raises :class:`NotNow` when it is not a person's turn and :class:`IllegalMove` when the
        rules forbid the slot; the game is then unchanged.
        """
        with self._one_request():
            state = self._playable()
            if self.players[state.to_move] is not None:
                who = self.offered[state.to_move]
                assert who is not None
                raise NotNow(f"it is {COLOR_NAMES[state.to_move]}'s turn, played by {who.label}")
            if slot not in state.legal_moves():
                message = str(_rules_error(state, slot))
                raise IllegalMove(message[:1].upper() + message[1:] + ".")
            return self._play(slot) + await self._answer()

    async def step(self) -> list[Event]:
        """The bot to move plays one move (watch mode). :class:`NotNow` on a person's turn."""
        with self._one_request():
            state = self._playable()
            if self.players[state.to_move] is None:
                raise NotNow(
                    f"it is {COLOR_NAMES[state.to_move]}'s turn, played by a person: send a move"
                )
            return await self._bot_move()

    async def next_round(self) -> list[Event]:
        """Set up the next round once this one is over, and the bots' moves if a person plays."""
        with self._one_request():
            state = self.state
            if state.match_over:
                raise NotNow(f"{match_summary(state)} There is no next round; start a new game")
            if not state.round_over:
                raise NotNow(
                    f"round {self.round} is not over ({state.moves_played} of 8 moves played); "
                    "finish it first"
                )
            self._previous = state
            self.match.next_round()
            self.round += 1
            events = start_events(self.state, self.round, self.human, self._previous)
            return events + await self._answer()

    # --- inside ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _one_request(self) -> Iterator[None]:
        """Hold the game for one request: a second one while a bot of the first still thinks
        is refused, so the game changes in one request's order."""
        if self._answering:
            raise NotNow("this game is still answering an earlier request; wait for its answer")
        self._answering = True
        try:
            yield
        finally:
            self._answering = False

    def _playable(self) -> State:
        state = self.state
        if state.match_over:
            raise NotNow(f"{match_summary(state)} Start a new game")
        if state.round_over:
            raise NotNow(f"round {self.round} is over; start the next one (next-round)")
        return state

    def _play(self, slot: int) -> list[Event]:
        before = self.state
        after = self.match.play(slot)
        events = [move_event(before, slot, after, self.round, self.human)]
        if after.round_over:
            events += end_events(after, self.round, self.human)
        return events

    async def _bot_move(self) -> list[Event]:
        state = self.state
        player = self.players[state.to_move]
        assert player is not None
        who = self.offered[state.to_move]
        label = who.label if who else "the bot"
        try:
            slot = await self.workers.run(
                functools.partial(player.act, state), f"{label} choosing a move"
            )
        except (Busy, Stopping) as error:
            raise ServerBusy(str(error)) from None
        except TooSlow:
            raise PlayerFailed(
                f"{label} did not choose a move on {state.notation!r} within "
                f"{self.workers.seconds:g} s"
            ) from None
        except Exception as error:  # a policy's runtime can raise anything
            reason = " ".join(str(error).split())[:160]
            raise PlayerFailed(
                f"{label} failed to choose a move on {state.notation!r} "
                f"({type(error).__name__}: {reason})"
            ) from error
        if not is_whole_number(slot) or slot not in state.legal_moves():
            raise PlayerFailed(
                f"{label} chose slot {str(slot)[:40]!r}, which is not legal on {state.notation!r}"
            )
        return self._play(int(slot))

    async def _answer(self) -> list[Event]:
        """The bots' moves, when a person plays, until a person is to move or the round ends."""
        events: list[Event] = []
        while self.auto and not self.state.round_over:
            if self.players[self.state.to_move] is None:
                break
            events += await self._bot_move()
        return events


def _rules_error(state: State, slot: int) -> ValueError:
    """The rules' own words for why ``slot`` cannot be lifted."""
    try:
        state.play(slot)
    except ValueError as error:
        return error
    raise AssertionError(f"slot {slot} is legal on {state.notation!r}")  # pragma: no cover
