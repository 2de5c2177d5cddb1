"""Animate a recorded game: ``python -m buttonup_env.animate RECORDS.jsonl --id ID --out game.gif``.

The record (a round record or a match record in the JSON Lines format of ``docs/rules.md``) is
checked with :mod:`buttonup_env.game.records` first, then drawn move by move (each move read off the
positions before and after it by :class:`buttonup_env.ui.narration.Move`, as the terminal game
and the web app tell it). Every board is
:func:`buttonup_env.envs.render.rgb_array`, the picture of the environment's ``rgb_array`` mode,
with a two-line caption under it (:func:`buttonup_env.envs.render.caption`).

Frames, for each round in order:

1. the set-up: ``rgb_array`` of the round's first position, exactly as the environment draws it;
2. for each move, two frames: the stack about to be lifted, ringed in gold; then the position
   after the move, with the lifted slot and the buttons just sown ringed in gold, and the
   caption saying whether the last button matched (the mover moves again: an extra turn);
3. the round's end: the final stack, the strengths, the points and the score.

So a round (always 8 moves) makes ``1 + 2 * 8 + 1 = 18`` frames and a match 18 per round.

Writing the pictures needs Pillow (``pip install 'buttonup-env[viz]'``); the frames themselves
need only numpy. A GIF is made in memory, so it holds at most :data:`MAX_GIF_BYTES` of frames
(about 170 rounds at the default size); a longer record is drawn a round at a time
(``--round``) or as PNG frames, which are written one by one.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..envs import render
from ..game.records import InvalidRecord, check_record, read_records
from ..game.rules import DEFAULT_TARGET, MOVES_PER_ROUND, Color, State
from .cli import (
    FORCE_HELP,
    Checked,
    OutputError,
    StreamError,
    after_output_failed,
    check_outputs,
    make_output_folder,
    report,
    whole_number,
    write_output,
)
from .narration import Move

VIZ_HINT = "pip install 'buttonup-env[viz]'"

MAX_GIF_BYTES = 512 << 20
"""The most frame data (one byte a pixel) a GIF is made of: Pillow holds every frame in memory
before it writes the file."""
FRAMES_PER_MOVE = 2
"""A move shows the stack about to be lifted, then the position after the sowing."""

BUTTON_NAMES = {"R": "red", "B": "black", "W": "white"}

Piece = tuple[str, tuple[int, int, int]]
Line = list[Piece]


class PillowMissing(RuntimeError):
    """Pillow, needed to write GIF and PNG files, is not installed."""


@dataclass(frozen=True)
class Frame:
    """One picture of the animation and how long it stays on screen."""

    image: np.ndarray
    """``H x W x 3`` uint8: the board (``size x size``) with the caption strip under it."""
    duration: int
    """Milliseconds."""


def frame_count(record: dict[str, Any]) -> int:
    """How many frames :func:`record_frames` draws for a (valid) record: 18 per round."""
    rounds = record["rounds"] if "rounds" in record else [record]
    return sum(2 + FRAMES_PER_MOVE * len(r["moves"]) for r in rounds)


# --- captions --------------------------------------------------------------------------------


def _plain(text: str) -> Piece:
    return (text, render.RGB["text"])


def _player(color: Color) -> Piece:
    return (render.COLOR_NAMES[color], render.RGB[color])


def _score(score: dict[Color, int]) -> Line:
    return [_player("R"), _plain(f" {score['R']}, "), _player("B"), _plain(f" {score['B']}")]


def _slots(slots: Sequence[int]) -> str:
    return ("slot " if len(slots) == 1 else "slots ") + " ".join(map(str, slots))


def _set_up_caption(
    name: str, state: State, number: int, rounds: int, is_match: bool
) -> list[Line]:
    if not is_match:
        return [[_plain(name)], [_player(state.to_move), _plain(" starts the round (8 moves)")]]
    return [
        [_plain(f"{name}: round {number} of {rounds}")],
        [
            _player(state.to_move),
            _plain(" starts. Score "),
            *_score(state.score),
            _plain(f", target {state.target}"),
        ],
    ]


def _sown_counts(move: Move) -> dict[int, int]:
    """The slots that received buttons, clockwise from the lifted one, and how many each."""
    return {slot: len(buttons) for slot, buttons in move.drops}


def _lift_caption(move: Move, number: int) -> list[Line]:
    sown = _sown_counts(move)
    stack, slots = move.lifted, list(sown)
    first = [
        _plain(f"Move {number} of {MOVES_PER_ROUND}: "),
        _player(move.before.to_move),
        _plain(f" lifts slot {move.slot} ({stack})"),
    ]
    if not move.overflow:
        second = f"sown bottom first onto {_slots(slots)}"
    else:
        k, m, together = len(stack), len(slots), sown[slots[-1]]
        top = "all" if together == k else "top"
        second = (
            f"overflow ({k} > {m} stack{'s' if m > 1 else ''}): "
            f"{top} {together} onto slot {slots[-1]}"
        )
    return [first, [_plain(second)]]


def _sown_caption(move: Move, number: int) -> list[Line]:
    after, (last, added) = move.after, move.drops[-1]
    head = f"Move {number} of {MOVES_PER_ROUND}: "
    if move.overflow:
        first = [_plain(f"{head}overflow, {added} went onto slot {last}")]
    else:
        sown, under = move.lifted[-1], move.landed_on
        first = [_plain(f"{head}last button {BUTTON_NAMES[sown]} on {BUTTON_NAMES[under]}")]
    if after.round_over:
        second = [_plain("one stack left: the round is over")]
    elif move.extra_turn:
        second = [_plain("same colour: "), _player(after.to_move), _plain(" again (extra turn)")]
    elif move.overflow:
        second = [_plain("no extra turn after an overflow: "), _player(after.to_move)]
        second.append(_plain(" to move"))
    else:
        second = [_plain("colours differ: "), _player(after.to_move), _plain(" to move")]
    return [first, second]


def _end_caption(final: State, is_match: bool) -> list[Line]:
    strength, points = final.strength, final.round_points
    first = [_plain("Strength "), *_score(strength), _plain(": ")]
    scorer = "R" if points["R"] else "B" if points["B"] else None
    if scorer is None:
        first.append(_plain("equal, nobody scores"))
    else:
        first += [_player(scorer), _plain(f" scores {points[scorer]}")]
    stack = next(s for s in final.board if s)
    if not is_match:
        second = [_plain(f"final stack {stack} (bottom to top)")]
    elif final.match_over:
        winner = final.winner
        assert winner is not None
        score = final.score
        second = [
            _player(winner),
            _plain(f" wins the match {score[winner]}-{min(score.values())}"),
            _plain(f" (target {final.target})"),
        ]
    else:
        second = [_plain("Score "), *_score(final.score), _plain(f", target {final.target}")]
    return [first, second]


# --- frames ----------------------------------------------------------------------------------


def _round_frames(
    round_: dict[str, Any],
    start: State,
    *,
    name: str,
    number: int,
    rounds: int,
    is_match: bool,
    size: int,
    delay: int,
) -> Iterator[Frame]:
    """The frames of one round, from its first position ``start``; the last one is its end."""

    def frame(picture: np.ndarray, lines: list[Line], duration: int) -> Frame:
        return Frame(render.caption(picture, lines), duration)

    caption = _set_up_caption(name, start, number, rounds, is_match)
    yield frame(render.rgb_array(start, size=size), caption, 2 * delay)
    state = start
    for number_in_round, slot in enumerate(round_["moves"], start=1):
        move = Move.play(state, slot)
        lifted = {slot: len(move.lifted)}
        picture = render.rgb_array(state, size=size, highlight=lifted)
        yield frame(picture, _lift_caption(move, number_in_round), delay)
        sown = _sown_counts(move)
        picture = render.rgb_array(move.after, last_move=slot, size=size, highlight=sown)
        yield frame(picture, _sown_caption(move, number_in_round), delay)
        state = move.after
    picture = render.rgb_array(state, last_move=round_["moves"][-1], size=size)
    yield frame(picture, _end_caption(state, is_match), 3 * delay)


def record_frames(
    record: dict[str, Any],
    *,
    size: int = 400,
    delay: int = 800,
    only_round: int | None = None,
) -> Iterator[Frame]:
    """The frames of a round or match record (see the module docstring for which frames).

    The record is checked at once: :class:`~buttonup_env.game.records.InvalidRecord` says why it is
    not valid. The frames are drawn as they are iterated. ``delay`` is the time of each frame
    of a move in milliseconds; a round's set-up stays twice as long, its end three times, and
    the last frame five times. ``only_round`` (from 1) draws one round of a match;
    ``ValueError`` when there is no such round.
    """
    check_record(record)
    rounds = len(record["rounds"]) if "rounds" in record else 1
    if only_round is not None and not 1 <= only_round <= rounds:
        raise ValueError(
            f"the record has {rounds} round{'s' if rounds > 1 else ''}; "
            f"there is no round {only_round}"
        )
    return _with_long_ending(_frames(record, size, delay, only_round), 5 * delay)


def _with_long_ending(frames: Iterator[Frame], duration: int) -> Iterator[Frame]:
    last = next(frames)
    for frame in frames:
        yield last
        last = frame
    yield Frame(last.image, duration)


def _frames(
    record: dict[str, Any], size: int, delay: int, only_round: int | None
) -> Iterator[Frame]:
    is_match = "rounds" in record
    rounds: list[dict[str, Any]] = record["rounds"] if is_match else [record]
    name = str(record.get("id", "game"))[:24]
    target = record.get("target", DEFAULT_TARGET) if is_match else DEFAULT_TARGET
    state: State | None = None
    for number, round_ in enumerate(rounds, start=1):
        if state is None:
            state = State.new_round(round_["layout"], round_["first"], target=target)
        else:
            state = state.next_round(round_["layout"])
        if only_round in (None, number):
            yield from _round_frames(
                round_,
                state,
                name=name,
                number=number,
                rounds=len(rounds),
                is_match=is_match,
                size=size,
                delay=delay,
            )
        for slot in round_["moves"]:
            state = state.play(slot)


# --- files -----------------------------------------------------------------------------------


def find_record(path: str | Path, record_id: str) -> dict[str, Any]:
    """The first record named ``record_id`` (its ``id``, or ``line N``) in a JSON Lines file.

    Raises ``OSError`` / ``UnicodeDecodeError`` when the file cannot be read,
    :class:`~buttonup_env.game.records.InvalidRecord` when that line is not a JSON object, and
    ``LookupError`` naming a few ids of the file when no record has that id.
    """
    names: list[str] = []
    for line in read_records(path):
        if line.name == record_id:
            if line.record is None:
                raise InvalidRecord(f"line {line.line} is {line.error}")
            return line.record
        names.append(line.name)
    if not names:
        raise LookupError(f"no record with id {record_id!r} in {path}: the file holds no records")
    shown = ", ".join(names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    raise LookupError(f"no record with id {record_id!r} in {path}; ids there: {shown}{more}")


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError as error:
        raise PillowMissing(f"writing GIF and PNG files needs Pillow: {VIZ_HINT}") from error
    return Image


_PALETTE = np.array(sorted(set(render.RGB.values())), dtype=np.int64)
_KEYS = (_PALETTE[:, 0] << 16) | (_PALETTE[:, 1] << 8) | _PALETTE[:, 2]


def _indexed(image: np.ndarray, pil: Any) -> Any:
    """A Pillow palette image of ``image``: exact, since the board uses only ``render.RGB``."""
    pixels = image.astype(np.int64)
    keys = (pixels[..., 0] << 16) | (pixels[..., 1] << 8) | pixels[..., 2]
    index = np.minimum(np.searchsorted(_KEYS, keys), len(_KEYS) - 1)
    if not np.array_equal(_KEYS[index], keys):  # a colour outside render.RGB: let Pillow pick
        return pil.fromarray(image).convert("P", palette=pil.Palette.ADAPTIVE)
    picture = pil.fromarray(index.astype(np.uint8))
    picture.putpalette(_PALETTE.astype(np.uint8).tobytes())
    return picture


def write_gif(frames: Iterable[Frame], path: str | Path) -> None:
    """Write ``frames`` as an animated GIF that loops forever (atomically: see
    :func:`~buttonup_env.ui.cli.write_output`). Needs Pillow. ``ValueError`` when the frames
    are more than :data:`MAX_GIF_BYTES`, or the file cannot be written."""
    pil = _pillow()
    pictures, durations = [], []
    held = 0
    for frame in frames:
        held += frame.image.shape[0] * frame.image.shape[1]
        if held > MAX_GIF_BYTES:
            raise ValueError(
                f"the animation has more than {len(pictures):,} frames of "
                f"{frame.image.shape[1]}x{frame.image.shape[0]}, more than a GIF holds "
                f"({MAX_GIF_BYTES >> 20} MiB of frames); draw one round with --round N, or write "
                "PNG frames (--out NAME.png)"
            )
        pictures.append(_indexed(frame.image, pil))
        durations.append(frame.duration)
    if not pictures:
        raise ValueError("an animation needs at least one frame")
    buffer = io.BytesIO()
    pictures[0].save(
        buffer,
        format="GIF",
        save_all=True,
        append_images=pictures[1:],
        duration=durations,
        loop=0,
    )
    write_output(path, buffer.getvalue())


def write_pngs(
    frames: Iterable[Frame], folder: str | Path, stem: str, digits: int = 3
) -> list[Path]:
    """Write ``frames`` as ``folder/stem-000.png``, ``stem-001.png``, ...; return the paths.

    ``digits`` is the width of the frame numbers. Each file is written atomically (see
    :func:`~buttonup_env.ui.cli.write_output`: ``ValueError`` when one cannot be). Needs
    Pillow.
    """
    pil = _pillow()
    paths = []
    for number, frame in enumerate(frames):
        path = frame_path(folder, stem, number, digits)
        buffer = io.BytesIO()
        _indexed(frame.image, pil).save(buffer, format="PNG", optimize=True)
        paths.append(write_output(path, buffer.getvalue()))
    return paths


def frame_path(folder: str | Path, stem: str, number: int, digits: int = 3) -> Path:
    """Where :func:`write_pngs` writes frame ``number``."""
    return Path(folder) / f"{stem}-{number:0{digits}d}.png"


# --- command line ----------------------------------------------------------------------------

EPILOG = """\
output (--out):
  NAME.gif    one animated GIF, looping forever
  NAME.png    numbered PNG frames beside it: NAME-000.png, NAME-001.png, ...
  FOLDER      (an existing folder, a path ending in '/', or a name without a suffix; created
              when missing, in a folder that exists) numbered PNG frames FOLDER/ID-000.png,
              ... (ID with characters other than letters, digits, '.', '_' and '-' replaced
              by '_')
  The folder of the output must exist; a file there is replaced only with --force, and never
  the records file.

frames: for each round, its set-up (exactly the environment's rgb_array picture, with a
caption under it), then two frames per move (the stack about to be lifted ringed in gold; the
position after the sowing with the lifted slot and the sown buttons ringed, and the caption
saying who moves next: 'Red again (extra turn)' or the other player), then the round's end
(strengths, points, score). A round is 1 + 2 x 8 + 1 = 18 frames; a match 18 per round.
A move's frames last --delay ms each, a set-up 2x, a round's end 3x, the last frame 5x.

exit status: 0 written; 1 no record with that id, or the record is invalid; 2 a file could not
be read or written, a bad argument, or Pillow is missing (pip install 'buttonup-env[viz]')."""


def _output(out: str) -> tuple[str, Path, str | None]:
    """``("gif", path, None)``, ``("png", folder, stem)`` or ``("folder", folder, None)``."""
    path = Path(out)
    suffix = path.suffix.lower()
    if out.endswith(("/", "\\")) or path.is_dir() or not suffix:
        return "folder", path, None
    if suffix == ".gif":
        return "gif", path, None
    if suffix == ".png":
        return "png", path.parent, path.stem
    raise ValueError(f"--out {out!r} must end in .gif or .png, or name a folder")


class Refused(Exception):
    """What stops the command: a sentence, and the exit status it gives."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def main(argv: Sequence[str] | None = None) -> int:
    """Animate one record of a JSON Lines file; return the exit status."""
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        kind, where, stem = _output(args.out)
    except ValueError as error:
        parser.error(str(error))
    try:
        out = Checked(sys.stdout, "standard output")
        record = read_record(args.file, args.id)
        drawn = drawn_frames(record, args)
        digits = max(3, len(str(frame_count(record) - 1)))
        if stem is None and kind == "folder":
            stem = re.sub(r"[^A-Za-z0-9._-]", "_", args.id)
        check_frame_outputs(kind, where, stem or "", digits, record, args)
        written, durations, shape = write_frames(drawn, kind, where, stem or "", digits, args.out)
    except StreamError as error:
        return fail(str(error), 2)
    except Refused as refused:
        return fail(str(refused), refused.status)
    seconds = sum(durations) / 1000
    height, width = shape
    try:
        out.write(
            f"wrote {written}: {len(durations)} frames of {width}x{height}, {seconds:.1f} s\n"
        )
        out.flush()
    except BrokenPipeError:
        after_output_failed(sys.stdout)
        return 1
    except StreamError as error:
        after_output_failed(sys.stdout)
        return fail(str(error), 2)
    return 0


def fail(message: str, status: int) -> int:
    """Say ``message`` as an error line; return ``status``."""
    report(sys.stderr, f"error: {message}")
    return status


def make_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m buttonup_env.animate``."""
    parser = argparse.ArgumentParser(
        prog="python -m buttonup_env.animate",
        description="Animate a recorded Button Up! round or match (JSON Lines game records) "
        "as a GIF or as numbered PNG frames, move by move.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="RECORDS.jsonl", help="JSON Lines file of game records")
    parser.add_argument(
        "--id",
        required=True,
        help="the record's id (the first record with it; 'line N' for a record without one)",
    )
    parser.add_argument(
        "--out", required=True, help="NAME.gif, NAME.png (numbered frames) or a FOLDER"
    )
    parser.add_argument(
        "--round",
        type=whole_number(1, "round number", 10_000),
        metavar="N",
        help="draw only round N (from 1) of a match record",
    )
    parser.add_argument(
        "--size",
        type=whole_number(200, "board size", 2000),
        default=400,
        help="board width and height in pixels (default 400; the caption adds ~10%%)",
    )
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)
    parser.add_argument(
        "--delay",
        type=whole_number(20, "delay", 60_000),
        default=800,
        metavar="MS",
        help="milliseconds per frame of a move (default 800)",
    )
    return parser


def read_record(file: str, record_id: str) -> dict[str, Any]:
    """The record ``record_id`` of the records ``file``."""
    try:
        return find_record(file, record_id)
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise Refused(f"cannot read {file}: {reason}", 2) from None
    except LookupError as error:
        raise Refused(str(error.args[0]), 1) from None
    except InvalidRecord as error:
        raise Refused(f"record {record_id!r} cannot be read: {error}", 1) from None


def drawn_frames(record: dict[str, Any], args: argparse.Namespace) -> Iterator[Frame]:
    """The frames of ``record`` that the command line asks for (drawn as they are written)."""
    try:
        return record_frames(record, size=args.size, delay=args.delay, only_round=args.round)
    except InvalidRecord as error:
        raise Refused(f"record {args.id!r} is invalid: {error}", 1) from None
    except ValueError as error:
        raise Refused(f"--round {args.round}: {error}", 2) from None


def check_frame_outputs(
    kind: str,
    where: Path,
    stem: str,
    digits: int,
    record: dict[str, Any],
    args: argparse.Namespace,
) -> None:
    """Check the files the frames of ``record`` go to (``--out``), before any is drawn: a
    folder made if missing, no file replaced without ``--force``, nor the records file."""
    try:
        if kind == "folder":
            make_output_folder("--out", where)
        if kind == "gif":
            outputs = [("--out", where)]
        else:  # every frame's file, which the record's length tells before any is drawn
            rounds = record["rounds"] if "rounds" in record else [record]
            drawn_rounds = rounds if args.round is None else [rounds[args.round - 1]]
            count = frame_count({"rounds": drawn_rounds})
            outputs = [("--out", frame_path(where, stem, n, digits)) for n in range(count)]
        check_outputs(outputs, [("the records file", args.file)], args.force)
    except ValueError as error:
        raise Refused(str(error), 2) from None


def write_frames(
    drawn: Iterator[Frame], kind: str, where: Path, stem: str, digits: int, out: str
) -> tuple[str, list[int], tuple[int, ...]]:
    """Write the frames ``drawn`` (a GIF, or numbered PNGs); what was written, in words, the
    frames' durations and their size."""
    durations: list[int] = []  # of the frames written
    shape: tuple[int, ...] = (0, 0)

    def counted(frames: Iterator[Frame]) -> Iterator[Frame]:
        nonlocal shape
        for frame in frames:
            durations.append(frame.duration)
            shape = frame.image.shape[:2]
            yield frame

    try:
        _pillow()
        if kind == "gif":
            write_gif(counted(drawn), where)
            return str(where), durations, shape
        paths = write_pngs(counted(drawn), where, stem, digits)
        return f"{paths[0]} ... {paths[-1].name}", durations, shape
    except PillowMissing as error:
        raise Refused(str(error), 2) from None
    except OSError as error:
        raise Refused(
            f"cannot write {out}: {getattr(error, 'strerror', None) or error}", 2
        ) from None
    except OutputError as error:  # a file that cannot be written
        raise Refused(str(error), 2) from None
    except ValueError as error:  # more frames than a GIF holds
        raise Refused(f"cannot write {out}: {error}", 2) from None


if __name__ == "__main__":
    sys.exit(main())
