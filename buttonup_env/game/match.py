"""A match played move by move, with its history kept as game records.

:class:`Match` strings rounds together: it draws every layout from a seeded
``numpy.random.Generator``, applies the starting rule and the target (both from
:mod:`buttonup_env.game.rules`) and writes the record of every round in the record format of
``docs/rules.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .rules import DEFAULT_TARGET, Color, State, random_layout


def _check_first(first: object) -> None:
    if first is not None and first not in ("R", "B"):
        raise ValueError(f"first must be 'R', 'B' or None (drawn at random), got {first!r}")


class Match:
    """A match from 0-0 to the target.

    Args:
        rng: the generator that draws the layouts (and the first starter when ``first`` is None);
            an integer seeds a new one.
        target: points that win the match (default 15).
        first: who starts the first round; ``None`` draws it from ``rng``.
        layout: the first round's layout; ``None`` draws it from ``rng``.

    ``state`` is the current position. :meth:`play` plays a move; when a round ends the state is
    the finished round (final stack, points added) until :meth:`next_round` sets up the next.
    ``rounds`` holds the records of the finished rounds.
    """

    def __init__(
        self,
        rng: np.random.Generator | int | None = None,
        target: int = DEFAULT_TARGET,
        first: Color | None = None,
        layout: Sequence[str] | str | None = None,
    ) -> None:
        _check_first(first)
        self.rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        if first is None:
            first = "R" if self.rng.integers(2) == 0 else "B"
        self.first: Color = first
        if layout is None:
            layout = random_layout(self.rng)
        self.state = State.new_round(layout, first, target=target)
        self.rounds: list[dict[str, Any]] = []
        self._start = self.state
        self._moves: list[int] = []
        self._movers: list[Color] = []
        self._extra: list[bool] = []
        self._boards: list[str] = []

    @property
    def target(self) -> int:
        """Points that win the match."""
        return self.state.target

    @property
    def over(self) -> bool:
        """True once a player has reached the target."""
        return self.state.match_over

    @property
    def winner(self) -> Color | None:
        """The winner once the match is over."""
        return self.state.winner

    def play(self, slot: int) -> State:
        """Play ``slot`` for the player to move and return the new state."""
        before = self.state
        after = before.play(slot)
        self._moves.append(int(slot))
        self._movers.append(before.to_move)
        self._extra.append(not after.round_over and after.to_move == before.to_move)
        self._boards.append(after.notation)
        self.state = after
        if after.round_over:
            self.rounds.append(self._round_record(after))
        return after

    def next_round(self, layout: Sequence[str] | str | None = None) -> State:
        """Set up the next round (``layout``, by default a random one; the starting rule) once
        the current one is over."""
        self.state = self.state.next_round(random_layout(self.rng) if layout is None else layout)
        self._start = self.state
        self._moves, self._movers, self._extra, self._boards = [], [], [], []
        return self.state

    def _round_record(self, final: State) -> dict[str, Any]:
        return {
            "layout": self._start.notation,
            "first": self._start.to_move,
            "moves": self._moves,
            "movers": self._movers,
            "extra_turn": self._extra,
            "boards": self._boards,
            "strength": final.strength,
            "points": final.round_points,
            "score_after": final.score,
        }

    def record(self, id: str) -> dict[str, Any]:
        """The match record (the format of ``docs/rules.md``) of the rounds finished so far."""
        return {
            "id": id,
            "target": self.target,
            "first": self.first,
            "rounds": self.rounds,
            "score": self.state.score if self.state.round_over else self._start.score,
            "winner": self.winner,
        }


def replayed(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` (a match record of layouts, starters and moves, as the arena keeps them)
    played again move by move, with every round in full as :class:`Match` writes it: the
    movers, extra turns, boards, final strength, points and score after each round. Its
    other fields (the players) are kept."""
    rounds = record["rounds"]
    match = Match(target=record["target"], first=rounds[0]["first"], layout=rounds[0]["layout"])
    for index, round_ in enumerate(rounds):
        if index:
            match.next_round(round_["layout"])
        for slot in round_["moves"]:
            match.play(slot)
    return {**record, **match.record(record["id"])}
