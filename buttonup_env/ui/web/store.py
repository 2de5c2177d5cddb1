"""The games the web app keeps: :class:`GameStore` keeps them in memory under unguessable ids,
at most ``max_games`` of them and at most ``max_per_client`` for each client (an IP address;
an IPv6 client's /64). A client beyond its share pushes out its own game left unused the
longest, never another client's; when the store is full, games unused for
:data:`GAME_IDLE_SECONDS` make room, and otherwise a new game is refused
(:class:`StoreFull`)."""

from __future__ import annotations

import ipaddress
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

from .errors import StoreFull, UnknownGame
from .games import Game

MAX_GAMES = 1000
"""How many games the server keeps by default."""

MAX_GAMES_PER_CLIENT = 50
"""How many of them one client (an IP address) may keep by default."""

GAME_IDLE_SECONDS = 3600.0
"""A game unused this long may be dropped to make room for another client's."""


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
