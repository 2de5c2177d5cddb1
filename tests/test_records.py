"""Game records: the conformance data, records written by :class:`Match`, and the replay CLI."""

from __future__ import annotations

import codecs
import copy
import io
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from buttonup_env.game.match import Match
from buttonup_env.game.records import (
    MAX_LINE_BYTES,
    InvalidRecord,
    NotARegularFile,
    check_record,
    printable,
    problem,
    read_records,
    replay_match,
    replay_round,
    write_records,
)
from buttonup_env.game.rules import MAX_TARGET, State
from buttonup_env.players.bots import GreedyBot, PerfectBot, RandomBot
from buttonup_env.ui import replay as replay_cli

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


@pytest.mark.parametrize("target", [0, 1001, 10**9, 2.5, "15"])
def test_a_match_target_outside_the_rules_is_a_problem_not_an_error(target: object) -> None:
    """The rules allow targets from 1 to MAX_TARGET; a record asking for another is invalid
    (found by the slow fuzz test: 1001 raised the rules' ValueError out of problem())."""
    reason = problem(dict(MATCHES[0], target=target))
    assert reason == f"target is {target!r}; it must be a whole number from 1 to {MAX_TARGET}"


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
    result = replay(tmp_path)  # a folder: there is nothing to read
    assert result.returncode == 2
    assert f"cannot read {tmp_path}: it is a folder" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_line_that_is_not_utf8_is_one_invalid_record(tmp_path: Path) -> None:
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n" + json.dumps(ROUNDS[0]).encode() + b"\n")
    result = replay(binary)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stdout.splitlines() == [
        "INVALID line 1: not UTF-8 text (byte 0xff at byte 1 of the line)",
        "1 valid, 1 invalid",
    ]


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


# --- hostile and careless files ---------------------------------------------------------------

FORGED = "evil\n999 valid, 0 invalid\x1b[2J\u202e"
"""An id that would print a line of its own, clear the screen and reverse the text."""

HOSTILE_LINES: list[tuple[bytes, str | None]] = [
    # (a line of the file, what its INVALID line says; None: a valid record)
    (codecs.BOM_UTF8 + json.dumps(ROUNDS[0]).encode(), None),  # a byte-order mark first
    (
        b"[" * 100_000 + b"]" * 100_000,
        "INVALID line 2: not JSON that can be read (nested too deeply)",
    ),
    (
        b'{"id": 1' + b"1" * 5000 + b"}",
        "INVALID line 3: not JSON that can be read (an integer of more",
    ),
    (
        json.dumps(dict(ROUNDS[1], id=FORGED, moves=[])).encode(),
        "INVALID evil\\n999 valid, 0 invalid\\x1b[2J\\u202e: has 0 moves",
    ),
    (b'{"id": "\\ud800 alone", "layout": 1}', "INVALID \\ud800 alone: lacks 'first'"),
    (b'{"id": "caf\xe9"}', "INVALID line 6: not UTF-8 text (byte 0xe9 at byte 12 of the line)"),
    (
        b'{"id": "n", "first": NaN}',
        "INVALID line 7: not JSON that can be read (NaN is not a JSON number)",
    ),
    (
        b'{"moves": [' + b"1, " * 400_000 + b"1]}",
        "INVALID line 8: the line is longer than 1,048,576 bytes",
    ),
    (
        json.dumps(dict(ROUNDS[2], id="x" * 500, first=["R"] * 1000)).encode(),
        "INVALID " + "x" * 77 + "...: first is [" + "'R', " * 10,
    ),
    (json.dumps(ROUNDS[3]).encode(), None),  # the rest of the file is still judged
]


def write_hostile(path: Path) -> Path:
    path.write_bytes(b"\n".join(line for line, _ in HOSTILE_LINES) + b"\n")
    return path


def test_every_hostile_line_is_one_invalid_record_and_the_rest_is_judged(tmp_path: Path) -> None:
    lines = list(read_records(write_hostile(tmp_path / "hostile.jsonl")))
    assert [line.line for line in lines] == list(range(1, len(HOSTILE_LINES) + 1))
    for line, (_, says) in zip(lines, HOSTILE_LINES, strict=True):
        assert line.name.isprintable() and len(line.name) <= 80, line.name
        reason = line.error or problem(line.record)  # type: ignore[arg-type]
        assert (reason is None) == (says is None), (line.line, reason)

    result = replay(tmp_path / "hostile.jsonl")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    printed = result.stdout.splitlines()
    invalid = [says for _, says in HOSTILE_LINES if says is not None]
    assert len(printed) == len(invalid) + 1  # one line per invalid record: none forged
    assert printed[-1] == f"2 valid, {len(invalid)} invalid"
    for line, says in zip(printed[:-1], invalid, strict=True):
        assert line.startswith(says), (line[:200], says)
        assert line.isprintable() and len(line) < 400


@pytest.mark.parametrize(
    ("text", "limit", "shown"),
    [
        ("abc", 80, "abc"),
        ("a\nb", 80, "a\\nb"),
        ("x" * 100, 10, "xxxxxxx..."),
        ("\x00" * 30, 20, "\\x00" * 4 + "..."),  # escapes count, and are never cut in two
        ("\U0001f600" * 5 + "\u202e", 9, "\U0001f600" * 5 + "..."),
        ("\u202e" * 2, 12, "\\u202e\\u202e"),  # exactly the limit: nothing cut
    ],
)
def test_printable_text_is_cut_to_its_limit_after_escaping(
    text: str, limit: int, shown: str
) -> None:
    assert printable(text, limit) == shown
    assert len(printable(text, limit)) <= limit


def test_a_line_far_beyond_the_cap_is_dropped_without_holding_it(tmp_path: Path) -> None:
    """Memory stays bounded: a 64 MiB line without a newline costs about the cap to read."""
    path = tmp_path / "long.jsonl"
    with open(path, "wb") as handle:
        for _ in range(64):
            handle.write(b"0" * (1 << 20))
        handle.write(b"\n" + json.dumps(ROUNDS[0]).encode() + b"\n")
    tracemalloc.start()
    try:
        lines = list(read_records(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [line.line for line in lines] == [1, 2]
    assert lines[0].error == "the line is longer than 1,048,576 bytes"
    assert problem(lines[1].record) is None  # type: ignore[arg-type]
    assert peak < 4 * MAX_LINE_BYTES, peak


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_dev_zero_is_refused_by_the_checker_at_once() -> None:
    """An endless device is refused before a byte is read: read on, it would never end."""
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "buttonup_env.replay", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        result.stderr == "error: cannot read /dev/zero: not a regular file (a device or a pipe)\n"
    )
    assert time.monotonic() - start < 30


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_with_no_writer_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "records.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFile, match="not a regular file"):
        list(read_records(fifo))
    out, err = io.StringIO(), io.StringIO()
    assert replay_cli.main([str(fifo)], stdout=out, stderr=err) == 2
    assert err.getvalue() == f"error: cannot read {fifo}: not a regular file (a device or a pipe)\n"
    assert out.getvalue() == "0 valid, 0 invalid\n"


# --- property: no file makes the reader or the checker fail --------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
record_keys = st.sampled_from(
    ["id", "layout", "first", "moves", "movers", "extra_turn", "boards", "strength", "points",
     "score_after", "target", "rounds", "score", "winner"]
)  # fmt: skip


@st.composite
def records_lines(draw: st.DrawFn) -> bytes:
    """A line of a records file: a real record with fields changed, JSON of any shape, or bytes."""
    kind = draw(st.sampled_from(["edited", "json", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=60)).replace(b"\n", b" ")
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    record = copy.deepcopy(draw(st.sampled_from(ROUNDS[:20] + MATCHES[:5])))
    for key in draw(st.lists(record_keys, max_size=3)):
        record[key] = draw(json_values)
    if "rounds" in record and isinstance(record["rounds"], list) and record["rounds"]:
        first = record["rounds"][0]
        if isinstance(first, dict):
            first[draw(record_keys)] = draw(json_values)
    return json.dumps(record).encode()


def has_text(line: bytes, first: bool) -> bool:
    """Whether a line of a records file is more than white space (a byte-order mark first)."""
    if first:
        line = line.removeprefix(codecs.BOM_UTF8)
    try:
        return bool(line.decode("utf-8").strip())
    except UnicodeDecodeError:
        return True  # not text at all: an invalid record


def check_any_file(lines: list[bytes], tmp_path: Path) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    read = list(read_records(path))
    assert [line.line for line in read] == [
        n for n, line in enumerate(lines, start=1) if has_text(line, first=n == 1)
    ]  # one RecordLine for every line but the blank ones
    for line in read:
        assert line.name.isprintable() and len(line.name) <= 80
        if line.record is None:
            assert line.error
            continue
        reason = problem(line.record)
        assert reason is None or (isinstance(reason, str) and reason)


@settings(  # 5,000 examples in the slow run below
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(records_lines(), min_size=1, max_size=8))
@example(  # an id of control and astral-plane characters was shown in 81 characters
    lines=[json.dumps({"id": "\x00" * 10 + "\U0001f600" * 100}).encode()]
)
def test_no_file_makes_the_reader_fail(lines: list[bytes], tmp_path: Path) -> None:
    check_any_file(lines, tmp_path)


@pytest.mark.slow
@settings(
    max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(records_lines(), min_size=1, max_size=8))
def test_no_file_makes_the_reader_fail_long_run(lines: list[bytes], tmp_path: Path) -> None:
    check_any_file(lines, tmp_path)
