"""No policy runs for ever (issue 50): every caller of a policy stops one that overruns its
time limit (onnxruntime's ``RunOptions.terminate``, set by :mod:`buttonup_env.players.deadline`),
the web app frees the worker and serves everyone else, and SIGTERM still ends it with status 0.

The policies here spin in a ``Loop`` of 2^40 turns on every position but the loader's two
trial positions. The loader refuses a ``Loop``; the tests remove its graph checks
(:data:`hostile_onnx.BYPASS`), as a hole in them would, to show that the time limit holds
without them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hostile_onnx import BYPASS, after_trial, endless_loop, later_loop, save, stacked_position

import buttonup_env.players.policy as policy_module
from buttonup_env.players import deadline
from buttonup_env.players.policy import OnnxPolicy, PolicyError, load_policy

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 1.0


@pytest.fixture
def bypass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader without its graph checks, and a time limit of :data:`LIMIT` a call."""
    monkeypatch.setattr(policy_module, "check_structure", lambda *args: None)
    monkeypatch.setattr(policy_module, "check_sizes", lambda *args: None)
    monkeypatch.setattr(OnnxPolicy, "seconds", LIMIT)


def test_a_run_past_its_limit_is_stopped_and_the_next_runs_as_usual(
    bypass: None, tmp_path: Path
) -> None:
    policy = load_policy(save(later_loop(), tmp_path / "later.onnx"))  # the trial passes
    start = time.monotonic()
    with pytest.raises(PolicyError) as error:
        policy.act(stacked_position())
    assert LIMIT <= time.monotonic() - start < LIMIT + 2
    assert str(error.value) == (
        f"{tmp_path / 'later.onnx'} did not give its logits for 1 position within 1 s, its time "
        "limit, and was stopped"
    )
    first = policy.PROBE_STATES[0]
    assert policy.act(first) in first.legal_moves()  # the thread's next run is not stopped
    assert deadline.running() == 0


def test_a_batch_has_a_limit_that_grows_with_it(bypass: None, tmp_path: Path) -> None:
    policy = load_policy(save(later_loop(), tmp_path / "later.onnx"))
    observations = np.stack([policy.encoding.encode(stacked_position(), "B")] * 5)
    start = time.monotonic()
    with pytest.raises(PolicyError, match=r"for 5 positions within 1\.2 s, its time limit"):
        policy.logits(observations)
    assert time.monotonic() - start < LIMIT + 2


def test_loading_a_policy_that_spins_on_its_trial_ends_in_a_sentence(
    bypass: None, tmp_path: Path
) -> None:
    path = save(endless_loop(), tmp_path / "endless.onnx")
    start = time.monotonic()
    with pytest.raises(ValueError) as error:
        load_policy(path)
    assert time.monotonic() - start < LIMIT + 2
    assert str(error.value) == (
        f"{path} is refused: it did not give its logits for 2 positions within 1.05 s, its time "
        "limit, and was stopped when it was tried on two set-up positions"
    )


def test_the_env_s_opponent_is_stopped(bypass: None, tmp_path: Path) -> None:
    path = save(after_trial(), tmp_path / "spins.onnx")
    env = gym.make("ButtonUp-v0", opponent=str(path))
    start = time.monotonic()
    with pytest.raises(PolicyError, match="within 1 s, its time limit, and was stopped"):
        env.reset(seed=1, options={"agent_color": "B", "first": "R"})  # the opponent moves first
    assert time.monotonic() - start < LIMIT + 2
    env.close()


def run_command(code: str, args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    tests = str(Path(__file__).resolve().parent)
    path = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-c", BYPASS.format(seconds=LIMIT) + code, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": path},
    )


FORKED = """
import os, sys
from pathlib import Path
from buttonup_env.players.policy import PolicyError, load_policy
from hostile_onnx import later_loop, save, stacked_position
policy = load_policy(save(later_loop(), Path(sys.argv[1])))
policy.act(policy.PROBE_STATES[0])  # the parent's watchdog thread is running
pid = os.fork()
if pid == 0:
    try:
        policy.act(stacked_position())
    except PolicyError as error:
        print(error, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_has_a_watchdog_of_its_own(tmp_path: Path) -> None:
    """A child forked while the watchdog ran has the parent's lock but not its thread: the
    watchdog starts anew in it."""
    done = run_command(FORKED, [str(tmp_path / "later.onnx")])
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("within 1 s, its time limit, and was stopped\n"), done.stdout


def script(name: str) -> str:
    """Python that runs ``training/NAME`` as its command line would."""
    return (
        f"import runpy, sys; sys.argv[0] = '{name}'; "
        f"runpy.run_path('training/{name}', run_name='__main__')"
    )


@pytest.mark.parametrize(
    "command",  # the same limit on the policy in each; league.py's path is evaluate.py's
    [
        "buttonup-play",
        pytest.param("evaluate.py", marks=pytest.mark.slow),
        pytest.param("league.py", marks=pytest.mark.slow),
    ],
)
def test_a_command_ends_in_the_policy_s_sentence(command: str, tmp_path: Path) -> None:
    path = save(after_trial(), tmp_path / "spins.onnx")
    start = time.monotonic()
    prefix = "error: "
    if command == "buttonup-play":
        code = "import sys; from buttonup_env.ui import play; sys.exit(play.main(sys.argv[1:]))"
        args = ["--opponent", str(path), "--seed", "3"]
        done = run_command(code, args, "\n".join(str(s % 9) for s in range(200)))
        prefix = "python -m buttonup_env.play: error: "
    elif command == "evaluate.py":
        args = ["--model", str(path), "--matches", "2", "--no-progress"]
        done = run_command(script(command), args)
    else:  # a traceback before
        args = ["--players", "random", str(path), "--matches", "2", "--no-progress"]
        done = run_command(script(command), args)
    assert time.monotonic() - start < 60
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"{prefix}{path} did not give its logits for 1 position within 1 s, its time limit, "
        "and was stopped\n"
    )


@pytest.mark.slow
def test_report_ratings_end_in_the_snapshot_s_sentence(tmp_path: Path) -> None:
    """``report.py --ratings`` rates a run's snapshots: one past its time limit is one
    sentence naming it."""
    run = tmp_path / "run"
    (run / "snapshots").mkdir(parents=True)
    snapshot = save(after_trial(), run / "snapshots" / "step_000000000.onnx")
    shutil.copy(snapshot, run / "final.onnx")
    (run / "config.json").write_text("{}")
    final = {"regret_perfect": 0.1, "win_rate_random": 0.9, "win_rate_greedy": 0.5,
             "win_rate_perfect": 0.1, "exploitability": 1.0}  # fmt: skip
    (run / "trial.json").write_text(json.dumps({"final": final, "evals": [], "seed": 0}))
    args = ["--runs", str(run), "--ratings", "--ladder-matches", "6",
            "--out", str(tmp_path / "out")]  # fmt: skip
    done = run_command(script("report.py"), args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("error: ") == 1, done.stderr
    line = done.stderr.split("error: ")[1].splitlines()[0]  # after the progress bar's text
    assert line == (
        f"{snapshot} cannot be rated ({snapshot} did not give its logits for 6 positions "
        "within 1.25 s, its time limit, and was stopped)"
    ), done.stderr


# --- the web app ------------------------------------------------------------------------------

httpx = pytest.importorskip(
    "httpx2", reason="the web app needs the web extra", exc_type=ImportError
)


@pytest.fixture
def hostile_server(bypass: None, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """The web app on a free port of loopback, offering a policy that spins (``spins``) and
    the bots, with a limit of :data:`LIMIT` a move."""
    from threaded_server import serving

    from buttonup_env.ui.web.app import create_app
    from buttonup_env.ui.web.guard import AllowedHosts
    from buttonup_env.ui.web.offered import offer
    from buttonup_env.ui.web.workers import Workers

    path = save(after_trial(), tmp_path / "spins.onnx")
    workers = Workers(seconds=LIMIT)
    app = create_app(offer([str(path)]), workers=workers, hosts=AllowedHosts.serving("127.0.0.1"))
    with serving(app) as port:
        yield f"http://127.0.0.1:{port}", workers


def test_the_web_app_survives_eight_hostile_policies_and_serves_a_ninth_client(
    hostile_server: tuple[str, Any],
) -> None:
    base, workers = hostile_server
    answers: list[Any] = []

    def hostile_game(seed: int) -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            game = client.post("/api/games", json={"red": "spins", "black": "spins", "seed": seed})
            answers.append(client.post(f"/api/games/{game.json()['id']}/step"))

    start = time.monotonic()
    clients = [threading.Thread(target=hostile_game, args=(seed,)) for seed in range(8)]
    for client in clients:
        client.start()
    for client in clients:
        client.join(30)
    assert [a.status_code for a in answers] == [500] * 8, [a.text for a in answers]
    assert all(
        a.json()["detail"].startswith("The policy spins.onnx did not choose a move on ")
        and a.json()["detail"].endswith(" within 1 s.")
        for a in answers
    ), [a.json()["detail"] for a in answers]
    assert time.monotonic() - start < LIMIT + 5
    while workers.running and time.monotonic() - start < LIMIT + 5:  # stopped, not left
        time.sleep(0.05)
    assert workers.running == 0 and deadline.running() == 0
    with httpx.Client(base_url=base, timeout=10) as ninth:
        game = ninth.post("/api/games", json={"black": "random", "seed": 9})
        assert game.status_code == 201, game.text
        legal = game.json()["state"]["legal"]
        move = ninth.post(f"/api/games/{game.json()['id']}/moves", json={"slot": legal[0]})
        assert move.status_code == 200, move.text


SERVER = """
import sys
from buttonup_env.ui.web.server import main
sys.exit(main(sys.argv[1:]))
"""


# slow: a server of its own with eight spinning policies; the web app's survival of eight
# hostile policies above and a signal stopping the server (test_web_limits.py) stay default
@pytest.mark.slow
def test_sigterm_ends_the_server_with_status_0_while_eight_policies_spin(tmp_path: Path) -> None:
    """The eight runs are under way (their limit is a minute) when SIGTERM comes: the server
    stops them and exits with status 0 (it aborted, status -6, when a thread came back from
    onnxruntime as the interpreter ended)."""
    path = save(after_trial(), tmp_path / "spins.onnx")
    process = subprocess.Popen(
        [sys.executable, "-c", BYPASS.format(seconds=60) + SERVER, "--port", "0",
         "--opponent", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "is served at" in line, line + process.stderr.read() if process.stderr else line
        base = line.split(" at ")[1].split()[0].rstrip("/")
        with httpx.Client(base_url=base, timeout=30) as client:
            for _ in range(100):  # the port is bound before the server listens on it
                try:
                    client.get("/api/options")
                    break
                except httpx.ConnectError:
                    time.sleep(0.05)
            ids = [
                client.post(
                    "/api/games", json={"red": "spins", "black": "spins", "seed": seed}
                ).json()["id"]
                for seed in range(8)
            ]

            def step(game_id: str) -> None:
                with httpx.Client(base_url=base, timeout=30) as http:
                    try:
                        http.post(f"/api/games/{game_id}/step")
                    except httpx.HTTPError:
                        pass

            steps = [threading.Thread(target=step, args=(i,), daemon=True) for i in ids]
            for thread in steps:
                thread.start()
            time.sleep(1.0)  # the eight spin
            assert client.post("/api/games/" + ids[0] + "/step").status_code == 409
        start = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
        assert time.monotonic() - start < 10
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out.endswith("Stopped.\n") and "Traceback" not in err, (out, err)
