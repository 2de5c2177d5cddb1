"""Exported policies as players: :func:`load_policy`.

An exported policy is an ONNX file whose graph maps a batch of observations (input ``obs``,
``float32 [batch, size]``) to action logits (output ``logits``, ``float32 [batch, actions]``),
with metadata naming the observation encoding (``buttonup_env.encoding``). Loading one needs
only onnxruntime and numpy; an ONNX file cannot run arbitrary code, unlike a pickle.

A Stable-Baselines3 ``.zip`` can be loaded too, but only with ``trusted=True``: loading it
unpickles Python objects, which can run any code. Never load a ``.zip`` you did not make.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .encoding import ENCODINGS, RingEncoding, SlotEncoding
from .models import shipped_policies, shipped_policy_path
from .rules import State

META_ENCODING = "buttonup_env.encoding"
META_VERSION = "buttonup_env.format"
FORMAT_VERSION = "1"
INPUT_NAME = "obs"
OUTPUT_NAME = "logits"

Encoding = SlotEncoding | RingEncoding


def _masked_choice(logits: np.ndarray, mask: np.ndarray, rng: np.random.Generator | None) -> int:
    """Argmax of the legal logits, or a sample from their softmax when ``rng`` is given."""
    masked = np.where(mask, logits.astype(np.float64), -np.inf)
    if rng is None:
        return int(np.argmax(masked))
    z = np.exp(masked - masked.max())
    return int(rng.choice(len(z), p=z / z.sum()))


class _PolicyPlayer:
    """Shared part of the players below: encode, score, mask, choose."""

    encoding: Encoding
    path: Path

    def __init__(self, deterministic: bool) -> None:
        self.deterministic = deterministic
        self.rng: np.random.Generator | None = None if deterministic else np.random.default_rng()

    def reset(self, rng: np.random.Generator) -> None:
        """Sample with ``rng`` from now on (used only when not deterministic)."""
        if not self.deterministic:
            self.rng = rng

    def logits(self, observations: np.ndarray) -> np.ndarray:
        """Action logits for a batch of observations ``[batch, size]``."""
        raise NotImplementedError

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
    """A policy exported to ONNX, run with onnxruntime (see :func:`load_policy`)."""

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
        try:
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            self.session = ort.InferenceSession(
                str(self.path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as error:  # onnxruntime raises several unrelated types
            raise ValueError(
                f"{self.path} could not be read as ONNX ({type(error).__name__}); expected "
                f"{expected}"
            ) from None
        meta = self.session.get_modelmeta().custom_metadata_map
        name = meta.get(META_ENCODING)
        if name not in ENCODINGS:
            raise ValueError(
                f"{self.path} has no known observation encoding in its metadata "
                f"({META_ENCODING}={name!r}, known: {sorted(ENCODINGS)}); expected {expected}"
            )
        self.encoding = ENCODINGS[name]
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        shapes_ok = (
            len(inputs) == 1
            and inputs[0].name == INPUT_NAME
            and list(inputs[0].shape[1:]) == [self.encoding.size]
            and any(o.name == OUTPUT_NAME for o in outputs)
        )
        if not shapes_ok:
            found = ", ".join(f"{i.name} {i.shape}" for i in inputs)
            raise ValueError(
                f"{self.path} takes inputs ({found}); the {name!r} encoding needs one input "
                f"{INPUT_NAME!r} of shape [batch, {self.encoding.size}]"
            )
        out_shape = next(o.shape for o in outputs if o.name == OUTPUT_NAME)
        if list(out_shape[1:]) != [self.encoding.actions]:
            raise ValueError(
                f"{self.path} outputs {OUTPUT_NAME!r} of shape {out_shape}; the {name!r} "
                f"encoding needs [batch, {self.encoding.actions}]"
            )
        self.metadata = dict(meta)

    def logits(self, observations: np.ndarray) -> np.ndarray:
        return self.session.run([OUTPUT_NAME], {INPUT_NAME: observations.astype(np.float32)})[0]


class SB3Policy(_PolicyPlayer):
    """A (Maskable)PPO model from Stable-Baselines3, in memory or loaded from a trusted .zip."""

    def __init__(self, model: Any, path: str | Path = "<memory>", deterministic: bool = True):
        super().__init__(deterministic)
        self.model = model
        self.path = Path(path)
        size = model.observation_space.shape[0]
        matching = [e for e in ENCODINGS.values() if e.size == size]
        if not matching:
            raise ValueError(
                f"{self.path}: observations of size {size} match no encoding "
                f"({', '.join(f'{e.name}: {e.size}' for e in ENCODINGS.values())})"
            )
        self.encoding = matching[0]

    def logits(self, observations: np.ndarray) -> np.ndarray:
        import torch as th

        policy = self.model.policy
        with th.no_grad():
            obs = th.as_tensor(observations, dtype=th.float32, device=policy.device)
            dist = policy.get_distribution(obs)
            return dist.distribution.logits.cpu().numpy()


def policy_file(path: str | os.PathLike[str]) -> Path:
    """The file ``path`` names: a shipped policy's file for its name, otherwise ``path`` itself.

    A string with no folder in it and no ``.onnx`` / ``.zip`` ending is a name: a shipped
    policy's (see :mod:`buttonup_env.models`), or, if there is no such policy, an existing file
    of that name. Raises ``ValueError`` listing the shipped names when it is neither.
    """
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
    :func:`buttonup_env.models.shipped_policies`), an ``.onnx`` file written by
    ``training/export.py`` (both need onnxruntime only), or, with ``trusted=True``, a
    Stable-Baselines3 ``.zip`` (needs the ``train`` extra; loading it runs pickled code, so only
    for files you made). The player applies the legal-move mask to the logits and lifts the
    best legal slot (``deterministic=False`` samples instead).

    Raises ``ValueError`` naming the file when it is missing, unreadable, or not a policy for
    this game's observations, and listing the shipped policies for an unknown name.
    """
    path = policy_file(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory; expected a policy file (.onnx)")
    if not path.is_file():
        raise ValueError(f"policy file {path} does not exist (expected an .onnx file)")
    if path.suffix == ".zip":
        if not trusted:
            raise ValueError(
                f"{path} is a Stable-Baselines3 .zip: loading it unpickles code that can do "
                "anything. Export it to ONNX (training/export.py), or, if you made this file "
                "yourself, pass trusted=True (--trusted in training/evaluate.py)"
            )
        try:
            from sb3_contrib import MaskablePPO
        except ImportError as error:  # pragma: no cover - depends on the installation
            raise ImportError(
                "loading a .zip model needs the training extra: pip install 'buttonup-env[train]'"
            ) from error
        try:
            model = MaskablePPO.load(path, device="cpu")
        except Exception as error:
            raise ValueError(
                f"{path} could not be loaded as a MaskablePPO model ({type(error).__name__}: "
                f"{error})"
            ) from None
        return SB3Policy(model, path, deterministic)
    return OnnxPolicy(path, deterministic)
