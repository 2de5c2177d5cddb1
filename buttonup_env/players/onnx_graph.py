"""What an ONNX policy file may hold, checked before onnxruntime sees it.

An exported policy is a chain of a few operators (:data:`OPERATORS`: what
:mod:`buttonup_env.learn.onnx_writer` writes, for a run's checkpoint and for an SB3 ``.zip``
alike). A file from someone else could hold anything ONNX can say: a ``Loop`` that never ends,
a ``ConstantOfShape`` of 8 GiB, weights read from another file on the disk (external data).
So the file's bytes are read here, without the ``onnx`` package (the ``policy`` extra is
onnxruntime and numpy only), and refused unless:

* every node is one of :data:`OPERATORS`, in the default domain, with no attribute but
  ``Reshape``'s ``allowzero`` (so no tensor or graph hides in an attribute), and no local
  functions, training information or sparse weights come with the model;
* every weight (initializer) holds its numbers in the file: no external data;
* every node works on the output of the one before it (exactly one input that is not a
  weight), so nothing is computed from weights alone (which onnxruntime would do once, at
  load, whatever its size) and every tensor grows with the batch only linearly;
* a ``Reshape``'s target shape is a weight of whole numbers.

:func:`check_sizes` then follows the shapes through the graph, with the number of positions
in the batch as the only unknown, and refuses a graph whose tensors or work for one position
exceed :data:`MAX_ELEMENTS` and :data:`MAX_WORK`, or whose output is not ``[batch, actions]``:
a file cannot make the player slow or large by its shapes either.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

OPERATORS = frozenset({"MatMul", "Add", "Mul", "Relu", "Tanh", "Reshape"})
"""The operators a policy may use: those :mod:`buttonup_env.learn.onnx_writer` writes
(``Reshape`` for the views and the logits, ``MatMul`` and ``Add`` for each linear layer,
``Relu`` or ``Tanh`` between them, ``Mul`` and ``Tanh`` for a bounded logit)."""

MAX_POLICY_BYTES = 256 << 20
"""The largest policy file read (256 MiB: 50 million float32 weights, the largest network a
training run may ask for, with room to spare)."""

MAX_NODES = 1000
"""The most nodes a policy's graph may have (an exported one has three a layer)."""

MAX_ELEMENTS = 1 << 16
"""The most numbers any tensor of the graph may hold for one position of the batch (65,536:
the widest layer of a 50-million-weight network has about 7,000)."""

MAX_WORK = 1 << 27
"""The most multiply-adds (and other element operations) the graph may do for one position
(134 million: a 50-million-weight network does about 50 million)."""

_FLOAT, _INT64 = 1, 7
"""ONNX's element types (``TensorProto.DataType``) that a policy's weights use."""

_DEFAULT_DOMAINS = ("", "ai.onnx")


class GraphRefused(ValueError):
    """The file is not a policy graph this package runs; the message says why (without the
    file's name, which the caller adds)."""


class NotOnnx(ValueError):
    """The bytes are not an ONNX model (not a protobuf message, or one without a graph)."""


# --- protobuf, the little of it that ONNX files need -------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise NotOnnx("a number is cut off or too long")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of a protobuf message: an int for
    numbers (the 32- and 64-bit ones as their raw bits), bytes for length-delimited fields."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise NotOnnx("a field has the number 0")
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == 1 or wire == 5:
            size = 8 if wire == 1 else 4
            if pos + size > len(data):
                raise NotOnnx("a number is cut off")
            yield number, wire, int.from_bytes(data[pos : pos + size], "little")
            pos += size
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise NotOnnx("a field is longer than what is left of the file")
            yield number, wire, data[pos : pos + length]
            pos += length
        else:
            raise NotOnnx(f"a field has the wire type {wire}, which ONNX does not use")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _ints(wire: int, value: int | bytes) -> list[int]:
    """A repeated int64 field's values, packed (bytes) or not (one int)."""
    if isinstance(value, int):
        return [_signed(value)]
    out, pos = [], 0
    while pos < len(value):
        number, pos = _varint(value, pos)
        out.append(_signed(number))
    return out


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise NotOnnx("a text field holds a number")
    return value.decode("utf-8", errors="replace")


def _message(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise NotOnnx("a message field holds a number")
    return value


# --- the model ------------------------------------------------------------------------------------


@dataclass
class Weight:
    """An initializer: its name, shape, element type and where its numbers are."""

    name: str
    dims: tuple[int, ...]
    data_type: int
    external: bool
    int64s: list[int] = field(default_factory=list)
    raw: bytes = b""

    def values(self) -> list[int]:
        """The whole numbers of an int64 weight (a ``Reshape``'s shape)."""
        if self.raw:
            if len(self.raw) % 8:
                raise GraphRefused(f"the weight {self.name!r} has a cut-off int64")
            return [v for (v,) in struct.iter_unpack("<q", self.raw)]
        return list(self.int64s)


@dataclass
class Node:
    """A node: its operator and domain, inputs, outputs and attribute names."""

    op_type: str
    domain: str
    inputs: list[str]
    outputs: list[str]
    attributes: dict[str, int | None]
    """Each attribute's name and its INT value (None for any other kind of attribute)."""


@dataclass
class PolicyGraph:
    """What :func:`read_model` found in a policy file."""

    metadata: dict[str, str]
    opsets: dict[str, int]
    nodes: list[Node]
    weights: dict[str, Weight]
    inputs: list[str]
    outputs: list[str]
    extras: list[str]
    """What the model holds beyond a plain graph: local functions, training information,
    sparse weights."""


def _weight(data: bytes) -> Weight:
    name, dims, data_type, external = "", [], 0, False
    int64s: list[int] = []
    raw = b""
    for number, wire, value in _fields(data):
        if number == 1:
            dims += _ints(wire, value)
        elif number == 2 and isinstance(value, int):
            data_type = value
        elif number == 7:
            int64s += _ints(wire, value)
        elif number == 8:
            name = _text(value)
        elif number == 9:
            raw = _message(value)
        elif number == 13 or (number == 14 and value == 1):  # external_data, data_location
            external = True
    return Weight(name, tuple(dims), data_type, external, int64s, raw)


def _attribute(data: bytes) -> tuple[str, int | None]:
    """An attribute's name and its value when it is a plain INT (else None)."""
    name, kind, integer, other = "", None, None, False
    for number, _, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 20 and isinstance(value, int):
            kind = value
        elif number == 3 and isinstance(value, int):
            integer = _signed(value)
        elif number != 13:  # anything but an int and a doc string
            other = True
    return name, integer if kind in (None, 2) and not other else None


def _node(data: bytes) -> Node:
    op_type, domain = "", ""
    inputs: list[str] = []
    outputs: list[str] = []
    attributes: dict[str, int | None] = {}
    for number, _, value in _fields(data):
        if number == 1:
            inputs.append(_text(value))
        elif number == 2:
            outputs.append(_text(value))
        elif number == 4:
            op_type = _text(value)
        elif number == 7:
            domain = _text(value)
        elif number == 5:
            name, integer = _attribute(_message(value))
            attributes[name] = integer
    return Node(op_type, domain, inputs, outputs, attributes)


def _value_name(data: bytes) -> str:
    return next((_text(v) for n, _, v in _fields(data) if n == 1), "")


def read_model(data: bytes) -> PolicyGraph:
    """The parts of an ONNX model (the bytes of a ``.onnx`` file) that a policy is checked by.

    Raises :class:`NotOnnx` when the bytes are not a protobuf message with a graph.
    """
    metadata: dict[str, str] = {}
    opsets: dict[str, int] = {}
    graph: bytes | None = None
    extras: list[str] = []
    for number, _, value in _fields(data):
        if number == 7:
            graph = _message(value)
        elif number == 8:
            domain, version = "", 0
            for n, _, v in _fields(_message(value)):
                if n == 1:
                    domain = _text(v)
                elif n == 2 and isinstance(v, int):
                    version = v
            opsets[domain] = version
        elif number == 14:
            entry = {n: _text(v) for n, _, v in _fields(_message(value))}
            metadata[entry.get(1, "")] = entry.get(2, "")
        elif number == 20:
            extras.append("training information")
        elif number == 25:
            extras.append("local functions")
    if graph is None:
        raise NotOnnx("there is no graph in it")
    nodes: list[Node] = []
    weights: dict[str, Weight] = {}
    inputs: list[str] = []
    outputs: list[str] = []
    for number, _, value in _fields(graph):
        if number == 1:
            if len(nodes) >= MAX_NODES:
                raise GraphRefused(
                    f"its graph has more than {MAX_NODES:,} nodes; an exported policy has three "
                    "a layer"
                )
            nodes.append(_node(_message(value)))
        elif number == 5:
            weight = _weight(_message(value))
            weights[weight.name] = weight
        elif number == 11:
            inputs.append(_value_name(_message(value)))
        elif number == 12:
            outputs.append(_value_name(_message(value)))
        elif number == 15:
            extras.append("sparse weights")
    return PolicyGraph(metadata, opsets, nodes, weights, inputs, outputs, extras)


def check_structure(graph: PolicyGraph, input_name: str) -> None:
    """Refuse (:class:`GraphRefused`) a graph that is not a chain of :data:`OPERATORS` over
    weights held in the file (see the module docstring)."""
    if graph.extras:
        raise GraphRefused(f"it holds {graph.extras[0]}, which an exported policy never has")
    for domain, version in graph.opsets.items():
        if domain not in _DEFAULT_DOMAINS:
            raise GraphRefused(
                f"it imports the operator set {domain!r}; a policy uses ONNX's default set only"
            )
        if version < 13:
            raise GraphRefused(
                f"it uses ONNX operator set {version}; a policy uses operator set 13 or later"
            )
    for weight in graph.weights.values():
        if weight.external:
            raise GraphRefused(
                f"its weight {weight.name!r} is external data (kept in another file); a policy "
                "holds all of its weights in its own file"
            )
    allowed = ", ".join(sorted(OPERATORS))
    varying = {input_name}
    for number, node in enumerate(graph.nodes, start=1):
        where = f"node {number} ({node.op_type or '?'})"
        if node.domain not in _DEFAULT_DOMAINS:
            raise GraphRefused(
                f"{where} is an operator of the domain {node.domain!r}; a policy uses only "
                f"{allowed} of ONNX's default domain"
            )
        if node.op_type not in OPERATORS:
            raise GraphRefused(
                f"it uses the operator {node.op_type!r}, which a policy does not use (allowed: "
                f"{allowed})"
            )
        for name, value in node.attributes.items():
            if not (node.op_type == "Reshape" and name == "allowzero" and value is not None):
                raise GraphRefused(
                    f"{where} has the attribute {name!r}; the operators of a policy have none "
                    "but Reshape's allowzero (a whole number)"
                )
        moving = [name for name in node.inputs if name in varying]
        unknown = [
            name for name in node.inputs if name not in varying and name not in graph.weights
        ]
        if unknown:
            raise GraphRefused(
                f"{where} reads {unknown[0]!r}, which is neither the input {input_name!r}, a "
                "weight, nor the output of an earlier node"
            )
        if len(moving) != 1 or (node.op_type == "Reshape" and node.inputs[0] not in varying):
            raise GraphRefused(
                f"{where} takes {len(moving)} inputs computed from {input_name!r}; each node of a "
                "policy works on the output of the one before it (and weights)"
            )
        if node.op_type == "Reshape":
            if len(node.inputs) != 2:
                raise GraphRefused(f"{where} has {len(node.inputs)} inputs; a Reshape has two")
            shape = graph.weights[node.inputs[1]]
            if shape.data_type != _INT64 or len(shape.dims) != 1:
                raise GraphRefused(f"{where} reshapes to {shape.name!r}, not a list of int64")
        varying.update(node.outputs)


# --- shapes -----------------------------------------------------------------------------------


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcast of two shapes; ``ValueError`` when they do not broadcast."""
    out = []
    for x, y in zip((1,) * (len(b) - len(a)) + a, (1,) * (len(a) - len(b)) + b, strict=True):
        if x != y and 1 not in (x, y):
            raise ValueError(f"the shapes {list(a)} and {list(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def _matmul(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """numpy's ``matmul`` shape of ``a @ b`` and its multiply-adds."""
    if not a or not b:
        raise ValueError("MatMul needs tensors of one dimension or more")
    left = (1, *a) if len(a) == 1 else a
    right = (*b, 1) if len(b) == 1 else b
    if left[-1] != right[-2]:
        raise ValueError(f"the shapes {list(a)} and {list(b)} cannot be multiplied")
    batch = _broadcast(left[:-2], right[:-2])
    out = (*batch, left[-2], right[-1])
    work = math.prod(out) * left[-1]
    if len(a) == 1:
        out = (*out[:-2], out[-1])
    if len(b) == 1:
        out = out[:-1]
    return out, work


def _reshape(shape: tuple[int, ...], target: list[int], allowzero: bool) -> tuple[int, ...]:
    """ONNX's ``Reshape`` of ``shape`` to ``target`` (0 copies a dimension unless
    ``allowzero``, -1 is what is left)."""
    out = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= len(shape):
                raise ValueError(f"the 0 at {i} of {target} has no dimension to copy")
            out.append(shape[i])
        elif d < -1:
            raise ValueError(f"{target} is not a shape")
        else:
            out.append(d)
    if out.count(-1) > 1:
        raise ValueError(f"{target} has more than one -1")
    total = math.prod(shape)
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or total % known:
            raise ValueError(f"{list(shape)} cannot be reshaped to {target}")
        out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise ValueError(f"{list(shape)} cannot be reshaped to {target}")
    return tuple(out)


def _shapes(
    graph: PolicyGraph, input_name: str, size: int, batch: int
) -> Iterator[tuple[int, Node, tuple[int, ...], int]]:
    """(number, node, output shape, work) of each node for a batch of ``batch`` positions."""
    shapes: dict[str, tuple[int, ...]] = {input_name: (batch, size)}
    for number, node in enumerate(graph.nodes, start=1):

        def shape_of(name: str) -> tuple[int, ...]:
            return shapes[name] if name in shapes else graph.weights[name].dims

        ins = [shape_of(name) for name in node.inputs]
        try:
            if node.op_type == "Reshape":
                target = graph.weights[node.inputs[1]].values()
                out = _reshape(ins[0], target, bool(node.attributes.get("allowzero")))
                work = 0
            elif node.op_type == "MatMul":
                out, work = _matmul(ins[0], ins[1])
            elif node.op_type in ("Add", "Mul"):
                out = _broadcast(ins[0], ins[1])
                work = math.prod(out)
            else:  # Relu, Tanh
                out = ins[0]
                work = math.prod(out)
        except (ValueError, IndexError) as error:
            raise GraphRefused(
                f"it fails for a batch of {batch} position{'s' if batch > 1 else ''}: node "
                f"{number} ({node.op_type}): {error}"
            ) from None
        for name in node.outputs:
            shapes[name] = out
        yield number, node, out, work


def check_sizes(
    graph: PolicyGraph, input_name: str, output_name: str, size: int, actions: int
) -> None:
    """Refuse (:class:`GraphRefused`) a graph (already through :func:`check_structure`) that
    does not give ``[batch, actions]`` logits for ``[batch, size]`` observations, or whose
    tensors or work for one position are larger than :data:`MAX_ELEMENTS` and
    :data:`MAX_WORK`. The shapes are followed for batches of one and two positions: every
    tensor grows linearly with the batch (each node works on one computed input), so the
    figures of one position hold for every batch."""
    for batch in (1, 2):
        total = 0
        outputs: dict[str, tuple[int, ...]] = {}
        for number, node, out, work in _shapes(graph, input_name, size, batch):
            count = math.prod(out)
            if count > MAX_ELEMENTS * batch:
                raise GraphRefused(
                    f"node {number} ({node.op_type}) makes {count // batch:,} numbers for each "
                    f"position (shape {list(out)} for {batch}); a policy's tensors hold at most "
                    f"{MAX_ELEMENTS:,}"
                )
            total += work
            if total > MAX_WORK * batch:
                raise GraphRefused(
                    f"its nodes up to node {number} ({node.op_type}) do more than "
                    f"{MAX_WORK:,} operations for each position; a policy does at most that"
                )
            outputs.update(dict.fromkeys(node.outputs, out))
        found = outputs.get(output_name)
        if found != (batch, actions):
            shown = list(found) if found is not None else "nothing"
            raise GraphRefused(
                f"it computes {output_name!r} of shape {shown} for {batch} "
                f"position{'s' if batch > 1 else ''}; a policy gives [{batch}, {actions}]"
            )
