"""The checkpoints of a training run, saved and loaded without unpickling anything.

    python training/checkpoints.py runs/NAME --trusted   # convert a run of the earlier format

A checkpoint ``NAME`` (``latest``, ``best``) of a run folder is two files in
``RUN/checkpoints/``:

* ``NAME.pt``: tensors only, the policy's weights and the Adam optimiser's state, written
  with ``torch.save`` and read back with ``torch.load(weights_only=True)``, which refuses
  anything but tensors and plain containers (no code runs while it is read);
* ``NAME.json``: everything else, as JSON the project writes itself: the steps and updates
  done, the run's progress (training time, when the next snapshot, evaluation and checkpoint
  are due, the lowest regret so far), the SHA-256 of ``NAME.pt`` and, for ``latest``, the
  resume point (the batched env's games and every generator's state).

Loading rebuilds the network from the run's ``config.json`` (its encoding and layer sizes)
and checks every saved value before using it: the tensors' names, shapes, types and
finiteness against the rebuilt network and optimiser, and every field of ``NAME.json`` and of
the resume point. A damaged or crafted file is refused with :class:`CheckpointError`, one
sentence naming the file and the field.

Run folders written before this format kept ``NAME.zip``, a Stable-Baselines3 file whose
loading unpickles code; they are refused with a sentence pointing to this script, which
converts such a folder once you say you made it yourself (``--trusted``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import json
import math
import os
import random
import re
import types
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Literal, TypeVar

import numpy as np
import tyro

from buttonup_env.ui.cli import run_cli
from training.common import fail

FORMAT = "buttonup-env checkpoint 1"
"""The ``format`` written in every checkpoint's ``NAME.json``."""

NAMES = ("latest", "best")
"""The checkpoints a run keeps: the last one, and the one of lowest regret."""

SNAPSHOT_NAME = re.compile(r"step_\d{9}\.onnx")
"""The file names of the opponent snapshots in ``RUN/snapshots``."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message is one sentence naming the file."""


# --- checks of saved values ----------------------------------------------------------------


def shown(value: object) -> str:
    """``value`` as Python writes it, cut short when long (for messages)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Fields:
    """Checks of the values read from one file; each error names the file and the field."""

    def __init__(self, path: Path | str) -> None:
        self.path = path

    def error(self, field: str, value: object, allowed: str) -> CheckpointError:
        return CheckpointError(f"{self.path}: {field} is {shown(value)}; {allowed}")

    def missing(self, field: str) -> CheckpointError:
        return CheckpointError(f"{self.path}: {field} is missing")

    def whole(self, value: object, field: str, low: int = 0, high: int | None = None) -> int:
        """``value``, a whole number from ``low`` to ``high`` (no upper bound: None)."""
        if not _is_int(value) or value < low or (high is not None and value > high):  # type: ignore[operator]
            if high == low:
                raise self.error(field, value, f"it must be {low}")
            if high is None:
                span = f">= {low}"
            else:
                top = (
                    f"2**{high.bit_length()} - 1"
                    if high >= 2**32 - 1 and (high + 1) & high == 0
                    else high
                )
                span = f"from {low} to {top}"
            raise self.error(field, value, f"it must be a whole number {span}")
        return value  # type: ignore[return-value]

    def number(self, value: object, field: str, low: float = 0.0) -> float:
        """``value``, a finite number >= ``low``."""
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value < low:  # type: ignore[arg-type,operator]
            raise self.error(field, value, f"it must be a finite number >= {low:g}")
        return float(value)  # type: ignore[arg-type]

    def flag(self, value: object, field: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(field, value, "it must be true or false")
        return value

    def text(self, value: object, field: str) -> str:
        if not isinstance(value, str):
            raise self.error(field, value, "it must be a string")
        return value

    def mapping(self, value: object, field: str, keys: tuple[str, ...] | None = None) -> dict:
        """``value``, a JSON object; with ``keys``, holding exactly those."""
        if not isinstance(value, dict):
            raise self.error(field, value, "it must be a JSON object")
        if keys is not None:
            missing = [k for k in keys if k not in value]
            if missing:
                raise self.missing(f"{field}.{missing[0]}")
            extra = sorted(set(value) - set(keys), key=str)
            if extra:
                raise CheckpointError(
                    f"{self.path}: {field} has an unknown entry {shown(extra[0])}; it holds "
                    f"{', '.join(keys)}"
                )
        return value

    def items(self, value: object, field: str, length: int | None = None) -> list:
        """``value``, a JSON list (of ``length`` items, when given)."""
        if not isinstance(value, list):
            raise self.error(field, value, "it must be a list")
        if length is not None and len(value) != length:
            raise CheckpointError(
                f"{self.path}: {field} has {len(value)} items; it must have {length}"
            )
        return value

    def whole_list(self, value: object, field: str, length: int, low: int, high: int) -> list:
        """``value``, a list of ``length`` whole numbers from ``low`` to ``high``."""
        items = self.items(value, field, length)
        for i, item in enumerate(items):
            if not _is_int(item) or not low <= item <= high:
                self.whole(item, f"{field}[{i}]", low, high)
        return items


T = TypeVar("T")


def dataclass_from_json(cls: type[T], data: object, fields: Fields, where: str = "") -> T:
    """The dataclass ``cls`` (a config) from the JSON object ``data``, every field checked
    against its type hint: whole numbers, numbers, strings, true/false, paths, one of a
    ``Literal``'s values, ``None`` where allowed, tuples and nested dataclasses. Raises
    :class:`CheckpointError` naming the field for a missing, unknown or mistyped one, and
    for a value that ``cls`` itself refuses."""
    data = fields.mapping(data, where.rstrip(".") or "the file")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(names), key=str)
    if unknown:
        raise CheckpointError(
            f"{fields.path}: {where}{unknown[0]} is not a setting of this version of "
            "buttonup-env (the file was changed, or made by another version)"
        )
    for name in names:
        if name not in data:
            raise fields.missing(f"{where}{name}")
    values = {name: _from_json(hints[name], data[name], fields, f"{where}{name}") for name in names}
    try:
        return cls(**values)
    except ValueError as error:
        raise CheckpointError(
            f"{fields.path}: {where.rstrip('.') or 'the file'}: {error}"
        ) from None


def _from_json(hint: Any, value: object, fields: Fields, field: str) -> Any:
    """``value`` read as the type ``hint`` (see :func:`dataclass_from_json`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) != 1:  # pragma: no cover - the configs have no such field
            raise TypeError(f"{field}: cannot read the type {hint} from JSON")
        return _from_json(options[0], value, fields, field)
    if origin is Literal:
        if any(type(value) is type(a) and value == a for a in args):
            return value
        raise fields.error(field, value, f"it must be one of {', '.join(map(repr, args))}")
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            items = fields.items(value, field)
            hints = [args[0]] * len(items)
        else:
            items, hints = fields.items(value, field, len(args)), list(args)
        pairs = enumerate(zip(hints, items, strict=True))
        return tuple(_from_json(h, v, fields, f"{field}[{i}]") for i, (h, v) in pairs)
    if hint is bool:
        return fields.flag(value, field)
    if hint is int:
        if not _is_int(value):
            raise fields.error(field, value, "it must be a whole number")
        return value
    if hint is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise fields.error(field, value, "it must be a number")
        return float(value)
    if hint is str:
        return fields.text(value, field)
    if isinstance(hint, type) and issubclass(hint, PurePath):
        return hint(fields.text(value, field))
    if dataclasses.is_dataclass(hint):
        return dataclass_from_json(hint, value, fields, f"{field}.")  # type: ignore[arg-type]
    raise TypeError(f"{field}: cannot read the type {hint} from JSON")  # pragma: no cover


# --- files -----------------------------------------------------------------------------------


def files(run_dir: Path, name: str) -> tuple[Path, Path]:
    """(``NAME.pt``, ``NAME.json``) of the run folder ``run_dir``."""
    folder = run_dir / "checkpoints"
    return folder / f"{name}.pt", folder / f"{name}.json"


def old_format(run_dir: Path, name: str) -> Path | None:
    """``NAME.zip`` of an earlier version's run folder (when there is no ``NAME.pt``)."""
    old = run_dir / "checkpoints" / f"{name}.zip"
    return old if old.is_file() and not files(run_dir, name)[0].is_file() else None


def old_format_message(run_dir: Path, old: Path) -> str:
    return (
        f"{old} is a checkpoint of an earlier version of buttonup-env (a Stable-Baselines3 "
        ".zip, whose loading unpickles code that can do anything, so it is not loaded); if you "
        f"made this run yourself, convert it with: python training/checkpoints.py {run_dir} "
        "--trusted"
    )


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a partial file never appears)."""
    tmp = path.with_name(f"{path.stem}.tmp{path.suffix}")
    tmp.write_bytes(data)
    tmp.replace(path)


def save_checkpoint(model: Any, run_dir: Path, state: dict, name: str = "latest") -> None:
    """Write checkpoint ``name`` of ``model`` (a MaskablePPO) into ``run_dir/checkpoints``:
    ``NAME.pt`` (the weights and the optimiser's state), then ``NAME.json`` (``state``, the
    run's progress, with the steps and updates done; only ``latest`` keeps the resume
    point)."""
    import torch as th

    folder = run_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    th.save(
        {"policy": model.policy.state_dict(), "optimizer": model.policy.optimizer.state_dict()},
        buffer,
    )
    tensors = buffer.getvalue()
    _write(folder / f"{name}.pt", tensors)
    saved = dict(
        state,
        format=FORMAT,
        steps=model.num_timesteps,
        n_updates=model._n_updates,
        weights_sha256=hashlib.sha256(tensors).hexdigest(),
    )
    if name != "latest":  # only the latest checkpoint is resumed
        saved.pop("resume", None)
    _write(folder / f"{name}.json", json.dumps(saved, indent=2).encode())


# --- NAME.json -------------------------------------------------------------------------------

PROGRESS: dict[str, Callable[[Fields, object, str], object]] = {
    "steps": lambda f, v, k: f.whole(v, k),
    "n_updates": lambda f, v, k: f.whole(v, k),
    "train_seconds": lambda f, v, k: f.number(v, k),
    "next_snapshot": lambda f, v, k: f.whole(v, k),
    "next_eval": lambda f, v, k: f.whole(v, k),
    "next_checkpoint": lambda f, v, k: f.whole(v, k),
    "last_eval_steps": lambda f, v, k: f.whole(v, k),
    "best_regret": lambda f, v, k: f.number(v, k),
    "best_steps": lambda f, v, k: f.whole(v, k),
    "resume": lambda f, v, k: f.mapping(v, k),  # checked in full where it is used
}
"""The fields a checkpoint's ``NAME.json`` may hold beside ``format`` and
``weights_sha256``, each with its check (``steps``, ``n_updates`` and ``train_seconds`` are
always there)."""

REQUIRED = ("steps", "n_updates", "train_seconds")


def require(run_dir: Path, name: str) -> None:
    """:class:`CheckpointError` unless the run has both files of checkpoint ``name`` in this
    format (the message says how to convert one of the earlier format)."""
    weights, path = files(run_dir, name)
    old = old_format(run_dir, name)
    if old is not None:
        raise CheckpointError(old_format_message(run_dir, old))
    if not weights.is_file():
        raise CheckpointError(f"{run_dir} has no checkpoint {name!r} yet ({weights} is missing)")
    if not path.is_file():
        raise CheckpointError(f"{path} is missing (it is written with {weights.name})")


def read_state(run_dir: Path, name: str) -> dict[str, Any]:
    """The checked ``NAME.json`` of the run's checkpoint ``name``: its progress fields and
    ``weights_sha256`` (without ``format``). Raises :class:`CheckpointError` when there is no
    such checkpoint (see :func:`require`) or when a field is missing or not what the run
    wrote."""
    require(run_dir, name)
    path = files(run_dir, name)[1]
    fields = Fields(path)
    data = fields.mapping(read_json_file(path), "the file")
    if data.get("format") != FORMAT:
        raise fields.error(
            "format", data.get("format"), f"a checkpoint of this version says {FORMAT!r}"
        )
    digest = data.get("weights_sha256")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise fields.error("weights_sha256", digest, "it must be the SHA-256 of the .pt file")
    for key in REQUIRED:
        if key not in data:
            raise fields.missing(key)
    state: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("format", "weights_sha256"):
            continue
        check = PROGRESS.get(key)
        if check is None:
            raise CheckpointError(f"{path}: {shown(key)} is not a field of a checkpoint")
        state[key] = check(fields, value, key)
    state["weights_sha256"] = digest
    return state


def read_json_file(path: Path) -> object:
    """The JSON in ``path``; :class:`CheckpointError` in one sentence when it is not JSON."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else error
        raise CheckpointError(f"{path} is damaged ({reason})") from None


# --- NAME.pt ---------------------------------------------------------------------------------


def _expected_bytes(policy: Any) -> int:
    """About the size of a checkpoint's tensors for ``policy``: the weights and Adam's two
    moments."""
    return sum(3 * p.numel() * p.element_size() for p in policy.parameters())


def read_tensors(run_dir: Path, name: str, state: dict[str, Any], policy: Any) -> dict:
    """The checked tensors of ``NAME.pt`` for ``policy`` (the network rebuilt from the run's
    config): ``{"policy": state_dict, "optimizer": state_dict}``. The file's SHA-256 must be
    the one in ``NAME.json``; it is read with ``torch.load(weights_only=True)``; every tensor
    must have the name, shape and dtype of the rebuilt one and finite values."""
    import torch as th

    path = files(run_dir, name)[0]
    limit = 4 * _expected_bytes(policy) + 2**20
    try:
        size = path.stat().st_size
        if size > limit:
            raise CheckpointError(
                f"{path} is {size:,} bytes, far more than the network of the run's config.json "
                f"needs (about {_expected_bytes(policy):,})"
            )
        data = path.read_bytes()
    except OSError as error:
        raise CheckpointError(f"{path} cannot be read ({error.strerror})") from None
    if hashlib.sha256(data).hexdigest() != state["weights_sha256"]:
        raise CheckpointError(
            f"{path} is not the file its {name}.json was written with (its SHA-256 differs): "
            "it was damaged or replaced"
        )
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the error says it
            warnings.simplefilter("ignore")
            tensors = th.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types here; none of them may escape
        kind = "anything but tensors" if "weights_only" in str(error) else "no readable tensors"
        raise CheckpointError(
            f"{path} cannot be loaded as a checkpoint: it holds {kind} "
            f"({type(error).__name__}), and nothing else is loaded"
        ) from None
    fields = Fields(path)
    if not isinstance(tensors, dict) or set(tensors) != {"policy", "optimizer"}:
        keys = sorted(map(str, tensors)) if isinstance(tensors, dict) else type(tensors).__name__
        raise CheckpointError(
            f"{path} holds {shown(keys)}; a checkpoint holds 'policy' and 'optimizer'"
        )
    _check_weights(fields, tensors["policy"], policy)
    _check_optimizer(fields, tensors["optimizer"], policy)
    return tensors


def _check_tensor(fields: Fields, field: str, value: object, like: Any) -> None:
    """``value`` is a dense tensor of ``like``'s shape and dtype with finite values."""
    import torch as th

    if not isinstance(value, th.Tensor) or value.layout != th.strided:
        raise fields.error(
            field, type(value).__name__, f"it must be a tensor of shape {list(like.shape)}"
        )
    if value.dtype != like.dtype or tuple(value.shape) != tuple(like.shape):
        raise CheckpointError(
            f"{fields.path}: {field} is a {value.dtype} tensor of shape {list(value.shape)}; the "
            f"network of the run's config.json has {like.dtype} of shape {list(like.shape)}"
        )
    if value.is_floating_point() and not bool(th.isfinite(value).all()):
        raise CheckpointError(f"{fields.path}: {field} holds values that are not finite")


def _check_weights(fields: Fields, weights: object, policy: Any) -> None:
    expected = policy.state_dict()
    weights = fields.mapping(weights, "policy")
    for key in expected:
        if key not in weights:
            raise CheckpointError(
                f"{fields.path}: the weights lack {key!r}: they are not of the network of the "
                "run's config.json"
            )
    for key, value in weights.items():
        if key not in expected:
            raise CheckpointError(
                f"{fields.path}: the weights hold {shown(key)}, which the network of the run's "
                "config.json does not have"
            )
        _check_tensor(fields, f"policy[{key!r}]", value, expected[key])


def _check_optimizer(fields: Fields, saved: object, policy: Any) -> None:
    """The Adam state: the same settings as the rebuilt optimiser (the learning rate aside,
    which training sets before every update) and, per parameter, a step count and two moments
    of its shape."""
    import torch as th

    fresh = policy.optimizer.state_dict()
    params = list(policy.parameters())
    saved = fields.mapping(saved, "optimizer", ("state", "param_groups"))
    groups = fields.items(
        saved["param_groups"], "optimizer.param_groups", len(fresh["param_groups"])
    )
    for i, (group, like) in enumerate(zip(groups, fresh["param_groups"], strict=True)):
        where = f"optimizer.param_groups[{i}]"
        group = fields.mapping(group, where)
        for key, value in group.items():
            if key not in like:
                raise CheckpointError(f"{fields.path}: {where} has an unknown setting {shown(key)}")
            if key == "lr":
                fields.number(value, f"{where}.lr")
            elif not (type(value) is type(like[key]) and value == like[key]):
                raise fields.error(
                    f"{where}.{key}", value, f"the run's optimiser has {shown(like[key])}"
                )
    state = fields.mapping(saved["state"], "optimizer.state")
    moments = (
        "exp_avg",
        "exp_avg_sq",
        *(("max_exp_avg_sq",) if fresh["param_groups"][0].get("amsgrad") else ()),
    )
    for index, entry in state.items():
        if not _is_int(index) or not 0 <= index < len(params):
            raise fields.error(
                "an optimizer.state key", index, f"parameters are 0 to {len(params) - 1}"
            )
        where = f"optimizer.state[{index}]"
        entry = fields.mapping(entry, where, ("step", *moments))
        step = entry["step"]
        if (
            not isinstance(step, th.Tensor)
            or step.numel() != 1
            or not bool(th.isfinite(step).all())
            or float(step) < 0
        ):
            raise fields.error(f"{where}.step", step, "it must be a count of updates")
        for key in moments:
            _check_tensor(fields, f"{where}.{key}", entry[key], params[index].detach())
            if key != "exp_avg" and bool((entry[key] < 0).any()):
                raise CheckpointError(f"{fields.path}: {where}.{key} holds negative values")


def build_policy(
    encoding: str,
    hidden: tuple[int, ...],
    shared: bool = False,
    bfloat16: bool = False,
    critic: str = "pooled",
) -> Any:
    """The network of a run whose config says ``encoding``, ``hidden``, ``shared``,
    ``bfloat16`` and ``critic``, freshly made (a ``buttonup_env.learn.nets.RingPolicy`` with its
    Adam optimiser, as ``MaskablePPO`` makes it for training/train.py)."""
    from gymnasium import spaces

    from buttonup_env.game.encoding import ENCODINGS
    from buttonup_env.learn.nets import RingPolicy

    view = ENCODINGS[encoding]
    return RingPolicy(
        spaces.Box(0.0, 1.0, (view.size,), np.float32),
        spaces.Discrete(view.actions),
        lambda _: 0.0,
        hidden=hidden,
        shared=shared,
        bfloat16=bfloat16,
        critic=critic,
    )


MAX_PARAMETERS = 50_000_000
"""The largest network a run folder may ask for (the shipped agent's has about 100,000
parameters): a config.json asking for more is refused before anything is built."""

MAX_ROLLOUT_BYTES = 4 << 30
"""The largest rollout (n_envs x n_steps observations) a run folder may ask for: 4 GiB."""


def check_size(
    fields: Fields, encoding: str, hidden: tuple[int, ...], n_envs: int = 1, n_steps: int = 1
) -> None:
    """:class:`CheckpointError` when a saved config asks for a network or a rollout larger
    than :data:`MAX_PARAMETERS` or :data:`MAX_ROLLOUT_BYTES` (a crafted config.json would
    otherwise exhaust the memory before any check of the tensors)."""
    from buttonup_env.game.encoding import ENCODINGS, MAX_LEGAL

    size = ENCODINGS[encoding].size
    sizes = [size // MAX_LEGAL, *hidden]
    layers = sum(a * b + b for a, b in itertools.pairwise(sizes))  # per view, actor or critic
    parameters = 2 * layers + 3 * hidden[-1] + 2  # both bodies, the score and the value head
    if parameters > MAX_PARAMETERS:
        raise fields.error(
            "hidden",
            list(hidden),
            f"its network would have {parameters:,} parameters, more "
            f"than the {MAX_PARAMETERS:,} a run folder may ask for",
        )
    rollout = n_envs * n_steps * size * 4
    if rollout > MAX_ROLLOUT_BYTES:
        raise CheckpointError(
            f"{fields.path}: n_envs {n_envs} x n_steps {n_steps} would hold {rollout:,} bytes "
            f"of observations, more than the {MAX_ROLLOUT_BYTES:,} a run folder may ask for"
        )


def network(run_dir: Path, config: dict[str, Any]) -> tuple[str, tuple[int, ...], bool, bool, str]:
    """The encoding, layer sizes, shared layers, bfloat16 products and critic in a run's
    ``config.json`` (read as ``config``), checked."""
    from buttonup_env.learn.nets import CRITICS

    fields = Fields(run_dir / "config.json")
    encoding = config.get("encoding")
    if encoding not in ("afterstates", "ring"):
        raise fields.error("encoding", encoding, "it must be 'afterstates' or 'ring'")
    sizes = fields.items(config.get("hidden"), "hidden")
    if not sizes:
        raise fields.error("hidden", sizes, "it must list one or more layer sizes")
    hidden = tuple(fields.whole(s, f"hidden[{i}]", 1) for i, s in enumerate(sizes))
    check_size(fields, encoding, hidden)
    shared = fields.flag(config.get("shared", False), "shared")
    bfloat16 = fields.flag(config.get("bfloat16", False), "bfloat16")
    critic = config.get("critic", "pooled")  # runs saved before the setting: pooled
    if critic not in CRITICS:
        raise fields.error("critic", critic, f"it must be one of {', '.join(map(repr, CRITICS))}")
    return encoding, hidden, shared, bfloat16, critic


def load_weights(model: Any, run_dir: Path, name: str, state: dict[str, Any]) -> None:
    """Put checkpoint ``name`` into ``model`` (a MaskablePPO just made from the run's config):
    the checked weights and optimiser state, and ``state``'s steps and updates."""
    tensors = read_tensors(run_dir, name, state, model.policy)
    model.policy.load_state_dict(tensors["policy"])
    model.policy.optimizer.load_state_dict(tensors["optimizer"])
    model.num_timesteps = state["steps"]
    model._n_updates = state["n_updates"]


def load_policy(run_dir: Path, name: str, config: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The policy of checkpoint ``name`` (rebuilt from ``config``, the run's ``config.json``,
    then given the checked weights) and the checkpoint's checked state; for exporting it."""
    state = read_state(run_dir, name)
    policy = build_policy(*network(run_dir, config))
    tensors = read_tensors(run_dir, name, state, policy)
    policy.load_state_dict(tensors["policy"])
    policy.set_training_mode(False)
    return policy, state


# --- the resume point ------------------------------------------------------------------------

_PCG64 = np.random.default_rng(0).bit_generator.state
"""What a numpy ``Generator``'s state looks like (PCG64), to check saved ones against."""


def _generator_state(fields: Fields, value: object, field: str) -> dict:
    """A saved ``numpy.random.Generator`` state (PCG64), checked."""
    value = fields.mapping(value, field, tuple(_PCG64))
    if value["bit_generator"] != _PCG64["bit_generator"]:
        raise fields.error(f"{field}.bit_generator", value["bit_generator"], "it must be 'PCG64'")
    inner = fields.mapping(value["state"], f"{field}.state", tuple(_PCG64["state"]))
    for key in inner:
        fields.whole(inner[key], f"{field}.state.{key}", 0, 2**128 - 1)
    fields.whole(value["has_uint32"], f"{field}.has_uint32", 0, 1)
    fields.whole(value["uinteger"], f"{field}.uinteger", 0, 2**32 - 1)
    _takes(fields, field, lambda: setattr(np.random.PCG64(), "state", value))
    return value


def _takes(fields: Fields, field: str, restore: Callable[[], object]) -> None:
    """Try a saved generator state on a scratch generator (``restore``), which checks what
    the ranges above cannot (torch's MT19937 state, for one, must be consistent)."""
    try:
        restore()
    except (ValueError, TypeError, OverflowError, RuntimeError) as error:
        reason = " ".join(str(error).split())[:100]
        raise CheckpointError(
            f"{fields.path}: {field} is not a generator state that can be restored ({reason})"
        ) from None


def check_resume_point(
    path: Path, point: dict[str, Any], batch: Any, steps: int, n_updates: int
) -> None:
    """Check every field of a saved resume point (``resume`` in ``latest.json``, at ``path``)
    against ``batch`` (the run's freshly made ``buttonup_env.envs.vector.ButtonUpVectorEnv``)
    and the checkpoint's ``steps`` and ``n_updates``; :class:`CheckpointError` naming the
    first bad field. What it checks is what ``training/train.py``'s ``resume_point`` writes and
    ``ButtonUpVectorEnv.get_state`` returns."""
    import torch as th

    from buttonup_env.players.bots import BOT_NAMES

    f = Fields(path)
    keys = ("steps", "n_updates", "env", "episode_starts", "torch_rng", "numpy_rng", "python_rng")
    f.mapping(point, "resume", keys)
    if point["steps"] != steps:
        raise f.error("resume.steps", point["steps"], f"the checkpoint is at step {steps}")
    if point["n_updates"] != n_updates:
        raise f.error("resume.n_updates", point["n_updates"], f"the checkpoint has {n_updates}")
    n = batch.num_envs
    env = f.mapping(
        point["env"],
        "resume.env",
        ("num_envs", "arrays", "options", "seed", "rng", "bots", "policy_rng", "snapshots",
         "results", "policies"),
    )  # fmt: skip
    if env["num_envs"] != n:
        raise f.error("resume.env.num_envs", env["num_envs"], f"the run's config has n_envs {n}")
    starts = f.items(point["episode_starts"], "resume.episode_starts", n)
    for i, start in enumerate(starts):
        f.flag(start, f"resume.episode_starts[{i}]")
    torch_rng = f.whole_list(
        point["torch_rng"], "resume.torch_rng", len(th.get_rng_state()), 0, 255
    )
    _takes(
        f,
        "resume.torch_rng",
        lambda: th.Generator().set_state(th.tensor(torch_rng, dtype=th.uint8)),
    )
    numpy_rng = f.items(point["numpy_rng"], "resume.numpy_rng", 5)
    if numpy_rng[0] != "MT19937":
        raise f.error("resume.numpy_rng[0]", numpy_rng[0], "it must be 'MT19937'")
    f.whole_list(numpy_rng[1], "resume.numpy_rng[1]", 624, 0, 2**32 - 1)
    f.whole(numpy_rng[2], "resume.numpy_rng[2]", 0, 624)
    f.whole(numpy_rng[3], "resume.numpy_rng[3]", 0, 1)
    f.number(numpy_rng[4], "resume.numpy_rng[4]", -math.inf)
    legacy = (numpy_rng[0], np.array(numpy_rng[1], dtype=np.uint32), *numpy_rng[2:])
    _takes(f, "resume.numpy_rng", lambda: np.random.RandomState().set_state(legacy))
    python_rng = f.items(point["python_rng"], "resume.python_rng", 3)
    f.whole(python_rng[0], "resume.python_rng[0]", 3, 3)
    internal = f.whole_list(python_rng[1], "resume.python_rng[1]", 625, 0, 2**32 - 1)
    f.whole(internal[-1], "resume.python_rng[1][624]", 0, 624)
    if python_rng[2] is not None:
        f.number(python_rng[2], "resume.python_rng[2]", -math.inf)
    _takes(
        f,
        "resume.python_rng",
        lambda: random.Random().setstate((3, tuple(internal), python_rng[2])),
    )

    if env["seed"] is not None:
        f.whole(env["seed"], "resume.env.seed")
    _generator_state(f, env["rng"], "resume.env.rng")
    bots = f.mapping(env["bots"], "resume.env.bots", BOT_NAMES)
    for name in BOT_NAMES:
        _generator_state(f, bots[name], f"resume.env.bots.{name}")
    _generator_state(f, env["policy_rng"], "resume.env.policy_rng")
    options = f.mapping(env["options"], "resume.env.options")
    for key, value in options.items():
        if key not in ("agent_color", "first"):
            raise f.error("a resume.env.options key", key, "they are 'agent_color' and 'first'")
        if value not in (None, "R", "B"):
            raise f.error(f"resume.env.options.{key}", value, "it must be 'R', 'B' or null")
    snapshots = f.items(env["snapshots"], "resume.env.snapshots")
    for i, snapshot in enumerate(snapshots):
        if not (isinstance(snapshot, str) and SNAPSHOT_NAME.fullmatch(snapshot)):
            raise f.error(
                f"resume.env.snapshots[{i}]",
                snapshot,
                "it must be a snapshot's file name, step_NNNNNNNNN.onnx",
            )
    results = f.mapping(env["results"], "resume.env.results")
    for key, value in results.items():
        if not SNAPSHOT_NAME.fullmatch(key):
            raise f.error("a resume.env.results key", key, "they are snapshots' file names")
        pair = f.items(value, f"resume.env.results[{key!r}]", 2)
        for j, number in enumerate(pair):
            f.number(number, f"resume.env.results[{key!r}][{j}]")
    f.whole(env["policies"], "resume.env.policies")

    arrays = f.mapping(env["arrays"], "resume.env.arrays", batch.STATE_ARRAYS)
    opponents = len(BOT_NAMES) + len(snapshots) if batch.pool is not None else batch.num_opponents
    boards = len(batch.tables.boards)
    target = batch.target
    ranges = {
        "_board": (0, boards - 1, "a board number"),
        "_to_move": (0, 1, "a colour: 0 (Red) or 1 (Black)"),
        "_agent": (0, 1, "a colour: 0 (Red) or 1 (Black)"),
        "_starter": (0, 1, "a colour: 0 (Red) or 1 (Black)"),
        "_score": (0, target + 18, "a score"),
        "_opponent": (0, opponents - 1, "an opponent's number"),
    }
    for key in batch.STATE_ARRAYS:
        shape = getattr(batch, key).shape
        field = f"resume.env.arrays.{key}"
        rows = f.items(arrays[key], field, shape[0])
        if len(shape) == 2:
            rows = [
                v for i, row in enumerate(rows) for v in f.items(row, f"{field}[{i}]", shape[1])
            ]
        for i, value in enumerate(rows):
            where = (
                f"{field}[{i // shape[1]}][{i % shape[1]}]" if len(shape) == 2 else f"{field}[{i}]"
            )
            if key == "_done":
                f.flag(value, where)
                continue
            low, high, what = ranges[key]
            if not _is_int(value) or not low <= value <= high:
                span = "" if ":" in what else f" from {low} to {high}"
                raise f.error(where, value, f"it must be {what}{span}")


# --- converting a run of the earlier format --------------------------------------------------


@dataclass
class ConvertArgs:
    """Convert the checkpoints of a run folder made by an earlier version of buttonup-env
    (``checkpoints/NAME.zip``, Stable-Baselines3 files) to this format (``NAME.pt`` and
    ``NAME.json``), so that train.py --resume and export.py take it. Loading a .zip unpickles
    code that can do anything: only for a run you made yourself (--trusted)."""

    run: tyro.conf.Positional[Path]
    """The run folder (RUN, with config.json and checkpoints/)."""
    trusted: bool = False
    """The run is yours: its .zip files may be unpickled."""


def convert(run_dir: Path) -> list[str]:
    """Convert every ``NAME.zip`` checkpoint of ``run_dir`` that has no ``NAME.pt``; return
    their names. **This unpickles the .zip files**: only for runs you made."""
    from sb3_contrib import MaskablePPO

    done = []
    for name in NAMES:
        old = old_format(run_dir, name)
        if old is None:
            continue
        state_path = files(run_dir, name)[1]
        fields = Fields(state_path)
        state = (
            fields.mapping(read_json_file(state_path), "the file") if state_path.is_file() else {}
        )
        try:
            model = MaskablePPO.load(old, device="cpu")
        except Exception as error:  # a damaged file: SB3 raises many types
            reason = (str(error).strip().splitlines() or [""])[0][:200]
            raise CheckpointError(
                f"{old} cannot be loaded ({type(error).__name__}: {reason})"
            ) from None
        save_checkpoint(model, run_dir, state, name)
        read_state(run_dir, name)  # what was written reads back
        done.append(name)
    return done


def main(argv: list[str] | None = None) -> None:
    args = tyro.cli(ConvertArgs, args=argv, description=__doc__)
    run_dir = args.run
    if not (run_dir / "config.json").is_file():
        fail(f"{run_dir} is not a run folder (no config.json)")
    if not any(old_format(run_dir, name) for name in NAMES):
        fail(
            f"{run_dir} has no checkpoint of the earlier format to convert (checkpoints/"
            "latest.zip or best.zip without a .pt beside it)"
        )
    if not args.trusted:
        fail(
            f"{run_dir} holds Stable-Baselines3 .zip checkpoints: loading them unpickles code "
            "that can do anything; if you made this run yourself, pass --trusted"
        )
    try:
        done = convert(run_dir)
    except CheckpointError as error:
        fail(str(error))
    for name in done:
        print(f"converted {run_dir / 'checkpoints' / name}.zip to {name}.pt and {name}.json")
    print(
        f"the .zip files can be deleted; continue with: python training/train.py --resume {run_dir}"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore::DeprecationWarning")
    run_cli(main)
