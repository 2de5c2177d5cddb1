"""The terminal game ``python -m buttonup_env.play``, driven with scripted input."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from buttonup_env.game.equity import match_move_values
from buttonup_env.game.match import Match
from buttonup_env.game.rules import State
from buttonup_env.players.bots import MarginBot, RandomBot
from buttonup_env.ui.play import EXIT_INTERRUPTED, OpponentError, Session, main

ESC = "\x1b"
SLOT_LINE = re.compile(r"^  slot (\d)  (\S+)", re.MULTILINE)
MOVE_LINE = re.compile(r"^(?:You lift|Red lifts|Black lifts) slot (\d)", re.MULTILINE)


class TTYBuffer(io.StringIO):
    """An output stream that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


class ScriptedPlayer(io.StringIO):
    """Input that answers the prompts by reading the screen written so far.

    At each prompt it first tries, once per kind, a bad answer — letters, slot 9, an empty slot
    and a slot without a white button (when the board shown has one) — then lifts the first of
    the legal slots the screen lists.
    """

    BAD_KINDS = ("letters", "nine", "empty", "no_white")

    def __init__(self, screen: io.StringIO) -> None:
        super().__init__()
        self.screen = screen
        self.tried: dict[str, str] = {}
        self.legal_choices: list[int] = []

    def readline(self, size: int | None = -1) -> str:
        text = self.screen.getvalue()
        shown = text[text.rindex("Round ") :]  # the last board shown, up to the prompt
        listed = re.findall(r"^Your move .*lift one of the legal slots ([\d, ]+)\.$", shown, re.M)
        legal = [int(s) for s in listed[-1].split(", ")]
        board = dict((int(slot), stack) for slot, stack in SLOT_LINE.findall(shown))
        candidates = {
            "letters": "abc",
            "nine": "9",
            "empty": next((str(s) for s, stack in board.items() if stack == "."), None),
            "no_white": next(
                (str(s) for s, stack in board.items() if stack != "." and "W" not in stack), None
            ),
        }
        for kind in self.BAD_KINDS:
            if kind not in self.tried and candidates[kind] is not None:
                self.tried[kind] = candidates[kind]
                return candidates[kind] + "\n"
        self.legal_choices.append(legal[0])
        return f"{legal[0]}\n"


def play(argv: list[str], stdin: io.StringIO | None = None) -> tuple[int, str, str]:
    """Run ``main`` with in-memory streams; return (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    if stdin is None:
        stdin = ScriptedPlayer(out)
    elif isinstance(stdin, ScriptedPlayer):
        stdin.screen = out
    code = main(argv, stdin=stdin, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def replay_moves(out: str, seed: int, target: int) -> Match:
    """Replay the moves written in a transcript on a fresh match with the same seed."""
    match = Match(np.random.default_rng(seed), target=target)
    for slot in MOVE_LINE.findall(out):
        if match.state.round_over:
            match.next_round()
        match.play(int(slot))
    return match


# --- a whole match ----------------------------------------------------------------------------
@pytest.mark.parametrize("color", ["R", "B"])
def test_a_match_with_bad_input_is_played_to_its_end(color: str) -> None:
    argv = ["--opponent", "greedy", "--color", color, "--target", "3", "--seed", "7"]
    stdin = ScriptedPlayer(io.StringIO())
    code, out, err = play([*argv, "--no-color"], stdin)
    assert code == 0 and err == ""
    assert set(stdin.tried) == set(ScriptedPlayer.BAD_KINDS), "every kind of bad input was tried"
    bad = stdin.tried
    assert "slot> abc\n'abc' is not a slot number; type one of the legal slots " in out
    assert "slot> 9\nSlot 9 does not exist; slots are 0 to 8 and the legal ones are " in out
    assert f"slot> {bad['empty']}\nSlot {bad['empty']} is empty; the legal slots are " in out
    assert re.search(
        rf"slot> {bad['no_white']}\nSlot {bad['no_white']} \([RB]+\) holds no white button; "
        r"the legal slots are \d",
        out,
    )
    # after every error line the question is asked again, and the game goes on
    for line in out.splitlines():
        if "not a slot number" in line or re.search(r"the legal (slots|ones) are", line):
            assert out.split(line + "\n", 1)[1].startswith("slot> ")
    assert out.count("Your move") == len(stdin.legal_choices)
    assert "Round 1 is over. Final stack" in out
    assert re.search(r"Match over: (Red|Black) wins \d+ - \d+\. You (win!|lose\.)\n\Z", out)
    # the transcript is the match: its moves replayed on Match(seed) give the same score
    match = replay_moves(out, seed=7, target=3)
    assert match.over
    score = match.state.score
    winner = "Red" if match.winner == "R" else "Black"
    assert f"Match over: {winner} wins {max(score.values())} - {min(score.values())}." in out
    assert out.count(" is over. Final stack") == len(match.rounds)
    for number, record in enumerate(match.rounds, start=1):
        strength = record["strength"]
        assert f"Round {number} is over. Final stack" in out
        assert f"strength: Red {strength['R']} (heights" in out
        assert f"Black {strength['B']} (heights" in out
    assert "Red moves again." in out or "Black moves again." in out or "you move again." in out


def test_each_round_says_who_starts_and_why() -> None:
    code, out, _ = play(["--opponent", "random", "--seed", "5", "--no-color"])
    assert code == 0
    match = replay_moves(out, seed=5, target=15)
    starts = re.findall(r"^Round (\d+): (You start|Black starts) \((.*)\)\.$", out, re.M)
    assert [int(n) for n, _, _ in starts] == list(range(1, len(match.rounds) + 1))
    assert len(starts) >= 3 and starts[0][2] == "drawn at random"
    for (n, who, why), record in zip(starts, match.rounds, strict=True):
        assert record["first"] == ("R" if who == "You start" else "B")
        if int(n) > 1:
            before = match.rounds[int(n) - 2]
            if before["score_after"]["R"] == before["score_after"]["B"]:
                starter = "Red" if before["first"] == "R" else "Black"
                assert why == f"points level, {starter} started round {int(n) - 1}"
            else:
                assert why == "fewer points"
    assert "points level" in out and "fewer points" in out


# --- quitting ---------------------------------------------------------------------------------
@pytest.mark.parametrize("word", ["q", "quit", "Q"])
def test_q_quits_with_status_0(word: str) -> None:
    code, out, err = play(["--opponent", "perfect", "--seed", "2"], io.StringIO(word + "\n"))
    assert code == 0 and err == ""
    assert out.endswith("Goodbye. Red (you) 0 - 0 Black   target 15.\n")


def test_end_of_input_quits_cleanly() -> None:
    code, out, err = play(["--opponent", "random", "--seed", "2"], io.StringIO(""))
    assert code == 0 and err == ""
    assert out.endswith("slot> \nEnd of input: goodbye.\n")


def test_end_of_input_in_the_middle_of_a_game() -> None:
    moves = "".join(f"{slot}\n" for slot in range(9))  # a few legal moves among illegal ones
    code, out, _ = play(["--opponent", "random", "--seed", "4"], io.StringIO(moves))
    assert code == 0
    assert MOVE_LINE.search(out)
    assert out.endswith("End of input: goodbye.\n")


def test_ctrl_c_quits_with_status_130() -> None:
    class Interrupted(io.StringIO):
        def readline(self, size: int | None = -1) -> str:
            raise KeyboardInterrupt

    code, out, err = play(["--opponent", "random", "--seed", "2"], Interrupted())
    assert code == EXIT_INTERRUPTED == 130
    assert out.endswith("\nInterrupted: goodbye.\n") and err == ""


# --- hints ------------------------------------------------------------------------------------
@pytest.mark.parametrize("color", ["R", "B"])
def test_hints_are_the_solver_values(color: str) -> None:
    """Each hint gives every legal move's chance of winning the match (the match solved, at
    the position's score and starter) and its round margin (the round solver)."""
    argv = ["--opponent", "greedy", "--color", color, "--target", "3", "--seed", "11"]
    code, out, _ = play([*argv, "--hint", "--no-color"])
    assert code == 0
    hints = 0
    for question in re.finditer(r"^Your move.*\n(.*)$", out, re.M):
        before = out[: question.start()]
        header = before[before.rindex("Round ") :]
        board = [stack for _, stack in SLOT_LINE.findall(header)]
        red, black = (int(v) for v in re.search(r"Red.*? (\d+) - (\d+) Black", header).groups())  # type: ignore[union-attr]
        starter = re.findall(r"^Round \d+: (You|Black|Red|The greedy bot) start", before, re.M)[-1]
        started = (
            color
            if starter == "You"
            else {"Red": "R", "Black": "B"}.get(starter, "RB".replace(color, ""))
        )
        state = State(
            [("" if s == "." else s) for s in board], color, {"R": red, "B": black}, 3, started
        )
        hint = re.fullmatch(
            r"hint: (.*) \(your chance of winning the match with perfect play, and the round's "
            r"final margin for you\)",
            question.group(1),
        )
        assert hint is not None, question.group(1)
        shown = re.findall(r"slot (\d) (\d+\.\d)% \(([+-]?\d+)\)", hint.group(1))
        assert {int(s): int(m) for s, _, m in shown} == MarginBot().move_values(state)
        exact = match_move_values(state)
        assert {int(s): float(p) for s, p, _ in shown} == {
            s: round(100 * p, 1) for s, p in exact.items()
        }
        hints += 1
    assert hints >= 3


def test_the_solved_match_has_a_largest_target() -> None:
    """Beyond the targets the match is solved for, the match's perfect player and the hints
    are refused in one sentence; the margin player plays on."""
    for argv in (["--opponent", "perfect"], ["--opponent", "margin", "--hint"]):
        code, _out, err = play([*argv, "--target", "200", "--no-color"])
        assert code == 2 and "solved for targets up to 100" in err and "Traceback" not in err
    code, _, _ = play(["--opponent", "margin", "--target", "200", "--no-color"])
    assert code == 0


def test_no_hints_unless_asked() -> None:
    _, out, _ = play(["--opponent", "greedy", "--target", "3", "--seed", "11"])
    assert "hint:" not in out


# --- colour -----------------------------------------------------------------------------------
def test_colour_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    argv = ["--opponent", "random", "--seed", "5", "--target", "1"]

    def screen(extra: list[str]) -> str:
        out = TTYBuffer()
        assert main([*argv, *extra], stdin=io.StringIO("q\n"), stdout=out) == 0
        return out.getvalue()

    coloured = screen([])
    assert "\x1b[1;31mR\x1b[0m" in coloured or "\x1b[1;34mB\x1b[0m" in coloured
    assert ESC not in screen(["--no-color"])
    monkeypatch.setenv("NO_COLOR", "1")
    assert ESC not in screen([])
    monkeypatch.delenv("NO_COLOR")
    _, piped, _ = play(argv, io.StringIO("q\n"))  # a StringIO is not a terminal
    assert ESC not in piped
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == piped


def test_no_color_output_has_no_escape_codes() -> None:
    code, out, _ = play(["--opponent", "perfect", "--target", "3", "--seed", "3", "--no-color"])
    assert code == 0 and ESC not in out


# --- reproducibility ----------------------------------------------------------------------------
def test_same_seed_same_transcript() -> None:
    argv = ["--opponent", "random", "--target", "5", "--hint", "--no-color"]
    first = play([*argv, "--seed", "21"])
    assert first == play([*argv, "--seed", "21"])
    assert first[1] != play([*argv, "--seed", "22"])[1]
    assert "Seed 21." in first[1]


def test_without_seed_the_seed_is_shown() -> None:
    _, out, _ = play(["--opponent", "random"], io.StringIO("q\n"))
    assert re.search(r"Seed \d+\.", out)


# --- bad arguments ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["--opponent"],
        ["--opponent", "random", "--target", "0"],
        ["--opponent", "random", "--target", "ten"],
        ["--opponent", "random", "--target", "1001"],
        ["--opponent", "random", "--target", "9" * 5000],
        ["--opponent", "random", "--color", "G"],
        ["--opponent", "random", "--seed", "-1"],
        ["--opponent", "random", "--bogus"],
    ],
)
def test_bad_arguments_give_usage_and_status_2(argv: list[str]) -> None:
    code, out, err = play(argv, io.StringIO(""))
    assert code == 2 and out == ""
    assert err.startswith("usage: python -m buttonup_env.play")
    assert "error:" in err and "Traceback" not in err
    assert len(err.splitlines()[-1]) < 200  # the value is not printed back in full


def test_the_default_opponent_is_the_perfect_bot() -> None:
    code, out, _ = play([], io.StringIO("q\n"))
    assert code == 0 and "perfect" in out.lower()


def test_help_exits_0() -> None:
    code, out, _ = play(["--help"], io.StringIO(""))
    assert code == 0 and "--opponent" in out and "--hint" in out


@pytest.mark.parametrize("spec", ["missing.onnx", "nosuchbot", "broken.onnx", "model.zip", "dir"])
def test_bad_opponent_is_one_error_line_and_status_2(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.onnx").write_bytes(b"not an onnx model")
    (tmp_path / "model.zip").write_bytes(b"PK")
    (tmp_path / "dir").mkdir()
    code, out, err = play(["--opponent", spec], io.StringIO(""))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(
        "python -m buttonup_env.play: error: --opponent:"
    )
    assert spec in err


def test_bot_names_are_case_insensitive() -> None:
    code, out, _ = play(["--opponent", "Perfect"], io.StringIO("q\n"))
    assert code == 0 and "against the perfect bot" in out


def test_a_shipped_policy_is_an_opponent_by_name() -> None:
    pytest.importorskip("onnxruntime")
    code, out, err = play(["--opponent", "buttonup-ppo", "--seed", "3"], io.StringIO("q\n"))
    assert code == 0 and err == "", err
    assert "against the policy buttonup-ppo" in out


def test_the_help_names_the_shipped_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # argparse would wrap at the hyphen
    _, out, _ = play(["--help"], io.StringIO(""))
    assert "buttonup-ppo" in out


def test_an_illegal_opponent_move_is_reported() -> None:
    class Cheat:
        def act(self, state: State) -> int:
            return next(s for s in range(9) if s not in state.legal_moves())

    session = Session(Match(0, first="B"), Cheat(), "R", io.StringIO(""), io.StringIO())
    with pytest.raises(OpponentError, match="not legal"):
        session.run()


# --- what a move looks like ---------------------------------------------------------------------
WORKED_EXAMPLE = [  # docs/rules.md: layout B W W B B R W R R, Red starts; Red is "you"
    (1, "You lift slot 1 (W): W lands on W on slot 2, you move again."),
    (2, "You lift slot 2 (WW): W lands on B on slot 4."),
    (4, "Black lifts slot 4 (BW): W lands on W on slot 6, Black moves again."),
    (3, "Black lifts slot 3 (BW): W lands on W on slot 6, Black moves again."),
    (6, "Black lifts slot 6 (WWW): W lands on B on slot 0."),
    (7, "You lift slot 7 (RW): W lands on W on slot 0, you move again."),
    (
        0,
        "You lift slot 0 (BWW): more buttons than stacks, so the last 2 (WW) go together onto "
        "slot 8 (no extra turn).",
    ),
    (
        8,
        "Black lifts slot 8 (RWRWW): all 5 go onto slot 5, the only stack left; the round is over.",
    ),
]


def test_moves_of_the_worked_example_are_described() -> None:
    session = Session(Match(0), RandomBot(0), "R", io.StringIO(), io.StringIO())
    state = State.new_round("B W W B B R W R R", "R")
    for slot, line in WORKED_EXAMPLE:
        after = state.play(slot)
        assert session.describe(state, slot, after) == line
        state = after
    session.round = 1
    summary = session.round_summary(state)
    assert "Final stack, bottom (height 1) to top (height 9): RBBBRWRWW" in summary
    assert "strength: Red 13 (heights 1+5+7), Black 9 (heights 2+3+4)" in summary
    assert "You score 4 points." in summary


# --- the real command ---------------------------------------------------------------------------
def run_command(args: list[str], text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "buttonup_env.play", *args],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_command_plays_a_match_from_piped_input() -> None:
    # letters, 9, then every slot in turn: illegal ones are refused, legal ones are played
    text = "abc\n9\n" + "".join(f"{slot}\n" for slot in range(9)) * 60
    args = ["--opponent", "perfect", "--target", "3", "--seed", "8"]
    result = run_command(args, text)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and ESC not in result.stdout
    out = result.stdout
    assert "slot> abc\n'abc' is not a slot number" in out
    assert "slot> 9\nSlot 9 does not exist" in out
    assert re.search(r"slot> (\d)\nSlot \1 is empty; the legal slots are", out)
    assert re.search(r"slot> (\d)\nSlot \1 \([RB]+\) holds no white button", out)
    assert "Match over:" in out
    assert replay_moves(out, seed=8, target=3).over
    assert run_command(args, text).stdout == out


def test_the_command_rejects_a_missing_policy_file() -> None:
    result = run_command(["--opponent", "no/such/model.onnx"], "")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "no/such/model.onnx" in result.stderr
    assert "Traceback" not in result.stderr


def test_ctrl_c_in_the_command_quits_with_status_130() -> None:
    # A shell running the tests in the background may leave SIGINT ignored, and Python keeps it
    # so; a terminal would not. Restore the usual handler, then run the command's main().
    start = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from buttonup_env.ui.play import main; sys.exit(main())"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", start, "--opponent", "random", "--seed", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    shown = b""
    while not shown.endswith(b"slot> "):  # wait for the question before pressing Ctrl-C
        chunk = os.read(process.stdout.fileno(), 4096)
        assert chunk, shown
        shown += chunk
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert out == b"\nInterrupted: goodbye.\n" and err == b""


# --- an exported policy as the opponent -----------------------------------------------------------
def test_an_onnx_policy_plays(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from buttonup_env.game.encoding import SlotEncoding
    from buttonup_env.players.policy import FORMAT_VERSION, META_ENCODING, META_VERSION, load_policy

    weights = np.random.default_rng(0).normal(size=(SlotEncoding.size, 9)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["logits"])],
        "linear_policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", SlotEncoding.size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 9])],
        [numpy_helper.from_array(weights, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    helper.set_model_props(model, {META_ENCODING: "slots", META_VERSION: FORMAT_VERSION})
    path = tmp_path / "linear.onnx"
    onnx.save(model, path)

    code, out, err = play(["--opponent", str(path), "--target", "2", "--seed", "9"])
    assert code == 0 and err == "", err
    assert f"against the policy {path}" in out and "Match over:" in out
    # every move the transcript gives Black is the policy's own choice
    policy, match = load_policy(path), Match(np.random.default_rng(9), target=2)
    opponent_moves = 0
    for mover, slot in re.findall(r"^(You lift|Black lifts) slot (\d)", out, re.M):
        if match.state.round_over:
            match.next_round()
        if mover == "Black lifts":
            assert policy.act(match.state) == int(slot)
            opponent_moves += 1
        match.play(int(slot))
    assert opponent_moves > 0 and match.over
