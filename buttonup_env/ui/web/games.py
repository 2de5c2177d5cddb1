"""The games the web app keeps, and the records it replays; no HTTP here.

A :class:`Game` is a :class:`~buttonup_env.game.match.Match` with a player for each colour: a person
(moves come from the page) or a bot or policy (moves come from its ``act``). When a person
plays, the bots answer by themselves; when only bots play (watch mode) each of their moves waits
for :meth:`Game.step`, so the page sets the pace. Everything a game says comes from
:mod:`buttonup_env.ui.narration`, so it reads as the terminal game does.

:class:`GameStore` keeps the games in memory under unguessable ids, at most ``max_games`` of
them: a new game pushes out the one left unused the longest.
"""

from __future__ import annotations

import functools
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ...envs.render import COLOR_NAMES
from ...game.match import Match
from ...game.records import InvalidRecord, read_records, replay_match, replay_round
from ...game.rules import COLORS, DEFAULT_TARGET, Color, State, is_whole_number, parse_board
from ...game.solver import move_values
from ...players.bots import BOT_NAMES, Player, graded_name, graded_p, make_bot
from ..narration import (
    Move,
    describe_move,
    hint_line,
    match_summary,
    round_summary,
    starter_line,
)
from ..play import load_opponent
from .schemas import (
    HUMAN,
    Drop,
    Event,
    FinalStack,
    Hint,
    MoveValue,
    MoveView,
    Players,
    PlayerView,
    Points,
    RecordSummary,
    Replay,
    StateView,
)

MAX_GAMES = 1000
"""How many games the server keeps by default."""


class IllegalMove(ValueError):
    """A move the rules do not allow; the message names the slot and the legal ones."""


class NotNow(ValueError):
    """A request that does not fit the game's moment (not your turn, round over, ...)."""


class UnknownGame(LookupError):
    """No game has this id (never made, or dropped to make room)."""


class PlayerFailed(RuntimeError):
    """A bot or policy failed to choose a move (it raised, or chose an illegal slot)."""


# --- players ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class OfferedPlayer:
    """A player the server offers by ``key``; ``make()`` gives the one a new game uses."""

    key: str
    label: str
    make: Callable[[], Player]
    elo: float | None = None
    """Its rating in the shipped league (:func:`buttonup_env.players.shipped.shipped_ratings`), if
    any."""


def _bot_key(spec: str) -> str | None:
    """The key of the bot or graded bot ``spec`` names (``perfect-0.50``: ``perfect-0.5``),
    None for a policy. Raises ``ValueError`` for ``perfect-`` and no probability."""
    name = spec.lower()
    if name in BOT_NAMES:
        return name
    p = graded_p(name)
    return None if p is None else graded_name(p)


def _taken(key: str, keys: set[str]) -> bool:
    """True when a policy cannot have ``key``: taken, or the name of a bot or graded bot."""
    try:
        bot = _bot_key(key) is not None
    except ValueError:  # perfect-<not a probability>: no bot's name
        bot = False
    return key in keys or bot


def _bot_label(key: str, levels: tuple[str, ...]) -> str:
    if key in BOT_NAMES:
        return f"the {key} bot"
    percent = f"{100 * (graded_p(key) or 0.0):g}%"
    if key in levels:
        return f"level {levels.index(key) + 1} of {len(levels)}: perfect, {percent} random moves"
    return f"the perfect bot with {percent} random moves"


def offer(
    specs: Iterable[str],
    labels: dict[str, str] | None = None,
    levels: Iterable[str] = (),
    ratings: dict[str, float] | None = None,
) -> list[OfferedPlayer]:
    """The players the page offers: each of ``specs`` (a bot name, a graded bot ``perfect-P``
    or a policy file, in order), then the built-in bots not among them, the graded bots of
    ``levels`` between the greedy and the perfect bot.

    A bot is made anew for every game; a policy is loaded once and shared (it is deterministic).
    ``labels`` may name a spec (e.g. the shipped agent); ``ratings`` gives the Elo rating of a
    bot by its name or of a policy by its spec. Raises ``ValueError`` with one line for a spec
    that names no bot and no readable policy.
    """
    labels = labels or {}
    ratings = ratings or {}
    levels = tuple(_bot_key(level) or level for level in levels)
    offered: list[OfferedPlayer] = []
    keys: set[str] = {HUMAN}
    for spec in [*specs, "random", "greedy", *levels, "perfect"]:
        key = _bot_key(spec)
        if key is not None:
            if key in keys:
                continue
            label = labels.get(spec, _bot_label(key, levels))
            make = functools.partial(make_bot, key)
            offered.append(OfferedPlayer(key, label, make, ratings.get(key)))
            keys.add(key)
            continue
        player, _ = load_opponent(spec)
        stem = Path(spec).stem or "policy"
        key, n = stem, 1
        while _taken(key, keys):
            n += 1
            key = f"{stem}-{n}"
        keys.add(key)
        label = labels.get(spec, f"the policy {Path(spec).name}")
        offered.append(OfferedPlayer(key, label, lambda player=player: player, ratings.get(spec)))
    return offered


# --- views -----------------------------------------------------------------------------------
def _points(values: dict[Color, int]) -> Points:
    return Points(R=values["R"], B=values["B"])


def state_view(state: State, round_number: int) -> StateView:
    """``state`` as the page shows it; ``round_number`` counts from 1."""
    final = None
    if state.round_over:
        final = FinalStack(
            stack="".join(state.board),
            strength=_points(state.strength),
            points=_points(state.round_points),
        )
    return StateView(
        board=list(state.board),
        notation=state.notation,
        to_move=state.to_move,
        score=_points(state.score),
        target=state.target,
        round=round_number,
        moves_played=state.moves_played,
        legal=list(state.legal_moves()),
        round_over=state.round_over,
        match_over=state.match_over,
        winner=state.winner,
        final=final,
    )


def move_event(
    before: State, slot: int, after: State, round_number: int, human: Color | None
) -> Event:
    """The event of ``before.to_move`` lifting ``slot``."""
    move = Move(before, slot, after)
    return Event(
        kind="move",
        text=describe_move(before, slot, after, human),
        state=state_view(after, round_number),
        move=MoveView(
            mover=move.mover,
            slot=slot,
            lifted=move.lifted,
            drops=[Drop(slot=s, buttons=b) for s, b in move.drops],
            extra_turn=move.extra_turn,
        ),
    )


def start_events(
    state: State, round_number: int, human: Color | None, previous: State | None
) -> list[Event]:
    """The events of a round starting (``previous``: the round before, None for the first)."""
    text = starter_line(state, round_number, previous, human)
    return [Event(kind="round_start", text=text, state=state_view(state, round_number))]


def end_events(state: State, round_number: int, human: Color | None) -> list[Event]:
    """The events of a round ending, and of the match when it ends too."""
    view = state_view(state, round_number)
    events = [Event(kind="round_end", text=round_summary(state, round_number, human), state=view)]
    if state.match_over:
        events.append(Event(kind="match_end", text=match_summary(state, human), state=view))
    return events


def hint(state: State) -> Hint:
    """The exact value of every legal move of ``state`` for the player to move."""
    if state.round_over:
        raise NotNow("the round is over, so there is no move to value")
    values = move_values(state)
    return Hint(
        mover=state.to_move,
        moves=[MoveValue(slot=s, value=v) for s, v in values.items()],
        text=hint_line(values),
    )


# --- games -----------------------------------------------------------------------------------
class Game:
    """A match between two players, each a person (``None``) or an offered player.

    ``seed`` draws the layouts and the first starter as ``buttonup-play --seed`` does, and seeds
    the bots' tie-breaks (the first bot gets the generator the terminal game gives its opponent).
    """

    def __init__(
        self,
        game_id: str,
        red: OfferedPlayer | None,
        black: OfferedPlayer | None,
        target: int = DEFAULT_TARGET,
        seed: int = 0,
    ) -> None:
        self.id = game_id
        self.seed = seed
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
    def start(self) -> list[Event]:
        """The first round's start, and the bots' moves up to a person's turn."""
        return start_events(self.state, self.round, self.human, None) + self._answer()

    def move(self, slot: int) -> list[Event]:
        """A person lifts ``slot``; then the bots answer up to a person's turn or the round end.

        Raises :class:`NotNow` when it is not a person's turn and :class:`IllegalMove` when the
        rules forbid the slot; the game is then unchanged.
        """
        state = self._playable()
        if self.players[state.to_move] is not None:
            who = self.offered[state.to_move]
            assert who is not None
            raise NotNow(f"it is {COLOR_NAMES[state.to_move]}'s turn, played by {who.label}")
        if slot not in state.legal_moves():
            message = str(_rules_error(state, slot))
            raise IllegalMove(message[:1].upper() + message[1:] + ".")
        return self._play(slot) + self._answer()

    def step(self) -> list[Event]:
        """The bot to move plays one move (watch mode). :class:`NotNow` on a person's turn."""
        state = self._playable()
        if self.players[state.to_move] is None:
            raise NotNow(
                f"it is {COLOR_NAMES[state.to_move]}'s turn, played by a person: send a move"
            )
        return self._bot_move()

    def next_round(self) -> list[Event]:
        """Set up the next round once this one is over, and the bots' moves if a person plays."""
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
        return start_events(self.state, self.round, self.human, self._previous) + self._answer()

    # --- inside ------------------------------------------------------------------------------
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

    def _bot_move(self) -> list[Event]:
        state = self.state
        player = self.players[state.to_move]
        assert player is not None
        who = self.offered[state.to_move]
        label = who.label if who else "the bot"
        try:
            slot = player.act(state)
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

    def _answer(self) -> list[Event]:
        """The bots' moves, when a person plays, until a person is to move or the round ends."""
        events: list[Event] = []
        while self.auto and not self.state.round_over:
            if self.players[self.state.to_move] is None:
                break
            events += self._bot_move()
        return events


def _rules_error(state: State, slot: int) -> ValueError:
    """The rules' own words for why ``slot`` cannot be lifted."""
    try:
        state.play(slot)
    except ValueError as error:
        return error
    raise AssertionError(f"slot {slot} is legal on {state.notation!r}")  # pragma: no cover


class GameStore:
    """Games by id, at most ``max_games``: adding one beyond drops the least recently used."""

    def __init__(self, max_games: int = MAX_GAMES) -> None:
        if max_games < 1:
            raise ValueError(f"max_games={max_games!r}: keep at least one game")
        self.max_games = max_games
        self._games: OrderedDict[str, Game] = OrderedDict()

    @staticmethod
    def new_id() -> str:
        """An unguessable id (128 random bits)."""
        return secrets.token_urlsafe(16)

    def add(self, game: Game) -> None:
        """Keep ``game``, dropping the least recently used games beyond the cap."""
        self._games[game.id] = game
        while len(self._games) > self.max_games:
            self._games.popitem(last=False)

    def get(self, game_id: str) -> Game:
        """The game with this id; :class:`UnknownGame` when there is none."""
        game = self._games.get(game_id)
        if game is None:
            raise UnknownGame(
                "No game has this id: it never existed or was dropped to make room for newer "
                "games; start a new game."
            )
        self._games.move_to_end(game_id)
        return game

    def __len__(self) -> int:
        return len(self._games)

    def __contains__(self, game_id: object) -> bool:
        return game_id in self._games


# --- records ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoredRecord:
    """A valid record read at start-up, to replay, with one line saying how it ended."""

    id: str
    kind: Literal["round", "match"]
    summary: str
    record: dict[str, Any]


def _stored(name: str, record: dict[str, Any]) -> StoredRecord:
    """``record`` checked (:class:`~buttonup_env.game.records.InvalidRecord` if it is not valid)."""
    if "rounds" in record:
        end = replay_match(record)
        winner = COLOR_NAMES[end.winner] if end.winner else "nobody"
        n = len(record["rounds"])
        summary = (
            f"match {name}: {winner} wins {end.score['R']}-{end.score['B']} "
            f"(target {end.target}, {n} round{'s' if n != 1 else ''})"
        )
        return StoredRecord(name, "match", summary, record)
    end = replay_round(record)
    s = end.strength
    summary = f"round {name}: strength Red {s['R']}, Black {s['B']}"
    return StoredRecord(name, "round", summary, record)


def load_records(paths: Iterable[str | Path]) -> tuple[list[StoredRecord], list[str]]:
    """The valid records of the JSON Lines files ``paths`` and a note per file saying how many.

    Raises ``OSError`` (or ``UnicodeDecodeError``) when a file cannot be read.
    """
    stored: list[StoredRecord] = []
    notes: list[str] = []
    for path in paths:
        valid, skipped, first_problem = 0, 0, ""
        for line in read_records(path):
            try:
                if line.record is None:
                    raise InvalidRecord(line.error)
                stored.append(_stored(line.name, line.record))
                valid += 1
            except InvalidRecord as error:
                skipped += 1
                first_problem = first_problem or f"{line.name}: {error}"
        note = f"{path}: {valid} record{'s' if valid != 1 else ''} to replay"
        if skipped:
            note += (
                f", {skipped} invalid skipped (first, {first_problem}; "
                f"python -m buttonup_env.replay {path} lists them all)"
            )
        notes.append(note)
    return stored, notes


def replay_events(record: dict[str, Any]) -> list[Event]:
    """A valid round or match record played out as events (a round alone starts from 0-0)."""
    if "rounds" in record:
        target = record.get("target", DEFAULT_TARGET)
        rounds = record["rounds"]
    else:
        target, rounds = DEFAULT_TARGET, [record]
    events: list[Event] = []
    previous: State | None = None
    for number, round_ in enumerate(rounds, start=1):
        layout = parse_board(round_["layout"])
        if previous is None:
            state = State.new_round(layout, round_["first"], target=target)
        else:
            state = previous.next_round(layout)
        events += start_events(state, number, None, previous)
        for slot in round_["moves"]:
            after = state.play(slot)
            events.append(move_event(state, slot, after, number, None))
            state = after
        events += end_events(state, number, None)
        previous = state
    return events


def replay(index: int, stored: StoredRecord) -> Replay:
    """The replay of ``stored`` (offered as number ``index``)."""
    return Replay(
        index=index, id=stored.id, summary=stored.summary, events=replay_events(stored.record)
    )


def record_summaries(stored: list[StoredRecord]) -> list[RecordSummary]:
    """The records offered for replay, by index."""
    return [
        RecordSummary(index=i, id=r.id, kind=r.kind, summary=r.summary)
        for i, r in enumerate(stored)
    ]
