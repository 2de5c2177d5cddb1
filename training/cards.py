"""Model cards: exporting a policy to ONNX with the card that says how it was made and what it
measured, at both levels of the game: against the random, greedy, margin and perfect bots
(through ``buttonup_env.players.evaluation.evaluate``, the batched matches the periodic
evaluations play: for one seed the same layouts; each gives the round regret and the match
regret), when asked its exact exploitability (the match's and the round's), and when asked the
audit of every decision it can meet (``buttonup_env.audit``). Each figure comes with the
command that gives it again. ``training/export.py`` and the end of a training write them."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from buttonup_env.learn.onnx_writer import export_onnx
from buttonup_env.players.audit import Audit, audit
from buttonup_env.players.best_response import match_best_response
from buttonup_env.players.bots import GreedyBot, MarginBot, PerfectBot, RandomBot
from buttonup_env.players.evaluation import EvaluationResult, evaluate
from buttonup_env.players.exploit import exploitability
from buttonup_env.players.policy import OnnxPolicy
from buttonup_env.ui.cli import write_output
from training.bounds import code_version
from training.checkpoints import Checkpoint, Checkpoints

EVAL_SEED = 2026
"""The seed of a card's matches (``training/evaluate.py --seed 2026`` plays them again)."""

CARD_BOTS = {"random": RandomBot, "greedy": GreedyBot, "margin": MarginBot, "perfect": PerfectBot}
"""The bots a card's matches are played against, in the card's order."""

AuditScores = Literal["none", "0-0", "all"]
"""Which score states a card's audit covers: none (no audit), 0-0 (a few seconds for a
policy), or all 225 scores with both starters each (the 450 states; minutes)."""


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
    margin_matches: int = 0,
    audit_scores: AuditScores = "none",
    average_with: Mapping[str, bytes] | None = None,
) -> dict[str, EvaluationResult]:
    """Write ``out`` and its card; evaluate against the random, greedy, margin and perfect
    bots (those given matches), with ``best_response`` measure the exact exploitability of the
    match and of the round, and with ``audit_scores`` audit every decision at those scores.
    ``metadata`` goes into the ONNX file beside the steps, ``card`` into the card before the
    targets. With ``average_with`` (snapshots of the run by path), the policy's weights are
    averaged with theirs, and the card's training names them."""
    version = code_version()  # before writing: a shipped model rewritten makes the tree dirty
    if average_with is not None:
        training = {**training, "averaged_with": [Path(name).name for name in average_with]}
    meta = {"steps": training.get("steps", ""), **(metadata or {})}
    export_onnx(policy, out, meta, average_with)
    player = OnnxPolicy(out)
    counts = {
        "random": random_matches,
        "greedy": greedy_matches,
        "margin": margin_matches,
        "perfect": perfect_matches,
    }
    results = play_bots(player, out, counts, quiet)
    extra: dict[str, object] = {**(card or {})}
    measured: dict[str, float] = {}
    if best_response:
        extra.update(exploitabilities(player, out, quiet, measured))
    if audit_scores != "none":
        extra["audit"] = audit_card(player, out, audit_scores, quiet, measured)
    extra["targets"], extra["reported"] = targets(results, measured)
    write_card(out, config, training, results, extra, exported_with=version)
    return {name: result for name, (_, result) in results.items()}


def play_bots(
    player: OnnxPolicy, out: Path, counts: dict[str, int], quiet: bool
) -> dict[str, tuple[str, EvaluationResult]]:
    """The card's matches against each bot of :data:`CARD_BOTS` given some in ``counts``: by
    name, the command that plays them again and the figures."""
    results: dict[str, tuple[str, EvaluationResult]] = {}
    for name, bot in CARD_BOTS.items():
        matches = counts[name]
        if matches <= 0:
            continue
        if not quiet:
            print(f"evaluating {out.name} against the {name} bot ({matches} matches)...")
        result = evaluate(player, bot(), matches, seed=EVAL_SEED)
        command = (
            f"python training/evaluate.py --model {out} --opponent {name} "
            f"--matches {matches} --seed {EVAL_SEED}"
        )
        results[name] = (command, result)
        if not quiet:
            print(result.summary(), end="\n\n")
    return results


def exploitabilities(
    player: OnnxPolicy, out: Path, quiet: bool, measured: dict[str, float]
) -> dict[str, object]:
    """The card's exact exploitabilities of the match (``match_exploitability``: 35 s for a
    policy blind to the score on 2 cores, about two minutes for one that sees it) and of the
    round (``exploitability``: seconds), each with its command; their figures go into
    ``measured``."""
    command = f"python training/evaluate.py --model {out} --opponent best-response"
    if not quiet:
        print(f"measuring the match exploitability of {out.name} (best response, exact)...")
    match = match_best_response(player)
    if not quiet:
        print(match.summary())
        print(f"measuring the round exploitability of {out.name} (best response, exact)...")
    found = exploitability(player)
    if not quiet:
        print(found.summary(), end="\n\n")
    measured["match_exploitability"] = match.exploitability
    measured["exploitability"] = found.exploitability
    return {
        "match_exploitability": {"command": command, **match.to_dict()},
        "exploitability": {"command": command, **asdict(found)},
    }


def audit_card(
    player: OnnxPolicy,
    out: Path,
    scores: AuditScores,
    quiet: bool,
    measured: dict[str, float],
) -> dict[str, object]:
    """The card's audit (``buttonup_env.audit``) at 0-0 or at every score: the counts and
    losses at 0-0 and in all, by move and by kind, the mean loss by score (all scores), the
    worst decisions, and the ``evaluate.py --audit`` command that gives the same figures; the
    mean loss at 0-0 goes into ``measured``."""
    command = f"python training/evaluate.py --model {out} --audit"
    command += " --scores all" if scores == "all" else ""
    if not quiet:
        print(f"auditing every decision of {out.name} at {scores} ...")
    found: Audit = audit(player, "all" if scores == "all" else [(0, 0)])
    if not quiet:
        print(found.summary(), end="\n\n")
    figures = found.to_dict()
    at_start = found.by_score[(0, 0)]
    measured["audit_mean_loss_0_0"] = at_start.mean_loss
    card: dict[str, object] = {
        "command": command,
        "scores": scores,
        "target": found.target,
        "seconds": found.seconds,
        "at_0_0": at_start.to_dict(),
        "total": figures["total"],
        "by_move": figures["by_move"],
        "by_kind": figures["by_kind"],
    }
    if scores == "all":
        card["mean_loss_by_score"] = {k: v["mean_loss"] for k, v in figures["by_score"].items()}
    card["worst"] = [d.line() for d in found.worst]
    return card


TARGETS = (
    # (name, where the figure is: an opponent and its field, or a measured figure, sense, value)
    ("match exploitability", ("measured", "match_exploitability"), "at most", 0.010),
    (
        "audit at 0-0: mean loss of winning probability per real choice",
        ("measured", "audit_mean_loss_0_0"),
        "at most",
        0.0001,
    ),
    ("matches won against the margin bot", ("margin", "win_rate"), "at least", 0.53),
    ("matches won against the random bot", ("random", "win_rate"), "at least", 1.0),
)
"""What the shipped agent, trained by the full preset (15 minutes of pure self-play), is held
to, at the level of the match; the card says which are met and by how much any is
missed."""

REPORTED = (
    # (name, where the figure is); the round's figures, and the match regret, with no target
    ("match regret against the perfect bot (per decision)", ("perfect", "mean_match_regret")),
    ("match regret against the margin bot (per decision)", ("margin", "mean_match_regret")),
    ("matches won against the perfect bot", ("perfect", "win_rate")),
    (
        "round regret against the perfect bot (round points per decision)",
        ("perfect", "mean_regret"),
    ),
    ("round regret against the margin bot (round points per decision)", ("margin", "mean_regret")),
    ("round regret against the random bot (round points per decision)", ("random", "mean_regret")),
    ("round regret against the greedy bot (round points per decision)", ("greedy", "mean_regret")),
    ("round exploitability (round points per round)", ("measured", "exploitability")),
)
"""The figures a card reports beside its targets, with none: the round's (a policy of the
match may give round points away where the match asks for another move than the round) and the
match regret in the card's matches."""


def targets(
    results: dict[str, tuple[str, EvaluationResult]], measured: dict[str, float] | None = None
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Each target of :data:`TARGETS` that the evaluations and the ``measured`` figures
    (``match_exploitability``, ``exploitability``, ``audit_mean_loss_0_0``) can judge: the
    figure, met or not, and the gap; and each figure of :data:`REPORTED` they hold."""
    measured = measured or {}

    def figure(source: str, name: str) -> float | None:
        if source == "measured":
            value = measured.get(name)
        elif source in results:
            value = getattr(results[source][1], name)
        else:
            return None
        return None if value is None or math.isnan(value) else value

    rows: list[dict[str, object]] = []
    for name, (source, field), sense, value in TARGETS:
        found = figure(source, field)
        if found is None:
            continue
        gap = found - value if sense == "at least" else value - found
        rows.append(
            {
                "target": f"{name} {sense} {value:g}",
                "measured": round(found, 6),
                "met": gap >= 0,
                "missed_by": None if gap >= 0 else round(-gap, 6),
            }
        )
    if any(not row["met"] for row in rows):
        rows.append({"what_was_tried": "docs/experiments.md, the results log"})
    reported = [
        {"figure": name, "measured": round(found, 6)}
        for name, where in REPORTED
        if (found := figure(*where)) is not None
    ]
    return rows, reported


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
