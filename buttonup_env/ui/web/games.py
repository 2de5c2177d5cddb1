"""The games the web app keeps, and the records it replays; no HTTP here.

A :class:`Game` is a :class:`~buttonup_env.game.match.Match` with a player for each colour: a person
(moves come from the page) or a bot or policy (moves come from its ``act``). When a person
plays, the bots answer by themselves; when only bots play (watch mode) each of their moves waits
for :meth:`Game.step`, so the page sets the pace. Everything a game says comes from
:mod:`buttonup_env.ui.narration`, so it reads as the terminal game does. A bot's move is
computed by :class:`~buttonup_env.ui.web.workers.Workers`, beside the event loop and with a
time limit; the game itself changes only on the event loop, one request at a time.

:class:`GameStore` keeps the games in memory under unguessable ids, at most ``max_games`` of
them and at most ``max_per_client`` for each client (an IP address; an IPv6 client's /64). A
client beyond its share pushes out its own game left unused the longest, never another
client's; when the store is full, games unused for :data:`GAME_IDLE_SECONDS` make room, and
otherwise a new game is refused (:class:`StoreFull`).

Records are read once, at start-up: at most :data:`MAX_RECORDS` of them, each of at most
:data:`MAX_REPLAY_ROUNDS` rounds, so a replay is at most about ten thousand events.
:class:`ReplayCache` keeps the JSON of the replays asked for, so each is computed once.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
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
    RecordPage,
    RecordSummary,
    Replay,
    StateView,
)
from .workers import Busy, Stopping, TooSlow, Workers

MAX_GAMES = 1000
"""How many games the server keeps by default."""

MAX_GAMES_PER_CLIENT = 50
"""How many of them one client (an IP address) may keep by default."""

GAME_IDLE_SECONDS = 3600.0
"""A game unused this long may be dropped to make room for another client's."""

MAX_RECORDS = 10_000
"""How many records the server offers (the first of its ``--records`` files)."""

MAX_REPLAY_ROUNDS = 1000
"""The most rounds a record offered for replay may have (a match to the largest target, 1,000
points, takes a few hundred; tied rounds score nothing, so a match can take any number)."""

EVENTS_PER_ROUND = 2 + 8
"""A round's events in a replay: its start, eight moves, its end (and the match's end once)."""

MAX_RECORDS_PAGE = 500
"""The most records one page of ``GET /api/records`` lists."""

MAX_REPLAY_CACHE_BYTES = 64 << 20
"""How much JSON of replays :class:`ReplayCache` keeps."""


class IllegalMove(ValueError):
    """A move the rules do not allow; the message names the slot and the legal ones."""


class NotNow(ValueError):
    """A request that does not fit the game's moment (not your turn, round over, ...)."""


class UnknownGame(LookupError):
    """No game has this id (never made, or dropped to make room)."""


class PlayerFailed(RuntimeError):
    """A bot or policy failed to choose a move (it raised, chose an illegal slot, or took
    longer than the time limit)."""


class ServerBusy(RuntimeError):
    """Every worker thread is taken, or the server is stopping: no move can be computed now."""


class StoreFull(RuntimeError):
    """The server keeps as many games as it may, none of them this client's or idle."""


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


def client_of(host: str | None) -> str:
    """The client a request's address belongs to: the address itself, or for IPv6 its /64
    network (one machine usually has a whole /64 to pick addresses from)."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class GameStore:
    """Games by id: at most ``max_games`` in all, ``max_per_client`` for each client.

    A client's new game beyond its share, or in a full store, pushes out that client's own
    game left unused the longest. A client with no game there yet gets room from games left
    unused for ``idle_seconds`` (anyone's), or :class:`StoreFull`. So no client's requests can
    push out another client's game that is in use. ``clock`` tells the time (for the tests).
    """

    def __init__(
        self,
        max_games: int = MAX_GAMES,
        max_per_client: int = MAX_GAMES_PER_CLIENT,
        idle_seconds: float = GAME_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_games < 1 or max_per_client < 1:
            raise ValueError(
                f"max_games={max_games!r}, max_per_client={max_per_client!r}: keep at least one"
            )
        self.max_games = max_games
        self.max_per_client = max_per_client
        self.idle_seconds = idle_seconds
        self.clock = clock
        # game id -> (game, client, last use), least recently used first
        self._games: OrderedDict[str, tuple[Game, str, float]] = OrderedDict()
        self._counts: dict[str, int] = {}

    @staticmethod
    def new_id() -> str:
        """An unguessable id (128 random bits)."""
        return secrets.token_urlsafe(16)

    def _drop(self, game_id: str) -> None:
        _, client, _ = self._games.pop(game_id)
        self._counts[client] -= 1
        if not self._counts[client]:
            del self._counts[client]

    def _oldest_of(self, client: str) -> str | None:
        return next((i for i, (_, c, _) in self._games.items() if c == client), None)

    def make_room(self, client: str = "") -> None:
        """Make room for a new game of ``client`` (see the class docstring); :class:`StoreFull`
        when there is none. Called before a game is made, so a refusal costs nothing."""
        now = self.clock()
        while self._games:  # games unused for long go first, whoever's they are
            oldest = next(iter(self._games))
            if now - self._games[oldest][2] < self.idle_seconds:
                break
            self._drop(oldest)
        own = self._counts.get(client, 0)
        if own >= self.max_per_client or (own and len(self._games) >= self.max_games):
            mine = self._oldest_of(client)
            assert mine is not None
            self._drop(mine)
        elif len(self._games) >= self.max_games:
            minutes = self.idle_seconds / 60
            raise StoreFull(
                f"the server keeps {len(self._games):,} games, as many as it may, and none has "
                f"been left unused for {minutes:g} minutes; try again later"
            )

    def add(self, game: Game, client: str = "") -> None:
        """Keep ``game`` as ``client``'s, making room first (:meth:`make_room`)."""
        self.make_room(client)
        self._games[game.id] = (game, client, self.clock())
        self._counts[client] = self._counts.get(client, 0) + 1

    def get(self, game_id: str) -> Game:
        """The game with this id; :class:`UnknownGame` when there is none."""
        entry = self._games.get(game_id)
        if entry is None:
            raise UnknownGame(
                "No game has this id: it never existed or was dropped to make room for newer "
                "games; start a new game."
            )
        game, client, _ = entry
        self._games[game_id] = (game, client, self.clock())
        self._games.move_to_end(game_id)
        return game

    def games_of(self, client: str) -> int:
        """How many games ``client`` has here."""
        return self._counts.get(client, 0)

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

    @property
    def rounds(self) -> int:
        """How many rounds it has."""
        return len(self.record["rounds"]) if "rounds" in self.record else 1


def _stored(name: str, record: dict[str, Any]) -> StoredRecord:
    """``record`` checked (:class:`~buttonup_env.game.records.InvalidRecord` if it is not valid,
    or if it has more than :data:`MAX_REPLAY_ROUNDS` rounds)."""
    if "rounds" in record:
        rounds = record["rounds"]
        if isinstance(rounds, list) and len(rounds) > MAX_REPLAY_ROUNDS:
            raise InvalidRecord(
                f"it has {len(rounds):,} rounds; the server replays records of at most "
                f"{MAX_REPLAY_ROUNDS:,}"
            )
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


def load_records(
    paths: Iterable[str | Path], max_records: int = MAX_RECORDS
) -> tuple[list[StoredRecord], list[str]]:
    """The valid records of the JSON Lines files ``paths`` and a note per file saying how many.

    At most ``max_records`` are kept, the first ones; once there are that many the files are
    read no further (a note says so). A record of more than :data:`MAX_REPLAY_ROUNDS` rounds is
    skipped as invalid. Raises ``OSError`` (or ``UnicodeDecodeError``) when a file cannot be
    read, and for anything but a regular file.
    """
    stored: list[StoredRecord] = []
    notes: list[str] = []
    for path in paths:
        if len(stored) >= max_records:
            notes.append(f"{path}: not read, the server offers at most {max_records:,} records")
            continue
        valid, skipped, first_problem, full = 0, 0, "", False
        for line in read_records(path):
            if len(stored) >= max_records:
                full = True
                break
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
        if full:
            note += f"; the rest is not read, the server offers at most {max_records:,} records"
        notes.append(note)
    return stored, notes


def replay_events(record: dict[str, Any]) -> list[Event]:
    """A valid round or match record played out as events (a round alone starts from 0-0).

    ``ValueError`` for a record of more than :data:`MAX_REPLAY_ROUNDS` rounds (at most
    ``EVENTS_PER_ROUND`` events each)."""
    if "rounds" in record:
        target = record.get("target", DEFAULT_TARGET)
        rounds = record["rounds"]
    else:
        target, rounds = DEFAULT_TARGET, [record]
    if len(rounds) > MAX_REPLAY_ROUNDS:
        raise ValueError(
            f"the record has {len(rounds):,} rounds; a replay has at most {MAX_REPLAY_ROUNDS:,}"
        )
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


class ReplayCache:
    """The JSON of the replays asked for, up to ``max_bytes`` of it (the least recently asked
    for is forgotten first): each replay is computed once, not once per request."""

    def __init__(self, max_bytes: int = MAX_REPLAY_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._kept: OrderedDict[int, bytes] = OrderedDict()
        self._bytes = 0

    def get(self, index: int) -> bytes | None:
        """The JSON kept for record ``index``, or None."""
        body = self._kept.get(index)
        if body is not None:
            self._kept.move_to_end(index)
        return body

    def put(self, index: int, body: bytes) -> None:
        """Keep ``body`` as record ``index``'s replay, forgetting older ones beyond the cap."""
        if index in self._kept:
            self._bytes -= len(self._kept.pop(index))
        self._kept[index] = body
        self._bytes += len(body)
        while self._bytes > self.max_bytes and len(self._kept) > 1:
            _, old = self._kept.popitem(last=False)
            self._bytes -= len(old)


def replay_json(index: int, stored: StoredRecord) -> bytes:
    """:func:`replay` as the JSON the API sends."""
    return replay(index, stored).model_dump_json().encode()


def record_page(stored: list[StoredRecord], start: int, count: int) -> RecordPage:
    """Records ``start`` to ``start + count - 1`` of those offered for replay, by index."""
    end = min(start + count, len(stored))
    return RecordPage(
        total=len(stored),
        start=start,
        records=[
            RecordSummary(index=i, id=stored[i].id, kind=stored[i].kind, summary=stored[i].summary)
            for i in range(start, end)
        ],
    )
