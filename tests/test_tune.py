"""training/tune.py and training/report.py: workers sharing a study (SQLite and a real
PostgreSQL server), a worker killed mid-trial, pruning and resuming, the report's figures
against rliable called directly, and the one-line refusals of bad input."""

from __future__ import annotations

import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from commands import run

optuna = pytest.importorskip("optuna", reason="needs the tune extra: pip install -e '.[tune]'")
from optuna.trial import TrialState  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TUNE = ROOT / "training" / "tune.py"

TINY_TRAIN = [
    "--threads", "1",
    "--n-envs", "2",
    "--n-steps", "64",
    "--batch-size", "64",
    "--hidden", "16", "16",
    "--snapshot-every", "128",
    "--eval-every", "128",
    "--checkpoint-every", "128",
    "--eval-matches", "2",
    "--final-eval-matches", "2",
]  # fmt: skip
"""train.py flags of a trial of a few seconds (with --steps 256: evaluations at 0, 128, 256)."""

TINY_SPACE = """
[learning_rate]
low = 1e-4
high = 1e-3
log = true

[clip_range]
choices = [0.1, 0.2]

[opponents]
perfect = { low = 0.5, high = 0.9 }
"""

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
PROGRESS = re.compile(r"^trial (\d+) (complete|pruned)", re.M)


def tune_args(study: str, runs: Path, *extra: str, steps: int = 256) -> list[str]:
    return [
        "--study", study,
        "--runs-dir", str(runs),
        "--steps", str(steps),
        "--no-exploitability",
        "--heartbeat", "1",
        *extra,
        "--", *TINY_TRAIN,
    ]  # fmt: skip


def start_worker(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(TUNE), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        start_new_session=True,
    )


def finish(worker: subprocess.Popen, timeout: float = 600) -> tuple[str, str]:
    try:
        out, err = worker.communicate(timeout=timeout)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.communicate()
    assert worker.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err
    return out, err


def load(study: str, url: str) -> optuna.Study:
    return optuna.load_study(study_name=study, storage=url)


def check_shared_study(url: str, runs: Path, study: str, trials: int, outputs: list[str]) -> None:
    """The study ended with ``trials`` finished trials, each run once, by one worker, into its
    own run folder, with all its evaluations; the workers' progress lines account for each."""
    all_trials = load(study, url).get_trials()
    finished = [t for t in all_trials if t.state in FINISHED]
    assert len(finished) == trials
    others = [t for t in all_trials if t.state not in FINISHED]
    # two workers asking in the same instant for the last place: the later trial is not run
    assert all(t.user_attrs.get("places_taken") and "run_dir" not in t.user_attrs for t in others)
    assert sorted(t.user_attrs["place"] for t in finished) == list(range(trials))

    printed = [{int(n) for n, _ in PROGRESS.findall(out)} for out in outputs]
    assert all(printed), outputs  # every worker ran trials
    assert set.union(*printed) == {t.number for t in finished}
    assert sum(map(len, printed)) == trials  # no trial run by two workers
    assert len({t.user_attrs["worker"] for t in finished}) == len(outputs)

    folders = sorted(p.name for p in (runs / study).iterdir() if p.is_dir())
    assert folders == sorted(f"trial-{t.number:04d}" for t in finished)
    for t in finished:
        run_dir = Path(t.user_attrs["run_dir"])
        card = json.loads((run_dir / "trial.json").read_text())
        assert card["trial"] == t.number and card["state"] == t.state.name.lower()
        rows = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
        assert rows == t.user_attrs["evals"] == card["evals"]  # no evaluation lost
        assert t.intermediate_values == {row["steps"]: row["regret_perfect"] for row in rows}
        config = json.loads((run_dir / "config.json").read_text())
        assert config["command"] == t.user_attrs["command"]
        if t.state == TrialState.COMPLETE:
            assert t.value == rows[-1]["regret_perfect"] == t.user_attrs["final"]["regret_perfect"]
            assert rows[-1]["steps"] == 256


def two_workers(url: str | None, runs: Path, study: str, trials: int) -> None:
    extra = ["--trials", str(trials)] + ([] if url is None else ["--storage", url])
    space = runs / "space.toml"
    runs.mkdir(parents=True, exist_ok=True)
    space.write_text(TINY_SPACE)
    args = tune_args(study, runs, *extra, "--space", str(space))
    workers = [start_worker(args), start_worker(args)]
    outputs = [finish(worker)[0] for worker in workers]
    check_shared_study(url or f"sqlite:///{runs / 'optuna.db'}", runs, study, trials, outputs)


@pytest.mark.slow
def test_two_workers_share_a_sqlite_study(tmp_path: Path) -> None:
    two_workers(None, tmp_path / "runs", "pair", trials=4)


# --- PostgreSQL ---------------------------------------------------------------------------


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server of its own in a temporary folder, on a free local port, stopped
    afterwards. As root (CI) it runs as the ``postgres`` user: PostgreSQL refuses root."""
    bindir = postgres_bin()
    if bindir is None or not (bindir / "pg_ctl").exists():
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl) found: apt-get install postgresql")
    # in /tmp itself: the postgres user must reach it (TMPDIR may be under /root)
    folder = Path(
        tempfile.mkdtemp(prefix="buttonup-pg-", dir="/tmp" if Path("/tmp").is_dir() else None)
    )
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user to run PostgreSQL as")
        os.chown(folder, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", free_port()

    def pg(*args: str | Path) -> None:
        subprocess.run([*as_user, *map(str, args)], check=True, capture_output=True, timeout=120)

    pg(bindir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
    pg(bindir / "pg_ctl", "-D", data, "-l", folder / "server.log", "-w", "-o", options, "start")
    try:
        pg(bindir / "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "tune")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/tune"
    finally:
        pg(bindir / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_two_workers_share_a_postgresql_study(postgres_url: str, tmp_path: Path) -> None:
    two_workers(postgres_url, tmp_path / "runs", "pair", trials=4)


# --- a worker killed mid-trial ------------------------------------------------------------


def folder_state(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_a_worker_killed_mid_trial_leaves_it_failed_and_the_study_goes_on(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    args = tune_args("killed", runs, "--seeds", "2", steps=512)
    victim = start_worker(args)
    first = runs / "killed" / "trial-0000"
    deadline = time.monotonic() + 300
    while not (first / "checkpoints" / "latest.json").exists():  # mid-trial (.pt, then .json)
        assert victim.poll() is None, victim.communicate()
        assert time.monotonic() < deadline, "no checkpoint after 300 s"
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.communicate()
    url = f"sqlite:///{runs / 'optuna.db'}"
    (killed,) = load("killed", url).get_trials()
    assert killed.state == TrialState.RUNNING  # until a worker sees its heartbeat stop
    left = folder_state(first)

    out, _ = finish(start_worker(args))  # the same command, on the same storage
    trials = load("killed", url).get_trials()
    assert trials[0].state == TrialState.FAIL and trials[0].number == killed.number
    assert trials[0].user_attrs == killed.user_attrs  # failed as it was left, not retried
    assert f"trial {killed.number} of {killed.user_attrs['worker']} sent no heartbeat" in out
    finished = [t for t in trials if t.state in FINISHED]
    assert len(finished) == 2 and len(trials) == 3
    assert sorted(t.user_attrs["seed"] for t in finished) == [0, 1]  # seed 0 ran again, anew
    assert folder_state(first) == left  # the killed trial's folder is left as it was
    assert {int(n) for n, _ in PROGRESS.findall(out)} == {t.number for t in finished}


# --- in one process: pruning, resuming, refusals ------------------------------------------


@pytest.fixture(scope="module")
def tune(training_script: Callable[[str], ModuleType]) -> ModuleType:
    return training_script("tune")


@pytest.mark.slow
def test_a_pruned_trial_stops_its_training_and_resume_goes_on(
    tune: ModuleType,
    training_script: Callable[[str], ModuleType],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    runs, space = tmp_path / "runs", tmp_path / "space.toml"
    space.write_text(TINY_SPACE)
    url = f"sqlite:///{runs / 'optuna.db'}"
    # a pruner that stops every trial at its first evaluation after step 0
    stop_at_once = optuna.pruners.ThresholdPruner(upper=0.0, n_warmup_steps=1)
    studies = training_script("studies")  # where tune's studies get their pruner
    monkeypatch.setattr(studies, "make_pruner", lambda _: stop_at_once)
    args = tune_args("cut", runs, "--trials", "1", "--space", str(space), steps=512)
    tune.main([a for a in args if a != "--no-exploitability"])
    out = capsys.readouterr().out
    (trial,) = load("cut", url).get_trials()
    assert trial.state == TrialState.PRUNED
    assert re.search(r"^trial 0 pruned at step 128 .*\[1/1 finished\]", out, re.M), out
    run_dir = Path(trial.user_attrs["run_dir"])
    assert json.loads((run_dir / "checkpoints" / "latest.json").read_text())["steps"] == 128
    assert not (run_dir / "final.onnx").exists()  # training stopped there
    assert trial.user_attrs["final"]["steps"] == 128
    assert "exploitability" not in trial.user_attrs["final"]
    assert json.loads((run_dir / "trial.json").read_text())["state"] == "pruned"

    monkeypatch.undo()  # the median pruner: it waits for 5 complete trials
    tune.main(["--study", "cut", "--resume", "--trials", "2", "--runs-dir", str(runs)])
    out = capsys.readouterr().out
    trials = load("cut", url).get_trials()
    assert [t.state for t in trials] == [TrialState.PRUNED, TrialState.COMPLETE]
    final = trials[1].user_attrs["final"]
    assert final["steps"] == 512 and 0 < final["exploitability"] < 20
    assert f"exploitability {final['exploitability']:.2f}" in out
    assert "study cut: 1 complete, 1 pruned, 0 failed; best: trial 1" in out
    assert "report: python training/report.py --study cut --runs-dir " in out


def make_space(text: str) -> Callable[[Path], list[str]]:
    def args(tmp_path: Path) -> list[str]:
        (tmp_path / "space.toml").write_text(text)
        return ["--trials", "2", "--space", str(tmp_path / "space.toml")]

    return args


def space_file(make: Callable[[Path], object]) -> Callable[[Path], list[str]]:
    """A space file that ``make`` makes at the path it is given (a pipe, a large file)."""

    def args(tmp_path: Path) -> list[str]:
        make(tmp_path / "space.toml")
        return ["--trials", "2", "--space", str(tmp_path / "space.toml")]

    return args


def with_storage(url: str) -> Callable[[Path], list[str]]:
    return lambda tmp_path: [*make_space(TINY_SPACE)(tmp_path), "--storage", url]


def existing_study(tmp_path: Path) -> list[str]:
    """A study made with --steps 512, joined by a command with --steps 256."""
    (tmp_path / "space.toml").write_text(TINY_SPACE)
    args = ["--trials", "2", "--space", str(tmp_path / "space.toml")]
    (tmp_path / "runs").mkdir()
    study = optuna.create_study(
        study_name="bad", storage=f"sqlite:///{tmp_path / 'runs' / 'optuna.db'}"
    )
    tune = sys.modules["training.tune"]
    config = tune.TuneConfig(study="bad", trials=2, steps=512, space=tmp_path / "space.toml")
    study.set_user_attr("tune", tune.new_settings(config, TINY_TRAIN))
    return args


BAD_TUNE_ARGS = {
    "unknown parameter": (make_space("[learning_rat]\nlow = 1\nhigh = 2\n"), "'learning_rat'"),
    "unknown key": (make_space("[gamma]\nlow = 0.9\nhigh = 1\nlg = true\n"), "unknown key 'lg'"),
    "space not TOML": (make_space("[[[\n"), "cannot read it as TOML"),
    # a file that is not a regular one, too large or too deep: before, /dev/zero read until
    # memory ran out, a pipe blocked for ever, the last three gave a traceback
    "space a device": (
        lambda _: ["--trials", "2", "--space", "/dev/zero"],
        "--space /dev/zero: cannot read it (not a regular file",
    ),
    "space a pipe": (space_file(os.mkfifo), "space.toml: cannot read it (not a regular file"),
    "space too large": (
        space_file(lambda path: path.write_bytes(b"#" * (2 << 20))),
        "space.toml: cannot read it (larger than 1,048,576 bytes)",
    ),
    "space nested deeply": (
        make_space("x = " + "[" * 100_000 + "]" * 100_000 + "\n"),
        "cannot read it as TOML (it is nested too deeply)",
    ),
    "space with a 5,000-digit integer": (
        make_space("[n_epochs]\nlow = 1\nhigh = " + "9" * 5000 + "\n"),
        "cannot read it as TOML (a number of more than 4,300 digits)",
    ),
    "space of dotted keys 3,000 deep": (
        make_space(".".join(["opponents"] * 3000) + " = 1\n"),
        "unknown parameter 'opponents.opponents'",
    ),
    "space not UTF-8": (
        space_file(lambda path: path.write_bytes(b"\xff\xfe")),
        "cannot read it as TOML (it is not UTF-8 text)",
    ),
    "bound refused by train.py": (
        make_space("[gamma]\nchoices = [0.99, 1.5]\n"),
        "gamma = 1.5 is refused by train.py: --gamma must be in (0, 1], got 1.5",
    ),
    "parameter also after --": (
        make_space("[n_envs]\nchoices = [2, 4]\n"),
        "n_envs is also set by a flag after --",
    ),
    "not a URL": (with_storage("runs/x.db"), "is not a URL"),
    "malformed URL": (
        with_storage("nosuchdb://x"),
        "--storage nosuchdb://x is not a valid storage URL",
    ),
    "unreachable server": (
        with_storage("postgresql+psycopg://u:secret@127.0.0.1:1/db"),
        "--storage postgresql+psycopg://u:***@127.0.0.1:1/db: cannot open it (connection failed",
    ),
    "resume a missing study": (
        lambda _: ["--resume"],
        "--resume: there is no study 'bad' in sqlite:///",
    ),
    "a sweep without --trials": (lambda _: [], "give --trials N"),
    "seed after --": (lambda _: ["--trials", "2", "--", "--seed", "3"], "--seed after --"),
    "train.py flags it refuses": (
        lambda _: ["--trials", "2", "--", "--gamma", "2"],
        "the train.py flags after -- are refused: --gamma must be in (0, 1], got 2.0",
    ),
    "space with --seeds": (
        lambda _: ["--seeds", "3", "--space", "x.toml"],
        "--space is for sweeps",
    ),
    "no trials": (lambda _: ["--trials", "0"], "--trials must be >= 1, got 0"),
    "other settings": (existing_study, "was created with other settings (steps: 512 there, 256"),
}


@pytest.mark.parametrize("case", list(BAD_TUNE_ARGS))
def test_tune_refuses_bad_input_in_one_line(
    case: str, tune: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    make_args, fragment = BAD_TUNE_ARGS[case]
    extra = make_args(tmp_path)
    if "--" not in extra and "--resume" not in extra:
        extra += ["--", *TINY_TRAIN]
    args = ["--study", "bad", "--runs-dir", str(tmp_path / "runs"), "--steps", "256", *extra]
    with pytest.raises(SystemExit) as stopped:
        tune.main(args)
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert fragment in lines[0], lines[0]
    assert captured.out == ""


def test_an_unknown_train_flag_gets_tyros_error_as_train_py_does(
    tune: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The flags after -- are read as train.py reads its own: tyro names a flag it does not
    know, with status 2, before any study or folder is made."""
    runs = tmp_path / "runs"
    with pytest.raises(SystemExit) as stopped:
        tune.main(["--study", "bad", "--runs-dir", str(runs), "--trials", "2", "--", "--nosuch"])
    assert stopped.value.code == 2
    error = " ".join(line.strip("│ ") for line in capsys.readouterr().err.splitlines())
    assert "Unrecognized options: --nosuch" in error and "Traceback" not in error
    assert not runs.exists()


@pytest.mark.parametrize(("objective", "best_steps"), [("match", 2000), ("round", 1000)])
def test_a_trials_final_figures_carry_both_levels(
    objective: str, best_steps: int, tmp_path: Path, training_script: Callable[[str], ModuleType]
) -> None:
    """A trial's final figures: the last evaluation's round and match regrets, and its best
    evaluation by the figure that chose the run's best checkpoint; its progress line says the
    match regret too."""
    from training.runfolder import EvalRow, read_typed

    rows = [
        read_typed(EvalRow, evaluation_row(s, r, match_regret_perfect=m), "eval.jsonl")
        for s, r, m in ((1000, 0.05, 0.004), (2000, 0.2, 0.001), (3000, 0.3, 0.002))
    ]
    final = training_script("studies").final_figures(tmp_path, rows, False, objective)
    assert final["match_regret_perfect"] == 0.002 and final["regret_perfect"] == 0.3
    assert final["best_steps"] == best_steps
    best = next(row for row in rows if row.steps == best_steps)
    assert final["best_regret"] == best.regret_perfect
    assert final["best_match_regret"] == best.match_regret_perfect
    line = training_script("tune").figures_line(final)
    assert line.startswith("regret 0.300 at step 3,000  match regret 0.00200  win rate ")


@pytest.mark.parametrize(
    "values",
    [
        {"learning_rate": 3e-4, "clip_range": 0.1},
        {"hidden": [64, 64], "shared": False, "opponents.perfect": 0.5, "learning_rate_end": None},
        {"n_epochs": 2, "opponents.prioritized": 0.0, "critic": "pooled", "gae_lambda": 1},
    ],
)
def test_a_trial_is_a_train_config_and_its_command_gives_it(
    values: dict, tune: ModuleType, training_script: Callable[[str], ModuleType], tmp_path: Path
) -> None:
    """A trial's settings reach training as a TrainConfig (its sampled values read as their
    fields' types); the command recorded with it, run by train.py, trains that same config."""
    config_module, search_space = training_script("config"), training_script("search_space")
    settings = {"train_args": TINY_TRAIN, "preset": "quick", "steps": 256}
    config = config_module.resolve(
        search_space.with_settings(search_space.base_config(settings, 3), values, "trial 0")
    )
    assert config.seed == 3 and config.total_steps == 256 and config.n_envs == 2
    for name, value in values.items():
        *nested, last = name.split(".")
        held = getattr(config.opponents if nested else config, last)
        assert held == (tuple(value) if isinstance(value, list) else value), name
    flags = training_script("runfolder").train_flags(config)
    assert config_module.resolve(config_module.parse_config(flags)) == config


def test_a_sampled_value_of_the_wrong_type_names_the_setting(
    training_script: Callable[[str], ModuleType],
) -> None:
    config_module, search_space = training_script("config"), training_script("search_space")
    base = config_module.TrainConfig()
    for values, says in (
        ({"hidden": ["64"]}, "trial 7: hidden[0] is '64'; it must be a whole number"),
        ({"n_steps": 16.5}, "trial 7: n_steps is 16.5; it must be a whole number"),
        ({"opponents.newest": "x"}, "trial 7: opponents.newest is 'x'; it must be a finite"),
        ({"turbo": 1}, "trial 7: turbo is not a field of TrainConfig"),
    ):
        with pytest.raises(ValueError, match=re.escape(says)):
            search_space.with_settings(base, values, "trial 7")


def test_a_bad_study_name_is_refused_from_the_command_line(tmp_path: Path) -> None:
    done = run(TUNE, "--study", "a/b", "--trials", "1", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: --study 'a/b': use letters, digits, '.', '_' and '-' (a folder name)"
    ]
    assert not (tmp_path / "runs").exists()


def test_the_default_space_fits_the_default_training(
    tune: ModuleType, training_script: Callable[[str], ModuleType]
) -> None:
    search_space = training_script("search_space")
    space = search_space.load_space(search_space.DEFAULT_SPACE)
    defaults = search_space.tunable_defaults()
    assert set(space) <= set(defaults)
    config = tune.TuneConfig(study="default", trials=1)
    preset = training_script("config").PRESETS[config.preset]  # fills what train.py leaves
    for name, spec in space.items():  # the space is around the defaults: it contains each
        default = preset[name] if defaults[name] is None else defaults[name]
        if "choices" in spec:
            assert (list(default) if isinstance(default, tuple) else default) in spec["choices"]
        else:
            assert spec["low"] <= default <= spec["high"], name
    settings = tune.new_settings(config, [])  # checks every bound against train.py
    assert settings["space"] == space and settings["mode"] == "sweep"


# --- training/report.py -------------------------------------------------------------------


@pytest.fixture(scope="module")
def report(training_script: Callable[[str], ModuleType]) -> ModuleType:
    return training_script("report")


def seeds_study(url: str, name: str, runs: int, rng: np.random.Generator) -> list[dict]:
    """A finished many-seed study with made-up figures (no training); returns the finals."""
    study = optuna.create_study(study_name=name, storage=url)
    study.set_user_attr("tune", {"mode": "seeds", "seeds": runs, "preset": "quick", "seed": 0})
    finals = []
    for seed in range(runs):
        evals = [
            {
                "steps": steps,
                "regret_perfect": float(rng.uniform(0.1, 2.0)),
                "match_regret_perfect": float(rng.uniform(0.0001, 0.05)),
                **{
                    f"win_rate_{bot}": float(rng.uniform())
                    for bot in ("random", "greedy", "perfect")
                },
            }
            for steps in (0, 1000, 2000)
        ]
        final = {k: v for k, v in evals[-1].items() if k != "steps"}
        for row in evals:  # the rest of a periodic evaluation, as train.py writes one
            row |= {"minutes": 0.0, "regret_random": 0.5, "regret_greedy": 0.5}
            row["regret_by_move_perfect"] = [row["regret_perfect"]] * 8
        if seed > 0:  # one run without the exploitability: it is left out of that figure only
            final["exploitability"] = float(rng.uniform(1, 8))
        finals.append(final)
        study.add_trial(
            optuna.trial.create_trial(
                value=final["regret_perfect"],
                user_attrs={"final": final, "evals": evals, "seed": seed, "place": seed},
            )
        )
    study.add_trial(optuna.trial.create_trial(state=TrialState.FAIL))  # not counted
    return finals


def rliable_iqm(values: list[float], reps: int) -> tuple[float, float, float]:
    from rliable import library as rly
    from rliable import metrics

    np.random.seed(0)  # rliable 1.2 resamples with np.random.choice (see report.bootstrap_seed)
    point, interval = rly.get_interval_estimates(
        {"x": np.array(values).reshape(-1, 1)},
        lambda scores: np.array([metrics.aggregate_iqm(scores)]),
        reps=reps,
    )
    return float(point["x"][0]), float(interval["x"][0, 0]), float(interval["x"][1, 0])


# slow: two studies' runs bootstrapped twice, by report.py and by rliable; the report of run
# folders below stays in the default suite
@pytest.mark.slow
def test_report_of_many_seed_studies_matches_rliable(
    report: ModuleType, tmp_path: Path, training_script: Callable[[str], ModuleType]
) -> None:
    url = f"sqlite:///{tmp_path / 'fixture.db'}"
    rng = np.random.default_rng(7)
    finals = {"a": seeds_study(url, "a", 7, rng), "b": seeds_study(url, "b", 5, rng)}
    out = tmp_path / "report"
    report.main(["--study", "a", "b", "--storage", url, "--out", str(out), "--reps", "100"])
    table = (out / "report.md").read_text()
    figures = json.loads((out / "report.json").read_text())["figures"]
    assert "match_exploitability" not in figures  # no run measured it: no row
    for key, label in training_script("seeds_report").FIGURES.items():
        if key == "match_exploitability":
            continue
        for group, runs in finals.items():
            values = [final[key] for final in runs if key in final]
            iqm, low, high = rliable_iqm(values, reps=100)
            entry = figures[key][group]
            assert entry["runs"] == len(values) == (len(runs) - (key == "exploitability"))
            assert entry["iqm"] == pytest.approx(iqm) and entry["ci95"] == pytest.approx(
                [low, high]
            )
            scale, digits = (100, 1) if key.startswith("win_rate") else (1, 3)
            digits = 5 if key == "match_regret_perfect" else digits
            shown = [f"{scale * v:.{digits}f}" for v in (iqm, low, high)]
            row = f"| {label} | {group} | {len(values)} | {shown[0]} | {shown[1]} to {shown[2]} |"
            assert row in table, row
    assert "- a: seeds [0, 1, 2, 3, 4, 5, 6]" in table
    for name in ("curves.png", "final.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def evaluation_row(steps: int, regret: float, **figures: float) -> dict:
    """A periodic evaluation as train.py writes one in eval.jsonl, with ``figures`` set."""
    row = {"steps": steps, "minutes": 0.0, "regret_perfect": regret,
           "regret_by_move_perfect": [regret] * 8, "win_rate_perfect": 0.0}  # fmt: skip
    for bot in ("random", "greedy"):
        row |= {f"win_rate_{bot}": 0.5, f"regret_{bot}": 0.5}
    return row | figures


def test_report_of_run_folders_reads_their_last_evaluation(
    report: ModuleType, tmp_path: Path
) -> None:
    group = tmp_path / "group"
    regrets = [0.5, 0.3, 0.9]
    for index, regret in enumerate([*regrets, 0.1]):
        run = group / f"run{index}"
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"seed": index}))
        rows = [
            evaluation_row(s, regret + (1000 - s) / 1000, win_rate_greedy=0.25)
            for s in (0, 500, 1000)
        ]
        (run / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        if index < len(regrets):  # the last one did not finish: left out
            (run / "final.onnx").write_bytes(b"")
    out = tmp_path / "report"
    report.main(["--runs", str(group), "--out", str(out), "--reps", "200", "--no-exploitability"])
    figures = json.loads((out / "report.json").read_text())["figures"]
    assert set(figures) == {
        "regret_perfect",
        "win_rate_random",
        "win_rate_greedy",
        "win_rate_perfect",
        "time_to_quality",
    }
    entry = figures["regret_perfect"]["group"]
    assert entry["runs"] == 3 and entry["median"] == pytest.approx(0.5)
    assert entry["iqm"] == pytest.approx(rliable_iqm(regrets, reps=200)[0])


def test_report_of_run_folders_says_when_each_regret_level_was_reached(
    report: ModuleType, tmp_path: Path
) -> None:
    """The first periodic evaluation at or below 0.1, 0.05, 0.02 and 0.01, in minutes and steps."""
    run = tmp_path / "group" / "run0"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"seed": 4}))
    regrets = [(0, 0.0, 0.9), (500, 1.5, 0.08), (1000, 3.0, 0.05), (1500, 4.5, 0.012)]
    rows = [
        evaluation_row(s, r, minutes=m, win_rate_random=1.0, win_rate_greedy=1.0,
                       win_rate_perfect=0.4)
        for s, m, r in regrets
    ]  # fmt: skip
    (run / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (run / "final.onnx").write_bytes(b"")
    out = tmp_path / "report"
    args = ["--runs", str(tmp_path / "group"), "--out", str(out), "--reps", "50"]
    report.main([*args, "--no-exploitability"])
    quality = json.loads((out / "report.json").read_text())["figures"]["time_to_quality"]
    assert quality["group"]["run0"] == {
        "0.1": {"steps": 500, "minutes": 1.5},
        "0.05": {"steps": 1000, "minutes": 3.0},
        "0.02": {"steps": 1500, "minutes": 4.5},
        "0.01": None,
    }
    text = (out / "report.md").read_text()
    assert "| group | run0 | 4 | 1.5 min (0.0M) | 3.0 min (0.0M) | 4.5 min (0.0M) | - |" in text
    assert (out / "time_to_quality.png").read_bytes()[:4] == b"\x89PNG"


def test_report_of_match_runs_gives_the_match_regret_and_its_time_to_quality(
    report: ModuleType, tmp_path: Path
) -> None:
    """Runs whose evaluations measured the match regret: its IQM in the table (five decimals)
    beside the round regret, and a time-to-quality table of its own."""
    group = tmp_path / "group"
    match_regrets = [0.0030, 0.0008, 0.0001]
    for index, last in enumerate(match_regrets):
        run = group / f"run{index}"
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"seed": index, "objective": "match"}))
        rows = [
            evaluation_row(s, 0.2, minutes=s / 1000, match_regret_perfect=m,
                           match_regret_random=0.01, match_regret_greedy=0.01)
            for s, m in ((0, 0.05), (1000, 0.0015), (2000, last))
        ]  # fmt: skip
        (run / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        (run / "final.onnx").write_bytes(b"")
    out = tmp_path / "report"
    report.main(["--runs", str(group), "--out", str(out), "--reps", "200", "--no-exploitability"])
    figures = json.loads((out / "report.json").read_text())["figures"]
    entry = figures["match_regret_perfect"]["group"]
    iqm, low, high = rliable_iqm(match_regrets, reps=200)
    assert entry["runs"] == 3 and entry["iqm"] == pytest.approx(iqm)
    text = (out / "report.md").read_text()
    label = "match regret against the perfect bot (winning probability per decision)"
    assert f"| {label} | group | 3 | {iqm:.5f} | {low:.5f} to {high:.5f} |" in text
    quality = figures["time_to_quality_match"]["group"]
    assert quality["run0"] == {
        "0.002": {"steps": 1000, "minutes": 1.0},
        "0.001": None,
        "0.0005": None,
        "0.0002": None,
    }
    assert quality["run2"]["0.0002"] == {"steps": 2000, "minutes": 2.0}
    assert "## Time to quality (the match)" in text
    assert "| group | run1 | 1 | 1.0 min (0.0M) | 2.0 min (0.0M) | - | - |" in text


def test_report_measures_the_match_exploitability_when_asked(
    report: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    linear_policy: Callable,
    capsys: pytest.CaptureFixture,
) -> None:
    """--match-exploitability: the policy each run hands over (averaged.onnx where it wrote one,
    else final.onnx: the test below) measured exactly (here a stand-in for the minute it
    takes), in the table; refused without run folders."""
    import buttonup_env.players.best_response as best_response

    measured = []

    def stand_in(player: object) -> float:
        measured.append(player)
        return 0.0125

    monkeypatch.setattr(best_response, "match_exploitability", stand_in)
    run = tmp_path / "group" / "run0"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"seed": 0, "objective": "match"}))
    row = evaluation_row(1000, 0.2, match_regret_perfect=0.001)
    (run / "eval.jsonl").write_text(json.dumps(row) + "\n")
    linear_policy(run / "final.onnx", "match-afterstates", 3)
    out = tmp_path / "report"
    args = ["--runs", str(tmp_path / "group"), "--out", str(out), "--reps", "50"]
    report.main([*args, "--no-exploitability"])
    assert measured == []  # not asked: not measured
    figures = json.loads((out / "report.json").read_text())["figures"]
    assert "match_exploitability" not in figures
    linear_policy(run / "averaged.onnx", "match-afterstates", 4)  # the policy training names
    report.main([*args, "--no-exploitability", "--match-exploitability", "--force"])
    assert len(measured) == 1 and measured[0].encoding.name == "match-afterstates"
    assert Path(measured[0].path).name == "averaged.onnx"  # not final.onnx beside it
    figures = json.loads((out / "report.json").read_text())["figures"]
    assert figures["match_exploitability"]["group"]["iqm"] == pytest.approx(0.0125)
    assert (
        "| match exploitability (winning probability) | group | 1 | 0.0125 |"
        in (out / "report.md").read_text()
    )
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        report.main(["--study", "x", "--match-exploitability"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "error: --match-exploitability measures the policies of run folders: give --runs FOLDER"
    )


def test_a_run_hands_over_its_averaged_policy_or_else_its_final_one(tmp_path: Path) -> None:
    """What report.py and tune.py measure of a run: averaged.onnx where training wrote one,
    final.onnx in a run without it (--average-last 0, or a run older than the file)."""
    from training.studies import handed_over

    (tmp_path / "final.onnx").write_bytes(b"")
    assert handed_over(tmp_path) == tmp_path / "final.onnx"
    (tmp_path / "averaged.onnx").write_bytes(b"")
    assert handed_over(tmp_path) == tmp_path / "averaged.onnx"


def report_run(tmp_path: Path) -> Path:
    """A train.py run folder (no trial.json) in tmp_path/group, without its final policy."""
    run = tmp_path / "group" / "run0"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"seed": 0}))
    row = evaluation_row(1000, 0.2, win_rate_random=1.0, win_rate_greedy=1.0, win_rate_perfect=0.2)
    (run / "eval.jsonl").write_text(json.dumps(row) + "\n")
    return run


# slow: the shipped agent measured exactly; the report's path with a stand-in measure stays in
# the default suite (test_report_measures_the_match_exploitability_when_asked)
@pytest.mark.slow
def test_report_of_run_folders_measures_their_exploitability(
    report: ModuleType, tmp_path: Path
) -> None:
    """A train.py run folder has no trial.json: the report measures its final policy as
    tune.py does for a trial."""
    from buttonup_env.players.shipped import shipped_policy_path

    run = report_run(tmp_path)
    shutil.copy(shipped_policy_path("buttonup-ppo"), run / "final.onnx")
    out = tmp_path / "report"
    report.main(["--runs", str(tmp_path / "group"), "--out", str(out), "--reps", "50"])
    entry = json.loads((out / "report.json").read_text())["figures"]["exploitability"]["group"]
    card = json.loads(shipped_policy_path("buttonup-ppo").with_suffix(".json").read_text())
    expected = card["exploitability"]["exploitability"]  # the exact figure, computed at export
    assert entry["runs"] == 1 and entry["iqm"] == pytest.approx(expected)


def test_report_of_a_run_folder_whose_policy_is_not_one_stops(
    report: ModuleType, tmp_path: Path
) -> None:
    """A final policy that is not a policy: the report stops with status 2 before measuring."""
    run = report_run(tmp_path)
    (run / "final.onnx").write_bytes(b"not a policy")
    with pytest.raises(SystemExit) as stop:
        report.main(["--runs", str(tmp_path / "group"), "--out", str(tmp_path / "report")])
    assert stop.value.code == 2


def rated_run(folder: Path, linear_policy: Callable) -> Path:
    """A finished run folder with three snapshots: two random linear policies and the shipped
    agent, and periodic evaluations that logged a rating."""
    from buttonup_env.players.shipped import shipped_policy_path

    run = folder / "run0"
    (run / "snapshots").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"seed": 0}))
    rows = [
        evaluation_row(s, 1.0 - s / 400, win_rate_perfect=0.1, elo=100.0 + s, elo_low=50.0 + s,
                       elo_high=150.0 + s)
        for s in (0, 100, 200)
    ]  # fmt: skip
    (run / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    linear_policy(run / "snapshots" / "step_000000000.onnx", "afterstates", 1)
    linear_policy(run / "snapshots" / "step_000000100.onnx", "ring", 2)
    shutil.copy(shipped_policy_path("buttonup-ppo"), run / "snapshots" / "step_000000200.onnx")
    shutil.copy(shipped_policy_path("buttonup-ppo"), run / "final.onnx")
    return run


@pytest.mark.slow  # ladder matches for three snapshots and the reference rating
def test_report_rates_a_runs_snapshots_against_the_ladder(
    report: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linear_policy: Callable
) -> None:
    """--ratings: every snapshot's rating against the ladder beside its exploitability (a
    stand-in here; the real one is tested in test_exploit.py), the rank correlation, the
    picture, and the figures kept in the run folder for the next report."""
    import scipy.stats

    from buttonup_env.players import exploit
    from buttonup_env.players.league import rate_against_ladder

    run = rated_run(tmp_path / "group", linear_policy)
    measured: list[str] = []
    made_up = {"step_000000000.onnx": 9.0, "step_000000100.onnx": 6.0, "step_000000200.onnx": 0.1}

    def exploitability(policy: object) -> object:
        measured.append(policy.path.name)  # type: ignore[attr-defined]
        return type("Result", (), {"exploitability": made_up[policy.path.name]})()  # type: ignore[attr-defined]

    monkeypatch.setattr(exploit, "exploitability", exploitability)
    out = tmp_path / "report"
    args = ["--runs", str(run), "--out", str(out), "--reps", "50", "--no-exploitability",
            "--ratings", "--ladder", "random", "greedy", "perfect",
            "--ladder-matches", "60"]  # fmt: skip
    report.main(args)
    figures = json.loads((out / "report.json").read_text())["figures"]["ratings"]["run0"]
    rows = figures["snapshots"]
    assert [row["steps"] for row in rows] == [0, 100, 200]
    assert measured == [row["snapshot"] for row in rows]
    expected = rate_against_ladder(run / "snapshots" / "step_000000200.onnx",
                                   ("random", "greedy", "perfect"), 60, seed=0)  # fmt: skip
    assert {k: rows[2][k] for k in expected} == expected
    assert rows[2]["elo"] > max(rows[0]["elo"], rows[1]["elo"])  # the shipped agent is strong
    elo, exploits = [r["elo"] for r in rows], [r["exploitability"] for r in rows]
    assert figures["spearman"] == pytest.approx(scipy.stats.spearmanr(elo, exploits).statistic)
    table = (out / "report.md").read_text()
    assert "## Ratings against the ladder" in table
    assert "| step_000000200.onnx | 200 | " in table and "| 0.100 |" in table
    assert (out / "ratings-run0.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    report.main([*args, "--force"])  # kept in the run folder: nothing measured again
    assert len(measured) == 3
    report.main([*args[:-1], "90", "--force"])  # other settings: measured again
    assert len(measured) == 6
    kept = [json.loads(line) for line in (run / "ratings.jsonl").read_text().splitlines()]
    assert [row["ladder_matches"] for row in kept] == [90, 90, 90]


def test_report_ratings_refuse_bad_arguments(
    report: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    for args, fragment in (
        (["--study", "x", "--ratings"], "--ratings rates the snapshots of run folders"),
        (["--runs", str(tmp_path), "--ratings", "--ladder", "random"], "at least two players"),
        (["--runs", str(tmp_path), "--ratings", "--ladder-matches", "2"], "at least 6, got 2"),
    ):
        with pytest.raises(SystemExit) as stopped:
            report.main(args)
        assert stopped.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], lines


def test_report_of_a_sweep_lists_the_best_trials_and_the_parameters(
    report: ModuleType, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'fixture.db'}"
    study = optuna.create_study(study_name="sweep", storage=url)
    study.set_user_attr("tune", {"mode": "sweep", "space": {"learning_rate": {}, "clip_range": {}}})
    distributions = {
        "learning_rate": optuna.distributions.FloatDistribution(1e-4, 1e-3, log=True),
        "clip_range": optuna.distributions.CategoricalDistribution([0.1, 0.2]),
    }
    for number, (rate, clip, regret) in enumerate(
        [(1e-4, 0.1, 0.9), (2e-4, 0.2, 0.5), (4e-4, 0.1, 0.3), (8e-4, 0.2, 0.7), (6e-4, 0.1, 0.2)]
    ):
        study.add_trial(
            optuna.trial.create_trial(
                value=regret,
                params={"learning_rate": rate, "clip_range": clip},
                distributions=distributions,
                user_attrs={"final": {"win_rate_perfect": 0.1, "best_regret": regret,
                                      "best_steps": 1000}, "command": f"cmd {number}"},
            )
        )  # fmt: skip
    study.add_trial(
        optuna.trial.create_trial(
            state=TrialState.PRUNED,
            params={"learning_rate": 1e-3, "clip_range": 0.2},
            distributions=distributions,
            intermediate_values={500: 1.5},
        )
    )
    out = tmp_path / "report"
    report.main(["--study", "sweep", "--storage", url, "--out", str(out), "--top", "3"])
    table = (out / "report.md").read_text()
    assert "5 complete, 1 pruned, 0 failed trials" in table
    best = re.findall(r"^\| (\d) \| (\d) \| ([\d.]+) \|", table, re.M)
    assert best == [("1", "4", "0.200"), ("2", "2", "0.300"), ("3", "1", "0.500")]
    assert "Best trial 4: `cmd 4`" in table
    assert re.search(r"^\| clip_range \| [\d.]+ \| 0.1 \| 3 \| 0.300 \|$", table, re.M), table
    assert re.search(r"^\| learning_rate \| [\d.]+ \| below 0.0004 \| 2 \| 0.700 \|$", table, re.M)
    for name in ("history.png", "params.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_refuses_a_missing_study_or_storage(
    report: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    for args, fragment in (
        (["--study", "x", "--runs-dir", str(tmp_path)], "there is no such file"),
        ([], "give --study NAME"),
        (["--runs", str(tmp_path / "none")], "no such folder"),
    ):
        with pytest.raises(SystemExit) as stopped:
            report.main(args)
        assert stopped.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], lines


def test_the_tune_benchmark_refuses_no_repeats() -> None:
    done = run(ROOT / "benchmarks" / "bench_tune.py", "--repeats", "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--repeats must be >= 1, got 0" in done.stderr.splitlines()[-1]
