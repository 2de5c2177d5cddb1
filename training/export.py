"""Export a trained policy to ONNX with its model card.

    python training/export.py runs/NAME --out agent.onnx     # the policy training hands over
    python training/export.py runs/NAME --which best --out my-agent.onnx
    python training/export.py runs/NAME --which latest --out last.onnx  # the last weights alone
    python training/export.py runs/NAME --out models/buttonup-ppo.onnx --force  # ship it
    python training/export.py my_ppo.zip --trusted           # a model from your own script

Writes ``OUT`` (the policy network: observations to action logits; needs only onnxruntime to
run, see ``buttonup_env.load_policy``) and ``OUT`` with ``.json`` (the card: the training
command, config, seed, code version, training steps and time, the evaluations against the
random, greedy, margin and perfect bots with the round and the match regret, the exact
exploitability of the match and of the round, the audit of every decision at 0-0
(``--audit-scores all``: at every score), the targets met or missed, each figure with the
command that gives it again). It takes minutes, most of it the match's exploitability
(``--no-best-response`` leaves both exploitabilities out). Training calls the same code at its
end, without the exploitabilities and the audit. Neither file replaces an existing one
without ``--force`` (training wrote ``RUN/averaged.onnx`` already), nor one the export reads; the
folder of ``OUT`` must exist. The policies shipped with the package are the ``.onnx`` files
(and cards) in ``models/``: exporting there adds one, loadable by its file name (or replaces
one, with ``--force``).

It also takes a Stable-Baselines3 ``.zip`` saved by your own script (``model.save(...)``): a
``MaskablePPO`` or ``PPO`` model with SB3's ``MlpPolicy``, or the package's ``RingPolicy``,
trained on ButtonUp-v0 or its ``RingObservation`` wrapper. Loading one unpickles code, so it
is refused without ``--trusted``; the card then says what the file records (algorithm, policy,
observation encoding, SB3 version, training steps) beside the same evaluations as for a run.
The exported player applies the legal-move mask (illegal logits to -inf, then the best legal
move), also for a plain ``PPO`` model trained without one.

A run folder's checkpoint is read without unpickling anything (tensors and JSON, every value
checked; see training/checkpoints.py), so a run folder someone sent you is safe to export; a run
folder of another version of buttonup-env is refused with a sentence naming that version.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro

from buttonup_env.learn.onnx_writer import check_exportable
from buttonup_env.players.policy import load_sb3_model
from buttonup_env.ui.cli import Named, OutputError, check_outputs, fail, run_cli
from training.bounds import MAX_MATCHES
from training.cards import AuditScores, checkpoint_training, export_with_card
from training.checkpoints import Checkpoints
from training.runfolder import RunFolder, RunFolderError
from training.typed_json import Range, check_fields, to_json

CardMatches = Annotated[int, Range(0, MAX_MATCHES)]


@dataclass
class ExportArgs:
    """Export a run's checkpoint, or a Stable-Baselines3 .zip, to ONNX with a model card."""

    source: tyro.conf.Positional[Path]
    """A run folder made by training/train.py, or an SB3 .zip saved by your own script (needs
    --trusted)."""
    which: Annotated[
        Literal["best", "latest", "averaged"] | None,
        tyro.conf.arg(metavar="{best,latest,averaged}"),
    ] = None
    """For a run folder: averaged, the last checkpoint's weights averaged with the snapshots of
    the run's last --average-last share (the default, the policy training hands over);
    latest, the last checkpoint (the default for a run of --average-last 0); best, the
    checkpoint with the lowest regret against the perfect bot in the periodic evaluations
    (the match regret for a run of --objective match, the round regret for --objective
    round)."""
    out: Path | None = None
    """Where to write the .onnx (default: RUN/WHICH.onnx, or the .zip's path with .onnx); the
    card goes beside it. Its folder must exist."""
    force: bool = False
    """Replace OUT and its card if they exist (without it, an existing file is kept and the
    export stops before any work)."""
    trusted: bool = False
    """Allow exporting an SB3 .zip: loading it unpickles code, so only files you made."""
    random_matches: CardMatches = 1000
    """Matches against the random bot for the card."""
    greedy_matches: CardMatches = 1000
    """Matches against the greedy bot for the card."""
    perfect_matches: CardMatches = 500
    """Matches against the perfect bot (perfect play of the match) for the card."""
    margin_matches: CardMatches = 4000
    """Matches against the margin bot (perfect play of each round's margin) for the card: the
    match-level target wins at least 53% of them (about 6 s)."""
    best_response: bool = True
    """Also measure the exact exploitability for the card: the match's (on 2 cores about 35 s
    for a policy blind to the score, and minutes for one that sees it: 506 s for a smoke run's
    policy with the cores shared) and the round's (4 s)."""
    audit_scores: AuditScores = "0-0"
    """Audit every decision the policy can meet (buttonup_env.audit) at these score states
    for the card: 0-0 (about 10 s for a policy), all (the 225 scores, both starters each:
    minutes, see docs/match.md) or none."""


def check_arguments(args: ExportArgs, out: Path, inputs: list[Named]) -> None:
    """The checks of the options, before anything is exported: the counts in their bounds,
    ``out`` (an .onnx file) and its card writable (``buttonup_env.ui.cli.check_outputs``:
    neither of them one of the ``inputs``, an existing file replaced only with --force)."""
    if out.is_dir() or out.suffix != ".onnx":
        fail(f"--out {out}: give the .onnx file to write (its card goes beside it as .json)")
    try:
        check_fields(args)
        check_outputs(
            [("--out", out), ("the card of --out", out.with_suffix(".json"))], inputs, args.force
        )
    except ValueError as error:
        fail(str(error))


LEGAL_MOVES = (
    "The ONNX graph gives a logit for every action; the player (buttonup_env.load_policy, the "
    "env's opponent=, buttonup-play, evaluate.py) sets the logits of illegal actions to -inf "
    "and plays the best legal one."
)


def export_zip(args: ExportArgs) -> None:
    """Export a Stable-Baselines3 .zip saved by the user's own training script."""
    path = args.source
    if not path.is_file():
        fail(f"{path} does not exist (expected a run folder or a Stable-Baselines3 .zip)")
    if args.which is not None:
        fail(f"{path} is a single model: --which picks a checkpoint of a run folder")
    if not args.trusted:
        fail(
            f"{path} is a Stable-Baselines3 .zip: loading it unpickles code that can do "
            "anything; if you made this file yourself, pass --trusted"
        )
    out = args.out or path.with_suffix(".onnx")
    check_arguments(args, out, [("the exported .zip", path)])
    try:
        # reads the file's description first: other algorithms are refused unloaded
        model, info = load_sb3_model(path)
    except ValueError as error:
        fail(str(error))
    try:
        encoding = check_exportable(model.policy)
    except ValueError as error:  # the layers: the message says what is supported
        fail(f"{path} cannot be exported: {error}")
    masked = info.algorithm == "MaskablePPO"
    source = {
        "file": str(path),
        "format": "Stable-Baselines3 .zip",
        "algorithm": info.algorithm,
        "policy": info.policy,
        "policy_class": info.policy_class,
        "encoding": encoding,
        "observations": model.observation_space.shape[0],
        "actions": int(model.action_space.n),
        "sb3_version": info.sb3_version,
        "trained_with_legal_mask": masked,
        "legal_moves": LEGAL_MOVES
        + (
            " MaskablePPO masked them the same way in training."
            if masked
            else " PPO was trained without a mask: its own predict() may choose an illegal "
            "action, the exported player never does."
        ),
    }
    config: dict[str, object] = {
        "command": None,  # trained by the user's own script: unknown
        "code_version": None,
        "seed": info.seed,
        **info.settings,
    }
    training = {"source": str(path), "steps": info.steps}
    metadata = {
        "source": path.name,
        "algorithm": info.algorithm,
        "policy": info.policy,
        "sb3_version": info.sb3_version or "",
    }
    try:
        export_with_card(
            model.policy,
            out,
            config,
            training,
            args.random_matches,
            args.perfect_matches,
            best_response=args.best_response,
            greedy_matches=args.greedy_matches,
            margin_matches=args.margin_matches,
            audit_scores=args.audit_scores,
            metadata=metadata,
            card={"source": source},
        )
    except (OSError, OutputError) as error:
        fail(written(error))
    print(f"wrote {out} and {out.with_suffix('.json')}")


def written(error: OSError | OutputError) -> str:
    """The sentence of an output that could not be written."""
    if isinstance(error, OSError):
        return f"cannot write {error.filename or 'the output'} ({error.strerror or error})"
    return str(error)


def default_which(run: RunFolder) -> Literal["averaged", "latest"]:
    """--which by default: the policy training hands over, as its closing lines name it (the
    last weights averaged with the run's last snapshots, or alone for --average-last 0)."""
    return "averaged" if run.config.average_last > 0 else "latest"


def main(argv: list[str] | None = None) -> None:
    args = tyro.cli(ExportArgs, args=argv, description=__doc__)
    if args.source.suffix == ".zip" or args.source.is_file():
        if args.source.suffix != ".zip":
            fail(f"{args.source} is not a run folder nor a Stable-Baselines3 .zip")
        export_zip(args)
        return
    if not (args.source / "config.json").is_file():
        fail(
            f"{args.source} is not a run folder (no config.json) nor a Stable-Baselines3 .zip "
            "(export one with --trusted)"
        )
    try:  # the run folder first: what is wrong with it matters more than the options
        run = RunFolder.open(args.source)
    except RunFolderError as error:
        fail(str(error))
    which = args.which or default_which(run)
    out = args.out or args.source / f"{which}.onnx"
    checkpoint_name = "latest" if which == "averaged" else which
    weights, state = (
        args.source / "checkpoints" / f"{checkpoint_name}{end}" for end in (".pt", ".json")
    )
    inputs: list[Named] = [
        ("the run's config.json", args.source / "config.json"),
        ("the run's eval.jsonl", args.source / "eval.jsonl"),
        ("the checkpoint's weights", weights),
        ("the checkpoint's state", state),
        ("the run's latest checkpoint", args.source / "checkpoints" / "latest.json"),
    ]
    try:
        checkpoints = Checkpoints(run)
        policy, checkpoint = checkpoints.load_policy(checkpoint_name)
        training = checkpoint_training(checkpoints, checkpoint_name, checkpoint)
        rows = run.read_evaluations()
        snapshots = None
        if which == "averaged":
            if run.config.average_last == 0:
                fail(
                    f"{args.source} was trained with --average-last 0: it averages no "
                    "snapshots; export --which latest or best"
                )
            snapshots = run.averaged_snapshots(checkpoint.steps)
            inputs += [("a snapshot it averages", Path(path)) for path in snapshots]
    except RunFolderError as error:
        fail(str(error))
    check_arguments(args, out, inputs)
    if rows:
        training["periodic_evaluations"] = to_json(rows)
    try:
        export_with_card(
            policy,
            out,
            run.card_config(),
            training,
            args.random_matches,
            args.perfect_matches,
            best_response=args.best_response,
            greedy_matches=args.greedy_matches,
            margin_matches=args.margin_matches,
            audit_scores=args.audit_scores,
            average_with=snapshots,
        )
    except (OSError, OutputError) as error:
        fail(written(error))
    except ValueError as error:  # a snapshot of another network or refused: it says which
        fail(str(error))
    print(f"wrote {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    run_cli(main)
