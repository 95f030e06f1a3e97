"""Verdict, its reasons, and what a clean run demonstrates."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from soak.analysis._stats import poisson_upper
from soak.analysis.evidence import chip_hours as _covered_hours
from soak.analysis.messages import Said, said, utc
from soak.analysis.model import SEVERITIES, Finding
from soak.analysis.trace import Trace
from soak.device_names import device_key


def chip_hours(trace: Trace) -> float:
    """Sum over chips (not the host row) of the hours their readings cover, gaps excluded."""
    if trace.start is None:
        return 0.0
    return _covered_hours({(s.device, s.metric): s.t for s in trace.series()}, None, float(trace.start), float(trace.end))




def order(findings: list[Finding]) -> list[Finding]:
    """Most severe first, then hardware/operational facts before statistics, then time."""
    rank = {"sdc": -2, "nonfinite": -2, "loss_spike": -2, "device_fault": -1, "hang": 0, "thermal": 1, "comm_timeouts": 2, "memory_creep": 3,
            "throughput_degradation": 4, "straggler": 5, "utilization_dropouts": 6, "outlier": 7,
            "stale_telemetry": 8}
    return sorted(
        findings,
        key=lambda f: (-SEVERITIES.index(f.severity), rank[f.kind], f.start, f.node or "", f.device or ""),
    )


def where(f: Finding) -> str:
    """The chip, rank or node a finding is about, as a reader names it."""
    if f.node is None:
        return f.device or "the job"
    return f"node {f.node}" if f.device is None else device_key(f.node, f.device)


def place(findings: list[Finding], trace: Trace) -> list[Finding]:
    """Split a cluster trace's ``node/device`` keys into the findings' node and device."""
    if not trace.nodes:
        return findings
    out = []
    for f in findings:
        if f.device is not None and f.node is None:
            node, dev = trace.place(f.device)
            f = dataclasses.replace(f, node=node, device=dev)
        out.append(f)
    return out


def finding_reason(f: Any, index: int | None = None) -> Said:
    """A finding as a reason of the verdict, coded (``reason.finding``). ``f``: a ``Finding``
    or anything with its fields (the report's view of a stored one); ``index``: its place in
    the analysis' findings, where the reason links to it."""
    values = {"severity_label": f.severity.upper(), "severity": f.severity, "kind": f.kind, "where": where(f),
              "node": f.node, "device": f.device, "start": f.start, "summary": f.summary,
              "finding_code": f.code or None, "finding_values": dict(f.values or {})}
    if index is not None:
        values["finding_index"] = index
    return said("reason.finding", values)


def reasons(findings: list[Finding]) -> list[str]:
    fails = [f for f in findings if f.severity == "fail"]
    warns = [f for f in findings if f.severity == "warn"]
    index = {id(f): i for i, f in enumerate(findings)}
    out: list[str] = []
    for f in fails + warns:
        out.append(finding_reason(f, index[id(f)]))
    if not out:
        out.append(said("reason.no_findings", {}))
    return out


def _hours(h: float) -> str:
    """Chip-hours in words that never round a short run down to "0 chip-hours"."""
    return f"{h:.0f}" if h >= 100 else f"{h:.3g}"


CPU_HOURS = "CPU device-hours (host CPU, no accelerator)"
"""The unit of a run on host CPUs alone (no accelerator chip): what its hours count."""


def clean_statement(hours: float, n_fail: int, unit: str = "chip-hours") -> Said:
    """The plain statement of what the run shows about the failure rate per chip-hour (per
    device-hour of ``CPU_HOURS`` on a run without accelerator)."""
    if hours <= 0:
        return said("statement.no_data", {})
    cpu = unit == CPU_HOURS
    values: dict[str, Any] = {"hours": hours, "hours_text": _hours(hours), "n_fail": n_fail, "cpu": cpu,
                              "unit": "CPU device-hours" if cpu else "chip-hours",
                              "per": "device-hour" if cpu else "chip-hour"}
    if n_fail == 0:
        bound = -math.log(0.05) / hours
        return said("statement.clean", {**values, "bound_per_h": bound, "mtbf_text": _hours(1 / bound)})
    bound = poisson_upper(n_fail, hours)
    return said("statement.failures", {**values, "rate_per_h": n_fail / hours, "bound_per_h": bound})


def attribute(findings: list[Finding]) -> list[Finding]:
    """Name the thermal or dropout findings a slowdown coincides with (same device, or any
    device when the slowdown is on a rank not named like a chip), as its likely cause."""
    causes = [f for f in findings if f.kind in ("thermal", "utilization_dropouts") and f.severity != "info"]
    chips = {f.device for f in findings if f.kind != "throughput_degradation"}
    out = []
    for f in findings:
        if f.kind == "throughput_degradation" and causes:
            same = [c for c in causes if c.device == f.device or f.device not in chips]
            hits = [c for c in same if c.start <= f.end and c.end >= (f.onset or f.start)]
            if hits:
                f = dataclasses.replace(f, details={
                    **f.details,
                    "coincides_with": [f"{c.kind} on {c.device} from {utc(c.start)}" for c in hits[:5]],
                })
        out.append(f)
    return out
