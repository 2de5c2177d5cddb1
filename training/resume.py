"""The point a resumed run goes on from: the games under way and every random generator,
taken at a rollout's start, checked and restored.

This is the only module that reads Stable-Baselines3's private fields (``_n_updates``,
``_last_obs``, ``_last_episode_starts``): a new major version of SB3 is tried here first
(``pyproject.toml`` pins ``<3``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import torch as th

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.learn.round_starts import RoundStartValues
from training.runfolder import RunFolderError, refused, refused_value
from training.typed_json import Length, Range

Byte = Annotated[int, Range(0, 255)]
Word32 = Annotated[int, Range(0, 2**32 - 1)]
Count = Annotated[int, Range(0)]


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
class ResumePoint:
    """What a resumed run needs to go on exactly as this one would from here: taken at a
    rollout's start (the last thing before its first step) with the batched env, whose games
    it holds as ``ButtonUpVectorEnv.get_state`` gives them (the env checks them when they are
    restored), with SB3's episode starts, the generators torch, numpy and Python draw from
    (actions, minibatches) and, where the rounds' ends are valued by a table learnt in training,
    that table (``RoundStartValues.get_state``, checked when it is restored)."""

    steps: Count
    n_updates: Count
    env: dict[str, Any]
    episode_starts: tuple[bool, ...]
    torch_rng: TorchRandomState
    numpy_rng: NumpyGlobalState
    python_rng: PythonRandomState
    round_starts: dict[str, Any] | None = None


# --- SB3's private fields ------------------------------------------------------------------


def updates_done(model: Any) -> int:
    """The gradient updates ``model`` (a MaskablePPO) has made."""
    return int(model._n_updates)


def set_counts(model: Any, steps: int, updates: int) -> None:
    """Put ``model``'s step and update counts at a checkpoint's."""
    model.num_timesteps = steps
    model._n_updates = updates


def batched_env(model: Any) -> ButtonUpVectorEnv | None:
    """The batched env ``model`` trains on, or None (the ``dummy`` and ``subproc`` envs)."""
    batch = getattr(model.get_env(), "env", None)
    return batch if isinstance(batch, ButtonUpVectorEnv) else None


def take_resume_point(
    model: Any, round_starts: RoundStartValues | None = None
) -> ResumePoint | None:
    """``model``'s (a MaskablePPO at a rollout's start) :class:`ResumePoint`, with the table
    ``round_starts`` its rounds are valued by, if any; None with the ``dummy`` and ``subproc``
    envs, whose state is not saved."""
    batch = batched_env(model)
    if batch is None:
        return None
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return ResumePoint(
        steps=model.num_timesteps,
        n_updates=updates_done(model),
        env=batch.get_state(),
        episode_starts=tuple(np.asarray(model._last_episode_starts).tolist()),
        torch_rng=TorchRandomState(tuple(th.get_rng_state().tolist())),
        numpy_rng=NumpyGlobalState(name, tuple(keys.tolist()), pos, has_gauss, gauss),
        python_rng=PythonRandomState(version, internal, gauss_next),
        round_starts=None if round_starts is None else round_starts.get_state(),
    )


def restore(
    model: Any,
    point: ResumePoint,
    file: Path,
    field: str,
    round_starts: RoundStartValues | None = None,
) -> None:
    """Put ``model`` (a MaskablePPO with a fresh batched env, just given the weights and
    counts of the checkpoint ``file``) and the run's table ``round_starts`` (if its rounds are
    valued by one) back at ``point``, read from the checkpoint's ``field``, once it is checked
    (:func:`check_resume_point`). A point without a table (a checkpoint from before tables
    were saved) leaves the table to learn again."""
    batch = batched_env(model)
    if batch is None:
        raise RunFolderError(
            f"{file}: progress.resume holds the games of a batched env, but the run's "
            "config.json says another vec_env"
        )
    check_resume_point(point, model.num_timesteps, updates_done(model), file, field)
    restore_games(batch, point, file, field)
    restore_table(round_starts, point, file, field)
    model._last_obs = batch.observe()
    model._last_episode_starts = np.array(point.episode_starts, dtype=bool)
    th.set_rng_state(point.torch_rng.as_tensor())
    np.random.set_state(point.numpy_rng.as_tuple())
    random.setstate(point.python_rng.as_tuple())


def restore_games(
    batch: ButtonUpVectorEnv, point: ResumePoint, file: Path | str, field: str
) -> None:
    """Put the games of ``point`` (read from the checkpoint ``file``'s ``field``) back into
    ``batch``, the worker's freshly made batched env, which checks them first
    (``ButtonUpVectorEnv.set_state``: its arrays, generators and opponents), with as many
    episode starts as it has envs; :class:`~training.runfolder.RunFolderError` in one sentence
    naming the field otherwise."""
    try:
        batch.set_state(point.env)
    except (ValueError, RuntimeError) as error:  # e.g. a snapshot missing from snapshots/
        raise RunFolderError(
            f"{file}: the saved games cannot be restored from {field}.env: {error}"
        ) from None
    if len(point.episode_starts) != batch.num_envs:
        raise refused(
            file,
            f"{field}.episode_starts",
            f"has {len(point.episode_starts)} items; it must have {batch.num_envs}",
        )


def restore_table(
    table: RoundStartValues | None, point: ResumePoint, file: Path | str, field: str
) -> None:
    """Put the table of ``point`` back into ``table``;
    :class:`~training.runfolder.RunFolderError` naming the field where it does not fit."""
    if point.round_starts is None:
        return
    if table is None:
        raise refused(
            file,
            f"{field}.round_starts",
            "holds a table of round starts, but the run's config.json values no round by one",
        )
    try:
        table.set_state(point.round_starts)
    except ValueError as error:
        raise refused(file, f"{field}.round_starts", f"cannot be restored: {error}") from None


# --- the checks ----------------------------------------------------------------------------


def check_resume_point(
    point: ResumePoint, steps: int, updates: int, file: Path | str, field: str = "progress.resume"
) -> None:
    """:class:`~training.runfolder.RunFolderError` naming the field when ``point`` (read from
    the checkpoint ``file``'s ``field``, at ``steps`` after ``updates``) cannot belong to the
    run: a generator state its generator refuses, another step or update count (the games are
    checked by the env that restores them: :func:`restore_games`)."""
    if point.python_rng.internal[-1] > 624:  # the position in the 624 words
        raise refused_value(
            file,
            f"{field}.python_rng.internal[624]",
            point.python_rng.internal[-1],
            "it must be a whole number from 0 to 624",
        )
    scratch: dict[str, Callable[[], object]] = {  # what the bounds cannot check
        "torch_rng": lambda: th.Generator().set_state(point.torch_rng.as_tensor()),
        "numpy_rng": lambda: np.random.RandomState().set_state(point.numpy_rng.as_tuple()),
        "python_rng": lambda: random.Random().setstate(point.python_rng.as_tuple()),
    }
    for name, restore_state in scratch.items():
        try:
            restore_state()
        except (ValueError, TypeError, OverflowError, RuntimeError) as error:
            why = " ".join(str(error).split())[:100]
            raise refused(
                file, f"{field}.{name}", f"is not a generator state that can be restored ({why})"
            ) from None
    for name, saved, expected, says in (
        ("steps", point.steps, steps, "the checkpoint is at step"),
        ("n_updates", point.n_updates, updates, "the checkpoint has"),
    ):
        if saved != expected:
            raise refused_value(file, f"{field}.{name}", saved, f"{says} {expected}")
