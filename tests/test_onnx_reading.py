"""The loader reads a policy file as onnxruntime reads it (issue 50): a field that protobuf
would merge or replace, a name that is not UTF-8, a field ONNX does not define, a weight whose
numbers are not what its shape says — each is refused in one sentence before onnxruntime sees
the file, and every check (the sizes too) runs before a session exists. The files are built
here, byte by byte where ``onnx`` would not write them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from hostile_onnx import (
    SIZE,
    expand_prefix,
    linear,
    loop_prefix,
    model,
    plain,
    two_names_as_one,
    weight,
)
from onnx import TensorProto, helper, numpy_helper

from buttonup_env.players.onnx_graph import GraphRefused, NotOnnx, read_model
from buttonup_env.players.policy import META_ENCODING, OnnxPolicy, load_policy
from buttonup_env.players.shipped import shipped_policy_path

SHIPPED = shipped_policy_path("buttonup-ppo")


# --- protobuf written by hand ------------------------------------------------------------------


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, value: bytes | str | int) -> bytes:
    """One protobuf field: a varint for an int, length-delimited for bytes and text."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(raw)) + raw


def with_graph(made: onnx.ModelProto, extra: bytes = b"", node_extra: bytes = b"") -> bytes:
    """``made``'s bytes with ``extra`` added to its graph and ``node_extra`` to its first node."""
    graph = onnx.GraphProto()
    graph.CopyFrom(made.graph)
    first = graph.node[0].SerializeToString() + node_extra
    del graph.node[0]
    rest = onnx.ModelProto()
    rest.CopyFrom(made)
    rest.ClearField("graph")
    return rest.SerializeToString() + field(7, field(1, first) + graph.SerializeToString() + extra)


def input_value(type_extra: bytes = b"", dim_extra: bytes = b"") -> bytes:
    """A graph input ``obs`` float [batch, 246] (ValueInfoProto), with more bytes in its type or
    in its first dimension."""
    batch = field(2, "batch") + dim_extra
    shape = field(1, batch) + field(1, field(1, SIZE))
    tensor = field(1, TensorProto.FLOAT) + field(2, shape)
    return field(1, "obs") + field(2, field(1, tensor)) + type_extra


def without_input(made: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(made)
    del copy.graph.input[:]
    return copy


def raw_weight(name: str, dims: list[int], extra: bytes = b"", raw: bytes | None = None) -> bytes:
    data = bytes(4 * int(np.prod(dims))) if raw is None else raw
    body = b"".join(field(1, d) for d in dims) + field(2, TensorProto.FLOAT) + field(8, name)
    return body + field(9, data) + extra


def metadata(key: str, value: str) -> bytes:
    return field(14, field(1, key) + field(2, value))


def chain(*nodes: onnx.NodeProto) -> onnx.ModelProto:
    return model(list(nodes), [linear()])


def attribute_twice() -> bytes:
    made = model(
        [
            helper.make_node("MatMul", ["obs", "W"], ["h"]),
            helper.make_node("Reshape", ["h", "shape"], ["logits"], allowzero=0),
        ],
        [linear(), weight("shape", [-1, 9], np.int64)],
    )
    made.graph.node[1].attribute.append(helper.make_attribute("allowzero", 1))
    return made.SerializeToString()


TRICKS: dict[str, tuple[Callable[[], bytes], str]] = {
    # name: (the file's bytes, what the sentence says)
    "a second graph before": (
        lambda: expand_prefix() + plain().SerializeToString(),
        "the model gives its graph twice, which protobuf (and so onnxruntime) would merge",
    ),
    "a second graph after": (
        lambda: plain().SerializeToString() + loop_prefix(),
        "the model gives its graph twice",
    ),
    "an operator given twice": (
        lambda: with_graph(plain(), node_extra=field(4, "Loop")),
        "node 1 gives its op_type twice",
    ),
    "a weight's type given twice": (
        lambda: with_graph(plain(), field(5, raw_weight("V", [1], field(2, 7)))),
        "weight 2 gives its data_type twice",
    ),
    "an input's type given twice": (
        lambda: with_graph(without_input(plain()), field(11, input_value(field(2, b"")))),
        "input 1 gives its type twice",
    ),
    "a dimension both a number and a name": (
        lambda: with_graph(without_input(plain()), field(11, input_value(dim_extra=field(1, 5)))),
        "a dimension of input 1 gives both dim_param and dim_value",
    ),
    "two weights of one name": (
        lambda: with_graph(plain(), field(5, raw_weight("W", [2, 9]))),
        "it gives the weight 'W' twice; onnxruntime might keep the one this check did not",
    ),
    "a metadata key twice": (
        lambda: plain().SerializeToString() + metadata(META_ENCODING, "ring"),
        f"it gives the metadata key {META_ENCODING!r} twice",
    ),
    "both names of the default operator set": (
        lambda: plain().SerializeToString() + field(8, field(1, "ai.onnx") + field(2, 17)),
        "it gives the operator set 'ai.onnx' twice",
    ),
    "a field ONNX does not define": (
        lambda: with_graph(plain(), field(99, b"")),
        "its graph holds a field numbered 99, which ONNX does not define there",
    ),
    "a field of another wire type": (
        lambda: plain().SerializeToString() + field(8, field(1, "") + field(2, b"\x11")),
        "the version of an operator set it imports has the wire type 2, not its own (0)",
    ),
    "a 32-bit field of 33 bits": (
        lambda: with_graph(
            plain(),
            field(5, field(1, 1) + field(2, (1 << 32) | 1) + field(8, "V") + field(9, bytes(4))),
        ),
        "the data_type of weight 2 is 4,294,967,297, which does not fit the field's 32 bits",
    ),
    "names that are not UTF-8": (
        two_names_as_one,
        "the output of node 1 is not UTF-8 text (b'\\xffQQQQ'); onnxruntime tells names apart "
        "by their bytes",
    ),
    "a weight shorter than its shape": (
        lambda: with_graph(plain(), field(5, raw_weight("V", [1 << 20, 9], raw=bytes(4)))),
        "its weight 'V' of shape [1048576, 9] holds 4 bytes where its shape needs 37,748,736",
    ),
    "a weight in two places": (
        lambda: with_graph(plain(), field(5, raw_weight("V", [1], field(4, bytes(4))))),
        "its weight 'V' keeps its numbers in raw_data and float_data",
    ),
    "a weight's numbers one by one": (
        lambda: with_graph(
            plain(),
            field(5, field(1, 17) + field(2, 1) + field(8, "V") + (b"\x25" + bytes(4)) * 17),
        ),
        "the float_data of weight 2 holds more than 16 numbers one by one",
    ),
    "a weight of strings": (
        lambda: with_graph(
            plain(), field(5, field(1, 1) + field(2, TensorProto.STRING) + field(8, "V"))
        ),
        "its weight 'V' is of the type string",
    ),
    "a weight named like the input": (
        lambda: with_graph(plain(), field(5, raw_weight("obs", [1, SIZE]))),
        "it has a weight named 'obs', the name of its input",
    ),
    "two nodes writing one name": (
        lambda: chain(
            helper.make_node("MatMul", ["obs", "W"], ["h"]),
            helper.make_node("Relu", ["h"], ["h"]),
            helper.make_node("Relu", ["h"], ["logits"]),
        ).SerializeToString(),
        "node 2 (Relu) writes 'h', which is taken",
    ),
    "a node of two outputs": (
        lambda: chain(
            helper.make_node("MatMul", ["obs", "W"], ["logits", "more"])
        ).SerializeToString(),
        "node 1 (MatMul) has 2 outputs; a MatMul has one",
    ),
    "types of inner tensors": (
        lambda: with_graph(plain(), field(13, field(1, "h"))),
        "it holds types of inner tensors (value_info), which an exported policy never has",
    ),
    "a node's overload": (
        lambda: with_graph(plain(), node_extra=field(8, "other")),
        "node 1 (MatMul) holds a function overload",
    ),
    "an attribute twice": (
        attribute_twice,
        "node 2 (Reshape) holds the attribute 'allowzero' twice",
    ),
}


@pytest.mark.parametrize("trick", list(TRICKS))
def test_a_file_onnxruntime_could_read_otherwise_is_refused_before_it_sees_it(
    trick: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxruntime

    make, says = TRICKS[trick]
    path = tmp_path / "trick.onnx"
    path.write_bytes(make())

    def no_session(*args: object, **kwargs: object) -> None:
        raise AssertionError("onnxruntime was given the file")

    monkeypatch.setattr(onnxruntime, "InferenceSession", no_session)
    start = time.monotonic()
    with pytest.raises(ValueError) as error:
        load_policy(path)
    message = str(error.value)
    assert message.startswith(f"{path} is refused: ") and "\n" not in message, message
    assert says in message, message
    assert time.monotonic() - start < 5


def test_the_files_it_takes_read_as_onnx_reads_them(tmp_path: Path) -> None:
    """The reader agrees with ``onnx`` on the shipped policy and on a made one."""
    for data in (SHIPPED.read_bytes(), plain().SerializeToString()):
        graph, parsed = read_model(data), onnx.load_from_string(data)
        assert [n.op_type for n in graph.nodes] == [n.op_type for n in parsed.graph.node]
        assert [n.inputs for n in graph.nodes] == [list(n.input) for n in parsed.graph.node]
        assert sorted(graph.weights) == sorted(w.name for w in parsed.graph.initializer)
        assert graph.metadata == {p.key: p.value for p in parsed.metadata_props}
        (inputs, outputs) = graph.arguments
        assert [a.name for a in inputs] == ["obs"] and [a.name for a in outputs] == ["logits"]


@pytest.mark.parametrize("data", [b"\x3a", b"\x0f\x01", b"\x00\x01", b"\x3a\x05ab"])
def test_bytes_that_are_not_protobuf_are_not_onnx(data: bytes) -> None:
    with pytest.raises((NotOnnx, GraphRefused)):
        read_model(data)


def test_the_sizes_are_checked_before_a_session_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain of allowed operators that is 8 GiB wide is refused by its sizes, and
    onnxruntime is never given it (it would have folded what it could at load)."""
    import onnxruntime

    made = model(
        [
            helper.make_node("Reshape", ["obs", "column"], ["x"]),
            helper.make_node("Add", ["x", "row"], ["wide"]),
            helper.make_node("Reshape", ["wide", "back"], ["y"]),
            helper.make_node("MatMul", ["y", "W"], ["logits"]),
        ],
        [
            weight("column", [-1, 1], np.int64),
            weight("row", np.zeros((1, 1 << 20))),
            weight("back", [-1, SIZE], np.int64),
            linear(),
        ],
    )
    path = tmp_path / "wide.onnx"
    path.write_bytes(made.SerializeToString())
    sessions: list[object] = []
    monkeypatch.setattr(onnxruntime, "InferenceSession", lambda *a, **k: sessions.append(a))
    with pytest.raises(ValueError, match="makes 257,949,696 numbers for each position"):
        OnnxPolicy(path)
    assert sessions == []


MEASURE = """
import json, resource, sys, time
import onnxruntime
from buttonup_env.players.policy import load_policy
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.monotonic()
try:
    load_policy(sys.argv[1])
    said = ""
except ValueError as error:
    said = str(error)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
seconds = time.monotonic() - start
print(json.dumps({"grown": (peak - base) * 1024, "seconds": seconds, "said": said}))
"""


def measure(path: Path) -> dict[str, object]:
    """What loading ``path`` costs in a fresh process: the growth of its peak memory (bytes),
    the seconds, and the refusal's sentence (empty when it loaded)."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def attribute_of_many_ints() -> bytes:
    """A node whose attribute holds ten million whole numbers, packed (10 MB)."""
    numbers = field(8, b"\x01" * 10_000_000)
    return with_graph(plain(), node_extra=field(5, field(1, "extra") + numbers + field(20, 7)))


@pytest.mark.parametrize(
    "make",
    [
        lambda: expand_prefix() + SHIPPED.read_bytes(),
        lambda: loop_prefix() + SHIPPED.read_bytes(),
        two_names_as_one,
        lambda: with_graph(plain(), field(5, b"") * 2_000_000),
        attribute_of_many_ints,
    ],
    ids=[
        "expand before the shipped policy",
        "loop before the shipped policy",
        "one name of two",
        "two million empty weights",
        "ten million numbers in an attribute",
    ],
)
def test_the_tricks_of_the_probe_cost_neither_time_nor_memory(
    make: Callable[[], bytes], tmp_path: Path
) -> None:
    """Before: 1.66 GB and 3.5 s (the Expand), a hang (the Loop: 2^62 turns), 3.2 GB and
    10.6 s (a GiB MatMul of two weights), each from a file of 140 to 193 KB. The reader's
    lists are capped and a weight's numbers counted, not read: two million empty weights
    (4 MB) and ten million numbers (10 MB) are no more Python objects than a few."""
    path = tmp_path / "trick.onnx"
    path.write_bytes(make())
    cost = measure(path)
    assert str(cost["said"]).startswith(f"{path} is refused: "), cost
    assert cost["grown"] < 40 << 20, cost  # type: ignore[operator]
    assert cost["seconds"] < 5, cost  # type: ignore[operator]


@pytest.mark.parametrize(  # raw_data is what the exporter writes; float_data checked slow
    "where", ["raw_data", pytest.param("float_data", marks=pytest.mark.slow)]
)
def test_loading_takes_a_small_multiple_of_the_file_s_size(where: str, tmp_path: Path) -> None:
    """A policy of 4.7 million weights (19 MB), their numbers in ``raw_data`` (as the
    exporter writes them) or in ``float_data``: the loader's memory grows by at most three
    times the file (its bytes, onnxruntime's reading and its weights) and onnxruntime's own
    few tens of MB."""
    width = 2048
    rng = np.random.default_rng(0)
    made = model(
        [
            helper.make_node("MatMul", ["obs", "W0"], ["a"]),
            helper.make_node("Relu", ["a"], ["b"]),
            helper.make_node("MatMul", ["b", "W1"], ["c"]),
            helper.make_node("Relu", ["c"], ["d"]),
            helper.make_node("MatMul", ["d", "W2"], ["logits"]),
        ],
        [
            weight("W0", rng.normal(size=(SIZE, width)) * 0.01),
            weight("W1", rng.normal(size=(width, width)) * 0.01),
            weight("W2", rng.normal(size=(width, 9)) * 0.01),
        ],
    )
    if where == "float_data":
        for tensor in made.graph.initializer:
            values = numpy_helper.to_array(tensor).ravel()
            tensor.ClearField("raw_data")
            tensor.float_data.extend(values.tolist())
    path = tmp_path / "wide.onnx"
    path.write_bytes(made.SerializeToString())
    cost = measure(path)
    assert cost["said"] == "", cost
    assert cost["grown"] < 3 * path.stat().st_size + (40 << 20), cost  # type: ignore[operator]
