"""Fixtures of the exporter tests."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator

import pytest
from exporter_helpers import spawner


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start a process in its own group; whatever is still running at the end is killed."""
    start, cleanup = spawner()
    yield start
    cleanup()
