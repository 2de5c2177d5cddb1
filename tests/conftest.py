"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA_DIR = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``tests/data``: the conformance records (rounds, matches, invalid)."""
    return DATA_DIR
