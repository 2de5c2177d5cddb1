"""Export a trained policy to ONNX with its model card.

    python training/export.py runs/NAME                      # the run's best checkpoint
    python training/export.py runs/NAME --which latest --out my-agent.onnx
    python training/export.py runs/NAME --out buttonup_env/models/buttonup-ppo.onnx  # ship it

Writes ``OUT`` (the policy network: observations to action logits; needs only onnxruntime to
run, see ``buttonup_env.load_policy``) and ``OUT`` with ``.json`` (the card: the training
command, config, seed, code version, training steps and time, the evaluation against the
random bot and the perfect bot, and the exact exploitability). Training calls the same code at
its end. The policies shipped with the package are the ``.onnx`` files (and cards) in
``buttonup_env/models/``: exporting there replaces or adds one, loadable by its file name.

This loads the run's SB3 checkpoint, which unpickles Python code: export only runs you made.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fail, load_checkpoint, read_eval_rows, read_json, write_card

from buttonup_env.bots import PerfectBot, RandomBot
from buttonup_env.evaluation import EvaluationResult, evaluate
from buttonup_env.exploit import exploitability
from buttonup_env.export import export_onnx
from buttonup_env.policy import OnnxPolicy

EVAL_SEED = 2026


def export_with_card(
    policy: object,
    out: Path,
    config: dict,
    training: dict,
    random_matches: int,
    perfect_matches: int,
    quiet: bool = False,
    best_response: bool = False,
) -> dict[str, EvaluationResult]:
    """Write ``out`` and its card; evaluate against the random and the perfect bot, and
    (with ``best_response``) measure the exact exploitability."""
    export_onnx(policy, out, {"steps": training.get("steps", "")})
    player = OnnxPolicy(out)
    results: dict[str, tuple[str, EvaluationResult]] = {}
    for name, bot, matches in (
        ("random", RandomBot(), random_matches),
        ("perfect", PerfectBot(), perfect_matches),
    ):
        if matches <= 0:
            continue
        if not quiet:
            print(f"evaluating {out.name} against the {name} bot ({matches} matches)...")
        result = evaluate(player, bot, matches, seed=EVAL_SEED)
        command = (
            f"python training/evaluate.py --model {out} --opponent {name} "
            f"--matches {matches} --seed {EVAL_SEED}"
        )
        results[name] = (command, result)
        if not quiet:
            print(result.summary(), end="\n\n")
    extra: dict[str, object] = {"targets": targets(results)}
    if best_response:
        if not quiet:
            print(f"measuring the exploitability of {out.name} (best response, exact)...")
        exploit = exploitability(player)
        if not quiet:
            print(exploit.summary(), end="\n\n")
        extra["exploitability"] = {
            "command": f"python training/evaluate.py --model {out} --opponent best-response",
            **asdict(exploit),
        }
    write_card(out, config, training, results, extra)
    return {name: result for name, (_, result) in results.items()}


TARGETS = (
    # (name, opponent, figure, at least / at most, value)
    ("regret against the perfect bot", "perfect", "mean_regret", "at most", 0.10),
    ("matches won against the perfect bot", "perfect", "win_rate", "at least", 0.45),
    ("matches won against the random bot", "random", "win_rate", "at least", 0.995),
)
"""The shipped agent's targets (issue 3); the card says which are met and by how much."""


def targets(results: dict[str, tuple[str, EvaluationResult]]) -> list[dict[str, object]]:
    """Each target the evaluations can judge: the figure, met or not, and the gap."""
    rows: list[dict[str, object]] = []
    for name, opponent, figure, sense, value in TARGETS:
        if opponent not in results:
            continue
        measured = getattr(results[opponent][1], figure)
        gap = measured - value if sense == "at least" else value - measured
        rows.append(
            {
                "target": f"{name} {sense} {value:g}",
                "measured": round(measured, 4),
                "met": gap >= 0,
                "missed_by": None if gap >= 0 else round(-gap, 4),
            }
        )
    if any(not row["met"] for row in rows):
        rows.append({"what_was_tried": "README.md, section 'What we tried'"})
    return rows


@dataclass
class ExportArgs:
    """Export a run's checkpoint to ONNX with a model card."""

    run: tyro.conf.Positional[Path]
    """A run folder made by training/train.py."""
    which: Literal["best", "latest"] = "best"
    """best: the checkpoint with the lowest regret against the perfect bot in the periodic
    evaluations; latest: the last one."""
    out: Path | None = None
    """Where to write the .onnx (default: RUN/WHICH.onnx); the card goes beside it."""
    random_matches: int = 1000
    """Matches against the random bot for the card."""
    perfect_matches: int = 500
    """Matches against the perfect bot for the card."""
    best_response: bool = True
    """Also measure the exact exploitability for the card (4 s for the shipped model)."""


def main(argv: list[str] | None = None) -> None:
    args = tyro.cli(ExportArgs, args=argv, description=__doc__)
    checkpoint = args.run / "checkpoints" / f"{args.which}.zip"
    if not (args.run / "config.json").is_file():
        fail(f"{args.run} is not a run folder (no config.json)")
    if not checkpoint.is_file():
        fail(f"{checkpoint} does not exist (run still starting?)")
    if args.out is not None and (args.out.is_dir() or args.out.suffix != ".onnx"):
        fail(f"--out {args.out}: give the .onnx file to write (its card goes beside it as .json)")
    for name in ("random_matches", "perfect_matches"):
        if getattr(args, name) < 0:
            fail(f"--{name.replace('_', '-')} must be >= 0")
    config = read_json(args.run / "config.json")
    state_file = args.run / "checkpoints" / f"{args.which}.json"
    state = read_json(state_file) if state_file.is_file() else {}
    model = load_checkpoint(checkpoint)
    training = {
        "checkpoint": args.which,
        "steps": model.num_timesteps,
        "minutes": round(state.get("train_seconds", 0.0) / 60, 1),
    }
    latest_file = args.run / "checkpoints" / "latest.json"
    if latest_file.is_file():  # the whole run, of which this checkpoint is a point
        latest = read_json(latest_file)
        training["run_steps"] = latest.get("steps")
        training["run_minutes"] = round(latest.get("train_seconds", 0.0) / 60, 1)
    eval_file = args.run / "eval.jsonl"
    if eval_file.is_file():
        try:
            training["periodic_evaluations"] = read_eval_rows(eval_file)
        except ValueError as error:
            fail(f"{eval_file} is damaged ({error})")
    out = args.out or args.run / f"{args.which}.onnx"
    export_with_card(
        model.policy,
        out,
        config,
        training,
        args.random_matches,
        args.perfect_matches,
        best_response=args.best_response,
    )
    print(f"wrote {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
