"""Every node a store has seen, across its runs: hours under test, failures, findings, and
the repeat offenders.

A site that soaks its cluster again and again learns which nodes keep failing: in production
data a few nodes cause most of the exclusions (3 of 63 nodes, over half of them). A node
that **failed in two or more runs** (a failure of the machine on it: a crash, hang or loss,
or a finding of severity ``fail`` about it) is a repeat offender: ``soak nodes`` lists it,
and the report of a run names any among its nodes.

A node is its name: a cluster run's node names, or a single-node run's host. Each run's
figures are its reliability as the judge accounts it (``soak.judge.reliability_of_run``),
from the store's events alone, so a store of many long runs is read without their samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from soak.analysis import reliability as rel

REPEAT_RUNS = 2
"""A node that failed in this many runs or more is a repeat offender."""


@dataclass(frozen=True)
class RunOfNode:
    """What one run says about one node."""

    run_id: str
    node: str
    started_ts: float
    verdict: str | None
    node_hours: float
    failures: Mapping[str, int]
    last_failure: float | None
    findings: Mapping[str, int]  # kind -> count, every severity
    fail_findings: int

    @property
    def failed(self) -> bool:
        return sum(self.failures.values()) > 0 or self.fail_findings > 0


@dataclass(frozen=True)
class NodeHistory:
    """A node's record across the store's runs."""

    name: str
    runs: tuple[str, ...]
    node_hours: float
    failures: Mapping[str, int]
    findings: Mapping[str, int]
    last_failure: float | None  # unix seconds of its latest failure, None when it never failed
    last_failure_run: str | None
    failed_runs: tuple[str, ...] = field(default=())

    @property
    def repeat_offender(self) -> bool:
        return len(self.failed_runs) >= REPEAT_RUNS

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "runs": list(self.runs), "node_hours": self.node_hours,
                "failures": dict(self.failures), "findings": dict(self.findings),
                "last_failure": self.last_failure, "last_failure_run": self.last_failure_run,
                "failed_runs": list(self.failed_runs), "repeat_offender": self.repeat_offender}


def of_run(run: Any, reliability: rel.Reliability | None, findings: Iterable[Any]) -> list[RunOfNode]:
    """One run's nodes (``RunRecord``, its reliability, its ``FindingRecord``s); a finding
    without a node is the single node's."""
    per_node = list(reliability.per_node) if reliability is not None else []
    if not per_node:
        per_node = [{"node": run.host or "node", "node_hours": 0.0, "failures": rel.count(()), "last_failure": None}]
    names = [str(n["node"]) for n in per_node]
    kinds: dict[str, dict[str, int]] = {n: {} for n in names}
    fails = dict.fromkeys(names, 0)
    for f in findings:
        node = f.node if f.node is not None else (names[0] if len(names) == 1 else None)
        if node not in kinds:
            continue
        kinds[node][f.kind] = kinds[node].get(f.kind, 0) + 1
        fails[node] += f.severity == "fail"
    return [RunOfNode(run_id=run.id, node=str(n["node"]), started_ts=run.started_ts, verdict=run.verdict,
                      node_hours=float(n["node_hours"]), failures=dict(n["failures"]),
                      last_failure=n.get("last_failure"), findings=kinds[str(n["node"])],
                      fail_findings=fails[str(n["node"])])
            for n in per_node]


def histories(rows: Sequence[RunOfNode]) -> list[NodeHistory]:
    """Every node's record, by name: repeat offenders first, then by failures."""
    by_node: dict[str, list[RunOfNode]] = {}
    for r in sorted(rows, key=lambda r: (r.started_ts, r.run_id)):
        by_node.setdefault(r.node, []).append(r)
    out = []
    for name, runs in by_node.items():
        failures = rel.count(())
        findings: dict[str, int] = {}
        for r in runs:
            for c, n in r.failures.items():
                failures[c] = failures.get(c, 0) + n
            for k, n in r.findings.items():
                findings[k] = findings.get(k, 0) + n
        last = max((r for r in runs if r.last_failure is not None), key=lambda r: r.last_failure or 0, default=None)
        out.append(NodeHistory(name=name, runs=tuple(r.run_id for r in runs),
                               node_hours=sum(r.node_hours for r in runs), failures=failures,
                               findings=dict(sorted(findings.items())),
                               last_failure=None if last is None else last.last_failure,
                               last_failure_run=None if last is None else last.run_id,
                               failed_runs=tuple(r.run_id for r in runs if r.failed)))
    return sorted(out, key=lambda h: (not h.repeat_offender, -len(h.failed_runs), -sum(h.failures.values()), h.name))


def read(store: Any) -> list[NodeHistory]:
    """Every node of every run in ``store``."""
    from soak.judge import reliability_of_run

    rows: list[RunOfNode] = []
    for run in store.list_runs():
        rows += of_run(run, reliability_of_run(store, run.id), store.load_findings(run.id))
    return histories(rows)


# -- chips: their own fault reports across runs ---------------------------------------------


@dataclass(frozen=True)
class ChipFault:
    """What one chip's fault report said in one run about one signal (and code)."""

    run_id: str
    ts: float  # the first change
    node: str | None
    device: str
    signal: str
    code: str | None
    severity: str  # the worst of its changes
    times: int  # its changes (a code raised, a count that rose, a port down)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "ts": self.ts, "node": self.node, "device": self.device,
                "signal": self.signal, "code": self.code, "severity": self.severity, "times": self.times}


@dataclass(frozen=True)
class ChipHistory:
    """A chip's fault record across the store's runs, by its serial number (a chip moved to
    another slot or host keeps it); a chip that gave none is known by where it sat."""

    serial: str | None
    places: tuple[str, ...]  # node/device (or host/device) where it reported
    faults: tuple[ChipFault, ...]

    @property
    def runs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.run_id for f in self.faults))

    @property
    def failed_runs(self) -> tuple[str, ...]:
        """The runs in which it reported a fault above info."""
        return tuple(dict.fromkeys(f.run_id for f in self.faults if f.severity != "info"))

    @property
    def repeat_offender(self) -> bool:
        return len(self.failed_runs) >= REPEAT_RUNS

    @property
    def severity(self) -> str:
        from soak.analysis.device_faults import SEVERITY_RANK

        return max((f.severity for f in self.faults), key=SEVERITY_RANK.__getitem__, default="info")

    def to_dict(self) -> dict[str, Any]:
        return {"serial": self.serial, "places": list(self.places), "runs": list(self.runs),
                "failed_runs": list(self.failed_runs), "repeat_offender": self.repeat_offender,
                "severity": self.severity, "faults": [f.to_dict() for f in self.faults]}


def chip_histories(events: Iterable[tuple[str, Any]], hosts: Mapping[str, str | None] | None = None) -> list[ChipHistory]:
    """Every chip's record from ``(run id, device_fault event)`` pairs (``Store.device_fault_events``),
    and the wrong results the workloads' checks pinned on a chip (``sdc``, ``nonfinite``,
    ``loss_spike`` events naming one: ``soak.analysis.numerics``, their check as the code):
    one ``ChipFault`` per run, signal and code, repeat offenders first, then by runs with a
    fault above info, then by failing faults. ``hosts``: each run's host, naming a single
    node's chips."""
    from soak.analysis.device_faults import FINDING_OF, SEVERITY_RANK, FaultChange
    from soak.analysis.numerics import KINDS as NUMERIC_KINDS

    hosts = hosts or {}
    grouped: dict[tuple[str, str | None, str, str, str | None], list[tuple[float, str, str | None, bool]]] = {}
    serial_of: dict[tuple[str, str | None, str], str | None] = {}
    for run_id, e in events:
        if e.kind in NUMERIC_KINDS:  # a wrong result a workload's check pinned on a chip
            d = e.detail if isinstance(e.detail, Mapping) else {}
            if not d.get("chip"):
                continue  # nobody settled it, or every chip alike: no chip to hold it against
            where = (run_id, e.node, str(d["chip"]))
            serial_of[where] = serial_of.get(where) or d.get("serial")
            grouped.setdefault((run_id, e.node, str(d["chip"]), e.kind, d.get("check")), []).append(
                (float(e.ts), str(d.get("severity") or "warn"), d.get("serial"), False))
            continue
        c = FaultChange.of_event(e)
        if c is None:
            continue
        node = e.node
        where = (run_id, node, c.device)
        serial_of[where] = serial_of.get(where) or c.serial
        signal = FINDING_OF.get(c.signal, c.signal)
        grouped.setdefault((run_id, node, c.device, signal, c.code if signal in ("fault_code", "xid") else None),
                           []).append((c.ts, c.severity, c.serial, c.cleared or c.signal == "link_up"))
    chips: dict[str, tuple[str | None, list[str], list[ChipFault]]] = {}
    for (run_id, node, device, signal, code), cs in grouped.items():
        serial = serial_of.get((run_id, node, device))
        place = f"{node or hosts.get(run_id) or 'node'}/{device}"
        key = f"serial:{serial}" if serial else f"place:{place}"
        entry = chips.setdefault(key, (serial, [], []))
        if place not in entry[1]:
            entry[1].append(place)
        raised = [x for x in cs if not x[3]]
        entry[2].append(ChipFault(run_id=run_id, ts=min(x[0] for x in cs), node=node, device=device, signal=signal,
                                  code=code, severity=max((x[1] for x in cs), key=SEVERITY_RANK.__getitem__),
                                  times=len(raised)))
    out = [ChipHistory(serial=serial, places=tuple(places), faults=tuple(sorted(faults, key=lambda f: (f.ts, f.signal))))
           for serial, places, faults in chips.values()]
    return sorted(out, key=lambda h: (not h.repeat_offender, -len(h.failed_runs),
                                      -sum(f.severity == "fail" for f in h.faults), h.serial or "~", h.places))


def read_chips(store: Any) -> list[ChipHistory]:
    """Every chip that reported a fault in any run of ``store``."""
    hosts = {r.id: r.host for r in store.list_runs()}
    from soak.analysis.numerics import KINDS as NUMERIC_KINDS

    return chip_histories(store.device_fault_events(("device_fault", *NUMERIC_KINDS)), hosts)
