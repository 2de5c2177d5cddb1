"""The repository stands on its own: no tracked file points outside it, every relative link in
its Markdown resolves, and the package metadata has one version and a licence file."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import buttonup_env

ROOT = Path(__file__).resolve().parent.parent

# Spelled in two parts so that this file does not match itself.
OUTSIDE = ("..", "/shared")
RULES_FILE = ("RULES", ".md")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def tracked_files() -> list[Path]:
    """The files git tracks in this checkout; skips the test outside a git checkout."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    result = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout")
    return [ROOT / name for name in result.stdout.split("\0") if name]


def text_of(path: Path) -> str | None:
    """The file's text, or None for a binary file (or one deleted but not yet committed)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_no_tracked_file_points_outside_the_repository() -> None:
    files = tracked_files()
    outside, rules_file = "".join(OUTSIDE), "".join(RULES_FILE)
    has_rules_file = any(path.name == rules_file for path in files)
    found = []
    for path in files:
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if outside in line or (rules_file in line and not has_rules_file):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "references to files outside the repository:\n" + "\n".join(found)


def test_relative_links_in_markdown_resolve_inside_the_repository() -> None:
    broken = []
    for path in tracked_files():
        if path.suffix != ".md" or (text := text_of(path)) is None:
            continue
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or an anchor on the same page
            file = (path.parent / target.split("#")[0]).resolve()
            if not file.is_relative_to(ROOT) or not file.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, "links that lead nowhere in the repository:\n" + "\n".join(broken)


def test_the_version_is_written_once() -> None:
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    attr = pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "buttonup_env.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+", buttonup_env.__version__)
    assert f"[{buttonup_env.__version__}]" in (ROOT / "CHANGELOG.md").read_text()


def test_the_licence_file_matches_the_metadata() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
