"""``buttonup_env.ui.cli``: the argument type and the parsing the command-line tools share."""

from __future__ import annotations

import argparse
import io

import pytest

from buttonup_env.ui import animate, play
from buttonup_env.ui.cli import parse_arguments, whole_number
from buttonup_env.ui.web import cli as web_cli


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
        (web_cli.build_parser(), ["--port", "70000"], "70000 is not a port: use a whole number"),
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
