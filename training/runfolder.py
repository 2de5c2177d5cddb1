"""A training run's folder: its format, its ``config.json``, its periodic evaluations as typed
rows, and the one error that anything wrong with it raises.

A run folder ``RUN`` holds:

* ``config.json``: the run's :class:`~training.config.RunConfig` (its fields at the top
  level), the ``format`` of the folder, the ``command`` that started the run and the
  ``code_version`` that ran it;
* ``checkpoints/NAME.pt`` and ``NAME.json`` for ``latest`` and ``best`` (the lowest regret
  against the perfect bot, in match or round terms by the run's objective: :data:`BEST_BY`):
  written and read back by :mod:`training.checkpoints`, ``latest``'s holding the point a
  resumed run goes on from (:mod:`training.resume`);
* ``snapshots/step_NNNNNNNNN.onnx``, the opponent pool; ``eval.jsonl``, the periodic
  evaluations (:class:`EvalRow`); ``tb/``, the TensorBoard logs; at the end ``final.onnx`` and
  ``best.onnx`` with their cards.

Every saved value is checked before it is used, so a run folder someone sent you is safe to
resume or export: the JSON files are read through :mod:`training.typed_json`, the network is
rebuilt from the checked config and every tensor is checked against it. Whatever is wrong
raises :class:`RunFolderError`, one sentence naming the file (and the field). A folder of
another ``format`` is refused in one sentence that names the version of buttonup-env that
wrote it. Nothing in a run folder leads a read or a write outside it: every file is read and
written through ``buttonup_env.game.folders.SafeFolder``'s checked paths.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar

from buttonup_env.game.files import reason
from buttonup_env.game.folders import FolderError, SafeFolder
from buttonup_env.game.records import shown
from buttonup_env.game.rules import MOVES_PER_ROUND
from buttonup_env.players.onnx_graph import MAX_POLICY_BYTES
from buttonup_env.players.selfplay import SNAPSHOT_GLOB, OpponentMix
from training.bounds import CODE_VERSION, code_version
from training.config import (
    OBJECTIVES,
    RunConfig,
    TrainConfig,
    check,
    preset_values,
)
from training.typed_json import (
    FieldError,
    Length,
    Omittable,
    Pattern,
    Range,
    from_json,
    parse_json,
    to_json,
)

T = TypeVar("T")

FORMAT = "buttonup-env run folder 3"
"""The ``format`` of the run folders this version writes and reads (in ``config.json`` and
every checkpoint's ``NAME.json``)."""

MAX_JSON_BYTES = 64 << 20
"""The largest JSON file of a run folder that is read (config.json, a checkpoint's
NAME.json: a few kB, a few MB for a resume point of many envs)."""

MAX_EVAL_BYTES = 16 << 20
"""The largest eval.jsonl that is read (a run makes at most 10,000 evaluations of well under
a kB each: see training.bounds.MAX_PERIODIC)."""

Count = Annotated[int, Range(0)]


class RunFolderError(FolderError):
    """A run folder that cannot be resumed, exported or written: the one error of a run
    folder, its message one sentence naming the file (and the field)."""


def refused(source: Path | str, field: str, text: str) -> RunFolderError:
    """The error of ``field`` of the file ``source``: ``"SOURCE: FIELD TEXT"``."""
    return RunFolderError(f"{source}: {field or 'the file'} {text}")


def refused_value(source: Path | str, field: str, value: object, allowed: str) -> RunFolderError:
    """The error of a value that ``field`` of ``source`` may not hold, and what it may."""
    return refused(source, field, f"is {shown(value, 40)}; {allowed}")


def read_typed(cls: type[T], data: object, source: Path | str) -> T:
    """The dataclass ``cls`` read from the JSON value ``data`` of the file ``source``, every
    field checked (:func:`training.typed_json.from_json`; an object is expected)."""
    if not isinstance(data, dict):
        raise refused_value(source, "", data, "it must be a JSON object")
    try:
        return from_json(cls, data, source)
    except FieldError as error:
        raise RunFolderError(str(error)) from None


# --- the periodic evaluations ------------------------------------------------------------

Share = Annotated[float, Range(0, 1)]
Regret = Annotated[float, Range(0)]


EVAL_BOTS = ("random", "greedy", "perfect")
"""The bots a periodic evaluation plays, in the order of their ``eval.jsonl`` fields."""

BEST_BY = {
    "match": ("match_regret_perfect", "the lowest match regret against the perfect bot"),
    "round": ("regret_perfect", "the lowest round regret against the perfect bot"),
}
"""By a run's objective: the :class:`EvalRow` field that chooses its best checkpoint, and the
choice in words (a card's ``chosen_by``). The match's exploitability would judge a match run
better, but for a policy that sees the score it takes minutes, too slow for a
periodic evaluation (``docs/training.md``)."""


@dataclass(frozen=True)
class EvalRow:
    """A periodic evaluation, one line of ``eval.jsonl`` (``training.periodic.evaluate_learner``
    makes it): the step and training minutes, the win rate and the mean regret against each
    bot of :data:`EVAL_BOTS` (round points lost per decision), the regret against the perfect
    bot by move of the round, the match regret against each bot (the probability of winning
    the match lost per decision; left out of rows written before it was measured), and the
    rating against the ladder (left out without one)."""

    steps: Count
    minutes: Annotated[float, Range(0)]
    win_rate_random: Share
    regret_random: Regret
    win_rate_greedy: Share
    regret_greedy: Regret
    win_rate_perfect: Share
    regret_perfect: Regret
    regret_by_move_perfect: Annotated[tuple[Regret | None, ...], Length(MOVES_PER_ROUND)]
    match_regret_random: Annotated[Regret | None, Omittable()] = None
    match_regret_greedy: Annotated[Regret | None, Omittable()] = None
    match_regret_perfect: Annotated[Regret | None, Omittable()] = None
    elo: Annotated[float | None, Omittable()] = None
    elo_low: Annotated[float | None, Omittable()] = None
    elo_high: Annotated[float | None, Omittable()] = None
    ladder_matches: Annotated[Count | None, Omittable()] = None
    ladder_score: Annotated[Share | None, Omittable()] = None

    def win_rate(self, bot: str) -> float:
        """The share of the matches won against the bot ``bot`` (one of :data:`EVAL_BOTS`)."""
        rates = (self.win_rate_random, self.win_rate_greedy, self.win_rate_perfect)
        return dict(zip(EVAL_BOTS, rates, strict=True))[bot]

    def regret(self, bot: str) -> float:
        """The mean regret per decision in the matches against the bot ``bot``."""
        regrets = (self.regret_random, self.regret_greedy, self.regret_perfect)
        return dict(zip(EVAL_BOTS, regrets, strict=True))[bot]

    def match_regret(self, bot: str) -> float | None:
        """The mean match regret per decision in the matches against the bot ``bot`` (None in
        a row written before it was measured)."""
        regrets = (self.match_regret_random, self.match_regret_greedy, self.match_regret_perfect)
        return dict(zip(EVAL_BOTS, regrets, strict=True))[bot]

    def best_figure(self, objective: str) -> float:
        """The figure that chooses a run's best checkpoint (the lowest is the best): with the
        objective ``"match"`` the match regret against the perfect bot (the match-perfect
        player), with ``"round"`` the round regret against it (:data:`BEST_BY`). A row
        without the match regret counts as infinitely bad for a match run."""
        figure = getattr(self, BEST_BY[objective][0])
        return math.inf if figure is None else figure

    def figures(self) -> dict[str, Any]:
        """The win rates and regrets (round and match) against the bots, by their
        ``eval.jsonl`` names (a trial's final figures)."""
        return {
            key: value
            for key, value in to_json(self).items()
            if key.startswith(("regret_", "match_regret_", "win_rate_"))
        }

    def message(self) -> str:
        """The line the trainer prints for it."""
        line = f"step {self.steps:>10,}  regret vs perfect {self.regret_perfect:.3f}"
        if self.match_regret_perfect is not None:
            line += f"  match regret {self.match_regret_perfect:.5f}"
        line += "  win rate: " + ", ".join(f"{n} {100 * self.win_rate(n):.0f}%" for n in EVAL_BOTS)
        return line + ("" if self.elo is None else f"  Elo {self.elo:.0f}")


def eval_rows(text: bytes, source: Path | str) -> list[EvalRow]:
    """The rows of the JSON Lines ``text`` (read from ``source``), each checked as an
    :class:`EvalRow` (:class:`RunFolderError` naming the line and the field)."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            where = f"{source} line {number}"
            rows.append(read_typed(EvalRow, parse(line, where), where))
    return rows


def parse(data: bytes, source: Path | str) -> object:
    """The JSON in ``data``; :class:`RunFolderError` naming ``source`` when it is not JSON."""
    try:
        return parse_json(data, source)
    except FieldError as error:
        raise RunFolderError(str(error)) from None


def _row_after(line: bytes, steps: int) -> bool:
    """Whether the line of ``eval.jsonl`` is an evaluation of a step after ``steps`` (a line
    that is not one of train.py's rows is none)."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return False
    after = row.get("steps") if isinstance(row, dict) else None
    return isinstance(after, int) and not isinstance(after, bool) and after > steps


# --- the folder --------------------------------------------------------------------------


@dataclass(frozen=True)
class RunFiles(SafeFolder):
    """A run folder's files, read and written through checked paths, before (or without)
    its config being read; what is refused raises :class:`RunFolderError`."""

    error: ClassVar[type[FolderError]] = RunFolderError
    kind: ClassVar[str] = "a run folder"

    @property
    def eval_file(self) -> Path:
        """``eval.jsonl``, the periodic evaluations, one JSON object a line."""
        return self.path / "eval.jsonl"

    def read_evaluations(self) -> list[EvalRow]:
        """The periodic evaluations (``eval.jsonl``; none when it is missing), each line
        checked as an :class:`EvalRow`."""
        if not os.path.lexists(self.eval_file):
            return []
        return eval_rows(self.read(self.eval_file, MAX_EVAL_BYTES), self.eval_file)

    def snapshot_path(self, steps: int) -> Path:
        """The opponent pool's snapshot of the learner at ``steps``
        (``snapshots/step_N.onnx``), checked to be written."""
        return self.check(self.path / "snapshots" / f"step_{steps:09d}.onnx")


def snapshot_path(run_dir: Path, steps: int) -> Path:
    """:meth:`RunFiles.snapshot_path` of the run folder ``run_dir``."""
    return RunFiles(run_dir).snapshot_path(steps)


def check_format(run_dir: Path, config: dict[str, Any]) -> None:
    """:class:`RunFolderError` unless ``config`` (the run's config.json) says this version's
    :data:`FORMAT`: one sentence naming the version of buttonup-env that wrote the run."""
    if config.get("format") == FORMAT:
        return
    version = config.get("code_version")
    if not (isinstance(version, str) and re.fullmatch(CODE_VERSION, version)):
        version = "another version of buttonup-env"  # anything else is not printed
    commit = re.search(r"\(([0-9a-f]{7,40})(\+dirty)?\)$", version)
    how = f" (git checkout {commit[1]})" if commit else ""
    raise RunFolderError(
        f"{run_dir} was written by {version}, whose run folders this version does not read; "
        f"resume or export it with that version{how}"
    )


@dataclass(frozen=True)
class Origin:
    """How a run was started: the fields of ``config.json`` beside its settings. The command
    is kept as it was typed, for the record, but never copied out of the folder: a card and
    the terminal get one rebuilt from the checked settings (:meth:`RunFolder.card_config`)."""

    format: str
    command: str
    code_version: Annotated[str, Pattern(CODE_VERSION, "a version as buttonup-env writes it")]


@dataclass(frozen=True)
class RunFolder(RunFiles):
    """A run folder (``path``) with its checked config, made by :meth:`create` or read back by
    :meth:`open`; every file of the folder is written and read through it."""

    config: RunConfig
    origin: Origin

    @classmethod
    def create(cls, config: RunConfig, command: str) -> RunFolder:
        """A new run folder for ``config``: ``RUNS_DIR/RUN_NAME`` (by default
        ``PRESET-sSEED-DATE-TIME``), with its ``config.json``. ``command`` started it."""
        name = config.run_name or f"{config.preset}-s{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
        path = config.runs_dir / name
        if os.path.lexists(path):
            raise RunFolderError(f"run folder {path} exists; pick another --run-name")
        run = cls(path, config, Origin(FORMAT, command, code_version()))
        above = config.runs_dir.parent
        if not above.is_dir():  # --runs-dir is made, nothing above it
            what = "is not a folder" if os.path.lexists(above) else "does not exist"
            raise RunFolderError(f"--runs-dir {config.runs_dir}: {above} {what}")
        try:
            config.runs_dir.mkdir(exist_ok=True)
            path.mkdir()
        except OSError as error:
            raise RunFolderError(
                f"cannot make the run folder {path} ({reason(error)}); give another --runs-dir"
            ) from None
        run.folder("snapshots")
        saved = {**to_json(run.origin), **to_json(config)}
        run.write(path / "config.json", json.dumps(saved, indent=2).encode())
        return run

    @classmethod
    def open(cls, path: Path, named: bool = True) -> RunFolder:
        """The run folder at ``path`` (``named``: the path the user gave, which may be a
        symbolic link), nothing in it a link
        (``SafeFolder.check_tree``), its ``config.json``
        checked: the format, every setting's type and bounds, and the rules
        :func:`~training.config.check` holds a new run to."""
        file = path / "config.json"
        if not file.is_file():
            raise RunFolderError(f"{path} is not a run folder (it has no config.json)")
        files = RunFiles(path)
        files.check_tree(named)
        data = parse(files.read(file, MAX_JSON_BYTES), file)
        if not isinstance(data, dict):
            raise refused_value(file, "", data, "it must be a JSON object")
        check_format(path, data)
        heads = {f.name for f in dataclasses.fields(Origin)}
        origin = read_typed(Origin, {k: v for k, v in data.items() if k in heads}, file)
        config = read_typed(RunConfig, {k: v for k, v in data.items() if k not in heads}, file)
        try:
            check(config)
        except ValueError as error:
            raise RunFolderError(f"{file} breaks the rules of a training config: {error}") from None
        return cls(path, config, origin)

    def worker_files(self, resuming: bool) -> dict[str, bytes]:
        """What the other workers of a run read of its folder, by path in it: ``config.json``,
        the snapshots, and when ``resuming`` the checkpoint ``latest``. Worker 0 sends them to
        the others, which may be on other machines (:meth:`mirror`)."""
        names = ["config.json"]
        snapshots = sorted((self.path / "snapshots").glob(SNAPSHOT_GLOB))
        names += [f"snapshots/{path.name}" for path in snapshots]
        if resuming:
            names += ["checkpoints/latest.pt", "checkpoints/latest.json"]
        return {name: self.check(self.path / name).read_bytes() for name in names}

    @classmethod
    def mirror(cls, files: dict[str, bytes], folder: Path) -> RunFolder:
        """Another worker's copy of the run folder, in the empty ``folder``: the ``files`` of
        :meth:`worker_files`, read back as a run folder is (:meth:`open`). The worker reads
        the config and the checkpoint there, and its opponent pool the snapshots, to which it
        adds a copy of each new one; it writes nothing else."""
        for name, data in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (folder / "snapshots").mkdir(exist_ok=True)
        return cls.open(folder)

    def card_config(self) -> dict[str, Any]:
        """The run's command, code version and settings, as a model card holds them. The
        command is rebuilt from the checked settings (the train.py flags that give them),
        never copied from config.json: a command there could hold anything, ``$(...)``
        included. Where the run was kept (``runs_dir``, a path of any characters) is left
        out of both."""
        settings = dataclasses.replace(self.config, runs_dir=Path("runs"))
        return {
            "command": shlex.join(["python", "training/train.py", *train_flags(settings)]),
            "code_version": self.origin.code_version,
            **{k: v for k, v in to_json(self.config).items() if k not in ("runs_dir", "resume")},
        }

    def export_path(self, name: str) -> Path:
        """``NAME.onnx`` in the run folder, for a policy and its card ``NAME.json``, both
        checked."""
        self.check(self.path / f"{name}.json")
        return self.check(self.path / f"{name}.onnx")

    def averaged_snapshots(self, steps: int) -> dict[str, bytes]:
        """The snapshots that ``averaged.onnx`` averages with the weights at ``steps``, by
        path: those of the run's last ``average_last`` share of steps, before ``steps`` (none
        for 0)."""
        if self.config.average_last == 0:
            return {}
        first = steps - self.config.average_last * steps
        found = {}
        for path in sorted((self.path / "snapshots").glob(SNAPSHOT_GLOB)):
            step = snapshot_step(path)
            if step is not None and first <= step < steps:
                found[str(path)] = self.read(path, MAX_POLICY_BYTES)
        return found

    def append_eval(self, row: EvalRow) -> None:
        """Add ``row`` to ``eval.jsonl``."""
        self.append(self.eval_file, json.dumps(to_json(row)) + "\n")

    def forget_after(self, steps: int) -> None:
        """Remove the periodic evaluations and the snapshots of the steps after ``steps``, the
        checkpoint a run resumes from. A run killed after its last checkpoint (``kill -9``, a
        lost machine) left them; the resumed run trains those steps again and writes them
        again, as they were (a snapshot left there would join the opponent pool early)."""
        for path in (self.path / "snapshots").glob(SNAPSHOT_GLOB):
            step = snapshot_step(path)
            if step is not None and step > steps:
                path.unlink()
        if not os.path.lexists(self.eval_file):
            return
        lines = self.read(self.eval_file, MAX_EVAL_BYTES).splitlines(keepends=True)
        kept = [line for line in lines if not _row_after(line, steps)]
        if len(kept) < len(lines):
            self.write(self.eval_file, b"".join(kept))


def snapshot_step(path: Path) -> int | None:
    """The step of the snapshot ``path`` (``snapshots/step_N.onnx``; None for another name)."""
    found = re.fullmatch(r"step_(\d{9})\.onnx", path.name)
    return int(found[1]) if found else None


def train_flags(config: RunConfig) -> list[str]:
    """The train.py flags that give ``config``: ``--preset`` and each setting that differs
    from what the preset gives (a run's recorded command, for one)."""
    default = preset_values(TrainConfig(preset=config.preset))
    default["encoding"], default["reward"] = OBJECTIVES[config.objective]  # what auto gives
    flags = ["--preset", config.preset]
    for field in dataclasses.fields(TrainConfig):
        value, base = getattr(config, field.name), default[field.name]
        if field.name == "opponents":
            pairs = [
                (f"opponents.{f.name}", getattr(value, f.name), getattr(base, f.name))
                for f in dataclasses.fields(OpponentMix)
            ]
        else:
            pairs = [(field.name, value, base)]
        for name, mine, theirs in pairs:
            if mine != theirs or field.name in ("bfloat16", "workers"):  # they follow the CPU
                flags += _flag(name, mine)
    return flags


def _flag(name: str, value: Any) -> list[str]:
    """The flag that sets ``name`` to ``value``, as tyro reads it."""
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return [flag if value else flag.replace("--", "--no-", 1)]
    if isinstance(value, tuple):
        return [flag, *map(str, value)]
    return [flag, repr(value) if isinstance(value, float) else str(value)]
