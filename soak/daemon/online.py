"""The online analysis of a running soak: judged now and then while it runs, each new
finding said once (a terminal line and an event), a profiler capture asked for where a
finding needs one.

The scheduler calls ``OnlineAnalysis.step`` (``soak.daemon.jobs``); the daemon keeps what it
returns for its status. Who judges and what is stored follows the agent's membership: a
single node judges its run; in a cluster every node analyses its own chips and the leader
compares and judges from what they stored (``soak.daemon.cluster``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from soak.analysis import links as lk
from soak.analysis import numerics
from soak.analysis.captures import CapturePlanner, wall_of
from soak.daemon.membership import Membership
from soak.daemon.spool import StoreSpool
from soak.daemon.started import StartedRun
from soak.daemon.status import LinkTest, OpenFinding, ReliabilitySoFar
from soak.device_names import device_key
from soak.judge import judge_run
from soak.runplan import online_bucket_s
from soak.store.schema import NODE_STATUSES

log = logging.getLogger("soak.daemon")


@dataclass(frozen=True)
class Found:
    """What one online analysis found, and what of it this agent serves on /metrics."""

    findings: list[dict[str, Any]]
    passing: bool | None  # the run's verdict so far; None where another node judges it
    # the findings this agent answers for: its own chips' and, judging, the peer comparison's
    open: tuple[OpenFinding, ...] = ()
    criteria: Mapping[str, bool] = field(default_factory=dict)  # judged criteria (judging only)
    link_test: LinkTest | None = None  # this node's pairs in the run's last link test
    nodes_by_status: Mapping[str, int] = field(default_factory=dict)  # a cluster run's judge only
    reliability: ReliabilitySoFar | None = None  # the judge only


def open_findings(findings: Iterable[Mapping[str, Any]]) -> tuple[OpenFinding, ...]:
    """The findings an analysis holds, as /metrics names them (one per name, in order)."""
    out = {OpenFinding(str(f["kind"]), str(f.get("severity")), f.get("node"), f.get("device"), f.get("metric"),
                       f.get("code")) for f in findings}
    return tuple(sorted(out, key=lambda o: tuple(str(v) for v in vars(o).values())))


def criteria_so_far(criteria: Iterable[Mapping[str, Any]]) -> dict[str, bool]:
    """Each judged criterion, named by its code without the ``criterion.`` prefix: met or not
    (one not judged yet is left out, never counted as met or missed)."""
    return {str(c["code"]).removeprefix("criterion."): bool(c["met"]) for c in criteria
            if c.get("met") is not None and c.get("code")}


def reliability_so_far(r: Any) -> ReliabilitySoFar | None:
    """The judged reliability (``soak.analysis.reliability.Reliability``) as /metrics serves
    it: the time still ahead of a running run is neither lost nor counted."""
    if r is None:
        return None
    lost = {c: s for c, s in r.lost_s.items() if c != "ahead"}
    return ReliabilitySoFar(r.ettr, lost, dict(r.failures), r.node_hours, r.node_mttf_h_lower90)


def last_link_test(store: Any, run_id: str, node: str | None) -> LinkTest | None:
    """``node``'s pairs in the run's last link test (``soak.analysis.links``); None before one."""
    if node is None:  # a link test runs between the nodes of a cluster run
        return None
    events = store.load_events(run_id, "link_test", last=1)
    if not events:
        return None
    bw: dict[str, float] = {}
    for r in lk.from_events(events).results:
        if r.busbw_gbps is not None and node in (r.a, r.b):
            bw[r.b if r.a == node else r.a] = r.busbw_gbps
    return LinkTest(events[-1].ts, bw) if bw else None


def nodes_by_status(store: Any, run_id: str) -> dict[str, int]:
    """How many nodes of a cluster run are in each status (every status named, 0 when none)."""
    counts = dict.fromkeys(NODE_STATUSES, 0)
    for n in store.cluster_nodes(run_id):
        counts[n.status] = counts.get(n.status, 0) + 1
    return counts if any(counts.values()) else {}


def _lower_priority() -> None:
    """Lower this thread's CPU priority (nice is per thread on Linux): where the training
    shares the host's cores with the daemon (a CPU run, a busy host), the analysis must not
    slow the steps it measures, which it would see as throughput lost."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (OSError, AttributeError):  # not Linux, or not allowed: the analysis runs as it is
        pass


def _preload() -> None:
    """Import what the detectors import only when they find data (scipy: 2 s on a busy
    host): else the first analysis with data pays it, and its duration spaces the next
    analysis 50 times as far (minutes later)."""
    import scipy.ndimage  # noqa: F401
    import scipy.special  # noqa: F401


class OnlineAnalysis:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.next_at = 0.0  # monotonic: no analysis before
        self._seen: set[tuple[str, str | None, str | None, str | None]] = set()
        # the findings said on the terminal: (kind, where, severity) by key
        self._said: dict[tuple[str, str | None, str | None, str | None], tuple[str, str, str]] = {}
        self._captures: CapturePlanner | None = None
        self._preloaded = False

    def step(self, run: StartedRun, membership: Membership, spool: StoreSpool,
             step_time_s: Callable[[], float | None]) -> Found | None:
        """One online analysis, or None when none was due or there is nothing to judge yet.
        ``step_time_s``: the ranks' median step time now, if any stepped."""
        if spool.down:  # nothing to read from; after the outage
            return None
        # The trace grows all run long; keep the online analysis under ~2 % of a core by
        # spacing runs at least 50x their own duration apart (the final one always runs).
        if time.monotonic() < self.next_at:
            return None
        if not self._preloaded:
            _preload()
            _lower_priority()
            self._preloaded = True
        t0 = time.monotonic()
        own = membership.node_findings(run, final=False)
        links = last_link_test(run.store, run.run_id, membership.node)
        if own is not None and not membership.judges():
            self._space(t0)
            self.announce(run, own, spool, membership.node)
            self.ask_captures(run, own, step_time_s)
            return Found(own, None, open_findings(own), link_test=links)
        now = run.clock.now()
        judged = judge_run(run.store, run.run_id, plan=run.plan, profile=run.profile, now=now, status="running",
                           bucket_s=online_bucket_s(run.plan, now - run.started_ts))
        self._space(t0)
        if judged is None or judged.analysis.start is None:  # no data yet
            return None
        findings = judged.findings
        kept = membership.keep_findings(run, findings)
        self.announce(run, (own or []) + kept, spool, membership.node)
        # captures are for this node's own chips: on a single node, all the run's
        self.ask_captures(run, findings if own is None else own, step_time_s)
        return Found(findings, judged.verdict == "pass", open_findings((own or []) + kept),
                     criteria_so_far(judged.criteria), links, nodes_by_status(run.store, run.run_id),
                     reliability_so_far(judged.reliability))

    def _space(self, t0: float) -> None:
        # the first run pays one-off imports: it does not set the spacing
        took = time.monotonic() - t0
        self.next_at = time.monotonic() + (49 * took if self.next_at else 0.0)
        # the floor on how soon a finding reaches the store and /metrics after it is there
        log.info("online analysis took %.2f s; the next one in %.0f s at the earliest", took,
                 max(0.0, self.next_at - time.monotonic()))

    def announce(self, run: StartedRun, findings: list[dict[str, Any]], spool: StoreSpool,
                 node: str | None) -> None:
        """A finding seen for the first time: a line on the terminal and an event. One said
        that this analysis no longer holds (more data cleared it): a line saying so, and it is
        said again if it comes back."""
        now = run.clock.now()
        held = {(f["kind"], f.get("node"), f.get("device"), f.get("metric")) for f in findings}
        for key in sorted(self._seen - held, key=lambda k: tuple(str(x) for x in k)):
            self._seen.discard(key)
            said = self._said.pop(key, None)
            if said is not None:
                kind, where, severity = said
                self.out.write(f"soak: finding no longer held: [{severity}] {kind} on {where} "
                               "(the analysis with more data does not find it)\n")
                self.out.flush()
        for f in findings:
            key = (f["kind"], f.get("node"), f.get("device"), f.get("metric"))
            if key not in self._seen:
                self._seen.add(key)
                # a finding that names no chip (a job-wide one, a dispute nobody settled) is said
                # of its node or of the job, never of "None"
                device = f.get("device")
                where = (device_key(f.get("node"), str(device)) if device is not None
                         else f.get("node") or "the job")
                # a numerical finding was said on the terminal when its event was stored
                # (the daemon's heartbeat drain), one check period sooner: not twice
                if f.get("severity") != "info" and f["kind"] not in numerics.KINDS:
                    self.out.write(f"soak: finding [{f.get('severity')}] {f['kind']} on {where}: {f.get('summary')}\n")
                    self.out.flush()
                    self._said[key] = (str(f["kind"]), where, str(f.get("severity")))
                spool.event("finding", ts=now, message=f.get("summary"), node=node,
                            detail={k: f.get(k) for k in ("kind", "node", "device", "metric", "severity",
                                                             "start", "end", "code", "values")})

    def ask_captures(self, run: StartedRun, findings: list[dict[str, Any]],
                     step_time_s: Callable[[], float | None]) -> None:
        """Ask the ranks for a profiler capture on new throughput or dropout findings."""
        cap = run.plan.capture
        if self._captures is None:
            self._captures = CapturePlanner(run.run_dir, max_per_hour=cap.max_per_hour, steps=cap.steps)
        if not cap.steps or not cap.max_per_hour:
            return
        try:
            made = self._captures.decide(findings, now=run.clock.now(), to_wall=wall_of(run.clock),
                                         step_time_s=step_time_s())
        except OSError as exc:  # evidence, not the run: a full disk is the disk job's business
            log.warning("capture request not written: %s", exc.strerror or exc)
            return
        for req in made:
            log.info("capture %d requested: %s", req.n, req.reason)
