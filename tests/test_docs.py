"""The documentation's code runs: every python block of the pages below, each in a fresh
namespace, and a ``print(...)  # -> TEXT`` prints TEXT (``# -> A (why)``: A)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("frameworks.md",)
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
SHOWN = re.compile(r"^\s*print\(.*\)\s+# -> (.*?)(?: \(.*\))?$")
NEEDS = {"pyspiel": "the openspiel extra", "torchrl": "the torchrl extra"}


def blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        for number, match in enumerate(BLOCK.finditer(text), start=1):
            found.append((page, number, match[1]))
    return found


@pytest.mark.filterwarnings("ignore:PettingZoo in TorchRL is tested using version:UserWarning")
@pytest.mark.parametrize(
    ("page", "number", "code"), blocks(), ids=[f"{page}-{n}" for page, n, _ in blocks()]
)
def test_a_python_block_runs_and_prints_what_it_says(page: str, number: int, code: str) -> None:
    for module, extra in NEEDS.items():
        if f"import {module}" in code or f"from {module}" in code:
            pytest.importorskip(module, reason=f"block {number} of docs/{page} needs {extra}")
    printed: dict[int, list[str]] = {}

    def record(*values: object, **_: object) -> None:
        line = sys._getframe(1).f_lineno
        printed.setdefault(line, []).append(" ".join(map(str, values)))

    exec(compile(code, f"docs/{page}, block {number}", "exec"), {"print": record})
    expected = {
        line: match[1]
        for line, text in enumerate(code.splitlines(), start=1)
        if (match := SHOWN.match(text))
    }
    for line, text in expected.items():
        assert printed.get(line), f"block {number}, line {line} printed nothing"
        assert set(printed[line]) == {text}, f"block {number}, line {line}"
    assert printed, f"block {number} of docs/{page} shows nothing"
