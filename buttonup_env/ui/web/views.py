"""What the web app says about a position: the views and events of the API
(:mod:`buttonup_env.ui.web.schemas`), in the words of :mod:`buttonup_env.ui.narration`."""

from __future__ import annotations

from ...game.equity import best_moves, match_move_values
from ...game.rules import Color, State
from ...game.solver import move_values
from ..narration import (
    Move,
    describe_move,
    hint_line,
    match_summary,
    round_summary,
    starter_line,
)
from .errors import NotNow
from .schemas import (
    Drop,
    Event,
    FinalStack,
    Hint,
    MoveValue,
    MoveView,
    Points,
    StateView,
)


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
        starter=state.starter,
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
    """The exact value of every legal move of ``state`` for the player to move: its
    probability of winning the match with perfect play, and the round's final margin."""
    if state.round_over:
        raise NotNow("the round is over, so there is no move to value")
    chances, margins = match_move_values(state), move_values(state)
    best = set(best_moves(chances))
    return Hint(
        mover=state.to_move,
        moves=[
            MoveValue(slot=s, value=margins[s], chance=p, best=s in best)
            for s, p in chances.items()
        ],
        text=hint_line(chances, margins),
    )
