"""Binary views as lists of their active features, and a first layer that reads only those.

A view of the ``afterstates``, ``ring`` or ``match-afterstates`` encoding
(:mod:`buttonup_env.game.encoding`) has 245, 243 or 288 features, all 0 or 1, of which at most
:data:`MAX_ACTIVE` are 1 (nine buttons; in an afterstate view two flags; in a match afterstate
also each player's points to go and the start). A dense first layer multiplies every one of
them by its weights; :func:`active_linear` adds up the weight rows of the active ones instead,
which is the same sum with a twentieth of the arithmetic. :func:`active_features` makes the lists:
``RingPolicy(active_features=True)`` from the observations of each rollout step, and
``buttonup_env.learn.sb3.TensorRolloutBuffer`` once per rollout for the updates.

A view's list holds its active features in increasing order, then :data:`END` in the places
left; an all-zero view (no legal move behind it) is an empty list. The kernels are compiled
with numba on first use and cached, as the batched env's are (:mod:`buttonup_env.engine.kernels`).
``benchmarks/bench_network.py`` times it beside the dense layer and ``nn.EmbeddingBag``; the
figures are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import numpy as np
import torch as th

from ..engine.kernels import compile_kernel

MAX_ACTIVE = 14
"""Most features a view can have set: nine buttons, the two flags of an afterstate, and the
three of the match in a ``match-afterstates`` view."""
END = -1
"""Marks the end of a view's list of active features."""


def _scan(views: np.ndarray, active: np.ndarray) -> int:
    """Write each row's active features at the start of its row of ``active`` (views,
    MAX_ACTIVE; filled with END); return the index of the first row with a value other than
    0 and 1 or too many ones, or -1."""
    width = views.shape[1]
    for i in range(views.shape[0]):
        row = views[i]
        count = 0
        for k in range(width):
            value = row[k]
            if value != 0.0:
                if value != 1.0 or count == MAX_ACTIVE:
                    return i
                active[i, count] = k
                count += 1
    return -1


def _forward(active: np.ndarray, weight_t: np.ndarray, bias: np.ndarray, out: np.ndarray) -> None:
    """out[i] = bias + the sum of weight_t's rows listed in active[i]."""
    units = out.shape[1]
    total = np.empty(units, np.float32)
    for i in range(active.shape[0]):
        for n in range(units):
            total[n] = bias[n]
        for c in range(MAX_ACTIVE):
            k = active[i, c]
            if k < 0:
                break
            row = weight_t[k]
            for n in range(units):
                total[n] += row[n]
        target = out[i]
        for n in range(units):
            target[n] = total[n]


def _weight_grad(active: np.ndarray, grad: np.ndarray, grad_weight_t: np.ndarray) -> None:
    """grad_weight_t[k] = the sum of grad's rows whose list holds k (grad_weight_t zeroed)."""
    units = grad.shape[1]
    for i in range(active.shape[0]):
        source = grad[i]
        for c in range(MAX_ACTIVE):
            k = active[i, c]
            if k < 0:
                break
            row = grad_weight_t[k]
            for n in range(units):
                row[n] += source[n]


_scan_kernel = compile_kernel(_scan)
_forward_kernel = compile_kernel(_forward)
_weight_grad_kernel = compile_kernel(_weight_grad)


def check_view_size(view_size: object, shape: tuple[int, ...]) -> None:
    """``ValueError`` in a sentence unless an array of ``shape`` is rows of whole views of
    ``view_size`` features (a whole number >= 1)."""
    if not isinstance(view_size, int) or isinstance(view_size, bool) or view_size < 1:
        raise ValueError(f"view_size must be a whole number >= 1, got {view_size!r}")
    if len(shape) != 2 or shape[1] % view_size:
        raise ValueError(
            f"active_features needs rows of views of {view_size} features, got shape {shape}"
        )


def active_features(obs: np.ndarray | th.Tensor, view_size: int) -> np.ndarray:
    """The active features of each view of ``obs`` (rows of views of ``view_size`` features,
    float32, 0 or 1): an int16 array of shape ``(rows, views, MAX_ACTIVE)``.

    ``ValueError`` names the first row with a value other than 0 and 1, or with more than
    :data:`MAX_ACTIVE` ones in a view."""
    array = obs.numpy() if isinstance(obs, th.Tensor) else obs
    array = np.ascontiguousarray(array, dtype=np.float32)
    check_view_size(view_size, array.shape)
    views = array.reshape(-1, view_size)
    active = np.full((len(views), MAX_ACTIVE), END, np.int16)
    bad = _scan_kernel(views, active)
    if bad >= 0:
        row = views[bad]
        raise ValueError(
            f"active_features needs views of 0s and 1s with at most {MAX_ACTIVE} ones; row "
            f"{bad // (array.shape[1] // view_size)} has values {sorted(set(row.tolist()))} "
            f"and {int(np.count_nonzero(row))} non-zero"
        )
    return active.reshape(len(array), -1, MAX_ACTIVE)


class _ActiveLinear(th.autograd.Function):
    @staticmethod
    def forward(ctx: object, active: th.Tensor, weight: th.Tensor, bias: th.Tensor) -> th.Tensor:
        lists = active.reshape(-1, MAX_ACTIVE).numpy()
        out = th.empty((len(lists), weight.shape[0]), dtype=th.float32)
        weight_t = weight.detach().float().t().contiguous().numpy()
        _forward_kernel(lists, weight_t, bias.detach().float().numpy(), out.numpy())
        ctx.save_for_backward(active)  # type: ignore[attr-defined]
        ctx.in_features = weight.shape[1]  # type: ignore[attr-defined]
        return out.reshape(*active.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx: object, grad: th.Tensor) -> tuple[None, th.Tensor, th.Tensor]:
        (active,) = ctx.saved_tensors  # type: ignore[attr-defined]
        grad = grad.reshape(-1, grad.shape[-1]).float().contiguous()
        in_features = ctx.in_features  # type: ignore[attr-defined]
        grad_weight_t = th.zeros((in_features, grad.shape[1]), dtype=th.float32)
        lists = active.reshape(-1, MAX_ACTIVE).numpy()
        _weight_grad_kernel(lists, grad.numpy(), grad_weight_t.numpy())
        return None, grad_weight_t.t(), grad.sum(dim=0)


def active_linear(active: th.Tensor, layer: th.nn.Linear) -> th.Tensor:
    """``layer`` applied to the views whose active features ``active`` lists (int16, the last
    dimension :data:`MAX_ACTIVE`, from :func:`active_features`): the same as ``layer`` on the
    dense views, computed from the listed weight rows only, in float32, on the CPU. Gradients
    reach the layer's weight and bias.

    ``ValueError`` in a sentence for lists of another dtype or shape, or with a feature the
    layer does not have (the kernels would read past its weights), and for a layer or lists
    off the CPU."""
    weight = layer.weight
    if active.dtype != th.int16 or active.ndim < 1 or active.shape[-1] != MAX_ACTIVE:
        raise ValueError(
            f"active_linear needs int16 lists of {MAX_ACTIVE} (from active_features), got "
            f"{active.dtype} of shape {tuple(active.shape)}"
        )
    if weight.device.type != "cpu" or active.device.type != "cpu":
        raise ValueError(
            f"active_linear runs on the CPU (numba kernels), got the layer on {weight.device} "
            f"and the lists on {active.device}: use the dense layer elsewhere"
        )
    if active.numel():
        low, high = th.aminmax(active)
        if int(low) < END or int(high) >= weight.shape[1]:
            raise ValueError(
                f"active_linear got features from {int(low)} to {int(high)} for a layer of "
                f"{weight.shape[1]} inputs (a list holds 0 to {weight.shape[1] - 1}, then {END})"
            )
    return _ActiveLinear.apply(active, weight, layer.bias)
