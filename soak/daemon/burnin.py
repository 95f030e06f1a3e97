"""The burn-in clock: a run that ends only after a stretch without an unexpected failure.

Burn-in practice runs a fixed clock (say 72 h) that starts again on any unexpected failure or
reboot: the machine is accepted once it has run that long clean. With the profile's
``[evidence] restart_clock_on_failure = true`` and ``min_uninterrupted_h`` the daemon does the
same: at the planned end it looks at the run's accounting, and while fewer than
``min_uninterrupted_h`` hours have passed since the last unexpected failure of the machine (a
crash or hang not injected, a node of a cluster lost) or the daemon's own outage (a reboot),
it moves the planned end to where that stretch would complete, never past ``max_duration_h``
from the soak's start. The plan's duration moves with it, so the run's planned window
(``soak.runplan.planned_window``) keeps its start, and an event says so.

A cluster run makes one decision for all its nodes: the node holding the judging lease
decides from every node's events in the store and writes the moved end to the run row; every
other node reads it there (``follow``), and waits at its planned end, at most
``decision_wait_s``, for a decision it has not seen yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from soak.analysis import evidence as ev
from soak.analysis import reliability as rel
from soak.daemon.started import StartedRun


@dataclass(frozen=True)
class Extension:
    """Where the burn-in clock moves the planned end, and why (run time line)."""

    planned_end: float
    since: float  # the clock's start: the end of the last unexpected failure or outage, else the soak's start
    capped: bool  # the end is the soak's longest allowed duration, not a completed stretch
    cause: str | None = None  # what started the clock again (soak.analysis.evidence: crash, hang, node lost,
    # daemon down); None: nothing did, the stretch counts from the soak's start
    node: str | None = None  # the cluster node it happened on, where it names one


def on(evidence: Any) -> bool:
    """Whether the profile runs the burn-in clock."""
    return bool(getattr(evidence, "restart_clock_on_failure", False))


def cap_s(evidence: Any, duration_s: float) -> float:
    """The longest the soak may run with the burn-in clock on (its planned duration at least)."""
    if not on(evidence):
        return duration_s
    return max(duration_s, float(getattr(evidence, "max_duration_h", 0.0)) * 3600.0)


def extension(events: Sequence[Any], workloads: Sequence[str], *, planned_start: float, now: float,
              duration_s: float, evidence: Any, time_scale: float = 1.0) -> Extension | None:
    """The later planned end the clock asks for at ``now``; None when the run may end.
    ``events``: the run's, of every node of a cluster run (a node's loss is a failure)."""
    need_h = float(getattr(evidence, "min_uninterrupted_h", 0.0))
    if not on(evidence) or need_h <= 0:
        return None
    acc = ev.account(events, workloads, planned_start=planned_start, planned_end=now, ended=now,
                     time_scale=time_scale)
    stops = rel.failed(acc) + [i for i in acc.interruptions if i.cause == ev.DAEMON_DOWN]
    last = max(stops, key=lambda i: i.end, default=None)
    since = planned_start if last is None else last.end
    limit = planned_start + cap_s(evidence, duration_s)
    end = min(since + need_h * 3600.0, limit)
    if end <= now:
        return None
    return Extension(planned_end=end, since=since, capped=end >= limit,
                     cause=None if last is None else last.cause, node=None if last is None else last.node)


def moved(run: StartedRun, planned_end: float) -> StartedRun:
    """``run`` with its planned end at ``planned_end``: the plan's duration moves with it, so
    the soak keeps its start."""
    start = run.planned_end_ts - run.plan.run.duration_s
    plan = replace(run.plan, run=replace(run.plan.run, duration_s=planned_end - start))
    return replace(run, plan=plan, planned_end_ts=planned_end)


def note(ext: Extension, evidence: Any, *, planned_start: float) -> tuple[str, dict[str, Any]]:
    """The ``note`` event that records a move: its message and detail."""
    need = float(getattr(evidence, "min_uninterrupted_h", 0.0))
    why = "" if ext.cause is None else f" ({ext.cause}" + (f" on node {ext.node})" if ext.node else ")")
    msg = (f"burn-in clock: {need:g} h without an unexpected failure needed since "
           f"{ext.since - planned_start:.0f} s into the soak{why}; the run goes on to "
           f"{ext.planned_end - planned_start:.0f} s" + (" (its longest allowed)" if ext.capped else ""))
    detail = {"burn_in": True, "since": ext.since, "planned_end": ext.planned_end, "planned_start": planned_start,
              "capped": ext.capped, "min_uninterrupted_h": need, "cause": ext.cause, "node": ext.node}
    return msg, detail


# ---------------------------------------------------------------------- a cluster run's other nodes

MOVED, ENDS, WAITS, UNDECIDED = "moved", "ends", "waits", "undecided"


@dataclass(frozen=True)
class Follow:
    """What a node that does not decide does at (or before) its planned end."""

    code: str  # MOVED: the run goes on to planned_end; ENDS: the judge decided it ends; WAITS: no
    # decision yet; UNDECIDED: none within the bound, this node ends at its planned end
    planned_end: float  # the end this node keeps
    judge: str | None  # the node holding the judging lease, None: none holds it


def follow(planned_end: float, *, stored_end: float | None, run_status: str, judge: str | None,
           judge_status: str | None, waited_s: float, bound_s: float) -> Follow:
    """The judge's decision as this node reads it from the store: ``stored_end`` the run row's
    planned end, ``judge``/``judge_status`` the lease holder and its node row's status (its
    node leaves ``running`` once it decided that the run ends), ``waited_s`` how long (wall)
    this node has waited at its own planned end."""
    if stored_end is not None and stored_end > planned_end:
        return Follow(MOVED, stored_end, judge)
    if run_status != "running" or judge_status in ("finished", "stopped", "failed"):
        return Follow(ENDS, planned_end, judge)
    if waited_s >= bound_s:
        return Follow(UNDECIDED, planned_end, judge)
    return Follow(WAITS, planned_end, judge)


def decision_wait_s(plan: Any, evidence: Any) -> float:
    """How long (wall) a node of a cluster run waits at its planned end for the burn-in clock's
    decision: the judging lease's term (``cluster.node_silence``: a judge that died at the end
    has its lease taken by another node once it expired), the clocks' offset between nodes and
    a few looks more. 0 where nobody waits (one node, or the clock off)."""
    c = plan.cluster
    if c.nodes <= 1 or not on(evidence):
        return 0.0
    return c.node_silence_s + c.max_clock_offset_s + 10.0
