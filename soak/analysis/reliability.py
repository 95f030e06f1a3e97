"""The run's reliability in the customer's terms: effective training time, time lost by
cause, failures per node-hour and the mean time to failure with its confidence.

The figures follow the large training fleets' reports: Meta's effective training time ratio
(ETTR: productive time over the time available to train, "Revisiting Reliability in
Large-Scale ML Research Clusters", HPCA 2025) and Google's goodput with its lost time split
by cause. Everything here is computed from the judge's time accounting
(``soak.analysis.evidence.account``), so the certificate's figures and the accounting's
never disagree:

- the planned time is split, without overlap, into productive training, injected canaries
  (the plan's own faults: they never count against the machine) and time lost by cause.
  Where two causes overlap, the one that weighs on the machine takes the time
  (``PRIORITY``): an unexpected crash during a node's loss is the loss, an injected crash
  during the daemon's outage is the outage. Planned time after the run's end is
  ``not_run`` (of a run in progress: ``ahead``, left out of its ETTR, which is then the ratio
  so far). So ``productive_s + injected_s + sum(lost_s) == planned_s``, always;
- a failure's time is cut where soak knew of it (a hang's kill, a node's loss declared): the
  rest, until the job trained again, is its ``restart``;
- the accounting's training time is the job up; productive time is that less what kept the
  job from stepping inside it (``OVERHEADS``: checkpoints, link tests, data stalls, as the
  workloads timed them, and the work a failure threw away since the checkpoint it started
  again from), so the two figures reconcile;
- a **failure** is an unexpected interruption that is the machine's: a crash or hang not
  injected, a node lost, a crash on a link test's timeout (a link failure). A crash that
  begins while a node is being lost is that loss, not a failure of its own. Operator stops,
  store outages, the daemon's own outages and start-up are not failures;
- with r failures in T node-hours, the mean time to failure of one node is T / r (only
  when r >= 1), and its one-sided 90 % lower bound is ``2T / chi2(0.90; 2r + 2)`` (the
  exact Poisson bound; with r = 0 it is T / ln 10 = T / 2.303). A job over N nodes fails
  when any one does: its MTTF is the node's divided by N.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from soak.analysis import evidence as ev
from soak.analysis._stats import poisson_upper
from soak.analysis.messages import Said, said

CONFIDENCE = 0.90
"""The one-sided confidence of the MTTF lower bound."""

NOT_RUN = "not_run"
AHEAD = "ahead"
INJECTED = "injected"
RESTART = "restart"  # from a hang's kill or a node's loss declared until the job trained again
LINK = "link"  # a crash on a link test's collective timeout: a link failed
# a chip's own fault report that interrupts training (a RestartNPU-class code, a hardware Xid),
# with the crash or hang it caused (soak.analysis.device_faults)
DEVICE_FAULT = "device_fault"
# a chip the workloads' own checks found computing wrong (a confirmed wrong result, NaN or a
# second transient: soak.analysis.numerics); the job rode it out: a failure of no length
SDC = "sdc"
FAULT_LEAD_S = 600.0  # a fault read up to this long (run time line) before a crash caused it
STORE_OUTAGE = "store_outage"  # the agent stopped for the store, until it was resumed
# Time inside the accounting's training in which the job did not step: the job was up, but
# checkpointing, testing its links, waiting for data or doing again what a failure threw away
# (the steps since the checkpoint it resumed from)
REDONE, DATA_STALL, CHECKPOINT, LINK_TEST = "redone", "data_stall", "checkpoint", "link_test"
OVERHEADS: tuple[str, ...] = (REDONE, DATA_STALL, CHECKPOINT, LINK_TEST)
_OVERHEAD_EVENTS = {"checkpoint": CHECKPOINT, "link_test": LINK_TEST, "data_stall": DATA_STALL}

# Who takes a stretch two causes share, first first: what weighs on the machine before what
# the plan or the operator caused, so that the ETTR is never overstated.
PRIORITY: tuple[str, ...] = ("node_lost", LINK, DEVICE_FAULT, "crash", "hang", RESTART, STORE_OUTAGE, "daemon_down", "gave_up",
                             INJECTED, *OVERHEADS, "startup", "stopped")
LOST_CAUSES: tuple[str, ...] = tuple(c for c in PRIORITY if c != INJECTED) + (NOT_RUN,)
"""The keys of ``lost_s``, in the order the report shows them."""
FAILURE_CAUSES: tuple[str, ...] = ("crash", "hang", "node_lost", LINK, DEVICE_FAULT, SDC)
"""The keys of ``failures``: the unexpected interruptions that are the machine's."""


def key(cause: str) -> str:
    """An interruption's cause as a key of ``lost_s`` (``daemon down`` -> ``daemon_down``)."""
    return cause.replace(" ", "_")


@dataclass(frozen=True)
class Projection:
    """The MTTF lower bound of a job over ``nodes`` nodes."""

    nodes: int
    mttf_h_lower90: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "mttf_h_lower90": self.mttf_h_lower90}


@dataclass(frozen=True)
class Reliability:
    """Where the planned time went and how often the machine failed (run time line)."""

    planned_s: float
    productive_s: float
    injected_s: float
    lost_s: Mapping[str, float]
    failures: Mapping[str, int]
    node_hours: float
    nodes: int
    projections: tuple[Projection, ...] = ()
    injected_count: int = 0
    confidence: float = CONFIDENCE
    per_node: tuple[Mapping[str, Any], ...] = field(default=())
    # the accounting's training time: the job up, its checkpoints, link tests, data stalls and
    # work redone included (``OVERHEADS``), which productive time leaves out
    training_s: float | None = None

    @property
    def ettr(self) -> float | None:
        """Productive time over the time the machine had to train (injected faults given back,
        and a run in progress's time still ahead)."""
        available = self.planned_s - self.injected_s - self.lost_s.get(AHEAD, 0.0)
        return None if available <= 0 else max(0.0, min(1.0, self.productive_s / available))

    @property
    def failure_count(self) -> int:
        return sum(self.failures.values())

    @property
    def node_mttf_h(self) -> float | None:
        """The point estimate: node-hours per failure; None without a failure (no estimate)."""
        return mttf_h(self.failure_count, self.node_hours)

    @property
    def node_mttf_h_lower90(self) -> float | None:
        return mttf_h_lower(self.failure_count, self.node_hours, self.confidence)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ettr": self.ettr, "planned_s": self.planned_s, "productive_s": self.productive_s,
            "injected_s": self.injected_s, "lost_s": dict(self.lost_s), "failures": dict(self.failures),
            "training_s": self.training_s,
            "node_hours": self.node_hours, "node_mttf_h": self.node_mttf_h,
            "node_mttf_h_lower90": self.node_mttf_h_lower90,
            "projections": [p.to_dict() for p in self.projections],
            "nodes": self.nodes, "injected_count": self.injected_count, "confidence": self.confidence,
            "per_node": [dict(n) for n in self.per_node],
            "statements": [{"code": x.code, "values": x.values, "summary": str(x)} for x in self.statements()],
        }

    def statements(self) -> list[Said]:
        """The section's sentences, coded: ETTR, failures, the MTTF bound, the projections and
        what the bound means."""
        lost = [(c, s) for c, s in self.lost_s.items() if s > 0 and c != AHEAD]
        ettr = self.ettr
        out = [said("reliability.ettr", {
            # the share is written by the one share format (floored); ettr_pct is kept for readers
            # of the values from before it
            "ettr": ettr, "ettr_pct": None if ettr is None else math.floor(ettr * 10000) / 100, "productive_s": self.productive_s, "planned_s": self.planned_s,
            "injected_s": self.injected_s or None, "injected_count": self.injected_count,
            "lost_total_s": sum(s for _, s in lost),
            "lost_causes": [c for c, _ in lost], "lost_seconds": [s for _, s in lost]})]
        overhead = [(c, self.lost_s.get(c, 0.0)) for c in OVERHEADS if self.lost_s.get(c, 0.0) > 0]
        if self.training_s is not None:
            # the work redone after an injected canary is inside the job's up time and is the
            # canary's (injected_s): said here, so up time, overheads and productive add up
            redone = self.training_s - self.productive_s - sum(x for _, x in overhead)
            if redone >= 1.0:
                overhead.insert(0, (INJECTED, redone))
        if overhead and self.training_s is not None:
            out.append(said("reliability.overhead", {
                "training_s": self.training_s, "productive_s": self.productive_s,
                "overhead_s": sum(x for _, x in overhead), "overhead_causes": [c for c, _ in overhead],
                "overhead_seconds": [x for _, x in overhead]}))
        r, hours, lower = self.failure_count, self.node_hours, self.node_mttf_h_lower90
        out.append(said("reliability.failures", {"failures": r, "node_hours": hours, "node_mttf_h": self.node_mttf_h,
                                                 **{c: self.failures.get(c, 0) for c in FAILURE_CAUSES}}))
        if lower is None:
            return out
        out.append(said("reliability.mttf_lower", {"node_mttf_h_lower90": lower, "dof": 2 * r + 2,
                                                   "node_hours": hours, "divisor": hours / lower}))
        out += [said("reliability.projection", {"nodes": p.nodes, "mttf_h_lower90": p.mttf_h_lower90,
                                                "this_cluster": p.nodes == self.nodes})
                for p in self.projections if p.mttf_h_lower90 is not None]
        out.append(said("reliability.meaning", {"node_hours": hours, "failures": r, "node_mttf_h_lower90": lower}))
        return out


def mttf_h(failures: int, node_hours: float) -> float | None:
    return node_hours / failures if failures > 0 and node_hours > 0 else None


def mttf_h_lower(failures: int, node_hours: float, confidence: float = CONFIDENCE) -> float | None:
    """``2T / chi2(confidence; 2r + 2)``: the one-sided lower bound on the MTTF, the
    reciprocal of the exact Poisson upper bound on the rate; None without time under test."""
    if node_hours <= 0:
        return None
    return 1.0 / poisson_upper(failures, node_hours, confidence)


def _length(intervals: Iterable[tuple[float, float]]) -> float:
    return sum((b - a for a, b in ev.union(intervals)), 0.0)


def cause_of(i: ev.Interruption, outages: Sequence[tuple[float, float]] = ()) -> str:
    """An interruption's key in ``PRIORITY``: injected ones apart, a crash on a link test's
    timeout a link failure, the daemon down because it stopped for the store a store outage."""
    if i.injected:
        return INJECTED
    cause = key(i.cause)
    if cause == "crash" and i.during == "link_test":
        return LINK
    if cause == "daemon_down" and any(a <= i.start <= b for a, b in outages):
        return STORE_OUTAGE
    return cause if cause in PRIORITY else "stopped"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) else None


def spans(acc: ev.Accounting, events: Sequence[Any] = (), time_scale: float = 1.0) -> dict[str, list[tuple[float, float]]]:
    """{cause: stretches} of the run time line: the accounting's interruptions (a hang or a
    node's loss cut where soak knew of it, the rest the restart), then from the events what
    kept a job that was up from stepping: checkpoints, link tests and data stalls (their
    ``seconds``, wall, end at the event), and the work a failure threw away (from the end of
    the checkpoint a workload started again from, or from its first start when it had none,
    until it started again)."""
    evs = sorted(events, key=lambda e: e.ts)
    outages = [(e.ts, e.end_ts if e.end_ts is not None else e.ts) for e in evs if e.kind == "store_outage"]
    out: dict[str, list[tuple[float, float]]] = {}
    losses = [i for i in acc.interruptions if i.cause == ev.NODE_LOST and i.detected is not None]
    for i in acc.interruptions:
        cause = cause_of(i, outages)
        detected = i.detected
        loss = next((x for x in losses if cause in ("crash", "hang", LINK) and x.start <= i.start <= x.end), None)
        if loss is not None:  # a rank that died with a lost node's job: that loss (``failed``)
            i, cause, detected = replace(i, node=loss.node), "node_lost", loss.detected
        if cause == "node_lost" and detected is not None:
            # one loss recorded by several agents: soak knew at the first record
            detected = min(j.detected for j in losses if j.node == i.node and j.start <= i.end and i.start <= j.end)
        if cause != INJECTED and detected is not None and i.start < detected < i.end:
            out.setdefault(cause, []).append((i.start, detected))
            out.setdefault(RESTART, []).append((detected, i.end))
        else:
            out.setdefault(cause, []).append((i.start, i.end))
    saved: dict[str, list[tuple[float, int]]] = {}
    for e in evs:
        detail = e.detail if isinstance(e.detail, Mapping) else {}
        cause = _OVERHEAD_EVENTS.get(e.kind)
        seconds = _num(detail.get("seconds"))
        if cause is not None and seconds is not None and seconds > 0:
            out.setdefault(INJECTED if detail.get("injected") else cause, []).append((e.ts - seconds * time_scale, e.ts))
        step = detail.get("step")
        if e.workload is None or e.rank not in (None, 0) or not isinstance(step, int) or isinstance(step, bool):
            continue
        if e.kind == "checkpoint":
            saved.setdefault(e.workload, []).append((e.ts, step))
        elif e.kind in ("start", "resume") and e.workload not in saved:
            saved[e.workload] = [(e.ts, step)]  # its first start: where its training began
        elif e.kind in ("start", "resume"):
            # a start at step S after an earlier one: what was trained since S was saved (since
            # the first start, at step 0: no checkpoint yet) is trained again
            at = max((t for t, s in saved[e.workload] if s == step and t < e.ts), default=None)
            if at is None:
                continue
            # everything the workload trained after that checkpoint was thrown away; what ended
            # that training decides whose loss it is (an injected fault's: the plan's)
            ended = max((i for i in acc.interruptions if i.workload == e.workload and at <= i.start < e.ts),
                        key=lambda i: i.start, default=None)
            out.setdefault(INJECTED if ended is not None and ended.injected else REDONE, []).append((at, e.ts))
    return out


@dataclass(frozen=True)
class Split:
    """The planned time split without overlap: productive stretches, injected and lost."""

    productive: tuple[tuple[float, float], ...]
    injected_s: float
    lost_s: dict[str, float]

    @property
    def productive_s(self) -> float:
        return sum(b - a for a, b in self.productive)


def split(acc: ev.Accounting, events: Sequence[Any] = (), running: bool = False, time_scale: float = 1.0) -> Split:
    """The accounting's planned time by cause; ``running``: the time after the accounting's
    end is still ahead, not lost."""
    by_cause = spans(acc, events, time_scale)
    taken: list[tuple[float, float]] = []
    before = 0.0
    shares: dict[str, float] = {}
    window = (acc.window_start, acc.window_end)
    for cause in PRIORITY:
        clipped = [(max(a, window[0]), min(b, window[1])) for a, b in by_cause.get(cause, [])]
        taken = ev.union(taken + clipped)
        after = _length(taken)
        shares[cause] = after - before
        before = after
    # the accounting's training time is the complement of its interruptions: productive time
    # is that less the overheads inside it, so the two figures always reconcile
    productive = tuple(ev.complement(taken, *window))
    lost = {c: shares.get(c, 0.0) for c in LOST_CAUSES if c != NOT_RUN}
    ran = max(0.0, acc.window_end - acc.window_start)
    lost[AHEAD if running else NOT_RUN] = max(0.0, acc.planned_s - ran)
    return Split(productive, shares[INJECTED], lost)


def failed(acc: ev.Accounting) -> list[ev.Interruption]:
    """The machine's unexpected failures, one interruption each (a node's loss once, however
    many workloads it stopped)."""
    losses = [i for i in acc.interruptions if i.cause == ev.NODE_LOST]
    out: list[ev.Interruption] = []
    # one loss of a node, however many workloads it stopped or agents recorded it: a second
    # record of the same node within the first one's stretch is the same loss
    for i in sorted(losses, key=lambda i: i.start):
        if not any(o.node == i.node and o.start <= i.start <= o.end for o in out):
            out.append(i)
    for i in acc.interruptions:
        if (i.cause in (ev.CRASH, ev.HANG, DEVICE_FAULT, SDC) and not i.injected
                and not any(x.start <= i.start <= x.end for x in losses)):
            out.append(i)
    return sorted(out, key=lambda i: i.start)


def with_device_faults(acc: ev.Accounting, events: Sequence[Any], lag_s: float = 60.0) -> ev.Accounting:
    """The accounting with the chips' training-interrupting faults as failures of their own:
    a crash or hang on the node of such a fault, read from ``FAULT_LEAD_S`` before it began
    until ``lag_s`` after it ended (the fault views are read once a detail interval: the job
    may be back before its cause is read), is the fault's (one failure, not two); a fault no
    interruption followed (the job rode it out) is a failure of no length."""
    from soak.analysis.device_faults import interruptions

    faults = [(node, c.ts, c.device) for node, c in interruptions(events)
              if acc.window_start <= c.ts <= acc.window_end]
    if not faults:
        return acc
    out, used = [], set()
    for i in acc.interruptions:
        hit = next((k for k, (node, ts, _) in enumerate(faults) if k not in used
                    and (node == i.node or node is None or i.node is None)
                    and i.start - FAULT_LEAD_S <= ts <= i.end + lag_s), None)
        if hit is not None and i.cause in (ev.CRASH, ev.HANG) and not i.injected:
            used.add(hit)
            i = replace(i, cause=DEVICE_FAULT, message=f"device fault on {faults[hit][2]}: {i.message or i.cause}")
        out.append(i)
    out += [ev.Interruption(ts, ts, DEVICE_FAULT, node=node, message=f"device fault on {device}")
            for k, (node, ts, device) in enumerate(faults) if k not in used]
    return replace(acc, interruptions=tuple(sorted(out, key=lambda i: i.start)))


def with_wrong_results(acc: ev.Accounting, events: Sequence[Any]) -> ev.Accounting:
    """The accounting with each chip the workloads' checks failed (``soak.analysis.numerics``:
    one per chip and check, however often it was wrong) as a failure of cause ``sdc`` and no
    length; one the plan injected (``--inject corrupt``: the workload's ``inject`` event at the
    step of the wrong result) is a canary, never the machine's."""
    from soak.analysis.numerics import assess

    found = [f for f in assess(events) if f.severity == "fail" and f.device is not None
             and acc.window_start <= f.start <= acc.window_end]
    if not found:
        return acc
    injected = {(e.workload, e.rank, (e.detail or {}).get("step")) for e in events
                if e.kind == "inject" and isinstance(e.detail, Mapping)}
    out = [ev.Interruption(f.start, f.start, SDC, workload=f.values.get("workload"), node=f.node,
                           injected=(f.values.get("workload"), f.values.get("reported_by"), f.values.get("step")) in injected,
                           message=f"wrong result on {f.device}: {f.summary}") for f in found]
    return replace(acc, interruptions=tuple(sorted([*acc.interruptions, *out], key=lambda i: i.start)))


def count(failures: Iterable[ev.Interruption]) -> dict[str, int]:
    """Failures by cause, every cause of ``FAILURE_CAUSES`` present (a crash on a link test's
    timeout a link failure)."""
    out = dict.fromkeys(FAILURE_CAUSES, 0)
    for i in failures:
        out[LINK if i.during == "link_test" and i.cause == ev.CRASH else key(i.cause)] += 1
    return out


def node_hours(acc: ev.Accounting, nodes: Sequence[str], away: Mapping[str, Sequence[tuple[float, float]]]) -> float:
    """Hours under test summed over the nodes: the run's time to its end (or planned end),
    less each node's time away (lost until it came back, or to the end)."""
    ran = max(0.0, acc.window_end - acc.window_start)
    total = ran * max(1, len(nodes)) - sum(_away_s(acc, spans) for spans in away.values())
    return max(0.0, total) / 3600.0


def _away_s(acc: ev.Accounting, spans: Iterable[tuple[float, float]]) -> float:
    return _length((max(a, acc.window_start), min(b, acc.window_end)) for a, b in spans)


def assess(acc: ev.Accounting, *, events: Sequence[Any] = (), nodes: Sequence[str] = (),
           away: Mapping[str, Sequence[tuple[float, float]]] | None = None, cluster_nodes: int = 1,
           project_nodes: Iterable[int] = (), running: bool = False, time_scale: float = 1.0,
           fault_lag_s: float = 60.0) -> Reliability:
    """The reliability of a run from its accounting and its events (what kept a job that was
    up from stepping: ``spans``); ``nodes`` the node names under test (one unnamed node when
    empty), ``away`` each node's spans out of the run, ``project_nodes`` the job sizes of the
    plan's ``[reliability]``; ``fault_lag_s`` how late a chip's fault may be read after the
    interruption it caused (its detail interval, run time line)."""
    acc = with_device_faults(acc, events, fault_lag_s)
    acc = with_wrong_results(acc, events)
    parts = split(acc, events, running, time_scale)
    failures = failed(acc)
    fails = count(failures)
    away = away or {}
    hours = node_hours(acc, nodes, away)
    node_lower = mttf_h_lower(sum(fails.values()), hours)
    sizes = sorted({max(1, int(cluster_nodes)), *(int(n) for n in project_nodes if int(n) > 0)})
    projections = tuple(Projection(n, None if node_lower is None else node_lower / n) for n in sizes)
    ran = max(0.0, acc.window_end - acc.window_start)
    available = acc.planned_s - parts.injected_s - parts.lost_s.get(AHEAD, 0.0)

    # a failure without a node is the one node's (a single-node run's events name none)
    def on(n: str) -> list[ev.Interruption]:
        return [i for i in failures if i.node == n or (i.node is None and len(nodes) == 1)]

    # a node trained productively while the job did and it was in the job
    def productive(n: str) -> float:
        gone = [(max(a, acc.window_start), min(b, acc.window_end)) for a, b in away.get(n, ())]
        return _length(parts.productive) - _length(
            (max(a, x), min(b, y)) for a, b in parts.productive for x, y in ev.union(gone))

    def of(n: str) -> dict[str, Any]:
        trained, failed_here = productive(n), on(n)
        return {"node": n, "node_hours": max(0.0, ran - _away_s(acc, away.get(n, ()))) / 3600.0,
                "productive_s": trained, "ettr": None if available <= 0 else max(0.0, min(1.0, trained / available)),
                "failures": count(failed_here), "last_failure": max((i.start for i in failed_here), default=None)}

    per_node = tuple(of(n) for n in nodes)
    return Reliability(planned_s=acc.planned_s, productive_s=parts.productive_s, injected_s=parts.injected_s,
                       lost_s=parts.lost_s, failures=fails, node_hours=hours, nodes=max(1, int(cluster_nodes)),
                       projections=projections, injected_count=sum(1 for i in acc.interruptions if i.injected),
                       per_node=per_node, training_s=acc.training_s)
