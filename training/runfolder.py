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
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import random
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import torch as th

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.game.encoding import ENCODINGS
from buttonup_env.game.rules import MAX_ROUND_MARGIN
from buttonup_env.players.bots import BOT_NAMES
from training.common import code_version
from training.config import TrainConfig, make_policy, resolve
from training.typed_json import (
    FieldError,
    Length,
    Pattern,
    Range,
    Reader,
    from_json,
    read_json_file,
    shown,
    to_json,
)

FORMAT = "buttonup-env run folder 2"
"""The ``format`` of the run folders this version writes and reads (in ``config.json`` and
every checkpoint's ``NAME.json``)."""

MAX_PARAMETERS = 50_000_000
"""The largest network a run folder may ask for (the shipped agent's has about 50,000
parameters): a config.json asking for more is refused before anything is built."""

MAX_ROLLOUT_BYTES = 4 << 30
"""The largest rollout (n_envs x n_steps observations) a run folder may ask for: 4 GiB."""


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
    whose games are not saved: a resumed run starts new episodes there)."""


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
    point: ResumePoint, batch: ButtonUpVectorEnv, checkpoint: Checkpoint, reader: Reader
) -> None:
    """:class:`~training.typed_json.FieldError` naming the field when ``point`` (read from a
    checkpoint's ``progress.resume``) cannot belong to ``checkpoint`` and ``batch``, the run's
    freshly made batched env: a generator state its generator refuses, another step or update
    count, another number of envs, a board, colour, score or opponent out of the env's
    range."""
    field = "progress.resume"
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
    """The opponent pool's snapshot of the learner at ``steps`` (``snapshots/step_N.onnx``)."""
    return run_dir / "snapshots" / f"step_{steps:09d}.onnx"


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a partial file never appears."""
    tmp = path.with_name(f"{path.stem}.tmp{path.suffix}")
    tmp.write_bytes(data)
    tmp.replace(path)


@dataclass(frozen=True)
class Origin:
    """How a run was started: the fields of ``config.json`` beside its settings."""

    format: str
    command: str
    code_version: str


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
        if path.exists():
            raise RunFolderError(f"run folder {path} exists; pick another --run-name")
        run = cls(path, config, Origin(FORMAT, command, code_version()))
        (path / "snapshots").mkdir(parents=True)
        saved = {**to_json(run.origin), **to_json(config)}
        (path / "config.json").write_text(json.dumps(saved, indent=2))
        return run

    @classmethod
    def open(cls, path: Path) -> RunFolder:
        """The run folder at ``path``, its ``config.json`` checked: the format, every setting's
        type, and the rules :func:`~training.config.resolve` checks for a new run."""
        file = path / "config.json"
        if not file.is_file():
            raise RunFolderError(f"{path} is not a run folder (it has no config.json)")
        data = read_json_file(file)
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
        check_size(config, file)
        return cls(path, config, origin)

    def card_config(self) -> dict[str, Any]:
        """``config.json``'s command, code version and settings, as a model card holds them."""
        return {
            "command": self.origin.command,
            "code_version": self.origin.code_version,
            **to_json(self.config),
        }

    # --- evaluations

    @property
    def eval_file(self) -> Path:
        """``eval.jsonl``, the periodic evaluations, one JSON object a line."""
        return self.path / "eval.jsonl"

    def append_eval(self, row: dict[str, Any]) -> None:
        with open(self.eval_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")

    # --- checkpoints

    def checkpoint_files(self, name: str) -> tuple[Path, Path]:
        """(``NAME.pt``, ``NAME.json``) of checkpoint ``name``."""
        folder = self.path / "checkpoints"
        return folder / f"{name}.pt", folder / f"{name}.json"

    def has_checkpoint(self, name: str) -> bool:
        return self.checkpoint_files(name)[0].is_file()

    def save_checkpoint(self, model: Any, progress: Progress, name: str = "latest") -> None:
        """Write checkpoint ``name`` of ``model`` (a MaskablePPO): ``NAME.pt`` (the weights and
        the optimiser's state), then ``NAME.json`` (its steps and updates, and ``progress``;
        only ``latest`` keeps the resume point)."""
        weights, file = self.checkpoint_files(name)
        weights.parent.mkdir(exist_ok=True)
        buffer = io.BytesIO()
        th.save(
            {"policy": model.policy.state_dict(), "optimizer": model.policy.optimizer.state_dict()},
            buffer,
        )
        tensors = buffer.getvalue()
        write_atomically(weights, tensors)
        record = Checkpoint(
            format=FORMAT,
            weights_sha256=hashlib.sha256(tensors).hexdigest(),
            steps=model.num_timesteps,
            n_updates=model._n_updates,
            progress=progress if name == "latest" else dataclasses.replace(progress, resume=None),
        )
        write_atomically(file, json.dumps(to_json(record), indent=2).encode())

    def read_checkpoint(self, name: str) -> Checkpoint:
        """The checked ``NAME.json`` of checkpoint ``name``."""
        weights, file = self.checkpoint_files(name)
        if not weights.is_file():
            raise RunFolderError(
                f"{self.path} has no checkpoint {name!r} yet ({weights} does not exist)"
            )
        if not file.is_file():
            raise RunFolderError(f"{file} is missing (it is written with {weights.name})")
        data = read_json_file(file)
        if not isinstance(data, dict):
            raise Reader(file).error("", data, "it must be a JSON object")
        return from_json(Checkpoint, data, file)

    def load_checkpoint(self, model: Any, checkpoint: Checkpoint, name: str = "latest") -> None:
        """Put ``checkpoint`` (``name``'s, read by :meth:`read_checkpoint`) into ``model``, a
        MaskablePPO just made from the run's config: the checked weights and optimiser state,
        the steps and updates, and the games and generators of its resume point."""
        tensors = self.read_tensors(name, checkpoint, model.policy)
        model.policy.load_state_dict(tensors["policy"])
        model.policy.optimizer.load_state_dict(tensors["optimizer"])
        model.num_timesteps = checkpoint.steps
        model._n_updates = checkpoint.n_updates
        point = checkpoint.progress.resume
        if point is None:
            return
        file = self.checkpoint_files(name)[1]
        batch = getattr(model.get_env(), "env", None)
        if not isinstance(batch, ButtonUpVectorEnv):
            raise RunFolderError(
                f"{file}: progress.resume holds the games of a batched env, but the run's "
                "config.json says another vec_env"
            )
        check_resume_point(point, batch, checkpoint, Reader(file))
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

    def read_tensors(self, name: str, checkpoint: Checkpoint, policy: Any) -> dict[str, Any]:
        """The checked tensors of ``NAME.pt`` for ``policy`` (the network rebuilt from the
        run's config): ``{"policy": state_dict, "optimizer": state_dict}``. The file's SHA-256
        must be the one in ``NAME.json``; it is read with ``torch.load(weights_only=True)``;
        every tensor must have the name, shape and dtype of the rebuilt one and finite
        values."""
        path = self.checkpoint_files(name)[0]
        expected = sum(3 * p.numel() * p.element_size() for p in policy.parameters())
        try:  # the weights and Adam's two moments
            size = path.stat().st_size
            if size > 4 * expected + 2**20:
                raise RunFolderError(
                    f"{path} is {size:,} bytes, far more than the network of the run's "
                    f"config.json needs (about {expected:,})"
                )
            data = path.read_bytes()
        except OSError as error:
            raise RunFolderError(f"{path} cannot be read ({error.strerror})") from None
        if hashlib.sha256(data).hexdigest() != checkpoint.weights_sha256:
            raise RunFolderError(
                f"{path} is not the file its {name}.json was written with (its SHA-256 "
                "differs): it was damaged or replaced"
            )
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


def check_format(run_dir: Path, config: dict[str, Any]) -> None:
    """:class:`RunFolderError` unless ``config`` (the run's config.json) says this version's
    :data:`FORMAT`: one sentence naming the version of buttonup-env that wrote the run."""
    if config.get("format") == FORMAT:
        return
    version = config.get("code_version")
    if not (isinstance(version, str) and version.startswith("buttonup-env ")):
        version = "another version of buttonup-env"
    commit = re.search(r"\(([0-9a-f]{7,40})(\+dirty)?\)$", version)
    how = f" (git checkout {commit[1]})" if commit else ""
    raise RunFolderError(
        f"{run_dir} was written by {version}, whose run folders this version does not read; "
        f"resume or export it with that version{how}"
    )


def check_size(config: TrainConfig, file: Path) -> None:
    """:class:`~training.typed_json.FieldError` when a saved config asks for a network or a
    rollout larger than :data:`MAX_PARAMETERS` or :data:`MAX_ROLLOUT_BYTES` (a crafted
    config.json would otherwise exhaust the memory before any check of the tensors). The
    network is built on torch's ``meta`` device, which allocates nothing, and its parameters
    counted."""
    with th.device("meta"):
        parameters = sum(p.numel() for p in make_policy(config).parameters())
    if parameters > MAX_PARAMETERS:
        raise Reader(file).error(
            "hidden",
            list(config.hidden),
            f"its network would have {parameters:,} parameters, more than the "
            f"{MAX_PARAMETERS:,} a run folder may ask for",
        )
    rollout = config.n_envs * config.n_steps * ENCODINGS[config.encoding].size * 4
    if rollout > MAX_ROLLOUT_BYTES:
        raise FieldError(
            f"{file}: n_envs {config.n_envs} x n_steps {config.n_steps} would hold {rollout:,} "
            f"bytes of observations, more than the {MAX_ROLLOUT_BYTES:,} a run folder may ask for"
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
