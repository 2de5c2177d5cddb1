"""Weight averaging of exported policies (``buttonup_env.learn.onnx_writer.averaged_actor``):
the averaged file plays as the network with the mean weights, and a snapshot of another
network, or one the loader refuses, is named in one sentence."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import onnx
import pytest
import torch as th
from onnx import numpy_helper
from sb3_contrib import MaskablePPO

from buttonup_env.envs.wrappers import RingObservation
from buttonup_env.learn.nets import RingPolicy
from buttonup_env.learn.onnx_writer import export_onnx
from buttonup_env.players.policy import OnnxPolicy

HIDDEN = (32, 16)


def policy(hidden: tuple[int, ...] = HIDDEN, encoding: str = "afterstates", seed: int = 0):
    """The policy of a fresh MaskablePPO model on the view encoding ``encoding``."""
    env = RingObservation(gym.make("ButtonUp-v0", episode="round", reward="round"), encoding)
    kwargs = {"hidden": hidden, "shared": True}
    model = MaskablePPO(RingPolicy, env, n_steps=64, seed=seed, device="cpu", policy_kwargs=kwargs)
    return model.policy


def moved(base, seed: int):
    """A copy of the policy ``base`` with every weight moved by noise: a later snapshot."""
    other = copy.deepcopy(base)
    generator = th.Generator().manual_seed(seed)
    with th.no_grad():
        for parameter in other.parameters():
            parameter.add_(0.3 * th.randn(parameter.shape, generator=generator))
    return other


def observations(size: int, count: int = 64) -> np.ndarray:
    return np.random.default_rng(5).integers(0, 2, (count, size)).astype(np.float32)


def test_the_averaged_policy_plays_as_the_network_of_the_mean_weights(tmp_path: Path) -> None:
    first = policy()
    second, last = moved(first, 1), moved(first, 2)
    snapshots = {}
    for name, weights in (("a", first), ("b", second)):
        snapshots[name] = export_onnx(weights, tmp_path / f"{name}.onnx").read_bytes()
    averaged = OnnxPolicy(export_onnx(last, tmp_path / "averaged.onnx", {"steps": 3}, snapshots))

    mean = copy.deepcopy(last)  # the network whose weights are the mean of the three
    with th.no_grad():
        three = zip(first.parameters(), second.parameters(), last.parameters(), strict=True)
        for parameter, (a, b, c) in zip(mean.parameters(), three, strict=True):
            parameter.copy_((a + b + c) / 3)
    expected = OnnxPolicy(export_onnx(mean, tmp_path / "mean.onnx"))
    lone = OnnxPolicy(export_onnx(last, tmp_path / "last.onnx"))

    seen = observations(averaged.encoding.size)
    np.testing.assert_allclose(averaged.logits(seen), expected.logits(seen), rtol=1e-4, atol=1e-5)
    assert not np.allclose(averaged.logits(seen), lone.logits(seen), atol=1e-3)
    assert averaged.metadata["steps"] == "3"  # the metadata of the last weights' export


def test_no_snapshot_leaves_the_weights_as_they_are(tmp_path: Path) -> None:
    network = policy()
    plain = onnx.load(export_onnx(network, tmp_path / "plain.onnx"))
    alone = onnx.load(export_onnx(network, tmp_path / "alone.onnx", None, {}))
    for ours, theirs in zip(plain.graph.initializer, alone.graph.initializer, strict=True):
        assert np.array_equal(numpy_helper.to_array(ours), numpy_helper.to_array(theirs))


def non_finite(tmp_path: Path) -> bytes:
    """A snapshot of the same network with a NaN among its weights."""
    model = onnx.load(export_onnx(policy(), tmp_path / "nan.onnx"))
    weight = model.graph.initializer[1]
    values = numpy_helper.to_array(weight).copy()
    values.flat[0] = np.nan
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    return model.SerializeToString()


SNAPSHOTS = {
    "wider": (
        lambda tmp: export_onnx(policy((64, 16)), tmp / "x.onnx").read_bytes(),
        r"its weight 'W0' is not 7,840 float32 numbers of shape \[245, 32\]",
    ),
    "deeper": (
        lambda tmp: export_onnx(policy((32, 16, 8)), tmp / "x.onnx").read_bytes(),
        "its network is not this policy's",
    ),
    "another encoding": (
        lambda tmp: export_onnx(policy(encoding="ring"), tmp / "x.onnx").read_bytes(),
        "its network is not this policy's",
    ),
    "not onnx": (lambda tmp: b"not a policy at all", "it is refused"),
    "not finite": (non_finite, "is not finite"),
}


@pytest.mark.parametrize("case", list(SNAPSHOTS))
def test_a_snapshot_that_cannot_be_averaged_is_named_in_one_sentence(
    case: str, tmp_path: Path
) -> None:
    make, fragment = SNAPSHOTS[case]
    out = tmp_path / "averaged.onnx"
    with pytest.raises(ValueError, match=fragment) as refused:
        export_onnx(policy(), out, None, {"runs/x/snapshots/step_000000128.onnx": make(tmp_path)})
    message = str(refused.value)
    assert message.startswith("runs/x/snapshots/step_000000128.onnx cannot be averaged in: ")
    assert "\n" not in message
    assert not out.exists()  # nothing written
