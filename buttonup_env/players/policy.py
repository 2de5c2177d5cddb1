"""Exported policies as players: :func:`load_policy`.

An exported policy is an ONNX file whose graph maps a batch of observations (input ``obs``,
``float32 [batch, size]``) to action logits (output ``logits``, ``float32 [batch, actions]``),
with metadata naming the observation encoding (``buttonup_env.game.encoding``). Loading one needs
only onnxruntime and numpy; an ONNX file cannot run arbitrary code, unlike a pickle.

A file from someone else is checked before onnxruntime runs it
(:mod:`buttonup_env.players.onnx_graph`): only the operators this package's exporter writes, no
external data, bounded sizes. Every call is checked too: logits of the shape
``[batch, actions]``, every one finite, else :class:`PolicyError` naming the file, so that a
player never lifts an illegal slot because of broken logits.

A Stable-Baselines3 ``.zip`` can be loaded too, but only with ``trusted=True``: loading it
unpickles Python objects, which can run any code. Never load a ``.zip`` you did not make.
:func:`read_sb3_zip` tells what such a file holds without loading it, and
:func:`load_sb3_model` loads one of the kinds this package can play and export
(:data:`SB3_SUPPORTED`).
"""

from __future__ import annotations

import base64
import json
import os
import pickletools
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..game.encoding import ENCODINGS, Encoding
from ..game.records import open_regular_file
from ..game.rules import LAYOUTS, State
from . import deadline
from .onnx_graph import (
    MAX_POLICY_BYTES,
    Argument,
    GraphRefused,
    NotOnnx,
    check_sizes,
    check_structure,
    read_model,
)
from .shipped import shipped_policies, shipped_policy_path

META_ENCODING = "buttonup_env.encoding"
META_VERSION = "buttonup_env.format"
FORMAT_VERSION = "1"
INPUT_NAME = "obs"
OUTPUT_NAME = "logits"


CALL_SECONDS = 10.0
"""How long a policy's call on one position may take before it is stopped (a policy takes
about a millisecond; the largest network a file may hold, a tenth of a second)."""

SECONDS_PER_POSITION = 0.05
"""How much longer a call may take for each further position of its batch."""


class PolicyError(ValueError):
    """A loaded policy failed while it played: its runtime raised, or it gave logits of the
    wrong shape or not finite. The message is one sentence naming the file."""


class PolicyTimeout(PolicyError, deadline.TimeLimit):
    """A policy's call overran its time limit (``seconds``, :data:`CALL_SECONDS` by default)
    and was stopped."""


def _masked_choice(logits: np.ndarray, mask: np.ndarray, rng: np.random.Generator | None) -> int:
    """Argmax of the legal logits, or a sample from their softmax when ``rng`` is given (the
    logits are finite: :meth:`_PolicyPlayer.logits` checks them)."""
    masked = np.where(mask, logits.astype(np.float64), -np.inf)
    if rng is None:
        return int(np.argmax(masked))
    z = np.exp(masked - masked.max())
    return int(rng.choice(len(z), p=z / z.sum()))


def _positions(count: int) -> str:
    return f"{count} position{'s' if count != 1 else ''}"


class _PolicyPlayer:
    """Shared part of the players below: encode, score, check, mask, choose."""

    encoding: Encoding
    path: Path

    def __init__(self, deterministic: bool) -> None:
        self.deterministic = deterministic
        self.rng: np.random.Generator | None = None if deterministic else np.random.default_rng()

    def reset(self, rng: np.random.Generator) -> None:
        """Sample with ``rng`` from now on (used only when not deterministic)."""
        if not self.deterministic:
            self.rng = rng

    seconds: float = CALL_SECONDS
    """The time limit of a call on one position (:data:`CALL_SECONDS`); set it on a loaded
    player for another."""

    def time_limit(self, positions: int) -> float:
        """How long a call on ``positions`` positions may take: :attr:`seconds` and
        :data:`SECONDS_PER_POSITION` for each position but the first."""
        return self.seconds + max(positions - 1, 0) * SECONDS_PER_POSITION

    def _logits(self, observations: np.ndarray) -> np.ndarray:
        """The runtime's logits for ``observations``, unchecked."""
        raise NotImplementedError

    def _failure(self, error: Exception, count: int) -> str:
        """Why a call on ``count`` positions failed, for the sentence of its error."""
        if isinstance(error, deadline.TimeLimit):
            return (
                f"did not give its logits for {_positions(count)} within "
                f"{self.time_limit(count):g} s, its time limit, and was stopped"
            )
        if isinstance(error, deadline.Stopped):
            return f"was stopped while it scored {_positions(count)} (its caller is stopping)"
        reason = " ".join(str(error).split())[:200]
        return f"failed on {_positions(count)} ({type(error).__name__}: {reason})"

    def logits(self, observations: np.ndarray) -> np.ndarray:
        """Action logits ``[batch, actions]`` for a batch of observations ``[batch, size]``.

        Raises :class:`PolicyError` naming the file when the runtime fails, or gives logits of
        another shape or any that is not finite (NaN or infinite): then no legal move can be
        told from an illegal one, so nothing is chosen from them.
        """
        count = len(observations)
        try:
            logits = self._logits(observations)
        except Exception as error:  # onnxruntime and torch raise many types
            kind = PolicyTimeout if isinstance(error, deadline.TimeLimit) else PolicyError
            raise kind(f"{self.path} {self._failure(error, count)}") from None
        expected = (count, self.encoding.actions)
        shape = getattr(logits, "shape", None)
        if not isinstance(logits, np.ndarray) or shape != expected:
            found = tuple(shape) if shape is not None else type(logits).__name__
            raise PolicyError(
                f"{self.path} gave logits of shape {found} for {_positions(count)}; a policy "
                f"of the {self.encoding.name!r} encoding gives {expected}"
            )
        if not np.isfinite(logits).all():
            rows = int((~np.isfinite(logits)).any(axis=1).sum())
            raise PolicyError(
                f"{self.path} gave logits that are not finite (NaN or infinite) for {rows} of "
                f"{_positions(count)}; a policy gives finite logits, else its legal moves "
                "cannot be told apart"
            )
        return logits

    PROBE_STATES = (
        State.new_round(LAYOUTS[0], "R"),
        State.new_round(LAYOUTS[-1], "B", {"R": 7, "B": 3}),
    )
    """The positions a loaded policy is tried on (two, so that a batch is needed)."""

    def _probe(self) -> None:
        """Run the policy once on :data:`PROBE_STATES`; ``ValueError`` unless it gives finite
        logits of the right shape (so a broken file is refused here, not in the middle of a
        game)."""
        observations = np.stack([self.encoding.encode(s, s.to_move) for s in self.PROBE_STATES])
        try:
            logits = self._logits(observations)
        except Exception as error:  # onnxruntime and torch raise many types
            if isinstance(error, deadline.TimeLimit | deadline.Stopped):
                raise ValueError(
                    f"{self.path} is refused: it {self._failure(error, len(observations))} "
                    "when it was tried on two set-up positions"
                ) from None
            reason = " ".join(str(error).split())[:200]
            raise ValueError(
                f"{self.path} fails when it is run on two positions ({type(error).__name__}: "
                f"{reason})"
            ) from None
        expected = (len(self.PROBE_STATES), self.encoding.actions)
        if not isinstance(logits, np.ndarray) or logits.shape != expected:
            shape = getattr(logits, "shape", type(logits).__name__)
            raise ValueError(
                f"{self.path} gives logits of shape {shape} for two positions; a policy gives "
                f"{list(expected)}"
            )
        if not np.isfinite(logits).all():
            raise ValueError(
                f"{self.path} gives logits that are not finite (NaN or infinite) on two set-up "
                "positions; its weights are broken"
            )

    def act(self, state: State) -> int:
        """The slot this policy lifts in ``state`` (its best legal action unless sampling)."""
        if state.round_over:
            raise ValueError(f"the round is over on {state.notation!r}; there is no move to choose")
        obs = self.encoding.encode(state, state.to_move)[None, :]
        action = _masked_choice(self.logits(obs)[0], self.encoding.mask(state), self.rng)
        return self.encoding.slot(state, action)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"


class OnnxPolicy(_PolicyPlayer):
    """A policy exported to ONNX, run with onnxruntime (see :func:`load_policy`).

    The file is read once, checked (:mod:`buttonup_env.players.onnx_graph`) and given to
    onnxruntime as those same bytes, so the file that runs is the file that was checked.
    """

    thread_safe = True
    """Calls from several threads may run at once (onnxruntime's session allows it, each
    with its own run options): the best response and the audit score batches side by
    side."""

    def __init__(self, path: str | Path, deterministic: bool = True) -> None:
        super().__init__(deterministic)
        self.path = Path(path)
        try:
            import onnxruntime as ort
        except ImportError as error:  # pragma: no cover - depends on the installation
            raise ImportError(
                "loading an .onnx policy needs onnxruntime: pip install 'buttonup-env[policy]'"
            ) from error
        expected = (
            f"an ONNX policy exported by buttonup-env (input {INPUT_NAME!r} [batch, size], "
            f"output {OUTPUT_NAME!r} [batch, actions], metadata {META_ENCODING!r})"
        )
        data = _read_policy_file(self.path)
        try:
            graph = read_model(data)
        except NotOnnx as error:
            raise ValueError(
                f"{self.path} could not be read as ONNX ({error}); expected {expected}"
            ) from None
        except GraphRefused as error:
            raise ValueError(f"{self.path} is refused: {error}") from None
        name = graph.metadata.get(META_ENCODING)
        if name not in ENCODINGS:
            raise ValueError(
                f"{self.path} has no known observation encoding in its metadata "
                f"({META_ENCODING}={name!r}, known: {sorted(ENCODINGS)}); expected {expected}"
            )
        self.encoding = ENCODINGS[name]
        size, actions = self.encoding.size, self.encoding.actions
        try:
            check_structure(graph, INPUT_NAME)
            _check_arguments(self.path, *graph.arguments, name, size, actions)
            check_sizes(graph, INPUT_NAME, OUTPUT_NAME, size, actions)
        except GraphRefused as error:
            raise ValueError(f"{self.path} is refused: {error}") from None
        # Every check has passed before onnxruntime sees the file. Constant folding, which
        # would compute at load what depends on weights alone, has nothing to fold in a graph
        # that passed them, and is turned off all the same.
        try:
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.log_severity_level = 3  # errors are raised, and said in the sentence
            options.add_session_config_entry("session.load_model_format", "ONNX")
            self.session = ort.InferenceSession(
                data,
                options,
                providers=["CPUExecutionProvider"],
                disabled_optimizers=["ConstantFolding"],
            )
        except Exception as error:  # onnxruntime raises several unrelated types
            reason = " ".join(str(error).split())[:300]
            raise ValueError(
                f"{self.path} could not be read as ONNX ({type(error).__name__}: {reason}); "
                f"expected {expected}"
            ) from None
        seen = (_arguments(self.session.get_inputs()), _arguments(self.session.get_outputs()))
        if seen != graph.arguments:
            raise ValueError(
                f"{self.path} is refused: onnxruntime reads its inputs and outputs as "
                f"{_shown_arguments(seen)}, where the check read "
                f"{_shown_arguments(graph.arguments)}"
            )
        self.metadata = dict(graph.metadata)
        self._probe()

    def _logits(self, observations: np.ndarray) -> np.ndarray:
        observations = np.ascontiguousarray(observations, dtype=np.float32)  # no copy if it is
        seconds = self.time_limit(len(observations))
        return deadline.run(self.session, [OUTPUT_NAME], {INPUT_NAME: observations}, seconds)[0]


def _arguments(args: Any) -> list[Argument]:
    """onnxruntime's ``NodeArg`` list as :class:`~buttonup_env.players.onnx_graph.Argument`."""
    return [Argument(arg.name, arg.type, list(arg.shape)) for arg in args]


def _shown_arguments(arguments: tuple[list[Argument], list[Argument]]) -> str:
    inputs, outputs = (
        ", ".join(f"{a.name} {a.type} {a.shape}" for a in side) for side in arguments
    )
    return f"({inputs}) -> ({outputs})"


def _check_arguments(
    path: Path,
    inputs: list[Argument],
    outputs: list[Argument],
    name: str,
    size: int,
    actions: int,
) -> None:
    """``ValueError`` naming ``path`` unless the graph declares one input ``obs`` float32
    ``[batch, size]`` and one output ``logits`` float32 ``[batch, actions]`` of the encoding
    ``name``, the batch a free dimension."""
    if len(inputs) != 1 or inputs[0].name != INPUT_NAME or inputs[0].shape[1:] != [size]:
        found = ", ".join(f"{i.name} {i.shape}" for i in inputs)
        raise ValueError(
            f"{path} takes inputs ({found}); the {name!r} encoding needs one input "
            f"{INPUT_NAME!r} of shape [batch, {size}]"
        )
    if len(outputs) != 1 or outputs[0].name != OUTPUT_NAME:
        found = ", ".join(o.name for o in outputs)
        raise ValueError(f"{path} gives the outputs ({found}); a policy gives one, {OUTPUT_NAME!r}")
    output = outputs[0]
    if output.shape[1:] != [actions] or len(output.shape) != 2:
        raise ValueError(
            f"{path} outputs {OUTPUT_NAME!r} of shape {output.shape}; the {name!r} "
            f"encoding needs [batch, {actions}]"
        )
    for what, arg in (("takes", inputs[0]), ("outputs", output)):
        if arg.type != "tensor(float)":
            raise ValueError(
                f"{path} {what} {arg.name!r} as {arg.type}; a policy {what} float32 "
                f"(tensor(float)) [batch, {size if arg is inputs[0] else actions}]"
            )
        if isinstance(arg.shape[0], int):
            raise ValueError(
                f"{path} {what} {arg.name!r} of the fixed shape {arg.shape}; a policy "
                "takes a batch of any size (its first dimension must be named, as 'batch')"
            )


def _read_policy_file(path: Path) -> bytes:
    """The bytes of the policy file ``path``: a regular file of at most
    :data:`~buttonup_env.players.onnx_graph.MAX_POLICY_BYTES`; ``ValueError`` naming it
    otherwise."""
    try:
        with open_regular_file(path) as handle:
            data = handle.read(MAX_POLICY_BYTES + 1)
    except OSError as error:
        why = error.strerror or str(error)
        raise ValueError(f"{path} cannot be read ({why}); expected a policy file (.onnx)") from None
    if len(data) > MAX_POLICY_BYTES:
        raise ValueError(
            f"{path} is larger than {MAX_POLICY_BYTES:,} bytes; a policy file is at most that "
            "(50 million weights)"
        )
    return data


class SB3Policy(_PolicyPlayer):
    """A (Maskable)PPO model from Stable-Baselines3, in memory or loaded from a trusted .zip.

    The legal-move mask is applied to the model's logits as for an ONNX policy, also for a
    plain ``PPO`` model that was trained without one.
    """

    def __init__(self, model: Any, path: str | Path = "<memory>", deterministic: bool = True):
        super().__init__(deterministic)
        self.model = model
        self.path = Path(path)
        self.encoding = _encoding_of(model, self.path)
        self._probe()

    def _logits(self, observations: np.ndarray) -> np.ndarray:
        import torch as th

        policy = self.model.policy
        with th.no_grad():
            obs = th.as_tensor(observations, dtype=th.float32, device=policy.device)
            dist = policy.get_distribution(obs)
            return dist.distribution.logits.cpu().numpy()


SB3_SUPPORTED = (
    "MaskablePPO and PPO models with SB3's MlpPolicy (or MaskablePPO with buttonup_env's "
    "RingPolicy) trained on ButtonUp-v0 (246 observations, 9 actions) or on its RingObservation "
    "wrapper (729 or 735 observations, 3 actions)"
)
"""The Stable-Baselines3 models that :func:`load_sb3_model` loads and ``training/export.py``
exports."""

_SB3_POLICIES: dict[tuple[str, str], tuple[str, str]] = {
    # (module, class) of the pickled policy class: (algorithm, policy name)
    ("sb3_contrib.common.maskable.policies", "MaskableActorCriticPolicy"): (
        "MaskablePPO",
        "MlpPolicy",
    ),
    ("buttonup_env.learn.nets", "RingPolicy"): ("MaskablePPO", "RingPolicy"),
    ("stable_baselines3.common.policies", "ActorCriticPolicy"): ("PPO", "MlpPolicy"),
}

_SB3_SETTINGS = (
    "learning_rate",
    "n_envs",
    "n_steps",
    "batch_size",
    "n_epochs",
    "gamma",
    "gae_lambda",
    "ent_coef",
    "vf_coef",
    "max_grad_norm",
    "normalize_advantage",
    "target_kl",
    "clip_range_vf",
)
"""The training settings a .zip stores as plain JSON (schedules and policy_kwargs other than
``{}`` are pickled, so they are not read)."""


@dataclass(frozen=True)
class SB3File:
    """What a Stable-Baselines3 ``.zip`` says about itself, read without unpickling anything."""

    path: Path
    algorithm: str
    """``"MaskablePPO"`` or ``"PPO"``."""
    policy: str
    """``"MlpPolicy"`` or ``"RingPolicy"``."""
    policy_class: str
    """The policy's class, with its module."""
    sb3_version: str | None
    """The Stable-Baselines3 version that saved the file."""
    steps: int | None
    """``num_timesteps``: the environment steps the model was trained for."""
    seed: int | None
    settings: dict[str, Any] = field(default_factory=dict)
    """The training settings stored as plain values (learning rate, n_steps, gamma, ...)."""


def _unsupported(path: Path, what: str) -> ValueError:
    return ValueError(f"{path} {what}; supported are {SB3_SUPPORTED}")


def _pickled_class(entry: object) -> tuple[str, str] | None:
    """(module, name) of a class that SB3 stored by reference, read from the pickle's opcodes
    (``pickletools`` only parses them: nothing is imported or run)."""
    if not isinstance(entry, dict) or not isinstance(entry.get(":serialized:"), str):
        return None
    try:
        strings: list[str] = []
        for op, arg, _ in pickletools.genops(base64.b64decode(entry[":serialized:"])):
            if op.name == "GLOBAL" and isinstance(arg, str):
                module, _, name = arg.partition(" ")
                return module, name
            if op.name == "STACK_GLOBAL":
                return (strings[-2], strings[-1]) if len(strings) >= 2 else None
            if isinstance(arg, str):
                strings.append(arg)
    except Exception:  # a damaged or unusual pickle: say what the JSON says instead
        return None
    return None


def read_sb3_zip(path: str | os.PathLike[str]) -> SB3File:
    """Read what the Stable-Baselines3 ``.zip`` at ``path`` holds, without unpickling it.

    Raises ``ValueError`` with one sentence naming the file when it is not an SB3 model or
    not one of :data:`SB3_SUPPORTED` (a recurrent policy, DQN, A2C, ...). The observation
    and action spaces are pickled, so :func:`load_sb3_model` checks them after loading.
    """
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            raw = archive.read("data") if "data" in names else None
            version_file = "_stable_baselines3_version"
            version = archive.read(version_file) if version_file in names else None
    except (OSError, zipfile.BadZipFile) as error:
        reason = "not a zip archive" if isinstance(error, zipfile.BadZipFile) else error
        raise _unsupported(path, f"is not a Stable-Baselines3 model ({reason})") from None
    if raw is None:
        raise _unsupported(path, "is not a Stable-Baselines3 model (no 'data' inside)")
    try:
        data = json.loads(raw)
    except ValueError:  # UnicodeDecodeError included
        raise _unsupported(path, "is not a Stable-Baselines3 model (damaged 'data')") from None
    if not isinstance(data, dict) or "policy_class" not in data:
        raise _unsupported(path, "is not a Stable-Baselines3 model (no policy class)")
    entry = data["policy_class"]
    found = _pickled_class(entry)
    if found is None:
        module = entry.get("__module__", "?") if isinstance(entry, dict) else "?"
        name = f"a policy class defined in {module}"
    else:
        name = ".".join(found)
    if found not in _SB3_POLICIES:
        kind = " (a recurrent policy)" if "recurrent" in name.lower() else ""
        raise _unsupported(path, f"holds a model with the policy {name}{kind}")
    algorithm, policy = _SB3_POLICIES[found]
    if "clip_range" not in data:  # A2C and TRPO use ActorCriticPolicy too
        raise _unsupported(path, f"holds a model with the policy {name} that is not PPO")
    settings = {
        key: data[key]
        for key in _SB3_SETTINGS
        if key in data and (data[key] is None or isinstance(data[key], bool | int | float | str))
    }
    steps, seed = data.get("num_timesteps"), data.get("seed")
    return SB3File(
        path=path,
        algorithm=algorithm,
        policy=policy,
        policy_class=name,
        sb3_version=version.decode(errors="replace").strip() if version is not None else None,
        steps=steps if isinstance(steps, int) else None,
        seed=seed if isinstance(seed, int) else None,
        settings=settings,
    )


def _encoding_of(model: Any, path: Path) -> Encoding:
    """The encoding whose observations and actions ``model`` (or its policy) has."""
    shape = getattr(model.observation_space, "shape", None)
    size = shape[0] if shape is not None and len(shape) == 1 else None
    matching = [e for e in ENCODINGS.values() if e.size == size]
    if not matching:
        sizes = ", ".join(f"{e.name}: {e.size}" for e in ENCODINGS.values())
        what = f"size {size}" if size is not None else f"shape {shape}"
        raise _unsupported(path, f"has observations of {what}, which match no encoding ({sizes})")
    encoding = matching[0]
    actions = getattr(model, "action_space", None)
    if actions is not None and type(actions).__name__ != "Discrete":
        raise _unsupported(path, f"has actions {actions}, which are not discrete")
    if actions is not None and int(actions.n) != encoding.actions:
        raise _unsupported(
            path,
            f"has {int(actions.n)} actions for observations of size {size}, where the "
            f"{encoding.name!r} encoding has {encoding.actions}",
        )
    return encoding


def load_sb3_model(path: str | os.PathLike[str]) -> tuple[Any, SB3File]:
    """Load a Stable-Baselines3 ``.zip`` on the CPU: the model and :func:`read_sb3_zip`'s
    description. **This unpickles code from the file**: only for files you made.

    Raises ``ValueError`` with one sentence naming the file when the file is not one of
    :data:`SB3_SUPPORTED`: another algorithm or policy, observations that no encoding has
    (another env), bounds other than ButtonUp-v0's ``[0, 1]`` (a normalising wrapper), or
    actions that are not the encoding's.
    """
    path = Path(path)
    info = read_sb3_zip(path)
    try:
        if info.algorithm == "MaskablePPO":
            from sb3_contrib import MaskablePPO as algorithm
        else:
            from stable_baselines3 import PPO as algorithm
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ImportError(
            "loading a .zip model needs the training extra: pip install 'buttonup-env[train]'"
        ) from error
    try:
        model = algorithm.load(path, device="cpu")
    except Exception as error:
        raise ValueError(
            f"{path} could not be loaded as a Stable-Baselines3 {info.algorithm} model "
            f"({type(error).__name__}: {' '.join(str(error).split())})"
        ) from None
    encoding = _encoding_of(model, path)
    space = model.observation_space
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    if low is None or high is None or not (np.all(low == 0.0) and np.all(high == 1.0)):
        raise _unsupported(
            path,
            f"has observations {space}, not the {encoding.name!r} encoding's Box(0, 1, "
            f"({encoding.size},)) (a wrapper that rescales them cannot be exported)",
        )
    return model, info


def policy_file(path: str | os.PathLike[str]) -> Path:
    """The file ``path`` names: a shipped policy's file for its name, otherwise ``path`` itself.

    A string with no folder in it and no ``.onnx`` / ``.zip`` ending is a name: a shipped
    policy's (see :mod:`buttonup_env.players.shipped`), or, if there is no such policy, an existing
    file of that name. Raises ``ValueError`` listing the shipped names when it is neither, and
    for an empty string (which would name the current folder).
    """
    if isinstance(path, str) and not path.strip():
        raise ValueError(
            f"{path!r} names no policy: give a shipped policy's name "
            f"({', '.join(shipped_policies()) or 'none'}) or an .onnx file"
        )
    if isinstance(path, str) and path in shipped_policies():
        return shipped_policy_path(path)
    file = Path(path)
    is_name = isinstance(path, str) and file.name == path and file.suffix not in (".onnx", ".zip")
    if is_name and not file.exists():
        return shipped_policy_path(path)  # no policy has that name: raises, listing the names
    return file


def load_policy(
    path: str | os.PathLike[str], *, trusted: bool = False, deterministic: bool = True
) -> OnnxPolicy | SB3Policy:
    """Load an exported policy as a player with ``act(state) -> slot``.

    ``path`` is the name of a shipped policy (``"buttonup-ppo"``; the names are in
    :func:`buttonup_env.players.shipped.shipped_policies`), an ``.onnx`` file written by
    ``training/export.py`` (both need onnxruntime only), or, with ``trusted=True``, a
    Stable-Baselines3 ``.zip`` of one of the kinds in :data:`SB3_SUPPORTED` (needs the ``train``
    extra; loading it runs pickled code, so only for files you made; see
    :func:`load_sb3_model`). The player applies the legal-move mask to the logits and lifts the
    best legal slot (``deterministic=False`` samples instead), for a plain ``PPO`` model too.

    Raises ``ValueError`` naming the file when it is missing, unreadable, or not a policy for
    this game's observations, and listing the shipped policies for an unknown name.
    """
    path = policy_file(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory; expected a policy file (.onnx)")
    if not path.exists():
        raise ValueError(f"policy file {path} does not exist (expected an .onnx file)")
    if path.suffix == ".zip" and not path.is_file():
        raise ValueError(f"{path} is not a regular file; expected a policy file")
    if path.suffix == ".zip":
        if not trusted:
            raise ValueError(
                f"{path} is a Stable-Baselines3 .zip: loading it unpickles code that can do "
                "anything. If you made this file yourself, export it to ONNX with "
                f"python training/export.py {path} --trusted, or pass trusted=True (--trusted "
                "in training/evaluate.py)"
            )
        model, _ = load_sb3_model(path)
        return SB3Policy(model, path, deterministic)
    return OnnxPolicy(path, deterministic)
