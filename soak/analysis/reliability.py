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
- a **failure** is an unexpected interruption that is the machine's: a crash or hang not
  injected, a node lost. A crash that begins while a node is being lost is that loss, not a
  failure of its own. Operator stops, the daemon's own outages and start-up are not
  failures;
- with r failures in T node-hours, the mean time to failure of one node is T / r (only
  when r >= 1), and its one-sided 90 % lower bound is ``2T / chi2(0.90; 2r + 2)`` (the
  exact Poisson bound; with r = 0 it is T / ln 10 = T / 2.303). A job over N nodes fails
  when any one does: its MTTF is the node's divided by N.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from soak.analysis import evidence as ev
from soak.analysis._stats import poisson_upper
from soak.analysis.messages import Said, said

CONFIDENCE = 0.90
"""The one-sided confidence of the MTTF lower bound."""

NOT_RUN = "not_run"
AHEAD = "ahead"
INJECTED = "injected"

# Who takes a stretch two causes share, first first: what weighs on the machine before what
# the plan or the operator caused, so that the ETTR is never overstated.
PRIORITY: tuple[str, ...] = ("node_lost", "crash", "hang", "daemon_down", "gave_up", INJECTED, "startup", "stopped")
LOST_CAUSES: tuple[str, ...] = tuple(c for c in PRIORITY if c != INJECTED) + (NOT_RUN,)
"""The keys of ``lost_s``, in the order the report shows them."""
FAILURE_CAUSES: tuple[str, ...] = ("crash", "hang", "node_lost")
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
            # floored, never rounded up: 99.96 % is not "100.0 %"
            "ettr_pct": None if ettr is None else math.floor(ettr * 10000) / 100, "productive_s": self.productive_s, "planned_s": self.planned_s,
            "injected_s": self.injected_s or None, "injected_count": self.injected_count,
            "lost_total_s": sum(s for _, s in lost),
            "lost_causes": [c for c, _ in lost], "lost_seconds": [s for _, s in lost]})]
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
    return sum(b - a for a, b in ev.union(intervals))


def split(acc: ev.Accounting, running: bool = False) -> tuple[float, float, dict[str, float]]:
    """(productive, injected, lost by cause) of the accounting's planned time; ``running``: the
    time after the accounting's end is still ahead, not lost."""
    by_cause: dict[str, list[tuple[float, float]]] = {}
    for i in acc.interruptions:
        cause = INJECTED if i.injected else key(i.cause)
        by_cause.setdefault(cause if cause in PRIORITY else "stopped", []).append((i.start, i.end))
    taken: list[tuple[float, float]] = []
    before = 0.0
    shares: dict[str, float] = {}
    for cause in PRIORITY:
        taken = ev.union(taken + by_cause.get(cause, []))
        after = _length(taken)
        shares[cause] = after - before
        before = after
    ran = max(0.0, acc.window_end - acc.window_start)
    # the accounting's training time is the complement of the same union: one figure on
    # every page, and the parts add up to the planned time
    productive = max(0.0, ran - before)
    lost = {c: shares.get(c, 0.0) for c in LOST_CAUSES if c != NOT_RUN}
    lost[AHEAD if running else NOT_RUN] = max(0.0, acc.planned_s - ran)
    return productive, shares[INJECTED], lost


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
        if i.cause in (ev.CRASH, ev.HANG) and not i.injected and not any(x.start <= i.start <= x.end for x in losses):
            out.append(i)
    return sorted(out, key=lambda i: i.start)


def count(failures: Iterable[ev.Interruption]) -> dict[str, int]:
    """Failures by cause, every cause of ``FAILURE_CAUSES`` present."""
    out = dict.fromkeys(FAILURE_CAUSES, 0)
    for i in failures:
        out[key(i.cause)] += 1
    return out


def node_hours(acc: ev.Accounting, nodes: Sequence[str], away: Mapping[str, Sequence[tuple[float, float]]]) -> float:
    """Hours under test summed over the nodes: the run's time to its end (or planned end),
    less each node's time away (lost until it came back, or to the end)."""
    ran = max(0.0, acc.window_end - acc.window_start)
    total = ran * max(1, len(nodes)) - sum(_away_s(acc, spans) for spans in away.values())
    return max(0.0, total) / 3600.0


def _away_s(acc: ev.Accounting, spans: Iterable[tuple[float, float]]) -> float:
    return _length((max(a, acc.window_start), min(b, acc.window_end)) for a, b in spans)


def assess(acc: ev.Accounting, *, nodes: Sequence[str] = (), away: Mapping[str, Sequence[tuple[float, float]]] | None = None,
           cluster_nodes: int = 1, project_nodes: Iterable[int] = (), running: bool = False) -> Reliability:
    """The reliability of a run from its accounting; ``nodes`` the node names under test
    (one unnamed node when empty), ``away`` each node's spans out of the run,
    ``project_nodes`` the job sizes of the plan's ``[reliability]``."""
    productive, injected, lost = split(acc, running)
    failures = failed(acc)
    fails = count(failures)
    away = away or {}
    hours = node_hours(acc, nodes, away)
    node_lower = mttf_h_lower(sum(fails.values()), hours)
    sizes = sorted({max(1, int(cluster_nodes)), *(int(n) for n in project_nodes if int(n) > 0)})
    projections = tuple(Projection(n, None if node_lower is None else node_lower / n) for n in sizes)
    ran = max(0.0, acc.window_end - acc.window_start)
    # a failure without a node is the one node's (a single-node run's events name none)
    def on(n: str) -> list[ev.Interruption]:
        return [i for i in failures if i.node == n or (i.node is None and len(nodes) == 1)]

    # a node trained while the job trained and it was in the job
    def trained(n: str) -> float:
        gone = ev.union((max(a, acc.window_start), min(b, acc.window_end)) for a, b in away.get(n, ()))
        return sum(b - a for a, b in acc.training) - sum(
            max(0.0, min(b, y) - max(a, x)) for a, b in acc.training for x, y in gone)

    per_node = tuple(
        {"node": n, "node_hours": max(0.0, ran - _away_s(acc, away.get(n, ()))) / 3600.0,
         "productive_s": trained(n), "failures": count(on(n)),
         "last_failure": max((i.start for i in on(n)), default=None)}
        for n in nodes)
    return Reliability(planned_s=acc.planned_s, productive_s=productive, injected_s=injected, lost_s=lost,
                       failures=fails, node_hours=hours, nodes=max(1, int(cluster_nodes)), projections=projections,
                       injected_count=sum(1 for i in acc.interruptions if i.injected), per_node=per_node)
