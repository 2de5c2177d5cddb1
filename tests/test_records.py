"""Game records: the conformance data, records written by :class:`Match`, and the replay CLI."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from buttonup_env.bots import GreedyBot, PerfectBot, RandomBot
from buttonup_env.match import Match
from buttonup_env.records import (
    InvalidRecord,
    check_record,
    problem,
    read_records,
    replay_match,
    replay_round,
    write_records,
)
from buttonup_env.rules import State

DATA = Path(__file__).parent / "data"


def load(name: str) -> list[dict[str, Any]]:
    with open(DATA / name, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


ROUNDS = load("rounds.jsonl")
MATCHES = load("matches.jsonl")
INVALID = load("invalid.jsonl")

# What the checker's reason must mention for each kind of corruption in invalid.jsonl.
REASON_FOR = {
    "movers": "movers",
    "extra": "extra_turn",
    "board": "boards",
    "layout": "layout",
    "illegal": "illegal",
    "long": "moves",
    "short": "moves",
    "strength": "strength",
    "target": "target",
    "stops_early": "target",
    "score_after": "score_after",
    "points": "points",
    "winner": "winner",
    "starter": "starting rule",
    "round": "round ",
}


def by_id(records: list[dict[str, Any]]) -> list[Any]:
    return [pytest.param(record, id=str(record["id"])) for record in records]


def test_conformance_data_is_complete() -> None:
    assert len(ROUNDS) == 300
    assert len(MATCHES) == 40
    assert len(INVALID) == 60
    assert {record["corruption"] for record in INVALID} <= set(REASON_FOR)


# --- the conformance records --------------------------------------------------------------------


@pytest.mark.parametrize("record", by_id(ROUNDS))
def test_round_record_is_valid(record: dict[str, Any]) -> None:
    assert problem(record) is None
    final = replay_round(record)
    assert final.round_over
    assert final.strength == record["strength"]
    assert final.notation == record["boards"][-1]


@pytest.mark.parametrize("record", by_id(MATCHES))
def test_match_record_is_valid(record: dict[str, Any]) -> None:
    assert problem(record) is None
    final = replay_match(record)
    assert final.match_over
    assert final.winner == record["winner"]
    assert final.score == record["score"]
    assert final.target == record.get("target", 15)


@pytest.mark.parametrize("record", by_id(INVALID))
def test_invalid_record_is_invalid(record: dict[str, Any]) -> None:
    reason = problem(record)
    assert reason is not None
    assert REASON_FOR[record["corruption"]] in reason
    with pytest.raises(InvalidRecord):
        check_record(record)
    with pytest.raises(ValueError):  # InvalidRecord is a ValueError
        check_record(record)


def test_conformance_rounds_replay_with_state_play() -> None:
    """The claims of rounds.jsonl, recomputed here move by move with ``State.play``."""
    for record in ROUNDS:
        state = State.new_round(record["layout"], record["first"])
        for i, slot in enumerate(record["moves"]):
            assert state.to_move == record["movers"][i]
            after = state.play(slot)
            assert after.notation == record["boards"][i]
            extra_turn = not after.round_over and after.to_move == state.to_move
            assert extra_turn is record["extra_turn"][i]
            state = after
        assert state.strength == record["strength"]


# --- records a Match writes ---------------------------------------------------------------------


def play_match(seed: int, target: int = 15) -> Match:
    rng = np.random.default_rng(seed)
    match = Match(rng=rng, target=target)
    bots = {"R": GreedyBot(rng), "B": RandomBot(rng)}
    while not match.over:
        if match.state.round_over:
            match.next_round()
        else:
            match.play(bots[match.state.to_move].act(match.state))
    return match


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_match_record_from_bots_is_valid(seed: int, tmp_path: Path) -> None:
    match = play_match(seed)
    record = match.record(f"bots-{seed}")
    assert record["winner"] == match.winner
    assert record["score"] == match.state.score
    assert problem(record) is None
    final = replay_match(record)
    assert final == match.state
    for round_ in record["rounds"]:  # each round also stands on its own
        alone = {k: v for k, v in round_.items() if k not in ("points", "score_after")}
        assert problem(alone) is None

    path = tmp_path / "match.jsonl"
    rounds = [  # on its own a round starts from 0-0, so its in-match score claims go
        {"id": f"r{i}", **{k: v for k, v in round_.items() if k not in ("points", "score_after")}}
        for i, round_ in enumerate(record["rounds"])
    ]
    assert write_records(path, [record, *rounds]) == 1 + len(rounds)
    lines = list(read_records(path))
    assert [line.line for line in lines] == list(range(1, len(rounds) + 2))
    assert all(line.error is None for line in lines)
    assert lines[0].record == json.loads(json.dumps(record))
    assert lines[0].name == f"bots-{seed}"
    assert [line.record for line in lines[1:]] == json.loads(json.dumps(rounds))
    assert all(problem(line.record) is None for line in lines)  # type: ignore[arg-type]


def test_match_record_with_a_perfect_bot() -> None:
    rng = np.random.default_rng(11)
    match = Match(rng=rng, target=5, first="B")
    bots = {"R": PerfectBot(rng), "B": RandomBot(rng)}
    while not match.over:
        if match.state.round_over:
            match.next_round()
        else:
            match.play(bots[match.state.to_move].act(match.state))
    record = match.record("perfect")
    assert record["first"] == "B"
    assert record["rounds"][0]["first"] == "B"
    assert problem(record) is None


def test_a_tampered_bot_record_is_invalid() -> None:
    record = play_match(5).record("tampered")
    for change in ("winner", "score", "first", "moves", "score_after", "target"):
        bad = copy.deepcopy(record)
        if change == "winner":
            bad["winner"] = "R" if record["winner"] == "B" else "B"
        elif change == "score":
            bad["score"]["R"] += 1
        elif change == "first":
            bad["first"] = "R" if record["first"] == "B" else "B"
        elif change == "moves":
            bad["rounds"][-1]["moves"] = bad["rounds"][-1]["moves"][:-1]
        elif change == "score_after":
            bad["rounds"][0]["score_after"]["B"] += 1
        else:
            bad["target"] = record["target"] + 100
        assert problem(bad) is not None, change


def test_unfinished_match_record_is_invalid() -> None:
    rng = np.random.default_rng(3)
    match = Match(rng=rng, target=100)
    bot = RandomBot(rng)
    for _ in range(2):
        while not match.state.round_over:
            match.play(bot.act(match.state))
        match.next_round()
    record = match.record("unfinished")
    assert record["winner"] is None
    assert len(record["rounds"]) == 2
    assert "before anyone reached the target" in problem(record)  # type: ignore[operator]


def test_match_rejects_bad_first() -> None:
    with pytest.raises(ValueError, match="'G'"):
        Match(rng=0, first="G")  # type: ignore[arg-type]


def test_match_is_reproducible() -> None:
    assert play_match(9).record("a") == play_match(9).record("a")
    assert play_match(9).record("a") != play_match(10).record("a")


# --- malformed records --------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["layout", "first", "moves"])
def test_round_record_lacking_an_input_is_invalid(key: str) -> None:
    record = {k: v for k, v in ROUNDS[0].items() if k != key}
    reason = problem(record)
    assert reason is not None
    assert repr(key) in reason


@pytest.mark.parametrize("key", ["first", "rounds"])
def test_match_record_lacking_an_input_is_invalid(key: str) -> None:
    record = {k: v for k, v in MATCHES[0].items() if k != key}
    assert problem(record) is not None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("first", "W"),
        ("first", None),
        ("layout", "R R R B B B W W"),
        ("layout", ["B", "W", "W", "B", "B", "R", "W", "R", "R"]),
        ("layout", "RB . W R B W R B W"),
        ("moves", "1 2 4 3 6 7 0 8"),
        ("moves", [True, 2, 4, 3, 6, 7, 0, 8]),
        ("moves", [1.0, 2, 4, 3, 6, 7, 0, 8]),
        ("moves", None),
    ],
)
def test_round_record_with_bad_input_is_invalid(key: str, value: object) -> None:
    record = dict(ROUNDS[0], **{key: value})
    assert problem(record) is not None


@pytest.mark.parametrize("key", ["points", "score_after"])
def test_false_claim_on_a_round_record_is_invalid(key: str) -> None:
    """docs/rules.md: every field of a round record but layout, first and moves is a claim."""
    record = dict(ROUNDS[0])
    assert problem(record) is None
    record[key] = {"R": 99, "B": 99}
    assert problem(record) is not None


def test_match_target_defaults_to_15() -> None:
    for record in MATCHES:
        without = {k: v for k, v in record.items() if k != "target"}
        assert problem(without) == problem(dict(record, target=15))
        if record["target"] == 15:
            assert problem(without) is None


def test_read_records_reports_unreadable_lines(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps(ROUNDS[0])
        + "\n\n"
        + "{not json\n"
        + "[1, 2, 3]\n"
        + '"a string"\n'
        + json.dumps({k: v for k, v in ROUNDS[1].items() if k != "id"})
        + "\n",
        encoding="utf-8",
    )
    lines = list(read_records(path))
    assert [line.line for line in lines] == [1, 3, 4, 5, 6]
    assert lines[0].error is None
    assert lines[0].name == ROUNDS[0]["id"]
    assert lines[1].record is None
    assert "not JSON" in lines[1].error  # type: ignore[operator]
    assert lines[2].error == lines[3].error == "not a JSON object"
    assert [line.name for line in lines[1:]] == ["line 3", "line 4", "line 5", "line 6"]
    assert lines[4].error is None
    assert problem(lines[4].record) is None  # type: ignore[arg-type]


def test_read_records_missing_file(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        list(read_records(tmp_path / "nope.jsonl"))


# --- the replay CLI -----------------------------------------------------------------------------


def replay(*files: Path | str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "buttonup_env.replay", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_all_valid(data_dir: Path) -> None:
    result = replay(data_dir / "rounds.jsonl")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines() == ["300 valid, 0 invalid"]


def test_cli_invalid_records(data_dir: Path) -> None:
    result = replay(data_dir / "invalid.jsonl")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "0 valid, 60 invalid"
    reported = lines[:-1]
    assert len(reported) == 60
    assert all(line.startswith("INVALID ") for line in reported)
    names = [line.removeprefix("INVALID ").split(":", 1)[0] for line in reported]
    assert names == [record["id"] for record in INVALID]
    for line, record in zip(reported, INVALID, strict=True):
        assert line == f"INVALID {record['id']}: {problem(record)}"


def test_cli_names_records_without_id_by_line(tmp_path: Path) -> None:
    path = tmp_path / "noid.jsonl"
    no_id = {k: v for k, v in ROUNDS[0].items() if k != "id"}
    broken = dict(no_id, moves=no_id["moves"][:-1])
    path.write_text(
        json.dumps(no_id) + "\n" + json.dumps(broken) + "\n\nnot json at all\n[]\n",
        encoding="utf-8",
    )
    result = replay(path)
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("INVALID line 2: ")
    assert "7 moves" in lines[0]
    assert lines[1].startswith("INVALID line 4: not JSON")
    assert lines[2] == "INVALID line 5: not a JSON object"
    assert lines[-1] == "1 valid, 3 invalid"
    assert len(lines) == 4


def test_cli_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    result = replay(missing)
    assert result.returncode == 2
    assert str(missing) in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_missing_file_among_others(tmp_path: Path, data_dir: Path) -> None:
    result = replay(data_dir / "rounds.jsonl", tmp_path / "missing.jsonl")
    assert result.returncode == 2
    assert result.stdout.strip().splitlines()[-1] == "300 valid, 0 invalid"


def test_cli_unreadable_file(tmp_path: Path) -> None:
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n")
    result = replay(binary)
    assert result.returncode == 2
    assert str(binary) in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_several_files(data_dir: Path) -> None:
    result = replay(data_dir / "rounds.jsonl", data_dir / "matches.jsonl")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines() == ["340 valid, 0 invalid"]

    invalid = data_dir / "invalid.jsonl"
    result = replay(data_dir / "rounds.jsonl", invalid, data_dir / "matches.jsonl")
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "340 valid, 60 invalid"
    assert len(lines) == 61
    first = INVALID[0]["id"]
    assert lines[0].startswith(f"INVALID {first} ({invalid}): ")


def test_cli_usage_without_files() -> None:
    result = replay()
    assert result.returncode == 2
    assert "usage" in result.stderr.lower()
    assert "Traceback" not in result.stderr
