"""What an ONNX policy file may hold, checked before onnxruntime sees it.

An exported policy is a chain of a few operators (:data:`OPERATORS`: what
:mod:`buttonup_env.learn.onnx_writer` writes, for a run's checkpoint and for an SB3 ``.zip``
alike). A file from someone else could hold anything ONNX can say: a ``Loop`` that never ends,
a ``ConstantOfShape`` of 8 GiB, weights read from another file on the disk (external data).
So the file's bytes are read here, without the ``onnx`` package (the ``policy`` extra is
onnxruntime and numpy only), the way onnxruntime's protobuf parser reads them: a field that
is not a list must appear once (protobuf merges a second ``graph`` into the first, so a
reader that keeps one would check another graph than the one that runs), names must be strict
UTF-8 (onnxruntime tells names apart by their bytes), and a field ONNX does not define is
refused rather than skipped. Then the file is refused unless:

* every node is one of :data:`OPERATORS`, in the default domain, with no attribute but
  ``Reshape``'s ``allowzero`` (so no tensor or graph hides in an attribute), and no local
  functions, training information or sparse weights come with the model;
* every weight (initializer) holds its numbers in the file (no external data), as many as
  its shape says, of a type of a fixed size, and no two weights have one name;
* every node works on the output of the one before it (exactly one input that is not a
  weight), so nothing is computed from weights alone (which onnxruntime would do once, at
  load, whatever its size) and every tensor grows with the batch only linearly; every node
  writes one tensor of a new name, and no weight has the input's name;
* a ``Reshape``'s target shape is a weight of whole numbers.

:func:`check_sizes` then follows the shapes through the graph, with the number of positions
in the batch as the only unknown, and refuses a graph whose tensors or work for one position
exceed :data:`MAX_ELEMENTS` and :data:`MAX_WORK`, or whose output is not ``[batch, actions]``:
a file cannot make the player slow or large by its shapes either. The loader runs every check
before onnxruntime is given the file.
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
#
# The file is read as onnxruntime's protobuf parser reads it, or refused where the two could
# differ. Protobuf merges a field that a message gives twice (a second ``graph`` is merged into
# the first, a second name replaces the first), so every field that is not a list must appear
# once; names are bytes to onnxruntime, so they must be strict UTF-8 (two byte strings are then
# never one name here); a field ONNX does not define is refused rather than skipped.

_INT, _INT32, _FLOAT32, _FLOAT64, _TEXT, _BYTES, _MESSAGE = (
    "int",
    "int32",
    "float32",
    "float64",
    "text",
    "bytes",
    "message",
)
"""The kinds of field: a whole number (``int64``, or ``int32`` and enums), a fixed-width float,
a name or other text (strict UTF-8), bytes, a message. A kind in a tuple, ``(kind, cap)``, is
a repeated field (a list, which protobuf concatenates, and for numbers packed or not) of at
most ``cap`` entries, or, for a cap of None, a weight's numbers: those are counted, and only
the first :data:`_KEPT` are kept, so that reading a file takes no more memory than the file."""

_KEPT = 16
"""How many of a weight's numbers in a typed field are read (a ``Reshape``'s target shape is
read from them: it has at most this many dimensions)."""

_FEW, _SOME, _MANY = 16, 1000, 3 * 1000
"""Caps of lists: of a node's inputs, outputs and attributes, of a shape's dimensions, ...
(16); of metadata entries (1,000); of a graph's weights (3,000: an exported policy has two a
layer and a few shapes)."""

_SCHEMAS: dict[str, dict[int, tuple[str, str | tuple[str, int | None]]]] = {
    # every field of onnx.proto (ONNX 1.18) of the messages a policy file is read through
    "model": {
        1: ("ir_version", _INT),
        2: ("producer_name", _TEXT),
        3: ("producer_version", _TEXT),
        4: ("domain", _TEXT),
        5: ("model_version", _INT),
        6: ("doc_string", _TEXT),
        7: ("graph", _MESSAGE),
        8: ("opset_import", (_MESSAGE, _FEW)),
        14: ("metadata_props", (_MESSAGE, _SOME)),
        20: ("training_info", (_MESSAGE, _FEW)),
        25: ("functions", (_MESSAGE, _FEW)),
        26: ("configuration", (_MESSAGE, _FEW)),
    },
    "graph": {
        1: ("node", (_MESSAGE, MAX_NODES)),
        2: ("name", _TEXT),
        5: ("initializer", (_MESSAGE, _MANY)),
        10: ("doc_string", _TEXT),
        11: ("input", (_MESSAGE, _FEW)),
        12: ("output", (_MESSAGE, _FEW)),
        13: ("value_info", (_MESSAGE, _FEW)),
        14: ("quantization_annotation", (_MESSAGE, _FEW)),
        15: ("sparse_initializer", (_MESSAGE, _FEW)),
        16: ("metadata_props", (_MESSAGE, _SOME)),
    },
    "node": {
        1: ("input", (_TEXT, _FEW)),
        2: ("output", (_TEXT, _FEW)),
        3: ("name", _TEXT),
        4: ("op_type", _TEXT),
        5: ("attribute", (_MESSAGE, _FEW)),
        6: ("doc_string", _TEXT),
        7: ("domain", _TEXT),
        8: ("overload", _TEXT),
        9: ("metadata_props", (_MESSAGE, _SOME)),
        10: ("device_configurations", (_MESSAGE, _FEW)),
    },
    "attribute": {
        1: ("name", _TEXT),
        2: ("f", _FLOAT32),
        3: ("i", _INT),
        4: ("s", _BYTES),
        5: ("t", _MESSAGE),
        6: ("g", _MESSAGE),
        7: ("floats", (_FLOAT32, _FEW)),
        8: ("ints", (_INT, _FEW)),
        9: ("strings", (_BYTES, _FEW)),
        10: ("tensors", (_MESSAGE, _FEW)),
        11: ("graphs", (_MESSAGE, _FEW)),
        13: ("doc_string", _TEXT),
        14: ("tp", _MESSAGE),
        15: ("type_protos", (_MESSAGE, _FEW)),
        20: ("type", _INT32),
        21: ("ref_attr_name", _TEXT),
        22: ("sparse_tensor", _MESSAGE),
        23: ("sparse_tensors", (_MESSAGE, _FEW)),
    },
    "weight": {  # TensorProto
        1: ("dims", (_INT, _FEW)),
        2: ("data_type", _INT32),
        3: ("segment", _MESSAGE),
        4: ("float_data", (_FLOAT32, None)),
        5: ("int32_data", (_INT32, None)),
        6: ("string_data", (_BYTES, _FEW)),
        7: ("int64_data", (_INT, None)),
        8: ("name", _TEXT),
        9: ("raw_data", _BYTES),
        10: ("double_data", (_FLOAT64, None)),
        11: ("uint64_data", (_INT, None)),
        12: ("doc_string", _TEXT),
        13: ("external_data", (_MESSAGE, _FEW)),
        14: ("data_location", _INT32),
        16: ("metadata_props", (_MESSAGE, _SOME)),
    },
    "value": {  # ValueInfoProto: a graph's input or output
        1: ("name", _TEXT),
        2: ("type", _MESSAGE),
        3: ("doc_string", _TEXT),
        4: ("metadata_props", (_MESSAGE, _SOME)),
    },
    "type": {  # TypeProto: one of its kinds (a oneof), and a denotation
        1: ("tensor_type", _MESSAGE),
        4: ("sequence_type", _MESSAGE),
        5: ("map_type", _MESSAGE),
        6: ("denotation", _TEXT),
        7: ("opaque_type", _MESSAGE),
        8: ("sparse_tensor_type", _MESSAGE),
        9: ("optional_type", _MESSAGE),
    },
    "tensor type": {1: ("elem_type", _INT32), 2: ("shape", _MESSAGE)},
    "shape": {1: ("dim", (_MESSAGE, _FEW))},
    "dimension": {1: ("dim_value", _INT), 2: ("dim_param", _TEXT), 3: ("denotation", _TEXT)},
    "operator set": {1: ("domain", _TEXT), 2: ("version", _INT)},
    "entry": {1: ("key", _TEXT), 2: ("value", _TEXT)},  # StringStringEntryProto
}

_ONEOFS = {"type": {1, 4, 5, 7, 8, 9}, "dimension": {1, 2}}
"""Fields of which a message holds one: protobuf keeps the last one given, so two are
refused."""

_WIRES = {_INT: 0, _INT32: 0, _FLOAT32: 5, _FLOAT64: 1, _TEXT: 2, _BYTES: 2, _MESSAGE: 2}
_NUMBERS = (_INT, _INT32, _FLOAT32, _FLOAT64)

Value = int | float | str | memoryview


class Fields(dict[str, list[Value]]):
    """A message's fields by name, each a list of values (one for a field that is not a
    list); for a weight's numbers only the first ``_KEPT``, with how many there are in
    ``counts``."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}


_ENDS = bytes(range(128))
"""The bytes that end a varint."""


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
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


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _number(kind: str, value: int, what: str) -> int:
    """A varint as protobuf reads a field of ``kind``: int64 two's complement, and an int32
    or enum refused when out of its range (protobuf would cut it to 32 bits)."""
    value = _signed(value)
    if kind == _INT32 and not -(1 << 31) <= value < 1 << 31:
        raise GraphRefused(f"{what} is {value:,}, which does not fit the field's 32 bits")
    return value


def _packed(kind: str, data: memoryview, what: str, first: int) -> tuple[int, list[Value]]:
    """How many numbers a packed repeated field holds, and the first ``first`` of them (so
    that a million numbers are counted, not made into a million Python objects)."""
    if kind in (_FLOAT32, _FLOAT64):
        size, code = (4, "<f") if kind == _FLOAT32 else (8, "<d")
        if len(data) % size:
            raise NotOnnx(f"{what} holds a cut-off number")
        kept = min(first, len(data) // size)
        return len(data) // size, list(struct.unpack_from(f"<{kept}{code[1]}", data))
    if data and data[-1] & 0x80:
        raise NotOnnx(f"{what} holds a cut-off number")
    count = 0
    for start in range(0, len(data), 1 << 20):  # in pieces: no copy of the whole field
        piece = bytes(data[start : start + (1 << 20)])
        count += len(piece) - len(piece.translate(None, _ENDS))
    out: list[Value] = []
    pos = 0
    while pos < len(data) and len(out) < first:
        value, pos = _varint(data, pos)
        out.append(_number(kind, value, what))
    return count, out


def _text(value: memoryview, what: str) -> str:
    try:
        return str(value, "utf-8")
    except UnicodeDecodeError:
        raw = bytes(value[:40])
        raise GraphRefused(
            f"{what} is not UTF-8 text ({raw!r}); onnxruntime tells names apart by their bytes, "
            "so a policy's names are strict UTF-8"
        ) from None


def _field(data: memoryview, pos: int) -> tuple[int, int, int | memoryview, int]:
    """The field that starts at ``pos``: its number, its wire type, its value (a varint's
    number, else its bytes) and where the next field starts; :class:`NotOnnx` for bytes that
    are not one."""
    key, pos = _varint(data, pos)
    number, wire = key >> 3, key & 7
    if number == 0:
        raise NotOnnx("a field has the number 0")
    if wire == 0:
        value, pos = _varint(data, pos)
        return number, wire, value, pos
    if wire in (1, 5):
        size = 8 if wire == 1 else 4
        if pos + size > len(data):
            raise NotOnnx("a number is cut off")
        return number, wire, data[pos : pos + size], pos + size
    if wire == 2:
        length, pos = _varint(data, pos)
        if pos + length > len(data):
            raise NotOnnx("a field is longer than what is left of the file")
        return number, wire, data[pos : pos + length], pos + length
    raise NotOnnx(f"a field has the wire type {wire}, which ONNX does not use")


def _read(data: memoryview, message: str, where: str) -> Fields:
    """The fields of one protobuf message of the kind ``message`` (a key of
    :data:`_SCHEMAS`), by name: each a list of values (one for a field that is not a list).

    Raises :class:`NotOnnx` for bytes that are not a protobuf message, and
    :class:`GraphRefused` for a field that onnxruntime would read otherwise than this reader:
    one it does not define here, one given with another wire type (protobuf would skip it),
    a field that is not a list given twice (protobuf would merge or replace it), two fields
    of a oneof, text that is not UTF-8. ``where`` names the message in those sentences."""
    schema = _SCHEMAS[message]
    fields = Fields()
    oneof: str | None = None
    pos = 0
    while pos < len(data):
        number, wire, value, pos = _field(data, pos)
        if number not in schema:
            raise GraphRefused(
                f"{where} holds a field numbered {number}, which ONNX does not define there"
            )
        name, kind = schema[number]
        what = f"the {name} of {where}"
        repeated = isinstance(kind, tuple)
        base, cap = kind if isinstance(kind, tuple) else (kind, 1)
        values = fields.setdefault(name, [])
        if values and not repeated:
            raise GraphRefused(
                f"{where} gives its {name} twice, which protobuf (and so onnxruntime) would "
                "merge into one; a policy file gives each field once"
            )
        if number in _ONEOFS.get(message, ()):
            if oneof is not None and oneof != name:
                raise GraphRefused(
                    f"{where} gives both {oneof} and {name}, of which it holds one (protobuf "
                    "keeps the last)"
                )
            oneof = name
        if repeated and base in _NUMBERS and wire == 2:
            assert isinstance(value, memoryview)
            count, first = _packed(base, value, what, _KEPT - len(values) if cap is None else cap)
            _count(fields, name, count, cap, where)
            values += first
            continue
        if repeated:
            _count(fields, name, 1, cap, where)
            if cap is None and len(values) >= _KEPT:  # a field each, a step of this loop each
                raise GraphRefused(
                    f"{what} holds more than {_KEPT} numbers one by one; a weight's numbers are "
                    "packed, as ONNX's writers pack them"
                )
        if wire != _WIRES[base]:
            raise GraphRefused(
                f"{what} has the wire type {wire}, not its own ({_WIRES[base]}); protobuf "
                "would skip it"
            )
        if base in (_INT, _INT32):
            assert isinstance(value, int)
            values.append(_number(base, value, what))
        elif base in (_FLOAT32, _FLOAT64):
            assert isinstance(value, memoryview)
            values.append(struct.unpack("<f" if base == _FLOAT32 else "<d", value)[0])
        elif base == _TEXT:
            assert isinstance(value, memoryview)
            values.append(_text(value, what))
        else:
            assert isinstance(value, memoryview)
            values.append(value)
    return fields


def _count(fields: Fields, name: str, more: int, cap: int | None, where: str) -> None:
    """Count ``more`` entries of the list ``name``; :class:`GraphRefused` beyond ``cap``."""
    count = fields.counts[name] = fields.counts.get(name, 0) + more
    if cap is not None and count > cap:
        raise GraphRefused(
            f"{where} gives more than {cap:,} {name}; a policy file holds at most that many"
        )


def _one(fields: Fields, name: str, default: Value) -> Value:
    values = fields.get(name)
    return values[0] if values else default


def _messages(fields: Fields, name: str) -> list[memoryview]:
    return [v for v in fields.get(name, ()) if isinstance(v, memoryview)]


def _texts(fields: Fields, name: str) -> list[str]:
    return [v for v in fields.get(name, ()) if isinstance(v, str)]


def _ints(fields: Fields, name: str) -> list[int]:
    return [v for v in fields.get(name, ()) if isinstance(v, int)]


# --- the model ------------------------------------------------------------------------------------

ELEMENT_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}
"""The bytes of one number of each element type a weight may have (``TensorProto.DataType``:
float, uint8, int8, uint16, int16, int32, int64, bool, float16, double, uint32, uint64,
bfloat16); strings, complex numbers and the types of less than a byte are not a policy's."""

ELEMENT_NAMES = {
    1: "float",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    8: "string",
    9: "bool",
    10: "float16",
    11: "double",
    12: "uint32",
    13: "uint64",
    16: "bfloat16",
}
"""How onnxruntime names the element types (``tensor(float)``)."""

_TYPED_FIELDS = {
    # where a weight of each element type may keep its numbers instead of raw_data
    "float_data": (1,),
    "int32_data": (2, 3, 4, 5, 6, 9, 10, 16),
    "int64_data": (7,),
    "double_data": (11,),
    "uint64_data": (12, 13),
}


@dataclass
class Weight:
    """An initializer: its name, shape, element type and where its numbers are."""

    name: str
    dims: tuple[int, ...]
    data_type: int
    external: bool
    int64s: list[int] = field(default_factory=list)
    raw: memoryview | bytes = b""
    stored: dict[str, int] = field(default_factory=dict)
    """How many numbers each of its data fields holds (``raw_data``: in bytes), for the
    fields it uses; ``string_data`` and ``segment`` among them for a weight that is refused."""

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
    extras: list[str] = field(default_factory=list)
    """What the node holds beyond operator, inputs, outputs and attributes: an overload, a
    device configuration, an attribute given twice."""


@dataclass(frozen=True)
class Argument:
    """A graph's input or output as declared in the file, in onnxruntime's words
    (``NodeArg``): its name, its type (``tensor(float)``) and shape (a dimension is a whole
    number, a name such as ``batch``, or None)."""

    name: str
    type: str
    shape: list[int | str | None]


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
    arguments: tuple[list[Argument], list[Argument]] = ([], [])
    """The graph's inputs and outputs with their declared types and shapes."""
    repeated: list[str] = field(default_factory=list)
    """Names that the file gives to two things of one kind (two weights, two metadata keys,
    two operator sets of one domain): onnxruntime would keep one of them, this check the
    other."""


def _weight(data: memoryview, where: str) -> Weight:
    fields = _read(data, "weight", where)
    name = str(_one(fields, "name", ""))
    external = bool(fields.get("external_data")) or _one(fields, "data_location", 0) == 1
    stored: dict[str, int] = {}
    raw = _messages(fields, "raw_data")
    if raw:
        stored["raw_data"] = len(raw[0])
    for key in (*_TYPED_FIELDS, "string_data", "segment"):
        if fields.get(key):
            stored[key] = fields.counts.get(key, len(fields[key]))
    return Weight(
        name,
        tuple(_ints(fields, "dims")),
        int(_one(fields, "data_type", 0)),
        external,
        _ints(fields, "int64_data"),
        raw[0] if raw else b"",
        stored,
    )


def _attribute(data: memoryview, where: str) -> tuple[str, int | None]:
    """An attribute's name and its value when it is a plain INT (else None)."""
    fields = _read(data, "attribute", where)
    kind = _one(fields, "type", 2)  # 2: INT
    plain = set(fields) <= {"name", "i", "type", "doc_string"} and "i" in fields
    integer = _one(fields, "i", 0)
    value = integer if plain and kind == 2 and isinstance(integer, int) else None
    return str(_one(fields, "name", "")), value


def _node(data: memoryview, number: int) -> Node:
    where = f"node {number}"
    fields = _read(data, "node", where)
    attributes: dict[str, int | None] = {}
    extras = [
        {"overload": "a function overload", "device_configurations": "device configurations"}[key]
        for key in ("overload", "device_configurations")
        if key in fields
    ]
    for entry in _messages(fields, "attribute"):
        name, integer = _attribute(entry, f"an attribute of {where}")
        if name in attributes:
            extras.append(f"the attribute {name!r} twice")
        attributes[name] = integer
    return Node(
        str(_one(fields, "op_type", "")),
        str(_one(fields, "domain", "")),
        _texts(fields, "input"),
        _texts(fields, "output"),
        attributes,
        extras,
    )


def _argument(data: memoryview, where: str) -> Argument:
    """A graph input or output (ValueInfoProto) as onnxruntime's ``NodeArg`` shows it."""
    fields = _read(data, "value", where)
    name = str(_one(fields, "name", ""))
    kind, shape = "not a tensor", []
    types = _messages(fields, "type")
    if types:
        described = _read(types[0], "type", f"the type of {where}")
        tensor = _messages(described, "tensor_type")
        if tensor:
            parts = _read(tensor[0], "tensor type", f"the type of {where}")
            element = int(_one(parts, "elem_type", 0))
            kind = f"tensor({ELEMENT_NAMES.get(element, f'type {element}')})"
            for shape_data in _messages(parts, "shape"):
                for dim in _messages(_read(shape_data, "shape", f"the shape of {where}"), "dim"):
                    size = _read(dim, "dimension", f"a dimension of {where}")
                    value = _one(size, "dim_value", "")
                    param = _one(size, "dim_param", "")
                    shape.append(value if isinstance(value, int) else str(param) or None)
    return Argument(name, kind, shape)


def _entries(fields: Fields, name: str, where: str, repeated: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for data in _messages(fields, name):
        entry = _read(data, "entry", where)
        key = str(_one(entry, "key", ""))
        if key in out:
            repeated.append(f"the metadata key {key!r}")
        out[key] = str(_one(entry, "value", ""))
    return out


def read_model(data: bytes | memoryview) -> PolicyGraph:
    """The parts of an ONNX model (the bytes of a ``.onnx`` file) that a policy is checked by,
    read as onnxruntime's parser reads them (see the module docstring; no copy of the weights
    is made).

    Raises :class:`NotOnnx` when the bytes are not a protobuf message with a graph, and
    :class:`GraphRefused` for a file that onnxruntime might read otherwise (a field given
    twice, a name that is not UTF-8, a field ONNX does not define).
    """
    model = _read(memoryview(data), "model", "the model")
    repeated: list[str] = []
    extras = [
        what
        for key, what in (
            ("training_info", "training information"),
            ("functions", "local functions"),
            ("configuration", "device configurations"),
        )
        if key in model
    ]
    opsets: dict[str, int] = {}
    for entry in _messages(model, "opset_import"):
        opset = _read(entry, "operator set", "an operator set it imports")
        domain = str(_one(opset, "domain", ""))
        if domain in opsets or (domain in _DEFAULT_DOMAINS and set(opsets) & set(_DEFAULT_DOMAINS)):
            repeated.append(f"the operator set {domain!r}")
        opsets[domain] = int(_one(opset, "version", 0))
    metadata = _entries(model, "metadata_props", "its metadata", repeated)
    graphs = _messages(model, "graph")
    if not graphs:
        raise NotOnnx("there is no graph in it")
    graph = _read(graphs[0], "graph", "its graph")
    for key, what in (
        ("sparse_initializer", "sparse weights"),
        ("value_info", "types of inner tensors (value_info)"),
        ("quantization_annotation", "quantization annotations"),
    ):
        if key in graph:
            extras.append(what)
    _entries(graph, "metadata_props", "its graph's metadata", [])
    node_data = _messages(graph, "node")  # at most MAX_NODES (the schema's cap)
    nodes = [_node(entry, number) for number, entry in enumerate(node_data, start=1)]
    weights: dict[str, Weight] = {}
    for number, entry in enumerate(_messages(graph, "initializer"), start=1):
        weight = _weight(entry, f"weight {number}")
        if weight.name in weights:
            repeated.append(f"the weight {weight.name!r}")
        weights[weight.name] = weight
    inputs = [_argument(e, f"input {n}") for n, e in enumerate(_messages(graph, "input"), 1)]
    outputs = [_argument(e, f"output {n}") for n, e in enumerate(_messages(graph, "output"), 1)]
    return PolicyGraph(
        metadata,
        opsets,
        nodes,
        weights,
        [a.name for a in inputs],
        [a.name for a in outputs],
        extras,
        (inputs, outputs),
        repeated,
    )


_ARITY = {"MatMul": 2, "Add": 2, "Mul": 2, "Relu": 1, "Tanh": 1, "Reshape": 2}
"""How many inputs each operator of a policy takes."""


def _check_weight(weight: Weight) -> None:
    """Refuse a weight whose numbers are not all in the file, in one place, as many as its
    shape says (so that onnxruntime holds no more of it than the file does)."""
    if weight.external:
        raise GraphRefused(
            f"its weight {weight.name!r} is external data (kept in another file); a policy "
            "holds all of its weights in its own file"
        )
    size = ELEMENT_BYTES.get(weight.data_type)
    if size is None:
        kind = ELEMENT_NAMES.get(weight.data_type, f"type {weight.data_type}")
        raise GraphRefused(
            f"its weight {weight.name!r} is of the type {kind}; a policy's weights are numbers "
            "of a fixed size (float, int64, ...)"
        )
    if any(not 0 <= d < 1 << 31 for d in weight.dims):
        raise GraphRefused(
            f"its weight {weight.name!r} has the shape {list(weight.dims)}; each dimension is "
            "a whole number from 0 to 2^31 - 1"
        )
    count = math.prod(weight.dims)
    typed = [k for k in weight.stored if k != "raw_data"]
    if len(weight.stored) > 1 or any(
        weight.data_type not in _TYPED_FIELDS.get(k, ()) for k in typed
    ):
        raise GraphRefused(
            f"its weight {weight.name!r} keeps its numbers in {' and '.join(weight.stored)}; a "
            "weight keeps them in raw_data or in the one field of its type"
        )
    if "raw_data" in weight.stored:
        found, expected = weight.stored["raw_data"], count * size
        unit = "bytes"
    else:
        found, expected = (weight.stored[typed[0]] if typed else 0), count
        unit = "numbers"
    if found != expected:
        raise GraphRefused(
            f"its weight {weight.name!r} of shape {list(weight.dims)} holds {found:,} {unit} "
            f"where its shape needs {expected:,}"
        )


def check_structure(graph: PolicyGraph, input_name: str) -> None:
    """Refuse (:class:`GraphRefused`) a graph that is not a chain of :data:`OPERATORS` over
    weights held in the file (see the module docstring)."""
    if graph.extras:
        raise GraphRefused(f"it holds {graph.extras[0]}, which an exported policy never has")
    if graph.repeated:
        raise GraphRefused(
            f"it gives {graph.repeated[0]} twice; onnxruntime might keep the one this check did "
            "not, so a name is given once"
        )
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
        _check_weight(weight)
    if input_name in graph.weights:
        raise GraphRefused(
            f"it has a weight named {input_name!r}, the name of its input; onnxruntime would "
            "compute from it at load"
        )
    varying = {input_name}
    for number, node in enumerate(graph.nodes, start=1):
        _check_node(graph, node, f"node {number} ({node.op_type or '?'})", input_name, varying)
        varying.add(node.outputs[0])


def _check_node(
    graph: PolicyGraph, node: Node, where: str, input_name: str, varying: set[str]
) -> None:
    """Refuse (:class:`GraphRefused`) ``node`` unless it is an allowed operator of one output,
    of a new name, that works on exactly one of the tensors ``varying`` (computed from the
    input ``input_name``) and on weights."""
    allowed = ", ".join(sorted(OPERATORS))
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
    if node.extras:
        raise GraphRefused(f"{where} holds {node.extras[0]}, which a policy's nodes never do")
    for name, value in node.attributes.items():
        if not (node.op_type == "Reshape" and name == "allowzero" and value is not None):
            raise GraphRefused(
                f"{where} has the attribute {name!r}; the operators of a policy have none "
                "but Reshape's allowzero (a whole number)"
            )
    if len(node.inputs) != _ARITY[node.op_type]:
        raise GraphRefused(
            f"{where} has {len(node.inputs)} inputs; a {node.op_type} has {_ARITY[node.op_type]}"
        )
    moving = [name for name in node.inputs if name in varying]
    unknown = [name for name in node.inputs if name not in varying and name not in graph.weights]
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
        shape = graph.weights[node.inputs[1]]
        if shape.data_type != _INT64 or len(shape.dims) != 1 or shape.dims[0] > _KEPT:
            raise GraphRefused(
                f"{where} reshapes to {shape.name!r}, not a list of at most {_KEPT} int64"
            )
    if len(node.outputs) != 1:
        raise GraphRefused(f"{where} has {len(node.outputs)} outputs; a {node.op_type} has one")
    output = node.outputs[0]
    if not output or output in varying or output in graph.weights:
        raise GraphRefused(
            f"{where} writes {output!r}, which is {'no name' if not output else 'taken'}; "
            "each node writes a tensor of a new name"
        )


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
