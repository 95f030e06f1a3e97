"""Shared test fixtures. Area-specific fixtures live in each test folder's conftest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
IN_CI = os.environ.get("CI") == "true"


def skip_unless_ci(reason: str) -> None:
    """Skip a test whose prerequisite (a PostgreSQL server, root) is missing here; in CI
    (``CI=true``), where the prerequisite is installed on purpose, fail instead, so that a
    backend or an error path is never left untested while CI stays green."""
    if IN_CI:
        pytest.fail(f"{reason}, and CI must run this test")
    pytest.skip(reason)


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
