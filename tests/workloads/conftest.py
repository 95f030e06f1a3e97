"""Fixtures for workload tests (helpers live in wl_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from wl_helpers import Launcher


@pytest.fixture
def launcher(tmp_path: Path):
    lau = Launcher(tmp_path / "run")
    lau.run_dir.mkdir()
    yield lau
    lau.close()

