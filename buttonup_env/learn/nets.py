"""The policy network of the shipped agents (needs torch and sb3-contrib: the ``train`` extra).

:class:`RingPolicy` is a MaskablePPO policy for the ``ring`` encoding. The actor scores each of
the three views (the ring seen from each legal move) with the *same* small network, so what it
learns about one move holds for every rotation of the circle. The critic values a position from
the same views, so its value is the same for every rotation too: by default (``critic="pooled"``)
a linear layer on the mean and the max of the views' features; with ``critic="expected"`` (what
``training/train.py`` trains) each legal move's view gets a value of its own (with the
``afterstates`` encoding: the value of the position after the move), and the position's value is
their average weighted by the policy's probabilities of the moves.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch as th
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from torch import nn
from torch.nn import functional as F

from ..game.encoding import CHANNELS, MAX_LEGAL
from .active import END, MAX_ACTIVE, active_features, active_linear
from .hardware import fast_bfloat16 as fast_bfloat16  # its home before: still importable here

CRITICS = ("expected", "pooled")
_MASKED = -1e8  # an illegal move's logit, as sb3-contrib's MaskableCategorical sets it
"""How :class:`RingViews` values a position (its ``critic`` argument)."""


def _mlp(sizes: Sequence[int], activation: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), activation()]
    return nn.Sequential(*layers)


class RingViews(nn.Module):
    """Actor and critic over the three views (``latent_dim_pi`` = 3 logits).

    ``critic="pooled"``: the critic's latent is the mean and the max of the views' features
    (``latent_dim_vf`` = 2 x the last layer), for SB3's value layer. ``critic="expected"``: the
    latent is the value itself (``latent_dim_vf`` = 1): a linear unit scores each legal move's
    afterstate, and the value is those scores averaged with the policy's probabilities of the
    moves, held fixed so that the value loss trains the critic only. It costs a unit where
    pooling costs a reduction over the views, whose backward pass is the dearer one.
    """

    def __init__(
        self,
        view_size: int,
        hidden: Sequence[int],
        activation: type[nn.Module],
        shared: bool = False,
        logit_bound: float | None = None,
        bfloat16: bool = False,
        critic: str = "pooled",
    ) -> None:
        super().__init__()
        if critic not in CRITICS:
            raise ValueError(f"critic must be one of {', '.join(CRITICS)}, got {critic!r}")
        self.view_size = view_size
        self.bfloat16 = bfloat16
        self.logit_bound = logit_bound
        self.critic = critic
        sizes = [view_size, *hidden]
        self.actor_body = _mlp(sizes, activation)
        self.actor_score = nn.Linear(sizes[-1], 1)
        self.critic_body = self.actor_body if shared else _mlp(sizes, activation)
        self.latent_dim_pi = MAX_LEGAL
        if critic == "expected":
            self.critic_score = nn.Linear(sizes[-1], 1)
            self.latent_dim_vf = 1
        else:
            self.latent_dim_vf = 2 * sizes[-1]

    def _autocast(self) -> th.autocast:
        """bfloat16 matrix products on the CPU when asked (weights and outputs stay float32)."""
        return th.autocast("cpu", dtype=th.bfloat16, enabled=self.bfloat16)

    def _views(self, features: th.Tensor) -> th.Tensor:
        """The views, dense (float: ``view_size`` features each) or as lists of their active
        features (int16: :func:`buttonup_env.learn.active.active_features`)."""
        if features.dtype == th.int16:
            return features.reshape(-1, MAX_LEGAL, MAX_ACTIVE)
        return features.reshape(-1, MAX_LEGAL, self.view_size)

    def _body(self, body: nn.Sequential, views: th.Tensor) -> th.Tensor:
        """The per-view layers on the views; on lists of active features the first layer adds
        up the listed weight rows (:func:`~buttonup_env.learn.active.active_linear`, float32)."""
        if views.dtype != th.int16:
            with self._autocast():
                return body(views)
        layers = list(body)
        hidden = active_linear(views, layers[0])
        with self._autocast():
            for layer in layers[1:]:
                hidden = layer(hidden)
        return hidden

    def _legal(self, features: th.Tensor) -> th.Tensor:
        """Which views have a legal move behind them: a legal move's view has a stack in its
        first place, so its bottom button (height 0) sets one of the first CHANNELS
        features; an illegal move's view is all zeros."""
        views = self._views(features)
        if views.dtype == th.int16:
            return views[:, :, 0] != END
        return views[:, :, 0:CHANNELS].sum(dim=-1) > 0

    def _bound(self, scores: th.Tensor) -> th.Tensor:
        scores = scores.float()
        if self.logit_bound is not None:  # soft clamp: never a fully certain policy
            scores = self.logit_bound * th.tanh(scores / self.logit_bound)
        return scores

    def _scores(self, body: th.Tensor) -> th.Tensor:
        """One logit per view, from the actor's per-view features."""
        with self._autocast():
            scores = self.actor_score(body).squeeze(-1)
        return self._bound(scores)

    def _fused(self) -> bool:
        """Whether actor and critic score the same per-view features (the expected critic on
        shared layers), so that one matrix product gives both scores."""
        return self.critic == "expected" and self.critic_body is self.actor_body

    def _both_scores(self, body: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """The actor's logits and the critic's per-view values in one product: the two score
        units side by side (the same parameters as ``actor_score`` and ``critic_score``; one
        product instead of two, and one gradient through the shared features)."""
        weight = th.cat([self.actor_score.weight, self.critic_score.weight])
        bias = th.cat([self.actor_score.bias, self.critic_score.bias])
        with self._autocast():
            both = F.linear(body, weight, bias)
        return self._bound(both[..., 0]), both[..., 1]

    @staticmethod
    def _pooled(body: th.Tensor) -> th.Tensor:
        """The critic's latent: the mean and the max of the per-view features."""
        body = body.float()
        return th.cat([body.mean(dim=1), body.amax(dim=1)], dim=1)

    def _expected(self, features: th.Tensor, scores: th.Tensor, values: th.Tensor) -> th.Tensor:
        """The critic's value: each legal move's afterstate value (``values``, one per view),
        weighted by the policy's probability of the move (held fixed: the value loss does not
        move the policy)."""
        legal = self._legal(features)
        weights = th.softmax(scores.detach().masked_fill(~legal, -th.inf), dim=1)
        weights = th.nan_to_num(weights)  # no legal move (the round is over): value 0
        return (weights * values.float()).sum(dim=1, keepdim=True)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        body = self._body(self.actor_body, self._views(features))
        if self._fused():  # the same product as in forward(), so the same logits
            return self._both_scores(body)[0]
        return self._scores(body)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        if self.critic == "expected":  # the value needs the actor's scores too
            return self.forward(features)[1]
        return self._pooled(self._body(self.critic_body, self._views(features)))

    def log_probs_and_value(
        self, features: th.Tensor, masks: th.Tensor
    ) -> tuple[th.Tensor, th.Tensor]:
        """The expected critic's pass for PPO, given the legal moves (``masks``, bool, one row
        of ``MAX_LEGAL`` per position): the policy's log-probabilities of the moves (an illegal
        move's about -1e8, as sb3-contrib's masked distribution has them) and the value, the
        afterstate values weighted by those probabilities. The same numbers as
        ``forward()`` followed by sb3-contrib's masked distribution, with fewer small
        operations: one masked log-softmax serves the log-probabilities, the entropy and the
        value's weights (an update's evaluation and backward pass: 143 torch operations where
        sb3-contrib's path runs 199, counted with torch.profiler)."""
        if self.critic != "expected":
            raise ValueError(f"log_probs_and_value needs the expected critic, not {self.critic!r}")
        views = self._views(features)
        body = self._body(self.actor_body, views)
        if self._fused():
            scores, values = self._both_scores(body)
        else:
            scores = self._scores(body)
            with self._autocast():
                values = self.critic_score(self._body(self.critic_body, views)).squeeze(-1)
        log_probs = th.log_softmax(scores.masked_fill(~masks, _MASKED), dim=1)
        weights = log_probs.detach().exp().masked_fill(~masks, 0.0)  # no legal move: value 0
        value = (weights * values.float()).sum(dim=1, keepdim=True)
        return log_probs, value

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        views = self._views(features)
        body = self._body(self.actor_body, views)
        if self._fused():
            scores, values = self._both_scores(body)
            return scores, self._expected(features, scores, values)
        scores = self._scores(body)
        if self.critic_body is not self.actor_body:  # separate layers: the critic's own pass
            body = self._body(self.critic_body, views)
        if self.critic == "expected":
            with self._autocast():
                values = self.critic_score(body).squeeze(-1)
            return scores, self._expected(features, scores, values)
        return scores, self._pooled(body)


class RingPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy for :class:`~buttonup_env.envs.wrappers.RingObservation`.

    policy_kwargs: ``hidden``, the sizes of the per-view layers (default 256, 256); ``shared``,
    whether actor and critic use the same per-view layers (default False: separate);
    ``logit_bound``, if set, softly clamps every logit to ``(-bound, bound)`` with
    ``bound * tanh(score / bound)``, so that no legal move's probability falls below about
    ``exp(-2 * bound) / 3`` and the policy keeps trying every move while it trains;
    ``bfloat16`` (default False): the per-view layers multiply in bfloat16 on the CPU (weights,
    gradients and outputs stay float32), about twice as fast where the CPU has bfloat16 matrix
    units (AMX, AVX512-BF16) and slower elsewhere; exported policies are float32 either way;
    ``critic`` (default ``"pooled"``), how the critic values a position (see
    :class:`RingViews`; the exported policy is the actor alone either way);
    ``active_features`` (default False): the views (binary: the ``afterstates`` or ``ring``
    encoding) reach the first layer as lists of their active features
    (:mod:`buttonup_env.learn.active`), which adds up the listed weight rows in float32 instead of
    multiplying all of them (in bfloat16 with ``bfloat16``): the same function, a twentieth
    of the first layer's arithmetic; exported policies are the same dense layers either way.
    With :class:`~buttonup_env.learn.sb3.TensorRolloutBuffer` given the same views' ``view_size``,
    the updates' minibatches come as lists already.
    """

    def __init__(
        self,
        *args: Any,
        hidden: Sequence[int] = (256, 256),
        shared: bool = False,
        logit_bound: float | None = None,
        bfloat16: bool = False,
        critic: str = "pooled",
        active_features: bool = False,
        **kwargs: Any,
    ) -> None:
        if logit_bound is not None and not logit_bound > 0:
            raise ValueError(f"logit_bound must be None or > 0, got {logit_bound!r}")
        self.hidden = tuple(hidden)
        self.shared = shared
        self.logit_bound = logit_bound
        self.bfloat16 = bfloat16
        self.critic = critic
        self.active_features = active_features
        kwargs.setdefault("activation_fn", nn.ReLU)
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        view_size = self.observation_space.shape[0] // MAX_LEGAL
        self.mlp_extractor = RingViews(
            view_size,
            self.hidden,
            self.activation_fn,
            self.shared,
            self.logit_bound,
            self.bfloat16,
            self.critic,
        )

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        # the views already give one logit each: no extra layer on top
        self.action_net = nn.Identity()
        if self.critic == "expected":  # the views already give the value
            self.value_net = nn.Identity()
        nn.init.orthogonal_(self.mlp_extractor.actor_score.weight, gain=0.01)
        nn.init.zeros_(self.mlp_extractor.actor_score.bias)
        self.optimizer = self._optimizer(lr_schedule(1))

    def _optimizer(self, lr: float) -> th.optim.Optimizer:
        """The optimizer SB3 would build; Adam on the CPU in its fused form where torch has
        one (2.4 and later: one kernel for all the parameters, half the time of a step of the
        default loop over them; the same update up to rounding)."""
        kwargs = dict(self.optimizer_kwargs)
        if self.optimizer_class is th.optim.Adam and not {"fused", "foreach"} & kwargs.keys():
            try:
                return th.optim.Adam(self.parameters(), lr=lr, fused=True, **kwargs)
            except RuntimeError:  # no fused Adam for this device in this torch
                pass
        return self.optimizer_class(self.parameters(), lr=lr, **kwargs)

    def extract_features(self, obs: th.Tensor, *args: Any, **kwargs: Any) -> th.Tensor:  # type: ignore[override]
        """The observations as SB3 preprocesses them, as lists of their views' active features
        with ``active_features`` (int16; lists already made, by
        ``buttonup_env.learn.sb3.TensorRolloutBuffer``, pass through as they are)."""
        if isinstance(obs, th.Tensor) and obs.dtype == th.int16:
            return obs
        features = super().extract_features(obs, *args, **kwargs)
        if not self.active_features:
            return features
        lists = active_features(features.detach().cpu(), self.mlp_extractor.view_size)
        return th.as_tensor(lists.reshape(len(lists), -1), device=self.device)

    def predict_values(self, obs: th.Tensor) -> th.Tensor:
        """The critic's values (sb3-contrib's reads the features past this class's
        :meth:`extract_features`)."""
        features = self.extract_features(obs, self.vf_features_extractor)
        return self.value_net(self.mlp_extractor.forward_critic(features))

    def _masks(self, action_masks: th.Tensor | np.ndarray, rows: int) -> th.Tensor:
        return th.as_tensor(action_masks, dtype=th.bool, device=self.device).reshape(rows, -1)

    def _fast(self, action_masks: object) -> bool:
        """Whether the expected critic's own pass (:meth:`RingViews.log_probs_and_value`)
        stands in for sb3-contrib's masked distribution: same numbers, cheaper."""
        return action_masks is not None and self.critic == "expected"

    def forward(
        self,
        obs: th.Tensor,
        deterministic: bool = False,
        action_masks: th.Tensor | np.ndarray | None = None,
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """Actions, values and the actions' log-probabilities (what MaskablePPO's rollouts
        call), as sb3-contrib's policy computes them: the most likely legal move if
        ``deterministic``, else one drawn with ``torch.multinomial``."""
        if not self._fast(action_masks):
            return super().forward(obs, deterministic, action_masks)
        features = self.extract_features(obs)
        masks = self._masks(action_masks, len(features))  # type: ignore[arg-type]
        log_probs, values = self.mlp_extractor.log_probs_and_value(features, masks)
        if deterministic:
            actions = log_probs.argmax(dim=1)
        else:
            actions = th.multinomial(log_probs.exp(), 1, True).squeeze(1)
        log_prob = log_probs.gather(1, actions.unsqueeze(1)).squeeze(1)
        return actions.reshape(-1, *self.action_space.shape), values, log_prob  # type: ignore[misc]

    def evaluate_actions(
        self,
        obs: th.Tensor,
        actions: th.Tensor,
        action_masks: th.Tensor | None = None,
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        """Values, the actions' log-probabilities and the policies' entropies (what
        MaskablePPO's updates call), as sb3-contrib's policy computes them."""
        if not self._fast(action_masks):
            return super().evaluate_actions(obs, actions, action_masks)
        features = self.extract_features(obs)
        masks = self._masks(action_masks, len(features))  # type: ignore[arg-type]
        log_probs, values = self.mlp_extractor.log_probs_and_value(features, masks)
        log_prob = log_probs.gather(1, actions.long().reshape(-1, 1)).squeeze(1)
        entropy = -(log_probs.exp() * log_probs).sum(dim=1)  # an illegal move's p is 0
        return values, log_prob, entropy

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["hidden"] = self.hidden
        data["shared"] = self.shared
        data["logit_bound"] = self.logit_bound
        data["bfloat16"] = self.bfloat16
        data["critic"] = self.critic
        data["active_features"] = self.active_features
        return data
