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
from buttonup_env.game.rules import MAX_ROUND_MARGIN
from buttonup_env.players.bots import BOT_NAMES
from training.runfolder import RunFolderError, refused, refused_value
from training.typed_json import Length, Pattern, Range, from_json, to_json

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


def take_resume_point(model: Any) -> ResumePoint | None:
    """``model``'s (a MaskablePPO at a rollout's start) :class:`ResumePoint`; None with the
    ``dummy`` and ``subproc`` envs, whose state is not saved."""
    batch = batched_env(model)
    if batch is None:
        return None
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return ResumePoint(
        steps=model.num_timesteps,
        n_updates=updates_done(model),
        env=from_json(BatchState, batch.get_state(), "the batched env"),
        episode_starts=tuple(np.asarray(model._last_episode_starts).tolist()),
        torch_rng=TorchRandomState(tuple(th.get_rng_state().tolist())),
        numpy_rng=NumpyGlobalState(name, tuple(keys.tolist()), pos, has_gauss, gauss),
        python_rng=PythonRandomState(version, internal, gauss_next),
    )


def restore(model: Any, point: ResumePoint, file: Path, field: str) -> None:
    """Put ``model`` (a MaskablePPO with a fresh batched env, just given the weights and
    counts of the checkpoint ``file``) back at ``point``, read from the checkpoint's
    ``field``, once it is checked (:func:`check_resume_point`)."""
    batch = batched_env(model)
    if batch is None:
        raise RunFolderError(
            f"{file}: progress.resume holds the games of a batched env, but the run's "
            "config.json says another vec_env"
        )
    check_resume_point(point, batch, model.num_timesteps, updates_done(model), file, field)
    try:
        batch.set_state(to_json(point.env))
    except (ValueError, RuntimeError) as error:  # e.g. a snapshot missing from snapshots/
        raise RunFolderError(f"{file}: the saved games cannot be restored: {error}") from None
    model._last_obs = batch.observe()
    model._last_episode_starts = np.array(point.episode_starts, dtype=bool)
    th.set_rng_state(point.torch_rng.as_tensor())
    np.random.set_state(point.numpy_rng.as_tuple())
    random.setstate(point.python_rng.as_tuple())


# --- the checks ----------------------------------------------------------------------------


def check_resume_point(
    point: ResumePoint,
    batch: ButtonUpVectorEnv,
    steps: int,
    updates: int,
    file: Path | str,
    field: str = "progress.resume",
) -> None:
    """:class:`~training.runfolder.RunFolderError` naming the field when ``point`` (read from
    the checkpoint ``file``'s ``field``, at ``steps`` after ``updates``) cannot belong to
    ``batch``, the worker's freshly made batched env: a generator state its generator refuses,
    another step or update count, another number of envs, a board, colour, score or opponent
    out of the env's range."""
    if point.python_rng.internal[-1] > 624:  # the position in the 624 words
        raise refused_value(
            file,
            f"{field}.python_rng.internal[624]",
            point.python_rng.internal[-1],
            "it must be a whole number from 0 to 624",
        )
    missing = [name for name in BOT_NAMES if name not in point.env.bots]
    if missing:
        raise refused(file, f"{field}.env.bots.{missing[0]}", "is missing")

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
        ("env.num_envs", point.env.num_envs, batch.num_envs, "the run's config has n_envs"),
    ):
        if saved != expected:
            raise refused_value(file, f"{field}.{name}", saved, f"{says} {expected}")
    if len(point.episode_starts) != batch.num_envs:
        raise refused(
            file,
            f"{field}.episode_starts",
            f"has {len(point.episode_starts)} items; it must have {batch.num_envs}",
        )
    check_arrays(point.env, batch, file, f"{field}.env.arrays")


def check_arrays(env: BatchState, batch: ButtonUpVectorEnv, file: Path | str, field: str) -> None:
    """:class:`~training.runfolder.RunFolderError` naming the item when an array of ``env`` is
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
        raise refused(file, f"{field}.{unknown[0]}", "is not an array of the batched env")
    for key in batch.STATE_ARRAYS:
        like = getattr(batch, key)
        if key not in env.arrays:
            raise refused(file, f"{field}.{key}", "is missing")
        try:
            saved = np.array(env.arrays[key], dtype=object)
        except ValueError:  # rows of different lengths
            saved = np.array([])
        if saved.shape != like.shape:
            raise refused(
                file,
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
            raise refused_value(
                file, f"{field}.{key}{''.join(f'[{i}]' for i in index)}", saved[index], allowed
            )
