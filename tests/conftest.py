"""Shared test fixtures. Area-specific fixtures live in each test folder's conftest."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.relay import Relay

FIXTURES = Path(__file__).parent / "fixtures"
IN_CI = os.environ.get("CI") == "true"

# The tests never read or write the user's own signing key (~/.config/soak/keys): the default
# key folder of this process and every process it starts is one of the test session's, empty.
os.environ["SOAK_KEYS_DIR"] = os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"soak-test-keys-{os.getpid()}-{os.urandom(4).hex()}")

# The only skips CI accepts: cases that cannot apply to one backend or machine, whatever is
# installed. Every other skip means something CI installs on purpose was missing or broken
# (PostgreSQL, a font, a browser, root), so in CI it fails the run instead of hiding a test.
ALLOWED_SKIPS: tuple[str, ...] = (
    "a memory database does not outlive its handle",
    "an NVIDIA driver is installed",
)


def skip_unless_ci(reason: str) -> None:
    """Skip a test whose prerequisite (a PostgreSQL server, root) is missing here; in CI
    (``CI=true``), where the prerequisite is installed on purpose, fail instead, so that a
    backend or an error path is never left untested while CI stays green."""
    if IN_CI:
        pytest.fail(f"{reason}, and CI must run this test")
    pytest.skip(reason)


PG_URL = os.environ.get("SOAK_TEST_PG_URL")


@contextmanager
def pg_database(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database on the test PostgreSQL server, named after the test's module, dropped
    when the block ends. One for each real run: a module-scoped run takes one of its own (two
    runs in one database would read each other's rows of the same run id)."""
    from tests.pgdb import fresh_database

    if not PG_URL:
        skip_unless_ci("SOAK_TEST_PG_URL is not set")
    prefix = "soak_" + request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")[:20]
    with fresh_database(PG_URL, prefix) as url:
        yield url


@pytest.fixture
def db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database of the test's own, dropped afterwards."""
    with pg_database(request) as url:
        yield url


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


_unexpected_skips: list[tuple[str, str]] = []

# make check (scripts/test.sh --check, SOAK_CHECK=1) is the fast part of the suite: a test in it
# that takes longer than this is named at the end, to be marked `slow`, so the part stays fast.
IN_CHECK = os.environ.get("SOAK_CHECK") == "1"
CHECK_TEST_S = 5.0
_slow_in_check: dict[str, float] = {}


# The order make test's workers take the tests in (scripts/test.sh: xdist's loadgroup, its own
# reordering off). A test with an xdist_group mark runs on one worker with the rest of its group,
# in order: the cluster runs in two lanes ("cluster-a", "cluster-b"), so that no more than two
# clusters start at once on two cores, and a module whose tests share a module-scoped fixture
# (a run, a server, a rendered PDF) as one group of its own, so that the fixture is made once.
# The lanes go first, then the other slow tests, then the rest: the longest work starts first
# and none is left to run alone at the end.
def _order(item: pytest.Item) -> int:
    group = item.get_closest_marker("xdist_group")
    if group is not None and str(group.args[0]).startswith("cluster-"):
        return 0
    return 1 if item.get_closest_marker("slow") else 2


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope in ("module", "class", "package") for ds in defs for d in ds)


# First: xdist's own hook, on each worker, reads the groups into the test ids after this one.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items.sort(key=_order)


# Last: a group xdist did not take would run its shared cluster run once on every worker, all at
# once, and only show as timeouts (pytest 9.2 did this silently: pyproject.toml). Its tests fail
# before their fixtures start anything, saying why.
_ungrouped: set[str] = set()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.getoption("loadgroup", default=False):
        grouped = (i for i in session.items if i.get_closest_marker("xdist_group"))
        _ungrouped.update(i.nodeid for i in grouped if "@" not in i.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.nodeid in _ungrouped:
        pytest.fail("pytest-xdist's --dist loadgroup did not group this test: see pyproject.toml", pytrace=False)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Runs in the controller under xdist too: every worker's reports pass through it.
    if IN_CHECK and (report.passed or report.failed):
        _slow_in_check[report.nodeid] = _slow_in_check.get(report.nodeid, 0.0) + report.duration
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report)
        if not any(allowed in reason for allowed in ALLOWED_SKIPS):
            _unexpected_skips.append((report.nodeid, reason))


def pytest_terminal_summary(terminalreporter, exitstatus: int) -> None:  # noqa: ANN001
    slow = sorted(((s, n) for n, s in _slow_in_check.items() if s > CHECK_TEST_S), reverse=True)
    if IN_CHECK and slow:
        terminalreporter.section(f"tests over {CHECK_TEST_S:.0f} s in make check: mark them slow")
        for seconds, nodeid in slow:
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}")
    if IN_CI and _unexpected_skips:
        terminalreporter.section("skips CI does not accept")
        for nodeid, reason in _unexpected_skips:
            terminalreporter.write_line(f"{nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    worker = hasattr(session.config, "workerinput")  # an xdist worker: the controller decides
    if IN_CI and _unexpected_skips and exitstatus == 0 and not worker:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def relay(db_url: str) -> Iterator[Relay]:
    """A relay (``tests/relay.py``) to ``db_url``'s PostgreSQL server, listening; stopped
    afterwards. A test stops and starts it to take its store away and bring it back."""
    from sqlalchemy.engine import make_url

    from tests.relay import Relay

    pg = make_url(db_url)
    r = Relay(pg.host or "127.0.0.1", pg.port or 5432)
    r.start()
    try:
        yield r
    finally:
        r.stop()
