"""A real ``soak run`` agent whose PostgreSQL store goes away mid-run and comes back: it keeps
training and sampling, spools what it cannot write, writes it once the store is back, and
ends with a verdict and every reading stored.

A relay between the agent and the server stands in for the server's restart (the shared
test server is never restarted): stopping it drops the agent's connections and refuses new
ones."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from soak.config import SamplingSection
from soak.errors import StoreError
from soak.runfolder import store_spool_path
from soak.store import Store
from tests import procs
from tests.relay import Relay

pytestmark = [pytest.mark.slow, pytest.mark.pg]
ROOT = Path(__file__).parent.parent.parent
PG_URL = os.environ.get("SOAK_TEST_PG_URL")
OUTAGE_S = 10.0
INTERVAL_S = 1.0
FLUSH_EVERY_S = SamplingSection().flush_every_s


def _agent(tmp_path: Path, url: str, *extra: str, duration: str = "30s") -> list[str]:
    return [sys.executable, "-m", "soak", "run", *extra, "--db", url, "--backend", "sim", "--sim-chips", "2",
            "--interval", f"{INTERVAL_S:g}s", "--no-preflight", "--listen", "", "--duration", duration,
            "--workload", "lm", "--nproc", "1", "--data-dir", str(tmp_path / "runs"), "--run-id", "r1"]


def _ticks(db_url: str) -> int:
    with Store.open(db_url, create=False) as s:
        return len({r["ts"] for r in s.load_samples("r1", device="npu0-0")})


def test_a_store_away_for_10_s_mid_run_loses_no_reading_and_is_recorded(tmp_path: Path, db_url: str,
                                                                          relay: Relay) -> None:
    run_dir = tmp_path / "runs" / "r1"
    logs = [procs.daemon_log(run_dir)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with procs.start(_agent(tmp_path, relay.url(db_url)), tmp_path, "agent", env=env) as agent:
        procs.wait_until(lambda: _ticks(db_url) >= 5, agent, 90, what="5 stored ticks", logs=logs,
                         retry_on=(StoreError,))
        relay.stop()
        down = time.monotonic()
        # the store stays away until the agent has spooled what it could not write (a loaded
        # machine may take longer than the outage to try) and for OUTAGE_S at least
        procs.wait_until(lambda: store_spool_path(run_dir).exists(), agent, 60, what="the spool", logs=logs)
        procs.wait_until(lambda: time.monotonic() - down >= OUTAGE_S, agent, OUTAGE_S + 5,
                         what="the outage's end", logs=logs)  # the agent lives through it
        relay.start()
        back = time.monotonic()

        def recorded() -> bool:
            with Store.open(db_url, create=False) as s:
                return bool(s.load_events("r1", kind="store_outage"))

        procs.wait_until(recorded, agent, 30, what="the store_outage event", logs=logs)
        recovered_s = time.monotonic() - back
        rc = agent.wait_exit(90, logs=logs)
        err = agent.stderr_text()
    print(f"store away {back - down:.1f} s; spool written {recovered_s:.1f} s after it came back")
    assert rc in (0, 1), err
    assert "verdict pass" in err or "verdict fail" in err, err
    assert not store_spool_path(run_dir).exists()
    with Store.open(db_url, create=False) as s:
        run = s.get_run("r1")
        assert run is not None and run.status == "finished" and run.verdict in ("pass", "fail"), run
        (outage,) = s.load_events("r1", kind="store_outage")
        d = outage.detail
        print(f"store_outage event: {outage.message}; {d}")
        # from the first write that failed (the next flush, at most flush_every after the cut) to the
        # replay: no longer than the outage and the backoff of the tries
        away_s = back - down
        assert away_s - FLUSH_EVERY_S - 1 <= d["wall_s"] <= away_s + 6, (away_s, d)
        assert outage.end_ts - outage.ts == pytest.approx(d["duration_s"], abs=0.01) and d["records"] > 0, d
        assert d["node"] is None and d["replayed"] == d["records"], d
        span = run.ended_ts - run.started_ts
        taken = int(re.findall(r"sampler: (\d+) ticks read chips", logs[0].read_text())[-1])
        for device in ("npu0-0", "npu1-0"):
            ts = [r["ts"] for r in s.load_samples("r1", device=device)]
            gaps = [(a, b - a) for a, b in zip(ts, ts[1:], strict=False)]
            print(f"{device}: {len(ts)} readings over {span:.1f} s; gaps over 1.5 s at "
                  f"{[(round(a - outage.ts, 1), round(g, 2)) for a, g in gaps if g > 1.5]} s from the outage")
            # every tick of the outage and after is there: no hole from a few seconds before the
            # cut to the end (a loaded machine may delay a tick while torch starts: not the store's)
            assert max(g for a, g in gaps if a >= outage.ts - 3) <= 2 * INTERVAL_S, (device, gaps)
            # and every reading the sampler took is stored: counted, not guessed from the span
            # (torch's start on a loaded machine delays a few ticks, which were never taken)
            assert len(ts) == taken, (device, len(ts), taken, span)


def test_a_store_away_past_store_outage_max_stops_the_agent_with_its_spool_and_resume_writes_it(
        tmp_path: Path, db_url: str, relay: Relay) -> None:
    run_dir = tmp_path / "runs" / "r1"
    logs = [procs.daemon_log(run_dir)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    plan = tmp_path / "plan.toml"
    plan.write_text('[cluster]\nstore_outage_max = "4s"\n', encoding="utf-8")
    spool = store_spool_path(run_dir)
    with procs.start(_agent(tmp_path, relay.url(db_url), str(plan)), tmp_path, "agent", env=env) as agent:
        procs.wait_until(lambda: _ticks(db_url) >= 4, agent, 90, what="4 stored ticks", logs=logs,
                         retry_on=(StoreError,))
        relay.stop()
        down = time.monotonic()
        rc = agent.wait_exit(60, logs=logs)
        stopped_after = time.monotonic() - down
        err = agent.stderr_text()
    last = err.strip().splitlines()[-1]
    assert rc == 2, err
    assert "did not answer" in last and f"records kept in {spool}" in last and "soak run --resume r1" in last, err
    with Store.open(db_url, create=False) as s:
        before = [r["ts"] for r in s.load_samples("r1", device="npu0-0")]
        assert s.get_run("r1").status == "running"  # left for --resume, not finished without a verdict
    spooled = spool.read_text(encoding="utf-8").splitlines()
    print(f"stopped {stopped_after:.1f} s after the store went away; {len(spooled)} records spooled")
    assert spooled and all(line.startswith('{"op":') for line in spooled)
    # replaying while the store is still away: one line, and the spool is kept whole
    early = procs.run([sys.executable, "-m", "soak", "cluster", "replay", "r1", "--data-dir", str(tmp_path / "runs"),
                       "--db", relay.url(db_url)], tmp_path, "replay", env=env, timeout_s=60)
    assert early.returncode == 2 and len(early.stderr.strip().splitlines()) == 1, early.stderr
    assert spool.read_text(encoding="utf-8").splitlines() == spooled

    relay.start()
    resumed = procs.run([sys.executable, "-m", "soak", "run", "--resume", "r1", "--data-dir", str(tmp_path / "runs"),
                         "--db", relay.url(db_url), "--listen", ""], tmp_path, "resumed", env=env, timeout_s=90,
                        logs=logs)
    assert resumed.returncode in (0, 1), resumed.stderr
    assert f"records the store missed written from {spool}" in resumed.stderr, resumed.stderr
    assert not spool.exists()
    with Store.open(db_url, create=False) as s:
        run = s.get_run("r1")
        assert run is not None and run.status == "finished" and run.verdict in ("pass", "fail"), run
        after = [r["ts"] for r in s.load_samples("r1", device="npu0-0")]
        (gap,) = s.load_events("r1", kind="gap")
    # the readings the first agent took while the store was away are stored, up to its stop
    spooled_ts = [t for t in after if before[-1] < t < gap.ts + 0.01]
    print(f"{len(spooled_ts)} readings written from the spool; the gap starts {gap.ts - before[-1]:.1f} s "
          f"after the last reading stored before the outage")
    assert len(spooled_ts) >= stopped_after - FLUSH_EVERY_S - 2, (len(spooled_ts), stopped_after)
    assert gap.ts >= before[-1] + stopped_after - FLUSH_EVERY_S - 2
