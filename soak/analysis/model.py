"""Findings and the analysis result: frozen records, JSON-ready through ``to_dict``."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from soak.analysis.messages import FINDINGS, typed

KINDS = (
    "memory_creep",
    "utilization_dropouts",
    "hang",
    "comm_timeouts",
    "thermal",
    "throughput_degradation",
    "outlier",
    "straggler",
    "device_fault",  # the chip's own fault report (soak.analysis.device_faults), from the run's events
    # the workloads' numerical checks (soak.analysis.numerics), from the run's events
    "sdc",
    "nonfinite",
    "loss_spike",
    "stale_telemetry",  # readings that stopped changing while the peers' did (soak.analysis.stale)
)
SCHEMA_VERSION = 4
"""Of the analysis document (``to_dict``): 2 adds ``code`` and ``values`` to findings, criteria,
interruptions and (``reasons_typed``, beside ``reasons``) the reasons of a verdict; 3 adds a
criterion's ``required_code`` and ``measured_code`` (the report renders all of them); 4 adds
``reliability`` (``soak.analysis.reliability``) and an interruption's ``node``."""
PEER_KINDS = ("outlier", "straggler")
"""The kinds found by comparing a chip or node with its peers, not by looking at it alone."""
SEVERITIES = ("info", "warn", "fail")  # ascending


def _clean(value: Any) -> Any:
    """JSON-safe copy: NaN/inf become None (never 0), numpy scalars become Python."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class Finding:
    """One thing the analysis found on one device's metric.

    ``node`` names the machine in a cluster trace (None for a single-node trace); ``device``
    is None only for a finding about a whole node (a straggling node). ``start``/``end`` are unix seconds of the evidence; ``onset`` is when the problem began
    where that differs from ``start`` (e.g. a leak's change point). ``severity`` is
    ``info`` (seen and explained, e.g. a declared checkpoint), ``warn`` or ``fail``.
    ``details`` holds the method's numbers (CI, parameters) for the report.
    ``code`` (a key of ``soak.analysis.messages.FINDINGS``, beginning with the kind) and
    ``values`` (flat: numbers with their unit in the key, names, flags) are what ``summary``
    says, for rendering it in any language; empty only for a finding read back from an
    analysis made before findings carried them.
    """

    kind: str
    device: str | None
    metric: str
    start: float
    end: float
    severity: str
    summary: str
    onset: float | None = None
    slope_per_hour: float | None = None  # memory_creep: metric units per hour
    period_s: float | None = None  # utilization_dropouts: None when not periodic
    count: int | None = None  # utilization_dropouts: episodes; comm: increments
    explained_by: str | None = None  # a declared phase that explains it (severity info)
    baseline: float | None = None  # outlier, straggler: the peers' median (metric units)
    deviation: float | None = None  # outlier, straggler: this one minus the baseline
    node: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    code: str = ""
    values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")
        if self.code and (self.code not in FINDINGS or not self.code.startswith(self.kind + ".")):
            raise ValueError(f"unknown finding code {self.code!r} for kind {self.kind!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")

    @classmethod
    def from_dict(cls, d: Any) -> Finding:
        """A finding back from its ``to_dict`` form (as the store keeps it)."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in names}
        values["details"] = dict(values.get("details") or {})
        values["values"] = dict(values.get("values") or {})
        values["code"] = values.get("code") or ""
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "node": self.node,
            "device": self.device,
            "metric": self.metric,
            "start": self.start,
            "end": self.end,
            "severity": self.severity,
            "summary": self.summary,
            "onset": self.onset,
        }
        if self.kind == "memory_creep" or self.slope_per_hour is not None:
            out["slope_per_hour"] = self.slope_per_hour
        if self.kind == "utilization_dropouts" or self.period_s is not None:
            out["period_s"] = self.period_s
        if self.kind == "utilization_dropouts" or self.count is not None:
            out["count"] = self.count
        if self.kind in PEER_KINDS or self.baseline is not None:
            out["baseline"] = self.baseline
            out["deviation"] = self.deviation
        out["explained_by"] = self.explained_by
        out["details"] = self.details
        out["code"] = self.code
        out["values"] = self.values
        return _clean(out)


@dataclass(frozen=True)
class Analysis:
    """The result of :func:`soak.analysis.analyze`."""

    findings: list[Finding]
    verdict: str  # "pass" | "fail"
    reasons: list[str]
    clean_statement: str
    chip_hours: float
    start: float | None
    end: float | None
    profile: str
    detector_versions: dict[str, str]
    thresholds: dict[str, Any]

    @property
    def failed(self) -> bool:
        return self.verdict == "fail"

    def to_dict(self) -> dict[str, Any]:
        return _clean(
            {
                "schema_version": SCHEMA_VERSION,
                "findings": [f.to_dict() for f in self.findings],
                "verdict": self.verdict,
                "reasons": list(self.reasons),
                "reasons_typed": typed(self.reasons),
                "clean_statement": self.clean_statement,
                "clean_statement_typed": (typed([self.clean_statement]) or [None])[0],
                "chip_hours": self.chip_hours,
                "start": self.start,
                "end": self.end,
                "profile": self.profile,
                "detector_versions": dict(self.detector_versions),
                "thresholds": self.thresholds,
            }
        )
