"""training/match.py: the match's figures and its picture, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from commands import ROOT, run

SCRIPT = ROOT / "training" / "match.py"


def test_the_figures_of_a_match_and_its_picture(tmp_path: Path) -> None:
    plot, figures = tmp_path / "equity.png", tmp_path / "match.json"
    done = run(SCRIPT, "--target", "15", "--plot", plot, "--json", figures)
    assert done.returncode == 0, done.stderr
    assert "the first round's starter wins 50.418%" in done.stdout
    assert "50.42% after a tied round" in done.stdout
    assert "50.09% after winning it by one" in done.stdout
    assert "420 of 450" in done.stdout
    assert "exploitability: 0.0564" in done.stdout
    assert plot.read_bytes().startswith(b"\x89PNG")
    data = json.loads(figures.read_text())
    assert data["target"] == 15 and data["not_monotone"] == 420
    assert data["perfect_against_margin"] == pytest.approx(0.54345, abs=5e-5)
    again = run(SCRIPT, "--target", "3", "--plot", plot)
    assert again.returncode == 2 and "exists; give --force" in again.stderr
    assert plot.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("target", ["0", "101", "x"])
def test_a_target_the_match_is_not_solved_for_is_refused(target: str) -> None:
    done = run(SCRIPT, "--target", target)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "--target" in done.stderr
