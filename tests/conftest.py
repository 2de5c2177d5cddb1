"""Shared fixtures."""

from __future__ import annotations

import atexit
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import settings

# One thread each for torch's operators and BLAS: the suite runs an xdist worker on every core,
# so a worker's extra threads only take turns with the other workers' (5% off the suite's time
# on 2 cores). Set before the workers start, so that they and their child processes inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Hypothesis: the same examples in every run ("repeatable", the default), so that a green run
# stays green; `--hypothesis-profile fuzz` (or HYPOTHESIS_PROFILE=fuzz) explores new random
# examples instead, and a failure it finds becomes an @example of the test.
settings.register_profile("repeatable", derandomize=True, database=None, print_blob=True)
settings.register_profile("fuzz", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

DATA_DIR = Path(__file__).parent / "data"


def pytest_unconfigure(config: pytest.Config) -> None:
    """An xdist worker ends without the interpreter's teardown: torch's exit handlers and the
    freeing of every object it made take a worker 3 to 8 seconds after its last test, and the
    run waits for both workers. By the time the interpreter exits, the worker has sent every
    result and the controller has let it go, so nothing is lost. Registered here, last, the
    exit runs before every other exit handler; a run without xdist ends as usual."""
    if hasattr(config, "workerinput"):
        atexit.register(_end_the_worker_now)


def _end_the_worker_now() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``tests/data``: the conformance records (rounds, matches, invalid)."""
    return DATA_DIR


@pytest.fixture(scope="session")
def training_script() -> Callable[[str], ModuleType]:
    """A module of the ``training`` package by its name (``"train"``, ``"export"``): the
    scripts import each other as ``training.NAME``, here as on the command line."""
    return lambda name: importlib.import_module(f"training.{name}")


@pytest.fixture(scope="session", autouse=True)
def sb3_logs_kept_with_the_tests(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The tests' own SB3 models (a user's script, without TensorBoard) log into pytest's
    temporary folder instead of leaving an empty ``SB3-DATE`` folder each in the system's."""
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3-logs"))


@pytest.fixture(autouse=True)
def no_real_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """SDL's dummy video driver: render_mode="human" windows (check_env makes one in every
    run) are drawn off screen, so the tests run the same on a desktop and on CI."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")


@pytest.fixture
def no_pygame(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import pygame`` fails, as where it is not installed."""
    monkeypatch.setitem(sys.modules, "pygame", None)


@pytest.fixture(scope="session")
def linear_policy() -> Callable[[Path, str, int], Path]:
    """``linear_policy(path, encoding, seed)`` writes an exported policy whose logits are
    ``obs @ W`` for a random ``W`` (from ``seed``): a real ONNX file that ``load_policy``
    accepts, made in milliseconds, and another player for every seed."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from buttonup_env.game.encoding import ENCODINGS
    from buttonup_env.players.policy import META_ENCODING, META_VERSION

    def write(path: Path, encoding: str, seed: int) -> Path:
        size, actions = ENCODINGS[encoding].size, ENCODINGS[encoding].actions
        weight = np.random.default_rng(seed).normal(size=(size, actions)).astype(np.float32)
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["obs", "W"], ["logits"])],
            "linear",
            [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", size])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", actions])],
            [numpy_helper.from_array(weight, "W")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        helper.set_model_props(model, {META_ENCODING: encoding, META_VERSION: "1"})
        onnx.save(model, path)
        return path

    return write
