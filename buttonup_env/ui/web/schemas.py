"""The JSON the web app's API reads and writes, as pydantic models (FastAPI validates both ways).

Positions travel as :class:`StateView`; everything that happens in a game — a round starting, a
move, a round or the match ending — travels as an :class:`Event` carrying the position after it,
so the page can animate a move from the position it shows and a replay can step back and forth.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from ...game.rules import DEFAULT_TARGET, NUM_SLOTS

MAX_TARGET = 100
"""The largest target a web game accepts (it bounds a game's length and memory)."""

HUMAN = "human"
"""The player key of a person playing in the browser."""

ColorName = Literal["R", "B"]


class Points(BaseModel):
    """A number for each colour."""

    R: int
    B: int


class FinalStack(BaseModel):
    """The end of a round: the one stack left, bottom to top, and what it scores."""

    stack: str
    strength: Points
    points: Points


class StateView(BaseModel):
    """A position of a match as the page shows it."""

    board: list[str] = Field(
        min_length=NUM_SLOTS, max_length=NUM_SLOTS, description="stacks bottom to top, '' empty"
    )
    notation: str = Field(description="the board in the rules' notation: 'B . . BW BW R W R R'")
    to_move: ColorName = Field(description="the player to move (once a round is over: who would)")
    starter: ColorName = Field(
        description="who started the round (on equal scores it decides who starts the next)"
    )
    score: Points
    target: int
    round: int = Field(description="the round's number in the match, from 1")
    moves_played: int = Field(description="moves played in this round, 0 to 8")
    legal: list[int] = Field(description="the slots that may be lifted (none once it is over)")
    round_over: bool
    match_over: bool
    winner: ColorName | None
    final: FinalStack | None = Field(description="the round's result once it is over")


class Drop(BaseModel):
    """Buttons sown onto one slot, in sowing order (several only for the overflow)."""

    slot: int
    buttons: str


class MoveView(BaseModel):
    """A move: who lifted which stack, and where its buttons went."""

    mover: ColorName
    slot: int
    lifted: str
    drops: list[Drop]
    extra_turn: bool


class Event(BaseModel):
    """Something that happened, in words, with the position after it."""

    kind: Literal["round_start", "move", "round_end", "match_end"]
    text: str = Field(description="what happened, as the terminal game says it")
    state: StateView
    move: MoveView | None = None


class PlayerOption(BaseModel):
    """A player the server offers: a bot, a graded bot or an exported policy, by key."""

    key: str
    label: str
    elo: float | None = Field(
        None, description="its rating in the shipped league (Elo, the random bot at 0), if known"
    )


class Options(BaseModel):
    """What the page can set up."""

    players: list[PlayerOption] = Field(description="bots and policies, the default first")
    default_opponent: str
    default_target: int = DEFAULT_TARGET
    max_target: int = MAX_TARGET
    records: int = Field(description="how many records can be replayed")
    notes: list[str] = Field(description="what the server said at start-up about its players")


class PlayerView(BaseModel):
    """Who plays a colour in a game."""

    key: str = Field(description=f"{HUMAN!r} for a person, else an offered player's key")
    label: str
    human: bool


class Players(BaseModel):
    """Who plays Red and who plays Black."""

    R: PlayerView
    B: PlayerView


class NewGame(BaseModel):
    """A request for a new match: who plays each colour, the target, optionally a seed."""

    model_config = ConfigDict(extra="forbid")

    red: str = Field(HUMAN, max_length=100, description=f"{HUMAN!r} or an offered player's key")
    black: str = Field(max_length=100, description=f"{HUMAN!r} or an offered player's key")
    target: StrictInt = Field(DEFAULT_TARGET, ge=1, le=MAX_TARGET)
    seed: StrictInt | None = Field(
        None, ge=0, le=2**63 - 1, description="fixes layouts, first starter and bots' tie-breaks"
    )


class MoveRequest(BaseModel):
    """A person's move: the slot to lift."""

    model_config = ConfigDict(extra="forbid")

    slot: StrictInt


class GameView(BaseModel):
    """A game: its id, players, seed and position, and what happened in this request."""

    id: str
    players: Players
    seed: int
    auto: bool = Field(description="bots move by themselves (a person plays); else use /step")
    state: StateView
    events: list[Event] = Field(description="what happened in this request, in order")


class MoveValue(BaseModel):
    """The exact value of lifting a slot for the mover, with perfect play after it."""

    slot: int
    value: int
    """The round's final margin (the round solver's value)."""
    chance: float
    """The probability of winning the match (the match solved)."""
    best: bool
    """Whether it is a best move of the match."""


class Hint(BaseModel):
    """The exact value of every legal move, for the player to move."""

    mover: ColorName
    moves: list[MoveValue]
    text: str


class RecordSummary(BaseModel):
    """A record offered for replay."""

    index: int
    id: str
    kind: Literal["round", "match"]
    summary: str


class RecordPage(BaseModel):
    """One page of the records offered for replay (``GET /api/records?start=&count=``)."""

    total: int = Field(description="how many records are offered in all")
    start: int = Field(description="the index of the first record listed")
    records: list[RecordSummary] = Field(description="records start, start + 1, ... by index")


class Replay(BaseModel):
    """A record played out: every event from the first round's start to the end."""

    index: int
    id: str
    summary: str
    events: list[Event]


class Problem(BaseModel):
    """An error: one sentence."""

    detail: str
