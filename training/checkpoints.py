"""A run's checkpoints: saving them, reading them back, and checking every tensor first.

``checkpoints/NAME.pt`` and ``NAME.json`` for ``latest`` and ``best`` (the lowest regret
against the perfect bot, in the terms of the run's objective):
the tensors only (the policy's weights and Adam's state, written with ``torch.save`` and read
back with ``torch.load(weights_only=True)``, which refuses anything but tensors and plain
containers: no code runs while it is read), and a :class:`Checkpoint` (the steps and updates
done, the :class:`Progress` of the run, the SHA-256 of ``NAME.pt``; ``latest``'s progress
holds the :class:`~training.resume.ResumePoint`). The network is rebuilt from the run's
checked config and every tensor is checked against it before anything is loaded; whatever
is wrong raises :class:`~training.runfolder.RunFolderError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import torch as th

from buttonup_env.game.files import reason
from buttonup_env.game.records import shown
from buttonup_env.learn.round_starts import RoundStartValues
from training.config import make_policy
from training.resume import ResumePoint, restore, set_counts, updates_done
from training.runfolder import (
    FORMAT,
    MAX_JSON_BYTES,
    RunFolder,
    RunFolderError,
    parse,
    read_typed,
    refused,
    refused_value,
)
from training.typed_json import Pattern, Range, to_json

MAX_CHECKPOINT_BYTES = 1 << 30
"""The fixed ceiling of a checkpoint's NAME.pt, whatever network its config.json asks for
(the largest allowed, 50 million parameters, takes 600 MB with Adam's two moments)."""

Count = Annotated[int, Range(0)]


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
    """The lowest regret against the perfect bot of the periodic evaluations, in the terms of
    the run's objective (:data:`training.runfolder.BEST_BY`: the match regret for a match run,
    the round regret for a round run), ..."""
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


@dataclass(frozen=True)
class Checkpoints:
    """The checkpoints of the run folder ``run``: each saved, read back and loaded through
    it."""

    run: RunFolder

    def files(self, name: str) -> tuple[Path, Path]:
        """(``NAME.pt``, ``NAME.json``) of checkpoint ``name``."""
        folder = self.run.path / "checkpoints"
        return folder / f"{name}.pt", folder / f"{name}.json"

    def pending(self, name: str) -> Path:
        """``NAME.next.pt``: the tensors of checkpoint ``name`` while it is being saved
        (:meth:`save`)."""
        return self.run.path / "checkpoints" / f"{name}.next.pt"

    def exists(self, name: str) -> bool:
        return any(path.is_file() for path in (self.files(name)[0], self.pending(name)))

    def save(self, model: Any, progress: Progress, name: str = "latest") -> None:
        """Write checkpoint ``name`` of ``model`` (a MaskablePPO): ``NAME.pt`` (the weights and
        the optimiser's state) and ``NAME.json`` (the .pt's SHA-256, its steps and updates, and
        ``progress``; only ``latest`` keeps the resume point).

        In three steps, so that a process killed at any point (``kill -9``, a lost machine)
        leaves a pair that belongs together: the tensors go to ``NAME.next.pt``, then
        ``NAME.json`` is replaced, then ``NAME.next.pt`` is renamed to ``NAME.pt``. Killed
        before the second step, the old pair stands; before the third, the new ``NAME.json``
        goes with ``NAME.next.pt``, which :meth:`read_tensors` finds by its SHA-256."""
        run = self.run
        weights, file = self.files(name)
        pending = self.pending(name)
        run.folder("checkpoints")
        buffer = io.BytesIO()
        th.save(
            {"policy": model.policy.state_dict(), "optimizer": model.policy.optimizer.state_dict()},
            buffer,
        )
        tensors = buffer.getvalue()
        run.write(pending, tensors)
        record = Checkpoint(
            format=FORMAT,
            weights_sha256=hashlib.sha256(tensors).hexdigest(),
            steps=model.num_timesteps,
            n_updates=updates_done(model),
            progress=(
                progress
                if name == "latest"
                else dataclasses.replace(progress, resume=None, resume_others=())
            ),
        )
        run.write(file, json.dumps(to_json(record), indent=2).encode())
        run.check(weights)
        try:
            os.replace(run.check(pending), weights)  # a link planted at NAME.pt is replaced
        except OSError as error:
            raise RunFolderError(f"cannot write {weights} ({reason(error)})") from None

    def finish(self, name: str, checkpoint: Checkpoint) -> None:
        """Finish a save of checkpoint ``name`` that a killed process left (its ``NAME.json``
        read as ``checkpoint``): ``NAME.next.pt`` renamed to ``NAME.pt`` when ``NAME.json``
        was written with it, removed when not (the save stopped before ``NAME.json``)."""
        weights, pending = self.files(name)[0], self.pending(name)
        if not os.path.lexists(pending):
            return
        data = self.run.read(pending, MAX_CHECKPOINT_BYTES)
        try:
            if hashlib.sha256(data).hexdigest() == checkpoint.weights_sha256:
                os.replace(pending, self.run.check(weights))
            else:
                pending.unlink()
        except OSError as error:
            raise RunFolderError(f"cannot write {weights} ({reason(error)})") from None

    def read(self, name: str) -> Checkpoint:
        """The checked ``NAME.json`` of checkpoint ``name``."""
        weights, file = self.files(name)
        if not self.exists(name):
            raise RunFolderError(
                f"{self.run.path} has no checkpoint {name!r} yet ({weights} does not exist)"
            )
        if not file.is_file():
            raise RunFolderError(f"{file} is missing (it is written with {weights.name})")
        return read_typed(Checkpoint, parse(self.run.read(file, MAX_JSON_BYTES), file), file)

    def load(
        self,
        model: Any,
        checkpoint: Checkpoint,
        name: str = "latest",
        rank: int = 0,
        round_starts: RoundStartValues | None = None,
    ) -> None:
        """Put ``checkpoint`` (``name``'s, read by :meth:`read`) into ``model``, a MaskablePPO
        just made from the run's config for worker ``rank``: the checked weights and optimiser
        state, the steps and updates, and the games and generators of the worker's resume
        point (and its table, into ``round_starts``, the worker's)."""
        tensors = self.read_tensors(name, checkpoint, model.policy)
        model.policy.load_state_dict(tensors["policy"])
        model.policy.optimizer.load_state_dict(tensors["optimizer"])
        set_counts(model, checkpoint.steps, checkpoint.n_updates)
        progress, file = checkpoint.progress, self.files(name)[1]
        if progress.resume is None:
            if progress.resume_others:
                raise refused(
                    file, "progress.resume_others", "holds points without progress.resume"
                )
            return
        workers = self.run.config.workers
        if len(progress.resume_others) != workers - 1:
            raise refused(
                file,
                "progress.resume_others",
                f"has {len(progress.resume_others)} items; the run's {workers} workers need "
                f"{workers - 1}",
            )
        point = progress.resume if rank == 0 else progress.resume_others[rank - 1]
        field = "progress.resume" if rank == 0 else f"progress.resume_others[{rank - 1}]"
        restore(model, point, file, field, round_starts)

    def load_policy(self, name: str) -> tuple[Any, Checkpoint]:
        """The policy of checkpoint ``name`` (the run's network, given the checked weights) and
        the checkpoint; for exporting it."""
        checkpoint = self.read(name)
        policy = make_policy(self.run.config)
        policy.load_state_dict(self.read_tensors(name, checkpoint, policy)["policy"])
        policy.set_training_mode(False)
        return policy, checkpoint

    def read_weights(
        self, name: str, checkpoint: Checkpoint, limit: int, expected: int
    ) -> tuple[Path, bytes]:
        """The path and bytes (at most ``limit``; ``expected``: what the network needs) of the
        .pt that ``checkpoint`` (``NAME.json``) was written with: ``NAME.pt``, or
        ``NAME.next.pt`` when a save stopped before renaming it (:meth:`save`)."""
        weights, pending = self.files(name)[0], self.pending(name)
        for path in (p for p in (weights, pending) if os.path.lexists(p)):
            try:
                size = os.lstat(self.run.check(path)).st_size
            except OSError as error:
                raise RunFolderError(f"{path} cannot be read ({reason(error)})") from None
            if size > limit:
                raise RunFolderError(
                    f"{path} is {size:,} bytes, far more than the network of the run's "
                    f"config.json needs (about {expected:,})"
                )
            data = self.run.read(path, limit)
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
                f"{path} holds {shown(keys, 40)}; a checkpoint holds 'policy' and 'optimizer'"
            )
        check_weights(path, tensors["policy"], policy)
        check_optimizer(path, tensors["optimizer"], policy)
        return tensors


def check_archive(path: Path, data: bytes, limit: int) -> None:
    """:class:`~training.runfolder.RunFolderError` unless ``data`` (``NAME.pt``) is a zip
    archive as ``torch.save`` writes one: every entry stored as it is (torch never compresses
    one), the sizes its directory declares adding up to at most ``limit`` bytes. Only the
    archive's directory is read, before ``torch.load`` inflates anything: a 3 MB entry of
    deflated zeros would inflate to gigabytes, and entries that share their bytes can declare
    any size."""
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
            name = shown(entry.filename, 40)
            raise RunFolderError(
                f"{path} cannot be loaded as a checkpoint: its entry {name} is "
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


def check_tensor(source: Path, field: str, value: object, like: th.Tensor) -> None:
    """``value`` is a dense tensor of ``like``'s shape and dtype with finite values."""
    if not isinstance(value, th.Tensor) or value.layout != th.strided:
        raise refused_value(
            source, field, type(value).__name__, f"it must be a tensor of shape {list(like.shape)}"
        )
    if value.dtype != like.dtype or tuple(value.shape) != tuple(like.shape):
        raise RunFolderError(
            f"{source}: {field} is a {value.dtype} tensor of shape {list(value.shape)}; "
            f"the network of the run's config.json has {like.dtype} of shape {list(like.shape)}"
        )
    if value.is_floating_point() and not bool(th.isfinite(value).all()):
        raise RunFolderError(f"{source}: {field} holds values that are not finite")


def check_weights(source: Path, weights: object, policy: Any) -> None:
    """The saved weights have exactly the tensors of ``policy``'s state, each of its shape."""
    expected = policy.state_dict()
    if not isinstance(weights, dict):
        raise refused_value(source, "policy", weights, "it must be a dict of tensors")
    for key in expected:
        if key not in weights:
            raise RunFolderError(
                f"{source}: the weights lack {key!r}: they are not of the network of the "
                "run's config.json"
            )
    for key, value in weights.items():
        if key not in expected:
            raise RunFolderError(
                f"{source}: the weights hold {shown(key, 40)}, which the network of the run's "
                "config.json does not have"
            )
        check_tensor(source, f"policy[{key!r}]", value, expected[key])


def check_optimizer(source: Path, saved: object, policy: Any) -> None:
    """The Adam state: the same settings as the rebuilt optimiser (the learning rate aside,
    which training sets before every update) and, per parameter, a step count and two moments
    of its shape."""
    fresh = policy.optimizer.state_dict()
    if not isinstance(saved, dict) or set(saved) != {"state", "param_groups"}:
        raise refused_value(source, "optimizer", saved, "it must hold 'state' and 'param_groups'")
    check_param_groups(source, saved["param_groups"], fresh["param_groups"])
    state = saved["state"]
    if not isinstance(state, dict):
        raise refused_value(source, "optimizer.state", state, "it must be a dict")
    params = list(policy.parameters())
    moments = (
        "exp_avg",
        "exp_avg_sq",
        *(("max_exp_avg_sq",) if fresh["param_groups"][0].get("amsgrad") else ()),
    )
    for index, entry in state.items():
        if not (
            isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(params)
        ):
            raise refused_value(
                source, "an optimizer.state key", index, f"parameters are 0 to {len(params) - 1}"
            )
        where = f"optimizer.state[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"step", *moments}:
            raise refused_value(source, where, entry, f"it must hold step, {', '.join(moments)}")
        step = entry["step"]
        if (
            not isinstance(step, th.Tensor)
            or step.numel() != 1
            or not bool(th.isfinite(step).all())
            or float(step) < 0
        ):
            raise refused_value(source, f"{where}.step", step, "it must be a count of updates")
        for key in moments:
            check_tensor(source, f"{where}.{key}", entry[key], params[index].detach())
            if key != "exp_avg" and bool((entry[key] < 0).any()):
                raise RunFolderError(f"{source}: {where}.{key} holds negative values")


def check_param_groups(source: Path, groups: object, fresh: list[dict[str, Any]]) -> None:
    """The saved optimiser's settings are the rebuilt one's (``fresh``), the learning rate
    aside: a finite number >= 0."""
    if not isinstance(groups, list) or len(groups) != len(fresh):
        raise refused_value(
            source, "optimizer.param_groups", groups, f"it must be a list of {len(fresh)}"
        )
    for i, (group, like) in enumerate(zip(groups, fresh, strict=True)):
        where = f"optimizer.param_groups[{i}]"
        if not isinstance(group, dict):
            raise refused_value(source, where, group, "it must be a dict")
        for key, value in group.items():
            if key not in like:
                raise refused(source, where, f"has an unknown setting {shown(key, 40)}")
            if key == "lr":
                if not (
                    isinstance(value, float | int)
                    and not isinstance(value, bool)
                    and 0 <= value < float("inf")
                ):
                    raise refused_value(
                        source, f"{where}.lr", value, "it must be a finite number >= 0"
                    )
            elif not (type(value) is type(like[key]) and value == like[key]):
                raise refused_value(
                    source,
                    f"{where}.{key}",
                    value,
                    f"the run's optimiser has {shown(like[key], 40)}",
                )
