"""Helpers shared by the training scripts: code version and model cards."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import buttonup_env
from buttonup_env.evaluation import EvaluationResult

ROOT = Path(__file__).resolve().parent.parent


def code_version() -> str:
    """The package version and the git commit (with ``+dirty`` when files were changed)."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty=+dirty"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return f"buttonup-env {buttonup_env.__version__} ({commit})"


def write_card(
    model_path: Path,
    config: dict[str, Any],
    training: dict[str, Any],
    evaluations: dict[str, tuple[str, EvaluationResult]],
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``NAME.json`` beside ``NAME.onnx``: how it was made and what it measured.

    ``evaluations`` maps an opponent name to (the evaluate.py command that reproduces the
    figures, the result).
    """
    card = {
        "model": model_path.name,
        "made": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": config.get("command"),
        "code_version": config.get("code_version"),
        "exported_with": code_version(),
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
    path.write_text(json.dumps(card, indent=2) + "\n")
    return path
