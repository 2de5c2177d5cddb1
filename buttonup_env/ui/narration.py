"""What is said about a game, in words: moves, the start and end of rounds, hints.

The terminal game (:mod:`buttonup_env.ui.play`), the browser app (``buttonup_env.ui.web``) and the
animations of recorded games (:mod:`buttonup_env.ui.animate`) tell a game with these, so the three
say the same things the same way. A move is told from the positions before and after it
(:class:`Move`): the rules, in :mod:`buttonup_env.game.rules`, made them; nothing here plays the
game again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..envs.render import COLOR_NAMES
from ..game.rules import NUM_SLOTS, Color, State, other


def _plain(stack: str) -> str:
    return stack or "."


@dataclass(frozen=True)
class Move:
    """``before.to_move`` lifting ``slot``, as it is told: read off the boards before and after."""

    before: State
    slot: int
    after: State

    @classmethod
    def play(cls, before: State, slot: int) -> Move:
        """The move of ``slot`` in ``before`` (``ValueError`` if it is not legal)."""
        return cls(before, slot, before.play(slot))

    @property
    def mover(self) -> Color:
        """Who moved."""
        return self.before.to_move

    @property
    def lifted(self) -> str:
        """The stack lifted, bottom to top."""
        return self.before.board[self.slot]

    @property
    def drops(self) -> list[tuple[int, str]]:
        """Where the buttons went: ``(slot, buttons added)``, in sowing order (clockwise)."""
        return sown(self.before, self.slot, self.after)

    @property
    def overflow(self) -> bool:
        """More buttons than stacks: the last ones went together onto the last stack."""
        return len(self.drops[-1][1]) > 1

    @property
    def landed_on(self) -> str:
        """The button under the last one sown (its colour decides the extra turn)."""
        last = self.drops[-1][0]
        return self.before.board[last][-1]

    @property
    def extra_turn(self) -> bool:
        """The mover moves again (the last button matched and the round goes on)."""
        return not self.after.round_over and self.after.to_move == self.mover


def sown(before: State, slot: int, after: State) -> list[tuple[int, str]]:
    """Where the buttons of ``slot`` went: ``(slot, buttons added)`` in sowing order.

    Read off the two boards (the stacks that grew, clockwise from ``slot``), so the rules stay
    in :mod:`buttonup_env.game.rules`.
    """
    drops = []
    for step in range(1, NUM_SLOTS):
        target = (slot + step) % NUM_SLOTS
        if after.board[target] != before.board[target]:
            drops.append((target, after.board[target][len(before.board[target]) :]))
    return drops


def player_name(color: Color, human: Color | None = None) -> str:
    """``Red`` / ``Black``, with ``(you)`` for the person's colour (``human``, if any)."""
    return COLOR_NAMES[color] + (" (you)" if color == human else "")


def score_line(state: State, human: Color | None = None) -> str:
    """``Red (you) 3 - 0 Black   target 15``."""
    score = state.score
    return (
        f"{player_name('R', human)} {score['R']} - {score['B']} {player_name('B', human)}   "
        f"target {state.target}"
    )


def describe_move(
    before: State,
    slot: int,
    after: State,
    human: Color | None = None,
    paint: Callable[[str], str] = _plain,
) -> str:
    """One line for a move: who lifted what, where the last button landed, what follows.

    ``human`` is the person's colour ("You lift"), or None to name both players by colour;
    ``paint`` shows a stack (plain letters by default).
    """
    move = Move(before, slot, after)
    mover, lifted = move.mover, move.lifted
    who = "You lift" if mover == human else f"{COLOR_NAMES[mover]} lifts"
    text = f"{who} slot {slot} ({paint(lifted)})"
    last, added = move.drops[-1]
    if len(added) == len(lifted) > 1:
        text += f": all {len(added)} go onto slot {last}, the only stack left"
    elif move.overflow:
        text += (
            f": more buttons than stacks, so the last {len(added)} ({paint(added)}) go "
            f"together onto slot {last} (no extra turn)"
        )
    else:
        text += f": {paint(added)} lands on {paint(move.landed_on)} on slot {last}"
    if after.round_over:
        return text + "; the round is over."
    if move.extra_turn:
        again = "you move again" if mover == human else f"{COLOR_NAMES[mover]} moves again"
        return f"{text}, {again}."
    return text + "."


def hint_line(match: Mapping[int, float], margins: Mapping[int, int]) -> str:
    """The exact value of each legal move for the player to move: its probability of winning
    the match (``match``, ``{slot: probability}``) and the round's final margin
    (``margins``), both with perfect play after it."""
    shown = ", ".join(
        f"slot {s} {100 * p:.1f}% ({f'{margins[s]:+d}' if margins[s] else '0'})"
        for s, p in match.items()
    )
    return (
        f"hint: {shown} (your chance of winning the match with perfect play, and the round's "
        "final margin for you)"
    )


def starter_line(
    state: State, round_number: int, previous: State | None, human: Color | None = None
) -> str:
    """Who starts round ``round_number`` (``state`` is its start), and why.

    ``previous`` is the end of the round before, None for the first round (drawn at random).
    """
    first = state.to_move
    starts = "You start" if first == human else f"{COLOR_NAMES[first]} starts"
    if previous is None:
        why = "drawn at random"
    elif state.score[first] < state.score[other(first)]:
        why = "fewer points"
    else:
        why = f"points level, {COLOR_NAMES[previous.starter]} started round {round_number - 1}"
    return f"Round {round_number}: {starts} ({why})."


def round_summary(
    state: State,
    round_number: int,
    human: Color | None = None,
    paint: Callable[[str], str] = _plain,
) -> str:
    """The end of a round: final stack, each side's strength, the points, the score (4 lines)."""
    stack = next(s for s in state.board if s)
    strength = state.strength
    points = state.round_points

    def heights(color: Color) -> str:
        return "+".join(str(h) for h, b in enumerate(stack, start=1) if b == color)

    if points["R"] or points["B"]:
        scorer: Color = "R" if points["R"] else "B"
        n = points[scorer]
        who = "You score" if scorer == human else f"{COLOR_NAMES[scorer]} scores"
        result = f"{who} {n} point{'s' if n != 1 else ''}."
    else:
        result = "Equal strength: nobody scores."
    return "\n".join(
        [
            f"Round {round_number} is over. Final stack, bottom (height 1) to top (height "
            f"{len(stack)}): {paint(stack)}",
            f"  strength: Red {strength['R']} (heights {heights('R')}), "
            f"Black {strength['B']} (heights {heights('B')})",
            f"  {result}",
            f"Score: {score_line(state, human)}",
        ]
    )


def match_summary(state: State, human: Color | None = None) -> str:
    """``Match over: Red wins 15 - 9. You win!`` (the verdict only when a person plays)."""
    winner = state.winner
    if winner is None:
        raise ValueError(f"the match is not over ({score_line(state)})")
    score = state.score
    verdict = "" if human is None else (" You win!" if winner == human else " You lose.")
    return (
        f"Match over: {COLOR_NAMES[winner]} wins {score[winner]} - {score[other(winner)]}."
        + verdict
    )
