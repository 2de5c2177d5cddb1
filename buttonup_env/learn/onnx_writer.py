"""Write a trained policy's actor to ONNX (needs torch, sb3-contrib and onnx: the ``train`` extra).

The actor of both policy kinds used here is a chain of ``Linear`` layers and activations
(``ReLU`` or ``Tanh``) after SB3's default ``FlattenExtractor``:

* :class:`~buttonup_env.learn.nets.RingPolicy` (the view encodings: ``ring``, ``afterstates``,
  ``match-afterstates``): the same layers score each of the three views, so the graph reshapes
  ``[batch, 729]`` to ``[batch, 3, 243]``, applies the chain and gives ``[batch, 3]`` logits;
* SB3's default ``MlpPolicy`` of ``PPO`` or ``MaskablePPO`` (the ``match-slots`` encoding of
  ``ButtonUp-v1``, ``slots`` of ``ButtonUp-v0``, or a view encoding of its ``RingObservation``
  wrapper): the chain
  ``mlp_extractor.policy_net`` then ``action_net`` gives ``[batch, 9]`` (or ``[batch, 3]``)
  logits. SB3 computes the same: features extractor, ``policy_net``, ``action_net``; the
  mask is not part of the graph (the player applies it, see :mod:`buttonup_env.players.policy`).

Anything else (another features extractor, a recurrent policy, other layers) is refused with a
``ValueError`` saying what is supported.

The graph is written directly with ``onnx.helper`` from the weights: exact, and milliseconds
instead of seconds, so that training can snapshot its opponents often.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from stable_baselines3.common.torch_layers import FlattenExtractor, MlpExtractor
from torch import nn

from ..game.encoding import (
    ENCODINGS,
    MAX_LEGAL,
    AfterstateEncoding,
    MatchAfterstateEncoding,
    MatchSlotEncoding,
    RingEncoding,
    SlotEncoding,
)
from ..game.files import write_atomically
from ..players.onnx_graph import GraphRefused, NotOnnx, check_structure, read_model
from ..players.policy import (
    FORMAT_VERSION,
    INPUT_NAME,
    META_ENCODING,
    META_VERSION,
    OUTPUT_NAME,
    Encoding,
)
from .nets import RingPolicy

_ACTIVATIONS = {nn.ReLU: "Relu", nn.Tanh: "Tanh"}
OPSET = 17


def _chain(modules: list[nn.Module]) -> list[tuple[str, Any]]:
    """Flatten modules into ("linear", (W, b)) and ("act", op) steps."""
    steps: list[tuple[str, Any]] = []
    for module in modules:
        for layer in module.modules() if isinstance(module, nn.Sequential) else [module]:
            if isinstance(layer, nn.Sequential):
                continue
            if isinstance(layer, nn.Linear):
                weight = layer.weight.detach().cpu().numpy().astype(np.float32)
                bias = layer.bias.detach().cpu().numpy().astype(np.float32)
                steps.append(("linear", (weight.T.copy(), bias)))
            elif type(layer) in _ACTIVATIONS:
                steps.append(("act", _ACTIVATIONS[type(layer)]))
            elif isinstance(layer, nn.Identity | nn.Flatten):
                continue
            else:
                raise ValueError(
                    f"cannot export a policy layer of type {type(layer).__name__}; supported: "
                    "Linear, ReLU, Tanh"
                )
    return steps


SUPPORTED_POLICIES = (
    f"RingPolicy ({RingEncoding.size}, {AfterstateEncoding.size} or "
    f"{MatchAfterstateEncoding.size} observations) and SB3's MlpPolicy on ButtonUp-v1 "
    f"({MatchSlotEncoding.size}), ButtonUp-v0 ({SlotEncoding.size}) or RingObservation "
    f"({RingEncoding.size} or {AfterstateEncoding.size}), with Linear, ReLU and Tanh layers"
)
"""What :func:`export_onnx` can write."""


def _actor(policy: Any) -> tuple[Encoding, list[tuple[str, Any]], bool]:
    """(encoding, layer chain, whether the chain runs per view) of a policy."""
    size = policy.observation_space.shape[0]
    extractor = getattr(policy, "pi_features_extractor", None) or policy.features_extractor
    if type(extractor) is not FlattenExtractor:
        raise ValueError(
            f"cannot export a policy whose features extractor is {type(extractor).__name__}; "
            f"supported: SB3's default FlattenExtractor in {SUPPORTED_POLICIES}"
        )
    if isinstance(policy, RingPolicy):
        extractor = policy.mlp_extractor
        matching = [e for e in ENCODINGS.values() if e.size == size and e.actions == MAX_LEGAL]
        if not matching:
            raise ValueError(f"no view encoding has observations of size {size}")
        steps = _chain([extractor.actor_body, extractor.actor_score])
        bound = extractor.logit_bound
        if bound is not None:
            steps += [("scale", 1.0 / bound), ("act", "Tanh"), ("scale", bound)]
        return matching[0], steps, True
    encoding = next((e for e in ENCODINGS.values() if e.size == size), None)
    action_net = getattr(policy, "action_net", None)
    if (
        encoding is not None
        and type(getattr(policy, "mlp_extractor", None)) is MlpExtractor
        and isinstance(action_net, nn.Linear)
        and action_net.out_features == encoding.actions
    ):
        return encoding, _chain([policy.mlp_extractor.policy_net, action_net]), False
    actions = action_net.out_features if isinstance(action_net, nn.Linear) else "?"
    raise ValueError(
        f"cannot export {type(policy).__name__} with observations of size {size} and {actions} "
        f"actions: supported are {SUPPORTED_POLICIES}"
    )


def actor_to_onnx(policy: Any, metadata: Mapping[str, object] | None = None) -> onnx.ModelProto:
    """The ONNX model of ``policy``'s actor (observations to action logits)."""
    encoding, steps, per_view = _actor(policy)
    nodes, initializers = [], []
    current = INPUT_NAME
    if per_view:
        view_size = policy.observation_space.shape[0] // MAX_LEGAL
        shape = numpy_helper.from_array(
            np.array([-1, MAX_LEGAL, view_size], np.int64), "views_shape"
        )
        initializers.append(shape)
        nodes.append(helper.make_node("Reshape", [current, "views_shape"], ["views"]))
        current = "views"
    for i, (kind, value) in enumerate(steps):
        if kind == "linear":
            weight, bias = value
            initializers += [
                numpy_helper.from_array(weight, f"W{i}"),
                numpy_helper.from_array(bias, f"b{i}"),
            ]
            nodes.append(helper.make_node("MatMul", [current, f"W{i}"], [f"mm{i}"]))
            nodes.append(helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"h{i}"]))
        elif kind == "scale":
            initializers.append(numpy_helper.from_array(np.array(value, np.float32), f"s{i}"))
            nodes.append(helper.make_node("Mul", [current, f"s{i}"], [f"h{i}"]))
        else:
            nodes.append(helper.make_node(value, [current], [f"h{i}"]))
        current = f"h{i}"
    actions = encoding.actions
    out_shape = numpy_helper.from_array(np.array([-1, actions], np.int64), "logits_shape")
    initializers.append(out_shape)
    nodes.append(helper.make_node("Reshape", [current, "logits_shape"], [OUTPUT_NAME]))
    size = policy.observation_space.shape[0]
    graph = helper.make_graph(
        nodes,
        "buttonup_policy",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["batch", size])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", actions])],
        initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="buttonup-env"
    )
    model.ir_version = 8
    props = {META_ENCODING: encoding.name, META_VERSION: FORMAT_VERSION}
    props.update({str(k): str(v) for k, v in (metadata or {}).items()})
    helper.set_model_props(model, props)
    onnx.checker.check_model(model)
    return model


def _weights_in(name: str, data: bytes, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The float weights of the ONNX file ``data`` (called ``name`` in errors), checked to be a
    snapshot of the network ``model`` is the actor of: the same nodes, encoding and weights,
    each of the same shape. ``ValueError`` naming the file otherwise."""
    try:
        graph = read_model(data)
        check_structure(graph, INPUT_NAME)
    except (NotOnnx, GraphRefused) as error:
        raise ValueError(f"{name} cannot be averaged in: it is refused ({error})") from None
    ours = [(n.op_type, list(n.input), list(n.output)) for n in model.graph.node]
    theirs = [(n.op_type, n.inputs, n.outputs) for n in graph.nodes]
    encoding = {p.key: p.value for p in model.metadata_props}[META_ENCODING]
    own = {w.name: numpy_helper.to_array(w) for w in model.graph.initializer}
    if (
        ours != theirs
        or graph.metadata.get(META_ENCODING) != encoding
        or set(graph.weights) != set(own)
    ):
        raise ValueError(
            f"{name} cannot be averaged in: its network is not this policy's (another "
            "encoding, other layers or other weights)"
        )
    found = {}
    for key, mine in own.items():
        weight = graph.weights[key]
        if mine.dtype == np.int64:  # a Reshape's shape: the same in every snapshot
            if weight.values() != mine.tolist():
                raise ValueError(f"{name} cannot be averaged in: its shape {key!r} differs")
            continue
        if (
            weight.data_type != TensorProto.FLOAT
            or weight.dims != mine.shape
            or len(weight.raw) != mine.nbytes
        ):
            raise ValueError(
                f"{name} cannot be averaged in: its weight {key!r} is not {mine.nbytes // 4:,} "
                f"float32 numbers of shape {list(mine.shape)} held as raw data, as this policy's"
            )
        values = np.frombuffer(weight.raw, "<f4").reshape(mine.shape)
        if not np.isfinite(values).all():
            raise ValueError(f"{name} cannot be averaged in: its weight {key!r} is not finite")
        found[key] = values
    return found


def averaged_actor(
    policy: Any,
    snapshots: Mapping[str, bytes],
    metadata: Mapping[str, object] | None = None,
) -> onnx.ModelProto:
    """The ONNX model of ``policy``'s actor (:func:`actor_to_onnx`) with each weight the mean
    of its own and of the same weight in each of ``snapshots`` (ONNX files by name, written by
    :func:`export_onnx` for earlier weights of the same network): stochastic weight averaging
    (Izmailov et al., "Averaging Weights Leads to Wider Optima and Better Generalization",
    2018). ``ValueError`` naming a snapshot of another network, or one that
    :mod:`buttonup_env.players.onnx_graph` refuses."""
    model = actor_to_onnx(policy, metadata)
    weights = {w.name: numpy_helper.to_array(w) for w in model.graph.initializer}
    sums = {k: v.astype(np.float64) for k, v in weights.items() if v.dtype == np.float32}
    for name, data in snapshots.items():
        for key, values in _weights_in(name, data, model).items():
            sums[key] += values
    for weight in model.graph.initializer:
        if weight.name in sums:
            mean = (sums[weight.name] / (1 + len(snapshots))).astype(np.float32)
            weight.CopyFrom(numpy_helper.from_array(mean, weight.name))
    return model


def check_exportable(policy: Any) -> str:
    """The encoding name of ``policy``'s ONNX file; ``ValueError`` saying what is supported
    when it cannot be exported (without writing anything)."""
    return _actor(policy)[0].name


def export_onnx(
    policy: Any,
    path: str | Path,
    metadata: Mapping[str, object] | None = None,
    average_with: Mapping[str, bytes] | None = None,
) -> Path:
    """Write ``policy``'s actor to ``path``, whose folder must exist, atomically: through a
    temporary file of a fresh name beside it, renamed onto it
    (:func:`~buttonup_env.game.files.write_atomically`), so a partial file never appears and
    a link planted at ``path`` is replaced, never written through. With ``average_with``
    (snapshots of the same network, by name), its weights averaged with theirs
    (:func:`averaged_actor`)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give the path of the .onnx file to write")
    model = averaged_actor(policy, average_with or {}, metadata)
    return write_atomically(path, model.SerializeToString())
