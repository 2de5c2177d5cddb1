"""Policy files made by someone else: every hostile ONNX file is refused before onnxruntime
runs it, in one sentence naming the file and what is wrong, and a policy that loads is
checked on every call, so that it never plays an illegal slot.

The files are built here with ``onnx.helper``; none is run by onnxruntime unless the test
says so (an endless ``Loop`` would hang the test, an 8 GiB ``ConstantOfShape`` fill it)."""

from __future__ import annotations

import io
import os
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from commands import run
from hostile_onnx import spin_body
from onnx import TensorProto, helper, numpy_helper

from buttonup_env.game.encoding import SlotEncoding
from buttonup_env.game.rules import LAYOUTS, State
from buttonup_env.players.evaluation import evaluate
from buttonup_env.players.onnx_graph import MAX_ELEMENTS, MAX_WORK
from buttonup_env.players.policy import (
    META_ENCODING,
    META_VERSION,
    OnnxPolicy,
    PolicyError,
    load_policy,
)
from buttonup_env.ui import play

ROOT = Path(__file__).resolve().parent.parent
SIZE, ACTIONS = SlotEncoding.size, SlotEncoding.actions
ALLOWED = "allowed: Add, MatMul, Mul, Relu, Reshape, Tanh"


def weight(name: str, values: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def write_policy(
    path: Path,
    nodes: list[onnx.NodeProto],
    initializers: list[onnx.TensorProto],
    *,
    output: str = "logits",
    actions: int = ACTIONS,
    model_hook: Any = None,
) -> Path:
    """A slots-encoding policy file (metadata, input ``obs`` [batch, 246], output ``logits``
    [batch, actions]) of these nodes; not checked by ``onnx`` (hostile graphs are often not
    valid ONNX)."""
    graph = helper.make_graph(
        nodes,
        "hostile",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", SIZE])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", actions])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    helper.set_model_props(model, {META_ENCODING: "slots", META_VERSION: "1"})
    if model_hook is not None:
        model_hook(model)
    onnx.save(model, path)
    return path


def linear(name: str = "W", scale: float = 0.01) -> onnx.TensorProto:
    return weight(name, np.full((SIZE, ACTIONS), scale))


def refusal(path: Path) -> str:
    with pytest.raises(ValueError) as error:
        load_policy(path)
    message = str(error.value)
    assert message.startswith(f"{path} ") and "\n" not in message, message
    return message


# --- operators off the list --------------------------------------------------------------------


def _endless_loop() -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """A Loop with no trip count whose condition stays true: it never ends."""
    nodes = [
        helper.make_node("MatMul", ["obs", "W"], ["h"]),
        helper.make_node("Loop", ["", "yes", "h"], ["logits"], body=spin_body()),
    ]
    return nodes, [linear(), weight("yes", True, np.bool_)]


def _huge_constant() -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """An 8 GiB ConstantOfShape (2^31 float32 zeros) added to the logits."""
    nodes = [
        helper.make_node("MatMul", ["obs", "W"], ["h"]),
        helper.make_node(
            "ConstantOfShape", ["shape"], ["zeros"], value=helper.make_tensor("v", 1, [1], [0.0])
        ),
        helper.make_node("Add", ["h", "zeros"], ["logits"]),
    ]
    return nodes, [linear(), weight("shape", [1 << 31], np.int64)]


def _one_node(op: str, **attributes: Any) -> Any:
    def make() -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        nodes = [
            helper.make_node("MatMul", ["obs", "W"], ["h"]),
            helper.make_node(op, ["h", "big"], ["logits"], **attributes),
        ]
        return nodes, [linear(), weight("big", [1 << 20, ACTIONS], np.int64)]

    return make


def _branches() -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    branch = helper.make_graph(
        [helper.make_node("Identity", ["h"], ["out"])],
        "branch",
        [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
    )
    nodes = [
        helper.make_node("MatMul", ["obs", "W"], ["h"]),
        helper.make_node("If", ["yes"], ["logits"], then_branch=branch, else_branch=branch),
    ]
    return nodes, [linear(), weight("yes", True, np.bool_)]


def _scan() -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    body = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "body",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    nodes = [
        helper.make_node("MatMul", ["obs", "W"], ["h"]),
        helper.make_node("Scan", ["h"], ["logits"], body=body, num_scan_inputs=1),
    ]
    return nodes, [linear()]


def _range() -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    nodes = [
        helper.make_node("Range", ["zero", "far", "one"], ["r"]),
        helper.make_node("MatMul", ["obs", "W"], ["h"]),
        helper.make_node("Add", ["h", "r"], ["logits"]),
    ]
    far = weight("far", float(1 << 31))
    return nodes, [linear(), weight("zero", 0.0), far, weight("one", 1.0)]


OFF_THE_LIST = {
    "Loop": _endless_loop,
    "Scan": _scan,
    "If": _branches,
    "ConstantOfShape": _huge_constant,
    "Expand": _one_node("Expand"),
    "Tile": _one_node("Tile"),
    "Range": _range,
    "Softmax": lambda: ([helper.make_node("Softmax", ["obs"], ["logits"])], []),
    "Gemm": lambda: ([helper.make_node("Gemm", ["obs", "W"], ["logits"])], [linear()]),
}


@pytest.mark.parametrize("op", list(OFF_THE_LIST))
def test_an_operator_off_the_list_is_refused_naming_it_and_the_file(
    op: str, tmp_path: Path
) -> None:
    nodes, initializers = OFF_THE_LIST[op]()
    path = write_policy(tmp_path / f"{op}.onnx", nodes, initializers)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    message = refusal(path)
    assert message == (
        f"{path} is refused: it uses the operator {op!r}, which a policy does not use ({ALLOWED})"
    )
    assert time.monotonic() - start < 5  # refused before anything runs: no hang
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 200_000, f"{grown} kB"  # ... and nothing allocated (8 GiB for the constant)


def test_an_8_gib_tensor_of_allowed_operators_is_refused_by_its_size(tmp_path: Path) -> None:
    """Not by luck of the probe's inputs: the shapes are followed through the graph. A
    Reshape to one number a row, broadcast against a row of 2^20: 246 x 2^20 numbers a
    position, 8 GiB for a batch of eight."""
    nodes = [
        helper.make_node("Reshape", ["obs", "column"], ["x"]),
        helper.make_node("Add", ["x", "row"], ["wide"]),
        helper.make_node("Reshape", ["wide", "back"], ["y"]),
        helper.make_node("MatMul", ["y", "W"], ["logits"]),
    ]
    initializers = [
        weight("column", [-1, 1], np.int64),
        weight("row", np.zeros((1, 1 << 20))),
        weight("back", [-1, SIZE], np.int64),
        linear(),
    ]
    path = write_policy(tmp_path / "wide.onnx", nodes, initializers)
    message = refusal(path)
    assert f"node 2 (Add) makes {SIZE << 20:,} numbers for each position" in message
    assert f"at most {MAX_ELEMENTS:,}" in message


def test_work_beyond_the_cap_is_refused(tmp_path: Path) -> None:
    """140 layers of 1,024 x 1,024 sharing one weight: 147 million multiply-adds a position
    in a 5 MB file."""
    nodes = [helper.make_node("MatMul", ["obs", "W0"], ["h0"])]
    for i in range(140):
        nodes.append(helper.make_node("MatMul", [f"h{i}", "square"], [f"h{i + 1}"]))
    nodes.append(helper.make_node("MatMul", ["h140", "out"], ["logits"]))
    initializers = [
        weight("W0", np.zeros((SIZE, 1024))),
        weight("square", np.zeros((1024, 1024))),
        weight("out", np.zeros((1024, ACTIONS))),
    ]
    message = refusal(write_policy(tmp_path / "deep.onnx", nodes, initializers))
    assert f"do more than {MAX_WORK:,} operations for each position" in message


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("two computed inputs", "node 2 (Mul) takes 2 inputs computed from 'obs'"),
        ("weights alone", "node 1 (Add) takes 0 inputs computed from 'obs'"),
        ("a computed shape", "node 2 (Reshape) takes 2 inputs computed from 'obs'"),
        ("an unknown tensor", "node 1 (MatMul) reads 'nowhere'"),
        ("another domain", "node 1 (MatMul) is an operator of the domain 'com.microsoft'"),
        ("an attribute", "node 1 (MatMul) has the attribute 'extra'"),
        ("a tensor attribute", "node 2 (Reshape) has the attribute 'allowzero'"),
        ("rows of logits", "it computes 'logits' of shape [2, 9] for 1 position"),
    ],
)
def test_a_graph_that_is_not_a_chain_of_the_exporter_is_refused(
    name: str, says: str, tmp_path: Path
) -> None:
    W = linear()
    graphs: dict[str, tuple[list[onnx.NodeProto], list[onnx.TensorProto]]] = {
        "two computed inputs": (
            [
                helper.make_node("MatMul", ["obs", "W"], ["h"]),
                helper.make_node("Mul", ["h", "h"], ["logits"]),
            ],
            [W],
        ),
        "weights alone": (  # what onnxruntime would compute once, at load, whatever its size
            [
                helper.make_node("Add", ["W", "W"], ["twice"]),
                helper.make_node("MatMul", ["obs", "twice"], ["logits"]),
            ],
            [W],
        ),
        "a computed shape": (
            [
                helper.make_node("MatMul", ["obs", "W"], ["h"]),
                helper.make_node("Reshape", ["h", "h"], ["logits"]),
            ],
            [W],
        ),
        "an unknown tensor": ([helper.make_node("MatMul", ["obs", "nowhere"], ["logits"])], []),
        "another domain": (
            [helper.make_node("MatMul", ["obs", "W"], ["logits"], domain="com.microsoft")],
            [W],
        ),
        "an attribute": ([helper.make_node("MatMul", ["obs", "W"], ["logits"], extra=1)], [W]),
        "a tensor attribute": (
            [
                helper.make_node("MatMul", ["obs", "W"], ["h"]),
                helper.make_node(
                    "Reshape",
                    ["h", "shape"],
                    ["logits"],
                    allowzero=helper.make_tensor("z", TensorProto.INT64, [1], [0]),
                ),
            ],
            [W, weight("shape", [-1, ACTIONS], np.int64)],
        ),
        "rows of logits": (  # says [batch, 9], computes two rows of 9 a position
            [
                helper.make_node("Reshape", ["obs", "sixths"], ["x"]),
                helper.make_node("MatMul", ["x", "W3"], ["y"]),
                helper.make_node("Reshape", ["y", "nines"], ["logits"]),
            ],
            [
                weight("sixths", [-1, SIZE // 6], np.int64),
                weight("W3", np.zeros((SIZE // 6, 3))),
                weight("nines", [-1, ACTIONS], np.int64),
            ],
        ),
    }
    nodes, initializers = graphs[name]
    message = refusal(write_policy(tmp_path / "graph.onnx", nodes, initializers))
    assert message.startswith(f"{tmp_path / 'graph.onnx'} is refused: ")
    assert says in message, message


# --- weights from elsewhere --------------------------------------------------------------------


def test_external_data_is_refused_even_where_it_would_read_etc_passwd(tmp_path: Path) -> None:
    secret = Path("/etc/passwd")
    if not secret.is_file():
        pytest.skip("needs /etc/passwd")
    (tmp_path / "weights.bin").symlink_to(secret)
    W = linear()
    W.ClearField("raw_data")
    W.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", str(SIZE * 9 * 4))):
        entry = W.external_data.add()
        entry.key, entry.value = key, value
    path = write_policy(
        tmp_path / "external.onnx", [helper.make_node("MatMul", ["obs", "W"], ["logits"])], [W]
    )
    message = refusal(path)
    assert message == (
        f"{path} is refused: its weight 'W' is external data (kept in another file); a policy "
        "holds all of its weights in its own file"
    )


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("local functions", "it holds local functions"),
        ("sparse weights", "it holds sparse weights"),
        ("an operator set", "it imports the operator set 'ai.onnx.ml'"),
    ],
)
def test_a_model_with_more_than_a_graph_is_refused(extra: str, says: str, tmp_path: Path) -> None:
    def hook(model: onnx.ModelProto) -> None:
        if extra == "local functions":
            model.functions.append(
                helper.make_function(
                    "local",
                    "twice",
                    ["x"],
                    ["y"],
                    [helper.make_node("Add", ["x", "x"], ["y"])],
                    [helper.make_opsetid("", 17)],
                )
            )
        elif extra == "sparse weights":
            values = weight("values", [1.0])
            indices = weight("indices", [0], np.int64)
            model.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [9]))
        else:
            model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))

    nodes = [helper.make_node("MatMul", ["obs", "W"], ["logits"])]
    path = write_policy(tmp_path / "extra.onnx", nodes, [linear()], model_hook=hook)
    assert says in refusal(path)


def test_onnxruntime_s_reason_is_kept_in_the_message(tmp_path: Path) -> None:
    """A file that passes the checks but that onnxruntime refuses (float64 weights for a
    float32 input): the sentence says why, not only "(Fail)"."""
    nodes = [helper.make_node("MatMul", ["obs", "W"], ["logits"])]
    path = write_policy(
        tmp_path / "double.onnx", nodes, [weight("W", np.zeros((SIZE, 9)), np.float64)]
    )
    message = refusal(path)
    assert "could not be read as ONNX (Fail: " in message and "Type" in message, message


@pytest.mark.parametrize("kind", ["device", "pipe", "too large"])
def test_a_policy_path_that_is_not_a_small_regular_file_is_refused(
    kind: str, tmp_path: Path
) -> None:
    if kind == "device":
        path = Path("/dev/zero")
        if not path.exists():
            pytest.skip("needs /dev/zero")
        says = "cannot be read (not a regular file (a device or a pipe))"
    elif kind == "pipe":
        path = tmp_path / "pipe.onnx"
        os.mkfifo(path)
        says = "cannot be read (not a regular file (a device or a pipe))"
    else:
        path = tmp_path / "huge.onnx"
        with open(path, "wb") as handle:
            handle.truncate((256 << 20) + 1)  # sparse: no disk used
        says = "is larger than 268,435,456 bytes"
    start = time.monotonic()
    assert says in refusal(path)
    assert time.monotonic() - start < 10


# --- every call is checked ---------------------------------------------------------------------

HEIGHT_1 = [27 * s + 3 * h + c for s in range(9) for h in range(1, 9) for c in range(3)]
"""The slots encoding's features of buttons above the bottom of their stack: none is set in a
round's first position (every stack holds one button), where the loader's probe runs."""


def overflowing(path: Path, then_nan: bool = False) -> Path:
    """A policy with finite logits on every first position of a round, and -inf for all of
    them (NaN with ``then_nan``) once two buttons lie above the bottom of their stacks:
    -1.8e38 a button, which overflows float32 at two."""
    matrix = np.zeros((SIZE, ACTIONS), np.float32)
    matrix[HEIGHT_1] = -1.8e38
    nodes = [helper.make_node("MatMul", ["obs", "W"], ["h" if then_nan else "logits"])]
    initializers = [weight("W", matrix)]
    if then_nan:  # -inf times 0
        nodes.append(helper.make_node("Mul", ["h", "zero"], ["logits"]))
        initializers.append(weight("zero", 0.0))
    return write_policy(path, nodes, initializers)


def later_position() -> State:
    """A position with buttons stacked: after five moves of a round."""
    state = State.new_round(LAYOUTS[100], "R")
    for _ in range(5):
        state = state.play(state.legal_moves()[0])
    assert sum(max(len(stack) - 1, 0) for stack in state.board) >= 2
    return state


@pytest.mark.parametrize("then_nan", [False, True], ids=["all -inf", "NaN"])
@pytest.mark.parametrize("deterministic", [True, False], ids=["argmax", "sampled"])
def test_a_policy_whose_logits_break_in_play_raises_naming_the_file(
    then_nan: bool, deterministic: bool, tmp_path: Path
) -> None:
    path = overflowing(tmp_path / "breaks.onnx", then_nan)
    policy = load_policy(path, deterministic=deterministic)  # the probe's positions are fine
    with pytest.raises(PolicyError) as error:
        policy.act(later_position())
    message = str(error.value)
    assert message.startswith(f"{path} gave logits that are not finite (NaN or infinite) for 1 ")
    with pytest.raises(PolicyError, match="not finite"):  # batched use: the same check
        policy.logits(np.stack([policy.encoding.encode(later_position(), "R")] * 3))
    with pytest.raises(PolicyError, match=str(path)):  # the league's batched player
        evaluate(policy, "random", 4, seed=1)


class Session:
    """An onnxruntime session that answers with ``logits``, as a misbehaving runtime might."""

    def __init__(self, logits: Any) -> None:
        self.answer = logits

    def run(self, names: list[str], feeds: dict[str, np.ndarray], options: Any = None) -> list[Any]:
        return [self.answer]


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (
            np.zeros((1, 8), np.float32),
            "gave logits of shape (1, 8) for 1 position; a policy of "
            "the 'slots' encoding gives (1, 9)",
        ),
        (np.zeros(9, np.float32), "gave logits of shape (9,) for 1 position"),
        ([0.0] * 9, "gave logits of shape list for 1 position"),
        (
            np.full((1, 9), -np.inf, np.float32),
            "gave logits that are not finite (NaN or infinite) for 1 of 1 position",
        ),
    ],
)
def test_every_call_checks_the_shape_and_the_values(answer: Any, says: str, tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "fine.onnx", [helper.make_node("MatMul", ["obs", "W"], ["logits"])], [linear()]
    )
    policy = OnnxPolicy(path)
    policy.session = Session(answer)
    with pytest.raises(PolicyError) as error:
        policy.act(State.new_round(LAYOUTS[0], "R"))
    assert str(error.value) == f"{path} {says}" or str(error.value).startswith(f"{path} {says}")


def test_play_ends_in_the_policy_s_sentence(tmp_path: Path) -> None:
    path = overflowing(tmp_path / "breaks.onnx")
    out, err = io.StringIO(), io.StringIO()
    moves = io.StringIO("\n".join(str(s) for s in range(9)) * 20)
    code = play.main(["--opponent", str(path), "--seed", "3"], moves, out, err)
    assert code == 2, (out.getvalue()[-500:], err.getvalue())
    assert err.getvalue().startswith(f"python -m buttonup_env.play: error: {path} gave logits ")
    assert err.getvalue().count("\n") == 1


def test_evaluate_ends_in_the_policy_s_sentence(tmp_path: Path) -> None:
    """evaluate.py's command line (run in this process as its interpreter would, a traceback
    that escaped included)."""
    path = overflowing(tmp_path / "breaks.onnx")
    done = run(ROOT / "training" / "evaluate.py", "--model", path, "--matches", 2, "--no-progress")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: {path} gave logits that are not finite")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("spec", ["", "  "])
def test_an_empty_policy_name_is_named_as_such(spec: str) -> None:
    """Not as a path: an empty name would resolve to the current folder (". is a directory")."""
    with pytest.raises(ValueError) as error:
        load_policy(spec)
    assert str(error.value).startswith(f"{spec!r} names no policy: give a shipped policy's name")
