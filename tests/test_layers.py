"""The package's layers: the import-linter contracts hold, the rules import only the standard
library, every subpackage says its job, and no module reads another's private names."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "buttonup_env"
LAYERS = ("game", "engine", "players", "envs", "learn", "ui")


def python_files(*folders: Path) -> list[Path]:
    return sorted(path for folder in folders for path in folder.rglob("*.py"))


def test_lint_imports_keeps_every_contract() -> None:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    done = subprocess.run([command], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "0 broken" in done.stdout


def test_the_rules_import_only_the_standard_library() -> None:
    tree = ast.parse((PACKAGE / "game" / "rules.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "the rules import nothing of the package"
            imported.add(str(node.module).split(".")[0])
    outside = imported - set(sys.stdlib_module_names) - {"__future__"}
    assert imported and not outside, f"the rules import {sorted(outside)}"


def test_the_commands_that_judge_policies_start_without_torch() -> None:
    """evaluate.py, league.py, report.py and match.py read run folders and play policies with
    onnxruntime: torch (seconds of imports) and onnx come only with a network to make."""
    code = (
        "import sys, training.evaluate, training.league, training.report, training.match; "
        "print(sorted({'torch', 'onnx', 'stable_baselines3'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", f"imported at start: {done.stdout.strip()}"


@pytest.mark.parametrize("layer", LAYERS)
def test_every_layer_says_its_job_in_a_sentence(layer: str) -> None:
    docstring = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text()))
    assert docstring and docstring.endswith(".") and docstring.count(". ") == 0, docstring


def test_no_module_reads_another_modules_private_names() -> None:
    found = []
    for path in python_files(PACKAGE, ROOT / "training", ROOT / "benchmarks"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = set()  # names bound to modules of the project in this file
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                own = node.level > 0 or str(node.module).startswith(("buttonup_env", "training"))
                for alias in node.names:
                    if own and alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {alias.name}")
                    if own:
                        modules.add(alias.asname or alias.name)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value.id}.{node.attr}")
    assert not found, "private names read from another module:\n" + "\n".join(found)


def training_contract() -> list[str]:
    """The layers of the training floor's import-linter contract (pyproject.toml), top
    first."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    for contract in contracts["contracts"]:
        if contract["type"] == "layers" and contract["layers"][0].startswith("training."):
            return contract["layers"]
    raise AssertionError("pyproject.toml has no layers contract for training/")


def test_every_training_module_has_its_floor() -> None:
    """Each module of training/ sits in a layer of the training contract (a new one cannot
    escape it), and the scripts are the top layer, independent of each other."""
    layers = training_contract()
    placed = [name.strip() for layer in layers for name in layer.replace(":", "|").split("|")]
    modules = {f"training.{p.stem}" for p in (ROOT / "training").glob("*.py")} - {
        "training.__init__"
    }
    assert sorted(placed) == sorted(modules)
    scripts = {"train", "tune", "export", "evaluate", "league", "report", "match"}
    assert {name.strip() for name in layers[0].split("|")} == {f"training.{s}" for s in scripts}
    assert ":" not in layers[0], "the scripts import none of each other"


def test_only_the_resume_point_reads_private_fields_of_other_objects() -> None:
    """SB3's private fields (``model._n_updates``, ``_last_obs``, ...) are read in
    training/resume.py alone, so a new SB3 is tried there first; no other module of training/
    reads a private field of anything but itself."""
    readers = {}
    for path in python_files(ROOT / "training"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                and (getattr(node.value, "id", None), node.attr) != ("os", "_exit")
            ):
                readers.setdefault(path.name, set()).add(node.attr)
    assert set(readers) == {"resume.py"}, readers
    assert readers["resume.py"] == {"_n_updates", "_last_obs", "_last_episode_starts"}


def longer_functions_allowed() -> set[str]:
    """The functions docs/contributing.md names as allowed over 80 lines (``path:function``
    items between its two markers)."""
    text = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    start = text.index("<!-- longer functions:")
    block = text[start : text.index("<!-- end of the longer functions -->")]
    return {line[2:].split(" ")[0] for line in block.splitlines() if line.startswith("- ")}


def test_no_training_module_is_over_500_lines() -> None:
    long = {
        path.name: n
        for path in python_files(ROOT / "training")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert not long, f"training modules over 500 lines: {long}"


def test_no_function_is_over_80_lines_but_those_the_docs_name() -> None:
    allowed = longer_functions_allowed()
    long = []
    for path in python_files(PACKAGE, ROOT / "training"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                name = f"{path.relative_to(ROOT)}:{node.name}"
                if lines > 80 and name not in allowed:
                    long.append(f"{name} ({lines} lines)")
    assert not long, "functions over 80 lines, not named in docs/contributing.md: " + ", ".join(
        long
    )


def test_training_holds_at_most_four_type_ignores() -> None:
    count = sum(
        path.read_text(encoding="utf-8").count("# type: ignore")
        for path in python_files(ROOT / "training")
    )
    assert count <= 4, f"{count} '# type: ignore' in training/"
