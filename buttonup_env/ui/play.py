"""Play Button Up! in a terminal against a bot or an exported policy.

``python -m buttonup_env.play --opponent perfect|greedy|random|NAME|PATH.onnx [--color R|B]
[--target N] [--seed S] [--hint] [--no-color]`` (installed as ``buttonup-play``), where
``NAME`` is a shipped policy (``buttonup-ppo``).

You type the slot to lift; the opponent's moves, every extra turn, the end of each round (final
stack, strengths, points) and the end of the match are written out so that the game can be
followed (in the words of :mod:`buttonup_env.ui.narration`, which the web app and the animations
share). The rules themselves live in :mod:`buttonup_env.game.rules`; this module only shows a
:class:`~buttonup_env.game.match.Match` and feeds it moves.

Input: a slot number, ``q`` / ``quit`` / ``exit`` to stop, ``help`` (or ``?``) for a reminder.
Bad input gets one line saying why, with the legal slots, and the question again. When the input
is not a terminal (piped), every line read is echoed after the prompt so that the transcript reads
as a dialogue.

Colour: the buttons are coloured with ANSI codes only when the output is a terminal, ``--no-color``
is not given and the ``NO_COLOR`` environment variable is not set (to any value).

Randomness: ``--seed`` fixes the layouts, the first round's starter and the opponent's tie-breaks,
so one seed and the same input give the same transcript. Without it a seed is drawn and shown.

Exit status: 0 when the match ends, on ``q`` and at the end of the input (EOF); 130 on Ctrl-C;
2 for a bad argument or a bad ``--opponent``, a policy that fails while it plays, a closed
standard input or output, or output that cannot be written (``> /dev/full``), each in one error
line; 1 if the opponent makes an illegal move.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TextIO

import numpy as np

from ..envs.env import make_opponent
from ..envs.render import COLOR_NAMES, paint
from ..game import solver
from ..game.equity import MAX_SOLVED_TARGET, match_move_values
from ..game.match import Match
from ..game.rules import DEFAULT_TARGET, MAX_TARGET, MOVES_PER_ROUND, NUM_SLOTS, Color, State
from ..players.bots import BOT_NAMES, Player, check_target_for
from ..players.policy import PolicyError
from ..players.shipped import shipped_policies
from .cli import (
    Checked,
    StreamError,
    after_output_failed,
    parse_arguments,
    report,
    whole_number,
)
from .narration import (
    describe_move,
    hint_line,
    match_summary,
    player_name,
    round_summary,
    score_line,
    starter_line,
)

QUIT_WORDS = ("q", "quit", "exit")
HELP_WORDS = ("?", "h", "help")
EXIT_INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT, the shell convention)."""

HELP_TEXT = """\
Lift a stack by typing its slot number and Enter. A stack may be lifted when it holds a white
button (W). Its buttons are sown clockwise (increasing slot numbers), bottom button first, one
on each following stack; if the last one lands on its own colour (white on white counts) you
move again. After 8 moves one stack is left: each button scores its height (bottom 1), and
the stronger colour scores the difference. q quits."""


class Quit(Exception):
    """The player stopped the game (``q``, end of input); the message is the goodbye line."""


class OpponentError(Exception):
    """The opponent played an illegal move."""


class _BadFlag(Exception):
    """A flag's value cannot be played (the message is one line): ``--opponent`` names no bot
    and no readable policy, or a player of the solved match beyond the solved targets, or
    ``--hint`` asks for the match's values there."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"{flag}: {message}")


class Session:
    """One match between a person (reading ``stdin``, writing ``stdout``) and ``opponent``.

    Args:
        match: the match to play (its generator draws the layouts).
        opponent: the other player, anything with ``act(state) -> slot``.
        human: the colour the person plays.
        stdin: where the person's moves are read.
        stdout: where everything is written.
        color: colour the buttons with ANSI codes.
        hint: before each of the person's moves, show the exact value of every legal move:
            its probability of winning the match and the round's final margin.
        echo: write each line read back after the prompt (for piped input).
        opponent_name: how the opponent is introduced.
        seed: shown in the opening line, so that the game can be replayed.
    """

    def __init__(
        self,
        match: Match,
        opponent: Player,
        human: Color,
        stdin: TextIO | Checked,
        stdout: TextIO | Checked,
        *,
        color: bool = False,
        hint: bool = False,
        echo: bool = False,
        opponent_name: str = "the opponent",
        seed: int | None = None,
    ) -> None:
        self.match = match
        self.opponent = opponent
        self.human = human
        self.stdin = stdin
        self.stdout = stdout
        self.color = color
        self.hint = hint
        self.echo = echo
        self.opponent_name = opponent_name
        self.seed = seed
        self.round = 1

    # --- output ------------------------------------------------------------------------------
    def say(self, text: str = "") -> None:
        """Write one or more lines."""
        self.stdout.write(text + "\n")

    def name(self, color: Color) -> str:
        """``Red`` / ``Black``, with ``(you)`` for the person's colour."""
        return player_name(color, self.human)

    def paint(self, stack: str) -> str:
        """A stack's letters, coloured when colour is on; ``.`` for an empty slot."""
        return paint(stack, self.color) if stack else "."

    def score_line(self, state: State) -> str:
        """``Red (you) 3 - 0 Black   target 15``."""
        return score_line(state, self.human)

    def board(self, state: State) -> str:
        """The position: a header, one line a slot (stack bottom to top), legal slots marked."""
        legal = state.legal_moves()
        lines = [
            f"Round {self.round}, move {state.moves_played + 1} of {MOVES_PER_ROUND}   "
            + self.score_line(state)
        ]
        for slot, stack in enumerate(state.board):
            mark = "  <- legal" if slot in legal else ""
            padding = " " * (NUM_SLOTS - len(stack or "."))
            lines.append(f"  slot {slot}  {self.paint(stack)}{padding}{mark}".rstrip())
        return "\n".join(lines)

    def describe(self, before: State, slot: int, after: State) -> str:
        """One line for a move (see :func:`describe_move`)."""
        return describe_move(before, slot, after, self.human, self.paint)

    def hint_line(self, state: State) -> str:
        """The exact value of each legal move, for the person to move."""
        return hint_line(match_move_values(state), solver.move_values(state))

    # --- input -------------------------------------------------------------------------------
    def read_line(self) -> str:
        """The next line of input, stripped; :class:`Quit` at the end of the input."""
        self.stdout.write("slot> ")
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            self.say()
            raise Quit("End of input: goodbye.")
        if self.echo:
            self.say(line.rstrip("\r\n"))
        return line.strip()

    def ask(self, state: State) -> int:
        """Ask for a slot until a legal one is typed; :class:`Quit` when the person stops."""
        legal = ", ".join(map(str, state.legal_moves()))
        self.say(self.board(state))
        self.say(f"Your move ({COLOR_NAMES[self.human]}): lift one of the legal slots {legal}.")
        if self.hint:
            self.say(self.hint_line(state))
        while True:
            text = self.read_line()
            if text.lower() in QUIT_WORDS:
                raise Quit(f"Goodbye. {self.score_line(state)}.")
            if text.lower() in HELP_WORDS:
                self.say(HELP_TEXT)
                self.say(f"The legal slots are {legal}.")
                continue
            try:
                slot = int(text)
            except ValueError:
                why = f"{text!r} is not a slot number" if text else "No slot given"
                self.say(f"{why}; type one of the legal slots {legal} (q quits, help explains).")
                continue
            try:
                state.play(slot)  # only to check the move: the rules say why it is not allowed
            except ValueError as error:
                message = str(error)
                self.say(message[:1].upper() + message[1:] + ".")
                continue
            return slot

    # --- the match ---------------------------------------------------------------------------
    def starter_line(self, previous: State | None) -> str:
        """Who starts the current round, and why."""
        return starter_line(self.match.state, self.round, previous, self.human)

    def round_summary(self, state: State) -> str:
        """The end of a round: final stack, each side's strength, the points, the score."""
        return round_summary(state, self.round, self.human, self.paint)

    def intro(self) -> str:
        """The opening lines."""
        seed = f" Seed {self.seed}." if self.seed is not None else ""
        return (
            f"Button Up! You play {COLOR_NAMES[self.human]} against {self.opponent_name}; "
            f"first to {self.match.target} points wins.{seed}\n"
            "Type a slot number to lift its stack, help for the rules, q to quit."
        )

    def run(self) -> int:
        """Play the match to its end (or until the person quits); return the exit status."""
        self.say(self.intro())
        previous: State | None = None
        try:
            while True:
                self.say()
                self.say(self.starter_line(previous))
                self.play_round()
                state = self.match.state
                self.say(self.round_summary(state))
                if self.match.over:
                    self.say()
                    self.say(match_summary(state, self.human))
                    return 0
                previous = state
                self.match.next_round()
                self.round += 1
        except Quit as stop:
            self.say(str(stop))
            return 0

    def play_round(self) -> None:
        """Play the current round's moves, the person's and the opponent's, and describe them."""
        while not self.match.state.round_over:
            before = self.match.state
            if before.to_move == self.human:
                slot = self.ask(before)
            else:
                slot = self.opponent.act(before)
                if slot not in before.legal_moves():
                    raise OpponentError(
                        f"{self.opponent_name} chose slot {slot!r}, which is not legal on "
                        f"{before.notation!r} (legal: {', '.join(map(str, before.legal_moves()))})"
                    )
            after = self.match.play(int(slot))
            self.say(self.describe(before, int(slot), after))


def load_opponent(spec: str) -> tuple[Player, str]:
    """The player ``spec`` names (a bot, case-insensitive, or an exported policy file) and how
    it is introduced (``the perfect bot``, ``the policy PATH``).

    Raises ``ValueError`` with one line when ``spec`` names no bot and no readable policy.
    """
    spec = spec.lower() if spec.lower() in BOT_NAMES else spec
    try:
        opponent = make_opponent(spec)
    except (ValueError, ImportError, OSError) as error:
        raise ValueError(" ".join(str(error).split())) from None
    name = f"the {spec} bot" if spec in BOT_NAMES else f"the policy {spec}"
    return opponent, name


# --- command line ----------------------------------------------------------------------------
_target = whole_number(1, "target", MAX_TARGET)
_seed = whole_number(0, "seed")


def _color(text: str) -> Color:
    names: dict[str, Color] = {"r": "R", "red": "R", "b": "B", "black": "B"}
    if text.lower() not in names:
        raise argparse.ArgumentTypeError(f"{text!r} is not a colour: use R (Red) or B (Black)")
    return names[text.lower()]


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m buttonup_env.play``."""
    parser = argparse.ArgumentParser(
        prog="python -m buttonup_env.play",
        description="Play a match of Button Up! in the terminal against a bot or a policy.",
        epilog="Type a slot number to lift its stack, help for a rules reminder, q to quit. "
        "Exit status: 0 at the end of the match, on q or at the end of the input; 130 on "
        "Ctrl-C; 2 for a bad argument or opponent.",
    )
    parser.add_argument(
        "--opponent",
        default="perfect",
        metavar="perfect|greedy|random|NAME|PATH.onnx",
        help="the bot to play against, a shipped policy ("
        + (", ".join(shipped_policies()) or "none")
        + ") or an exported .onnx policy (default: perfect)",
    )
    parser.add_argument(
        "--color",
        type=_color,
        default="R",
        metavar="R|B",
        help="your colour: R (Red, default) or B (Black)",
    )
    parser.add_argument(
        "--target",
        type=_target,
        default=DEFAULT_TARGET,
        metavar="N",
        help=f"points that win the match (default {DEFAULT_TARGET})",
    )
    parser.add_argument(
        "--seed",
        type=_seed,
        default=None,
        metavar="S",
        help="seed for the layouts, the first starter and the opponent (default: drawn, shown)",
    )
    parser.add_argument(
        "--hint",
        action="store_true",
        help="show the exact value of every legal move before you choose: your chance of "
        "winning the match with perfect play, and the round's final margin",
    )
    parser.add_argument(
        "--no-color",
        action="store_true",
        help="plain letters, no ANSI colours (also when NO_COLOR is set or output is piped)",
    )
    return parser


def _is_tty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False


def main(
    argv: Sequence[str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the game; return the exit status. The streams default to the process's own."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    parser = build_parser()
    try:
        out = Checked(stdout, "standard output")
        args = parse_arguments(parser, argv, out, stderr)
        if isinstance(args, int):
            out.flush()
            return args
        session = _session(args, Checked(stdin, "standard input"), out)
        status = session.run()
        out.flush()
        return status
    except _BadFlag as error:
        report(stderr, f"{parser.prog}: error: {error}")
        return 2
    except KeyboardInterrupt:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stdout.write("\nInterrupted: goodbye.\n")
            stdout.flush()
        return EXIT_INTERRUPTED
    except OpponentError as error:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stdout.flush()
        report(stderr, f"{parser.prog}: error: {error}")
        return 1
    except PolicyError as error:  # the opponent's policy failed while it played
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stdout.flush()
        report(stderr, f"{parser.prog}: error: {error}")
        return 2
    except BrokenPipeError:  # the reader of our output went away (e.g. piped into head)
        after_output_failed(stdout)
        return 1
    except StreamError as error:  # a closed stream, or output that cannot be written
        report(stderr, f"{parser.prog}: error: {error}")
        after_output_failed(stdout)
        return 2


def _session(args: argparse.Namespace, stdin: Checked, stdout: Checked) -> Session:
    """The session the parsed command line asks for; :class:`_BadFlag` for a bad flag."""
    try:
        opponent, opponent_name = load_opponent(args.opponent)
        check_target_for(opponent, args.target)
    except ValueError as error:
        raise _BadFlag("--opponent", str(error)) from None
    if args.hint and args.target > MAX_SOLVED_TARGET:
        raise _BadFlag(
            "--hint",
            f"the hints are the solved match's values, solved for targets up to "
            f"{MAX_SOLVED_TARGET}, not {args.target}",
        )
    seed = args.seed if args.seed is not None else int(np.random.default_rng().integers(10**6))
    match = Match(np.random.default_rng(seed), target=args.target, first=None)
    reset = getattr(opponent, "reset", None)
    if callable(reset):  # the opponent's tie-breaks come from the seed too
        reset(np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0]))
    color = not args.no_color and "NO_COLOR" not in os.environ and _is_tty(stdout)
    return Session(
        match,
        opponent,
        args.color,
        stdin,
        stdout,
        color=color,
        hint=args.hint,
        echo=not _is_tty(stdin),
        opponent_name=opponent_name,
        seed=seed,
    )


if __name__ == "__main__":
    sys.exit(main())
