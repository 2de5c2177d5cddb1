"""The records the web app replays. Records are read once, at start-up: at most
:data:`MAX_RECORDS` of them, each of at most :data:`MAX_REPLAY_ROUNDS` rounds, so a replay is
at most about ten thousand events. :class:`ReplayCache` keeps the JSON of the replays asked
for, so each is computed once."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...envs.render import COLOR_NAMES
from ...game.records import InvalidRecord, essentials, read_records, replay_match, replay_round
from ...game.rules import DEFAULT_TARGET, State, parse_board
from .schemas import (
    Event,
    RecordPage,
    RecordSummary,
    Replay,
)
from .views import end_events, move_event, start_events

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
        return StoredRecord(name, "match", summary, essentials(record))
    end = replay_round(record)
    s = end.strength
    summary = f"round {name}: strength Red {s['R']}, Black {s['B']}"
    return StoredRecord(name, "round", summary, essentials(record))


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
