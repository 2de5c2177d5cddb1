"""Results of training/tune.py studies (or of run folders): a markdown table and PNG plots.

    python training/report.py --study quick10               # a study in runs/optuna.db
    python training/report.py --study quick10 lr3e4         # many-seed studies side by side
    python training/report.py --runs runs/quick10           # run folders (of tune.py or train.py)
    python training/report.py --runs runs/NAME --ratings    # and its snapshots' ratings
    python training/report.py --study lr --storage postgresql+psycopg://USER:PW@HOST/DB

Writes OUT/report.md (and prints it), report.json with the same figures, and PNG plots beside
them (OUT: runs/report-NAME by default, made if missing; its own folder must exist). An
existing report or plot there is kept unless ``--force`` is given: the report stops before any
work.

Many-seed results (studies made with --seeds, and run folders; each study or folder of runs is
a group): for each figure at the end of training (the match regret and the round regret
against the perfect bot, the win rate against each bot, the exploitability; the match
exploitability with --match-exploitability), the interquartile mean (IQM: the mean of the
middle half of the runs) with a 95% stratified bootstrap confidence interval, computed with
rliable (Agarwal et al., "Deep RL at the edge of the statistical precipice", 2021); the same
IQM and intervals at every evaluation step for the learning curves (curves.png) and side by
side for the final figures (final.png); the time to quality, in round regret and in match
regret. Only complete runs count.

Sweeps (a study made with --trials and a space): the best trials with their parameters, each
parameter's importance (Optuna's fANOVA) and the median regret for each of its values (or each
half of its range), the regret of every trial in order (history.png) and against each
parameter (params.png).

Ratings (``--ratings``, with run folders): every snapshot of a run rated against a fixed ladder
of bots (``buttonup_env.players.league.rate_against_ladder``) beside its exact exploitability, the
rank correlation of the two, and ratings-RUN.png: rating against steps (with the ratings logged by
the periodic evaluations) and rating against exploitability. See docs/league.md.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import tyro

from buttonup_env.game.folders import FolderError
from buttonup_env.players.league import DEFAULT_LADDER
from buttonup_env.ui.cli import (
    Named,
    check_outputs,
    fail,
    make_output_folder,
    run_cli,
    write_output,
)
from training.bounds import Matches, Seed, code_version
from training.ratings_report import Ladder, check_folder, rated_folders, ratings_report
from training.runfolder import EvalRow, RunFiles
from training.seeds_report import Bootstrap, Run, seeds_report
from training.studies import final_figures, first_line, handed_over, open_storage, safe_url
from training.sweep_report import sweep_report
from training.typed_json import FieldError, Range, check_fields, from_json


@dataclass
class ReportConfig:
    """Tables and plots of tune.py studies or run folders (IQM and bootstrap CIs by rliable)."""

    study: tuple[str, ...] = ()
    """Studies to report: one sweep, or one or more many-seed studies (one group each)."""
    runs: tuple[Path, ...] = ()
    """Run folders, or folders of run folders (each such folder is one group)."""
    storage: str | None = None
    """Optuna storage URL of the studies (default: sqlite:///RUNS_DIR/optuna.db)."""
    runs_dir: Path = Path("runs")
    """Where the default storage is, and the default OUT."""
    out: Path | None = None
    """Folder for report.md, report.json and the plots (default: RUNS_DIR/report-NAME; made
    if missing, its own folder must exist)."""
    force: bool = False
    """Replace the report and plots in OUT if they exist (without it, an existing file is kept
    and the report stops before any work)."""
    reps: Annotated[int, Range(1, 1_000_000)] = 2000
    """Bootstrap resamples of the confidence intervals."""
    seed: Seed = 0
    """Seed of the bootstrap (of each interval: the same seed gives the same report) and of the
    matches of --ratings."""
    top: Annotated[int, Range(1, 10_000)] = 10
    """Best trials listed for a sweep."""
    exploitability: bool = True
    """For run folders that have no trial.json (plain train.py runs), measure the exact
    exploitability of the policy each hands over (averaged.onnx, or final.onnx for a run without
    one): about 5-20 s each on a 2-core machine."""
    match_exploitability: bool = False
    """With --runs: also measure the exact match exploitability of each run's policy
    (tune.py's trials too), in the many-seed table: about 35 s a run on a 2-core machine for a
    policy blind to the score, minutes for one that sees it (506 s for a smoke run's policy
    with the cores shared)."""
    ratings: bool = False
    """With --runs: rate every snapshot of each run against the ladder and measure its exact
    exploitability (about 5-20 s a snapshot, kept in the run's ratings.jsonl for next time);
    draws ratings-RUN.png (rating against steps, rating against exploitability) and adds a
    table with their rank correlation."""
    ladder: tuple[str, ...] = DEFAULT_LADDER
    """With --ratings: the reference players (see buttonup_env.players.league)."""
    ladder_matches: Matches = 1000
    """With --ratings: matches of each snapshot against the ladder, shared among its players."""


# --- reading ------------------------------------------------------------------------------


def load_study(storage: Any, name: str, url: str) -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        fail(f"there is no study {name!r} in {safe_url(url)}")


def study_runs(study: Any) -> list[Run]:
    """The complete trials of a study as runs."""
    from optuna.trial import TrialState

    return [
        Run(
            name=f"trial {t.number}",
            final=t.user_attrs.get("final", {}),
            evals=read_rows(
                t.user_attrs.get("evals", []), f"study {study.study_name} trial {t.number}"
            ),
            seed=t.user_attrs.get("seed"),
        )
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    ]


def read_rows(rows: object, source: str) -> list[EvalRow]:
    """The periodic evaluations a trial stored (``source`` names it), each checked as an
    :class:`~training.runfolder.EvalRow`; a damaged one ends the report with one error line."""
    if not isinstance(rows, list):
        fail(f"{source}: its evals are not a list of periodic evaluations")
    try:
        return [from_json(EvalRow, row, source, f"evals[{i}]") for i, row in enumerate(rows)]
    except FieldError as error:
        fail(str(error))


def folder_runs(path: Path, measure: bool = True, match: bool = False) -> list[Run]:
    """The finished runs in ``path``: the run folder itself, or the run folders in it. A run's
    figures come from tune.py's trial.json, or else as tune.py finds them: its last periodic
    evaluation and (``measure``) the exploitability of the policy it hands over (averaged.onnx,
    or final.onnx for a run without one); with ``match``, that policy's match exploitability
    too."""
    if not path.is_dir():
        fail(f"--runs {path}: no such folder")
    folders = (
        [path]
        if (path / "config.json").is_file()
        else sorted(p for p in path.iterdir() if (p / "config.json").is_file())
    )
    runs = []
    for folder in folders:
        if not (folder / "final.onnx").is_file():
            continue  # not finished: interrupted, pruned or under way
        check_folder(folder, named=folder == path)
        config = read_json(folder / "config.json")
        objective = "match" if config.get("objective") == "match" else "round"
        if (folder / "trial.json").is_file():
            card = read_json(folder / "trial.json")
            evals = read_rows(card.get("evals", []), str(folder / "trial.json"))
            final = dict(card.get("final", {}))
            if match and "match_exploitability" not in final:
                final.update(measured(folder, [], False, objective, match))
            runs.append(Run(folder.name, final, evals, card.get("seed")))
            continue
        try:
            rows = RunFiles(folder).read_evaluations()
        except FolderError as error:
            fail(str(error))
        if rows:
            final = measured(folder, rows, measure, objective, match)
            seed = config.get("seed")
            seed = seed if type(seed) is int else None  # shown in the report: a number or none
            runs.append(Run(folder.name, final, rows, seed))
    if not runs:
        fail(f"--runs {path}: no finished run folder there (one with config.json and final.onnx)")
    return runs


def measured(
    folder: Path, rows: list[EvalRow], measure: bool, objective: str, match: bool
) -> dict[str, Any]:
    """:func:`~training.studies.final_figures` of the run ``folder``; one error line when the
    policy it hands over cannot be measured."""
    try:
        return final_figures(folder, rows, measure, objective, match)
    except (OSError, ValueError) as error:
        fail(f"{handed_over(folder)} cannot be measured ({first_line(error)})")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file of a run folder (one object); a damaged one ends the script with one
    error line."""
    try:
        data = json.loads(path.read_bytes())
    except RecursionError:
        fail(f"{path} is damaged (its JSON is nested too deeply)")
    except (OSError, ValueError) as error:
        fail(f"{path} is damaged ({error})")
    if not isinstance(data, dict):
        fail(f"{path} is damaged (a JSON object was expected, not {type(data).__name__})")
    return data


# --- main ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> Path:
    argv = sys.argv[1:] if argv is None else argv
    config = read_arguments(argv)
    sources: list[str] = []
    groups, sweep, url = read_studies(config, sources)
    run_groups = [(path, group_name(path)) for path in config.runs]
    names = list(groups) + [group for _, group in run_groups if group not in groups]
    name = sweep.study_name if sweep is not None else "-".join(dict.fromkeys(names))
    out = config.out or config.runs_dir / f"report-{name}"
    check_output_files(config, out, sweep is not None, url)
    for path, group in run_groups:
        runs = folder_runs(path, config.exploitability, config.match_exploitability)
        groups.setdefault(group, []).extend(runs)
        sources.append(f"run folders in {path}")
    if sweep is not None:
        body, figures = sweep_report(sweep, config.top, out)
    else:
        body, figures = seeds_report(groups, Bootstrap(config.reps, config.seed), out)
    if config.ratings:
        folders = rated_folders(config.runs)
        if not folders:
            fail(f"--ratings: no run folder with snapshots in {', '.join(map(str, config.runs))}")
        ladder = Ladder(config.ladder, config.ladder_matches, config.seed)
        ratings_body, figures["ratings"] = ratings_report(folders, ladder, out)
        body += "\n\n" + ratings_body
    command = shlex.join(["python", "training/report.py", *argv])
    text = write_report(out, f"# Report: {name}", command, sources, body, figures, config)
    print(text)
    print(f"wrote {out / 'report.md'}, report.json and the plots in {out}")
    return out


def read_arguments(argv: list[str]) -> ReportConfig:
    """The command line ``argv``, checked (one error line for a bad one)."""
    config = tyro.cli(ReportConfig, args=argv, description=__doc__)
    if not config.study and not config.runs:
        fail("give --study NAME (a study of training/tune.py) or --runs FOLDER")
    if config.ratings and not config.runs:
        fail("--ratings rates the snapshots of run folders: give --runs FOLDER")
    if config.match_exploitability and not config.runs:
        fail("--match-exploitability measures the policies of run folders: give --runs FOLDER")
    if config.ratings:
        try:
            from buttonup_env.players.league import check_ladder

            ladder = check_ladder(config.ladder)
        except ValueError as error:
            fail(f"--ladder: {error}")
        config = dataclasses.replace(config, ladder=ladder)  # the players' names, normalised
        if config.ladder_matches < len(ladder):
            fail(f"--ladder-matches must be at least {len(ladder)}, got {config.ladder_matches}")
    try:
        check_fields(config)
    except ValueError as error:
        fail(str(error))
    for path in config.runs:
        if not path.is_dir():
            fail(f"--runs {path}: no such folder")
    return config


def read_studies(
    config: ReportConfig, sources: list[str]
) -> tuple[dict[str, list[Run]], Any, str | None]:
    """The many-seed studies of ``config`` as groups of runs, the sweep (None unless one is
    reported), and the storage's URL (None without studies); each study named in
    ``sources``."""
    groups: dict[str, list[Run]] = {}
    if not config.study:
        return groups, None, None
    sweep = None
    url = config.storage or f"sqlite:///{config.runs_dir / 'optuna.db'}"
    storage = open_storage(url, create=False)
    for name in config.study:
        study = load_study(storage, name, url)
        settings = study.user_attrs.get("tune", {})
        if settings.get("mode") == "sweep":
            if len(config.study) > 1 or config.runs:
                fail(f"study {name!r} is a sweep: report it alone")
            sweep = study
        else:
            groups[name] = study_runs(study)
            if not groups[name]:
                fail(f"study {name!r} has no complete trial yet")
        command = settings_command(settings, name, study.user_attrs.get("trials"))
        sources.append(f"study {name} in {safe_url(url)}" + (f": `{command}`" if settings else ""))
    return groups, sweep, url


def write_report(
    out: Path,
    title: str,
    command: str,
    sources: list[str],
    body: str,
    figures: dict[str, Any],
    config: ReportConfig,
) -> str:
    """Write ``report.md`` (returned) and ``report.json`` into ``out``."""
    made = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    header = [title, "", f"Made {made} by `{command}` ({code_version()}).", ""]
    header += [*(f"- {source}" for source in sources), ""]
    text = "\n".join(header) + "\n" + body + "\n"
    write_output(out / "report.md", text.encode())
    card = {
        "command": command,
        "code_version": code_version(),
        "sources": sources,
        "bootstrap": {"reps": config.reps, "seed": config.seed, "confidence": 0.95},
        "figures": figures,
    }
    write_output(out / "report.json", (json.dumps(card, indent=2) + "\n").encode())
    return text


def group_name(path: Path) -> str:
    """The group of ``--runs PATH``: a run folder's parent's name, or a folder's own."""
    is_run = (path / "config.json").is_file()
    return path.resolve().parent.name if is_run else path.resolve().name


def check_output_files(config: ReportConfig, out: Path, sweep: bool, url: str | None) -> None:
    """Make the folder ``out`` (not its own folder) and check the files the report will write
    there (``buttonup_env.ui.cli.check_outputs``): none replaces an existing one without
    --force, nor the study's SQLite file; one error line otherwise, before any work."""
    pictures = ["history.png", "params.png"] if sweep else ["curves.png", "final.png"]
    pictures += [] if sweep else ["time_to_quality.png"]
    if config.ratings:
        pictures += [f"ratings-{run.name}.png" for run in rated_folders(config.runs)]
    inputs: list[Named] = []
    if url is not None and url.startswith("sqlite:///"):
        inputs.append(("--storage", url.removeprefix("sqlite:///")))
    try:
        make_output_folder("--out", out)
        files = ["report.md", "report.json", *pictures]
        check_outputs([("--out", out / file) for file in files], inputs, config.force)
    except ValueError as error:
        fail(str(error))


def settings_command(settings: dict[str, Any], name: str, trials: int | None) -> str:
    """The tune.py command of a study (without --storage and --space), from its settings."""
    args = ["python", "training/tune.py", "--study", name]
    if settings.get("mode") == "seeds":
        args += ["--seeds", str(settings["seeds"])]
    else:
        args += ["--trials", str(trials)]
    args += ["--preset", settings.get("preset", "?"), "--seed", str(settings.get("seed", 0))]
    if settings.get("steps") is not None:
        args += ["--steps", str(settings["steps"])]
    if settings.get("mode") == "sweep" and settings.get("pruner", "median") != "median":
        args += ["--pruner", settings["pruner"]]
    if settings.get("mode") == "sweep" and settings.get("startup_trials", 5) != 5:
        args += ["--startup-trials", str(settings["startup_trials"])]
    if settings.get("exploitability") is False:
        args.append("--no-exploitability")
    if settings.get("train_args"):
        args += ["--", *settings["train_args"]]
    return shlex.join(args)


if __name__ == "__main__":
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    run_cli(main)
