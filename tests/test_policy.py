"""Exported policies: the ONNX export plays exactly like the SB3 model it came from, loads
without torch, and every bad file is refused with a sentence that names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import numpy as np
import onnx
import pytest
import torch as th
from onnx import TensorProto, helper, numpy_helper
from sb3_contrib import MaskablePPO
from sb3_files import UNSUPPORTED, near_tie, random_positions, sb3_choices, unsupported_zip
from stable_baselines3 import PPO
from torch import nn

import buttonup_env
from buttonup_env.envs.wrappers import RingObservation
from buttonup_env.game.encoding import ENCODINGS
from buttonup_env.game.rules import State
from buttonup_env.learn.nets import RingPolicy
from buttonup_env.learn.onnx_writer import check_exportable, export_onnx
from buttonup_env.players.onnx_graph import OPERATORS
from buttonup_env.players.policy import (
    META_ENCODING,
    META_VERSION,
    OnnxPolicy,
    SB3Policy,
    load_policy,
    load_sb3_model,
    read_sb3_zip,
)
from buttonup_env.players.shipped import SHIPPED_DIR, shipped_policies, shipped_policy_path

ROOT = Path(__file__).resolve().parent.parent
POSITIONS = 1200
ACTS = 300  # of the POSITIONS, those played one move at a time

# name: (encoding, policy_kwargs, steps of training[, algorithm, policy]); the policy is
# RingPolicy on the view encodings and SB3's MlpPolicy on the slots unless named
MODELS: dict[str, tuple] = {
    "afterstates-fresh": ("afterstates", {}, 0),
    "afterstates-trained": ("afterstates", {}, 256),
    "ring-fresh": ("ring", {}, 0),
    "ring-trained": ("ring", {}, 256),
    "afterstates-shared-tanh": (
        "afterstates",
        {"hidden": (32, 16), "shared": True, "activation_fn": nn.Tanh},
        256,
    ),
    "afterstates-expected-critic": (
        "afterstates",
        {"hidden": (32, 16), "shared": True, "critic": "expected"},
        256,
    ),
    "slots-fresh": ("slots", {}, 0),
    "slots-trained": ("slots", {}, 256),
    "slots-ppo-fresh": ("slots", {}, 0, "PPO"),
    "slots-ppo-trained": ("slots", {}, 256, "PPO"),
    "slots-ppo-relu": ("slots", {"net_arch": [32], "activation_fn": nn.ReLU}, 256, "PPO"),
    "ring-mlp-trained": ("ring", {}, 256, "MaskablePPO", "MlpPolicy"),
    "afterstates-ppo-mlp": ("afterstates", {"net_arch": [16, 16]}, 256, "PPO", "MlpPolicy"),
}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Small batches: several threads only wait for each other (and the machine may be busy)."""
    previous = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(previous)


def make_model(
    encoding: str,
    policy_kwargs: dict,
    seed: int = 0,
    algorithm: str = "MaskablePPO",
    policy: str | None = None,
) -> MaskablePPO | PPO:
    """A MaskablePPO (or PPO) model: RingPolicy on the ring encodings and MlpPolicy on
    ButtonUp-v0 unless ``policy`` names one."""
    env = gym.make("ButtonUp-v0", episode="round", reward="round")
    if encoding != "slots":
        env = RingObservation(env, encoding=encoding)
    policy_class: type | str = policy or ("MlpPolicy" if encoding == "slots" else RingPolicy)
    algorithm_class = MaskablePPO if algorithm == "MaskablePPO" else PPO
    return algorithm_class(
        policy_class,
        env,
        n_steps=64,
        batch_size=32,
        n_epochs=2,
        seed=seed,
        device="cpu",
        policy_kwargs=policy_kwargs,
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[MaskablePPO, Path]]:
    """``exported(name)``: the model of ``MODELS[name]`` and its ONNX file (made once)."""
    folder = tmp_path_factory.mktemp("policies")
    cache: dict[str, tuple[MaskablePPO, Path]] = {}

    def get(name: str) -> tuple[MaskablePPO, Path]:
        if name not in cache:
            encoding, kwargs, steps, *kind = MODELS[name]
            model = make_model(encoding, kwargs, 0, *kind)
            if steps:
                model.learn(steps)
            path = export_onnx(model.policy, folder / f"{name}.onnx", {"steps": steps})
            cache[name] = (model, path)
        return cache[name]

    return get


def log_softmax(logits: np.ndarray) -> np.ndarray:
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def edited_metadata(source: Path, target: Path, **changes: str) -> Path:
    """A copy of the ONNX file ``source`` with some metadata values changed."""
    model = onnx.load(source)
    for prop in model.metadata_props:
        if prop.key in changes:
            prop.value = changes[prop.key]
    onnx.save(model, target)
    return target


# --- the export plays like the model ---------------------------------------------------------


def test_positions_cover_both_colours_and_many_layouts() -> None:
    positions = random_positions(1, POSITIONS)
    assert len(positions) == POSITIONS
    assert not any(state.round_over for state in positions)
    assert Counter(state.to_move for state in positions).keys() == {"R", "B"}
    assert len({state.board for state in positions}) > POSITIONS // 2
    assert Counter(len(state.legal_moves()) for state in positions).keys() == {1, 2, 3}


@pytest.mark.parametrize(  # untrained weights of a network also trained here: slow
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n.endswith("-fresh") else n for n in MODELS],
)
def test_onnx_export_plays_like_the_sb3_model(
    name: str, exported: Callable[[str], tuple[MaskablePPO, Path]]
) -> None:
    model, path = exported(name)
    reference = SB3Policy(model)
    policy = load_policy(path)
    assert isinstance(policy, OnnxPolicy)
    assert policy.encoding.name == MODELS[name][0] == reference.encoding.name
    positions = random_positions(2, POSITIONS)
    observations = np.stack([policy.encoding.encode(s, s.to_move) for s in positions])
    assert observations.shape == (POSITIONS, policy.encoding.size)

    expected = reference.logits(observations)
    found = policy.logits(observations)
    assert found.shape == expected.shape == (POSITIONS, policy.encoding.actions)
    assert found.dtype == np.float32
    np.testing.assert_allclose(log_softmax(found), log_softmax(expected), atol=1e-5, rtol=0)

    # one move at a time (each player's own act, a network call each) on a quarter of them
    near_ties = 0
    for state, logits in zip(positions[:ACTS], expected[:ACTS], strict=True):
        slot, expected_slot = policy.act(state), reference.act(state)
        assert slot in state.legal_moves()
        if slot != expected_slot:
            # only a tie (up to rounding) between two legal moves may come out either way
            mask = policy.encoding.mask(state)
            best = np.sort(np.where(mask, logits, -np.inf))[-2:]
            assert best[1] - best[0] < 1e-5, (name, state)
            near_ties += 1
    assert near_ties <= ACTS // 100


def expected_kind(name: str) -> tuple[str, str]:
    """(algorithm, policy) that a .zip of ``MODELS[name]`` is described as."""
    encoding, _, _, *kind = MODELS[name]
    algorithm = kind[0] if kind else "MaskablePPO"
    policy = kind[1] if len(kind) > 1 else ("MlpPolicy" if encoding == "slots" else "RingPolicy")
    return algorithm, policy


@pytest.mark.parametrize("name", [name for name in MODELS if "fresh" not in name])
def test_a_saved_zip_exports_to_a_file_that_chooses_the_sb3_models_moves(
    name: str, exported: Callable[[str], tuple[MaskablePPO, Path]], tmp_path: Path
) -> None:
    """What a user's own script does: ``model.save``, then the export of the loaded file. On
    1,200 random positions the ONNX file plays the move the SB3 model chooses itself, the mask
    applied the same way (MaskablePPO's predict with the mask; PPO's argmax of the legal
    logits)."""
    model, _ = exported(name)
    saved = tmp_path / f"{name}.zip"
    model.save(saved)
    info = read_sb3_zip(saved)
    assert (info.algorithm, info.policy) == expected_kind(name)
    assert info.steps == MODELS[name][2] and info.sb3_version
    assert info.settings["n_steps"] == 64 and info.settings["batch_size"] == 32
    loaded, _ = load_sb3_model(saved)
    assert type(loaded) is type(model)
    assert check_exportable(loaded.policy) == MODELS[name][0]
    policy = load_policy(export_onnx(loaded.policy, tmp_path / f"{name}.onnx"))
    assert policy.encoding.name == MODELS[name][0]

    positions = random_positions(7, POSITIONS)
    expected, logits = sb3_choices(model, policy.encoding, positions)
    near_ties = 0
    for state, slot, row in zip(positions, expected, logits, strict=True):
        assert slot in state.legal_moves()
        if policy.act(state) != slot:
            assert near_tie(row, policy.encoding.mask(state)), (name, state)
            near_ties += 1
    assert near_ties <= POSITIONS // 100


def test_plain_ppo_would_choose_illegal_moves_that_its_export_never_plays(
    exported: Callable[[str], tuple[MaskablePPO, Path]],
) -> None:
    """PPO has no mask: its own ``predict`` picks illegal slots in some positions, and the
    exported player (like every player) picks the best legal one there."""
    model, path = exported("slots-ppo-fresh")
    policy = load_policy(path)
    positions = random_positions(8, POSITIONS)
    observations = np.stack([policy.encoding.encode(s, s.to_move) for s in positions])
    unmasked, _ = model.predict(observations, deterministic=True)
    illegal = [s for s, a in zip(positions, unmasked, strict=True) if a not in s.legal_moves()]
    assert len(illegal) > POSITIONS // 10
    assert all(policy.act(state) in state.legal_moves() for state in illegal)


@pytest.mark.parametrize("encoding", ["afterstates", "ring", "slots", "slots-ppo"])
def test_training_changes_the_exported_policy(
    encoding: str, exported: Callable[[str], tuple[MaskablePPO, Path]]
) -> None:
    """The trained rows above are not the fresh ones again (same seed, different weights)."""
    observations = np.stack(
        [ENCODINGS[encoding.split("-")[0]].encode(s, s.to_move) for s in random_positions(2, 100)]
    )
    fresh = load_policy(exported(f"{encoding}-fresh")[1]).logits(observations)
    trained = load_policy(exported(f"{encoding}-trained")[1]).logits(observations)
    assert np.abs(log_softmax(fresh) - log_softmax(trained)).max() > 1e-3


@pytest.mark.parametrize("name", ["afterstates-fresh", "ring-fresh", "slots-fresh"])
def test_onnx_metadata_names_the_encoding(
    name: str, exported: Callable[[str], tuple[MaskablePPO, Path]]
) -> None:
    _, path = exported(name)
    props = {p.key: p.value for p in onnx.load(path).metadata_props}
    assert props[META_ENCODING] == MODELS[name][0]
    assert props[META_VERSION] == "1"
    assert props["steps"] == "0"
    assert load_policy(path).metadata[META_ENCODING] == MODELS[name][0]
    assert not list(path.parent.glob("*.tmp"))  # written atomically


def test_export_refuses_a_policy_it_cannot_write(tmp_path: Path) -> None:
    model = MaskablePPO("MlpPolicy", gym.make("CartPole-v1"), n_steps=64, device="cpu")
    with pytest.raises(ValueError, match="size 4 and 2 actions: supported are RingPolicy"):
        export_onnx(model.policy, tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


def test_export_refuses_another_features_extractor(tmp_path: Path) -> None:
    """A features extractor of the user's is not part of the exported chain: refused rather
    than silently left out."""
    from stable_baselines3.common.torch_layers import FlattenExtractor

    class Scaled(FlattenExtractor):
        def forward(self, observations: th.Tensor) -> th.Tensor:
            return 2.0 * super().forward(observations)

    kwargs = {"features_extractor_class": Scaled}
    model = PPO("MlpPolicy", gym.make("ButtonUp-v0"), policy_kwargs=kwargs, device="cpu")
    with pytest.raises(ValueError, match="features extractor is Scaled; supported: SB3's"):
        export_onnx(model.policy, tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_an_sb3_zip_that_cannot_be_exported_is_refused_in_one_sentence(
    name: str, tmp_path: Path
) -> None:
    """The file is named, with what is wrong and what is supported; only "other layers" gets
    as far as loading (its player works: torch computes its logits), and its export is
    refused."""
    path = unsupported_zip(name, tmp_path)
    fragments = UNSUPPORTED[name][1]
    with pytest.raises(ValueError) as error:
        model, _ = load_sb3_model(path)
        assert name == "other layers"
        assert load_policy(path, trusted=True).act(random_positions(1, 1)[0]) in range(9)
        export_onnx(model.policy, tmp_path / "x.onnx")
    message = str(error.value)
    assert "\n" not in message
    if name != "other layers":
        assert message.startswith(f"{path} ") and "supported are MaskablePPO and PPO" in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert not (tmp_path / "x.onnx").exists()


def test_export_refuses_a_folder_as_the_file_to_write(
    exported: Callable[[str], tuple[MaskablePPO, Path]], tmp_path: Path
) -> None:
    model, _ = exported("ring-fresh")
    with pytest.raises(ValueError, match="is a folder"):
        export_onnx(model.policy, tmp_path)
    assert list(tmp_path.parent.glob(f"{tmp_path.name}*")) == [tmp_path]  # no stray .tmp file


def test_load_policy_needs_no_torch(exported: Callable[[str], tuple[MaskablePPO, Path]]) -> None:
    names = ["afterstates-trained", "ring-trained", "slots-trained"]
    paths = [str(exported(name)[1]) for name in names]
    state = State.from_notation("B W W B B R W R R", "B", score={"R": 3, "B": 7}, target=10)
    script = (
        "import sys\n"
        "import buttonup_env\n"
        "from buttonup_env.game.rules import State\n"
        f"state = State.from_notation({state.notation!r}, 'B', score={{'R': 3, 'B': 7}}, "
        "target=10)\n"
        "for path in sys.argv[1:]:\n"
        "    p = buttonup_env.load_policy(path)\n"
        "    print(p.act(state))\n"
        "heavy = sorted(m for m in sys.modules\n"
        "               if m.split('.')[0] in ('torch', 'stable_baselines3', 'sb3_contrib'))\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *paths],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr
    moves = [int(line) for line in done.stdout.split()]
    assert moves == [SB3Policy(exported(name)[0]).act(state) for name in names]


def test_the_loader_allows_exactly_the_operators_the_exporter_writes(
    exported: Callable[[str], tuple[MaskablePPO, Path]], tmp_path: Path
) -> None:
    """Every kind of policy the exporter writes (a bounded RingPolicy for Mul) loads, and
    together they use every operator the loader allows: the list is the exporter's."""
    bounded = make_model("ring", {"logit_bound": 5.0, "activation_fn": nn.Tanh})
    paths = [exported(name)[1] for name in MODELS if name.endswith(("fresh", "tanh", "mlp"))]
    paths.append(export_onnx(bounded.policy, tmp_path / "bounded.onnx"))
    used = set()
    for path in paths:
        load_policy(path)
        used |= {node.op_type for node in onnx.load(path).graph.node}
    assert used == OPERATORS


# --- bad files ---------------------------------------------------------------------------------


def identity_model(path: Path) -> Path:
    """A valid ONNX model that is not a policy: Identity on an input "x" of shape [1, 5]."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "not_a_policy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def wrong_outputs_model(path: Path) -> Path:
    """Input "obs" [batch, 246] and metadata "slots", but "logits" of [batch, 5] instead of 9."""
    weight = numpy_helper.from_array(np.zeros((246, 5), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["logits"])],
        "five_actions",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", 246])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 5])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    helper.set_model_props(model, {META_ENCODING: "slots", META_VERSION: "1"})
    onnx.save(model, path)
    return path


def slots_model(
    path: Path,
    weight: np.ndarray | None = None,
    input_shape: list[object] | None = None,
    element: int = TensorProto.FLOAT,
) -> Path:
    """A slots-encoding policy "obs" -> "logits" = obs @ weight (246 x 9), with its metadata:
    the shapes, the element type or the weights set by the caller."""
    dtype = np.float64 if element == TensorProto.DOUBLE else np.float32
    matrix = np.full((246, 9), 0.01) if weight is None else weight
    shape = input_shape or ["batch", 246]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["logits"])],
        "slots_policy",
        [helper.make_tensor_value_info("obs", element, shape)],
        [helper.make_tensor_value_info("logits", element, [shape[0], 9])],
        [numpy_helper.from_array(matrix.astype(dtype), "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    helper.set_model_props(model, {META_ENCODING: "slots", META_VERSION: "1"})
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def double_input(folder: Path, real: Path) -> Path:
    return slots_model(folder / "double.onnx", element=TensorProto.DOUBLE)


def fixed_batch(folder: Path, real: Path) -> Path:
    return slots_model(folder / "batch1.onnx", input_shape=[1, 246])


def nan_outputs(folder: Path, real: Path) -> Path:
    return slots_model(folder / "nan.onnx", weight=np.full((246, 9), np.nan))


def infinite_outputs(folder: Path, real: Path) -> Path:
    return slots_model(folder / "inf.onnx", weight=np.full((246, 9), np.inf))


def missing(folder: Path, real: Path) -> Path:
    return folder / "missing.onnx"


def directory(folder: Path, real: Path) -> Path:
    (folder / "folder.onnx").mkdir()
    return folder / "folder.onnx"


def truncated(folder: Path, real: Path) -> Path:
    (folder / "cut.onnx").write_bytes(real.read_bytes()[:100])
    return folder / "cut.onnx"


def text(folder: Path, real: Path) -> Path:
    (folder / "notes.onnx").write_text("just some notes, not a model\n")
    return folder / "notes.onnx"


def not_a_policy(folder: Path, real: Path) -> Path:
    return identity_model(folder / "identity.onnx")


def unknown_encoding(folder: Path, real: Path) -> Path:
    return edited_metadata(real, folder / "hex.onnx", **{META_ENCODING: "hexagons"})


def other_observation_size(folder: Path, real: Path) -> Path:
    return edited_metadata(real, folder / "as_slots.onnx", **{META_ENCODING: "slots"})


def other_action_count(folder: Path, real: Path) -> Path:
    return wrong_outputs_model(folder / "five.onnx")


def untrusted_zip(folder: Path, real: Path) -> Path:
    (folder / "model.zip").write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip archive
    return folder / "model.zip"


BAD_FILES: list[tuple[Callable[[Path, Path], Path], list[str]]] = [
    # (make(folder, a real ring-policy file) -> the bad file, what the message must say)
    (missing, ["does not exist", "expected", ".onnx"]),
    (directory, ["directory", "expected", "policy file"]),
    (truncated, ["could not be read as ONNX", "expected", "'obs'", "'logits'"]),
    (text, ["could not be read as ONNX", "expected", "'obs'"]),
    (not_a_policy, ["no known observation encoding", "expected", "'obs'"]),
    (unknown_encoding, ["'hexagons'", "known", "afterstates", "ring", "slots"]),
    (other_observation_size, ["'slots'", "246", "729", "'obs'"]),
    (other_action_count, ["'logits'", "5", "9"]),
    (untrusted_zip, ["Stable-Baselines3", "unpickles", "trusted=True"]),
    (double_input, ["takes 'obs' as tensor(double)", "float32"]),
    (fixed_batch, ["the fixed shape [1, 246]", "a batch of any size"]),
    (nan_outputs, ["not finite", "NaN", "weights are broken"]),
    (infinite_outputs, ["not finite"]),
]


@pytest.mark.parametrize(("make", "fragments"), BAD_FILES, ids=[m.__name__ for m, _ in BAD_FILES])
def test_bad_policy_files_are_refused_naming_the_file(
    make: Callable[[Path, Path], Path],
    fragments: list[str],
    tmp_path: Path,
    exported: Callable[[str], tuple[MaskablePPO, Path]],
) -> None:
    path = make(tmp_path, exported("ring-fresh")[1])
    with pytest.raises(ValueError) as error:
        load_policy(path)
    message = str(error.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_a_policy_that_loads_plays_a_batch(tmp_path: Path) -> None:
    """The probe at load is what the batched players need: a working file passes it and plays
    a batch of any size."""
    policy = load_policy(slots_model(tmp_path / "fine.onnx"))
    observations = np.zeros((5, 246), np.float32)
    assert policy.logits(observations).shape == (5, 9)


@pytest.mark.parametrize("make", [double_input, fixed_batch, nan_outputs])
def test_a_broken_policy_is_refused_by_every_command(
    make: Callable[[Path, Path], Path], tmp_path: Path
) -> None:
    """Refused at load in one line, not loaded to fail later (evaluate.py's traceback, a 500
    in the web app, or with NaN the first legal slot every time)."""
    path = make(tmp_path, tmp_path)
    evaluate = ROOT / "training" / "evaluate.py"
    done = subprocess.run(
        [sys.executable, str(evaluate), "--model", str(path), "--matches", "2", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: {path}") and done.stderr.count("\n") == 1
    with pytest.raises(ValueError, match=str(path)):
        gym.make("ButtonUp-v0", opponent=str(path))


def test_a_trusted_zip_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.zip"
    path.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip archive
    with pytest.raises(ValueError, match="is not a Stable-Baselines3 model") as error:
        load_policy(path, trusted=True)
    assert str(path) in str(error.value)


def test_a_trusted_zip_loads_and_plays_like_its_export(
    tmp_path: Path, exported: Callable[[str], tuple[MaskablePPO, Path]]
) -> None:
    model, onnx_path = exported("afterstates-trained")
    zip_path = tmp_path / "model.zip"
    model.save(zip_path)
    with pytest.raises(ValueError, match="trusted"):
        load_policy(zip_path)
    player = load_policy(zip_path, trusted=True)
    assert isinstance(player, SB3Policy)
    assert player.encoding.name == "afterstates"
    exported_player = load_policy(onnx_path)
    for state in random_positions(3, 200):
        assert player.act(state) == exported_player.act(state)


def test_a_trusted_plain_ppo_zip_loads_and_plays_legal_moves(
    tmp_path: Path, exported: Callable[[str], tuple[MaskablePPO, Path]]
) -> None:
    model, onnx_path = exported("slots-ppo-trained")
    zip_path = tmp_path / "ppo.zip"
    model.save(zip_path)
    with pytest.raises(ValueError, match=f"training/export.py {zip_path} --trusted"):
        load_policy(zip_path)
    player = load_policy(zip_path, trusted=True)
    assert isinstance(player, SB3Policy) and isinstance(player.model, PPO)
    exported_player = load_policy(onnx_path)
    for state in random_positions(3, 200):
        assert player.act(state) == exported_player.act(state)


def test_a_finished_round_has_no_move(exported: Callable[[str], tuple[MaskablePPO, Path]]) -> None:
    policy = load_policy(exported("ring-fresh")[1])
    state = State.from_notation(". . . . . . . . RRWBRBWWB", "R")
    with pytest.raises(ValueError, match="round is over"):
        policy.act(state)


def test_package_load_policy_takes_the_same_keywords(
    exported: Callable[[str], tuple[MaskablePPO, Path]],
) -> None:
    """``buttonup_env.load_policy`` is the documented entry point: it should pass
    ``deterministic`` on like ``buttonup_env.players.policy.load_policy`` does."""
    path = exported("ring-fresh")[1]
    policy = buttonup_env.load_policy(path, deterministic=False)
    assert not policy.deterministic


# --- as an opponent in the env -----------------------------------------------------------------


def test_env_plays_a_whole_match_against_an_onnx_file(
    exported: Callable[[str], tuple[MaskablePPO, Path]],
) -> None:
    path = exported("afterstates-trained")[1]
    policy = load_policy(path)
    env = gym.make("ButtonUp-v0", opponent=str(path), target=10)
    rng = np.random.default_rng(4)
    _, info = env.reset(seed=4)
    rounds = checked = 0
    terminated = False
    reward = 0.0
    for _ in range(1000):
        state = info["state"]
        legal = state.legal_moves()
        slot = legal[int(rng.integers(len(legal)))]
        _, reward, terminated, truncated, info = env.step(slot)
        assert not truncated
        if "round_points" in info:
            rounds += 1
        else:  # the opponent's moves of this step are the policy's choices
            after = state.play(slot)
            for move in info["opponent_moves"]:
                assert move == policy.act(after)
                after = after.play(move)
                checked += 1
            assert after == info["state"]
        if terminated:
            break
    assert terminated
    assert reward in (1.0, -1.0)
    assert info["state"].match_over
    assert rounds >= 1
    assert checked > 0
    env.close()


def test_env_refuses_a_missing_onnx_opponent(tmp_path: Path) -> None:
    path = tmp_path / "nope.onnx"
    with pytest.raises(ValueError, match="does not exist") as error:
        gym.make("ButtonUp-v0", opponent=str(path))
    assert str(path) in str(error.value)


# --- sampling ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["afterstates-trained", "slots-trained"])
def test_sampling_is_reproducible_with_a_seeded_reset(
    name: str, exported: Callable[[str], tuple[MaskablePPO, Path]]
) -> None:
    path = exported(name)[1]
    positions = [s for s in random_positions(5, 400) if len(s.legal_moves()) > 1]

    def moves(policy: OnnxPolicy | SB3Policy, seed: int | None) -> list[int]:
        if seed is not None:
            policy.reset(np.random.default_rng(seed))
        return [policy.act(state) for state in positions]

    sampler = load_policy(path, deterministic=False)
    first = moves(sampler, 7)
    assert all(m in s.legal_moves() for m, s in zip(first, positions, strict=True))
    assert moves(sampler, 7) == first
    assert moves(load_policy(path, deterministic=False), 7) == first
    assert moves(sampler, 8) != first

    greedy = load_policy(path)
    best = moves(greedy, None)
    assert moves(greedy, 7) == best == moves(greedy, 8)  # reset changes nothing
    assert best != first  # near-uniform logits: sampling often leaves the argmax


def test_sampling_follows_the_softmax_of_the_legal_logits(tmp_path: Path) -> None:
    model = make_model("ring", {"hidden": (16,)}, seed=3)
    with th.no_grad():  # sharpen the logits so that the distribution is far from uniform
        model.policy.mlp_extractor.actor_score.weight.mul_(1000.0)
    path = export_onnx(model.policy, tmp_path / "sharp.onnx")
    sampler = load_policy(path, deterministic=False)
    sampler.reset(np.random.default_rng(11))

    def softmax(state: State) -> np.ndarray:
        logits = sampler.logits(sampler.encoding.encode(state, state.to_move)[None, :])[0]
        p = np.exp(logits - logits.max())
        return p / p.sum()

    # a position with three moves whose probabilities are far apart, none negligible
    state, p = next(
        (s, softmax(s))
        for s in random_positions(6, 400)
        if len(s.legal_moves()) == 3 and softmax(s).min() > 0.05 and np.ptp(softmax(s)) > 0.3
    )
    draws = 4000
    counts = Counter(sampler.act(state) for _ in range(draws))
    assert set(counts) <= set(state.legal_moves())
    for action, slot in enumerate(state.legal_moves()):
        assert abs(counts[slot] / draws - p[action]) < 0.03, (counts, p)


def test_sb3_policy_refuses_an_unknown_observation_size() -> None:
    class Fake:
        observation_space = gym.spaces.Box(0, 1, (17,))

    with pytest.raises(ValueError, match="17") as error:
        SB3Policy(Fake(), "fake.zip")
    message = str(error.value)
    assert "fake.zip" in message
    for encoding in ENCODINGS.values():
        assert f"{encoding.name}: {encoding.size}" in message


# --- the policies shipped inside the package, loaded by name --------------------------------------
def test_buttonup_ppo_is_shipped_with_its_card() -> None:
    assert "buttonup-ppo" in shipped_policies()
    for name in shipped_policies():
        card = json.loads((SHIPPED_DIR / f"{name}.json").read_text())
        assert card["model"] == f"{name}.onnx"


@pytest.mark.parametrize("name", shipped_policies())
def test_a_shipped_policy_loads_by_name_and_plays(name: str) -> None:
    policy = load_policy(name)
    assert isinstance(policy, OnnxPolicy) and policy.path == SHIPPED_DIR / f"{name}.onnx"
    assert buttonup_env.load_policy(name).path == policy.path
    for state in random_positions(3, 50):
        assert policy.act(state) in state.legal_moves()


def test_a_shipped_policy_still_loads_from_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    path = shipped_policy_path("buttonup-ppo")
    monkeypatch.chdir(SHIPPED_DIR)
    for spec in (path, str(path), "buttonup-ppo.onnx", "./buttonup-ppo.onnx"):
        assert load_policy(spec).path.resolve() == path


def test_a_bare_file_name_is_a_file_when_no_policy_has_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("mine").write_bytes(shipped_policy_path("buttonup-ppo").read_bytes())
    assert load_policy("mine").path == Path("mine")


@pytest.mark.parametrize("name", ["buttonup-xyz", "Buttonup-PPO", "random"])
def test_an_unknown_policy_name_lists_the_shipped_ones(name: str) -> None:
    with pytest.raises(ValueError) as error:
        load_policy(name)
    message = str(error.value)
    assert "\n" not in message and repr(name) in message
    for shipped in shipped_policies():
        assert repr(shipped) in message
    assert ".onnx" in message  # and says that a path works too


def test_the_env_plays_against_a_shipped_policy_by_name() -> None:
    env = gym.make("ButtonUp-v0", opponent="buttonup-ppo", target=3)
    _, info = env.reset(seed=5)
    assert env.unwrapped.opponent.path == shipped_policy_path("buttonup-ppo")
    terminated = False
    while not terminated:
        action = int(np.flatnonzero(info["action_mask"])[0])
        _, _, terminated, _, info = env.step(action)
    assert info["state"].match_over


def test_an_unknown_opponent_lists_the_bots_and_the_shipped_policies() -> None:
    with pytest.raises(ValueError) as error:
        gym.make("ButtonUp-v0", opponent="buttonup-xyz")
    message = str(error.value)
    for name in ("random", "greedy", "perfect", *shipped_policies()):
        assert repr(name) in message


def test_evaluate_takes_a_shipped_policy_name(
    training_script: Callable[[str], ModuleType],
) -> None:
    evaluate = training_script("evaluate")
    assert evaluate.load_player("buttonup-ppo", False).path == shipped_policy_path("buttonup-ppo")
    with pytest.raises(ValueError, match="buttonup-ppo"):
        evaluate.load_player("buttonup-xyz", False)
