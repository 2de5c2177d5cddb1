"""The policy network of the shipped agents (needs torch and sb3-contrib: the ``train`` extra).

:class:`RingPolicy` is a MaskablePPO policy for the ``ring`` encoding. The actor scores each of
the three views (the ring seen from each legal move) with the *same* small network, so what it
learns about one move holds for every rotation of the circle. The critic values a position from
the same views, so its value is the same for every rotation too: by default (``critic="pooled"``)
a linear layer on the mean and the max of the views' features; with ``critic="expected"`` (what
``training/train.py`` trains) each legal move's view gets a value of its own (with the
``afterstates`` encoding: the value of the position after the move), and the position's value is
their average weighted by the policy's probabilities of the moves. ``critic="margins"`` (for the
``match-afterstates`` encoding) is the expected critic whose afterstate values come from a
distribution over the round's margin, valued by what each margin is worth in the match at the
view's score (:meth:`RingViews.set_margin_values`).
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

from ..game.encoding import BOARD_FEATURES, CHANNELS, MAX_LEGAL, TO_GO, MatchAfterstateEncoding
from ..game.rules import MAX_ROUND_MARGIN
from .active import END, MAX_ACTIVE, active_features, active_linear
from .hardware import fast_bfloat16 as fast_bfloat16  # its home before: still importable here

CRITICS = ("expected", "pooled", "margins")
"""How :class:`RingViews` values a position (its ``critic`` argument)."""
_MASKED = -1e8  # an illegal move's logit, as sb3-contrib's MaskableCategorical sets it
MARGINS = 2 * MAX_ROUND_MARGIN + 1
"""The round's margins a ``margins`` critic gives probabilities to: -18 to 18, the mover's."""
_OVER = BOARD_FEATURES + 1  # a view's flag: the move ends the round
_OWN = MatchAfterstateEncoding.view_size - 2 * TO_GO - 1  # the mover's points to go, one-hot
_OTHER = _OWN + TO_GO  # the opponent's
_STARTS = _OTHER + TO_GO  # the mover starts the round of the position after the move


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

    ``critic="margins"`` (views of the ``match-afterstates`` encoding): as ``expected``, but a
    move's afterstate value is ``sum_m p(m) * u(m)``: ``p`` a distribution over the round's
    margin (-18 to 18, the mover's) from 37 more units, and ``u`` what each margin is worth in
    the match from the round's score and starter as the view gives them (a table given by
    :meth:`set_margin_values`, learnt by the training). So the value at every score follows
    from one belief about the round's result, learnt from the rounds of all scores. A move that
    ends the round has its own unit's value, as with ``expected`` (its view gives the next
    round's score, whose value the margin's table does not hold).
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
        if critic == "margins" and view_size != MatchAfterstateEncoding.view_size:
            raise ValueError(
                f"critic='margins' reads the match-afterstates encoding's views "
                f"({MatchAfterstateEncoding.view_size} features), got views of {view_size}"
            )
        if critic == "pooled":
            self.latent_dim_vf = 2 * sizes[-1]
        else:
            self.critic_score = nn.Linear(sizes[-1], 1 + (MARGINS if critic == "margins" else 0))
            self.latent_dim_vf = 1
        if critic == "margins":  # [own to go, other's to go, starts, margin + 18]
            self.register_buffer("margin_values", th.zeros(TO_GO, TO_GO, 2, MARGINS))

    def set_margin_values(self, values: np.ndarray | th.Tensor) -> None:
        """What each margin of a round is worth in the match, by the round's start:
        ``values[own, other, starts, margin + 18]``, with ``own`` and ``other`` the points the
        mover and the opponent need (0 to 20, as the views' one-hots) and ``starts`` 1 where the
        mover started the round (``critic="margins"`` only)."""
        if self.critic != "margins":
            raise ValueError(f"set_margin_values is for critic='margins', not {self.critic!r}")
        table = th.as_tensor(values, dtype=th.float32)
        shape = tuple(self.margin_values.shape)
        if table.shape != shape:
            raise ValueError(f"margin values must have the shape {shape}, got {tuple(table.shape)}")
        if not bool(th.isfinite(table).all()):
            raise ValueError("margin values must be finite numbers, got NaN or infinity")
        self.margin_values.copy_(table)

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
        """Whether actor and critic score the same per-view features (a per-view critic on
        shared layers), so that one matrix product gives both scores."""
        return self.critic != "pooled" and self.critic_body is self.actor_body

    def _both_scores(self, body: th.Tensor, views: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """The actor's logits and the critic's per-view values in one product: the score
        units side by side (the same parameters as ``actor_score`` and ``critic_score``; one
        product instead of two, and one gradient through the shared features)."""
        weight = th.cat([self.actor_score.weight, self.critic_score.weight])
        bias = th.cat([self.actor_score.bias, self.critic_score.bias])
        with self._autocast():
            both = F.linear(body, weight, bias)
        return self._bound(both[..., 0]), self._view_values(both[..., 1:], views)

    def _critic_values(self, body: th.Tensor, views: th.Tensor) -> th.Tensor:
        """The per-view values from the critic's per-view features (its own unit or units)."""
        with self._autocast():
            out = self.critic_score(body)
        return self._view_values(out, views)

    def _view_values(self, out: th.Tensor, views: th.Tensor) -> th.Tensor:
        """Each view's value from the critic's units ``out`` (one, or one and 37 margins'
        logits): the unit itself, or for ``margins`` the margins' expected worth in the match
        where the move does not end the round."""
        if self.critic != "margins":
            return out[..., 0]
        out = out.float()
        own, other, starts, over = self._match(views)
        worth = self.margin_values[own, other, starts]
        expected = (th.softmax(out[..., 1:], dim=-1) * worth).sum(dim=-1)
        return th.where(over, out[..., 0], expected)

    @staticmethod
    def _match(views: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor]:
        """Of each ``match-afterstates`` view: the mover's points to go, the opponent's,
        whether the mover starts, whether the move ends the round (an empty view: 0, 0, no,
        no)."""
        if views.dtype == th.int16:  # lists of the active features, END after them
            v = views.long()
            own = th.where((v >= _OWN) & (v < _OTHER), v - _OWN, 0).sum(dim=-1)
            other = th.where((v >= _OTHER) & (v < _STARTS), v - _OTHER, 0).sum(dim=-1)
            return own, other, (v == _STARTS).any(dim=-1).long(), (v == _OVER).any(dim=-1)
        own = views[..., _OWN:_OTHER].argmax(dim=-1)
        other = views[..., _OTHER:_STARTS].argmax(dim=-1)
        return own, other, (views[..., _STARTS] > 0.5).long(), views[..., _OVER] > 0.5

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
        views = self._views(features)
        body = self._body(self.actor_body, views)
        if self._fused():  # the same product as in forward(), so the same logits
            return self._both_scores(body, views)[0]
        return self._scores(body)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        if self.critic != "pooled":  # the value needs the actor's scores too
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
        if self.critic == "pooled":
            raise ValueError("log_probs_and_value needs a per-view critic, not 'pooled'")
        views = self._views(features)
        body = self._body(self.actor_body, views)
        if self._fused():
            scores, values = self._both_scores(body, views)
        else:
            scores = self._scores(body)
            values = self._critic_values(self._body(self.critic_body, views), views)
        log_probs = th.log_softmax(scores.masked_fill(~masks, _MASKED), dim=1)
        weights = log_probs.detach().exp().masked_fill(~masks, 0.0)  # no legal move: value 0
        value = (weights * values.float()).sum(dim=1, keepdim=True)
        return log_probs, value

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        views = self._views(features)
        body = self._body(self.actor_body, views)
        if self._fused():
            scores, values = self._both_scores(body, views)
            return scores, self._expected(features, scores, values)
        scores = self._scores(body)
        if self.critic_body is not self.actor_body:  # separate layers: the critic's own pass
            body = self._body(self.critic_body, views)
        if self.critic != "pooled":
            return scores, self._expected(features, scores, self._critic_values(body, views))
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
        if self.critic != "pooled":  # the views already give the value
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
        return action_masks is not None and self.critic != "pooled"

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
