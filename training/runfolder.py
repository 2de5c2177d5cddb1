"""A training run's folder: what ``train.py`` writes there, and reads back to resume or export.

A run folder ``RUN`` holds:

* ``config.json``: the run's :class:`~training.config.TrainConfig` (its fields at the top
  level), the ``format`` of the folder, the ``command`` that started the run and the
  ``code_version`` that ran it;
* ``checkpoints/NAME.pt`` and ``NAME.json`` for ``latest`` and ``best`` (the lowest regret):
  the tensors only (the policy's weights and Adam's state, written with ``torch.save`` and read
  back with ``torch.load(weights_only=True)``, which refuses anything but tensors and plain
  containers: no code runs while it is read), and a :class:`Checkpoint` (the steps and updates
  done, the :class:`Progress` of the run, the SHA-256 of ``NAME.pt``; ``latest``'s progress
  holds the :class:`ResumePoint`);
* ``snapshots/step_NNNNNNNNN.onnx``, the opponent pool; ``eval.jsonl``, the periodic
  evaluations; ``tb/``, the TensorBoard logs; at the end ``final.onnx`` and ``best.onnx`` with
  their cards.

Every saved value is checked before it is used, so a run folder someone sent you is safe to
resume or export: the JSON files are read through :mod:`training.typed_json` (a damaged or
crafted value raises :class:`~training.typed_json.FieldError`, one sentence naming the file
and the field), the network is rebuilt from the checked config and every tensor is checked
against it (:class:`RunFolderError`). A folder of another ``format`` is refused in one
sentence that names the version of buttonup-env that wrote it.

Nothing in a run folder leads a read or a write outside it. A folder holds files and folders
only: opening one (:meth:`RunFolder.open`, :func:`check_tree`) refuses it when anything in it
is a symbolic link, a device, a pipe or a socket (the folder itself may be a link when it is
the path the user named). Every file is then read and written through a checked path
(:func:`check_path`: ``lstat`` of each part below the folder, no link, the folders folders)
and opened with ``O_NOFOLLOW``; every write goes through a temporary file that
``tempfile.mkstemp`` makes beside the target (never a fixed name that could be planted),
renamed onto it (``buttonup_env.game.files``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import random
import re
import shlex
import stat
import time
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import torch as th

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.game.files import append_text, read_regular_file, write_atomically
from buttonup_env.game.rules import MAX_ROUND_MARGIN, MOVES_PER_ROUND
from buttonup_env.players.bots import BOT_NAMES
from buttonup_env.players.selfplay import SNAPSHOT_GLOB
from buttonup_env.ui.cli import reason
from training.common import CODE_VERSION, code_version
from training.config import TrainConfig, make_policy, resolve, train_flags
from training.typed_json import (
    FieldError,
    Length,
    Omittable,
    Pattern,
    Range,
    Reader,
    from_json,
    parse_json,
    shown,
    to_json,
)

FORMAT = "buttonup-env run folder 3"
"""The ``format`` of the run folders this version writes and reads (in ``config.json`` and
every checkpoint's ``NAME.json``)."""

MAX_JSON_BYTES = 64 << 20
"""The largest JSON file of a run folder that is read (config.json, a checkpoint's
NAME.json: a few kB, a few MB for a resume point of many envs)."""

MAX_EVAL_BYTES = 16 << 20
"""The largest eval.jsonl that is read (a run makes at most 10,000 evaluations of well under
a kB each: see training.config.MAX_PERIODIC)."""

MAX_CHECKPOINT_BYTES = 1 << 30
"""The fixed ceiling of a checkpoint's NAME.pt, whatever network its config.json asks for
(the largest allowed, 50 million parameters, takes 600 MB with Adam's two moments)."""


class RunFolderError(ValueError):
    """A run folder that cannot be resumed or exported: the message is one sentence naming the
    file (a bad JSON value raises :class:`~training.typed_json.FieldError` instead)."""


# --- the run's state, as saved -----------------------------------------------------------

Byte = Annotated[int, Range(0, 255)]
Word32 = Annotated[int, Range(0, 2**32 - 1)]
Word128 = Annotated[int, Range(0, 2**128 - 1)]
Count = Annotated[int, Range(0)]
SnapshotName = Annotated[str, Pattern(r"step_\d{9}\.onnx", "a snapshot's file name, step_N.onnx")]


@dataclass(frozen=True)
class PCG64Words:
    state: Word128
    inc: Word128


@dataclass(frozen=True)
class GeneratorState:
    """A ``numpy.random.Generator``'s state, as its ``bit_generator.state`` gives it (PCG64)."""

    bit_generator: Literal["PCG64"]
    state: PCG64Words
    has_uint32: Annotated[int, Range(0, 1)]
    uinteger: Word32


@dataclass(frozen=True)
class NumpyGlobalState:
    """The state of numpy's global generator (``np.random.get_state()``, MT19937)."""

    name: Literal["MT19937"]
    keys: Annotated[tuple[Word32, ...], Length(624)]
    pos: Annotated[int, Range(0, 624)]
    has_gauss: Annotated[int, Range(0, 1)]
    cached_gaussian: float

    def as_tuple(self) -> tuple[Any, ...]:
        """The state as ``np.random.set_state`` takes it."""
        keys = np.array(self.keys, dtype=np.uint32)
        return (self.name, keys, self.pos, self.has_gauss, self.cached_gaussian)


@dataclass(frozen=True)
class PythonRandomState:
    """The state of Python's ``random`` module (``random.getstate()``): 624 words and the
    position in them, and the cached Gaussian."""

    version: Literal[3]
    internal: Annotated[tuple[Word32, ...], Length(625)]
    gauss_next: float | None

    def as_tuple(self) -> tuple[Any, ...]:
        """The state as ``random.setstate`` takes it."""
        return (self.version, self.internal, self.gauss_next)


TORCH_STATE_BYTES = len(th.get_rng_state())
"""The size of torch's CPU generator state in this torch (5,056 bytes: MT19937)."""


@dataclass(frozen=True)
class TorchRandomState:
    """The state of torch's CPU generator (``torch.get_rng_state()``), byte by byte."""

    state: Annotated[tuple[Byte, ...], Length(TORCH_STATE_BYTES)]

    def as_tensor(self) -> th.Tensor:
        """The state as ``torch.set_rng_state`` takes it."""
        return th.tensor(self.state, dtype=th.uint8)


@dataclass(frozen=True)
class BatchState:
    """The batched env's games, as ``ButtonUpVectorEnv.get_state`` gives them: the arrays
    of its positions, scores and opponents (checked against the run's env when restored:
    :func:`check_resume_point`), its reset options, and every generator it draws from."""

    num_envs: Annotated[int, Range(1)]
    arrays: dict[str, tuple[Any, ...]]
    options: dict[Literal["agent_color", "first"], Literal["R", "B"] | None]
    seed: Count | None
    rng: GeneratorState
    bots: dict[Literal[BOT_NAMES], GeneratorState]  # type: ignore[valid-type]
    policy_rng: GeneratorState
    snapshots: tuple[SnapshotName, ...]
    results: dict[SnapshotName, tuple[Annotated[float, Range(0)], Annotated[float, Range(0)]]]
    policies: Count


@dataclass(frozen=True)
class ResumePoint:
    """What a resumed run needs to go on exactly as this one would from here: taken at a
    rollout's start (the last thing before its first step) with the batched env, whose games
    it holds, with SB3's episode starts and the generators torch, numpy and Python draw from
    (actions, minibatches)."""

    steps: Count
    n_updates: Count
    env: BatchState
    episode_starts: tuple[bool, ...]
    torch_rng: TorchRandomState
    numpy_rng: NumpyGlobalState
    python_rng: PythonRandomState


@dataclass
class Progress:
    """How far a run is, beyond its weights and step count: the trainer keeps it while it
    runs, and every checkpoint saves it."""

    train_seconds: Annotated[float, Range(0)] = 0.0
    """Training wall time, across resumes (the time budget counts it)."""
    next_snapshot: Count = 0
    """The step at or after which the next snapshot joins the opponent pool."""
    next_eval: Count = 0
    """The step at or after which the next periodic evaluation runs."""
    next_checkpoint: Count = 0
    """The step at or after which the next checkpoint is written."""
    last_eval_steps: Count | None = None
    """The step of the last periodic evaluation."""
    best_regret: Annotated[float, Range(0)] | None = None
    """The lowest regret against the perfect bot of the periodic evaluations, ..."""
    best_steps: Count | None = None
    """... at this step: the ``best`` checkpoint."""
    resume: ResumePoint | None = None
    """Where a resumed run goes on (``latest`` only; None with the dummy and subproc envs,
    whose games are not saved: a resumed run starts new episodes there). With several workers,
    worker 0's point."""
    resume_others: tuple[ResumePoint, ...] = ()
    """With several workers, the points of workers 1, 2, ... in that order, taken by each at
    the same step and written by worker 0 (empty with one worker, and without ``resume``)."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's ``NAME.json``: what goes with the tensors of ``NAME.pt``."""

    format: Literal[FORMAT]  # type: ignore[valid-type]
    weights_sha256: Annotated[str, Pattern(r"[0-9a-f]{64}", "the SHA-256 of the .pt file")]
    """The SHA-256 of ``NAME.pt``: the two files belong together."""
    steps: Count
    """Environment steps trained."""
    n_updates: Count
    """Gradient updates made."""
    progress: Progress


# --- the resume point --------------------------------------------------------------------


def take_resume_point(model: Any) -> ResumePoint | None:
    """``model``'s (a MaskablePPO at a rollout's start) :class:`ResumePoint`; None with the
    ``dummy`` and ``subproc`` envs, whose state is not saved."""
    batch = getattr(model.get_env(), "env", None)
    if not isinstance(batch, ButtonUpVectorEnv):
        return None
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return ResumePoint(
        steps=model.num_timesteps,
        n_updates=model._n_updates,
        env=from_json(BatchState, batch.get_state(), "the batched env"),
        episode_starts=tuple(np.asarray(model._last_episode_starts).tolist()),
        torch_rng=TorchRandomState(tuple(th.get_rng_state().tolist())),
        numpy_rng=NumpyGlobalState(name, tuple(keys.tolist()), pos, has_gauss, gauss),
        python_rng=PythonRandomState(version, internal, gauss_next),
    )


def check_resume_point(
    point: ResumePoint,
    batch: ButtonUpVectorEnv,
    checkpoint: Checkpoint,
    reader: Reader,
    field: str = "progress.resume",
) -> None:
    """:class:`~training.typed_json.FieldError` naming the field when ``point`` (read from the
    checkpoint's ``field``) cannot belong to ``checkpoint`` and ``batch``, the worker's freshly
    made batched env: a generator state its generator refuses, another step or update count,
    another number of envs, a board, colour, score or opponent out of the env's range."""
    if point.python_rng.internal[-1] > 624:  # the position in the 624 words
        raise reader.error(
            f"{field}.python_rng.internal[624]",
            point.python_rng.internal[-1],
            "it must be a whole number from 0 to 624",
        )
    missing = [name for name in BOT_NAMES if name not in point.env.bots]
    if missing:
        raise reader.say(f"{field}.env.bots.{missing[0]}", "is missing")

    def pcg64(state: GeneratorState) -> Callable[[], object]:
        return lambda: setattr(np.random.PCG64(), "state", to_json(state))

    scratch = {  # each state tried on a scratch generator: what the bounds cannot check
        "torch_rng": lambda: th.Generator().set_state(point.torch_rng.as_tensor()),
        "numpy_rng": lambda: np.random.RandomState().set_state(point.numpy_rng.as_tuple()),
        "python_rng": lambda: random.Random().setstate(point.python_rng.as_tuple()),
        "env.rng": pcg64(point.env.rng),
        "env.policy_rng": pcg64(point.env.policy_rng),
        **{f"env.bots.{name}": pcg64(state) for name, state in point.env.bots.items()},
    }
    for name, restore in scratch.items():
        try:
            restore()
        except (ValueError, TypeError, OverflowError, RuntimeError) as error:
            reason = " ".join(str(error).split())[:100]
            raise reader.say(
                f"{field}.{name}", f"is not a generator state that can be restored ({reason})"
            ) from None

    for name, saved, expected, says in (
        ("steps", point.steps, checkpoint.steps, "the checkpoint is at step"),
        ("n_updates", point.n_updates, checkpoint.n_updates, "the checkpoint has"),
        ("env.num_envs", point.env.num_envs, batch.num_envs, "the run's config has n_envs"),
    ):
        if saved != expected:
            raise reader.error(f"{field}.{name}", saved, f"{says} {expected}")
    if len(point.episode_starts) != batch.num_envs:
        raise reader.say(
            f"{field}.episode_starts",
            f"has {len(point.episode_starts)} items; it must have {batch.num_envs}",
        )
    check_arrays(point.env, batch, reader, f"{field}.env.arrays")


def check_arrays(env: BatchState, batch: ButtonUpVectorEnv, reader: Reader, field: str) -> None:
    """:class:`~training.typed_json.FieldError` naming the item when an array of ``env`` is
    not of the shape of ``batch``'s, or holds a board, colour, score or opponent out of its
    range (the compiled kernels index tables with them, unchecked)."""
    opponents = (
        len(BOT_NAMES) + len(env.snapshots) if batch.pool is not None else batch.num_opponents
    )
    colour = (0, 1, "a colour: 0 (Red) or 1 (Black)")
    ranges = {
        "_board": (0, len(batch.tables.boards) - 1, "a board number"),
        "_to_move": colour,
        "_agent": colour,
        "_starter": colour,
        # a match ends with the round that takes a score to the target: from target - 1 at most
        "_score": (0, batch.target - 1 + MAX_ROUND_MARGIN, "a score"),
        "_opponent": (0, opponents - 1, "an opponent's number"),
    }
    unknown = sorted(set(env.arrays) - set(batch.STATE_ARRAYS))
    if unknown:
        raise reader.say(f"{field}.{unknown[0]}", "is not an array of the batched env")
    for key in batch.STATE_ARRAYS:
        like = getattr(batch, key)
        if key not in env.arrays:
            raise reader.say(f"{field}.{key}", "is missing")
        try:
            saved = np.array(env.arrays[key], dtype=object)
        except ValueError:  # rows of different lengths
            saved = np.array([])
        if saved.shape != like.shape:
            raise reader.say(
                f"{field}.{key}",
                f"has the shape {list(saved.shape)}; the run's env has {list(like.shape)}",
            )
        if like.dtype == bool:
            ok = np.vectorize(lambda v: isinstance(v, bool), otypes=[bool])(saved)
            allowed = "it must be true or false"
        else:
            low, high, what = ranges[key]
            ok = np.vectorize(
                lambda v, low=low, high=high: type(v) is int and low <= v <= high, otypes=[bool]
            )(saved)
            allowed = f"it must be {what}" + ("" if ":" in what else f" from {low} to {high}")
        if not ok.all():
            index = tuple(int(i) for i in np.argwhere(~ok)[0])
            raise reader.error(
                f"{field}.{key}{''.join(f'[{i}]' for i in index)}", saved[index], allowed
            )


def restore_resume_point(model: Any, point: ResumePoint) -> None:
    """Put ``model`` (a MaskablePPO just loaded, with a fresh batched env) back at ``point``,
    checked by :func:`check_resume_point`."""
    batch = model.get_env().env
    batch.set_state(to_json(point.env))
    model._last_obs = batch.observe()
    model._last_episode_starts = np.array(point.episode_starts, dtype=bool)
    th.set_rng_state(point.torch_rng.as_tensor())
    np.random.set_state(point.numpy_rng.as_tuple())
    random.setstate(point.python_rng.as_tuple())


# --- the folder --------------------------------------------------------------------------


def snapshot_path(run_dir: Path, steps: int) -> Path:
    """The opponent pool's snapshot of the learner at ``steps`` (``snapshots/step_N.onnx``),
    checked (:func:`check_path`) to be written."""
    return check_path(run_dir, run_dir / "snapshots" / f"step_{steps:09d}.onnx")


def _link(path: Path | str) -> RunFolderError:
    return RunFolderError(
        f"{path} is a symbolic link; a run folder holds none (a link could lead a read or a "
        "write outside the folder)"
    )


def _not_regular(path: Path | str) -> RunFolderError:
    return RunFolderError(
        f"{path} is not a regular file (a device, a pipe or a socket); a run folder holds "
        "files and folders only"
    )


def check_path(run_dir: Path, path: Path, kind: Literal["file", "folder"] = "file") -> Path:
    """``path``, inside ``run_dir``, once every part of it below ``run_dir`` is checked with
    ``lstat``: none is a symbolic link, each one on the way is a folder, and the last one, if
    it exists, is a regular file (``kind="folder"``: a folder). :class:`RunFolderError` in
    one sentence otherwise."""
    parts = path.relative_to(run_dir).parts
    current = run_dir
    for index, part in enumerate(parts):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return path
        except OSError as error:
            raise RunFolderError(f"{current} cannot be read ({reason(error)})") from None
        if stat.S_ISLNK(mode):
            raise _link(current)
        if index < len(parts) - 1 or kind == "folder":
            if not stat.S_ISDIR(mode):
                raise RunFolderError(f"{current} is not a folder; a run folder's {part} is one")
        elif not stat.S_ISREG(mode):
            raise _not_regular(current)
    return path


def check_tree(run_dir: Path, named: bool = True) -> None:
    """:class:`RunFolderError` when anything in the folder ``run_dir``, at any depth, is a
    symbolic link or neither a file nor a folder; and, unless ``named`` (the path the user
    gave), when ``run_dir`` itself is a link. Third-party code writes in the folder too
    (TensorBoard in ``tb/``, the opponent pool reads ``snapshots/``): none of it can then be
    led outside."""
    if not named and os.path.islink(run_dir):
        raise _link(run_dir)
    folders = [run_dir]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        raise _link(entry.path)
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(Path(entry.path))
                    elif not entry.is_file(follow_symlinks=False):
                        raise _not_regular(entry.path)
        except OSError as error:
            raise RunFolderError(f"{folder} cannot be read ({reason(error)})") from None


def write_in(run_dir: Path, path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` in the run folder ``run_dir``: the path checked
    (:func:`check_path`), the file written atomically through a temporary file made by
    ``tempfile.mkstemp`` beside it."""
    check_path(run_dir, path)
    try:
        return write_atomically(path, data)
    except OSError as error:
        raise RunFolderError(f"cannot write {path} ({reason(error)})") from None


def read_in(run_dir: Path, path: Path, limit: int) -> bytes:
    """The bytes of ``path`` in the run folder ``run_dir`` (at most ``limit``): the path
    checked (:func:`check_path`), the file opened with ``O_NOFOLLOW`` and read only if it is
    a regular file."""
    check_path(run_dir, path)
    try:
        return read_regular_file(path, limit)
    except OSError as error:
        raise RunFolderError(f"{path} cannot be read ({reason(error)})") from None


def make_folder(run_dir: Path, name: str) -> Path:
    """The folder ``name`` of the run folder ``run_dir`` (``checkpoints``, ``snapshots``,
    ``tb``), checked, made if missing."""
    path = check_path(run_dir, run_dir / name, "folder")
    try:
        path.mkdir(exist_ok=True)
    except OSError as error:
        raise RunFolderError(f"{path} cannot be made ({reason(error)})") from None
    return path


# --- the periodic evaluations ------------------------------------------------------------

Share = Annotated[float, Range(0, 1)]
Regret = Annotated[float, Range(0)]


@dataclass(frozen=True)
class EvalRow:
    """A periodic evaluation, one line of ``eval.jsonl`` (train.py's ``Periodic.evaluate``
    writes it): the step and training minutes, the win rate and the mean regret against each
    bot of ``buttonup_env.players.bots.BOT_NAMES``, the regret against the perfect bot by
    move of the round, and the rating against the ladder (left out without one)."""

    steps: Count
    minutes: Annotated[float, Range(0)]
    win_rate_random: Share
    regret_random: Regret
    win_rate_greedy: Share
    regret_greedy: Regret
    win_rate_perfect: Share
    regret_perfect: Regret
    regret_by_move_perfect: Annotated[tuple[Regret | None, ...], Length(MOVES_PER_ROUND)]
    elo: Annotated[float | None, Omittable()] = None
    elo_low: Annotated[float | None, Omittable()] = None
    elo_high: Annotated[float | None, Omittable()] = None
    ladder_matches: Annotated[Count | None, Omittable()] = None
    ladder_score: Annotated[Share | None, Omittable()] = None


def read_evaluations(run_dir: Path) -> list[dict[str, Any]]:
    """The periodic evaluations of the run folder ``run_dir`` (``eval.jsonl``; none when it is
    missing), each line checked as an :class:`EvalRow` (a damaged one raises
    :class:`~training.typed_json.FieldError` naming the file, the line and the field), as the
    JSON objects they are."""
    path = run_dir / "eval.jsonl"
    if not os.path.lexists(path):
        return []
    rows = []
    text = read_in(run_dir, path, MAX_EVAL_BYTES)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        source = f"{path} line {number}"
        row = parse_json(line, source)
        if not isinstance(row, dict):
            raise Reader(source).error("", row, "it must be a JSON object")
        from_json(EvalRow, row, source)
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Origin:
    """How a run was started: the fields of ``config.json`` beside its settings. The command
    is kept as it was typed, for the record, but never copied out of the folder: a card and
    the terminal get one rebuilt from the checked settings (:meth:`RunFolder.card_config`)."""

    format: str
    command: str
    code_version: Annotated[str, Pattern(CODE_VERSION, "a version as buttonup-env writes it")]


@dataclass(frozen=True)
class RunFolder:
    """A run folder (``path``) with its checked config, made by :meth:`create` or read back by
    :meth:`open`; every file of the folder is written and read through it."""

    path: Path
    config: TrainConfig
    origin: Origin

    @classmethod
    def create(cls, config: TrainConfig, command: str) -> RunFolder:
        """A new run folder for ``config`` (resolved): ``RUNS_DIR/RUN_NAME`` (by default
        ``PRESET-sSEED-DATE-TIME``), with its ``config.json``. ``command`` started it."""
        name = config.run_name or f"{config.preset}-s{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
        path = config.runs_dir / name
        if os.path.lexists(path):
            raise RunFolderError(f"run folder {path} exists; pick another --run-name")
        run = cls(path, config, Origin(FORMAT, command, code_version()))
        above = config.runs_dir.parent
        if not above.is_dir():  # --runs-dir is made, nothing above it
            what = "is not a folder" if os.path.lexists(above) else "does not exist"
            raise RunFolderError(f"--runs-dir {config.runs_dir}: {above} {what}")
        try:
            config.runs_dir.mkdir(exist_ok=True)
            path.mkdir()
        except OSError as error:
            raise RunFolderError(
                f"cannot make the run folder {path} ({reason(error)}); give another --runs-dir"
            ) from None
        make_folder(path, "snapshots")
        saved = {**to_json(run.origin), **to_json(config)}
        run.write(path / "config.json", json.dumps(saved, indent=2).encode())
        return run

    @classmethod
    def open(cls, path: Path, named: bool = True) -> RunFolder:
        """The run folder at ``path`` (``named``: the path the user gave, which may be a
        symbolic link), nothing in it a link (:func:`check_tree`), its ``config.json``
        checked: the format, every setting's type and bounds, and the rules
        :func:`~training.config.resolve` checks for a new run."""
        file = path / "config.json"
        if not file.is_file():
            raise RunFolderError(f"{path} is not a run folder (it has no config.json)")
        check_tree(path, named)
        data = parse_json(read_in(path, file, MAX_JSON_BYTES), file)
        if not isinstance(data, dict):
            raise Reader(file).error("", data, "it must be a JSON object")
        check_format(path, data)
        heads = {f.name for f in dataclasses.fields(Origin)}
        origin = from_json(Origin, {k: v for k, v in data.items() if k in heads}, file)
        config = from_json(TrainConfig, {k: v for k, v in data.items() if k not in heads}, file)
        if config.resume is not None:
            raise Reader(file).error("resume", str(config.resume), "a run's saved config has null")
        try:
            config = resolve(config)
        except ValueError as error:
            raise FieldError(f"{file} breaks the rules of a training config: {error}") from None
        return cls(path, config, origin)

    def worker_files(self, resuming: bool) -> dict[str, bytes]:
        """What the other workers of a run read of its folder, by path in it: ``config.json``,
        the snapshots, and when ``resuming`` the checkpoint ``latest``. Worker 0 sends them to
        the others, which may be on other machines (:meth:`mirror`)."""
        names = ["config.json"]
        snapshots = sorted((self.path / "snapshots").glob(SNAPSHOT_GLOB))
        names += [f"snapshots/{path.name}" for path in snapshots]
        if resuming:
            names += ["checkpoints/latest.pt", "checkpoints/latest.json"]
        return {name: self.checked(self.path / name).read_bytes() for name in names}

    @classmethod
    def mirror(cls, files: dict[str, bytes], folder: Path) -> RunFolder:
        """Another worker's copy of the run folder, in the empty ``folder``: the ``files`` of
        :meth:`worker_files`, read back as a run folder is (:meth:`open`). The worker reads
        the config and the checkpoint there, and its opponent pool the snapshots, to which it
        adds a copy of each new one; it writes nothing else."""
        for name, data in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (folder / "snapshots").mkdir(exist_ok=True)
        return cls.open(folder)

    def card_config(self) -> dict[str, Any]:
        """The run's command, code version and settings, as a model card holds them. The
        command is rebuilt from the checked settings (the train.py flags that give them),
        never copied from config.json: a command there could hold anything, ``$(...)``
        included. Where the run was kept (``runs_dir``, a path of any characters) is left
        out of both."""
        settings = dataclasses.replace(self.config, runs_dir=Path("runs"))
        return {
            "command": shlex.join(["python", "training/train.py", *train_flags(settings)]),
            "code_version": self.origin.code_version,
            **{k: v for k, v in to_json(self.config).items() if k not in ("runs_dir", "resume")},
        }

    # --- the files

    def checked(self, path: Path, kind: Literal["file", "folder"] = "file") -> Path:
        """``path`` in the run folder, checked (:func:`check_path`)."""
        return check_path(self.path, path, kind)

    def write(self, path: Path, data: bytes) -> Path:
        """Write ``data`` to ``path`` in the run folder (:func:`write_in`)."""
        return write_in(self.path, path, data)

    def folder(self, name: str) -> Path:
        """The run's folder ``name``, checked, made if missing (:func:`make_folder`)."""
        return make_folder(self.path, name)

    def export_path(self, name: str) -> Path:
        """``NAME.onnx`` in the run folder, for a policy and its card ``NAME.json``, both
        checked (:func:`check_path`)."""
        self.checked(self.path / f"{name}.json")
        return self.checked(self.path / f"{name}.onnx")

    # --- evaluations

    @property
    def eval_file(self) -> Path:
        """``eval.jsonl``, the periodic evaluations, one JSON object a line."""
        return self.path / "eval.jsonl"

    def append_eval(self, row: dict[str, Any]) -> None:
        """Add ``row`` to ``eval.jsonl`` (opened with ``O_NOFOLLOW``, a regular file)."""
        self.checked(self.eval_file)
        try:
            append_text(self.eval_file, json.dumps(row) + "\n")
        except OSError as error:
            raise RunFolderError(f"cannot write {self.eval_file} ({reason(error)})") from None

    def read_evaluations(self) -> list[dict[str, Any]]:
        """The checked rows of ``eval.jsonl`` (:func:`read_evaluations`)."""
        return read_evaluations(self.path)

    def forget_after(self, steps: int) -> None:
        """Remove the periodic evaluations and the snapshots of the steps after ``steps``, the
        checkpoint a run resumes from. A run killed after its last checkpoint (``kill -9``, a
        lost machine) left them; the resumed run trains those steps again and writes them
        again, as they were (a snapshot left there would join the opponent pool early)."""
        for path in (self.path / "snapshots").glob(SNAPSHOT_GLOB):
            if re.fullmatch(r"step_\d{9}\.onnx", path.name) and int(path.name[5:14]) > steps:
                path.unlink()
        if not os.path.lexists(self.eval_file):
            return
        lines = read_in(self.path, self.eval_file, MAX_EVAL_BYTES).splitlines(keepends=True)
        kept = [line for line in lines if not _row_after(line, steps)]
        if len(kept) < len(lines):
            self.write(self.eval_file, b"".join(kept))

    # --- checkpoints

    def checkpoint_files(self, name: str) -> tuple[Path, Path]:
        """(``NAME.pt``, ``NAME.json``) of checkpoint ``name``."""
        folder = self.path / "checkpoints"
        return folder / f"{name}.pt", folder / f"{name}.json"

    def pending_weights(self, name: str) -> Path:
        """``NAME.next.pt``: the tensors of checkpoint ``name`` while it is being saved
        (:meth:`save_checkpoint`)."""
        return self.path / "checkpoints" / f"{name}.next.pt"

    def has_checkpoint(self, name: str) -> bool:
        return any(
            path.is_file() for path in (self.checkpoint_files(name)[0], self.pending_weights(name))
        )

    def save_checkpoint(self, model: Any, progress: Progress, name: str = "latest") -> None:
        """Write checkpoint ``name`` of ``model`` (a MaskablePPO): ``NAME.pt`` (the weights and
        the optimiser's state) and ``NAME.json`` (the .pt's SHA-256, its steps and updates, and
        ``progress``; only ``latest`` keeps the resume point).

        In three steps, so that a process killed at any point (``kill -9``, a lost machine)
        leaves a pair that belongs together: the tensors go to ``NAME.next.pt``, then
        ``NAME.json`` is replaced, then ``NAME.next.pt`` is renamed to ``NAME.pt``. Killed
        before the second step, the old pair stands; before the third, the new ``NAME.json``
        goes with ``NAME.next.pt``, which :meth:`read_tensors` finds by its SHA-256."""
        weights, file = self.checkpoint_files(name)
        pending = self.pending_weights(name)
        self.folder("checkpoints")
        buffer = io.BytesIO()
        th.save(
            {"policy": model.policy.state_dict(), "optimizer": model.policy.optimizer.state_dict()},
            buffer,
        )
        tensors = buffer.getvalue()
        self.write(pending, tensors)
        record = Checkpoint(
            format=FORMAT,
            weights_sha256=hashlib.sha256(tensors).hexdigest(),
            steps=model.num_timesteps,
            n_updates=model._n_updates,
            progress=(
                progress
                if name == "latest"
                else dataclasses.replace(progress, resume=None, resume_others=())
            ),
        )
        self.write(file, json.dumps(to_json(record), indent=2).encode())
        self.checked(weights)
        try:
            os.replace(self.checked(pending), weights)  # a link planted at NAME.pt is replaced
        except OSError as error:
            raise RunFolderError(f"cannot write {weights} ({reason(error)})") from None

    def finish_checkpoint(self, name: str, checkpoint: Checkpoint) -> None:
        """Finish a save of checkpoint ``name`` that a killed process left (its ``NAME.json``
        read as ``checkpoint``): ``NAME.next.pt`` renamed to ``NAME.pt`` when ``NAME.json``
        was written with it, removed when not (the save stopped before ``NAME.json``)."""
        weights, pending = self.checkpoint_files(name)[0], self.pending_weights(name)
        if not os.path.lexists(pending):
            return
        data = read_in(self.path, pending, MAX_CHECKPOINT_BYTES)
        try:
            if hashlib.sha256(data).hexdigest() == checkpoint.weights_sha256:
                os.replace(pending, self.checked(weights))
            else:
                pending.unlink()
        except OSError as error:
            raise RunFolderError(f"cannot write {weights} ({reason(error)})") from None

    def read_checkpoint(self, name: str) -> Checkpoint:
        """The checked ``NAME.json`` of checkpoint ``name``."""
        weights, file = self.checkpoint_files(name)
        if not self.has_checkpoint(name):
            raise RunFolderError(
                f"{self.path} has no checkpoint {name!r} yet ({weights} does not exist)"
            )
        if not file.is_file():
            raise RunFolderError(f"{file} is missing (it is written with {weights.name})")
        data = parse_json(read_in(self.path, file, MAX_JSON_BYTES), file)
        if not isinstance(data, dict):
            raise Reader(file).error("", data, "it must be a JSON object")
        return from_json(Checkpoint, data, file)

    def load_checkpoint(
        self, model: Any, checkpoint: Checkpoint, name: str = "latest", rank: int = 0
    ) -> None:
        """Put ``checkpoint`` (``name``'s, read by :meth:`read_checkpoint`) into ``model``, a
        MaskablePPO just made from the run's config for worker ``rank``: the checked weights
        and optimiser state, the steps and updates, and the games and generators of the
        worker's resume point."""
        tensors = self.read_tensors(name, checkpoint, model.policy)
        model.policy.load_state_dict(tensors["policy"])
        model.policy.optimizer.load_state_dict(tensors["optimizer"])
        model.num_timesteps = checkpoint.steps
        model._n_updates = checkpoint.n_updates
        progress, file = checkpoint.progress, self.checkpoint_files(name)[1]
        if progress.resume is None:
            if progress.resume_others:
                raise Reader(file).say(
                    "progress.resume_others", "holds points without progress.resume"
                )
            return
        workers = self.config.workers
        if len(progress.resume_others) != workers - 1:  # type: ignore[operator]
            raise Reader(file).say(
                "progress.resume_others",
                f"has {len(progress.resume_others)} items; the run's {workers} workers need "
                f"{workers - 1}",  # type: ignore[operator]
            )
        point = progress.resume if rank == 0 else progress.resume_others[rank - 1]
        field = "progress.resume" if rank == 0 else f"progress.resume_others[{rank - 1}]"
        batch = getattr(model.get_env(), "env", None)
        if not isinstance(batch, ButtonUpVectorEnv):
            raise RunFolderError(
                f"{file}: progress.resume holds the games of a batched env, but the run's "
                "config.json says another vec_env"
            )
        check_resume_point(point, batch, checkpoint, Reader(file), field)
        try:
            restore_resume_point(model, point)
        except (ValueError, RuntimeError) as error:  # e.g. a snapshot missing from snapshots/
            raise RunFolderError(f"{file}: the saved games cannot be restored: {error}") from None

    def load_policy(self, name: str) -> tuple[Any, Checkpoint]:
        """The policy of checkpoint ``name`` (the run's network, given the checked weights) and
        the checkpoint; for exporting it."""
        checkpoint = self.read_checkpoint(name)
        policy = make_policy(self.config)
        policy.load_state_dict(self.read_tensors(name, checkpoint, policy)["policy"])
        policy.set_training_mode(False)
        return policy, checkpoint

    def read_weights(
        self, name: str, checkpoint: Checkpoint, limit: int, expected: int
    ) -> tuple[Path, bytes]:
        """The path and bytes (at most ``limit``; ``expected``: what the network needs) of the
        .pt that ``checkpoint`` (``NAME.json``) was written with: ``NAME.pt``, or
        ``NAME.next.pt`` when a save stopped before renaming it (:meth:`save_checkpoint`)."""
        weights, pending = self.checkpoint_files(name)[0], self.pending_weights(name)
        for path in (p for p in (weights, pending) if os.path.lexists(p)):
            try:
                size = os.lstat(self.checked(path)).st_size
            except OSError as error:
                raise RunFolderError(f"{path} cannot be read ({reason(error)})") from None
            if size > limit:
                raise RunFolderError(
                    f"{path} is {size:,} bytes, far more than the network of the run's "
                    f"config.json needs (about {expected:,})"
                )
            data = read_in(self.path, path, limit)
            if hashlib.sha256(data).hexdigest() == checkpoint.weights_sha256:
                return path, data
        raise RunFolderError(
            f"{weights} is not the file its {name}.json was written with (its SHA-256 "
            "differs): it was damaged or replaced"
        )

    def read_tensors(self, name: str, checkpoint: Checkpoint, policy: Any) -> dict[str, Any]:
        """The checked tensors of ``NAME.pt`` for ``policy`` (the network rebuilt from the
        run's config): ``{"policy": state_dict, "optimizer": state_dict}``. The file's SHA-256
        must be the one in ``NAME.json``; it is read with ``torch.load(weights_only=True)``;
        every tensor must have the name, shape and dtype of the rebuilt one and finite
        values."""
        # the weights and Adam's two moments, and room for torch's own records
        expected = sum(3 * p.numel() * p.element_size() for p in policy.parameters())
        limit = min(4 * expected + 2**20, MAX_CHECKPOINT_BYTES)
        path, data = self.read_weights(name, checkpoint, limit, expected)
        check_archive(path, data, limit)
        try:
            with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the error says it
                warnings.simplefilter("ignore")
                tensors = th.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except Exception as error:  # torch raises many types here; none of them may escape
            kind = "anything but tensors" if "weights_only" in str(error) else "no readable tensors"
            raise RunFolderError(
                f"{path} cannot be loaded as a checkpoint: it holds {kind} "
                f"({type(error).__name__}), and nothing else is loaded"
            ) from None
        if not isinstance(tensors, dict) or set(tensors) != {"policy", "optimizer"}:
            keys = (
                sorted(map(str, tensors)) if isinstance(tensors, dict) else type(tensors).__name__
            )
            raise RunFolderError(
                f"{path} holds {shown(keys)}; a checkpoint holds 'policy' and 'optimizer'"
            )
        check_weights(Reader(path), tensors["policy"], policy)
        check_optimizer(Reader(path), tensors["optimizer"], policy)
        return tensors


def _row_after(line: bytes, steps: int) -> bool:
    """Whether the line of ``eval.jsonl`` is an evaluation of a step after ``steps`` (a line
    that is not one of train.py's rows is none)."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return False
    after = row.get("steps") if isinstance(row, dict) else None
    return isinstance(after, int) and not isinstance(after, bool) and after > steps


def check_format(run_dir: Path, config: dict[str, Any]) -> None:
    """:class:`RunFolderError` unless ``config`` (the run's config.json) says this version's
    :data:`FORMAT`: one sentence naming the version of buttonup-env that wrote the run."""
    if config.get("format") == FORMAT:
        return
    version = config.get("code_version")
    if not (isinstance(version, str) and re.fullmatch(CODE_VERSION, version)):
        version = "another version of buttonup-env"  # anything else is not printed
    commit = re.search(r"\(([0-9a-f]{7,40})(\+dirty)?\)$", version)
    how = f" (git checkout {commit[1]})" if commit else ""
    raise RunFolderError(
        f"{run_dir} was written by {version}, whose run folders this version does not read; "
        f"resume or export it with that version{how}"
    )


def check_archive(path: Path, data: bytes, limit: int) -> None:
    """:class:`RunFolderError` unless ``data`` (``NAME.pt``) is a zip archive as ``torch.save``
    writes one: every entry stored as it is (torch never compresses one), the sizes its
    directory declares adding up to at most ``limit`` bytes. Only the archive's directory is
    read, before ``torch.load`` inflates anything: a 3 MB entry of deflated zeros would
    inflate to gigabytes, and entries that share their bytes can declare any size."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except Exception:  # zipfile raises many types on a crafted archive; none may escape
        raise RunFolderError(
            f"{path} cannot be loaded as a checkpoint: it holds no readable tensors (it is not "
            "a zip archive as torch.save writes one), and nothing else is loaded"
        ) from None
    for entry in entries:
        if entry.compress_type != zipfile.ZIP_STORED or entry.compress_size != entry.file_size:
            raise RunFolderError(
                f"{path} cannot be loaded as a checkpoint: its entry {shown(entry.filename)} is "
                "compressed, which torch.save never does (a small file could inflate to "
                "gigabytes), and nothing is inflated"
            )
    declared = sum(entry.file_size for entry in entries)
    if declared > limit:
        raise RunFolderError(
            f"{path} cannot be loaded as a checkpoint: its entries declare {declared:,} bytes, "
            f"more than the {limit:,} the network of the run's config.json can need"
        )


# --- the checks of the tensors -------------------------------------------------------------


def check_tensor(reader: Reader, field: str, value: object, like: th.Tensor) -> None:
    """``value`` is a dense tensor of ``like``'s shape and dtype with finite values."""
    if not isinstance(value, th.Tensor) or value.layout != th.strided:
        raise reader.error(
            field, type(value).__name__, f"it must be a tensor of shape {list(like.shape)}"
        )
    if value.dtype != like.dtype or tuple(value.shape) != tuple(like.shape):
        raise RunFolderError(
            f"{reader.source}: {field} is a {value.dtype} tensor of shape {list(value.shape)}; "
            f"the network of the run's config.json has {like.dtype} of shape {list(like.shape)}"
        )
    if value.is_floating_point() and not bool(th.isfinite(value).all()):
        raise RunFolderError(f"{reader.source}: {field} holds values that are not finite")


def check_weights(reader: Reader, weights: object, policy: Any) -> None:
    """The saved weights have exactly the tensors of ``policy``'s state, each of its shape."""
    expected = policy.state_dict()
    if not isinstance(weights, dict):
        raise reader.error("policy", weights, "it must be a dict of tensors")
    for key in expected:
        if key not in weights:
            raise RunFolderError(
                f"{reader.source}: the weights lack {key!r}: they are not of the network of the "
                "run's config.json"
            )
    for key, value in weights.items():
        if key not in expected:
            raise RunFolderError(
                f"{reader.source}: the weights hold {shown(key)}, which the network of the run's "
                "config.json does not have"
            )
        check_tensor(reader, f"policy[{key!r}]", value, expected[key])


def check_optimizer(reader: Reader, saved: object, policy: Any) -> None:
    """The Adam state: the same settings as the rebuilt optimiser (the learning rate aside,
    which training sets before every update) and, per parameter, a step count and two moments
    of its shape."""
    fresh = policy.optimizer.state_dict()
    params = list(policy.parameters())
    if not isinstance(saved, dict) or set(saved) != {"state", "param_groups"}:
        raise reader.error("optimizer", saved, "it must hold 'state' and 'param_groups'")
    groups = saved["param_groups"]
    if not isinstance(groups, list) or len(groups) != len(fresh["param_groups"]):
        raise reader.error(
            "optimizer.param_groups", groups, f"it must be a list of {len(fresh['param_groups'])}"
        )
    for i, (group, like) in enumerate(zip(groups, fresh["param_groups"], strict=True)):
        where = f"optimizer.param_groups[{i}]"
        if not isinstance(group, dict):
            raise reader.error(where, group, "it must be a dict")
        for key, value in group.items():
            if key not in like:
                raise reader.say(where, f"has an unknown setting {shown(key)}")
            if key == "lr":
                if not (
                    isinstance(value, float | int)
                    and not isinstance(value, bool)
                    and 0 <= value < float("inf")
                ):
                    raise reader.error(f"{where}.lr", value, "it must be a finite number >= 0")
            elif not (type(value) is type(like[key]) and value == like[key]):
                raise reader.error(
                    f"{where}.{key}", value, f"the run's optimiser has {shown(like[key])}"
                )
    state = saved["state"]
    if not isinstance(state, dict):
        raise reader.error("optimizer.state", state, "it must be a dict")
    moments = (
        "exp_avg",
        "exp_avg_sq",
        *(("max_exp_avg_sq",) if fresh["param_groups"][0].get("amsgrad") else ()),
    )
    for index, entry in state.items():
        if not (
            isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(params)
        ):
            raise reader.error(
                "an optimizer.state key", index, f"parameters are 0 to {len(params) - 1}"
            )
        where = f"optimizer.state[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"step", *moments}:
            raise reader.error(where, entry, f"it must hold step, {', '.join(moments)}")
        step = entry["step"]
        if (
            not isinstance(step, th.Tensor)
            or step.numel() != 1
            or not bool(th.isfinite(step).all())
            or float(step) < 0
        ):
            raise reader.error(f"{where}.step", step, "it must be a count of updates")
        for key in moments:
            check_tensor(reader, f"{where}.{key}", entry[key], params[index].detach())
            if key != "exp_avg" and bool((entry[key] < 0).any()):
                raise RunFolderError(f"{reader.source}: {where}.{key} holds negative values")
