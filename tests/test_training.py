"""The training scripts end to end, run as a user runs them: train (tiny budgets), interrupt
and resume, export with a card, evaluate from the command line, and their error messages.

Most commands run in this process (:func:`run`: the script's ``__main__`` with its arguments,
output and exit status), which spares each one a new interpreter's imports; a new interpreter
(:func:`run_process`, ``subprocess``) runs the tiny training the export tests share, the
interrupted trainings (signals), one refusal per script and the docs' own script."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx
import pytest
from commands import run, run_process
from onnx import numpy_helper
from sb3_files import UNSUPPORTED, near_tie, random_positions, sb3_choices, unsupported_zip

from buttonup_env.game.rules import LAYOUTS, State
from buttonup_env.players.audit import Audit, Tally, audit
from buttonup_env.players.bots import GradedBot, GreedyBot, MarginBot, RandomBot
from buttonup_env.players.evaluation import evaluate
from buttonup_env.players.exploit import exploitability
from buttonup_env.players.policy import META_ENCODING, OnnxPolicy, load_policy
from buttonup_env.ui.cli import run_cli
from training.config import SELF_PLAY, SOLVER_MIX, RunConfig, TrainConfig, parse_config, resolve
from training.typed_json import to_json

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "training" / "train.py"
EXPORT = ROOT / "training" / "export.py"
EVALUATE = ROOT / "training" / "evaluate.py"

TINY_STEPS = 256
TINY = [
    "--preset", "smoke",
    "--threads", "1",
    "--workers", "1",
    "--n-envs", "2",
    "--n-steps", "64",
    "--batch-size", "64",
    "--hidden", "32", "32",
    "--snapshot-every", "128",
    "--eval-every", "128",
    "--checkpoint-every", "128",
    "--eval-matches", "2",
    "--ladder-matches", "6",
    "--final-eval-matches", "4",
    "--no-progress",
]  # fmt: skip
"""The smallest training that still reaches every stage: two rollouts, a snapshot, an
evaluation and a checkpoint at every rollout, the final export (its averaged policy of the
second half's snapshot and the last weights)."""


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The single ``error:`` line that a refused command prints (no traceback)."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


def checkpoint_steps(path: Path) -> int:
    """The steps of a checkpoint (``NAME.pt``), read from ``NAME.json``, which holds the .pt's
    SHA-256 (the two files belong together)."""
    state = json.loads(path.with_suffix(".json").read_text())
    assert state["weights_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    return state["steps"]


def eval_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]


def scalar_events(run_dir: Path, tag: str) -> list[list]:
    """For each TensorBoard event file of the run (oldest first), the events of ``tag``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted((run_dir / "tb").rglob("events.out.tfevents.*"), key=lambda p: p.name)
    found = []
    for path in files:
        events = EventAccumulator(str(path))
        events.Reload()
        if tag in events.Tags()["scalars"]:
            found.append(events.Scalars(tag))
    return found


def scalar_steps(run_dir: Path, tag: str) -> list[list[int]]:
    """For each TensorBoard event file of the run (oldest first), the steps of ``tag``."""
    return [[event.step for event in events] for events in scalar_events(run_dir, tag)]


def card_settings(config: dict) -> dict:
    """The settings of a run's config.json as its cards hold them: without where the run was
    kept (runs_dir, resume) and config.json's own fields."""
    left_out = ("format", "command", "code_version", "runs_dir", "resume")
    return {k: v for k, v in config.items() if k not in left_out}


def check_card_command(card: dict, config: dict) -> None:
    """A card's command is train.py's, rebuilt from the run's settings: it gives them back."""
    argv = shlex.split(card["command"])
    assert argv[:2] == ["python", "training/train.py"]
    assert card_settings(to_json(resolve(parse_config(argv[2:])))) == card_settings(config)


def check_finished_run(run_dir: Path, total_steps: int, final_eval_matches: int) -> None:
    """Everything a finished run leaves in its folder."""
    config = json.loads((run_dir / "config.json").read_text())
    assert config["total_steps"] == total_steps
    assert config["command"].startswith("python training/train.py ")
    assert f"--run-name {run_dir.name}" in config["command"]
    assert re.fullmatch(r"buttonup-env \d+\.\d+\.\d+ \(.+\)", config["code_version"])

    latest = json.loads((run_dir / "checkpoints" / "latest.json").read_text())
    assert latest["steps"] == total_steps
    assert checkpoint_steps(run_dir / "checkpoints" / "latest.pt") == total_steps
    assert latest["progress"]["train_seconds"] > 0
    best = json.loads((run_dir / "checkpoints" / "best.json").read_text())
    assert checkpoint_steps(run_dir / "checkpoints" / "best.pt") == best["progress"]["best_steps"]

    snapshots = sorted((run_dir / "snapshots").glob("*.onnx"))
    assert snapshots
    for path in snapshots:
        assert re.fullmatch(r"step_\d{9}\.onnx", path.name)
        policy = load_policy(path)
        assert isinstance(policy, OnnxPolicy)
        assert policy.metadata[META_ENCODING] == config["encoding"]
        assert int(policy.metadata["steps"]) == int(path.stem[5:]) <= total_steps

    rows = eval_rows(run_dir)
    assert len(rows) >= 2
    steps = [row["steps"] for row in rows]
    assert steps == sorted(set(steps)) and steps[-1] == total_steps
    for row in rows:
        for bot in ("random", "greedy", "perfect"):
            assert 0 <= row[f"win_rate_{bot}"] <= 1
            assert row[f"regret_{bot}"] >= 0
            assert 0 <= row[f"match_regret_{bot}"] <= 1  # of the probability of winning
        by_move = row["regret_by_move_perfect"]  # a round is eight moves; None: no decision
        measured = [r for r in by_move if r is not None]
        assert len(by_move) == 8 and measured and all(r >= 0 for r in measured)
        assert (max(measured) > 0) == (row["regret_perfect"] > 0)
        assert row["elo_low"] < row["elo"] < row["elo_high"]  # the rating against the ladder
        assert row["ladder_matches"] == config["ladder_matches"] and 0 <= row["ladder_score"] <= 1
    assert (run_dir / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the best checkpoint: the first evaluation of the lowest figure of the run's objective
    chosen_by = "match_regret_perfect" if config["objective"] == "match" else "regret_perfect"
    lowest = min(rows, key=lambda row: row[chosen_by])
    assert best["progress"]["best_steps"] == lowest["steps"]
    assert best["progress"]["best_regret"] == lowest[chosen_by]

    card = json.loads((run_dir / "final.json").read_text())
    assert card["model"] == "final.onnx"
    check_card_command(card, config)
    assert card["code_version"] == config["code_version"]
    assert card["seed"] == config["seed"]
    assert card["config"]["total_steps"] == total_steps
    assert card["training"]["checkpoint"] == "latest"
    assert card["training"]["steps"] == total_steps
    figures = card["evaluation"]["random"]
    assert figures["matches"] == final_eval_matches
    assert figures["wins"] + figures["losses"] == final_eval_matches
    assert 0 <= figures["win_rate_interval"][0] <= figures["win_rate"]
    assert figures["win_rate"] <= figures["win_rate_interval"][1] <= 1
    assert figures["mean_regret"] >= 0 and figures["decisions"] > 0
    assert "--opponent random" in figures["command"]
    assert card["evaluation"]["perfect"]["matches"] == final_eval_matches
    assert card["evaluation"]["margin"]["matches"] == final_eval_matches

    final = load_policy(run_dir / "final.onnx")
    assert final.encoding.name == config["encoding"]
    state = State.new_round(LAYOUTS[123], "B")
    assert final.act(state) in state.legal_moves()
    best_card = json.loads((run_dir / "best.json").read_text())
    assert best_card["training"]["checkpoint"] == "best"
    assert best_card["training"]["steps"] == best["progress"]["best_steps"]
    assert best_card["training"]["minutes"] == round(best["progress"]["train_seconds"] / 60, 1)
    assert best_card["training"]["run_steps"] == latest["steps"]
    assert best_card["training"]["run_minutes"] == card["training"]["minutes"]
    load_policy(run_dir / "best.onnx")
    for bot in ("random", "perfect"):  # the lowest-regret checkpoint is judged too
        assert best_card["evaluation"][bot]["matches"] == final_eval_matches
    check_averaged(run_dir, config, total_steps, final_eval_matches)


def check_averaged(run_dir: Path, config: dict, total_steps: int, matches: int) -> None:
    """``averaged.onnx``: the final weights averaged with the snapshots of the run's last
    ``average_last`` share of steps, named on its card, judged like the others."""
    first = total_steps - config["average_last"] * total_steps
    snapshots = sorted((run_dir / "snapshots").glob("*.onnx"))
    averaged = [p for p in snapshots if first <= int(p.stem[5:]) < total_steps]
    card = json.loads((run_dir / "averaged.json").read_text())
    assert card["training"]["averaged_with"] == [p.name for p in averaged]
    assert card["training"]["steps"] == total_steps
    assert card["evaluation"]["random"]["matches"] == matches
    weights = [
        {w.name: numpy_helper.to_array(w) for w in onnx.load(path).graph.initializer}
        for path in [run_dir / "averaged.onnx", run_dir / "final.onnx", *averaged]
    ]
    for name, values in weights[0].items():
        mean = np.mean([w[name] for w in weights[1:]], axis=0)
        np.testing.assert_allclose(values, mean, rtol=1e-5, atol=1e-6)
    load_policy(run_dir / "averaged.onnx")

    fps = scalar_steps(run_dir, "time/fps")
    assert fps and all(0 < step <= total_steps for steps in fps for step in steps)
    assert scalar_steps(run_dir, "eval/win_rate_random")
    assert scalar_steps(run_dir, "eval/regret_vs_perfect_first_move")
    assert scalar_steps(run_dir, "eval/match_regret_vs_perfect")
    assert scalar_steps(run_dir, "eval/elo") == scalar_steps(run_dir, "eval/win_rate_random")
    assert scalar_steps(run_dir, "pool/size")


# --- a whole (tiny) training ------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """A finished training with the smallest budget (a few seconds), run in this process as its
    command line would (train.py in a new interpreter: the signal tests, and the README's
    command in CI)."""
    runs = tmp_path_factory.mktemp("runs")
    args = [*TINY, "--total-steps", str(TINY_STEPS), "--runs-dir", runs, "--run-name", "tiny"]
    done = run(TRAIN, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return runs / "tiny", done


def test_tiny_training_leaves_a_complete_run_folder(
    tiny_run: tuple[Path, subprocess.CompletedProcess],
) -> None:
    run_dir, done = tiny_run
    assert f"training in {run_dir} for {TINY_STEPS:,} steps" in done.stdout
    assert (
        f"policy: {run_dir / 'averaged.onnx'} (the last weights averaged with the 1 snapshot of "
        "the last 50% of the steps; card: "
    ) in done.stdout
    assert f"--model {run_dir / 'averaged.onnx'} --opponent best-response" in done.stdout
    assert f"training stopped: {TINY_STEPS:,} steps done (--total-steps)" in done.stdout
    judged = [
        line.split()
        for line in done.stdout.splitlines()
        if line.startswith(("final.", "best.", "averaged."))
    ]
    assert [row[0] for row in judged] == ["final.onnx", "best.onnx", "averaged.onnx"]
    for line in done.stdout.splitlines():
        if line.startswith(("final.", "best.", "averaged.")):  # won: random, margin, perfect
            assert [m for _, m in re.findall(r"(\d+)/(\d+) \(", line)] == ["4", "4", "4"], line
    rows = eval_rows(run_dir)
    progress = [line for line in done.stdout.splitlines() if line.startswith("step ")]
    assert len(progress) == len(rows)  # the progress line of each periodic evaluation
    for line, row in zip(progress, rows, strict=True):
        assert f"regret vs perfect {row['regret_perfect']:.3f}" in line
        assert f"match regret {row['match_regret_perfect']:.5f}" in line
    assert "Traceback" not in done.stderr
    check_finished_run(run_dir, TINY_STEPS, final_eval_matches=4)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["hidden"] == [32, 32]
    assert config["preset"] == "smoke" and config["n_envs"] == 2


def test_the_card_command_reproduces_the_card_figures(
    tiny_run: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    run_dir, _ = tiny_run
    card = json.loads((run_dir / "final.json").read_text())
    figures = card["evaluation"]["random"]
    command = figures["command"].split()
    assert command[:2] == ["python", "training/evaluate.py"]
    done = run(EVALUATE, *command[2:], "--json", tmp_path / "again.json", "--no-progress")
    assert done.returncode == 0, done.stderr
    again = json.loads((tmp_path / "again.json").read_text())
    for key in ("matches", "wins", "rounds", "decisions", "mean_round_margin", "mean_regret"):
        assert again[key] == figures[key], key


def test_a_time_budget_ends_the_run_before_its_steps(tmp_path: Path) -> None:
    """--minutes stops training once that much training time has passed, and the run ends
    normally (final evaluation, export) short of total_steps."""
    args = [*TINY, "--total-steps", "10000000", "--minutes", "0.02", "--eval-every", "100000"]
    args += ["--snapshot-every", "1000"]  # at most 10,000 snapshots in the steps
    args.remove("--no-progress")  # the bar follows the budget that binds: here the minutes
    done = run(TRAIN, *args, "--runs-dir", tmp_path, "--run-name", "timed")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "for 10,000,000 steps or 0.02 minutes" in done.stdout
    assert "training stopped: the time budget of 0.02 minutes is spent (--minutes)" in done.stdout
    bar = done.stderr.replace("\r", "\n").splitlines()
    assert any(line.startswith("100%|") and "/10,000,000 steps" in line for line in bar)
    assert any("/0.02 min" in line for line in bar)
    latest = json.loads((tmp_path / "timed" / "checkpoints" / "latest.json").read_text())
    assert 0 < latest["steps"] < 10_000_000
    assert latest["progress"]["train_seconds"] >= 1.2
    assert (tmp_path / "timed" / "final.onnx").is_file()


# --- interrupting and resuming ----------------------------------------------------------------


def interrupt_training(
    run_dir: Path, *extra: str, signum: int = signal.SIGINT, whole_group: bool = False
) -> int:
    """Start a tiny training into ``run_dir``, send ``signum`` once its first checkpoint is
    written (to the process, or to its whole process group as a terminal's Ctrl-C does), check
    that it stopped cleanly and return the step it stopped at."""
    args = [
        *TINY,
        "--total-steps", "2048",
        "--hidden", "16", "16",
        "--snapshot-every", "256",
        "--eval-every", "256",
        "--checkpoint-every", "256",
        "--runs-dir", run_dir.parent,
        "--run-name", run_dir.name,
        *extra,
    ]  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, str(TRAIN), *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        start_new_session=True,  # its own process group, as a command started in a terminal
    )
    try:
        deadline = time.monotonic() + 300
        while not (run_dir / "checkpoints" / "latest.pt").exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no checkpoint after 300 s"
            time.sleep(0.05)
        time.sleep(0.5)
        if whole_group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 130, err
    assert "Traceback" not in err, err
    assert "stopping once the work under way is saved" in err
    stopped = re.search(r"interrupted at step ([\d,]+); checkpoint saved", out)
    assert stopped, out
    steps = int(stopped[1].replace(",", ""))
    assert 0 < steps < 2048
    assert f"python training/train.py --resume {run_dir}" in out
    assert checkpoint_steps(run_dir / "checkpoints" / "latest.pt") == steps
    latest = json.loads((run_dir / "checkpoints" / "latest.json").read_text())
    assert latest["steps"] == steps
    assert not (run_dir / "final.onnx").exists()
    assert all(row["steps"] <= steps for row in eval_rows(run_dir))
    return steps


@pytest.mark.slow
def test_an_interrupted_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    total = 2048
    run_dir = tmp_path / "runs" / "stop"
    steps = interrupt_training(run_dir)
    latest = json.loads((run_dir / "checkpoints" / "latest.json").read_text())
    rows_before = eval_rows(run_dir)

    done = run(TRAIN, "--resume", run_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming {run_dir} at step {steps:,} of {total:,}" in done.stdout

    finished = json.loads((run_dir / "checkpoints" / "latest.json").read_text())
    assert finished["steps"] == total
    assert checkpoint_steps(run_dir / "checkpoints" / "latest.pt") == finished["steps"]
    assert finished["progress"]["train_seconds"] > latest["progress"]["train_seconds"]
    card = json.loads((run_dir / "final.json").read_text())
    assert card["training"]["steps"] == finished["steps"]

    rows = eval_rows(run_dir)
    assert rows[: len(rows_before)] == rows_before
    resumed = [row["steps"] for row in rows[len(rows_before) :]]
    assert resumed and min(resumed) > steps  # continued, not restarted from 0
    # nothing lost, nothing twice: one evaluation in every 256-step interval, then the final one
    assert [row["steps"] // 256 for row in rows] == list(range(total // 256 + 1))

    per_file = scalar_steps(run_dir, "train/ent_coef")
    assert len(per_file) >= 2  # one event file per process
    assert max(per_file[0]) <= steps < min(per_file[-1])
    flat = [step for steps_ in per_file for step in steps_]
    assert flat == sorted(set(flat))
    assert [p.name for p in (run_dir / "tb").iterdir()] == ["ppo_0"]  # the same TensorBoard run


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_stops_a_run_with_worker_processes(tmp_path: Path) -> None:
    """The terminal sends SIGINT to every process of the command: the env workers of
    ``--vec-env subproc`` must leave the stopping to the main process, not die mid-step."""
    run_dir = tmp_path / "runs" / "group"
    steps = interrupt_training(
        run_dir,
        "--vec-env",
        "subproc",
        "--random-start",
        "0",
        "--random-score",
        "0",
        "--no-bootstrap-rounds",
        "--opponents.prioritized",
        "0",
        whole_group=True,
    )
    done = run(TRAIN, "--resume", run_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming {run_dir} at step {steps:,}" in done.stdout


@pytest.mark.slow
def test_kill_stops_a_run_like_ctrl_c(tmp_path: Path) -> None:
    interrupt_training(tmp_path / "runs" / "term", signum=signal.SIGTERM)


def test_the_first_stop_signal_asks_and_the_second_one_stops_at_once(
    training_script: Callable[[str], ModuleType],
) -> None:
    train = training_script("callbacks")
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with train.StopRequest() as stop:
        assert not stop.requested
        signal.raise_signal(signal.SIGTERM)
        assert stop.requested  # asked, nothing raised: the run stops at its next step
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


@pytest.mark.parametrize(
    ("flags", "rates", "weights"),
    [  # set at each rollout's start: progress 0, 1/4, 2/4, 3/4 of the run
        (  # the default rate: down to 2e-4
            ["--margin-weight", "2"],
            [1e-3, 0.8e-3, 0.6e-3, 0.4e-3],
            [2.0, 1.75, 1.5, 1.25],
        ),
        pytest.param(
            ["--learning-rate-end", "0", "--margin-weight", "4", "--margin-weight-end", "0"],
            [1e-3, 0.75e-3, 0.5e-3, 0.25e-3],
            [4.0, 3.0, 2.0, 1.0],
            marks=pytest.mark.slow,  # one more training
        ),
        pytest.param(  # a constant rate
            ["--learning-rate-end", "None", "--margin-weight-end", "0"],
            [1e-3] * 4,
            [1.0, 0.75, 0.5, 0.25],
            marks=pytest.mark.slow,  # one more training
        ),
    ],
)
def test_the_learning_rate_and_the_margins_weight_follow_their_schedules(
    flags: list[str], rates: list[float], weights: list[float], tmp_path: Path
) -> None:
    """The learning rate falls linearly over the run to --learning-rate-end (2e-4 by default),
    like the entropy; with None it stays --learning-rate (SB3 logs the rate it used for each
    update). With --reward match-and-margins the rounds' margins weigh --margin-weight at the
    start and --margin-weight-end at the end, linearly between; the envs are told before each
    rollout."""
    args = [*TINY, "--total-steps", "512", "--learning-rate", "1e-3", "--runs-dir", tmp_path]
    done = run(TRAIN, *args, "--reward", "match-and-margins", *flags, "--run-name", "s")
    assert done.returncode == 0, done.stderr[-3000:]
    [events] = scalar_events(tmp_path / "s", "train/learning_rate")
    assert [event.value for event in events] == pytest.approx(rates, rel=1e-5)
    [events] = scalar_events(tmp_path / "s", "train/margin_weight")
    assert [event.value for event in events] == pytest.approx(weights, rel=1e-5)


def test_a_preset_fills_only_the_settings_left_unset(
    training_script: Callable[[str], ModuleType],
) -> None:
    """A preset sets the budgets; a flag given on the command line wins over the preset,
    whichever side of --preset it is on. Every preset trains by pure self-play."""
    train = training_script("config")

    def parsed(*args: str) -> Any:
        return train.resolve(train.parse_config(list(args)))

    quick, full, smoke = parsed("--preset", "quick"), parsed(), parsed("--preset", "smoke")
    assert (quick.minutes, quick.eval_every, quick.snapshot_every) == (4.5, 500_000, 250_000)
    assert (full.minutes, full.eval_every, full.snapshot_every) == (14.5, 1_000_000, 500_000)
    assert (smoke.minutes, smoke.total_steps) == (0, 4_096)
    for config in (quick, full, smoke):
        assert config.opponents == SELF_PLAY
        assert (config.opponents.perfect, config.opponents.snapshots) == (0, 1)
    for args in (["--preset", "quick", "--minutes", "2"], ["--minutes", "2", "--preset", "quick"]):
        mine = parsed(*args)
        assert (mine.minutes, mine.total_steps) == (2, quick.total_steps)
    mine = parsed("--preset", "quick", "--opponents.perfect", "0.5")
    assert mine.opponents == dataclasses.replace(SELF_PLAY, perfect=0.5)


def test_the_presets_train_the_match_on_the_wider_network() -> None:
    """The full preset's match training has three hidden layers of 256 and the quick preset's
    two (the results log has the runs); the smoke preset and the round keep 128 128, the
    round agent's network; a --hidden given wins over all of them."""

    def hidden(*args: str) -> tuple[int, ...]:
        return resolve(parse_config(list(args))).hidden

    assert hidden() == hidden("--preset", "full") == (256, 256, 256)
    assert hidden("--preset", "quick") == (256, 256)
    assert hidden("--preset", "smoke") == (128, 128)
    assert hidden("--objective", "round") == (128, 128)
    assert hidden("--hidden", "64", "--preset", "full") == (64,)
    assert hidden("--objective", "round", "--hidden", "32", "32") == (32, 32)
    with pytest.raises(ValueError, match="--hidden needs 1 to 16 layer sizes, got 0"):
        hidden("--objective", "round", "--hidden")  # given empty is not left unset


def test_bootstrapped_rounds_are_valued_by_the_scaled_table_unless_told() -> None:
    """Where rounds are bootstrapped, the scaled table values their ends by default (the
    results log: three seeds each way); without bootstrapped rounds (the round, or
    --no-bootstrap-rounds) nothing does, so the unused setting reads critic; a value given
    wins, and one that has no rounds to value is refused."""

    def values(*args: str) -> str:
        return resolve(parse_config(list(args))).bootstrap_values

    assert values() == values("--preset", "quick") == values("--preset", "smoke") == "scaled-table"
    assert values("--objective", "round") == values("--no-bootstrap-rounds") == "critic"
    assert values("--bootstrap-values", "table") == "table"
    assert values("--bootstrap-values", "critic") == "critic"
    with pytest.raises(ValueError, match="--bootstrap-values scaled-table values the ends of"):
        values("--no-bootstrap-rounds", "--bootstrap-values", "scaled-table")


def test_a_command_line_resolves_once_into_a_frozen_concrete_run_config() -> None:
    """The command line leaves the preset's fields unset and ``--workers`` maybe auto; what
    training takes is resolved once: every budget a number, the workers counted, frozen."""
    given = parse_config(["--preset", "smoke", "--workers", "auto"])
    assert given.total_steps is None and given.workers == "auto"
    run = resolve(given)
    assert type(run) is RunConfig and type(given) is TrainConfig
    assert (run.total_steps, run.minutes, run.eval_matches) == (4096, 0, 4)
    assert isinstance(run.workers, int) and run.workers >= 1 and run.resume is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.seed = 1  # type: ignore[misc]
    assert resolve(parse_config(["--preset", "smoke", "--workers", "2"])).workers == 2
    with pytest.raises(ValueError, match="--workers must be auto or a whole number >= 1, got 0"):
        resolve(parse_config(["--workers", "0"]))


def test_each_objective_resolves_its_own_episodes() -> None:
    """The match (the default) trains on match episodes whose rounds are bootstrapped, half of
    them from random scores, on its own encoding and reward; the round turns the match's
    settings off, even where given, since a round episode has neither a score to start at nor
    a next round; --no-bootstrap-rounds pays a match at its end."""
    match = resolve(parse_config([]))
    assert (match.objective, match.encoding, match.reward) == (
        "match",
        "match-afterstates",
        "match",
    )
    assert match.bootstrap_rounds is True and match.random_score == 0.5
    assert resolve(parse_config(["--no-bootstrap-rounds"])).bootstrap_rounds is False
    for argv in (["--objective", "round"], ["--objective", "round", "--random-score", "0.7"]):
        run = resolve(parse_config(argv))
        assert (run.encoding, run.reward) == ("afterstates", "margin")
        assert run.bootstrap_rounds is False and run.random_score == 0.0


def test_bfloat16_left_unset_follows_the_cpu(
    training_script: Callable[[str], ModuleType],
) -> None:
    from buttonup_env.learn.nets import fast_bfloat16

    train = training_script("config")
    assert train.resolve(train.parse_config([])).bfloat16 is fast_bfloat16()
    assert train.resolve(train.parse_config(["--bfloat16"])).bfloat16 is True
    assert train.resolve(train.parse_config(["--no-bfloat16"])).bfloat16 is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset"], "Missing value for argument '--preset'"),
        (["--preset", "fast"], "invalid choice 'fast' for argument '--preset'"),
        (["--preset=fast", "--opponents.perfect", "0.5"], "invalid choice 'fast'"),
    ],
)
def test_a_bad_preset_gets_tyros_error_not_a_usage_of_one_flag(
    args: list[str],
    message: str,
    training_script: Callable[[str], ModuleType],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A missing or unknown preset gets tyro's error, which names it."""
    train = training_script("config")
    with pytest.raises(SystemExit) as stopped:
        train.parse_config(args)
    assert stopped.value.code == 2
    error = " ".join(line.strip("│ ") for line in capsys.readouterr().err.splitlines())
    assert message in error and "usage: train.py [--preset PRESET]" not in error


@pytest.mark.parametrize("vec_env", ["batched", "dummy"])
def test_the_reward_is_the_round_margin_or_its_sign(
    vec_env: str, tmp_path: Path, training_script: Callable[[str], ModuleType]
) -> None:
    """--reward sign pays +1, 0 or -1 at a round's end where --reward margin pays the margin
    / 18: the same seed and the same actions play the same rounds, only the payment differs."""
    from sb3_contrib.common.maskable.utils import get_action_masks

    train, factories = training_script("config"), training_script("factories")
    paid = {}
    for reward in ("margin", "sign"):
        config = train.TrainConfig(  # bots only: no snapshot needed
            objective="round",
            encoding="afterstates",
            n_envs=4,
            vec_env=vec_env,
            random_start=0.5 if vec_env == "batched" else 0.0,
            random_score=0.0,
            bootstrap_rounds=False,
            opponents=SOLVER_MIX,
        )
        venv = factories.make_vec_env(dataclasses.replace(config, reward=reward), tmp_path, seed=3)
        rng = np.random.default_rng(0)
        venv.reset()
        rewards, dones = [], []
        for _ in range(200):
            masks = get_action_masks(venv)
            actions = np.array([rng.choice(np.flatnonzero(mask)) for mask in masks])
            _, step_rewards, step_dones, _ = venv.step(actions)
            rewards.append(step_rewards)
            dones.append(step_dones)
        venv.close()
        paid[reward] = np.array(rewards), np.array(dones)
    (margin, ends), (sign, sign_ends) = paid["margin"], paid["sign"]
    assert np.array_equal(ends, sign_ends) and ends.sum() > 50
    assert np.all(margin[~ends] == 0) and np.all(sign[~ends] == 0)
    assert np.array_equal(sign, np.sign(margin))
    points = margin[ends] * 18  # whole round points, not only wins and losses
    assert np.allclose(points, np.round(points)) and np.abs(points).max() > 1


@pytest.mark.slow
def test_a_run_does_not_train_past_total_steps(tmp_path: Path) -> None:
    """200 steps is not a whole number of rollouts (128 each): the run should either stop at
    200 or refuse the budget up front, not train 256 steps while its config says 200."""
    args = [*TINY, "--total-steps", "200", "--runs-dir", tmp_path, "--run-name", "odd"]
    done = run(TRAIN, *args)
    if done.returncode != 0:
        assert "total-steps" in one_error_line(done)
        return
    latest = json.loads((tmp_path / "odd" / "checkpoints" / "latest.json").read_text())
    assert latest["steps"] == 200


# --- same seed, same run -------------------------------------------------------------------


def seeded_run(runs: Path, name: str, vec_env: str, seed: int) -> Path:
    """The tiny run (two rollouts, a snapshot, an evaluation and a checkpoint after each) with
    this env and seed."""
    args = [*TINY, "--total-steps", str(TINY_STEPS), "--vec-env", vec_env, "--seed", str(seed)]
    if vec_env != "batched":  # what only the batched env does, turned off
        args += ["--random-start", "0", "--opponents.prioritized", "0"]
        args += ["--random-score", "0", "--no-bootstrap-rounds"]
    done = run(TRAIN, *args, "--runs-dir", runs, "--run-name", name)
    assert done.returncode == 0, done.stderr[-3000:]
    return runs / name


def run_outputs(run_dir: Path) -> dict[str, object]:
    """What a run leaves that must not depend on timing: every snapshot's and exported policy's
    bytes, the weights and optimiser state in its checkpoints, its evaluations (minutes aside)."""
    outputs: dict[str, object] = {
        path.name: path.read_bytes()
        for path in [*sorted((run_dir / "snapshots").glob("*.onnx")), run_dir / "final.onnx"]
    }
    outputs["best.onnx"] = (run_dir / "best.onnx").read_bytes()
    for name in ("latest", "best"):  # the weights and the optimiser's state
        outputs[f"{name}.pt"] = (run_dir / "checkpoints" / f"{name}.pt").read_bytes()
    outputs["eval.jsonl"] = [
        {k: v for k, v in row.items() if k != "minutes"} for row in eval_rows(run_dir)
    ]
    return outputs


@pytest.mark.parametrize(
    "vec_env",
    [
        "batched",
        pytest.param("dummy", marks=pytest.mark.slow),
        pytest.param("subproc", marks=pytest.mark.slow),
    ],
)
def test_same_seed_same_run_other_seed_other_run(
    vec_env: str, tmp_path: Path, tiny_run: tuple[Path, subprocess.CompletedProcess]
) -> None:
    # the module's tiny run is the batched env's first run of seed 0
    first_run = tiny_run[0] if vec_env == "batched" else seeded_run(tmp_path, "a", vec_env, 0)
    first = run_outputs(first_run)
    again = run_outputs(seeded_run(tmp_path, "b", vec_env, seed=0))
    assert len([k for k in first if k.startswith("step_")]) == 2  # steps 0 and 128
    assert first.keys() == again.keys()
    for key in first:
        assert first[key] == again[key], f"{key} differs between two runs with one seed"
    other = run_outputs(seeded_run(tmp_path, "c", vec_env, seed=5))
    for key in ("step_000000000.onnx", "final.onnx", "latest.pt", "eval.jsonl"):
        assert other[key] != first[key], f"{key} is the same with another seed"


@pytest.mark.slow  # three trainings; the finished run's resume below stays
def test_a_resumed_run_ends_as_the_uninterrupted_one(tmp_path: Path) -> None:
    """With the batched env the checkpoint holds the env's state and the generators: a run
    interrupted and resumed trains exactly as one that never stopped."""
    whole = tmp_path / "runs" / "whole"
    args = [*TINY, "--total-steps", "2048", "--hidden", "16", "16", "--snapshot-every", "256",
            "--eval-every", "256", "--checkpoint-every", "256"]  # fmt: skip
    done = run(TRAIN, *args, "--runs-dir", whole.parent, "--run-name", whole.name)
    assert done.returncode == 0, done.stderr[-3000:]

    stopped = tmp_path / "runs" / "stopped"
    steps = interrupt_training(stopped)
    assert steps % 128 == 0, "stopped within a rollout: back to its start"
    moved = tmp_path / "runs" / "moved"  # a run folder resumes wherever it is
    stopped.rename(moved)
    done = run(TRAIN, "--resume", moved)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming {moved} at step {steps:,} of 2,048" in done.stdout
    expected, resumed = run_outputs(whole), run_outputs(moved)
    assert resumed.keys() == expected.keys()
    for key in expected:
        assert resumed[key] == expected[key], f"{key} differs after the resume at {steps}"


def test_a_finished_run_resumes_to_its_export(tmp_path: Path) -> None:
    """A run whose budget ends within a rollout (192 steps: a rollout and a half) keeps no
    resume point; --resume of it trains nothing and exports it again."""
    args = [*TINY, "--total-steps", "192", "--runs-dir", tmp_path, "--run-name", "done"]
    done = run(TRAIN, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    latest = json.loads((tmp_path / "done" / "checkpoints" / "latest.json").read_text())
    assert latest["steps"] == 192 and latest["progress"]["resume"] is None
    (tmp_path / "done" / "final.onnx").unlink()
    done = run(TRAIN, "--resume", tmp_path / "done")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming" in done.stdout and "at step 192 of 192" in done.stdout
    assert "training stopped: 192 steps done" in done.stdout
    assert load_policy(tmp_path / "done" / "final.onnx")


@pytest.mark.slow
def test_a_resumed_run_without_the_env_state_starts_new_episodes(tmp_path: Path) -> None:
    """dummy and subproc do not save their envs: a resume draws new episodes from the seed
    plus the steps done, so one checkpoint resumed twice gives one run."""
    stopped = tmp_path / "runs" / "stopped"
    steps = interrupt_training(
        stopped,
        *("--vec-env", "dummy", "--random-start", "0", "--opponents.prioritized", "0"),
        *("--random-score", "0", "--no-bootstrap-rounds"),
    )
    latest = json.loads((stopped / "checkpoints" / "latest.json").read_text())
    assert latest["progress"]["resume"] is None
    copy = tmp_path / "runs" / "copy"
    shutil.copytree(stopped, copy)
    for run_dir in (stopped, copy):
        done = run(TRAIN, "--resume", run_dir)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"resuming {run_dir} at step {steps:,}" in done.stdout
    assert run_outputs(stopped) == run_outputs(copy)


@pytest.mark.slow
def test_the_smoke_preset_end_to_end(tmp_path: Path) -> None:
    """The smoke preset in one process: its 4,096 steps are one whole rollout (256 games x
    16 steps), then an update. With two workers they end half-way through the first rollout
    (4,096 steps each), before any update: test_workers.py trains workers on larger budgets."""
    args = ["--preset", "smoke", "--workers", "1", "--runs-dir", tmp_path, "--run-name", "s1"]
    done = run(TRAIN, *args, "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:]
    check_finished_run(tmp_path / "s1", total_steps=4096, final_eval_matches=10)


# --- bad arguments ----------------------------------------------------------------------------


def taken_name(runs: Path) -> list[str | Path]:
    (runs / "taken").mkdir(parents=True)
    return [*TINY, "--runs-dir", runs, "--run-name", "taken"]


def broken_run(runs: Path, config: str) -> list[str | Path]:
    """A run folder (beside ``runs``) with a checkpoint but the config.json ``config``."""
    folder = runs.parent / "broken"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "config.json").write_text(config)
    (folder / "checkpoints" / "latest.pt").write_bytes(b"")
    (folder / "checkpoints" / "latest.json").write_text("{}")
    return ["--resume", folder]


BAD_TRAIN_ARGS = {
    "no steps": (lambda runs: [*TINY, "--total-steps", "0", "--runs-dir", runs], "--total-steps"),
    "no envs": (lambda runs: [*TINY, "--n-envs", "0", "--runs-dir", runs], "--n-envs"),
    "zero-width layer": (
        lambda runs: [*TINY, "--hidden", "16", "0", "--runs-dir", runs],
        "--hidden",
    ),
    "gamma above 1": (lambda runs: [*TINY, "--gamma", "1.5", "--runs-dir", runs], "--gamma"),
    "average more than the run": (
        lambda runs: [*TINY, "--average-last", "1.5", "--runs-dir", runs],
        "--average-last",
    ),
    "negative entropy": (
        lambda runs: [*TINY, "--ent-coef-end", "-0.1", "--runs-dir", runs],
        "--ent-coef-end",
    ),
    "batch larger than a rollout": (
        lambda runs: [*TINY, "--batch-size", "100000", "--runs-dir", runs],
        "--batch-size",
    ),
    "infinite learning rate": (
        lambda runs: [*TINY, "--learning-rate", "inf", "--runs-dir", runs],
        "--learning-rate must be > 0 and finite",
    ),
    "negative final learning rate": (
        lambda runs: [*TINY, "--learning-rate-end", "-1e-4", "--runs-dir", runs],
        "--learning-rate-end must be >= 0 and finite",
    ),
    "negative minutes": (
        lambda runs: [*TINY, "--minutes", "-1", "--runs-dir", runs],
        "--minutes is -1.0; it must be a finite number from 0 to 10080",
    ),
    "random start above 1": (
        lambda runs: [*TINY, "--random-start", "1.5", "--runs-dir", runs],
        "--random-start must be a probability",
    ),
    "random start without the batched env": (
        lambda runs: [
            *TINY,
            *("--vec-env", "dummy", "--random-start", "0.5", "--opponents.prioritized", "0"),
            *("--random-score", "0", "--no-bootstrap-rounds", "--runs-dir", runs),
        ],
        "--random-start needs --vec-env batched",
    ),
    "the defaults without the batched env": (
        lambda runs: [*TINY, "--vec-env", "subproc", "--runs-dir", runs],
        "--random-start and --random-score and --opponents.prioritized and --bootstrap-rounds "
        "need --vec-env batched (got --vec-env subproc, whose single envs neither start at "
        "random positions or scores, weigh the rounds' margins, end episodes at rounds, nor "
        "report results for prioritized self-play); add --random-start 0 --random-score 0 "
        "--opponents.prioritized 0 --no-bootstrap-rounds",
    ),
    "prioritized self-play without the batched env": (
        lambda runs: [
            *TINY,
            "--vec-env",
            "dummy",
            "--random-start",
            "0",
            "--opponents.prioritized",
            "1",
            "--random-score",
            "0",
            "--no-bootstrap-rounds",
            "--runs-dir",
            runs,
        ],
        "--opponents.prioritized needs --vec-env batched",
    ),
    "a reward of the other objective": (
        lambda runs: [*TINY, "--reward", "margin", "--runs-dir", runs],
        "--reward margin is not a reward of --objective match; use match or "
        "match-and-margins (or auto)",
    ),
    "the margins' weight of a reward without margins": (
        lambda runs: [*TINY, "--margin-weight-end", "0", "--runs-dir", runs],
        "--margin-weight-end 0.0 weighs the rounds' margins of --reward match-and-margins, not "
        "of --reward match",
    ),
    "a margins' weight out of range": (
        lambda runs: [
            *TINY,
            "--reward",
            "match-and-margins",
            "--margin-weight",
            "19",
            "--runs-dir",
            runs,
        ],
        "--margin-weight must be in [0, 18.0], got 19.0",
    ),
    "a table for rounds that are not bootstrapped": (
        lambda runs: [
            *TINY,
            "--bootstrap-values",
            "table",
            "--no-bootstrap-rounds",
            "--runs-dir",
            runs,
        ],
        "--bootstrap-values table values the ends of bootstrapped rounds, which --objective "
        "match does not have here; add --bootstrap-rounds or --bootstrap-values critic",
    ),
    "a table for the round's episodes": (
        lambda runs: [
            *TINY,
            "--objective",
            "round",
            "--bootstrap-values",
            "table",
            "--runs-dir",
            runs,
        ],
        "which --objective round does not have here; add --objective match or "
        "--bootstrap-values critic",
    ),
    "an unknown ladder player": (
        lambda runs: [*TINY, "--ladder", "random", "nosuchbot", "--runs-dir", runs],
        "'nosuchbot' is not a player",
    ),
    "fewer ladder matches than players": (
        lambda runs: [*TINY, "--ladder-matches", "3", "--runs-dir", runs],
        "--ladder-matches must be 0 (no rating) or at least one match per ladder player (6)",
    ),
    "resume nothing": (
        lambda runs: ["--resume", "/nonexistent/run"],
        "/nonexistent/run is not a run folder (it has no config.json)",
    ),
    "resume a folder of another version": (
        lambda runs: broken_run(runs, "{}"),
        "was written by another version of buttonup-env",
    ),
    "resume a config that is not JSON": (lambda runs: broken_run(runs, "not json"), "damaged"),
    "existing run name": (taken_name, "exists"),
}


@pytest.mark.parametrize("case", list(BAD_TRAIN_ARGS))
def test_train_refuses_bad_arguments_with_one_error_line(case: str, tmp_path: Path) -> None:
    make_args, fragment = BAD_TRAIN_ARGS[case]
    runs = tmp_path / "runs"
    done = run(TRAIN, *make_args(runs))
    assert done.returncode != 0
    assert fragment in one_error_line(done)
    assert done.stdout == ""
    if runs.exists():  # nothing was made or changed
        for folder in runs.iterdir():
            assert [p.name for p in folder.iterdir()] in ([], ["config.json"])


def test_train_names_a_bad_opponent_mix_value(tmp_path: Path) -> None:
    """The mix is checked as tyro parses it: tyro's error box, with our sentence, no traceback."""
    done = run(TRAIN, *TINY, "--opponents.prioritized", "-1", "--runs-dir", tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "prioritized must be >= 0 and finite (0: uniform), got -1.0" in " ".join(
        line.strip("│ ") for line in done.stderr.splitlines()
    )
    assert not any(tmp_path.iterdir())


def eval_row(steps: int, regret: float, match_regret: float | None) -> Any:
    """A periodic evaluation with these regrets against the perfect bot."""
    from training.runfolder import EvalRow

    return EvalRow(
        steps=steps, minutes=0.0, win_rate_random=1.0, regret_random=0.5, win_rate_greedy=0.5,
        regret_greedy=0.5, win_rate_perfect=0.25, regret_perfect=regret,
        regret_by_move_perfect=(regret,) * 8, match_regret_perfect=match_regret,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("objective", "best_steps"),
    [("match", 200), ("round", 100)],
)
def test_the_best_checkpoint_is_chosen_by_the_objectives_figure(
    objective: str, best_steps: int, training_script: Callable[[str], ModuleType]
) -> None:
    """A match run keeps the evaluation of the lowest match regret against the perfect bot, a
    round run the lowest round regret; a tie keeps the earlier one."""
    new_best = training_script("callbacks").new_best
    from training.checkpoints import Progress

    progress = Progress()
    rows = [
        eval_row(0, 0.30, 0.0040),
        eval_row(100, 0.05, 0.0030),  # the round's best
        eval_row(200, 0.20, 0.0010),  # the match's best
        eval_row(300, 0.05, 0.0010),  # ties with both: not better
    ]
    saved = [row.steps for row in rows if new_best(progress, row, objective)]
    assert saved[0] == 0 and saved[-1] == best_steps
    assert progress.best_steps == best_steps
    chosen = next(row for row in rows if row.steps == best_steps)
    assert progress.best_regret == chosen.best_figure(objective)
    assert saved == ([0, 100, 200] if objective == "match" else [0, 100])


def test_a_match_run_prefers_any_evaluation_with_a_match_regret(
    training_script: Callable[[str], ModuleType],
) -> None:
    """An evaluation without the match regret (a row of before it was measured) counts as
    infinitely bad for a match run: it is kept only while nothing better is known."""
    new_best = training_script("callbacks").new_best
    from training.checkpoints import Progress

    progress = Progress()
    unmeasured, measured = eval_row(0, 0.01, None), eval_row(100, 0.5, 0.02)
    assert unmeasured.best_figure("match") == float("inf")
    assert unmeasured.best_figure("round") == 0.01
    assert new_best(progress, unmeasured, "match") and progress.best_regret is None
    assert not new_best(progress, eval_row(50, 0.001, None), "match")
    assert new_best(progress, measured, "match") and progress.best_steps == 100
    assert progress.best_regret == 0.02


def test_an_evaluation_row_reports_both_levels(
    training_script: Callable[[str], ModuleType],
) -> None:
    """eval.jsonl's row: the match regrets beside the round's (left out of an old row, which
    still reads), in its figures and its progress line."""
    runfolder = training_script("runfolder")
    row = dataclasses.replace(
        eval_row(2048, 0.125, 0.00321), match_regret_random=0.01, match_regret_greedy=0.02
    )
    assert row.match_regret("perfect") == 0.00321 and row.match_regret("random") == 0.01
    assert row.figures()["match_regret_perfect"] == 0.00321
    assert row.message().startswith(
        "step      2,048  regret vs perfect 0.125  match regret 0.00321  win rate: random 100%"
    )
    old = to_json(eval_row(2048, 0.125, None))
    assert "match_regret_perfect" not in old  # a row of before: no match regret
    (read,) = runfolder.eval_rows((json.dumps(old) + "\n").encode(), "eval.jsonl")
    assert read.match_regret_perfect is None and "match regret" not in read.message()
    (again,) = runfolder.eval_rows((json.dumps(to_json(row)) + "\n").encode(), "eval.jsonl")
    assert again == row


def test_the_learning_curve_draws_the_match_regret_when_rows_have_it(
    training_script: Callable[[str], ModuleType],
) -> None:
    """A third panel, the match regret against the perfect bot, for rows that measured it (the
    picture is 5 inches of 100 pixels a panel)."""
    curve = training_script("plots").learning_curve

    def width(png: bytes) -> int:
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        return int.from_bytes(png[16:20], "big")  # the IHDR chunk's width

    both = [eval_row(0, 1.0, 0.05), eval_row(100, 0.5, 0.0)]  # a zero: a symlog axis
    old = [eval_row(0, 1.0, None), eval_row(100, 0.5, None)]
    assert width(curve(both)) == 1500 and width(curve(old)) == 1000


# --- training/export.py -----------------------------------------------------------------------


def test_export_writes_a_policy_and_its_card(
    tiny_run: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    run_dir, _ = tiny_run
    out = tmp_path / "models" / "agent.onnx"
    out.parent.mkdir()
    done = run(
        EXPORT,
        run_dir,
        "--random-matches",
        10,
        "--greedy-matches",
        7,
        "--perfect-matches",
        5,
        "--margin-matches",
        6,
        "--out",
        out,
        "--no-best-response",
        "--audit-scores",
        "none",
    )
    assert done.returncode == 0, done.stderr
    assert f"wrote {out} and {out.with_suffix('.json')}" in done.stdout
    policy = load_policy(out)
    assert policy.metadata[META_ENCODING] == "match-afterstates"
    card = json.loads(out.with_suffix(".json").read_text())
    config = json.loads((run_dir / "config.json").read_text())
    handed_over = json.loads((run_dir / "averaged.json").read_text())["training"]
    assert card["model"] == "agent.onnx"
    check_card_command(card, config)
    assert card["code_version"] == config["code_version"]
    assert card["exported_with"].startswith("buttonup-env ")
    assert card["config"] == card_settings(config)
    # by default the policy training handed over: the last weights averaged, as it averaged
    assert card["training"]["checkpoint"] == "latest"
    assert card["training"]["steps"] == TINY_STEPS
    assert card["training"]["averaged_with"] == handed_over["averaged_with"]
    assert set(card["evaluation"]) == {"random", "greedy", "margin", "perfect"}
    assert card["evaluation"]["random"]["matches"] == 10
    assert card["evaluation"]["greedy"]["matches"] == 7
    assert card["evaluation"]["margin"]["matches"] == 6
    assert card["evaluation"]["perfect"]["matches"] == 5
    assert card["evaluation"]["perfect"]["wins"] <= 5
    for figures in card["evaluation"].values():
        assert str(out) in figures["command"]
        assert figures["mean_regret"] >= 0 and 0 <= figures["mean_match_regret"] <= 1
    # both levels: the match's targets that the matches judge, the round's figures reported
    judged = [row["target"] for row in card["targets"] if "target" in row]
    assert judged == [
        "matches won against the margin bot at least 0.53",
        "matches won against the random bot at least 1",
    ]
    reported = {row["figure"]: row["measured"] for row in card["reported"]}
    perfect = card["evaluation"]["perfect"]
    assert reported["match regret against the perfect bot (per decision)"] == round(
        perfect["mean_match_regret"], 6
    )
    assert reported["round regret against the perfect bot (round points per decision)"] == round(
        perfect["mean_regret"], 6
    )
    assert "exploitability" not in card and "audit" not in card  # not asked for


def test_export_takes_the_code_version_before_it_writes_the_model(
    tiny_run: tuple[Path, subprocess.CompletedProcess],
    tmp_path: Path,
    training_script: Callable[[str], ModuleType],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Writing a shipped model into the repository makes the tree dirty: the card must name the
    code that did the export, not the tree with its own new model in it."""
    export = training_script("export")
    out = tmp_path / "agent.onnx"
    cards = training_script("cards")  # where export_with_card takes it
    monkeypatch.setattr(cards, "code_version", lambda: "dirty" if out.exists() else "clean")
    matches = ["--random-matches", "0", "--greedy-matches", "0", "--perfect-matches", "0"]
    matches += ["--margin-matches", "0", "--audit-scores", "none"]
    export.main([str(tiny_run[0]), *matches, "--no-best-response", "--out", str(out)])
    assert json.loads(out.with_suffix(".json").read_text())["exported_with"] == "clean"


@pytest.mark.slow
def test_export_card_holds_the_exact_exploitability(
    tiny_run: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    """By default a card holds both exploitabilities, the match's and the round's, and the
    audit at 0-0, each judged by its target or reported, with the command that gives it."""
    out = tmp_path / "agent.onnx"
    args = ["--random-matches", 0, "--greedy-matches", 0, "--perfect-matches", 0]
    done = run(EXPORT, tiny_run[0], *args, "--margin-matches", 0, "--out", out)
    assert done.returncode == 0, done.stderr
    card = json.loads(out.with_suffix(".json").read_text())
    figures = card["exploitability"]
    policy = load_policy(out)
    expected = exploitability(policy)
    assert figures["exploitability"] == pytest.approx(expected.exploitability)
    assert figures["starts"] == 2 * len(LAYOUTS)
    assert "--opponent best-response" in figures["command"]
    match = card["match_exploitability"]  # minutes for a policy that sees the score: once
    wins = match["wins"]  # the best response's, by the player's colour and the first starter
    assert len(wins) == 4 and match["questions"] > 0  # a policy is asked, a bot is not
    assert match["exploitability"] == pytest.approx(np.mean(list(wins.values())) - 0.5)
    assert 0 <= match["exploitability"] <= 0.5
    assert "--opponent best-response" in match["command"]
    found = card["audit"]
    assert found["command"] == f"python training/evaluate.py --model {out} --audit"
    assert found["at_0_0"]["choices"] == found["total"]["choices"] == 774_168
    targets = {row["target"]: row for row in card["targets"] if "target" in row}
    assert targets["match exploitability at most 0.01"]["measured"] == round(
        match["exploitability"], 6
    )
    audit_target = "audit at 0-0: mean loss of winning probability per real choice at most 0.0001"
    assert targets[audit_target]["measured"] == round(found["at_0_0"]["mean_loss"], 6)
    reported = {row["figure"]: row["measured"] for row in card["reported"]}
    assert reported["round exploitability (round points per round)"] == round(
        expected.exploitability, 6
    )


def test_export_latest_next_to_the_run_by_default(
    tiny_run: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    run_dir = Path(shutil.copytree(tiny_run[0], tmp_path / "copy"))
    args = ["--which", "latest", "--random-matches", 0, "--greedy-matches", 0]
    args += ["--perfect-matches", 0, "--margin-matches", 0, "--audit-scores", "none"]
    args.append("--no-best-response")
    done = run(EXPORT, run_dir, *args)
    assert done.returncode == 0, done.stderr
    card = json.loads((run_dir / "latest.json").read_text())
    assert card["training"]["steps"] == TINY_STEPS
    assert card["evaluation"] == {}
    state = State.new_round(LAYOUTS[0], "R")
    assert load_policy(run_dir / "latest.onnx").act(state) == load_policy(
        run_dir / "final.onnx"
    ).act(state)  # the same weights as the final export


def test_export_averaged_averages_the_latest_weights_as_training_did_by_default(
    tiny_run: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    run_dir = Path(shutil.copytree(tiny_run[0], tmp_path / "copy"))
    args = ["--random-matches", 0, "--greedy-matches", 0, "--perfect-matches", 0]
    args += ["--margin-matches", 0, "--audit-scores", "none", "--no-best-response"]
    out = tmp_path / "again.onnx"
    done = run(EXPORT, run_dir, "--which", "averaged", "--out", out, *args)
    assert done.returncode == 0, done.stderr
    card = json.loads(out.with_suffix(".json").read_text())
    trained = json.loads((run_dir / "averaged.json").read_text())
    assert card["training"]["averaged_with"] == trained["training"]["averaged_with"]
    assert card["training"]["averaged_with"]  # the tiny run's second half has a snapshot
    again, before = (onnx.load(path).graph.initializer for path in (out, run_dir / "averaged.onnx"))
    for ours, theirs in zip(again, before, strict=True):
        assert np.array_equal(numpy_helper.to_array(ours), numpy_helper.to_array(theirs))

    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**config, "average_last": 0.0}))
    done = run(EXPORT, run_dir, "--which", "averaged", "--out", tmp_path / "none.onnx", *args)
    assert done.returncode == 2
    assert one_error_line(done) == (
        f"error: {run_dir} was trained with --average-last 0: it averages no snapshots; export "
        "--which latest or best"
    )
    assert not (tmp_path / "none.onnx").exists()
    # without averaging, training hands over the last weights: so does export by default
    done = run(EXPORT, run_dir, *args)
    assert done.returncode == 0, done.stderr
    card = json.loads((run_dir / "latest.json").read_text())
    assert card["training"]["checkpoint"] == "latest" and "averaged_with" not in card["training"]

    done = run(EXPORT, run_dir, "--which", "best", "--out", tmp_path / "best.onnx", *args)
    assert done.returncode == 0, done.stderr
    card = json.loads((tmp_path / "best.json").read_text())
    best = json.loads((run_dir / "checkpoints" / "best.json").read_text())
    assert card["training"]["checkpoint"] == "best"
    assert card["training"]["steps"] == best["progress"]["best_steps"]


@pytest.mark.parametrize(
    ("script", "args", "fragment"),
    [
        # evaluate.py's interpreter starts in a second; train's and export's import torch and
        # Stable-Baselines3 first (4 s), and their refusals are tested in this process too
        pytest.param(
            TRAIN,
            ["--resume", "/nonexistent/run"],
            "/nonexistent/run is not a run folder",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            EXPORT,
            ["/nonexistent/run"],
            "/nonexistent/run is not a run folder",
            marks=pytest.mark.slow,
        ),
        (EVALUATE, ["--model", "nosuchbot"], "'nosuchbot'"),
    ],
    ids=["train", "export", "evaluate"],
)
def test_a_refusal_in_a_new_interpreter_is_one_line_and_status_2(
    script: Path, args: list[str], fragment: str
) -> None:
    """What the in-process runs show holds for the command line itself: one ``error:`` line on
    standard error, nothing on standard output, exit status 2."""
    done = run_process(script, *args)
    assert (done.returncode, done.stdout) == (2, "")
    assert fragment in one_error_line(done)


def test_export_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    done = run(EXPORT, tmp_path / "nothing")
    assert done.returncode != 0
    assert "not a run folder" in one_error_line(done)
    (tmp_path / "young").mkdir()
    (tmp_path / "young" / "config.json").write_text("{}")
    done = run(EXPORT, tmp_path / "young")
    assert done.returncode != 0
    assert "was written by another version of buttonup-env" in one_error_line(done)


BOTS = ("random", "greedy", "perfect")

DAMAGE = {
    "config": ("config.json", "not json", "config.json is damaged"),
    "config not an object": ("config.json", "[1, 2]", "config.json: the file is [1, 2]; it must"),
    "state": ("checkpoints/best.json", "{", "best.json is damaged"),
    "periodic evaluations": ("eval.jsonl", '{"ste', "eval.jsonl line 1 is damaged"),
    "an evaluation's steps of text": (
        "eval.jsonl",
        json.dumps(
            {"steps": "many", "minutes": 0.5, "regret_by_move_perfect": [0.1] * 8}
            | {f"{figure}_{bot}": 0.5 for figure in ("win_rate", "regret") for bot in BOTS}
        ),
        "eval.jsonl line 1: steps is 'many'; it must be a whole number >= 0",
    ),
    "checkpoint": ("checkpoints/best.pt", "not a zip", "best.pt is not the file its best.json"),
}


def damaged_copy(run_dir: Path, where: Path, name: str) -> Path:
    """A copy of ``run_dir`` in ``where`` with the file ``DAMAGE[name]`` names overwritten."""
    copy = where / "damaged"
    shutil.copytree(run_dir, copy)
    relative, text, _ = DAMAGE[name]
    (copy / relative).write_text(text)
    return copy


@pytest.mark.parametrize("name", DAMAGE)
def test_export_refuses_a_damaged_run_in_one_line(
    name: str, tiny_run: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    copy = damaged_copy(tiny_run[0], tmp_path, name)
    out = tmp_path / "agent.onnx"
    args = ["--random-matches", 0, "--greedy-matches", 0, "--perfect-matches", 0]
    done = run(EXPORT, copy, "--which", "best", "--out", out, *args)  # DAMAGE's checkpoint
    assert done.returncode == 2
    assert DAMAGE[name][2] in one_error_line(done)
    assert not out.exists() and not out.with_suffix(".json").exists()


def test_resume_refuses_a_damaged_checkpoint_in_one_line(
    tiny_run: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    copy = damaged_copy(tiny_run[0], tmp_path, "checkpoint")
    weights = copy / "checkpoints" / "latest.pt"
    weights.write_bytes(weights.read_bytes()[:1000])  # cut short, its hash written to match
    state = json.loads(weights.with_suffix(".json").read_text())
    state["weights_sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    weights.with_suffix(".json").write_text(json.dumps(state))
    done = run(TRAIN, "--resume", copy)
    assert done.returncode == 2
    assert "latest.pt cannot be loaded as a checkpoint" in one_error_line(done)


def test_resume_refuses_damaged_saved_games_in_one_line(
    tiny_run: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    copy = tmp_path / "damaged"
    shutil.copytree(tiny_run[0], copy)
    state_file = copy / "checkpoints" / "latest.json"
    state = json.loads(state_file.read_text())
    resume = state["progress"]["resume"]
    state["progress"]["resume"] = {"steps": resume["steps"], "env": {}}  # the rest is lost
    state_file.write_text(json.dumps(state))
    done = run(TRAIN, "--resume", copy)
    assert done.returncode == 2
    assert "latest.json: progress.resume.n_updates is missing" in one_error_line(done)


@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        ("benchmarks/bench_env.py", ["--repeats", "0"], "--steps and --repeats must be >= 1"),
        ("benchmarks/bench_training.py", ["--steps", "-1"], "--steps and --repeats must be >= 1"),
        (
            "benchmarks/bench_training.py",
            ["--reference", "nowhere"],
            "no benchmarks/bench_training.py",
        ),
        (
            "benchmarks/bench_training.py",
            ["--profile", "--reference", "."],
            "give one of them",
        ),
        ("benchmarks/bench_solver.py", ["--repeats", "0"], "--repeats must be >= 1"),
        ("benchmarks/bench_network.py", ["--batch", "0"], "--batch, --hidden and --repeats"),
        ("benchmarks/bench_exchange.py", ["--workers", "1"], "--workers must be from 2 to"),
        ("benchmarks/bench_exchange.py", ["--rounds", "5"], "--rounds must be >= 10"),
    ],
    ids=[
        "bench_env",
        "bench_training",
        "bench_training reference",
        "bench_training reference with profile",
        "bench_solver",
        "bench_network",
        "bench_exchange workers",
        "bench_exchange rounds",
    ],
)
def test_benchmark_scripts_refuse_bad_arguments(script: str, args: list[str], message: str) -> None:
    done = run(ROOT / script, *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert message in done.stderr.splitlines()[-1]  # argparse: the usage, then one error line


@pytest.mark.parametrize("flag", ["--random-matches", "--greedy-matches"])
def test_export_refuses_negative_match_counts(
    flag: str, tiny_run: tuple[Path, subprocess.CompletedProcess]
) -> None:
    done = run(EXPORT, tiny_run[0], flag, "-1")
    assert done.returncode != 0
    assert f"{flag} is -1; it must be a whole number from 0 to 100,000" in one_error_line(done)


@pytest.mark.parametrize("out", ["folder", "policy.txt"])
def test_export_refuses_an_out_that_is_not_an_onnx_file(
    out: str, tiny_run: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    (tmp_path / "folder").mkdir()
    done = run(EXPORT, tiny_run[0], "--out", tmp_path / out)
    assert done.returncode == 2
    assert "give the .onnx file to write" in one_error_line(done)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]  # nothing written


# --- training/export.py with a model from your own training script ------------------------------

OWN_STEPS = 256


@pytest.fixture(scope="module")
def own_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Path]]:
    """A MaskablePPO and a PPO with MlpPolicy, trained briefly on ButtonUp-v1 as a user's own
    ten-line script would, and saved with ``model.save``: name -> (model, its .zip)."""
    import gymnasium as gym
    import torch as th
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    folder = tmp_path_factory.mktemp("own")
    threads = th.get_num_threads()
    th.set_num_threads(1)
    models = {}
    for name, algorithm in (("maskable", MaskablePPO), ("ppo", PPO)):
        env = gym.make("ButtonUp-v1")
        model = algorithm("MlpPolicy", env, n_steps=64, batch_size=32, seed=3, device="cpu")
        model.learn(OWN_STEPS)
        model.save(folder / f"my_{name}.zip")
        models[name] = (model, folder / f"my_{name}.zip")
    th.set_num_threads(threads)
    return models


@pytest.mark.parametrize("name", ["maskable", "ppo"])
def test_export_takes_a_zip_from_your_own_script(
    name: str, own_models: dict[str, tuple[Any, Path]], tmp_path: Path
) -> None:
    """The README's section: export with --trusted, a card that says what the file holds, an
    ONNX file that chooses the SB3 model's moves (1,200 random positions), which evaluate.py,
    the env's opponent= and buttonup-play all take."""
    model, source = own_models[name]
    saved = Path(shutil.copy(source, tmp_path / source.name))
    args = ["--random-matches", 10, "--greedy-matches", 0, "--perfect-matches", 5]
    args += ["--margin-matches", 0, "--audit-scores", "none", "--no-best-response"]
    done = run(EXPORT, saved, "--trusted", *args)
    assert done.returncode == 0, done.stderr
    out = saved.with_suffix(".onnx")
    assert f"wrote {out} and {out.with_suffix('.json')}" in done.stdout

    card = json.loads(out.with_suffix(".json").read_text())
    algorithm = "MaskablePPO" if name == "maskable" else "PPO"
    assert card["model"] == out.name and card["command"] is None
    assert card["seed"] == 3 == card["config"]["seed"]
    assert card["config"]["n_steps"] == 64 and card["config"]["batch_size"] == 32
    assert card["training"] == {"source": str(saved), "steps": OWN_STEPS}
    source = card["source"]
    assert source["file"] == str(saved) and source["algorithm"] == algorithm
    assert source["policy"] == "MlpPolicy" and source["encoding"] == "match-slots"
    assert (source["observations"], source["actions"]) == (247, 9)
    assert source["sb3_version"] == stable_baselines3_version()
    assert source["trained_with_legal_mask"] is (name == "maskable")
    assert "-inf" in source["legal_moves"]
    assert ("without a mask" in source["legal_moves"]) is (name == "ppo")
    assert {k: v["matches"] for k, v in card["evaluation"].items()} == {"random": 10, "perfect": 5}
    assert any(row.get("target", "").endswith("random bot at least 1") for row in card["targets"])

    policy = load_policy(out)
    assert policy.metadata[META_ENCODING] == "match-slots"
    assert policy.metadata["algorithm"] == algorithm and policy.metadata["steps"] == "256"
    positions = random_positions(9, 1200)
    expected, logits = sb3_choices(model, policy.encoding, positions)
    differ = [
        (state, row)
        for state, slot, row in zip(positions, expected, logits, strict=True)
        if policy.act(state) != slot
    ]
    assert all(near_tie(row, policy.encoding.mask(state)) for state, row in differ)
    assert len(differ) <= 12

    done = run(EVALUATE, "--model", out, "--opponent", "perfect", "--matches", 4, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert SUMMARY.search(done.stdout)

    import gymnasium as gym

    env = gym.make("ButtonUp-v1", opponent=str(out), episode="round")
    _, info = env.reset(seed=1)
    terminated = False
    while not terminated:
        action = int(np.flatnonzero(info["action_mask"])[0])
        _, _, terminated, _, info = env.step(action)
    assert env.unwrapped.opponent.path == out

    slots = "".join(f"{slot}\n" for slot in range(9)) * 60
    play = subprocess.run(
        [sys.executable, "-m", "buttonup_env.play", "--opponent", str(out), "--target", "3"],
        input=slots,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert play.returncode == 0, play.stderr
    assert f"against the policy {out}" in play.stdout and "Match over:" in play.stdout


def stable_baselines3_version() -> str:
    import stable_baselines3

    return stable_baselines3.__version__


def test_export_refuses_a_zip_without_trusted(
    own_models: dict[str, tuple[Any, Path]], tmp_path: Path
) -> None:
    saved = Path(shutil.copy(own_models["ppo"][1], tmp_path / "my_ppo.zip"))
    done = run(EXPORT, saved)
    assert done.returncode == 2
    line = one_error_line(done)
    assert f"{saved} is a Stable-Baselines3 .zip" in line and "unpickles" in line
    assert line.endswith("pass --trusted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_ppo.zip"]  # nothing written


def which_with_a_zip(folder: Path) -> tuple[list[str | Path], list[str]]:
    (folder / "my.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    return [folder / "my.zip", "--trusted", "--which", "latest"], ["--which", "single model"]


def missing_zip(folder: Path) -> tuple[list[str | Path], list[str]]:
    return [folder / "my.zip", "--trusted"], ["does not exist", "Stable-Baselines3 .zip"]


def other_file(folder: Path) -> tuple[list[str | Path], list[str]]:
    (folder / "my.pt").write_bytes(b"weights")
    return [folder / "my.pt"], ["is not a run folder nor a Stable-Baselines3 .zip"]


def unsupported(name: str) -> Callable[[Path], tuple[list[str | Path], list[str]]]:
    def make(folder: Path) -> tuple[list[str | Path], list[str]]:
        path = unsupported_zip(name, folder)
        expected = ["supported"] if name == "other layers" else ["supported are MaskablePPO"]
        return [path, "--trusted"], [*UNSUPPORTED[name][1], *expected]

    return make


BAD_ZIP_EXPORTS: dict[str, Callable[[Path], tuple[list[str | Path], list[str]]]] = {
    "which with a zip": which_with_a_zip,
    "missing zip": missing_zip,
    "other file": other_file,
    **{name: unsupported(name) for name in UNSUPPORTED},
}


@pytest.mark.parametrize("case", list(BAD_ZIP_EXPORTS))
def test_export_refuses_a_zip_it_cannot_export_in_one_sentence(
    case: str,
    tmp_path: Path,
    training_script: Callable[[str], ModuleType],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Exit status 2 and one line naming the file and what is supported (run in this process:
    the CLI's error path is the same ``fail``; the subprocess tests above show it has no
    traceback)."""
    args, fragments = BAD_ZIP_EXPORTS[case](tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SystemExit) as stop:
        training_script("export").main([str(arg) for arg in args])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {args[0]}"), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


# --- training/evaluate.py ---------------------------------------------------------------------

SUMMARY = re.compile(
    r"matches: (?P<matches>\d+), won (?P<wins>\d+), lost (?P<losses>\d+) "
    r"\((?P<rate>[\d.]+)%, 95% Wilson interval (?P<low>[\d.]+)-(?P<high>[\d.]+)%\)\n"
    r"mean round margin: (?P<margin>[+-][\d.]+) points over (?P<rounds>\d+) rounds\n"
    r"mean regret: (?P<regret>[\d.]+) round points per decision over (?P<decisions>\d+) "
    r"decisions\n"
    r"mean match regret: (?P<match_regret>[\d.]+) of the probability of winning the match per "
    r"decision\n"
    r"regret by move of the round \(1st to 8th\): (?P<by_move>[\d. ]+)\n"
    r"speed: (?P<speed>[\d.]+) matches/s"
)


def test_evaluate_cli_prints_writes_and_records(tmp_path: Path) -> None:
    figures_file, records_file = tmp_path / "figures.json", tmp_path / "games.jsonl"
    args = ["--model", "random", "--opponent", "greedy", "--matches", "20", "--no-progress"]
    done = run(EVALUATE, *args, "--json", figures_file, "--record", records_file)
    assert done.returncode == 0, done.stderr
    printed = SUMMARY.search(done.stdout)
    assert printed, done.stdout
    assert "random against greedy, seed 0" in done.stdout
    figures = json.loads(figures_file.read_text())
    assert (figures["model"], figures["opponent"], figures["seed"]) == ("random", "greedy", 0)
    assert figures["target"] == 15 and figures["matches"] == 20
    assert int(printed["wins"]) == figures["wins"]
    assert int(printed["losses"]) == figures["losses"] == 20 - figures["wins"]
    assert float(printed["rate"]) == round(100 * figures["win_rate"], 1)
    assert float(printed["low"]) == round(100 * figures["win_rate_interval"][0], 1)
    assert float(printed["high"]) == round(100 * figures["win_rate_interval"][1], 1)
    assert float(printed["margin"]) == round(figures["mean_round_margin"], 3)
    assert int(printed["rounds"]) == figures["rounds"]
    assert float(printed["regret"]) == round(figures["mean_regret"], 4)
    assert float(printed["match_regret"]) == round(figures["mean_match_regret"], 5)
    assert int(printed["decisions"]) == figures["decisions"]
    by_move = [float(cell) for cell in printed["by_move"].split()]
    assert by_move == [round(r, 3) for r in figures["regret_by_move"]]
    assert sum(figures["decisions_by_move"]) == figures["decisions"]
    assert float(printed["speed"]) > 0 and figures["matches_per_second"] > 0

    # the same figures as the library's evaluate() with the same seed
    result = evaluate(RandomBot(), GreedyBot(), 20, seed=0)
    assert (result.wins, result.rounds, result.decisions) == (
        figures["wins"],
        figures["rounds"],
        figures["decisions"],
    )
    assert result.mean_regret == pytest.approx(figures["mean_regret"])

    assert len(records_file.read_text().splitlines()) == 20
    replay = subprocess.run(
        [sys.executable, "-m", "buttonup_env.replay", str(records_file)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert replay.returncode == 0, replay.stdout
    assert "20 valid, 0 invalid" in replay.stdout


def test_evaluate_cli_refuses_a_best_response_beyond_the_solved_targets() -> None:
    args = ["--model", "margin", "--opponent", "best-response", "--target", "200"]
    refused = run(EVALUATE, *args, "--no-progress")
    assert refused.returncode == 2 and "solved for targets up to 100" in refused.stderr


@pytest.mark.slow
def test_evaluate_cli_measures_both_exploitabilities(tmp_path: Path) -> None:
    """``--opponent best-response``: the margin player gives nothing away in a round and
    0.0564 of the match to 15; the bots beside it (slow: a best response to the random bot
    visits every branch of every set-up)."""
    figures_file = tmp_path / "figures.json"
    args = ["--model", "margin", "--opponent", "best-response", "--no-progress"]
    done = run(EVALUATE, *args, "--json", figures_file)
    assert done.returncode == 0, done.stderr
    assert "margin: match exploitability: 0.0564 (target 15" in done.stdout
    assert "margin: round exploitability: 0.0000" in done.stdout
    figures = json.loads(figures_file.read_text())
    assert figures["margin"]["match"]["exploitability"] == pytest.approx(0.056387, abs=1e-6)
    assert figures["margin"]["round"]["exploitability"] == pytest.approx(0.0, abs=1e-12)
    assert figures["random"]["match"]["exploitability"] > 0.49


def test_evaluate_cli_plays_a_graded_bot(tmp_path: Path) -> None:
    figures_file = tmp_path / "figures.json"
    args = ["--model", "perfect-0.25", "--opponent", "greedy", "--matches", "10", "--no-progress"]
    done = run(EVALUATE, *args, "--json", figures_file)
    assert done.returncode == 0, done.stderr
    figures = json.loads(figures_file.read_text())
    result = evaluate(GradedBot(0.25), GreedyBot(), 10, seed=0)
    assert (result.wins, result.rounds, result.decisions) == (
        figures["wins"],
        figures["rounds"],
        figures["decisions"],
    )


def test_evaluate_cli_plays_an_exported_policy(
    tiny_run: tuple[Path, subprocess.CompletedProcess],
) -> None:
    final = tiny_run[0] / "final.onnx"
    done = run(
        EVALUATE, "--model", final, "--opponent", "random", "--matches", "6", "--no-progress"
    )
    assert done.returncode == 0, done.stderr
    assert SUMMARY.search(done.stdout)


def untrusted_checkpoint(tmp_path: Path) -> list[str]:
    (tmp_path / "model.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    return ["--model", str(tmp_path / "model.zip")]


BAD_EVALUATE_ARGS = {
    "no matches": (
        lambda _: ["--model", "random", "--matches", "0"],
        "--matches is 0; it must be a whole number from 1 to 100,000",
    ),
    "no target": (
        lambda _: ["--model", "random", "--target", "0"],
        "--target is 0; it must be a whole number from 1 to 1000",
    ),
    "unknown model": (lambda _: ["--model", "nosuchfile"], "'nosuchfile'"),
    "unknown opponent": (
        lambda _: ["--model", "random", "--opponent", "nosuchbot"],
        "'nosuchbot'",
    ),
    "untrusted zip": (untrusted_checkpoint, "export it to ONNX with python training/export.py"),
    "negative seed": (
        lambda _: ["--model", "random", "--seed", "-1"],
        "--seed is -1; it must be a whole number from 0 to 2**32 - 1",
    ),
    "a graded bot without a probability": (
        lambda _: ["--model", "perfect-1.5"],
        "'perfect-1.5' is not a graded bot",
    ),
    "json into a folder": (
        lambda tmp_path: ["--model", "random", "--json", str(tmp_path)],
        "is a folder",
    ),
}


@pytest.mark.parametrize("case", list(BAD_EVALUATE_ARGS))
def test_evaluate_cli_refuses_bad_arguments(case: str, tmp_path: Path) -> None:
    make_args, fragment = BAD_EVALUATE_ARGS[case]
    done = run(EVALUATE, *make_args(tmp_path))
    assert done.returncode == 2
    assert fragment in one_error_line(done)


# --- training/evaluate.py --audit --------------------------------------------------------------


def test_evaluate_audit_prints_writes_and_draws_at_0_0(tmp_path: Path) -> None:
    """``--audit`` at its default 0-0: the summary, the worst decisions in the rules' notation,
    the figures as JSON (the margin player's 0.000027 of winning probability per real choice)
    and a picture."""
    figures_file, picture = tmp_path / "audit.json", tmp_path / "audit.png"
    args = ["--model", "margin", "--audit", "--worst", "2", "--no-progress"]
    done = run(EVALUATE, *args, "--json", figures_file, "--plot", picture)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        "margin: audit at 0-0 (target 15, both starters each): 774,168 real choices; "
    )
    figures = json.loads(figures_file.read_text())
    assert figures["model"] == "margin"
    found = figures["audit"]
    assert found["scores"] == ["0-0"] and found["target"] == 15
    assert found["total"]["choices"] == 774_168
    assert found["total"]["mean_loss"] == pytest.approx(0.000027, abs=5e-7)
    assert found["total"]["non_optimal_round"] == 0
    assert f"non-optimal for the match {found['total']['non_optimal']:,.0f} " in lines[0]
    worst = [line.strip() for line in lines[lines.index("worst:") + 1 :][:2]]
    assert worst == [decision["line"] for decision in found["worst"]]
    board = found["worst"][0]["board"]
    assert State.from_notation(board, to_move=found["worst"][0]["mover"])  # the rules' notation
    assert f"figures written to {figures_file}" in lines
    assert f"picture drawn in {picture}" in lines
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_evaluate_audit_of_a_policy_at_every_score(tmp_path: Path, linear_policy: Callable) -> None:
    """``--scores all`` on an ONNX policy that sees the score (asked at every score): the
    figures of every score of a match to --target, the same as the library's audit, and the
    heat map."""
    policy = linear_policy(tmp_path / "seeing.onnx", "match-afterstates", 5)
    figures_file, picture = tmp_path / "audit.json", tmp_path / "audit.png"
    args = ["--audit", "--scores", "all", "--target", "2", "--worst", "3", "--no-progress"]
    done = run(EVALUATE, "--model", policy, *args, "--json", figures_file, "--plot", picture)
    assert done.returncode == 0, done.stderr
    assert "audit at all 4 scores (target 2, both starters each)" in done.stdout
    assert "by score, the 4 of the largest mean loss: " in done.stdout
    found = json.loads(figures_file.read_text())["audit"]
    assert found["scores"] == ["0-0", "0-1", "1-0", "1-1"]
    assert set(found["by_score"]) == set(found["scores"])
    expected = audit(load_policy(policy), "all", 2, worst=3)
    assert found["total"] == pytest.approx(expected.total.to_dict())
    assert found["asked"] == expected.asked == 4 * 774_168  # asked again at every score
    assert [d["line"] for d in found["worst"]] == [d.line() for d in expected.worst]
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


BAD_AUDIT_ARGS = {
    "no score": (["--audit", "--scores"], "--scores needs a score state"),
    "a score past the target": (
        ["--audit", "--scores", "15-0"],
        "--scores 15-0 is not a score of a match to 15: each player's points are a whole number "
        "from 0 to 14",
    ),
    "not a score": (["--audit", "--scores", "x"], "--scores 'x' is not a score; write R-B"),
    "all and more": (["--audit", "--scores", "all", "0-0"], "give it alone"),
    "audit flags without --audit": (
        ["--plot", "a.png", "--worst", "3"],
        "--plot and --worst go with --audit; add --audit",
    ),
    "matches' flags with --audit": (
        ["--audit", "--opponent", "perfect", "--seed", "3"],
        "--audit judges the model's every decision and plays no matches; leave out --opponent "
        "and --seed",
    ),
    "a picture that is not a png": (["--audit", "--plot", "a.txt"], "give the .png file"),
    "a negative count of worst decisions": (
        ["--audit", "--worst", "-1"],
        "--worst is -1; it must be a whole number from 0 to 10,000",
    ),
    "an unsolved target": (["--audit", "--target", "101"], "solved for targets up to 100"),
}


@pytest.mark.parametrize("case", list(BAD_AUDIT_ARGS))
def test_evaluate_audit_refuses_bad_arguments(case: str) -> None:
    args, fragment = BAD_AUDIT_ARGS[case]
    done = run(EVALUATE, "--model", "margin", *args)
    assert done.returncode == 2 and done.stdout == ""
    assert fragment in one_error_line(done)


def test_evaluate_audit_keeps_an_existing_picture(tmp_path: Path) -> None:
    picture = tmp_path / "audit.png"
    picture.write_bytes(b"mine")
    done = run(EVALUATE, "--model", "margin", "--audit", "--plot", picture)
    assert done.returncode == 2
    assert f"--plot {picture} exists; give --force to replace it" in one_error_line(done)
    assert picture.read_bytes() == b"mine"


def test_the_audit_picture_draws_loss_by_score(
    training_script: Callable[[str], ModuleType],
) -> None:
    """At several scores the picture is a heat map of the loss by score beside the loss by
    move; its table holds each audited score's mean loss where Red's and Black's points
    meet."""
    found = Audit(3, [(0, 0), (1, 2)])
    found.by_score = {(0, 0): Tally(10, 1.0, 0.02), (1, 2): Tally(10, 2.0, 0.5)}
    found.by_move = {1: Tally(8, 1.0, 0.1), 2: Tally(12, 2.0, 0.42)}
    found.total = Tally(20, 3.0, 0.52)
    table = found.loss_by_score()
    assert table[1, 2] == pytest.approx(0.05) and table[0, 0] == pytest.approx(0.002)
    assert np.isnan(table[2, 1])  # not audited: blank
    picture = training_script("plots").audit_picture(found, "made up")
    assert picture[:8] == b"\x89PNG\r\n\x1a\n"
    one = Audit(3, [(0, 0)], total=Tally(8, 1.0, 0.1), by_move={1: Tally(8, 1.0, 0.1)})
    one.by_score = {(0, 0): one.total}
    assert training_script("plots").audit_picture(one)[:8] == b"\x89PNG\r\n\x1a\n"


def test_learning_curve_labels_the_regret_axis_down_to_the_lowest_regret(
    training_script: Callable[[str], ModuleType],
) -> None:
    ticks = training_script("plots").regret_ticks
    good_run = [1.55, 0.089, 0.038, 0.014, 0.0045]  # the shipped agent's run, roughly
    assert 0.0045 / 2 < min(ticks(good_run)) <= 2 * 0.0045  # not a fixed list's 0.05
    assert max(ticks(good_run)) >= 1.55
    quick_run = [1.63, 0.198, 0.058]  # no tick far below the curve: it would widen the axis
    assert min(ticks(quick_run)) == 0.05
    assert ticks([0.0, 0.15]) == [0.1, 0.2]  # a zero regret (log axis) is left out


def test_evaluate_cli_stops_quietly_when_its_reader_goes_away() -> None:
    """``evaluate.py ... | head -1``: once the reader has closed the pipe, the script ends
    with status 1 and no traceback (not a BrokenPipeError traceback, nor a second error from
    the interpreter's last flush)."""
    process = subprocess.Popen(
        [sys.executable, str(EVALUATE), "--model", "random", "--matches", "3", "--no-progress"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert process.stdout is not None
    process.stdout.close()  # the reader is gone before the script writes its first line
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1
    assert b"Traceback" not in stderr and b"BrokenPipeError" not in stderr, stderr.decode()


@pytest.mark.parametrize(
    ("returned", "status"), [(0, 0), (2, 2), (None, 0), (Path("runs/report"), 0)]
)
def test_run_cli_exits_with_the_status_main_returns(returned: object, status: int) -> None:
    with pytest.raises(SystemExit) as stopped:
        run_cli(lambda: returned)
    assert stopped.value.code == status


def test_evaluate_cli_refuses_an_output_file_it_cannot_write(tmp_path: Path) -> None:
    """A --json path in a missing folder is a bad argument like the others: one error line
    (ideally before playing), not a traceback after the evaluation."""
    missing = tmp_path / "no" / "such" / "folder" / "figures.json"
    done = run(EVALUATE, "--model", "random", "--matches", "3", "--json", missing)
    assert done.returncode != 0
    assert str(missing.parent) in one_error_line(done)


@pytest.mark.slow
def test_evaluate_cli_best_response_measures_exploitability(tmp_path: Path) -> None:
    """The perfect bot plays the match perfectly: it gives nothing away in the match, and round
    points away where the match asks for another move than the round; the random and greedy
    bots give points away in both."""
    figures_file = tmp_path / "exploit.json"
    args = ["--model", "perfect", "--opponent", "best-response", "--no-progress"]
    done = run(EVALUATE, *args, "--json", figures_file)
    assert done.returncode == 0, done.stderr
    assert "perfect: match exploitability: 0.0000 (target 15" in done.stdout
    for bot in ("random", "greedy"):
        value = re.search(rf"^{bot}: round exploitability: ([\d.]+)", done.stdout, re.M)
        assert value and float(value[1]) > 1.0, done.stdout
    figures = json.loads(figures_file.read_text())
    assert figures["opponent"] == "best-response"
    assert figures["perfect"]["match"]["exploitability"] == pytest.approx(0.0, abs=1e-12)
    assert figures["perfect"]["round"]["exploitability"] > 0.01
    assert figures["perfect"]["round"]["starts"] == 2 * len(LAYOUTS)
    assert figures["random"]["round"]["exploitability"] > 1.0
    assert figures["greedy"]["round"]["exploitability"] > 1.0


def test_the_card_says_which_targets_are_met_and_by_how_much(
    training_script: Callable[[str], ModuleType],
) -> None:
    """The match's targets (issue 49), met or missed by how much, and the round's figures
    reported beside them with no target."""
    module = training_script("cards")
    played = evaluate(RandomBot(0), RandomBot(1), 6, seed=0)
    margin = dataclasses.replace(played, win_rate=0.52, mean_match_regret=0.0004)
    perfect = dataclasses.replace(played, mean_regret=0.02, mean_match_regret=0.0002)
    results = {
        "margin": ("cmd", margin),
        "random": ("cmd", dataclasses.replace(played, win_rate=1.0)),
        "perfect": ("cmd", perfect),
    }
    measured = {
        "match_exploitability": 0.0125,
        "exploitability": 0.3,
        "audit_mean_loss_0_0": 0.00005,
    }
    rows, reported = module.targets(results, measured)
    by_name = {row["target"]: row for row in rows if "target" in row}
    assert list(by_name) == [
        "match exploitability at most 0.01",
        "audit at 0-0: mean loss of winning probability per real choice at most 0.0001",
        "matches won against the margin bot at least 0.53",
        "matches won against the random bot at least 1",
    ]
    exploit = by_name["match exploitability at most 0.01"]
    assert exploit["met"] is False and exploit["missed_by"] == pytest.approx(0.0025)
    assert exploit["measured"] == 0.0125
    margin_row = by_name["matches won against the margin bot at least 0.53"]
    assert margin_row["met"] is False and margin_row["missed_by"] == pytest.approx(0.01)
    assert by_name["matches won against the random bot at least 1"]["met"] is True
    audit_row = by_name[
        "audit at 0-0: mean loss of winning probability per real choice at most 0.0001"
    ]
    assert audit_row["met"] is True and audit_row["missed_by"] is None
    assert {"what_was_tried": "docs/experiments.md, the results log"} in rows
    figures = {row["figure"]: row["measured"] for row in reported}
    assert all(set(row) == {"figure", "measured"} for row in reported)  # no target to meet
    assert figures["round exploitability (round points per round)"] == 0.3
    assert figures["match regret against the perfect bot (per decision)"] == 0.0002
    assert figures["match regret against the margin bot (per decision)"] == 0.0004
    assert figures["round regret against the perfect bot (round points per decision)"] == 0.02
    assert "round regret against the greedy bot (round points per decision)" not in figures

    # what was not measured is neither judged nor reported (a NaN match regret included)
    unmeasured = dataclasses.replace(played, win_rate=1.0, mean_match_regret=float("nan"))
    rows, reported = module.targets({"random": ("cmd", unmeasured)})
    assert rows == [
        {
            "target": "matches won against the random bot at least 1",
            "measured": 1.0,
            "met": True,
            "missed_by": None,
        }
    ]  # nothing missed to explain
    assert [row["figure"] for row in reported] == [
        "round regret against the random bot (round points per decision)"
    ]


@pytest.mark.slow  # two audits of every decision (the audit itself: tests/test_audit.py)
def test_the_card_audit_at_0_0_or_at_every_score(
    training_script: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A card's audit: the counts at 0-0 and in all, the command that gives them again, and at
    every score the mean loss by score; the mean loss at 0-0 goes to the targets."""
    cards = training_script("cards")
    measured: dict[str, float] = {}
    card = cards.audit_card(MarginBot(), Path("m.onnx"), "0-0", True, measured)
    assert card["command"] == "python training/evaluate.py --model m.onnx --audit"
    assert card["scores"] == "0-0" and card["target"] == 15
    assert card["at_0_0"]["choices"] == card["total"]["choices"] == 774_168
    assert card["at_0_0"]["non_optimal_round"] == 0
    assert measured["audit_mean_loss_0_0"] == card["at_0_0"]["mean_loss"]
    assert measured["audit_mean_loss_0_0"] == pytest.approx(0.000027, abs=5e-7)
    assert "mean_loss_by_score" not in card and len(card["worst"]) == 10

    asked = []  # every score of a match to 2 stands for the 225 of a match to 15

    def small_audit(player: object, scores: object) -> Audit:
        asked.append(scores)
        return audit(player, scores, target=2)

    monkeypatch.setattr(cards, "audit", small_audit)
    card = cards.audit_card(MarginBot(), Path("m.onnx"), "all", True, measured)
    assert asked == ["all"]
    assert card["command"] == "python training/evaluate.py --model m.onnx --audit --scores all"
    assert set(card["mean_loss_by_score"]) == {"0-0", "0-1", "1-0", "1-1"}
    assert card["total"]["choices"] == 4 * card["at_0_0"]["choices"]
    assert measured["audit_mean_loss_0_0"] == card["mean_loss_by_score"]["0-0"]


def test_the_docs_own_training_script_trains_exports_and_plays(tmp_path: Path) -> None:
    """docs/training.md's "your own training script", as written but for a shorter budget,
    trains on the batched env, and its .zip exports to an .onnx that plays legal moves."""
    page = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    section = page[page.index("### A model from your own training script") :]
    script = re.search(r"```python\n(.*?)```", section, re.S)[1]  # type: ignore[index]
    assert "total_timesteps=200_000" in script and "torch.set_num_threads(1)" in script
    (tmp_path / "my_train.py").write_text(script.replace("200_000", "2_048"), encoding="utf-8")
    done = run(tmp_path / "my_train.py", cwd=tmp_path)  # python my_train.py, in this process
    assert done.returncode == 0, done.stderr[-3000:]
    # no exploitability: a policy that sees the score takes a minute (the CLI's test has it)
    done = run(EXPORT, tmp_path / "my_ppo.zip", "--trusted", "--random-matches", "4",
               "--greedy-matches", "4", "--perfect-matches", "4", "--margin-matches", "4",
               "--audit-scores", "none", "--no-best-response")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    policy = load_policy(tmp_path / "my_ppo.onnx")
    state = State.from_notation("B W W B B R W R R", to_move="R")
    assert policy.act(state) in state.legal_moves()
