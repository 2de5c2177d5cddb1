"""Values that look like others or are too long to show (issue 50, fault 11): a slot of 4,300
digits is cut short in the sentence that names it."""

from __future__ import annotations

import io
import json
from pathlib import Path

from buttonup_env.game.records import problem
from buttonup_env.ui import replay

ROUND = {"layout": "B W W B B R W R R", "first": "R"}


def test_a_slot_of_4300_digits_is_cut_short(tmp_path: Path) -> None:
    slot = 10**4299
    record = {**ROUND, "moves": [slot]}
    said = problem(record)
    assert said is not None and said.startswith("move 1 lifts slot 10000000000"), said
    assert len(said) < 200, len(said)
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps(record) + "\n")
    out = io.StringIO()
    assert replay.main([str(path)], out, io.StringIO()) == 1
    assert all(len(line) < 300 for line in out.getvalue().splitlines()), out.getvalue()[:400]
