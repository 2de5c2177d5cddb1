"""Values that look like others or are too long to show (issue 50, fault 11): a slot of 4,300
digits is cut short in the sentence that names it, and a digit of another script is not a
digit of a graded bot's name."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from buttonup_env.game.records import problem
from buttonup_env.players.bots import graded_p, make_bot
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


@pytest.mark.parametrize(
    "name",
    ["perfect-\u0661", "perfect-\u0660.\u0665", "perfect-\uff11", "perfect-1\u200b", "perfect-1_0"],
)
def test_a_graded_bot_s_probability_is_written_in_ascii_digits(name: str) -> None:
    """Before: perfect-\u0661 (an Arabic-Indic one) was taken as perfect-1."""
    with pytest.raises(ValueError) as error:
        graded_p(name)
    assert str(error.value).startswith(f"{name!r} is not a graded bot: after 'perfect-' comes ")
    with pytest.raises(ValueError, match="is not a graded bot"):
        make_bot(name)


@pytest.mark.parametrize(
    ("name", "p"),
    [("perfect-1", 1.0), ("perfect-0.25", 0.25), ("perfect-.5", 0.5), ("perfect-1e-05", 1e-5)],
)
def test_graded_bot_names_the_package_writes_are_read(name: str, p: float) -> None:
    assert graded_p(name) == p
