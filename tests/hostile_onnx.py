"""Hostile ONNX files for the tests, built here: the tricks of issue 50 against the loader's
reading of a file (a second graph, names that are not UTF-8, ...) and policies that run for
ever once past the loader's checks (which :data:`BYPASS` removes, as a hole in them would).

Nothing here is run by onnxruntime unless a test asks for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from buttonup_env.game.encoding import SlotEncoding
from buttonup_env.game.rules import LAYOUTS, State
from buttonup_env.players.policy import META_ENCODING, META_VERSION, OnnxPolicy

SIZE, ACTIONS = SlotEncoding.size, SlotEncoding.actions

HEIGHT_1 = [27 * s + 3 * h + c for s in range(9) for h in range(1, 9) for c in range(3)]
"""The slots encoding's features of buttons above the bottom of their stack: none is set in a
round's first position (where the loader tries a policy), some are later."""


def weight(name: str, values: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def model(
    nodes: list[onnx.NodeProto],
    initializers: list[onnx.TensorProto],
    outputs: tuple[str, ...] = ("logits",),
) -> onnx.ModelProto:
    """A slots-encoding policy model of these nodes (metadata, ``obs`` [batch, 246], the
    outputs [batch, 9]); not checked by ``onnx``."""
    graph = helper.make_graph(
        nodes,
        "hostile",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", SIZE])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["batch", ACTIONS]) for o in outputs],
        initializers,
    )
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    made.ir_version = 8
    helper.set_model_props(made, {META_ENCODING: "slots", META_VERSION: "1"})
    return made


def plain() -> onnx.ModelProto:
    """A policy the loader takes: ``logits = obs @ W``."""
    return model([helper.make_node("MatMul", ["obs", "W"], ["logits"])], [linear()])


def linear(name: str = "W") -> onnx.TensorProto:
    return weight(name, np.full((SIZE, ACTIONS), 0.01))


def graph_only(nodes: list[onnx.NodeProto], initializers: list[onnx.TensorProto], output: str):
    """A model of nothing but a graph: what protobuf merges into the graph of the model
    whose bytes follow it."""
    graph = helper.make_graph(
        nodes, "", [], [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)]
    )
    graph.ClearField("name")
    graph.initializer.extend(initializers)
    return onnx.ModelProto(graph=graph)


def expand_prefix(numbers: int = 400_000_000) -> bytes:
    """A graph-only model whose one node expands one float to ``numbers`` (1.6 GB), from
    weights alone: onnxruntime computes it as it loads (constant folding)."""
    nodes = [helper.make_node("Expand", ["one", "count"], ["big"])]
    initializers = [weight("one", [1.0]), weight("count", [numbers], np.int64)]
    return graph_only(nodes, initializers, "big").SerializeToString()


def spin_body() -> onnx.GraphProto:
    """A Loop body that changes nothing: its condition and its value go through."""
    return helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["x_in"], ["x_out"]),
        ],
        "spin",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", TensorProto.FLOAT, None),
        ],
    )


def loop_prefix() -> bytes:
    """A graph-only model with a Loop of 2^62 turns over the input."""
    nodes = [helper.make_node("Loop", ["turns", "yes", "obs"], ["spun"], body=spin_body())]
    initializers = [weight("turns", 1 << 62, np.int64), weight("yes", True, np.bool_)]
    return graph_only(nodes, initializers, "spun").SerializeToString()


def later_loop(turns: float = float(1 << 40)) -> onnx.ModelProto:
    """A policy whose logits go through a Loop of ``turns`` turns for each button above the
    bottom of a stack: none on the loader's two trial positions, for ever (2^40 turns) once a
    button is stacked. It uses operators off the list, so it loads only past :data:`BYPASS`."""
    mask = np.zeros(SIZE, np.float32)
    mask[HEIGHT_1] = 1.0
    return counted_loop(mask, turns)


def after_trial(turns: float = float(1 << 40)) -> onnx.ModelProto:
    """A policy that spins for ever (a Loop of 2^40 turns for each feature set) on every
    position but the loader's two trial positions: the features it counts are those that are
    0 in both. It uses operators off the list, so it loads only past :data:`BYPASS`."""
    encoding = SlotEncoding()
    trials = [encoding.encode(s, s.to_move) for s in OnnxPolicy.PROBE_STATES]
    mask = ((trials[0] == 0) & (trials[1] == 0)).astype(np.float32)
    return counted_loop(mask, turns)


def counted_loop(mask: np.ndarray, turns: float) -> onnx.ModelProto:
    """Logits through a Loop of ``turns`` turns for each feature of ``mask`` that is set."""
    nodes = [
        helper.make_node("MatMul", ["obs", "W"], ["h"]),
        helper.make_node("Mul", ["obs", "mask"], ["stacked"]),
        helper.make_node("ReduceSum", ["stacked"], ["count"], keepdims=0),
        helper.make_node("Mul", ["count", "far"], ["many"]),
        helper.make_node("Cast", ["many"], ["turns"], to=TensorProto.INT64),
        helper.make_node("Loop", ["turns", "yes", "h"], ["logits"], body=spin_body()),
    ]
    initializers = [linear(), weight("mask", mask), weight("far", turns), weight("yes", True, bool)]
    return model(nodes, initializers)


def endless_loop() -> onnx.ModelProto:
    """A policy whose every call spins for ever (a Loop whose condition stays true)."""
    nodes = [
        helper.make_node("MatMul", ["obs", "W"], ["h"]),
        helper.make_node("Loop", ["", "yes", "h"], ["logits"], body=spin_body()),
    ]
    return model(nodes, [linear(), weight("yes", True, np.bool_)])


def save(made: onnx.ModelProto | bytes, path: Path) -> Path:
    path.write_bytes(made if isinstance(made, bytes) else made.SerializeToString())
    return path


def stacked_position() -> State:
    """A position with buttons stacked: after five moves of a round."""
    state = State.new_round(LAYOUTS[100], "R")
    for _ in range(5):
        state = state.play(state.legal_moves()[0])
    return state


BYPASS = """
import buttonup_env.players.policy as _policy
_policy.check_structure = lambda *args: None
_policy.check_sizes = lambda *args: None
_policy._PolicyPlayer.seconds = {seconds}
"""
"""Python that removes the loader's graph checks (as a hole in them would) and sets the time
limit of a policy's call, for a command run in a subprocess: ``python -c BYPASS + ...``."""


def byte_names(made: onnx.ModelProto, names: dict[str, bytes]) -> bytes:
    """``made``'s bytes with each placeholder name of ``names`` (of the same length) replaced
    by its bytes, which need not be UTF-8."""
    data = made.SerializeToString()
    for placeholder, raw in names.items():
        assert len(placeholder.encode()) == len(raw) and data.count(placeholder.encode()) >= 1
        data = data.replace(placeholder.encode(), raw)
    return data


def two_names_as_one(side: int = 16384) -> bytes:
    """A chain that a reader decoding names lossily takes for a policy: ``Relu(obs)`` writes
    ``b"\\xffQQQQ"`` and a MatMul reads ``b"\\xfeQQQQ"``, one name (``"\\ufffdQQQQ"``) to it;
    to onnxruntime the MatMul multiplies two weights, ``side`` x 1 by 1 x ``side`` (a GiB for
    16,384), which it computes as it loads. 128 KiB of weights."""
    nodes = [
        helper.make_node("Relu", ["obs"], ["AQQQQ"]),
        helper.make_node("MatMul", ["BQQQQ", "row"], ["big"]),
        helper.make_node("Reshape", ["big", "rows"], ["x"]),
        helper.make_node("MatMul", ["x", "out"], ["logits"]),
    ]
    initializers = [
        weight("BQQQQ", np.ones((side, 1))),
        weight("row", np.ones((1, side))),
        weight("rows", [-1, 256], np.int64),
        weight("out", np.ones((256, ACTIONS))),
    ]
    return byte_names(model(nodes, initializers), {"AQQQQ": b"\xffQQQQ", "BQQQQ": b"\xfeQQQQ"})
