"""What a sweep of ``training/tune.py`` samples: its search space (a TOML file, see
``training/spaces/default.toml``) read and checked, each trial's settings sampled from it, and
the train.py config every trial starts from (the flags after ``--``)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from buttonup_env.game.files import read_regular_file, reason
from buttonup_env.players.selfplay import OpponentMix
from buttonup_env.ui.cli import fail
from training.config import TrainConfig, parse_config, resolve
from training.typed_json import FieldError, to_json, value_from_json

if TYPE_CHECKING:
    from optuna.trial import Trial

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_SPACE = Path(__file__).resolve().parent / "spaces" / "default.toml"

SET_BY_TUNE = ("preset", "seed", "total_steps", "run_name", "runs_dir", "resume", "progress")
"""TrainConfig fields that tune.py sets for every trial: not in a space, not after ``--``."""

SPEC_KEYS = {"low", "high", "log", "step", "choices"}

MAX_SPACE_BYTES = 1 << 20
"""The largest space file: a MiB (the default space is about a kB)."""


def tunable_defaults() -> dict[str, Any]:
    """The settings a space may sample, with train.py's default value of each (JSON types):
    TrainConfig's fields, ``opponents.NAME`` for the opponent mix, without SET_BY_TUNE."""
    defaults = to_json(TrainConfig())
    settings = {
        name: value
        for name, value in defaults.items()
        if name not in SET_BY_TUNE and name != "opponents"
    }
    for name in (f.name for f in dataclasses.fields(OpponentMix)):
        settings[f"opponents.{name}"] = defaults["opponents"][name]
    return settings


def read_space_file(path: Path) -> dict[str, Any]:
    """The TOML of the space file ``path``: a regular file (the one a link named by the user
    leads to) of at most :data:`MAX_SPACE_BYTES`, read as the package reads files it did not
    make. Anything else ends the script with one error line: a device such as ``/dev/zero``
    (endless) or a pipe (which waits for a writer), a longer file, text nested too deeply or
    an integer of more digits than Python reads."""
    try:
        text = read_regular_file(path.resolve(), MAX_SPACE_BYTES).decode("utf-8")
        return tomllib.loads(text)
    except OSError as error:
        fail(f"--space {path}: cannot read it ({reason(error)})")
    except UnicodeDecodeError:
        fail(f"--space {path}: cannot read it as TOML (it is not UTF-8 text)")
    except tomllib.TOMLDecodeError as error:
        fail(f"--space {path}: cannot read it as TOML ({error})")
    except ValueError:  # int() of more digits than Python reads
        fail(f"--space {path}: cannot read it as TOML (a number of more than 4,300 digits)")
    except RecursionError:
        fail(f"--space {path}: cannot read it as TOML (it is nested too deeply)")


def load_space(path: Path) -> dict[str, dict[str, Any]]:
    """Read a space file: parameter name -> its spec (``low``/``high``/``log``/``step`` or
    ``choices``). Nested tables (``[opponents] perfect = {...}``) give dotted names. Bad
    content ends the script with one error line."""
    data = read_space_file(path)
    known = tunable_defaults()
    space: dict[str, dict[str, Any]] = {}

    def unknown(name: str) -> NoReturn:
        fail(
            f"--space {path}: unknown parameter {name[:80]!r}; a space samples these "
            f"train.py settings: {', '.join(sorted(known))}"
        )

    def walk(table: dict[str, Any], prefix: str) -> None:
        for key, value in table.items():
            name = prefix + key
            if isinstance(value, dict) and not SPEC_KEYS & set(value) and value:
                if not any(k.startswith(f"{name}.") for k in known):  # no deeper than a name
                    unknown(name)
                walk(value, name + ".")
                continue
            if name not in known:
                unknown(name)
            if not isinstance(value, dict):
                fail(f"--space {path}: {name} needs a table (low/high or choices), got {value!r}")
            space[name] = check_spec(path, name, value)

    walk(data, "")
    if not space:
        fail(f"--space {path}: no parameter to sample")
    return space


def check_spec(path: Path, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One parameter's spec, checked for its shape (the values are checked by train.py)."""
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        fail(f"--space {path}: {name}: unknown key {unknown[0]!r} (known: {sorted(SPEC_KEYS)})")
    if "choices" in spec:
        choices = spec["choices"]
        if set(spec) != {"choices"}:
            fail(f"--space {path}: {name}: choices cannot go with low/high/log/step")
        if not isinstance(choices, list) or not choices:
            fail(f"--space {path}: {name}: choices must be a non-empty list")
        return {"choices": choices}
    if not {"low", "high"} <= set(spec):
        fail(f"--space {path}: {name}: give low and high, or choices")
    low, high = spec["low"], spec["high"]
    for value in (low, high, spec.get("step", 1)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            fail(f"--space {path}: {name}: low, high and step must be numbers, got {value!r}")
    if not low < high:
        fail(f"--space {path}: {name}: low must be below high, got {low} and {high}")
    if not isinstance(spec.get("log", False), bool):
        fail(f"--space {path}: {name}: log must be true or false")
    if spec.get("log") and "step" in spec:
        fail(f"--space {path}: {name}: step cannot go with log = true")
    if spec.get("log") and low <= 0:
        fail(f"--space {path}: {name}: log = true needs low > 0, got {low}")
    if "step" in spec and not spec["step"] > 0:
        fail(f"--space {path}: {name}: step must be > 0, got {spec['step']}")
    return dict(spec)


def encode_choice(value: Any) -> Any:
    """A choice as Optuna stores it: lists (``hidden``) as space-separated strings."""
    return " ".join(str(v) for v in value) if isinstance(value, list) else value


def sample(trial: Trial, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Sample every parameter of ``space`` for ``trial``: the settings, by name."""
    values: dict[str, Any] = {}
    for name, spec in space.items():
        if "choices" in spec:
            choices = {encode_choice(choice): choice for choice in spec["choices"]}
            values[name] = choices[trial.suggest_categorical(name, list(choices))]
        elif all(isinstance(spec[k], int) for k in ("low", "high")) and isinstance(
            spec.get("step", 1), int
        ):
            values[name] = trial.suggest_int(
                name,
                spec["low"],
                spec["high"],
                step=spec.get("step", 1),
                log=spec.get("log", False),
            )
        else:
            values[name] = trial.suggest_float(
                name,
                float(spec["low"]),
                float(spec["high"]),
                step=spec.get("step"),
                log=spec.get("log", False),
            )
    return values


# --- train.py's config ---------------------------------------------------------------------


def base_config(settings: dict[str, Any], seed: int) -> TrainConfig:
    """The config (not yet resolved) every trial of the study starts from: train.py's flags
    after ``--``, the study's preset and steps, and ``seed``; one worker per trial unless
    ``--workers`` is among the flags (docs/training.md: splitting the cores). tyro refuses a
    bad flag as it does for train.py, with its message and exit status 2."""
    config = parse_config(settings["train_args"], prog="tune.py [TUNE FLAGS] --")
    given = {token.split("=", 1)[0] for token in settings["train_args"]}
    workers = config.workers if "--workers" in given else 1  # the cores go to the sweep's workers
    return dataclasses.replace(
        config, preset=settings["preset"], total_steps=settings["steps"], seed=seed, workers=workers
    )


def check_train_args(train_args: list[str]) -> None:
    """Refuse the flags after ``--`` that tune.py sets itself."""
    own = {"--" + name.replace("_", "-") for name in SET_BY_TUNE} | {"--no-progress"}
    for token in train_args:
        flag = token.split("=", 1)[0].replace("_", "-")
        if flag in own:
            tune_flag = {"--total-steps": "--steps", "--runs-dir": "--runs-dir"}.get(flag, flag)
            hint = (
                f" (give {tune_flag} to tune.py, before --)"
                if flag in ("--preset", "--seed", "--total-steps", "--runs-dir")
                else ""
            )
            fail(f"{flag} after -- is set by tune.py for every trial{hint}")


def check_space(space: dict[str, dict[str, Any]], settings: dict[str, Any], path: Path) -> None:
    """Each bound and choice of ``space`` must make, alone on top of the study's flags, a
    configuration train.py accepts (combinations are checked when a trial is sampled)."""
    given = {t.split("=", 1)[0].replace("_", "-") for t in settings["train_args"]}
    base = base_config(settings, settings["seed"])
    for name, spec in space.items():
        flag = "--" + name.replace("_", "-")
        if {flag, flag.replace("--", "--no-", 1)} & given:
            fail(f"--space {path}: {name} is also set by a flag after --; give it in one place")
        for value in spec.get("choices", [spec.get("low"), spec.get("high")]):
            try:
                resolve(with_settings(base, {name: value}, f"--space {path}"))
            except FieldError as error:
                fail(str(error))
            except ValueError as error:
                fail(f"--space {path}: {name} = {value!r} is refused by train.py: {error}")


def with_settings(config: TrainConfig, values: dict[str, Any], source: str) -> TrainConfig:
    """``config`` with the settings ``values``: JSON values by field name, dotted for the
    opponent mix (``{"hidden": [64, 64], "opponents.perfect": 0.5}``), each read as its field's
    type (``FieldError``, a ``ValueError`` naming ``source`` and the field, for one that is
    not). Not resolved: :func:`resolve` checks the combination."""
    mix: dict[str, Any] = {}
    top: dict[str, Any] = {}
    for name, value in values.items():
        typed = value_from_json(TrainConfig, name, value, source)
        if name.startswith("opponents."):
            mix[name.removeprefix("opponents.")] = typed
        else:
            top[name] = typed
    if mix:
        top["opponents"] = dataclasses.replace(top.get("opponents", config.opponents), **mix)
    return dataclasses.replace(config, **top)
