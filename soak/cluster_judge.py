"""``soak cluster judge RUN_ID``: a cluster run judged after the fact, from what the store holds.

A cluster run is judged by the agent holding its judging lease (``soak.cluster.member``).
Where none did (every agent killed, or the holder gone while the others ended), the run stays
``running`` with no verdict; anyone can judge it afterwards, here:

- the judge takes the run's lease (``soak cluster judge on HOST``), so it never writes beside
  a live agent: refused while one holds an unexpired lease on the running run, and for a run
  judged already, unless ``force``;
- nodes silent past ``cluster.node_silence`` are marked lost, each with its ``node_lost``
  event stamped when it was last seen;
- every node whose agent did not end its part gets the last analysis its agent would have
  stored: its chips' findings and bucket summaries up to its last reading;
- the run is recorded as it ended: every node finished: ``finished``; every node finished or
  stopped (on request; the judge among them did not judge): ``stopped``; else ``failed``, no
  agent finished it, naming the nodes that did not end.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from soak.clock import ScaledClock
from soak.cluster.analysis import NODE_KINDS, analyze_node, write_node_buckets
from soak.cluster.member import silent
from soak.errors import InputError, UnknownRun
from soak.judge import judge_run
from soak.output import fmt
from soak.runplan import plan_of, planned_window, profile_of

ENDED = ("finished", "stopped")  # a node whose agent ended its part without a failure


@dataclass(frozen=True)
class AfterJudged:
    """What ``soak cluster judge`` recorded."""

    run_id: str
    status: str
    why: str | None
    verdict: str | None
    judge: str  # the lease holder's name it wrote the verdict as
    lost: tuple[str, ...]  # the nodes it found lost
    closed: tuple[str, ...]  # the nodes whose last analysis it stored for their agents
    analysis: dict[str, Any] | None  # the analysis document (report/analysis.json)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "why": self.why, "verdict": self.verdict,
                "judged_by": self.judge, "lost": list(self.lost), "closed": list(self.closed),
                "analysis": self.analysis}

    def line(self) -> str:
        n = len((self.analysis or {}).get("findings") or [])
        return (f"cluster run {self.run_id} {self.status}" + (f" ({self.why})" if self.why else "")
                + f", verdict {fmt(self.verdict)}, {n} findings; judged by {self.judge}")


def judge_name() -> str:
    """The lease holder's name of a judgement by hand: where it was made."""
    return f"soak cluster judge on {socket.gethostname()}"


def judge_after(store: Any, run_id: str, *, force: bool = False, judge: str | None = None) -> AfterJudged:
    """Judge cluster run ``run_id`` from the store and record its end; ``InputError`` (one
    line) for an unknown run, a run on one host, or one a live agent still judges."""
    judge = judge or judge_name()
    rec = store.get_run(run_id)
    if rec is None:
        raise UnknownRun.not_in_store(run_id, store.url)
    if rec.nodes <= 1:
        raise InputError(f"run {run_id} is not a cluster run (soak analyze {run_id} judges a run on one host)")
    plan = plan_of(rec)
    if plan is None:
        raise InputError(f"run {run_id}: no plan stored with it; there is nothing to judge it by")
    ttl = plan.cluster.node_silence_s
    now = store.store_now()
    if not force:
        if rec.status == "running" and rec.leader is not None and rec.lease_until is not None \
                and rec.lease_until >= now:
            raise InputError(f"run {run_id} is running and {_holder(rec.leader)} holds its judging lease for "
                             f"{rec.lease_until - now:.0f} s more: its agent judges it (--force judges it now)")
        if rec.status != "running":
            raise InputError(f"run {run_id} is {rec.status}, verdict {fmt(rec.verdict)}, judged by "
                             f"{_holder(rec.leader) if rec.leader else 'N/A'} (--force judges it again)")
    if not store.take_lease(run_id, judge, ttl, force=force):
        raise InputError(f"run {run_id}: its judging lease was taken meanwhile (soak cluster status {run_id})")

    clock = ScaledClock.of_run(rec)
    nodes = store.cluster_nodes(run_id)
    # the run ended with its last sign of life, not now (a run may be judged days later)
    ended_ts = max([t for t in (store.last_sample_ts(run_id), *(n.ended_ts for n in nodes if n.status in ENDED))
                    if t is not None], default=rec.started_ts)
    lost = silent(nodes, now, ttl)
    for n in lost:
        at = clock.to_scaled(n.last_seen)
        store.update_node(run_id, n.name, status="lost", ended_ts=at)
        store.add_event(run_id, "node_lost", ts=at, node=n.name,
                        message=f"node {n.name} (rank {n.rank}) lost: not seen for {now - n.last_seen:.0f} s "
                                f"(bound {ttl:.0f} s), found by {judge}",
                        detail={"node": n.name, "rank": n.rank, "last_seen": n.last_seen, "found_by": judge,
                                "silent_s": round(now - n.last_seen, 3), "bound_s": ttl})
    profile = profile_of(rec, plan)
    planned_start, planned_end = planned_window(rec, plan)
    nodes = store.cluster_nodes(run_id)
    closed = [n.name for n in nodes if n.status not in (*ENDED, "failed")]
    for name in closed:
        _close_node(store, run_id, name, plan=plan, profile=profile, planned_start=planned_start,
                    planned_end=planned_end)

    status, why = _how_it_ended(store, run_id, nodes, rec.nodes)
    judged = judge_run(store, run_id, plan=plan, profile=profile, status=status, why=why, ended=ended_ts)
    verdict = None if judged is None else judged.verdict
    # renewed, or found taken, before anything of the verdict is written
    if not store.take_lease(run_id, judge, ttl, force=False) and not force:
        raise InputError(f"run {run_id}: its judging lease was taken meanwhile (soak cluster status {run_id})")
    store.replace_findings(run_id, [] if judged is None else judged.findings)
    if not store.finish_cluster_run(run_id, judge, status=status, ended_ts=ended_ts, verdict=verdict):
        raise InputError(f"run {run_id}: its judging lease was taken meanwhile (soak cluster status {run_id})")
    return AfterJudged(run_id, status, why, verdict, judge, tuple(n.name for n in lost), tuple(closed),
                       None if judged is None else judged.to_dict())


def _close_node(store: Any, run_id: str, node: str, *, plan: Any, profile: Any, planned_start: float,
                planned_end: float | None) -> None:
    """What the agent of ``node`` stores when its part ends: its chips' findings over the
    whole run and its bucket summaries to its last reading."""
    last = store.last_sample_ts(run_id, node=node)
    if last is None:
        return
    result = analyze_node(store, run_id, node, plan=plan, profile=profile)
    store.replace_findings(run_id, [f.to_dict() for f in result.findings], node=node, kinds=NODE_KINDS)
    end = planned_end if planned_end is not None else last
    write_node_buckets(store, run_id, node, plan=plan, profile=profile, planned_start=planned_start,
                       planned_end=end, upto=min(last, end), final=True)


def _how_it_ended(store: Any, run_id: str, nodes: list[Any], expected: int) -> tuple[str, str | None]:
    """The run's status, and why, from how its nodes ended."""
    if len(nodes) == expected and all(n.status == "finished" for n in nodes):
        return "finished", None
    if len(nodes) == expected and all(n.status in ENDED for n in nodes):
        reasons = sorted({str(e.detail.get("reason")) for e in store.load_events(run_id, kind="stop")
                          if e.detail.get("reason")})
        return "stopped", ", ".join(reasons) or None
    open_ = [f"{n.name} {n.status}" for n in nodes if n.status not in ENDED]
    missing = expected - len(nodes)
    said = ", ".join(open_ + ([f"{missing} never joined"] if missing > 0 else []))
    return "failed", f"no agent finished it: {said}"


def _holder(name: str) -> str:
    """A lease holder as a sentence names it: a node, or a judgement by hand."""
    return name if name.startswith("soak ") else f"node {name}"
