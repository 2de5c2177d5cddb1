"""Stable-Baselines3 on the batched env: :class:`SB3VecEnv` (needs the ``train`` extra).

SB3's algorithms step a ``stable_baselines3.common.vec_env.VecEnv``: a list of infos, one dict
per env, with the last observation of a finished episode under ``"terminal_observation"``,
and (for sb3-contrib's MaskablePPO) the masks from ``env_method("action_masks")``.
:class:`SB3VecEnv` gives a :class:`~buttonup_env.envs.vector.ButtonUpVectorEnv` that face::

    from sb3_contrib import MaskablePPO
    from buttonup_env.learn.sb3 import SB3VecEnv
    from buttonup_env.envs.vector import ButtonUpVectorEnv

    venv = SB3VecEnv(ButtonUpVectorEnv(256, opponent="perfect", episode="round"))
    model = MaskablePPO("MlpPolicy", venv, n_steps=64, batch_size=4096).learn(100_000)

:class:`TensorRolloutBuffer` is sb3-contrib's rollout buffer with cheaper minibatches (pass it
as ``rollout_buffer_class``; ``training/train.py`` does). :class:`BootstrapTruncated` values
the truncated episodes of a step in one batch, where SB3 asks the critic once an env.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch as th
from sb3_contrib.common.maskable.buffers import (
    MaskableRolloutBuffer,
    MaskableRolloutBufferSamples,
)
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import (
    VecEnv,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from ..envs.vector import ButtonUpVectorEnv
from .active import active_features, check_view_size
from .round_starts import RoundStartValues


class SB3VecEnv(VecEnv):
    """A :class:`~buttonup_env.envs.vector.ButtonUpVectorEnv` as a Stable-Baselines3 ``VecEnv``.

    * ``step_wait`` returns SB3's ``(obs, rewards, dones, infos)``: ``infos`` a list with one
      dict per env, holding ``"terminal_observation"`` for the envs whose episode ended (the
      batched env resets them in the same step, as SB3 expects), ``"illegal_action"`` when
      the env's action was illegal, and ``"round_points"`` when a round ended.
    * ``env_method("action_masks")`` gives one boolean mask per env (sb3-contrib's
      convention); :meth:`action_masks` the same as one array.
    * ``seed(s)`` seeds the whole batch at the next ``reset()`` (SB3 gives env ``i`` the seed
      ``s + i``; the batch takes ``s``).
    * ``get_attr`` / ``set_attr`` read and write attributes of the batched env (the same value
      for every env).
    """

    def __init__(self, env: ButtonUpVectorEnv) -> None:
        if not isinstance(env, ButtonUpVectorEnv):
            raise ValueError(f"SB3VecEnv adapts a ButtonUpVectorEnv, got {env!r}")
        self.env = env
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)
        self._actions: np.ndarray | None = None

    def reset(self) -> VecEnvObs:
        seed = self._seeds[0]
        obs, _ = self.env.reset(seed=seed)
        self._reset_seeds()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("call step_async(actions) before step_wait()")
        actions = np.asarray(self._actions)
        if actions.ndim == 2 and actions.shape[1] == 1:  # SB3's Discrete actions can be (n, 1)
            actions = actions[:, 0]
        self._actions = None
        obs, rewards, terminated, truncated, info = self.env.step(actions.astype(np.int64))
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(dones):  # only the finished episodes: a few per step
            infos[i]["terminal_observation"] = info["final_obs"][i]
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            if info["illegal_action"][i]:
                infos[i]["illegal_action"] = True
        if "_round_points" in info:
            for i in np.flatnonzero(info["_round_points"]):
                r, b = info["round_points"][i]
                infos[i]["round_points"] = {"R": int(r), "B": int(b)}
        return obs, rewards.astype(np.float32), dones, infos

    def action_masks(self) -> np.ndarray:
        """Boolean masks of the legal actions, one row per env."""
        return self.env.action_masks()

    def close(self) -> None:
        self.env.close()

    def _indices(self, indices: VecEnvIndices) -> Sequence[int]:
        if indices is None:
            return range(self.num_envs)
        if isinstance(indices, int):
            return [indices]
        return list(indices) if isinstance(indices, Iterable) else [indices]

    def has_attr(self, attr_name: str) -> bool:
        return attr_name == "action_masks" or hasattr(self.env, attr_name)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        value = getattr(self.env, attr_name)
        return [value for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        if indices is not None and list(self._indices(indices)) != list(range(self.num_envs)):
            raise ValueError(
                f"set_attr({attr_name!r}) on some envs only: the batched env has one value "
                "for all of them (pass indices=None)"
            )
        setattr(self.env, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        if method_name != "action_masks":
            raise AttributeError(
                f"the batched env has no per-env method {method_name!r}; only 'action_masks'"
            )
        masks = self.action_masks()
        return [masks[i] for i in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None for _ in range(self.num_envs)]


class TensorRolloutBuffer(MaskableRolloutBuffer):
    """sb3-contrib's ``MaskableRolloutBuffer`` with the same minibatches, gathered faster.

    The parent copies each minibatch out of numpy arrays into new tensors; this buffer views
    the flattened rollout as tensors once (no copy) and gathers each minibatch from them with
    ``index_select``: the same samples in the same order, the same dtypes and values, at about
    half the cost of a minibatch. With a ``VecNormalize`` env (observations normalized as they
    are sampled) it falls back to the parent.

    ``view_size`` (through MaskablePPO's ``rollout_buffer_kwargs``): the observations are
    views of that many binary features (the ``afterstates`` or ``ring`` encoding), and the
    minibatches hold them as lists of their active features instead (int16, 11 per view:
    :func:`buttonup_env.learn.active.active_features`, listed once per rollout), which
    :class:`~buttonup_env.learn.nets.RingPolicy` reads with a first layer that adds up the listed
    weight rows only: the same numbers, a fraction of the work and of the bytes gathered.
    """

    _FIELDS = ("observations", "actions", "values", "log_probs", "advantages", "returns")

    def __init__(self, *args: Any, view_size: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if view_size is not None:  # a sentence now, not an error at the first update
            check_view_size(view_size, (self.buffer_size * self.n_envs, *self.obs_shape))
        self.view_size = view_size

    def reset(self) -> None:
        super().reset()  # new arrays: the tensors viewing the old ones go
        self._tensors: tuple[th.Tensor, ...] | None = None

    def _get_samples(  # type: ignore[override]
        self, batch_inds: np.ndarray, env: VecNormalize | None = None
    ) -> MaskableRolloutBufferSamples:
        if env is not None or not self.generator_ready:
            return super()._get_samples(batch_inds, env)
        if self._tensors is None:  # the rollout, flattened by get(), as tensors once
            size = self.buffer_size * self.n_envs
            arrays = [getattr(self, name) for name in self._FIELDS]
            if self.view_size is not None:
                arrays[0] = active_features(arrays[0], self.view_size).reshape(size, -1)
            arrays[2:] = [a.reshape(size) for a in arrays[2:]]
            arrays.append(self.action_masks.reshape(size, self.mask_dims))
            self._tensors = tuple(th.as_tensor(a, device=self.device) for a in arrays)
        index = th.as_tensor(batch_inds, device=self.device)
        return MaskableRolloutBufferSamples(*(t.index_select(0, index) for t in self._tensors))


class BootstrapTruncated(BaseCallback):
    """Bootstrap the episodes truncated in a step with one call of the critic, not one an env.

    SB3's ``collect_rollouts`` adds ``gamma`` times the critic's value of each truncated
    episode's last observation to its reward, asking the critic once per env. With a batched
    env whose rounds are truncated (``ButtonUpVectorEnv(truncate_rounds=True)``) a step ends
    about one episode in eight, so those calls cost several times the step itself. Passed first
    among ``learn``'s callbacks, this one adds the same values, computed in one batch, to the
    step's rewards (the array the rollout buffer is given next) and clears the envs'
    ``"TimeLimit.truncated"`` so that SB3 does not add them again.

    With ``round_starts`` (a :class:`~buttonup_env.learn.round_starts.RoundStartValues` of the
    batched env) a truncated round is valued by that table at the next round's start, the
    average over its layouts, instead of by the critic; the table learns from every round.
    With ``scale`` too, each round's reward (paid at its last step, the only one of a round
    that pays) becomes ``(reward - mean) / spread`` of the results from the round's start
    (:meth:`~buttonup_env.learn.round_starts.RoundStartValues.spread`): an affine map of each
    score's results, so the best moves at every score stay the same, while a round at 0-0,
    where a point moves the match a little, teaches as much as one at 14-14, where it decides
    it (per-task return scaling, as PopArt does for many tasks).
    """

    def __init__(self, round_starts: RoundStartValues | None = None, scale: bool = False) -> None:
        super().__init__()
        if scale and round_starts is None:
            raise ValueError("scale=True scales by a table's spreads: pass round_starts too")
        self.round_starts = round_starts
        self.scale = scale

    def _on_step(self) -> bool:
        infos = self.locals["infos"]
        dones = self.locals["dones"]
        rewards = self.locals["rewards"]
        if self.round_starts is not None:
            return self._from_table(self.round_starts, infos, dones, rewards)
        envs = [
            i
            for i in np.flatnonzero(dones)
            if infos[i].get("TimeLimit.truncated", False)
            and infos[i].get("terminal_observation") is not None
        ]
        if not envs:
            return True
        policy = self.model.policy
        last = np.stack([infos[i]["terminal_observation"] for i in envs])
        with th.no_grad():
            values = policy.predict_values(policy.obs_to_tensor(last)[0])
        rewards[envs] += self.model.gamma * values.flatten().cpu().numpy().astype(rewards.dtype)
        for i in envs:
            infos[i]["TimeLimit.truncated"] = False
        return True

    def _from_table(
        self,
        table: RoundStartValues,
        infos: list[dict[str, Any]],
        dones: np.ndarray,
        rewards: np.ndarray,
    ) -> bool:
        ended = np.flatnonzero(dones)  # a round ended each: SB3VecEnv gives its points
        points = [infos[i]["round_points"] for i in ended]
        after = table.observe(ended, np.array([[p["R"], p["B"]] for p in points]).reshape(-1, 2))
        for j, i in enumerate(ended):
            if infos[i].get("TimeLimit.truncated", False):
                rewards[i] += self.model.gamma * after[j]
                infos[i]["TimeLimit.truncated"] = False
        if self.scale and len(ended):
            starts = table.starts
            index = (starts[:, 0], starts[:, 1], starts[:, 2])
            rewards[ended] = (rewards[ended] - table.values[index]) / table.spread(starts)
        return True
