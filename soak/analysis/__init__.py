"""Anomaly analysis of soak traces: detectors, acceptance profile and verdict.

    from soak.analysis import Trace, analyze, Profile
    result = analyze(Trace.from_csv("trace.csv"), profile=Profile.default())
    result.verdict, result.findings, result.to_dict()

``analyze`` is cheap enough to call periodically on the data so far (the daemon does) and
once at the end. Methods, parameters and calibration: docs/analysis.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from soak.analysis import (
    comm,
    hang,
    links,
    memory,
    peers,
    shared,
    stale,
    thermal,
    throughput,
    utilization,
)
from soak.analysis.messages import said
from soak.analysis.model import KINDS, SEVERITIES, Analysis, Finding
from soak.analysis.profile import Phase, Profile
from soak.analysis.trace import Series, Trace
from soak.analysis.verdict import attribute, chip_hours, clean_statement, order, place, reasons

ANALYSIS_VERSION = "1.0"
DETECTOR_VERSIONS: dict[str, str] = {
    "memory_creep": memory.DETECTOR_VERSION,
    "utilization_dropouts": utilization.DETECTOR_VERSION,
    "hang": hang.DETECTOR_VERSION,
    "comm_timeouts": comm.DETECTOR_VERSION,
    "thermal": thermal.DETECTOR_VERSION,
    "throughput_degradation": throughput.DETECTOR_VERSION,
    "peers": peers.DETECTOR_VERSION,
    "links": links.DETECTOR_VERSION,
    "stale_telemetry": stale.DETECTOR_VERSION,
}
DETECTOR_VERSION = f"soak-analysis/{ANALYSIS_VERSION}"

__all__ = [
    "ANALYSIS_VERSION",
    "DETECTOR_VERSION",
    "DETECTOR_VERSIONS",
    "KINDS",
    "SEVERITIES",
    "Analysis",
    "Finding",
    "Phase",
    "Profile",
    "Series",
    "Trace",
    "analyze",
    "judged",
    "thresholds",
]


def thresholds(profile: Profile | None = None) -> dict:
    """Every threshold and parameter in force, for the report."""
    return (profile or Profile.default()).to_dict()


def analyze(
    trace: Trace,
    profile: Profile | None = None,
    phases: Iterable[Phase] | None = None,
    now: float | None = None,
    *,
    peer_comparison: bool = True,
    link_tests: links.LinkTests | None = None,
) -> Analysis:
    """Run every detector on ``trace`` and decide the verdict.

    ``phases`` adds expected phases (periodic, or explicit windows from the run's events) to
    the profile's. ``now`` is the current time for a run in progress (a hang still going is
    measured up to it); default: the end of the data. ``peer_comparison`` False leaves the
    peers out: a cluster node agent analyses its own chips, its leader compares them (and the
    links). ``link_tests``: the run's pairwise link tests (its ``link_test`` events); default:
    the trace's ``pair_busbw_gbps`` rows.
    """
    profile = profile or Profile.default()
    if phases:
        profile = profile.with_phases(tuple(phases))
    if trace.start is None:
        return Analysis(
            # no evidence is never a pass
            findings=[], verdict="fail", reasons=[said("reason.no_data", {})],
            clean_statement=clean_statement(0.0, 0), chip_hours=0.0, start=None, end=None,
            profile=profile.name, detector_versions=dict(DETECTOR_VERSIONS),
            thresholds=thresholds(profile),
        )
    t0, t1 = float(trace.start), float(trace.end)
    now = t1 if now is None else float(now)
    # readings that stopped changing are a finding of their own and no evidence for the others
    findings: list[Finding] = stale.detect(trace, profile, t0, t1)
    trace = stale.without_stale(trace, findings)
    findings += hang.detect(trace, profile, t0, t1, now)
    findings += thermal.detect(trace, profile, t0, t1)
    findings += comm.detect(trace, profile, t0, t1)
    findings += memory.detect(trace, profile, t0, t1)
    findings += throughput.detect(trace, profile, t0, t1)
    findings += utilization.detect(trace, profile, t0, t1)
    if peer_comparison:
        findings += peers.detect(trace, profile, t0, t1)
        findings += links.evaluate(links.from_trace(trace) if link_tests is None else link_tests, profile).findings
    # one finding per fault: what every chip of the job or of a node shares is named once
    findings = shared.merge(place(attribute(findings), trace), trace, profile)
    return judged(order(findings), profile, t0, t1, chip_hours(trace))


def judged(findings: list[Finding], profile: Profile, start: float | None, end: float | None,
           hours: float) -> Analysis:
    """The analysis of ``findings`` (in report order): verdict, reasons, clean statement."""
    n_fail = sum(1 for f in findings if f.severity == "fail")
    return Analysis(
        findings=findings,
        verdict="fail" if n_fail else "pass",
        reasons=reasons(findings),
        clean_statement=clean_statement(hours, n_fail),
        chip_hours=hours,
        start=start,
        end=end,
        profile=profile.name,
        detector_versions=dict(DETECTOR_VERSIONS),
        thresholds=thresholds(profile),
    )
