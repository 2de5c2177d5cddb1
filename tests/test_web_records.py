"""The records the web app keeps (issue 50): a valid record padded with anything (a MiB of
``[]`` a line) costs the server what its moves cost, not what its padding would as Python
objects, so the server's memory stays within a few times the files' size."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the web app needs the web extra: pip install -e '.[web]'")

from buttonup_env.game.records import MAX_LINE_BYTES
from buttonup_env.ui.web.replays import load_records, replay_events


def padded(record: dict[str, object], size: int = MAX_LINE_BYTES) -> bytes:
    """``record`` with a list of ``[]`` that fills its line to just under ``size`` bytes (by
    default the 1 MiB cap)."""
    line = json.dumps({**record, "padding": []}).encode()
    count = (size - len(line) - 16) // 4
    return line.replace(b'"padding": []', b'"padding": [' + b"[], " * count + b"[]]")


def test_padded_records_are_kept_at_the_size_of_their_moves(tmp_path: Path, data_dir: Path) -> None:
    """Four lines of 256 KiB, each a valid record (two rounds, two matches) and 65,000 empty
    lists: before, the server kept 16 to 19 times such a file's size in lists (34 MB for eight
    such lines, 1.23 GB for a 63 MiB file of lines of 1 MiB); now what it keeps is a small
    part of the file."""
    rounds = [json.loads(line) for line in (data_dir / "rounds.jsonl").read_text().splitlines()]
    matches = [json.loads(line) for line in (data_dir / "matches.jsonl").read_text().splitlines()]
    originals = rounds[:2] + matches[:2]
    path = tmp_path / "padded.jsonl"
    path.write_bytes(b"\n".join(padded(r, 1 << 18) for r in originals) + b"\n")
    size = path.stat().st_size
    assert size > 1_000_000
    tracemalloc.start()
    try:
        stored, notes = load_records([path])
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(stored) == 4, notes
    assert kept < size // 20, (kept, size)
    assert peak < 30 << 20, peak  # one line's objects at a time
    for record, original in zip(stored, originals, strict=True):
        assert replay_events(record.record) == replay_events(original)
        assert "padding" not in record.record
