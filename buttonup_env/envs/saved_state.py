"""What :meth:`ButtonUpVectorEnv.set_state <buttonup_env.envs.vector.ButtonUpVectorEnv.set_state>`
accepts: a state as ``get_state`` gives it, every array checked for its shape, its type and
its range before anything is restored.

The compiled kernels index their tables with the boards, colours and opponents unchecked, so
a board number past the last one would read memory that is not the table's (and kill the
process); a score no match reaches would be played on. Nothing is restored from a state that
fails a check: :func:`check_state` raises ``ValueError`` in one sentence naming the item.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.tables import GameTables
from ..game.records import shown
from ..game.rules import MAX_ROUND_MARGIN
from ..players.bots import BOT_NAMES
from .interface import COLOR_CHOICES, RESET_OPTIONS

STATE_KEYS = (
    "num_envs",
    "arrays",
    "options",
    "seed",
    "rng",
    "bots",
    "policy_rng",
    "snapshots",
    "results",
    "policies",
)
"""The keys of a saved state, as ``get_state`` writes them."""

STATE_ARRAYS = ("_board", "_to_move", "_agent", "_starter", "_score", "_opponent", "_done")
"""The arrays of a saved state, under ``"arrays"``: the batch's
(:class:`~buttonup_env.engine.batch.Batch`) fields of those names, without the underscore."""


@dataclass(frozen=True)
class Shape:
    """What a state must fit: the batch's number of envs, its tables and target, the folder of
    its opponent pool (None without one), its players when it has no pool, and the policies
    among them."""

    num_envs: int
    tables: GameTables
    target: int
    snapshot_dir: Path | None
    players: int
    policies: int


@dataclass(frozen=True)
class Checked:
    """A saved state that passed every check: its arrays as the batch's dtypes, and the
    snapshots' paths in the order the state loaded them."""

    arrays: dict[str, np.ndarray]
    snapshots: list[Path]


def refused(item: str, text: str) -> ValueError:
    return ValueError(f"the saved state's {item} {text}")


def check_state(state: object, shape: Shape) -> Checked:
    """``state`` checked against ``shape`` (see the module): ``ValueError`` in one sentence."""
    if not isinstance(state, dict):
        raise ValueError(
            f"the saved state is {shown(state)}; set_state takes what get_state returns, a dict"
        )
    missing = [key for key in STATE_KEYS if key not in state]
    if missing:
        raise ValueError(f"the saved state has no {missing[0]!r}")
    unknown = sorted((key for key in state if key not in STATE_KEYS), key=repr)
    if unknown:
        raise ValueError(f"the saved state has an unknown key {shown(unknown[0])}")
    if state["num_envs"] != shape.num_envs:
        raise ValueError(
            f"the saved state is of {shown(state['num_envs'])} envs; this batch has "
            f"{shape.num_envs}"
        )
    snapshots = check_opponents(state, shape)
    players = shape.players if shape.snapshot_dir is None else len(BOT_NAMES) + len(snapshots)
    arrays = check_arrays(state["arrays"], shape, players)
    check_options(state["options"])
    seed = state["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise refused("seed", f"is {shown(seed)}; it must be None or a whole number >= 0")
    check_generators(state)
    return Checked(arrays, snapshots)


def check_opponents(state: dict[str, Any], shape: Shape) -> list[Path]:
    """The paths of the state's opponent snapshots (each a file of the pool's folder, once),
    its results against them, and its number of policies, checked."""
    names, results = state["snapshots"], state["results"]
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        raise refused("snapshots", f"are {shown(names)}; they must be a list of file names")
    if shape.snapshot_dir is None and (names or results):
        raise ValueError("the saved state has opponent snapshots; this batch has no pool")
    if len(set(names)) < len(names):
        raise refused("snapshots", "name one snapshot twice")
    paths = []
    for index, name in enumerate(names):
        if Path(name).name != name or name in ("", ".", ".."):
            raise refused(f"snapshots[{index}]", f"is {shown(name)}; it must be a file name")
        assert shape.snapshot_dir is not None  # names is empty without a pool
        path = shape.snapshot_dir / name
        if not path.is_file():
            raise ValueError(
                f"the saved state's opponent snapshot {name} is not in {shape.snapshot_dir}"
            )
        paths.append(path)
    if not isinstance(results, dict):
        raise refused("results", f"are {shown(results)}; they must be a dict")
    for name, result in results.items():
        if not (
            isinstance(result, list | tuple)
            and len(result) == 2
            and all(
                isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < math.inf
                for v in result
            )
        ):
            raise refused(
                f"results[{shown(name)}]", f"is {shown(result)}; it must be two numbers >= 0"
            )
    policies = len(paths) if shape.snapshot_dir is not None else shape.policies
    if state["policies"] != policies:
        raise ValueError(
            f"the saved state has {shown(state['policies'])} policy opponents; this batch has "
            f"{policies}"
        )
    return paths


def check_arrays(arrays: object, shape: Shape, players: int) -> dict[str, np.ndarray]:
    """The state's arrays, each of the batch's shape and type, every value in its range, and
    at rest: every env's agent to move on a board with a move to make, no episode over."""
    if not isinstance(arrays, dict) or set(arrays) != set(STATE_ARRAYS):
        names = sorted(arrays, key=repr) if isinstance(arrays, dict) else shown(arrays)
        raise refused("arrays", f"are {shown(names)}; they must be {', '.join(STATE_ARRAYS)}")
    n = shape.num_envs
    colour = (0, 1, "a colour: 0 (Red) or 1 (Black)")
    ranges = {
        "_board": (0, len(shape.tables.boards) - 1, "a board number"),
        "_to_move": colour,
        "_agent": colour,
        "_starter": colour,
        # a match ends with the round that takes a score to the target: from target - 1 at most
        "_score": (0, shape.target - 1 + MAX_ROUND_MARGIN, "a score"),
        "_opponent": (0, players - 1, "an opponent's number"),
    }
    checked = {}
    for key in STATE_ARRAYS:
        like = (n, 2) if key == "_score" else (n,)
        array = typed_array(key, arrays[key], like, key == "_done")
        if key != "_done":
            low, high, what = ranges[key]
            bad = np.flatnonzero((array < low) | (array > high))
            if len(bad):
                where = np.unravel_index(bad[0], array.shape)
                allowed = f"it must be {what}" + ("" if ":" in what else f" from {low} to {high}")
                raise refused(key + indices(where), f"is {array[where]}; {allowed}")
        checked[key] = array
    check_at_rest(checked, shape.tables)
    return checked


def typed_array(key: str, value: object, like: tuple[int, ...], flags: bool) -> np.ndarray:
    """``value`` as an array of the shape ``like``: of booleans (``flags``) or of whole
    numbers that fit in 64 bits."""
    try:
        array = np.array(value)
    except (ValueError, TypeError, OverflowError):  # rows of different lengths, say
        raise refused(key, f"is not an array of the shape {list(like)}") from None
    if array.shape != like:
        raise refused(key, f"has the shape {list(array.shape)}; this batch's has {list(like)}")
    if array.dtype.kind not in ("b" if flags else "iu"):
        ok = (lambda v: isinstance(v, bool | np.bool_)) if flags else _whole
        where, item = next(((i, v) for i, v in items(value, ()) if not ok(v)), ((), value))
        allowed = "true or false" if flags else "a whole number"
        raise refused(key + indices(where), f"is {shown(item)}; it must be {allowed}")
    if array.dtype.kind == "u" and array.size and int(array.max()) > np.iinfo(np.int64).max:
        raise refused(key, "holds numbers too large for the batch")
    return array.astype(bool if flags else np.int64)


def items(value: object, where: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...], object]]:
    """Every item of the nested lists ``value``, with its indices, in order."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from items(item, (*where, i))
    else:
        yield where, value


def indices(where: tuple[Any, ...]) -> str:
    """An item's indices as Python writes them: ``[1][0]``."""
    return "".join(f"[{int(i)}]" for i in where)


def _whole(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_at_rest(arrays: dict[str, np.ndarray], tables: GameTables) -> None:
    """Between steps every env's agent is to move, on a board with a move to make (not one of
    a finished round), and no episode is over: ``reset`` and ``step`` leave the batch so, and
    the engine's next step starts from there."""
    board, to_move, agent = arrays["_board"], arrays["_to_move"], arrays["_agent"]
    problems = (
        (tables.over[board], "_board", "a board of a finished round", "game has a move to make"),
        (to_move != agent, "_to_move", "not its agent's colour", "agent is to move"),
        (arrays["_done"], "_done", "an episode over", "episode goes on"),
    )
    for bad, key, what, rest in problems:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise refused(
                f"{key}[{i}]", f"is {arrays[key][i]}, {what}; between steps every env's {rest}"
            )


def check_options(options: object) -> None:
    """The reset options a state keeps: a dict of ``agent_color`` and ``first``, each ``"R"``,
    ``"B"`` or None."""
    if not isinstance(options, dict):
        raise refused("options", f"are {shown(options)}; they must be a dict")
    for key, value in options.items():
        if key not in RESET_OPTIONS:
            raise refused("options", f"hold {shown(key)}; reset options are {RESET_OPTIONS}")
        if not (value is None or isinstance(value, str)) or value not in COLOR_CHOICES:
            raise refused(f"options[{key!r}]", f"is {shown(value)}; it must be 'R', 'B' or None")


def check_generators(state: dict[str, Any]) -> None:
    """Every generator state of ``state`` is one a PCG64 generator takes (each is tried on a
    scratch generator: numpy checks what no bound can)."""
    bots = state["bots"]
    if not isinstance(bots, dict) or sorted(bots) != sorted(BOT_NAMES):
        raise refused("bots", f"are {shown(bots)}; they must be the generators of {BOT_NAMES}")
    generators = {"rng": state["rng"], "policy_rng": state["policy_rng"]}
    generators.update({f"bots[{name!r}]": bots[name] for name in BOT_NAMES})
    for item, generator in generators.items():
        problem = pcg64_problem(generator)
        if problem is None:
            try:
                np.random.PCG64().state = generator
            except (ValueError, TypeError, KeyError, OverflowError) as error:
                problem = " ".join(str(error).split())[:100]
        if problem is not None:
            raise refused(item, f"is not a generator state that can be restored ({problem})")


def pcg64_problem(generator: object) -> str | None:
    """What is wrong with ``generator`` as a PCG64 state (``bit_generator.state``), or None:
    its name, and its words' types and ranges."""
    if not isinstance(generator, dict) or set(generator) != {
        "bit_generator",
        "state",
        "has_uint32",
        "uinteger",
    }:
        return "not a PCG64 state"
    if generator["bit_generator"] != "PCG64":
        return f"a {shown(generator['bit_generator'])} state, not PCG64"
    words = generator["state"]
    if not isinstance(words, dict) or set(words) != {"state", "inc"}:
        return "its state is not {'state', 'inc'}"
    for name, value, bits in (
        ("state", words["state"], 128),
        ("inc", words["inc"], 128),
        ("has_uint32", generator["has_uint32"], 1),
        ("uinteger", generator["uinteger"], 32),
    ):
        if not (_whole(value) and 0 <= value < 2**bits):
            return f"its {name} is {shown(value)}, not a whole number from 0 to 2**{bits} - 1"
    return None
