"""Fixtures of the exporter tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from exporter_helpers import spawner

from tests.procs import Proc


@pytest.fixture
def spawn(tmp_path) -> Iterator[Callable[..., Proc]]:
    """Start a process in its own group, its output in files; its death fails the test's waits
    at once, and whatever is still running at the end is killed."""
    start, cleanup = spawner(tmp_path / "procs")
    yield start
    cleanup()
