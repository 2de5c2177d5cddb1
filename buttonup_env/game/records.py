"""Game records in the JSON Lines format of ``docs/rules.md``: reading, writing, checking.

A round record's ``layout``, ``first`` and ``moves`` are its input; ``movers``, ``extra_turn``,
``boards``, ``strength``, ``points`` and ``score_after`` are claims about the result, checked
when present (a round on its own starts from 0-0). Claims must match in JSON type too: ``1`` is
not ``true``. A match record's input is ``target`` (15 when absent),
``first`` and its rounds; ``score`` and ``winner`` are claims.
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .files import write_atomically
from .rules import (
    DEFAULT_TARGET,
    LAYOUTS,
    MAX_TARGET,
    MOVES_PER_ROUND,
    Color,
    State,
    next_starter,
)

_ROUND_CLAIMS = ("movers", "extra_turn", "boards", "strength")


class InvalidRecord(ValueError):
    """A record that breaks the rules or claims something false; the message says what."""


MAX_LINE_BYTES = 1 << 20
"""The longest line a records file may have, in bytes (1 MiB; a match record of a thousand
rounds fits): a longer line is one invalid record, and reading goes on after it."""

NAME_CHARS = 80
"""How much of a record's id :attr:`RecordLine.name` shows."""


def printable(text: str, limit: int | None = None) -> str:
    """``text`` safe to print on one line: every character that does not print (newlines,
    escape codes, other control and format characters, lone surrogates) written as its Python
    escape (``\\n``, ``\\x1b``, ``\\u202e``), and cut to at most ``limit`` characters, escapes
    counted, with ``...`` (an escape is never cut in two)."""
    pieces = [c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text]
    if limit is None or sum(map(len, pieces)) <= limit:
        return "".join(pieces)
    kept, used = [], 0
    for piece in pieces:
        if used + len(piece) > max(limit - 3, 0):
            break
        kept.append(piece)
        used += len(piece)
    return "".join(kept) + "..."


def shown(value: object, limit: int = 60, as_json: bool = False) -> str:
    """``value`` for a message: as Python writes it (``repr``), or as JSON (``as_json``: the
    web app's answers), its characters that do not print escaped, cut to ``limit``
    characters. The one way every layer shows a value it refuses."""
    return printable(json.dumps(value, default=str) if as_json else repr(value), limit)


@dataclass(frozen=True)
class RecordLine:
    """One line of a records file: its number, and the record or why it could not be read."""

    line: int
    record: dict[str, Any] | None
    error: str | None = None

    @property
    def name(self) -> str:
        """The record's id (safe to print: see :func:`printable`, at most ``NAME_CHARS``
        characters), or ``line N`` when it has none."""
        if isinstance(self.record, dict):
            record_id = self.record.get("id")
            if (isinstance(record_id, str) and record_id) or _is_int(record_id):
                return printable(str(record_id), NAME_CHARS)
        return f"line {self.line}"


def _not_a_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _parse(raw: bytes, number: int) -> RecordLine | None:
    """The record of one line of a records file (None for a blank line)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        where = f"byte 0x{raw[error.start]:02x} at byte {error.start + 1} of the line"
        return RecordLine(number, None, f"not UTF-8 text ({where})")
    if not text.strip():
        return None
    try:
        record = json.loads(text, parse_constant=_not_a_constant)
    except json.JSONDecodeError as error:
        return RecordLine(number, None, f"not JSON ({error.msg} at column {error.colno})")
    except RecursionError:
        return RecordLine(number, None, "not JSON that can be read (nested too deeply)")
    except ValueError as error:  # NaN or Infinity, or an integer of too many digits
        reason = str(error)
        if "integer string conversion" in reason:
            reason = f"an integer of more than {sys.get_int_max_str_digits():,} digits"
        return RecordLine(number, None, f"not JSON that can be read ({reason})")
    if not isinstance(record, dict):
        return RecordLine(number, None, "not a JSON object")
    return RecordLine(number, record)


class NotARegularFile(OSError):
    """A path that names something other than a regular file: a device such as ``/dev/zero``
    (endless), a pipe (which waits for a writer), a socket."""


def open_regular_file(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading in binary, if it is a regular file, whose reading ends.

    Raises :class:`NotARegularFile` for a device, a pipe or a socket and ``IsADirectoryError``
    for a folder (both ``OSError``, as for a missing file). The file is opened without waiting
    (a pipe with no writer would block ``open`` itself) and then checked, so the check is of
    the file that is read.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "it is a folder", os.fspath(path))
        if not stat.S_ISREG(mode):
            raise NotARegularFile(
                errno.EINVAL, "not a regular file (a device or a pipe)", os.fspath(path)
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_records(path: str | Path) -> Iterator[RecordLine]:
    """Yield every non-blank line of a JSON Lines file (UTF-8, a byte-order mark allowed) as
    a :class:`RecordLine`.

    A line that is not UTF-8, not JSON (nested too deeply, an integer of more digits than
    Python reads, ``NaN``), not an object or longer than :data:`MAX_LINE_BYTES` is a
    :class:`RecordLine` with its ``error``; the lines after it are read as usual. Raises
    ``OSError`` when the file cannot be read, and for anything but a regular file (a device
    such as ``/dev/zero``, a pipe: see :func:`open_regular_file`), whose reading might never end.
    """
    with open_regular_file(path) as handle:
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while (rest := handle.readline(1 << 16)) and not rest.endswith(b"\n"):
                    pass  # the rest of the long line, dropped as it is read
                error = f"the line is longer than {MAX_LINE_BYTES:,} bytes"
                yield RecordLine(number, None, error)
                continue
            line = _parse(raw, number)
            if line is not None:
                yield line


def write_records(path: str | Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records as JSON Lines (one object a line); return how many were written. The
    file is written atomically (:func:`~buttonup_env.game.files.write_atomically`): a reader
    never sees part of it, and a link at ``path`` is replaced, not written through."""
    lines = [json.dumps(record) + "\n" for record in records]
    write_atomically(path, "".join(lines).encode("utf-8"))
    return len(lines)


def _parse_board_claim(text: object) -> tuple[str, ...] | None:
    if not isinstance(text, str):
        return None
    return tuple("" if part == "." else part for part in text.split())


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidRecord(message)


def _same(claim: object, actual: object) -> bool:
    """Equal in value and JSON type (so ``1`` is not ``true`` and ``13.0`` is not ``13``)."""
    if isinstance(actual, bool) or isinstance(claim, bool):
        return type(claim) is type(actual) and claim == actual
    if isinstance(actual, dict):
        return (
            isinstance(claim, dict)
            and claim.keys() == actual.keys()
            and all(_same(claim[k], actual[k]) for k in actual)
        )
    if isinstance(actual, list):
        return (
            isinstance(claim, list)
            and len(claim) == len(actual)
            and all(_same(c, a) for c, a in zip(claim, actual, strict=True))
        )
    return type(claim) is type(actual) and claim == actual


def _check_claim(record: dict[str, Any], key: str, actual: object, where: str) -> None:
    if key in record and not _same(record[key], actual):
        raise InvalidRecord(
            f"{where}{key} claims {shown(record[key])} but the moves give {actual!r}"
        )


def replay_round(
    record: dict[str, Any],
    *,
    score: dict[Color, int] | None = None,
    target: int = DEFAULT_TARGET,
    where: str = "",
) -> State:
    """Play a round record's moves, check each claim, and return the final state.

    ``score`` and ``target`` place the round in a match (default 0-0, 15). Raises
    :class:`InvalidRecord` naming the first problem.
    """
    for key in ("layout", "first", "moves"):
        _require(key in record, f"{where}lacks {key!r} (a round record needs layout, first, moves)")
    layout, first, moves = record["layout"], record["first"], record["moves"]
    _require(first in ("R", "B"), f"{where}first is {shown(first)}; it must be 'R' or 'B'")
    board = _parse_board_claim(layout)
    _require(
        board in _LAYOUT_SET,
        f"{where}layout {shown(layout)} is not nine single buttons of three per colour",
    )
    _require(
        isinstance(moves, list) and all(_is_int(m) for m in moves),
        f"{where}moves must be a list of slot numbers, got {shown(moves)}",
    )
    state = State.new_round(board, first, score, target)  # type: ignore[arg-type]
    movers, extra, boards = [], [], []
    for i, slot in enumerate(moves):
        _require(
            not state.round_over,
            f"{where}has {len(moves)} moves; a round ends after {MOVES_PER_ROUND}",
        )
        legal = state.legal_moves()
        _require(
            slot in legal,
            f"{where}move {i + 1} lifts slot {shown(slot)}, which is illegal on "
            f"{state.notation!r} (legal: {', '.join(map(str, legal))})",
        )
        after = state.play(slot)
        movers.append(state.to_move)
        extra.append(not after.round_over and after.to_move == state.to_move)
        boards.append(after.board)
        state = after
    _require(
        state.round_over,
        f"{where}has {len(moves)} moves; a round needs exactly {MOVES_PER_ROUND}",
    )
    _check_claim(record, "movers", movers, where)
    _check_claim(record, "extra_turn", extra, where)
    if "boards" in record:
        claimed = record["boards"]
        _require(
            isinstance(claimed, list) and len(claimed) == len(boards),
            f"{where}boards must list the {len(boards)} boards after each move",
        )
        for i, (text, actual) in enumerate(zip(claimed, boards, strict=True)):
            _require(
                _parse_board_claim(text) == actual,
                f"{where}boards[{i}] claims {shown(text)} but move {i + 1} gives "
                f"{' '.join(s or '.' for s in actual)!r}",
            )
    _check_claim(record, "strength", state.strength, where)
    _check_claim(record, "points", state.round_points, where)
    _check_claim(record, "score_after", state.score, where)
    return state


def replay_match(record: dict[str, Any]) -> State:
    """Check a match record: every round, the starting rule, the target, score and winner."""
    for key in ("first", "rounds"):
        _require(key in record, f"lacks {key!r} (a match record needs target, first, rounds)")
    target = record.get("target", DEFAULT_TARGET)
    _require(
        _is_int(target) and 1 <= target <= MAX_TARGET,
        f"target is {shown(target)}; it must be a whole number from 1 to {MAX_TARGET}",
    )
    first, rounds = record["first"], record["rounds"]
    _require(first in ("R", "B"), f"first is {shown(first)}; it must be 'R' or 'B'")
    _require(
        isinstance(rounds, list) and len(rounds) > 0 and all(isinstance(r, dict) for r in rounds),
        "rounds must be a non-empty list of round records",
    )
    score: dict[Color, int] = {"R": 0, "B": 0}
    starter: Color = first
    state: State | None = None
    for n, round_ in enumerate(rounds, start=1):
        where = f"round {n}: "
        if state is not None:
            _require(
                not state.match_over,
                f"{where}the match was already won {score['R']}-{score['B']} "
                f"(target {target}) after round {n - 1}",
            )
            starter = next_starter(score, state.starter)
        _require(
            round_.get("first") == starter,
            f"{where}first is {shown(round_.get('first'))} but the starting rule gives {starter!r}",
        )
        state = replay_round(round_, score=score, target=target, where=where)
        score = state.score
    assert state is not None  # rounds is non-empty
    _require(
        state.match_over,
        f"the match stops after {len(rounds)} rounds at {score['R']}-{score['B']}, "
        f"before anyone reached the target {target}",
    )
    _check_claim(record, "score", state.score, "")
    _check_claim(record, "winner", state.winner, "")
    return state


def check_record(record: dict[str, Any]) -> None:
    """Raise :class:`InvalidRecord` unless ``record`` (round or match) is valid."""
    if "rounds" in record:
        replay_match(record)
    else:
        replay_round(record)


def essentials(record: dict[str, Any]) -> dict[str, Any]:
    """What replays a valid ``record`` (round or match, checked by :func:`check_record`): its
    input alone, each round's ``layout`` (one shared string per layout), ``first`` and
    ``moves`` (as ``bytes``, a byte a slot), and a match's ``target``, ``first`` and rounds.
    Claims and any other key are left out, so a record padded with anything (a MiB of ``[]``
    is 350,000 lists, 20 MB as Python objects) is kept at the size of its moves."""

    def round_(entry: dict[str, Any]) -> dict[str, Any]:
        board = _parse_board_claim(entry["layout"])
        return {
            "layout": _LAYOUT_TEXT[board],  # type: ignore[index]
            "first": "R" if entry["first"] == "R" else "B",
            "moves": bytes(entry["moves"]),
        }

    if "rounds" in record:
        return {
            "target": int(record.get("target", DEFAULT_TARGET)),
            "first": "R" if record["first"] == "R" else "B",
            "rounds": [round_(entry) for entry in record["rounds"]],
        }
    return round_(record)


def problem(record: dict[str, Any]) -> str | None:
    """Why ``record`` is invalid, or ``None`` when it is valid."""
    try:
        check_record(record)
    except InvalidRecord as error:
        return str(error)
    return None


_LAYOUT_SET = frozenset(LAYOUTS)
_LAYOUT_TEXT = {layout: " ".join(layout) for layout in LAYOUTS}
