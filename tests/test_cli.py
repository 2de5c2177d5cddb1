"""``buttonup_env.ui.cli``: the argument type and the parsing the command-line tools share, and
what every tool does with a closed or full standard stream."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from buttonup_env.ui import animate, play, replay
from buttonup_env.ui.cli import parse_arguments, whole_number
from buttonup_env.ui.web import server as web_server

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x", "'x' is not a whole number"),
        ("1.5", "'1.5' is not a whole number"),
        ("0", "0 is not a target: use a whole number from 1 to 10"),
        ("11", "11 is not a target: use a whole number from 1 to 10"),
        ("9" * 50, "a number that large is not a target"),
    ],
)
def test_whole_number_says_what_is_wrong_in_one_sentence(text: str, message: str) -> None:
    parse = whole_number(1, "target", 10)
    with pytest.raises(argparse.ArgumentTypeError) as error:
        parse(text)
    assert str(error.value) == message or str(error.value).startswith(message)
    assert parse("10") == 10
    assert whole_number(0, "seed")("12345678901234") == 12345678901234  # no upper bound


@pytest.mark.parametrize(
    ("parser", "argv", "message"),
    [
        (play.build_parser(), ["--target", "0"], "0 is not a target: use a whole number"),
        (web_server.build_parser(), ["--port", "70000"], "70000 is not a port: use a whole number"),
    ],
)
def test_the_tools_answer_a_bad_number_with_usage_and_status_2(
    parser: argparse.ArgumentParser, argv: list[str], message: str
) -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    assert parse_arguments(parser, argv, stdout, stderr) == 2
    assert message in stderr.getvalue() and stderr.getvalue().startswith("usage:")


def test_animate_takes_its_numbers_with_the_same_type(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        animate.main(["records.jsonl", "--id", "x", "--out", "a.gif", "--size", "100"])
    assert exit_.value.code == 2
    assert "100 is not a board size: use a whole number from 200 to 2000" in capsys.readouterr().err


# --- closed and full standard streams ----------------------------------------------------------

DEV_FULL = Path("/dev/full")
needs_dev_full = pytest.mark.skipif(not DEV_FULL.exists(), reason="needs /dev/full")
MOVES = "\n".join(str(s) for s in range(9)) * 40


def run_play(stdin: Any, stdout: Any) -> tuple[int, str]:
    err = io.StringIO()
    code = play.main(["--opponent", "random", "--seed", "1"], stdin, stdout, err)
    return code, err.getvalue()


@pytest.mark.parametrize("stream", ["stdin", "stdout"])
def test_play_with_a_closed_stream_says_so(stream: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python makes a closed file descriptor 0 or 1 (``<&-``, ``>&-``) a ``None`` stream."""
    monkeypatch.setattr(sys, stream, None)
    stdin = None if stream == "stdin" else io.StringIO(MOVES)
    stdout = None if stream == "stdout" else io.StringIO()
    code, err = run_play(stdin, stdout)
    name = "standard input" if stream == "stdin" else "standard output"
    assert (code, err) == (2, f"python -m buttonup_env.play: error: {name} is closed\n")


class Full(io.StringIO):
    """Output on a full disk: every flush fails, as on /dev/full."""

    def flush(self) -> None:
        raise OSError(28, "No space left on device")


class Broken(io.StringIO):
    """Input that fails to be read (a terminal that went away)."""

    def readline(self, size: int | None = -1) -> str:
        raise OSError(5, "Input/output error")


def test_play_with_output_it_cannot_write_says_so() -> None:
    code, err = run_play(io.StringIO(MOVES), Full())
    assert code == 2
    assert err == (
        "python -m buttonup_env.play: error: cannot write to standard output (No space left on "
        "device)\n"
    )
    code, err = run_play(Broken(), io.StringIO())
    assert (code, err) == (
        2, "python -m buttonup_env.play: error: cannot read standard input (Input/output error)\n"
    )  # fmt: skip


@needs_dev_full
@pytest.mark.parametrize(
    ("module", "argv"),
    [
        ("buttonup_env.play", ["--opponent", "random", "--seed", "1"]),
        ("buttonup_env.replay", ["tests/data/rounds.jsonl"]),
        ("buttonup_env.play", ["--help"]),
    ],
)
def test_output_on_dev_full_is_one_sentence_and_status_2(module: str, argv: list[str]) -> None:
    """The whole process: no traceback, and no second complaint from the interpreter's own
    flush at exit."""
    with open(DEV_FULL, "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", module, *argv],
            input=MOVES,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.endswith(
        "error: cannot write to standard output (No space left on device)\n"
    )
    assert done.stderr.count("\n") == 1, done.stderr


def test_play_with_stdin_and_stdout_closed_by_the_shell() -> None:
    for redirect, name in (("<&-", "standard input"), (">&-", "standard output")):
        done = subprocess.run(
            f"exec {sys.executable} -m buttonup_env.play --opponent random {redirect}",
            shell=True,
            capture_output=redirect == "<&-",
            stderr=subprocess.PIPE if redirect == ">&-" else None,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert done.returncode == 2
        assert done.stderr == f"python -m buttonup_env.play: error: {name} is closed\n"


@pytest.mark.parametrize("stream", ["closed", "full"])
def test_replay_with_output_it_cannot_write_says_so(
    stream: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    err = io.StringIO()
    if stream == "closed":
        monkeypatch.setattr(sys, "stdout", None)
        code = replay.main([str(data_dir / "rounds.jsonl")], stderr=err)
        says = "standard output is closed"
    else:
        code = replay.main([str(data_dir / "rounds.jsonl")], stdout=Full(), stderr=err)
        says = "cannot write to standard output (No space left on device)"
    assert (code, err.getvalue()) == (2, f"error: {says}\n")


def test_replay_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        out, err = io.StringIO(), io.StringIO()
        assert replay.main([str(path)], stdout=out, stderr=err) == 2
        why = "it is a folder" if path == tmp_path else "not a regular file (a device or a pipe)"
        assert err.getvalue() == f"error: cannot read {path}: {why}\n"


def test_animate_refuses_a_device_and_a_closed_output(
    tmp_path: Path,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("PIL")
    out = str(tmp_path / "a.gif")
    assert animate.main(["/dev/zero", "--id", "x", "--out", out]) == 2
    assert capsys.readouterr().err == (
        "error: cannot read /dev/zero: not a regular file (a device or a pipe)\n"
    )
    record = json.loads((data_dir / "rounds.jsonl").read_text().splitlines()[0])["id"]
    rounds = str(data_dir / "rounds.jsonl")
    monkeypatch.setattr(sys, "stdout", None)
    assert animate.main([rounds, "--id", record, "--out", out, "--size", "200"]) == 2
    assert capsys.readouterr().err == "error: standard output is closed\n"


def test_animate_refuses_a_gif_larger_than_it_holds(
    tmp_path: Path,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("PIL")
    monkeypatch.setattr(animate, "MAX_GIF_BYTES", 10 * 200 * 220)  # ten frames of 200 x 220
    record = json.loads((data_dir / "rounds.jsonl").read_text().splitlines()[0])["id"]
    out = tmp_path / "a.gif"
    code = animate.main(
        [str(data_dir / "rounds.jsonl"), "--id", record, "--out", str(out), "--size", "200"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "more than a GIF holds" in err and "--round N" in err and not out.exists()
