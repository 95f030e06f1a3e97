"""Judging a run: the one place that turns evidence into findings, criteria and a verdict.

The daemon (online and at the end), ``soak analyze TRACE.csv|RUN_ID``, the report app and
the signed PDF all call this module, so the customer's PDF, the engineer's terminal and the
run record never disagree.

A verdict is bound to evidence: besides the detectors' findings a run must meet the
criteria of ``soak.criteria`` (coverage, runtime and availability, restarts, preflight,
nodes, links, compute); this module collects them and decides the verdict.

Chip-hours in the clean-run statement count accelerator chips only, while training, with
readings; gaps and the host row never count.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from soak import criteria as cr
from soak.analysis import Analysis, Finding, Phase, Profile, Trace, analyze, judged
from soak.analysis import buckets as bk
from soak.analysis import compute as cp
from soak.analysis import device_faults as df
from soak.analysis import evidence as ev
from soak.analysis import links as lk
from soak.analysis import numerics as nm
from soak.analysis import reliability as rel
from soak.analysis import sampling as sm
from soak.analysis.captures import Capture, attach, captures_from_events
from soak.analysis.messages import said, typed
from soak.analysis.profile import chip_of
from soak.analysis.stale import without_stale
from soak.analysis.verdict import CPU_HOURS, clean_statement, order
from soak.clock import ScaledClock
from soak.cluster import analysis as ca
from soak.config import Plan
from soak.device_names import device_key
from soak.provenance import simulated_run
from soak.runplan import plan_of, planned_window, profile_of, run_phases


# --------------------------------------------------------------------------- the judgement
@dataclass(frozen=True)
class Judgement:
    """Findings, criteria and verdict of one run (or trace), and the evidence behind them."""

    analysis: Analysis
    verdict: str | None  # pass | fail | None (stopped early: not judged)
    reasons: tuple[str, ...]
    criteria: tuple[Mapping[str, Any], ...]
    clean_statement: str | None
    chip_hours: float
    chip_unit: str = "chip-hours"
    accounting: ev.Accounting | None = None
    coverage: ev.Coverage | None = None
    run_id: str | None = None
    status: str | None = None
    simulated: bool = False
    captures: tuple[Capture, ...] = ()
    reliability: rel.Reliability | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def findings(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self.analysis.findings]

    def to_dict(self) -> dict[str, Any]:
        """The analysis document (``report/analysis.json``, ``soak analyze --format json``)."""
        out = self.analysis.to_dict()
        out.update(
            verdict=self.verdict, reasons=list(self.reasons), reasons_typed=typed(self.reasons),
            criteria=[dict(c) for c in self.criteria],
            clean_statement=self.clean_statement, chip_hours=self.chip_hours, chip_unit=self.chip_unit,
            clean_statement_typed=None if self.clean_statement is None else typed([self.clean_statement])[0],
            simulated=self.simulated,
        )
        if self.accounting is not None:
            out["accounting"] = self.accounting.to_dict()
        if self.coverage is not None:
            out["coverage"] = self.coverage.to_dict()
        if self.reliability is not None:
            out["reliability"] = self.reliability.to_dict()
        if self.run_id is not None:
            out.update(run_id=self.run_id, status=self.status)
            attach(out, self.captures)  # each finding's capture id, and the captures
        out.update(self.extra)
        return out


def judge_trace(trace: Trace, profile: Profile | None = None, phases: Iterable[Phase] = (),
                now: float | None = None) -> Judgement:
    """A trace without a run (``soak analyze TRACE.csv``): the detectors' verdict, and
    chip-hours from the readings (host row and gaps excluded)."""
    tests = lk.from_trace(trace)
    result = analyze(trace, profile, phases=list(phases) or None, now=now, link_tests=tests)
    criteria: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    if len(trace.nodes) > 1 or tests.results:
        verdict = lk.evaluate(tests, profile or Profile.default())
        criteria.append(cr.links_criterion(verdict, running=False))
        extra["links"] = verdict.to_dict()
    interval = sm.trace_interval_s(trace)
    blind = sm.blind(interval, profile, sm.trace_step_interval_s(trace))
    criteria += cr.kind_criteria(result.findings, judged=True, blind=blind, interval_s=interval, profile=profile)
    verdict, reasons = not_claimed(result.verdict, criteria, list(result.reasons))
    return Judgement(analysis=result, verdict=verdict, reasons=tuple(reasons),
                     criteria=tuple(criteria), clean_statement=result.clean_statement if verdict == "pass" else None,
                     chip_hours=result.chip_hours, extra=extra)


def not_claimed(verdict: str | None, criteria: Sequence[Mapping[str, Any]],
                reasons: list[Any]) -> tuple[str | None, list[Any]]:
    """The verdict that claims no blind criterion (``soak.analysis.sampling``): a pass that
    rests on one is not judged (None), with a ``reason.blind`` for each; a fail stays a fail
    (what was seen still fails the run)."""
    why = cr.blind_reasons(criteria)
    if verdict != "pass" or not why:
        return verdict, reasons
    kept = [r for r in reasons if getattr(r, "code", "") != "reason.no_findings"]
    return None, kept + why


def judge_run(store: Any, run_id: str, *, profile: Profile | None = None, phases: Iterable[Phase] = (),
              now: float | None = None, bucket_s: float | None = None, status: str | None = None,
              why: str | None = None, plan: Plan | None = None, ended: float | None = None,
              arrays: Mapping[tuple[str, ...], Any] | None = None) -> Judgement | None:
    """Judge a recorded run from the store; None when it holds no run ``run_id``.

    ``status`` overrides the stored status (the daemon judges before it records the end);
    ``why`` says why a failed or stopped run ended, ``ended`` when. ``now`` is the current time of a run in
    progress (the online analysis); ``bucket_s`` averages samples in SQL for a long run.
    ``arrays`` is the run's trace when the caller already holds it (the PDF's export).
    """
    rec = store.get_run(run_id)
    if rec is None:
        return None
    plan = plan if plan is not None else plan_of(rec)
    if profile is None:
        profile = profile_of(rec, plan)
    status = status or rec.status
    events = store.load_events(run_id)
    all_phases = list(phases) + run_phases(events, plan)
    planned_start, planned_end = planned_window(rec, plan)
    tests = lk.from_events(events)
    if (rec.nodes or 1) > 1 and (status == "running" or store.bucket_mark(run_id) is not None):
        # a cluster run: its node agents analysed their own chips and stored their findings
        # and bucket summaries; the leader (and the report) compare and judge from those
        # alone, never from every node's raw samples
        result = ca.cluster_analysis(store, run_id, profile, all_phases, planned_start, now, tests)
        evidence: _Evidence = _BucketEvidence(store, run_id, profile.peers.bucket_s)
        trace_interval = trace_steps = None
    else:
        if arrays is not None:
            trace = Trace.from_arrays(dict(arrays), source=f"run {run_id}")
        else:
            trace = Trace.from_arrays(store.trace_arrays(run_id, bucket_s=bucket_s), source=f"run {run_id}")
        trace = trace.placed(store.rank_places(run_id))
        result = analyze(trace, profile, phases=all_phases or None, now=now, link_tests=tests)
        # stale readings are no evidence: the coverage counts them as missing
        judged_trace = without_stale(trace, result.findings)
        evidence = _TraceEvidence({(s.device, s.metric): s.t for s in judged_trace.series()}, trace.place)
        trace_interval, trace_steps = sm.trace_interval_s(trace), sm.trace_step_interval_s(trace)

    time_scale = float(rec.time_scale or 1.0)
    running = status == "running"
    fault_evidence = df.FaultEvidence(store.fault_evidence(run_id))
    # a port still down is down until the run's planned end at the latest, not through the
    # readings taken while the run was being ended
    fault_end = now if running and now is not None else result.end
    if fault_end is not None and planned_end is not None:
        fault_end = min(fault_end, planned_end)
    result = _with_device_faults(result, events, profile, fault_end, len(fault_evidence.chips))
    result = _with_numerics(result, events, profile)
    if ended is None:
        ended = (now if now is not None else time.time()) if running else rec.ended_ts
    if ended is None:
        ended = result.end if result.end is not None else planned_start
    simulated = simulated_run(rec.backend, time_scale)

    accounting = coverage = None
    hours = result.chip_hours
    if planned_end is not None and plan is not None:
        workloads = [w.name for w in plan.workloads]
        accounting = ev.account(events, workloads, planned_start=planned_start, planned_end=planned_end,
                                ended=ended, time_scale=time_scale)
        tick = max(plan.sampling.interval_s * time_scale, bucket_s or 0.0)
        outages = [_outage(e) for e in events if e.kind == "outage"]
        coverage = evidence.coverage(tick, planned_start, accounting.window_end,
                                     chips_expected=_chips_expected(plan, rec), outages=outages)
        hours = evidence.chip_hours(tick, planned_start, accounting.window_end, accounting.training)
    unit = _chip_unit(evidence.chips(), rec.backend)

    criteria: list[dict[str, Any]] = []
    reasons: list[str] = []
    params = profile.evidence
    if accounting is not None:
        criteria += cr.time_criteria(accounting, params, status, reasons)
        criteria.append(cr.restart_criterion(accounting, params, reasons))
    else:
        criteria.append(cr.record_runtime(rec, ended))
    if coverage is not None:
        criteria.append(cr.coverage_criterion(coverage, params, rec.backend, reasons))
    pre = cr.preflight_criterion(events, plan, reasons)
    if pre is not None:
        criteria.append(pre)
    extra: dict[str, Any] = {}
    if (rec.nodes or 1) > 1:
        lost_ever = {e.node for e in events if e.kind == "node_lost" and e.node}
        # a run stopped on request is not judged on every node staying to its planned end (as
        # its runtime is not), only on nodes lost or failed
        criteria.append(cr.nodes_criterion(store.cluster_nodes(run_id), rec.nodes, running or status == "stopped",
                                           reasons, lost_ever))
        links = lk.evaluate(tests, profile)
        criteria.append(cr.links_criterion(links, running))
        extra["links"] = links.to_dict()
    rates = [cp.RankRate(*row) for row in store.rank_rates(run_id)]
    if rates:
        compute = cp.evaluate(rates, chip_of(rec.manifest, rec.backend), profile)
        criteria.append(cr.compute_criterion(compute, reasons))
        extra["compute"] = compute.to_dict()
    # the fault views' reads on the run's time line (an imported run: unknown, judged on its reads)
    read_interval = None if plan is None else fault_read_interval_s(plan, rec.backend, time_scale)
    criteria.append(cr.device_faults_criterion(result.findings, fault_evidence, profile.faults, read_interval))
    chips = sorted(evidence.placed_chips(), key=lambda k: (k[0] or "", k[1]))
    criteria.append(cr.numerics_criterion(result.findings, numeric_evidence(store, run_id, plan, chips), chips))
    # the run's sampling and its step rows' spacing in simulated seconds; an imported run (no
    # plan): its readings' and step rows' spacing
    if plan is not None:
        interval = sm.run_interval_s(plan.sampling.interval_s, time_scale)
        steps = sm.run_step_interval_s(plan.sampling.interval_s, time_scale)
    else:
        interval, steps = trace_interval, trace_steps
    criteria += cr.kind_criteria(result.findings, judged=True, blind=sm.blind(interval, profile, steps),
                                 interval_s=interval, profile=profile)

    failing = [c for c in criteria if c["met"] is False]
    verdict: str | None = "fail" if (result.verdict == "fail" or failing) else "pass"
    fails = [r for r in result.reasons if r.values.get("severity") == "fail"]  # reason.finding
    warns = [r for r in result.reasons if r.values.get("severity") == "warn"]
    all_reasons = reasons + fails + warns
    if status == "failed":
        verdict = "fail"
        all_reasons.append(said("reason.run_failed", {"why": why or None}))
    elif status == "stopped" and verdict == "pass":
        # Stopped before its planned end: what was seen may fail it, but a clean stretch
        # shorter than planned proves nothing the customer asked for.
        verdict = None
        all_reasons.append(said("reason.run_stopped", {"why": why or None}))
    verdict, all_reasons = not_claimed(verdict, criteria, all_reasons)
    if not all_reasons:
        all_reasons = [said("reason.no_findings", {})]
    n_fail = sum(1 for f in result.findings if f.severity == "fail")
    statement = clean_statement(hours, n_fail, unit) if verdict == "pass" else None
    return Judgement(
        analysis=result, verdict=verdict, reasons=tuple(all_reasons), criteria=tuple(criteria),
        clean_statement=statement, chip_hours=hours, chip_unit=unit, accounting=accounting,
        coverage=coverage, run_id=run_id, status=status, simulated=simulated,
        captures=tuple(captures_from_events(events)), extra=extra,
        reliability=None if accounting is None else reliability_of(store, rec, plan, events, accounting, running),
    )


def fault_read_interval_s(plan: Plan, backend: str | None, time_scale: float | None) -> float | None:
    """How often a chip's fault views are read, seconds of the run: the slow views' detail
    interval on an npu or sim backend, the tick where NVML reads them every tick; None where
    no fault view is read (cpu)."""
    scale = float(time_scale or 1.0)
    if backend in ("npu", "sim"):
        return plan.sampling.detail_wall_s(scale) * scale
    if backend == "cuda":
        return plan.sampling.interval_s * scale
    return None


def _with_device_faults(result: Analysis, events: Sequence[Any], profile: Profile, end: float | None,
                        chips: int) -> Analysis:
    """The analysis with the findings of the chips' own fault reports (the run's
    ``device_fault`` events) among its findings, its verdict and reasons decided again."""
    start = result.start
    if end is None or start is None:
        starts = [e.ts for e in events if e.kind == "device_fault"]
        if not starts:
            return result
        start = min(starts) if start is None else start
        end = max(starts) if end is None else end
    found = df.assess(events, profile.faults, end=end, hours=max(0.0, end - start) / 3600.0, chips=chips)
    if not found:
        return result
    extra = [Finding(**{k: f[k] for k in ("kind", "device", "node", "metric", "start", "end", "severity", "summary",
                                           "code", "values")}) for f in found]
    return judged(order([*result.findings, *extra]), profile, result.start, result.end, result.chip_hours)


def _with_numerics(result: Analysis, events: Sequence[Any], profile: Profile) -> Analysis:
    """The analysis with the findings of the workloads' numerical checks (``sdc``,
    ``nonfinite``, ``loss_spike`` events: ``soak.analysis.numerics``), verdict decided again."""
    found = nm.assess(events)
    if not found:
        return result
    found = [replace(f, severity=profile.cap(f.kind, f.severity)) for f in found]
    start = result.start if result.start is not None else min(f.start for f in found)
    end = result.end if result.end is not None else max(f.end for f in found)
    return judged(order([*result.findings, *found]), profile, start, end, result.chip_hours)


def numeric_evidence(store: Any, run_id: str, plan: Plan | None,
                     chips: Sequence[tuple[str | None, str]]) -> nm.NumericEvidence:
    """The checks every rank ran (``Store.numeric_checks``), each rank placed on its node's
    chip as the daemon placed its events (``soak.analysis.numerics.chip_of_rank``)."""
    by_node: dict[str | None, list[str]] = {}
    for node, chip in chips:
        by_node.setdefault(node, []).append(chip)
    rows = store.numeric_checks(run_id)
    # ranks per node: the plan's, or as many as reported (a run recorded without its plan's)
    nproc = {w.name: int(getattr(w, "nproc", 1) or 1) for w in (plan.workloads if plan is not None else ())}
    for wl in {r[1] for r in rows}:
        seen = max(len({r[2] for r in rows if r[1] == wl and r[0] == node}) for node in {r[0] for r in rows})
        nproc[wl] = max(nproc.get(wl, 1), seen)
    return nm.NumericEvidence.of(rows, {n: nm.chip_order(c) for n, c in by_node.items()}, nproc)


def finding_key(f: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two findings the same one, online and final: its kind and where it is."""
    return (f.get("kind"), f.get("node"), f.get("device"), f.get("metric"))


def withdrawn_findings(events: Iterable[Any], final: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The ``finding`` events (``EventRecord``s) of findings an online analysis announced and
    the final analysis ``final`` does not keep: seen over part of the run, not over the whole."""
    kept = {finding_key(f) for f in final}
    return [e for e in events if e.kind == "finding" and isinstance(e.detail, Mapping)
            and finding_key(e.detail) not in kept]


def superseded_findings(events: Iterable[Any], final: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The ``finding`` events of findings the final analysis ``final`` keeps but says with other
    figures (its ``code`` or ``values`` differ): what an online analysis estimated over part of
    the run, which the final one, over the whole, supersedes."""
    said = {finding_key(f): (f.get("code"), dict(f.get("values") or {})) for f in final}
    out = []
    for e in events:
        if e.kind != "finding" or not isinstance(e.detail, Mapping):
            continue
        kept = said.get(finding_key(e.detail))
        if kept is not None and (e.detail.get("code"), dict(e.detail.get("values") or {})) != kept:
            out.append(e)
    return out


def reliability_of(store: Any, rec: Any, plan: Plan, events: Sequence[Any], accounting: ev.Accounting,
                   running: bool = False) -> rel.Reliability:
    """The run's reliability from its accounting: its nodes under test, each one's time away
    (lost until it joined again), the job sizes of the plan."""
    nodes = [n.name for n in store.cluster_nodes(rec.id)] if (rec.nodes or 1) > 1 else []
    if not nodes:
        nodes = [rec.host or "node"]
    away: dict[str, list[tuple[float, float]]] = {}
    # the node was last seen on the store's clock; its loss is stamped on the run's time line
    on_run = ScaledClock.of_run(rec).to_scaled
    for e in events:
        if e.kind != "node_lost" or not e.node:
            continue
        d = e.detail if isinstance(e.detail, Mapping) else {}
        seen = d.get("last_seen")
        seen = on_run(float(seen)) if isinstance(seen, int | float) else None
        start = seen if seen is not None and seen <= e.ts else e.ts
        back = min((j.ts for j in events if j.kind == "node_joined" and j.node == e.node and j.ts > e.ts),
                   default=math.inf)
        away.setdefault(e.node, []).append((start, back))
    return rel.assess(accounting, events=events, nodes=nodes, away=away, cluster_nodes=max(1, int(rec.nodes or 1)),
                      project_nodes=plan.reliability.project_nodes, running=running,
                      time_scale=float(rec.time_scale or 1.0),
                      fault_lag_s=plan.sampling.detail_wall_s(rec.time_scale) * float(rec.time_scale or 1.0))


def reliability_of_run(store: Any, run_id: str, now: float | None = None) -> rel.Reliability | None:
    """A recorded run's reliability from its events alone (no samples read: ``soak runs
    show``), accounted as ``judge_run`` accounts it; None when the store holds no such run or
    it has no planned end."""
    rec = store.get_run(run_id)
    if rec is None:
        return None
    plan = plan_of(rec)
    planned_start, planned_end = planned_window(rec, plan)
    if planned_end is None or plan is None:
        return None
    events = store.load_events(run_id)
    ended = (now if now is not None else time.time()) if rec.status == "running" else rec.ended_ts
    if ended is None:
        ended = store.last_sample_ts(run_id) or planned_start
    accounting = ev.account(events, [w.name for w in plan.workloads], planned_start=planned_start,
                            planned_end=planned_end, ended=ended, time_scale=float(rec.time_scale or 1.0))
    return reliability_of(store, rec, plan, events, accounting, rec.status == "running")


# --------------------------------------------------------------------------- evidence
class _Evidence:
    """Where coverage and chip-hours come from: a trace's readings or a cluster's buckets."""

    def chips(self) -> Iterable[str]:
        """The chips read, each named as on its node."""
        raise NotImplementedError

    def coverage(self, tick: float, start: float, end: float, *, chips_expected: int,
                 outages: Sequence[Mapping[str, Any]]) -> ev.Coverage:
        raise NotImplementedError

    def placed_chips(self) -> Iterable[tuple[str | None, str]]:
        """The chips read, as (node, chip on the node)."""
        raise NotImplementedError

    def chip_hours(self, tick: float, start: float, end: float, training: Sequence[tuple[float, float]]) -> float:
        raise NotImplementedError


@dataclass(frozen=True)
class _TraceEvidence(_Evidence):
    series: Mapping[tuple[str, str], Any]
    place: Callable[[str], tuple[str | None, str]]  # Trace.place: a series key's (node, device)

    def chips(self) -> Iterable[str]:
        return {self.place(d)[1] for d, m in self.series if not ev.is_host(d) and m in ev.CHIP_METRICS}

    def placed_chips(self) -> Iterable[tuple[str | None, str]]:
        return {self.place(d) for d, m in self.series if not ev.is_host(d) and m in ev.CHIP_METRICS}

    def coverage(self, tick: float, start: float, end: float, *, chips_expected: int,
                 outages: Sequence[Mapping[str, Any]]) -> ev.Coverage:
        return ev.coverage(self.series, tick, start, end, chips_expected=chips_expected, outages=outages)

    def chip_hours(self, tick: float, start: float, end: float, training: Sequence[tuple[float, float]]) -> float:
        return ev.chip_hours(self.series, tick, start, end, training=training)


class _BucketEvidence(_Evidence):
    """A cluster run's evidence, summed by the store over the node agents' buckets."""

    def __init__(self, store: Any, run_id: str, width_s: float) -> None:
        self.store, self.run_id, self.width_s = store, run_id, width_s
        self._seconds: dict[tuple[float, float], dict[tuple[str, str, str], float]] = {}

    def _covered(self, start: float, end: float) -> dict[tuple[str, str, str], float]:
        if (start, end) not in self._seconds:
            self._seconds[(start, end)] = self.store.bucket_coverage(self.run_id, start, end, self.width_s)
        return self._seconds[(start, end)]

    def chips(self) -> Iterable[str]:
        covered = next(iter(self._seconds.values()), None) or self._covered(-math.inf, math.inf)
        return {d for _, d, m in covered if not ev.is_host(d) and m in ev.CHIP_METRICS}

    def placed_chips(self) -> Iterable[tuple[str | None, str]]:
        covered = next(iter(self._seconds.values()), None) or self._covered(-math.inf, math.inf)
        return {(n, d) for n, d, m in covered if not ev.is_host(d) and m in ev.CHIP_METRICS}

    def coverage(self, tick: float, start: float, end: float, *, chips_expected: int,
                 outages: Sequence[Mapping[str, Any]]) -> ev.Coverage:
        # the coverage names each chip as the analysis' series do
        seconds = {(device_key(n, d), m): s for (n, d, m), s in self._covered(start, end).items()}
        return ev.coverage_of(seconds, tick, start, end, chips_expected, outages)

    def chip_hours(self, tick: float, start: float, end: float, training: Sequence[tuple[float, float]]) -> float:
        totals = self.store.bucket_totals(self.run_id, bk.ANY, start, end, self.width_s)
        return ev.chip_hours_of_buckets(totals, self.width_s, start, end, training)


def _chips_expected(plan: Plan, rec: Any) -> int:
    """How many chips the run must read: the simulated fleet's size, the plan's
    ``devices.expect_chips``, else at least one on an accelerator backend."""
    want = int(getattr(plan.devices, "expect_chips", 0) or 0)
    if plan.devices.backend == "sim":
        want = max(want, plan.sim.chips)
    return max(want, 1) * max(1, int(rec.nodes or 1))


def _chip_unit(chips: Iterable[str], backend: str | None) -> str:
    chips = set(chips)
    if chips and all(d.startswith("cpu") for d in chips):
        return CPU_HOURS
    return "chip-hours"


def _outage(e: Any) -> dict[str, Any]:
    d = e.detail if isinstance(e.detail, Mapping) else {}
    return {"start": e.ts, "end": e.end_ts, "reader": d.get("reader"), "error": d.get("error") or e.message,
            "devices": d.get("devices")}
