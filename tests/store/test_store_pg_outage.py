"""The store rides out a PostgreSQL restart: pooled connections idle for a while are checked
before use, a lost
or refused connection is tried again for a few seconds (``RECONNECT_WITHIN_S``), and beyond
that the call fails with one line and the writer keeps its rows.

A relay between the store and the server stands in for the restart: stopping it drops the
connections and refuses new ones, as a server going down does."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

from soak.errors import StoreError
from soak.store import Store
from soak.store.engine import PING_IDLE_S, RECONNECT_WITHIN_S
from soak.telemetry.records import DeviceSample, Snapshot
from tests.relay import Relay

pytestmark = [pytest.mark.slow, pytest.mark.pg]
SLACK_S = 3.0  # a loaded 2-core machine: the connect, SQLAlchemy's way up


@pytest.fixture
def relayed(store_url: str) -> Iterator[tuple[Store, Relay]]:
    from sqlalchemy.engine import make_url

    pg = make_url(store_url)
    relay = Relay(pg.host or "127.0.0.1", pg.port or 5432)
    relay.start()
    store = Store.open(relay.url(store_url))
    try:
        yield store, relay
    finally:
        store.close()
        relay.stop()


def _tick(ts: float) -> Snapshot:
    return Snapshot(ts=ts, host="node1", devices=(DeviceSample(device="npu0-0", backend="sim", util_pct=ts % 100),))


PG = [pytest.param("postgresql", marks=pytest.mark.pg)]


@pytest.mark.parametrize("store_url", PG, indirect=True)
def test_a_server_restart_between_calls_is_not_seen(relayed: tuple[Store, Relay],
                                                    caplog: pytest.LogCaptureFixture) -> None:
    store, relay = relayed
    store.create_run("r1", host="node1", plan={}, started_ts=1.0)
    relay.stop()  # the pooled connection is dropped
    relay.start()
    time.sleep(PING_IDLE_S)  # the daemon's writes are seconds apart
    with caplog.at_level(logging.WARNING, logger="soak.store"):
        store.add_event("r1", "note", ts=2.0, message="after the restart")
    assert [e.message for e in store.load_events("r1")] == ["after the restart"]
    # the pool's check before use replaced the dead connection: no failed attempt at all
    assert not [r for r in caplog.records if "connection lost" in r.getMessage()], caplog.text


@pytest.mark.parametrize("store_url", PG, indirect=True)
def test_a_restart_right_after_a_call_costs_one_retry_and_no_row(relayed: tuple[Store, Relay],
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    # A connection used again within PING_IDLE_S is not pinged (a writer draining a backlog
    # would pay a round trip per batch): its batch fails as lost and is written on a new one.
    store, relay = relayed
    store.create_run("r1", host="node1", plan={}, started_ts=1.0)
    w = store.writer("r1", max_rows=1 << 20, max_delay_s=1e9)
    w.add(_tick(1.0))
    w.flush()
    relay.stop()
    relay.start()
    with caplog.at_level(logging.WARNING, logger="soak.store"):
        w.add(_tick(2.0))
        assert w.flush() == 1
    lost = [r for r in caplog.records if "connection lost" in r.getMessage()]
    assert len(lost) == 1, caplog.text
    assert [s["ts"] for s in store.load_samples("r1")] == [1.0, 2.0]


@pytest.mark.parametrize("store_url", PG, indirect=True)
def test_a_restart_during_a_call_is_retried_until_the_server_is_back(relayed: tuple[Store, Relay],
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    store, relay = relayed
    store.create_run("r1", host="node1", plan={}, started_ts=1.0)
    relay.stop()
    back = threading.Timer(1.5, relay.start)
    back.start()
    t0 = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="soak.store"):
            store.add_event("r1", "note", ts=2.0, message="while it restarts")
    finally:
        back.join()
    took = time.monotonic() - t0
    assert 1.4 <= took <= RECONNECT_WITHIN_S + SLACK_S, took
    assert [e.message for e in store.load_events("r1")] == ["while it restarts"]
    lost = [r.getMessage() for r in caplog.records if "connection lost" in r.getMessage()]
    assert lost and "attempt 1" in lost[0] and "refused" in lost[-1].lower(), lost


@pytest.mark.parametrize("store_url", PG, indirect=True)
def test_a_store_away_longer_than_the_bound_fails_the_call_with_one_line(relayed: tuple[Store, Relay]) -> None:
    store, relay = relayed
    store.create_run("r1", host="node1", plan={}, started_ts=1.0)
    relay.stop()
    t0 = time.monotonic()
    with pytest.raises(StoreError) as err:
        store.add_event("r1", "note", ts=2.0, message="lost")
    took = time.monotonic() - t0
    assert RECONNECT_WITHIN_S - 1.5 <= took <= RECONNECT_WITHIN_S + SLACK_S, took
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("store postgresql") and "write failed" in msg, msg
    with pytest.raises(StoreError, match="read failed"):
        store.get_run("r1")


@pytest.mark.parametrize("store_url", PG, indirect=True)
def test_the_writer_keeps_its_rows_while_the_server_is_down_and_writes_them_when_back(
        relayed: tuple[Store, Relay]) -> None:
    store, relay = relayed
    store.create_run("r1", host="node1", plan={}, started_ts=1.0)
    w = store.writer("r1", max_rows=100, max_delay_s=3600)
    for i in range(3):
        w.add(_tick(10.0 + i))
    relay.stop()
    with pytest.raises(StoreError):
        w.flush()
    assert w.pending() == 3
    w.add(_tick(13.0))
    relay.start()
    assert w.flush() == 4 and w.pending() == 0
    assert [s["ts"] for s in store.load_samples("r1", device="npu0-0")] == [10.0, 11.0, 12.0, 13.0]
