"""The web app: the page's files and a JSON API over :mod:`buttonup_env.ui.web.games`.

``create_app(players, records)`` builds a FastAPI application. The API:

=========================================  =============================================
``GET  /api/options``                      the players offered, the default opponent and target
``POST /api/games``                        a new game (:class:`NewGame`), 201 and its view
``GET  /api/games/{id}``                   the game's position
``POST /api/games/{id}/moves``             a person lifts ``{"slot": n}``; the bots answer
``POST /api/games/{id}/step``              the bot to move plays one move (watch mode)
``POST /api/games/{id}/next-round``        the next round, once this one is over
``GET  /api/games/{id}/hint``              the exact value of each legal move
``GET  /api/records?start=0&count=100``    a page of the records offered for replay
``GET  /api/records/{index}``              one record played out, event by event
``GET  /api/openapi.json``                 all of the above as an OpenAPI schema
=========================================  =============================================

Every error is ``{"detail": "<one sentence>"}``: 400 for an illegal move (the slot and the legal
ones), 404 for an unknown game or record, 409 for a request that does not fit the game's moment
(not a person's turn, round over, the game still answering an earlier request, ...), 422 for a
malformed request, 500 when a bot or policy fails to choose a move (it raised, chose an illegal
slot or took longer than 10 s; the game keeps the moves made before), 503 when the server is
busy or keeps as many games as it may. A refused request leaves the game unchanged. In front of
all of it, :class:`~buttonup_env.ui.web.guard.RequestGuard` answers 400 or 421 for a ``Host``
the server does not serve (DNS rebinding), 413 for a body over 4 KiB and 408 for a body that
does not arrive, and cuts any answer over 8 MiB.

The handlers run on the event loop and change the games there, one request at a time per game;
what takes time (a bot's or a policy's move, a hint, a replay) is computed in a worker thread
with a time limit (:mod:`buttonup_env.ui.web.workers`), so that one slow player never holds up
another client's request, nor the server's Ctrl-C and SIGTERM. Each client (an IP address)
keeps at most 50 games: its own oldest make room for its new ones, never another client's
(:class:`~buttonup_env.ui.web.store.GameStore`).

Nothing a request says can make the server open a file: the page's files are the package's own,
records were read at start-up, and players are chosen by key among those offered.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...game.records import shown
from .errors import IllegalMove, NotNow, PlayerFailed, ServerBusy, StoreFull, UnknownGame
from .games import Game
from .guard import MAX_BODY_BYTES, MAX_RESPONSE_BYTES, AllowedHosts, RequestGuard
from .offered import OfferedPlayer, offer
from .replays import MAX_RECORDS_PAGE, ReplayCache, StoredRecord, record_page, replay_json
from .schemas import (
    HUMAN,
    MAX_TARGET,
    Event,
    GameView,
    Hint,
    MoveRequest,
    NewGame,
    Options,
    PlayerOption,
    Problem,
    RecordPage,
    Replay,
)
from .store import MAX_GAMES, MAX_GAMES_PER_CLIENT, GameStore, client_of
from .views import hint
from .workers import Busy, Stopping, TooSlow, Workers

STATIC = Path(__file__).parent / "static"
"""The page's files, shipped inside the package."""

SECURITY_HEADERS = {
    # Everything the page needs comes from this server: no CDN, no inline script.
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

ERRORS = {
    400: {"model": Problem, "description": "an illegal move: the slot and the legal ones"},
    404: {"model": Problem, "description": "no such game (never made, or dropped)"},
    409: {
        "model": Problem,
        "description": "not now: not a person's turn, the round is over, or the game is still "
        "answering an earlier request",
    },
    422: {"model": Problem, "description": "a malformed request"},
    500: {
        "model": Problem,
        "description": "a bot or policy failed to choose a move (or took longer than 10 s)",
    },
    503: {"model": Problem, "description": "the server is busy, or keeps as many games as it may"},
}


def _sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _problem(status: int, text: str) -> JSONResponse:
    return JSONResponse({"detail": _sentence(text)}, status_code=status)


def _validation_sentence(error: RequestValidationError) -> str:
    """The first problem of a malformed request, in words."""
    errors = error.errors()
    if not errors:  # pragma: no cover - FastAPI always lists at least one
        return "the request is malformed"
    first = errors[0]
    loc = [str(part) for part in first.get("loc", ()) if part not in ("body", "path", "query")]
    field = f'the field "{".".join(loc)}"' if loc else "the request body"
    kind = first.get("type", "")
    if not loc and isinstance(first.get("input"), bytes):  # a body sent as another type
        text = "the request body is not sent as JSON: send it with Content-Type: application/json"
    elif kind == "json_invalid":
        text = "the request body is not valid JSON"
    elif kind == "missing" and not loc:
        text = "the request has no JSON body"
    elif kind == "missing":
        text = f"{field} is missing"
    elif kind == "extra_forbidden":
        text = f'the request has an unknown field "{".".join(loc)}"'
    else:
        message = str(first.get("msg", "is not valid"))
        given = shown(first.get("input"), 40, as_json=True)
        text = f"{field} is {given}: {message[:1].lower() + message[1:]}"
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return text


class NotOffered(ValueError):
    """A new game names a player the server does not offer."""


class UnknownRecord(LookupError):
    """No record has this index."""


def create_app(
    players: list[OfferedPlayer] | None = None,
    records: list[StoredRecord] | None = None,
    *,
    max_games: int = MAX_GAMES,
    max_games_per_client: int = MAX_GAMES_PER_CLIENT,
    notes: list[str] | None = None,
    hosts: AllowedHosts | None = None,
    max_body: int = MAX_BODY_BYTES,
    max_response: int = MAX_RESPONSE_BYTES,
    workers: Workers | None = None,
) -> FastAPI:
    """The web app offering ``players`` (default: the three bots; the first is the default
    opponent) and ``records`` to replay, keeping at most ``max_games`` games, at most
    ``max_games_per_client`` of them for one client.

    ``notes`` are shown on the page (e.g. that the shipped agent could not be found).
    ``hosts`` are the ``Host`` names it answers (default: ``localhost`` and the loopback
    addresses only; ``buttonup-web`` passes those of its ``--host``), ``max_body`` the largest
    request body it reads and ``max_response`` the largest answer it sends (see
    :mod:`buttonup_env.ui.web.guard`). ``workers`` compute the bots' moves, the hints and the
    replays (default: :class:`~buttonup_env.ui.web.workers.Workers` with a 10 s limit).
    """
    offered = list(players) if players is not None else offer([])
    if not offered:
        raise ValueError("offer at least one player (a bot or a policy)")
    app = FastAPI(
        title="Button Up!",
        summary="Play, watch and replay Button Up! in the browser.",
        version=_version(),
        docs_url=None,  # FastAPI's docs pages load their scripts from a CDN: not here
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.store = GameStore(max_games, max_games_per_client)
    app.state.workers = workers if workers is not None else Workers()
    for error, status in PROBLEMS.items():
        app.add_exception_handler(error, problem_handler(status))
    app.add_exception_handler(Exception, server_error)
    app.add_exception_handler(RequestValidationError, malformed)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.middleware("http")(security_headers)
    app.add_middleware(  # outermost: before anything reads the request
        RequestGuard,
        hosts=hosts,
        max_body=max_body,
        max_response=max_response,
        headers=SECURITY_HEADERS,
    )
    add_page(app)
    add_games(app, offered, list(notes or []), len(records or []))
    add_records(app, list(records or []))
    return app


PROBLEMS: dict[type[Exception], int] = {
    UnknownGame: 404,
    IllegalMove: 400,
    NotNow: 409,
    PlayerFailed: 500,
    ServerBusy: 503,
    Busy: 503,
    Stopping: 503,
    TooSlow: 503,
    StoreFull: 503,
    NotOffered: 422,
    UnknownRecord: 404,
}
"""The answer's status for each error a request can meet (its message is the answer's
sentence); the app registers a handler for each."""


def problem_handler(status: int) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    """The exception handler that answers ``status`` with the error's sentence (a player too
    slow adds that the client may try again)."""

    async def answer(request: Request, error: Exception) -> JSONResponse:
        later = "; try again later" if isinstance(error, TooSlow) else ""
        return _problem(status, f"{error}{later}")

    return answer


async def server_error(request: Request, error: Exception) -> JSONResponse:
    """Anything else: still a sentence (the server's log has the traceback)."""
    return _problem(500, f"the server failed to answer this request ({type(error).__name__})")


async def malformed(request: Request, error: RequestValidationError) -> JSONResponse:
    """A malformed request, in words; a malformed move names the legal slots."""
    text = _validation_sentence(error)
    store: GameStore = request.app.state.store
    game_id = request.path_params.get("game_id")
    if request.url.path.endswith("/moves") and game_id in store:
        state = store.get(game_id).state
        if state.legal_moves():
            legal = ", ".join(map(str, state.legal_moves()))
            text += f'; send {{"slot": n}} with one of the legal slots {legal}'
    return _problem(422, text)


async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    """Starlette's own errors (no such address, another method) as sentences."""
    if error.status_code == 404:
        text = "nothing is served at this address: the page is at / and the API under /api"
    elif error.status_code == 405:
        text = f"this address does not answer {request.method} requests"
    else:
        text = str(error.detail)
    return JSONResponse(
        {"detail": _sentence(text)}, status_code=error.status_code, headers=error.headers
    )


async def security_headers(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    response = await call_next(request)
    response.headers.update(SECURITY_HEADERS)
    return response


def add_page(app: FastAPI) -> None:
    """The page: its HTML, its icon and its static files (the package's own)."""

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")


def view(game: Game, events: list[Event]) -> GameView:
    """The answer about ``game``: its players, seed and position, and the ``events`` of the
    request."""
    return GameView(
        id=game.id,
        players=game.players_view(),
        seed=game.seed,
        auto=game.auto,
        state=game.view(),
        events=events,
    )


def chosen(offered: list[OfferedPlayer], field: str, key: str) -> OfferedPlayer | None:
    """The player a new game names by ``key`` for its ``field`` side (None: a person)."""
    if key == HUMAN:
        return None
    by_key = {p.key: p for p in offered}
    if key not in by_key:
        choices = ", ".join([HUMAN, *by_key])
        raise NotOffered(
            f"the {field} player {shown(key, 40, as_json=True)} is not offered here; "
            f"use one of {choices}"
        )
    return by_key[key]


def add_games(app: FastAPI, offered: list[OfferedPlayer], notes: list[str], records: int) -> None:
    """The API of the games: the options, a new game, its position, its moves, its hints."""
    store: GameStore = app.state.store
    workers: Workers = app.state.workers

    @app.get("/api/options", response_model=Options)
    async def options() -> Options:
        """What the page can set up: the players offered (default opponent first)."""
        return Options(
            players=[PlayerOption(key=p.key, label=p.label, elo=p.elo) for p in offered],
            default_opponent=offered[0].key,
            max_target=MAX_TARGET,
            records=records,
            notes=notes,
        )

    @app.post("/api/games", response_model=GameView, status_code=201, responses=ERRORS)
    async def new_game(body: NewGame, request: Request) -> GameView:
        """Start a match; when a bot starts and a person plays, its moves come with it."""
        red, black = chosen(offered, "red", body.red), chosen(offered, "black", body.black)
        client = client_of(request.client.host if request.client else None)
        store.make_room(client)  # a refusal before anything is computed
        seed = body.seed if body.seed is not None else secrets.randbelow(10**6)
        game = Game(store.new_id(), red, black, target=body.target, seed=seed, workers=workers)
        events = await game.start()
        store.add(game, client)
        return view(game, events)

    @app.get("/api/games/{game_id}", response_model=GameView, responses=ERRORS)
    async def get_game(game_id: str) -> GameView:
        """The game's position (no events)."""
        return view(store.get(game_id), [])

    @app.post("/api/games/{game_id}/moves", response_model=GameView, responses=ERRORS)
    async def move(game_id: str, request: MoveRequest) -> GameView:
        """A person lifts a slot; the bots answer up to the person's turn or the round's end."""
        game = store.get(game_id)
        return view(game, await game.move(request.slot))

    @app.post("/api/games/{game_id}/step", response_model=GameView, responses=ERRORS)
    async def step(game_id: str) -> GameView:
        """The bot to move plays one move."""
        game = store.get(game_id)
        return view(game, await game.step())

    @app.post("/api/games/{game_id}/next-round", response_model=GameView, responses=ERRORS)
    async def next_round(game_id: str) -> GameView:
        """The next round of the match, once the current one is over."""
        game = store.get(game_id)
        return view(game, await game.next_round())

    @app.get("/api/games/{game_id}/hint", response_model=Hint, responses=ERRORS)
    async def get_hint(game_id: str) -> Hint:
        """The exact value of each legal move for the player to move (as buttonup-play --hint)."""
        state = store.get(game_id).state
        return await workers.run(functools.partial(hint, state), "the solver valuing the moves")


def add_records(app: FastAPI, stored: list[StoredRecord]) -> None:
    """The API of the records offered for replay: a page of them, and one played out."""
    workers: Workers = app.state.workers
    replays = ReplayCache()

    @app.get("/api/records", response_model=RecordPage, responses=ERRORS)
    async def list_records(
        start: int = Query(0, ge=0, le=2**31, description="the index of the first record"),
        count: int = Query(100, ge=1, le=MAX_RECORDS_PAGE, description="how many to list"),
    ) -> RecordPage:
        """A page of the records given with --records, by index."""
        return record_page(stored, start, count)

    @app.get("/api/records/{index}", response_model=Replay, responses=ERRORS)
    async def get_record(index: int) -> Response:
        """One record played out as events, to step through."""
        if not stored:
            raise UnknownRecord("no records are offered: start the server with --records FILE")
        if not 0 <= index < len(stored):
            raise UnknownRecord(
                f"there is no record {index}; the records are 0 to {len(stored) - 1}"
            )
        body = replays.get(index)
        if body is None:
            compute = functools.partial(replay_json, index, stored[index])
            body = await workers.run(compute, f"the replay of record {index}")
            replays.put(index, body)
        return Response(body, media_type="application/json")


def _version() -> str:
    from ... import __version__

    return __version__
