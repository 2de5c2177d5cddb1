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


# --- the README is the front door; the results live in docs/experiments.md ---------------------

QUICK_START = (
    'pip install "torch==2.13.0" -e ".[train]" && python training/train.py --preset quick'
    "  # 1. train",
    'pip install -e ".[test]" && python -m pytest  # 2. test',
)
"""The quick start's two commands, which .ci/run finds by their markers and runs."""

DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")


def test_the_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; the detail goes to docs/"
    for command in QUICK_START:
        assert lines.count(command) == 1, f"the quick start lost {command!r}"
    for marker in ("# 1. train", "# 2. test"):  # .ci/run reads the first line ending so
        assert sum(line.endswith(marker) for line in lines) == 1
    for page in ("docs/experiments.md", "docs/training.md", "docs/environment.md"):
        assert f"]({page}" in readme, f"README.md does not link to {page}"
    dated = [line for line in lines if DATE.search(line)]
    assert not dated, "results of runs go to docs/experiments.md:\n" + "\n".join(dated)


def test_the_results_log_is_dated_newest_first_with_commands() -> None:
    text = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    log = text.split("## The log", 1)[1].split("\n## ", 1)[0]
    rows = [row for row in log.splitlines() if row.startswith("| ") and "---" not in row][1:]
    assert len(rows) >= 5
    ends = []  # the last date of each row's period: newest first
    for row in rows:
        cells = (c.strip() for c in row.strip("|").split(" | "))
        date, commit, what, command, result, details = cells
        assert what and result and details and "`" in command, row
        assert COMMIT.search(commit), f"the row names no commit to check out: {row}"
        if found := DATE.findall(date):
            ends.append(found[-1])
    assert ends == sorted(ends, reverse=True), f"the log is not newest first: {ends}"
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "experiments.md" in nav
