"""Helpers for the tests of exported policies (not a test module): random positions, the moves
a Stable-Baselines3 model chooses itself, and SB3 ``.zip`` files of models that cannot be
exported. Every ``.zip`` here is made by the test that uses it: loading one unpickles code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th

from buttonup_env.game.encoding import SlotEncoding
from buttonup_env.game.rules import LAYOUTS, State


def random_positions(seed: int, count: int) -> list[State]:
    """Positions of seeded random play from random layouts, scores and targets (rounds in
    progress only: every position has a move to choose)."""
    rng = np.random.default_rng(seed)
    found: list[State] = []
    while len(found) < count:
        target = int(rng.integers(1, 31))
        score = {"R": int(rng.integers(target)), "B": int(rng.integers(target))}
        first = "R" if rng.integers(2) == 0 else "B"
        state = State.new_round(LAYOUTS[int(rng.integers(len(LAYOUTS)))], first, score, target)
        while not state.round_over:
            found.append(state)
            legal = state.legal_moves()
            state = state.play(legal[int(rng.integers(len(legal)))])
    return found[:count]


def sb3_choices(model: Any, encoding: Any, positions: list[State]) -> tuple[list[int], np.ndarray]:
    """The slot a Stable-Baselines3 model chooses in each position, and its logits.

    The legal-move mask is applied as every player applies it: ``MaskablePPO.predict`` with
    ``action_masks``; for ``PPO``, which has no mask, the argmax of its logits with those of
    the illegal actions set to -inf. Computed by SB3 itself, not by buttonup_env's players.
    """
    from sb3_contrib import MaskablePPO

    observations = np.stack([encoding.encode(s, s.to_move) for s in positions])
    masks = np.stack([encoding.mask(s) for s in positions])
    with th.no_grad():
        obs = th.as_tensor(observations)
        logits = model.policy.get_distribution(obs).distribution.logits.numpy()
    if isinstance(model, MaskablePPO):
        actions, _ = model.predict(observations, action_masks=masks, deterministic=True)
    else:
        actions = np.where(masks, logits, -np.inf).argmax(axis=1)
    slots = [encoding.slot(s, int(a)) for s, a in zip(positions, actions, strict=True)]
    return slots, logits


def near_tie(logits: np.ndarray, mask: np.ndarray) -> bool:
    """Whether the two best legal logits are equal up to float32 rounding (either move may
    then come out of two correct implementations)."""
    best = np.sort(np.where(mask, logits, -np.inf))[-2:]
    return bool(best[1] - best[0] < 1e-5)


class _BoxActions(gym.Env):
    """ButtonUp-v0's observations, but continuous actions."""

    observation_space = gym.spaces.Box(0.0, 1.0, (SlotEncoding.size,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _small(**kwargs: Any) -> dict[str, Any]:
    return {"n_steps": 64, "batch_size": 32, "device": "cpu", **kwargs}


def _recurrent(path: Path) -> None:
    from sb3_contrib import RecurrentPPO

    RecurrentPPO("MlpLstmPolicy", gym.make("ButtonUp-v0"), **_small()).save(path)


def _a2c(path: Path) -> None:
    from stable_baselines3 import A2C

    A2C("MlpPolicy", gym.make("ButtonUp-v0"), n_steps=8, device="cpu").save(path)


def _dqn(path: Path) -> None:
    from stable_baselines3 import DQN

    DQN("MlpPolicy", gym.make("ButtonUp-v0"), buffer_size=64, device="cpu").save(path)


def _other_env(path: Path) -> None:
    from stable_baselines3 import PPO

    PPO("MlpPolicy", gym.make("CartPole-v1"), **_small()).save(path)


def _continuous_actions(path: Path) -> None:
    from stable_baselines3 import PPO

    PPO("MlpPolicy", _BoxActions(), **_small()).save(path)


def _normalised_observations(path: Path) -> None:
    from sb3_contrib import MaskablePPO

    env = gym.wrappers.NormalizeObservation(gym.make("ButtonUp-v0"))
    MaskablePPO("MlpPolicy", env, **_small()).save(path)


def _other_layers(path: Path) -> None:
    from stable_baselines3 import PPO

    kwargs = {"activation_fn": th.nn.LeakyReLU}
    PPO("MlpPolicy", gym.make("ButtonUp-v0"), policy_kwargs=kwargs, **_small()).save(path)


def _not_a_zip(path: Path) -> None:
    path.write_text("not a model\n")


def _empty_zip(path: Path) -> None:
    path.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip archive


UNSUPPORTED: dict[str, tuple[Callable[[Path], None], list[str]]] = {
    # name: (write the .zip, what the one-sentence refusal says besides the file and
    # "supported are")
    "recurrent": (_recurrent, ["RecurrentActorCriticPolicy", "recurrent"]),
    "a2c": (_a2c, ["ActorCriticPolicy", "not PPO"]),
    "dqn": (_dqn, ["DQNPolicy"]),
    "other env": (_other_env, ["observations of size 4", "match no encoding"]),
    "continuous actions": (_continuous_actions, ["Box(-1.0, 1.0, (2,), float32)", "not discrete"]),
    "normalised observations": (_normalised_observations, ["Box(-inf, inf, (246,)", "rescales"]),
    "other layers": (_other_layers, ["LeakyReLU", "Linear, ReLU, Tanh"]),
    "not a zip": (_not_a_zip, ["not a Stable-Baselines3 model", "not a zip archive"]),
    "empty zip": (_empty_zip, ["not a Stable-Baselines3 model", "no 'data'"]),
}
"""SB3 files that ``training/export.py`` refuses. "other layers" loads and plays (its
logits come from torch); only its export is refused."""


def unsupported_zip(name: str, folder: Path) -> Path:
    """Write the ``.zip`` of ``UNSUPPORTED[name]`` into ``folder``."""
    path = folder / f"{name.replace(' ', '-')}.zip"
    UNSUPPORTED[name][0](path)
    return path
