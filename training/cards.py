"""Model cards: exporting a policy to ONNX with the card that says how it was made and what it
measured, against the random, greedy and perfect bots (through
``buttonup_env.players.evaluation.evaluate``, the batched matches the periodic evaluations
play: for one seed the same layouts) and, when asked, its exact exploitability.
``training/export.py`` and the end of a training write them."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from buttonup_env.learn.onnx_writer import export_onnx
from buttonup_env.players.bots import GreedyBot, PerfectBot, RandomBot
from buttonup_env.players.evaluation import EvaluationResult, evaluate
from buttonup_env.players.exploit import exploitability
from buttonup_env.players.policy import OnnxPolicy
from buttonup_env.ui.cli import write_output
from training.checkpoints import Checkpoint, Checkpoints
from training.config import code_version

EVAL_SEED = 2026
"""The seed of a card's matches (``training/evaluate.py --seed 2026`` plays them again)."""


def export_with_card(
    policy: object,
    out: Path,
    config: dict,
    training: dict,
    random_matches: int,
    perfect_matches: int,
    quiet: bool = False,
    best_response: bool = False,
    metadata: dict[str, object] | None = None,
    card: dict[str, object] | None = None,
    greedy_matches: int = 0,
) -> dict[str, EvaluationResult]:
    """Write ``out`` and its card; evaluate against the random, greedy and perfect bots, and
    (with ``best_response``) measure the exact exploitability. ``metadata`` goes into the ONNX
    file beside the steps, ``card`` into the card before the targets."""
    version = code_version()  # before writing: a shipped model rewritten makes the tree dirty
    export_onnx(policy, out, {"steps": training.get("steps", ""), **(metadata or {})})
    player = OnnxPolicy(out)
    results: dict[str, tuple[str, EvaluationResult]] = {}
    for name, bot, matches in (
        ("random", RandomBot(), random_matches),
        ("greedy", GreedyBot(), greedy_matches),
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
    extra: dict[str, object] = {**(card or {})}
    exploit = None
    if best_response:
        if not quiet:
            print(f"measuring the exploitability of {out.name} (best response, exact)...")
        exploit = exploitability(player)
        if not quiet:
            print(exploit.summary(), end="\n\n")
    extra["targets"] = targets(results, None if exploit is None else exploit.exploitability)
    if exploit is not None:
        extra["exploitability"] = {
            "command": f"python training/evaluate.py --model {out} --opponent best-response",
            **asdict(exploit),
        }
    write_card(out, config, training, results, extra, exported_with=version)
    return {name: result for name, (_, result) in results.items()}


TARGETS = (
    # (name, opponent, figure, at least / at most, value)
    ("regret against the perfect bot", "perfect", "mean_regret", "at most", 0.005),
    ("matches won against the perfect bot", "perfect", "win_rate", "at least", 0.48),
    ("regret against the random bot", "random", "mean_regret", "at most", 0.02),
    ("matches won against the random bot", "random", "win_rate", "at least", 0.995),
    ("regret against the greedy bot", "greedy", "mean_regret", "at most", 0.02),
    ("exploitability", "best-response", "exploitability", "at most", 0.1),
)
"""What the shipped agent, trained by the full preset (15 minutes of pure self-play), is held
to; the card says which are met and by how much any is missed."""


def targets(
    results: dict[str, tuple[str, EvaluationResult]], exploit: float | None = None
) -> list[dict[str, object]]:
    """Each target the evaluations (and the exploitability, when measured) can judge: the
    figure, met or not, and the gap."""
    rows: list[dict[str, object]] = []
    for name, opponent, figure, sense, value in TARGETS:
        if opponent == "best-response":
            if exploit is None:
                continue
            measured = exploit
        elif opponent in results:
            measured = getattr(results[opponent][1], figure)
        else:
            continue
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
        rows.append({"what_was_tried": "docs/experiments.md, the results log"})
    return rows


def checkpoint_training(checkpoints: Checkpoints, which: str, checkpoint: Checkpoint) -> dict:
    """The card's training figures of checkpoint ``which`` of a run (whose ``checkpoints``
    these are): its steps and training minutes, and the whole run's (its latest
    checkpoint's), of which it is a point."""
    training = {
        "checkpoint": which,
        "steps": checkpoint.steps,
        "minutes": round(checkpoint.progress.train_seconds / 60, 1),
    }
    if checkpoints.exists("latest"):
        latest = checkpoints.read("latest")
        training["run_steps"] = latest.steps
        training["run_minutes"] = round(latest.progress.train_seconds / 60, 1)
    return training


def write_card(
    model_path: Path,
    config: dict[str, Any],
    training: dict[str, Any],
    evaluations: dict[str, tuple[str, EvaluationResult]],
    extra: dict[str, Any] | None = None,
    exported_with: str | None = None,
) -> Path:
    """Write ``NAME.json`` beside ``NAME.onnx``: how it was made and what it measured.

    ``evaluations`` maps an opponent name to (the evaluate.py command that reproduces the
    figures, the result). ``exported_with`` is the code version of the export (default: now;
    take it before writing the model, or a model written inside the repository makes it dirty).
    """
    card = {
        "model": model_path.name,
        "made": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": config.get("command"),
        "code_version": config.get("code_version"),
        "exported_with": exported_with or code_version(),
        "seed": config.get("seed"),
        "config": {k: v for k, v in config.items() if k not in ("command", "code_version")},
        "training": training,
        "evaluation": {
            name: {"command": command, **result.to_dict()}
            for name, (command, result) in evaluations.items()
        },
    }
    card.update(extra or {})
    path = model_path.with_suffix(".json")
    write_output(path, (json.dumps(card, indent=2) + "\n").encode())
    return path
