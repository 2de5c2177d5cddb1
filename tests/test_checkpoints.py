"""Run folders (training/runfolder.py, read through training/typed_json.py): nothing in a run
folder runs code, and every saved value is checked.

A tiny run is trained once; each test damages or crafts a copy of its folder and checks that
``train.py --resume`` and ``export.py`` refuse it in one sentence naming the file and the
field, with status 2, and that a crafted file's payload never runs. The commands are called
in this process (``main``), which is what their scripts run; ``tests/test_training.py`` runs
them as processes.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import io
import json
import os
import pickle
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch as th
from commands import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buttonup_env.learn.round_starts import RoundStartValues

ROOT = Path(__file__).resolve().parent.parent
TINY = [
    "--preset", "smoke",
    "--threads", "1",
    "--workers", "1",
    "--n-envs", "2",
    "--n-steps", "64",
    "--batch-size", "64",
    "--hidden", "16", "16",
    "--snapshot-every", "128",
    "--eval-every", "128",
    "--checkpoint-every", "128",
    "--eval-matches", "2",
    "--final-eval-matches", "2",
    "--total-steps", "256",
    "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny run with the batched env: its latest checkpoint has a resume point."""
    runs = tmp_path_factory.mktemp("runs")
    done = run(ROOT / "training" / "train.py", *TINY, "--runs-dir", runs, "--run-name", "tiny")
    assert done.returncode == 0, done.stderr[-3000:]
    return runs / "tiny"


@pytest.fixture
def copy(run_dir: Path, tmp_path: Path) -> Path:
    """A copy of the tiny run to damage."""
    return Path(shutil.copytree(run_dir, tmp_path / "copy"))


def refused(main: Callable[[list[str]], Any], argv: list[str], capsys: Any) -> str:
    """The one error line of a command that refuses ``argv`` with status 2 (and prints
    nothing else)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    out, err = capsys.readouterr()
    assert stopped.value.code == 2, (out, err)
    assert out == "" and err.count("\n") == 1 and err.startswith("error: "), (out, err)
    return err.strip()


def test_a_save_killed_before_its_rename_leaves_a_pair_that_resumes(
    copy: Path, tmp_path: Path
) -> None:
    """A save writes NAME.next.pt, then NAME.json, then renames the .pt: killed before the
    rename, latest.json goes with latest.next.pt. Export finds that file by its SHA-256, and
    --resume finishes the save (the rename) and goes on."""
    folder = copy / "checkpoints"
    (folder / "latest.pt").rename(folder / "latest.next.pt")
    (folder / "latest.pt").write_bytes(b"the tensors of the checkpoint before")
    committed = hashlib.sha256((folder / "latest.next.pt").read_bytes()).hexdigest()
    assert json.loads((folder / "latest.json").read_text())["weights_sha256"] == committed
    out = tmp_path / "latest.onnx"
    no_matches = ["--random-matches", "0", "--greedy-matches", "0", "--perfect-matches", "0"]
    no_matches += ["--margin-matches", "0", "--audit-scores", "none"]
    export = ROOT / "training" / "export.py"
    done = run(export, copy, "--which", "latest", "--out", out, *no_matches, "--no-best-response")
    assert done.returncode == 0, done.stderr
    assert out.is_file()
    done = run(ROOT / "training" / "train.py", "--resume", copy)
    assert done.returncode == 0, done.stderr
    assert not (folder / "latest.next.pt").exists()
    assert hashlib.sha256((folder / "latest.pt").read_bytes()).hexdigest() == committed


def test_a_save_killed_before_its_json_leaves_the_pair_before_it(copy: Path) -> None:
    """Killed before latest.json is replaced, the save left only latest.next.pt: the old pair
    stands, and --resume removes the unfinished file."""
    folder = copy / "checkpoints"
    (folder / "latest.next.pt").write_bytes(b"half of the next checkpoint")
    before = (folder / "latest.pt").read_bytes()
    done = run(ROOT / "training" / "train.py", "--resume", copy)
    assert done.returncode == 0, done.stderr
    assert not (folder / "latest.next.pt").exists()
    assert json.loads((folder / "latest.json").read_text())["weights_sha256"] == (
        hashlib.sha256(before).hexdigest()
    )


def edit_json(path: Path, edit: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def set_at(data: dict, where: str, value: object) -> None:
    """Set ``data[a][b][i]...`` for ``where`` = ``"a.b.i"`` (numbers index lists)."""
    *parents, last = where.split(".")
    for key in parents:
        data = data[int(key)] if isinstance(data, list) else data[key]
    if isinstance(data, list):
        data[int(last)] = value
    elif value is DELETE:
        del data[last]
    else:
        data[last] = value


DELETE = object()


def write_tensors(path: Path, tensors: object) -> None:
    """Write ``tensors`` as ``path`` (a NAME.pt) and the matching hash into NAME.json, as an
    attacker who rewrites both files would."""
    buffer = io.BytesIO()
    th.save(tensors, buffer)
    write_weights_bytes(path, buffer.getvalue())


def write_weights_bytes(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    edit_json(
        path.with_suffix(".json"),
        lambda s: s.update(weights_sha256=hashlib.sha256(data).hexdigest()),
    )


def saved_tensors(path: Path) -> dict:
    return th.load(path, map_location="cpu", weights_only=True)


# --- every saved field is checked on resume --------------------------------------------------

CONFIG_DAMAGE: dict[str, tuple[str, object, str]] = {
    # name: (the field of config.json, its damaged value, what the error line says)
    "a string for a number": (
        "n_envs",
        "2",
        "config.json: n_envs is '2'; it must be a whole number",
    ),
    "true for a number": ("total_steps", True, "config.json: total_steps is True"),
    "a float for a whole number": ("n_steps", 64.5, "config.json: n_steps is 64.5"),
    "a layer size of text": ("hidden.1", "16", "config.json: hidden[1] is '16'"),
    "an infinite rate": ("learning_rate", float("inf"), "learning_rate is inf; it must be a fin"),
    "an unknown encoding": (
        "encoding",
        "slots",
        "config.json: encoding is 'slots'; it must be one of",
    ),
    "an unknown critic": ("critic", "twin", "config.json: critic is 'twin'; it must be one of"),
    "gamma above 1": ("gamma", 1.5, "--gamma must be in (0, 1], got 1.5"),
    "a batch larger than a rollout": ("batch_size", 100_000, "--batch-size 100000 is larger"),
    "a negative seed": (
        "seed",
        -1,
        "config.json: seed is -1; it must be a whole number from 0 to 2**32 - 1",
    ),
    "a seed numpy cannot take": ("seed", 2**40, "config.json: seed is 1099511627776; it must"),
    "no layers": ("hidden", [], "--hidden needs 1 to 16 layer sizes, got 0"),
    "too many layers": ("hidden", [4] * 17, "--hidden needs 1 to 16 layer sizes, got 17"),
    "a layer too wide": ("hidden.0", 16_385, "hidden[0] is 16385; it must be a whole number"),
    "steps no run takes": (
        "total_steps",
        10**30,
        "total_steps is 1000000000000000000000000000000; it must be a whole number from 1 to "
        "10,000,000,000",
    ),
    "epochs no run takes": ("n_epochs", 10**12, "n_epochs is 1000000000000; it must be a whole"),
    "more threads than the machine can run": (
        "threads",
        100_000,
        "config.json: threads is 100000; it must be a whole number from 1 to",
    ),
    "evaluation matches no run plays": ("eval_matches", 10**12, "eval_matches is 1000000000000"),
    "ladder matches no run plays": ("ladder_matches", 10**12, "ladder_matches is 1000000000000"),
    "a snapshot every step": (
        "snapshot_every",
        1,
        "config.json: snapshot_every is 1; it must be a whole number from 64 to",
    ),
    "a checkpoint every step": ("checkpoint_every", 1, "checkpoint_every is 1; it must be"),
    "more snapshots than a disk should hold": (
        "total_steps",
        10**9,
        "--snapshot-every 128 would make 7,812,500 snapshots in --total-steps 1000000000, more "
        "than the 10,000 a run may make",
    ),
    "a time budget of years": ("minutes", 10**6, "minutes is 1000000; it must be a finite number"),
    "a pool too large": ("opponents.max_snapshots", 10**6, "max_snapshots must be from 1 to 1,000"),
    "a run name with a path in it": ("run_name", "../x", "run_name is '../x'; it must be a folder"),
    "a ladder player with escape codes": (
        "ladder.0",
        "random\x1b[2J",
        "ladder[0] is 'random\\x1b[2J'; it must be a player's name or path",
    ),
    "a code version with escape codes": (
        "code_version",
        "buttonup-env 0.1.0 (\x1b]0;x\x07)",
        "config.json: code_version is 'buttonup-env 0.1.0 (\\x1b]0;x\\x07)'; it must be a version",
    ),
    "a negative opponent weight": ("opponents.perfect", -1, "opponent weights must be finite"),
    "an unknown opponent setting": (
        "opponents.bots",
        1,
        "config.json: opponents.bots is not a field of OpponentMix",
    ),
    "a missing setting": ("reward", DELETE, "config.json: reward is missing"),
    "an unknown setting": ("turbo", True, "config.json: turbo is not a field of RunConfig"),
    "an unknown setting with a newline": (
        "\n",
        True,
        "config.json: '\\n' is not a field of RunConfig",
    ),
    "a saved resume": ("resume", "elsewhere", "config.json: resume is 'elsewhere'"),
    "no command": ("command", DELETE, "config.json: command is missing"),
    "a network too large to build": (
        "hidden",
        [16_384, 16_384],
        "--hidden 16384 16384: its network would have",
    ),
    "a rollout too large to hold": (
        "n_envs",
        65_536,
        "--n-envs 65536 x --n-steps 64 would hold 14,495,514,624 bytes",
    ),
    "other envs than the saved games": (
        "n_envs",
        4,
        "restored from progress.resume.env: the saved state is of 2 envs; this batch has 4",
    ),
}

R = "progress.resume"
GAMES = f"the saved games cannot be restored from {R}.env: the saved state"
STATE_DAMAGE: dict[str, tuple[str, object, str]] = {
    # name: (the field of checkpoints/latest.json, its damaged value, what the error says)
    "steps as text": ("steps", "256", "latest.json: steps is '256'; it must be a whole number"),
    "negative training time": (
        "progress.train_seconds",
        -1,
        "latest.json: progress.train_seconds is -1; it must be a finite number >= 0",
    ),
    "an infinite training time": (
        "progress.train_seconds",
        float("inf"),
        "progress.train_seconds is inf",
    ),
    "another format": ("format", "zip", "latest.json: format is 'zip'; it must be one of"),
    "no hash": ("weights_sha256", DELETE, "latest.json: weights_sha256 is missing"),
    "a hash that is none": ("weights_sha256", "abc", "weights_sha256 is 'abc'; it must be the SHA"),
    "an unknown field": ("magic", 1, "latest.json: magic is not a field of Checkpoint"),
    "a resume of the wrong type": ("progress.resume", [1], f"latest.json: {R} is [1]; it must be"),
    "torch generator byte out of range": (
        f"{R}.torch_rng.state.17",
        300,
        f"{R}.torch_rng.state[17] is 300; it must be a whole number from 0 to 255",
    ),
    "torch generator cut short": (
        f"{R}.torch_rng.state",
        [0] * 10,
        f"{R}.torch_rng.state has 10 items; it must have 5056",
    ),
    "numpy generator position": (
        f"{R}.numpy_rng.pos",
        700,
        f"{R}.numpy_rng.pos is 700; it must be a whole number from 0 to 624",
    ),
    "numpy generator key": (f"{R}.numpy_rng.keys.5", -3, f"{R}.numpy_rng.keys[5] is -3"),
    "python generator index": (
        f"{R}.python_rng.internal.624",
        1000,
        f"{R}.python_rng.internal[624] is 1000; it must be a whole number from 0 to 624",
    ),
    "torch generator of random bytes": (
        f"{R}.torch_rng.state",
        [7] * 5056,
        f"{R}.torch_rng is not a generator state that can be restored (Invalid mt19937 state)",
    ),
    "python generator version": (f"{R}.python_rng.version", 2, f"{R}.python_rng.version is 2"),
    "a table of another kind": (
        f"{R}.round_starts",
        [1],
        f"{R}.round_starts is [1]; it must be a JSON object",
    ),
    "a table's value out of range": (
        f"{R}.round_starts.values.3",
        2.0,
        f"{R}.round_starts cannot be restored: the table's values must be from -1 to 1",
    ),
    "a table's negative count": (
        f"{R}.round_starts.counts.0",
        -1,
        f"{R}.round_starts cannot be restored: the table's counts must be from 0 to 1e+15",
    ),
    "a table's rounds cut short": (
        f"{R}.round_starts.keys",
        [0, 0, 0],
        "the table's keys must be a list of 6 whole numbers",
    ),
    "a table's rounds without their colours": (
        f"{R}.round_starts.agent",
        None,
        "the table's keys and agent must be both null or both given",
    ),
    "env generator state": (
        f"{R}.env.rng.state.state",
        -1,
        f"{GAMES}'s rng is not a generator state that can be restored (its state is -1",
    ),
    "env generator name": (
        f"{R}.env.rng.bit_generator",
        "MT19937",
        f"{GAMES}'s rng is not a generator state that can be restored (a 'MT19937' state",
    ),
    "a bot's generator missing": (
        f"{R}.env.bots.perfect",
        DELETE,
        f"{GAMES}'s bots are",
    ),
    "a negative board id": (
        f"{R}.env.arrays._board.0",
        -1,
        f"{GAMES}'s _board[0] is -1; it must be a board number from 0 to 315479",
    ),
    "a board id past the last": (
        f"{R}.env.arrays._board.1",
        315_480,
        f"{GAMES}'s _board[1] is 315480",
    ),
    "a colour that is no colour": (
        f"{R}.env.arrays._to_move.0",
        2,
        f"{GAMES}'s _to_move[0] is 2",
    ),
    "a score of text": (
        f"{R}.env.arrays._score.1",
        ["0", 0],
        f"{GAMES}'s _score[1][0] is '0'; it must be a whole number",
    ),
    "a score no match reaches": (  # 14 points, then a round of the largest margin, 18
        f"{R}.env.arrays._score.0",
        [0, 33],
        f"{GAMES}'s _score[0][1] is 33; it must be a score from 0 to 32",
    ),
    "an opponent that is not in the pool": (
        f"{R}.env.arrays._opponent.0",
        99,
        f"{GAMES}'s _opponent[0] is 99; it must be an opponent's number from 0 to 5",
    ),
    "done as a number": (
        f"{R}.env.arrays._done.0",
        1,
        f"{GAMES}'s _done[0] is 1; it must be true or false",
    ),
    "rows of different lengths": (
        f"{R}.env.arrays._score",
        [[0, 0], [0]],
        f"{GAMES}'s _score is not an array of the shape [2, 2]",
    ),
    "envs cut short": (
        f"{R}.env.arrays._agent",
        [0],
        f"{GAMES}'s _agent has the shape [1]; this batch's has [2]",
    ),
    "episode starts of another length": (
        f"{R}.episode_starts",
        [True],
        f"{R}.episode_starts has 1 items",
    ),
    "a snapshot outside the folder": (
        f"{R}.env.snapshots.0",
        "../../x.onnx",
        f"{GAMES}'s snapshots[0] is '../../x.onnx'; it must be a file name",
    ),
    "a snapshot that is gone": (
        f"{R}.env.snapshots.1",
        "step_000999999.onnx",
        "the saved games cannot be restored",
    ),
    "an unknown reset option": (
        f"{R}.env.options",
        {"colour": "R"},
        f"{GAMES}'s options hold 'colour'",
    ),
    "a result that is not a number": (
        f"{R}.env.results.step_000000000.onnx",
        ["a", 1],
        f"{GAMES}'s results['step_000000000.onnx'] is ['a', 1]; it must be two numbers >= 0",
    ),
    "another number of updates": (
        f"{R}.n_updates",
        999,
        f"{R}.n_updates is 999; the checkpoint has",
    ),
}


@pytest.mark.parametrize("case", list(CONFIG_DAMAGE))
def test_resume_refuses_a_damaged_config(
    case: str, copy: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    field, value, says = CONFIG_DAMAGE[case]
    edit_json(copy / "config.json", lambda c: set_at(c, field, value))
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert says in line, line


@pytest.mark.parametrize("case", list(STATE_DAMAGE))
def test_resume_refuses_a_damaged_state(
    case: str, copy: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    field, value, says = STATE_DAMAGE[case]
    state = copy / "checkpoints" / "latest.json"
    if field.startswith(f"{R}.env.results."):
        edit_json(
            state,
            lambda s: s["progress"]["resume"]["env"]["results"].update(
                {"step_000000000.onnx": value}
            ),
        )
    else:
        edit_json(state, lambda s: set_at(s, field, value))
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert says in line, line
    assert str(state) in line  # the file is named


def test_the_checks_take_what_training_saved(
    run_dir: Path, training_script: Callable[[str], ModuleType]
) -> None:
    """The control for the tables above: the undamaged folder passes every check."""
    factories, checkpoints = training_script("factories"), training_script("checkpoints")
    run = training_script("runfolder").RunFolder.open(run_dir)
    checkpoint = checkpoints.Checkpoints(run).read("latest")
    venv = factories.make_vec_env(run.config, run_dir)
    model = factories.make_model(run.config, venv)
    table = training_script("trainer").round_start_values(model, run.config)
    checkpoints.Checkpoints(run).load(model, checkpoint, round_starts=table)
    assert checkpoint.progress.resume.round_starts == table.get_state()  # the table is back
    with pytest.raises(training_script("runfolder").RunFolderError, match="holds a table of"):
        checkpoints.Checkpoints(run).load(model, checkpoint)  # and is not dropped silently
    assert model.num_timesteps == checkpoint.steps == 256
    assert checkpoint.progress.resume is not None
    saved = saved_tensors(run_dir / "checkpoints" / "latest.pt")
    for key, value in model.policy.state_dict().items():
        assert th.equal(value, saved["policy"][key])
    venv.close()


def test_a_model_without_tensorboard_leaves_nothing_in_the_temporary_directory(
    run_dir: Path,
    training_script: Callable[[str], ModuleType],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Workers other than worker 0 train without TensorBoard: their learn() writes no empty
    ``SB3-DATE`` folder into the temporary directory, as SB3's own logger would."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    factories = training_script("factories")
    config = training_script("runfolder").RunFolder.open(run_dir).config
    venv = factories.make_vec_env(config, run_dir)
    model = factories.make_model(config, venv)
    model.learn(config.n_envs * config.n_steps)
    venv.close()
    assert model.num_timesteps == config.n_envs * config.n_steps
    assert list(tmp_path.iterdir()) == []


TENSOR_DAMAGE: dict[str, tuple[Callable[[dict], object], str]] = {
    # name: (the damaged content of latest.pt, from the saved one; what the error says)
    "a layer of another shape": (
        lambda t: t["policy"].update({k: th.zeros(3) for k in list(t["policy"])[:1]}) or t,
        "tensor of shape [3]; the network of the run's config.json has torch.float32",
    ),
    "NaN weights": (
        lambda t: [v.fill_(float("nan")) for v in t["policy"].values()] and t,
        "holds values that are not finite",
    ),
    "a missing layer": (
        lambda t: t["policy"].pop(next(iter(t["policy"]))) is not None and t,
        "the weights lack",
    ),
    "an extra layer": (
        lambda t: t["policy"].update(extra=th.zeros(1)) or t,
        "the weights hold 'extra', which the network",
    ),
    "weights of another type": (
        lambda t: t["policy"].update({k: v.double() for k, v in t["policy"].items()}) or t,
        "is a torch.float64 tensor",
    ),
    "a moment of another shape": (
        lambda t: t["optimizer"]["state"][0].update(exp_avg=th.zeros(2)) or t,
        "optimizer.state[0].exp_avg is a torch.float32 tensor of shape [2]",
    ),
    "a negative second moment": (
        lambda t: t["optimizer"]["state"][0]["exp_avg_sq"].fill_(-1.0) is not None and t,
        "optimizer.state[0].exp_avg_sq holds negative values",
    ),
    "another optimiser setting": (
        lambda t: t["optimizer"]["param_groups"][0].update(eps=1.0) or t,
        "optimizer.param_groups[0].eps is 1.0; the run's optimiser has 1e-05",
    ),
    "a state for a parameter that does not exist": (
        lambda t: t["optimizer"]["state"].update({999: t["optimizer"]["state"][0]}) or t,
        "an optimizer.state key is 999",
    ),
    "something else than the two parts": (lambda t: [1, 2, 3], "holds 'list'"),
    "a truncated file": (
        None,
        "latest.pt cannot be loaded as a checkpoint: it holds no readable tensors",
    ),
}


@pytest.mark.parametrize("case", list(TENSOR_DAMAGE))
def test_resume_and_export_refuse_damaged_tensors(
    case: str, copy: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    damage, says = TENSOR_DAMAGE[case]
    checkpoints = copy / "checkpoints"
    for suffix in (".pt", ".json"):  # the best may predate every update: make it the latest
        shutil.copy(checkpoints / f"latest{suffix}", checkpoints / f"best{suffix}")
    for name in ("latest", "best"):
        path = checkpoints / f"{name}.pt"
        if damage is None:
            write_weights_bytes(path, path.read_bytes()[:2000])
        else:
            write_tensors(path, damage(saved_tensors(path)))
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert says in line and "latest.pt" in line, line
    out = copy / "exported.onnx"
    line = refused(
        training_script("export").main, [str(copy), "--which", "best", "--out", str(out)], capsys
    )
    assert says.replace("latest", "best") in line and "best.pt" in line, line
    assert not out.exists()


def test_a_weights_file_that_does_not_belong_to_its_state_is_refused(
    copy: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    path = copy / "checkpoints" / "latest.pt"
    tensors = saved_tensors(path)
    next(iter(tensors["policy"].values())).add_(1.0)  # other weights, the hash left as it was
    th.save(tensors, path)
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert "latest.pt is not the file its latest.json was written with" in line


def test_a_weights_file_far_larger_than_the_network_is_not_read(
    copy: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    path = copy / "checkpoints" / "latest.pt"
    tensors = saved_tensors(path)
    tensors["policy"]["padding"] = th.zeros(4_000_000)
    write_tensors(path, tensors)
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert "bytes, far more than the network of the run's config.json needs" in line


# --- crafted files: their code never runs ----------------------------------------------------


class Payload:
    """Unpickling this creates the folder ``marker``: what a hostile file would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.makedirs, (str(self.marker),))


def test_a_crafted_weights_file_is_refused_and_its_code_never_runs(
    copy: Path, tmp_path: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    marker = tmp_path / "pwned"
    for name in ("latest", "best"):  # a torch file whose pickle calls os.makedirs
        write_tensors(
            copy / "checkpoints" / f"{name}.pt", {"policy": Payload(marker), "optimizer": {}}
        )
    control = tmp_path / "control.pt"
    th.save({"policy": Payload(tmp_path / "control")}, control)
    th.load(control, weights_only=False)  # what an unpickling loader does: the payload runs
    assert (tmp_path / "control").is_dir()

    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert "latest.pt cannot be loaded as a checkpoint: it holds anything but tensors" in line
    line = refused(training_script("export").main, [str(copy), "--which", "best"], capsys)
    assert "best.pt cannot be loaded as a checkpoint" in line
    assert not marker.exists()


def test_a_raw_pickle_as_weights_is_refused_and_its_code_never_runs(
    copy: Path, tmp_path: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    marker = tmp_path / "pwned"
    write_weights_bytes(copy / "checkpoints" / "best.pt", pickle.dumps(Payload(marker)))
    line = refused(training_script("export").main, [str(copy), "--which", "best"], capsys)
    assert "best.pt cannot be loaded as a checkpoint" in line
    assert not marker.exists()


def crafted_sb3_zip(path: Path, marker: Path) -> Path:
    """A Stable-Baselines3 .zip whose policy class, when SB3 loads it, unpickles to
    ``os.makedirs(marker)``."""
    payload = base64.b64encode(pickle.dumps(Payload(marker))).decode()
    data = {"policy_class": {":type:": "<class 'abc.ABCMeta'>", ":serialized:": payload}}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", json.dumps(data))
        archive.writestr("_stable_baselines3_version", "2.9.2")
    return path


@pytest.mark.parametrize(
    ("written_by", "says"),
    [
        (
            "buttonup-env 0.1.0 (d2d4121)",
            "was written by buttonup-env 0.1.0 (d2d4121), whose run folders this version does "
            "not read; resume or export it with that version (git checkout d2d4121)",
        ),
        (
            None,
            "was written by another version of buttonup-env, whose run folders this version "
            "does not read; resume or export it with that version",
        ),
    ],
)
def test_a_run_folder_of_another_version_gets_one_sentence_naming_it(
    written_by: str | None,
    says: str,
    copy: Path,
    tmp_path: Path,
    training_script: Callable[[str], ModuleType],
    capsys: Any,
) -> None:
    """A folder of an earlier layout (no format in config.json; .zip checkpoints, SB3 files
    whose loading unpickles code) is neither converted nor read: train.py and export.py name
    the version that wrote it, and the .zip's payload never runs."""
    marker = tmp_path / "pwned"
    for name in ("latest", "best"):
        (copy / "checkpoints" / f"{name}.pt").unlink()
        crafted_sb3_zip(copy / "checkpoints" / f"{name}.zip", marker)

    def earlier(config: dict) -> None:
        del config["format"]
        config["code_version"] = written_by

    edit_json(copy / "config.json", earlier)
    for main, argv in (
        (training_script("train").main, ["--resume", str(copy)]),
        (training_script("export").main, [str(copy)]),
        (training_script("export").main, [str(copy), "--trusted"]),
    ):
        line = refused(main, argv, capsys)
        assert line == f"error: {copy} {says}", line
    assert not marker.exists()


def test_resume_refuses_a_run_without_a_checkpoint_in_one_sentence(
    copy: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    (copy / "checkpoints" / "latest.json").unlink()
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert "latest.json is missing (it is written with latest.pt)" in line
    (copy / "checkpoints" / "latest.pt").unlink()
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert f"{copy} has no checkpoint 'latest' yet" in line
    (copy / "checkpoints" / "best.json").unlink()
    line = refused(training_script("export").main, [str(copy), "--which", "best"], capsys)
    assert "best.json is missing (it is written with best.pt)" in line


def test_json_nested_too_deeply_is_damaged(
    copy: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    (copy / "checkpoints" / "latest.json").write_text(deep)
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert "latest.json is damaged (nested too deeply)" in line
    (copy / "config.json").write_text('{"hidden": ' + deep + "}")
    line = refused(training_script("export").main, [str(copy)], capsys)
    assert "config.json is damaged (nested too deeply)" in line


def test_a_config_from_python_round_trips(training_script: Callable[[str], ModuleType]) -> None:
    """Every RunConfig field has a type the reader reads: a saved config comes back equal."""
    config_module, typed_json = training_script("config"), training_script("typed_json")
    config = config_module.resolve(
        config_module.TrainConfig(
            hidden=(8, 4), learning_rate_end=None, ladder=("random", "perfect")
        )
    )
    saved = json.loads(json.dumps(typed_json.to_json(config)))
    assert typed_json.from_json(config_module.RunConfig, saved, "config.json") == config


def test_the_saved_progress_reads_back_equal(
    run_dir: Path, training_script: Callable[[str], ModuleType]
) -> None:
    """What training wrote, read and written again, is the same JSON: one reader, one writer."""
    checkpoints, typed_json = training_script("checkpoints"), training_script("typed_json")
    path = run_dir / "checkpoints" / "latest.json"
    checkpoint = typed_json.from_json(checkpoints.Checkpoint, json.loads(path.read_text()), path)
    assert isinstance(checkpoint.progress.resume, training_script("resume").ResumePoint)
    assert typed_json.to_json(checkpoint) == json.loads(path.read_text())


def test_a_damaged_evaluation_is_refused_before_training(
    copy: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    """eval.jsonl is read as typed rows when the run is opened, not when the learning curve is
    drawn after the training (which ended in a TypeError)."""
    rows = (copy / "eval.jsonl").read_text().splitlines()
    row = json.loads(rows[0]) | {"steps": "many"}
    (copy / "eval.jsonl").write_text("\n".join([*rows, json.dumps(row)]) + "\n")
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert f"eval.jsonl line {len(rows) + 1}: steps is 'many'; it must be a whole number" in line
    assert "resuming" not in line


# --- a deflate bomb is refused before anything inflates it -----------------------------------


def test_a_compressed_weights_file_is_refused_before_it_is_inflated(
    copy: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    """torch.save stores its entries as they are; an entry deflated from 16 MB of zeros (16 kB
    on disk, the file's hash written into latest.json, under the size cap) is refused by
    reading the archive's directory, before torch.load would inflate it."""
    for name in ("latest", "best"):
        path = copy / "checkpoints" / f"{name}.pt"
        buffer = io.BytesIO()
        with zipfile.ZipFile(path) as saved, zipfile.ZipFile(buffer, "w") as bomb:
            for entry in saved.infolist():
                bomb.writestr(entry, saved.read(entry))
            prefix = saved.namelist()[0].split("/")[0]
            bomb.writestr(f"{prefix}/data/99", bytes(16 << 20), zipfile.ZIP_DEFLATED)
        assert len(buffer.getvalue()) < path.stat().st_size + (1 << 20)
        write_weights_bytes(path, buffer.getvalue())
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert "latest.pt cannot be loaded as a checkpoint: its entry" in line
    assert "is compressed, which torch.save never does" in line
    line = refused(training_script("export").main, [str(copy), "--which", "best"], capsys)
    assert "best.pt cannot be loaded as a checkpoint: its entry" in line


def test_stored_entries_declaring_more_than_the_network_needs_are_refused(
    tmp_path: Path, training_script: Callable[[str], ModuleType]
) -> None:
    checkpoints, runfolder = training_script("checkpoints"), training_script("runfolder")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a/data/0", bytes(3000))
        archive.writestr("a/data/1", bytes(3000))
    data = buffer.getvalue()
    checkpoints.check_archive(tmp_path / "latest.pt", data, 6000)  # the control: within the cap
    with pytest.raises(runfolder.RunFolderError, match=r"its entries declare 6,000 bytes, more "):
        checkpoints.check_archive(tmp_path / "latest.pt", data, 5999)


# --- a hostile run folder: a link planted at every name a run writes -------------------------

WRITTEN = (
    "config.json",
    "best.json",
    "best.onnx",
    "final.json",
    "final.onnx",
    "averaged.json",
    "averaged.onnx",
    "latest.json",
    "latest.onnx",
    "eval.jsonl",
    "learning_curve.png",
    "best.onnx.tmp",
    "checkpoints/latest.pt",
    "checkpoints/latest.json",
    "checkpoints/latest.tmp.pt",
    "checkpoints/latest.next.pt",
    "checkpoints/best.pt",
    "checkpoints/best.json",
    "snapshots/step_000000256.onnx",
    "snapshots",
    "tb",
    "checkpoints",
)
"""Every file and folder that train.py --resume and export.py write in a run folder, and
fixed temporary names beside them (``best.onnx.tmp``, ``latest.tmp.pt``): a link planted at
any of them is refused, never written through."""


def plant(copy: Path, name: str, outside: Path) -> Path:
    """A symbolic link at ``copy/name`` to a file or folder of the same kind in ``outside``
    (what was there moved away); the link's target."""
    place = copy / name
    folder = place.is_dir()
    target = outside / name.replace("/", "_")
    if folder:
        target.mkdir()
        (target / "kept").write_text("kept")
        shutil.rmtree(place)
    else:
        target.write_text("kept")
        if place.exists():
            place.unlink()
    place.symlink_to(target, target_is_directory=folder)
    return target


def outside_state(outside: Path) -> dict[str, str]:
    return {str(p.relative_to(outside)): p.read_text() for p in outside.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", WRITTEN)
def test_a_link_planted_in_a_run_folder_is_refused_and_its_target_kept(
    name: str,
    copy: Path,
    tmp_path: Path,
    training_script: Callable[[str], ModuleType],
    capsys: Any,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    plant(copy, name, outside)
    before = outside_state(outside)
    line = refused(training_script("train").main, ["--resume", str(copy)], capsys)
    assert f"{copy / name} is a symbolic link; a run folder holds none" in line, line
    elsewhere = tmp_path / "agent.onnx"
    line = refused(training_script("export").main, [str(copy), "--out", str(elsewhere)], capsys)
    assert f"{copy / name} is a symbolic link" in line, line
    assert outside_state(outside) == before
    assert not elsewhere.exists()


def test_a_link_planted_after_the_folder_was_opened_is_not_written_through(
    copy: Path, tmp_path: Path, training_script: Callable[[str], ModuleType]
) -> None:
    """The folder is checked at open, and every write checks its own path again: a link
    planted in between (by another process) is refused, never followed."""
    runfolder = training_script("runfolder")
    run = runfolder.RunFolder.open(copy)
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("best.json", "eval.jsonl", "checkpoints/latest.json"):
        plant(copy, name, outside)
    plant(copy, "tb", outside)
    before = outside_state(outside)
    with pytest.raises(runfolder.RunFolderError, match=r"best\.json is a symbolic link"):
        run.write(copy / "best.json", b"{}")
    with pytest.raises(runfolder.RunFolderError, match=r"eval\.jsonl is a symbolic link"):
        run.append_eval(runfolder.EvalRow(1, 0.0, 0.5, 0.1, 0.5, 0.1, 0.5, 0.1, (0.1,) * 8))
    with pytest.raises(runfolder.RunFolderError, match=r"tb is a symbolic link"):
        run.folder("tb")
    with pytest.raises(runfolder.RunFolderError, match=r"latest\.json is a symbolic link"):
        training_script("checkpoints").Checkpoints(run).read("latest")
    (copy / "final.onnx").unlink()
    (copy / "final.onnx").symlink_to(outside / "best.json")
    with pytest.raises(runfolder.RunFolderError, match=r"final\.onnx is a symbolic link"):
        run.export_path("final")
    assert outside_state(outside) == before
    # where nothing is planted, the write is a real file, made through a fresh temporary name
    run.write(copy / "final.json", b"{}")
    assert not (copy / "final.json").is_symlink() and (copy / "final.json").read_bytes() == b"{}"
    assert not [p for p in copy.iterdir() if p.name.endswith(".tmp")]


def test_a_run_folder_the_user_names_through_a_link_is_opened(
    run_dir: Path, tmp_path: Path, training_script: Callable[[str], ModuleType]
) -> None:
    """The folder itself may be a link when it is the path the user gave (not one found
    inside another folder)."""
    runfolder = training_script("runfolder")
    link = tmp_path / "mine"
    link.symlink_to(run_dir, target_is_directory=True)
    assert runfolder.RunFolder.open(link).config.total_steps == 256
    with pytest.raises(runfolder.RunFolderError, match="mine is a symbolic link"):
        runfolder.RunFiles(link).check_tree(named=False)


def test_the_card_command_is_rebuilt_not_copied(
    copy: Path, tmp_path: Path, training_script: Callable[[str], ModuleType]
) -> None:
    """config.json's free-text command never reaches a card: a ``$(...)`` there would run
    the day the card's command is pasted into a shell."""
    edit_json(copy / "config.json", lambda c: c.update(command="python x.py $(touch /tmp/p)\n"))
    card = training_script("runfolder").RunFolder.open(copy).card_config()
    assert "$(" not in card["command"] and "\n" not in card["command"]
    assert card["command"].startswith("python training/train.py --preset smoke ")


# --- settings have bounds --------------------------------------------------------------------

FLAG_BOUNDS = {
    "--n-epochs": ("1000", "--n-epochs is 1000; it must be a whole number from 1 to 100"),
    "--eval-matches": ("1000000000000", "--eval-matches is 1000000000000; it must be a whole"),
    "--ladder-matches": ("-1", "--ladder-matches is -1; it must be a whole number from 0 to"),
    "--total-steps": ("10" + "0" * 29, "it must be a whole number from 1 to 10,000,000,000"),
    "--snapshot-every": ("1", "--snapshot-every is 1; it must be a whole number from 64 to"),
    "--threads": ("100000", "--threads is 100000; it must be a whole number from 1 to"),
}


@pytest.mark.parametrize("flag", list(FLAG_BOUNDS))
def test_a_setting_out_of_its_bounds_is_one_sentence_naming_it(
    flag: str, tmp_path: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    value, says = FLAG_BOUNDS[flag]
    argv = [*TINY, flag, value, "--runs-dir", str(tmp_path / "runs")]
    line = refused(training_script("train").main, argv, capsys)
    assert says in line, line
    assert not (tmp_path / "runs").exists()


def test_a_config_built_in_code_is_held_to_the_same_bounds(
    training_script: Callable[[str], ModuleType],
) -> None:
    config = training_script("config")
    with pytest.raises(ValueError, match=r"^--n-epochs is 0; it must be a whole number from 1 to"):
        config.resolve(config.TrainConfig(n_epochs=0))


# --- output paths ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runs_dir", "says"),
    [
        ("/etc/passwd/x", "--runs-dir /etc/passwd/x: /etc/passwd is not a folder"),
        ("/proc/self", "cannot make the run folder /proc/self/"),
        ("{tmp}/missing/runs", "{tmp}/missing/runs: {tmp}/missing does not exist"),
    ],
)
def test_a_runs_dir_that_cannot_hold_a_run_is_one_sentence(
    runs_dir: str,
    says: str,
    tmp_path: Path,
    training_script: Callable[[str], ModuleType],
    capsys: Any,
) -> None:
    argv = [*TINY, "--runs-dir", runs_dir.format(tmp=tmp_path), "--run-name", "r"]
    line = refused(training_script("train").main, argv, capsys)
    assert says.format(tmp=tmp_path) in line, line
    assert not (tmp_path / "missing").exists()


def test_export_keeps_an_unrelated_card_and_makes_no_folder(
    run_dir: Path, tmp_path: Path, training_script: Callable[[str], ModuleType], capsys: Any
) -> None:
    export = training_script("export").main
    quick = ["--random-matches", "0", "--greedy-matches", "0", "--perfect-matches", "0"]
    quick += ["--margin-matches", "0", "--audit-scores", "none", "--no-best-response"]
    sibling = tmp_path / "package.json"
    sibling.write_text("kept")
    out = tmp_path / "package.onnx"
    line = refused(export, [str(run_dir), "--out", str(out), *quick], capsys)
    assert line == f"error: the card of --out {sibling} exists; give --force to replace it"
    assert sibling.read_text() == "kept" and not out.exists()
    line = refused(export, [str(run_dir), "--out", str(tmp_path / "a" / "b.onnx"), *quick], capsys)
    assert f"the folder {tmp_path / 'a'} does not exist" in line
    line = refused(export, [str(run_dir), "--out", "/etc/passwd/x.onnx", *quick], capsys)
    assert "/etc/passwd is not a folder" in line
    line = refused(export, [str(run_dir), "--out", str(run_dir / "config.onnx"), *quick], capsys)
    assert "is also the run's config.json, which the command reads" in line
    export([str(run_dir), "--out", str(out), *quick, "--force"])
    assert json.loads(sibling.read_text())["model"] == "package.onnx"


def test_evaluate_never_writes_over_its_model_or_one_output_twice(
    tmp_path: Path, training_script: Callable[[str], ModuleType], capsys: Any, linear_policy: Any
) -> None:
    evaluate = training_script("evaluate").main
    model = linear_policy(tmp_path / "mine.onnx", "afterstates", 0)
    kept = model.read_bytes()
    base = ["--model", str(model), "--matches", "2", "--no-progress"]
    capsys.readouterr()
    assert evaluate([*base, "--json", str(model)]) == 2
    assert "--json" in capsys.readouterr().err and model.read_bytes() == kept
    out = tmp_path / "x.json"
    assert evaluate([*base, "--json", str(out), "--record", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"error: --json {out} and --record {out} are the same file; give each output its own\n"
    )
    assert not out.exists()


# --- the hypothesis fuzzing of config.json and the resume point ------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


def json_paths(data: object, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and list indices) into ``data``."""
    paths = [prefix] if prefix else []
    if isinstance(data, dict):
        for key, value in data.items():
            paths += json_paths(value, (*prefix, key))
    elif isinstance(data, list) and len(data) <= 16:
        for index, value in enumerate(data):
            paths += json_paths(value, (*prefix, index))
    return paths


def nudged(value: object) -> st.SearchStrategy:
    """Values of the type of ``value`` around it: most keep the file readable, some cross a
    bound."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(-2, 2 * abs(value) + 2)
    if isinstance(value, float):
        return st.floats(-1.0, 2 * abs(value) + 1.0)
    return st.just(value)


@st.composite
def damaged(draw: st.DrawFn, original: dict) -> dict:
    """``original`` with one to three values nudged, replaced, removed or added anywhere."""
    data = json.loads(json.dumps(original))
    paths = json_paths(data)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        parent = data
        try:
            for key in path[:-1]:
                parent = parent[key]
            how = draw(st.sampled_from(["nudge", "nudge", "replace", "remove", "add"]))
            if how == "nudge":
                parent[path[-1]] = draw(nudged(parent[path[-1]]))
            elif how == "remove" and isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif how == "add" and isinstance(parent, dict):
                parent[draw(st.text(max_size=8))] = draw(JSON_VALUES)
            else:
                parent[path[-1]] = draw(JSON_VALUES)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier change removed the place
    return data


def opens_or_says_why(action: Callable[[], object], runfolder: ModuleType) -> None:
    """``action`` succeeds or raises the run folder's one error: one line, no other
    exception."""
    try:
        action()
    except runfolder.RunFolderError as error:
        assert "\n" not in str(error) and str(error), repr(error)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_fuzzed_config_opens_or_is_refused_in_one_sentence(
    data: st.DataObject, run_dir: Path, training_script: Callable[[str], ModuleType]
) -> None:
    runfolder = training_script("runfolder")
    original = json.loads((run_dir / "config.json").read_text())
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder)
        (run / "config.json").write_text(json.dumps(data.draw(damaged(original))))
        opens_or_says_why(lambda: runfolder.RunFolder.open(run), runfolder)


@pytest.fixture(scope="module")
def batch_of_run(run_dir: Path) -> Any:
    """The batched env that the tiny run's resume point is checked against."""
    factories = importlib.import_module("training.factories")
    runfolder = importlib.import_module("training.runfolder")
    venv = factories.make_vec_env(runfolder.RunFolder.open(run_dir).config, run_dir)
    yield venv.env
    venv.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_fuzzed_resume_point_reads_or_is_refused_in_one_sentence(
    data: st.DataObject,
    run_dir: Path,
    batch_of_run: Any,
    training_script: Callable[[str], ModuleType],
) -> None:
    runfolder, resume = training_script("runfolder"), training_script("resume")
    checkpoints = training_script("checkpoints")
    original = json.loads((run_dir / "checkpoints" / "latest.json").read_text())
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder)
        shutil.copy(run_dir / "config.json", run / "config.json")
        (run / "checkpoints").mkdir()
        state = run / "checkpoints" / "latest.json"
        state.write_text(json.dumps(data.draw(damaged(original))))
        (run / "checkpoints" / "latest.pt").write_bytes(b"")

        def read() -> None:
            checkpoint = checkpoints.Checkpoints(runfolder.RunFolder.open(run)).read("latest")
            point = checkpoint.progress.resume
            if point is not None:
                resume.check_resume_point(point, checkpoint.steps, checkpoint.n_updates, state)
                resume.restore_games(batch_of_run, point, state, "progress.resume")
                table = RoundStartValues(batch_of_run)
                resume.restore_table(table, point, state, "progress.resume")
                for _ in range(3):  # what the env took, it plays on
                    masks = batch_of_run.action_masks()
                    batch_of_run.step(masks.argmax(axis=1))

        opens_or_says_why(read, runfolder)
