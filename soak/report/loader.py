"""Fill a ``ReportData`` from the store (and the analysis).

Everything big is reduced in the database: per-chip statistics are one GROUP BY, and the
timelines come from ``Store.load_samples(bucket_s=...)`` with a bucket chosen so each chip has
at most ``max_points`` points. A 72 h x 16-chip run at 10 s (~400 k sample rows) therefore
never reaches Python as raw rows.

The verdict, reasons, clean-run statement, detector versions and thresholds come from the
analysis: the ``analysis.json`` the daemon leaves in the run folder when there is one,
otherwise ``soak.analysis.analyze`` is run on the stored trace (finished runs only).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from soak.analysis.captures import Capture, captures_from_events, link
from soak.analysis.model import SCHEMA_VERSION
from soak.device_names import HOST_DEVICE, device_key, rank_device
from soak.report.device_faults import chip_fault_fields, fault_views, views_of
from soak.report.model import (
    CaptureView,
    ChipSummary,
    Criterion,
    DetectorInfo,
    EventView,
    FindingView,
    Message,
    ReportData,
    RunInfo,
    Series,
)
from soak.report.numerics import numeric_rows
from soak.runfolder import read_analysis
from soak.runplan import plan_of, planned_duration_s

if TYPE_CHECKING:
    from soak.store import RunRecord, Store

MAX_POINTS = 600
_SERIES_COLUMNS = ("util_pct", "temp_c", "hbm_used_bytes", "power_w")


def auto_bucket_s(start: float | None, end: float | None, max_points: int = MAX_POINTS) -> float | None:
    """Bucket width giving at most ``max_points`` per series; None (raw) for short runs."""
    if start is None or end is None or end <= start:
        return None
    span = end - start
    bucket = span / max_points
    if bucket <= 10:
        return None if span / 10 <= max_points else 10.0
    # Round to a readable width so bucket edges stay stable while a live run grows.
    for nice in (15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200):
        if bucket <= nice:
            return float(nice)
    return float(int(bucket))


Place = tuple[str | None, str]  # (node, device as named on it); node None on a single node


def chip_stats(store: Store, run_id: str) -> dict[Place, dict[str, Any]]:
    """Per-device statistics over the whole run: ``Store.chip_stats``, one aggregate query."""
    return store.chip_stats(run_id)


def _place(key: tuple[Any, ...]) -> tuple[Place, str]:
    """((node, device), metric) of an export array's key: ``(device, metric)`` or, on a
    cluster node, ``(node, device, metric)``."""
    return ((None, key[0]) if len(key) == 2 else (key[0], key[1])), key[-1]


def step_series(store: Store, run_id: str, bucket_s: float | None) -> list[Series]:
    """Median-ish step time per rank, bucketed in SQL (mean of the window medians)."""
    return [Series(dev, "step_time_s", x, y) for dev, (x, y) in store.step_series(run_id, bucket_s).items()]


def device_series(store: Store, run_id: str, bucket_s: float | None, device: str | None = None,
                  node: str | None = None) -> list[Series]:
    """The chart series of every chip (or one: ``device`` on ``node``), downsampled in SQL,
    each named as the report shows it."""
    rows = store.load_samples(run_id, device=device, bucket_s=bucket_s, node=node)
    by_dev: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["device"] != HOST_DEVICE:
            by_dev[device_key(r["node"], r["device"])].append(r)
    out: list[Series] = []
    for dev, rs in sorted(by_dev.items()):
        ts = tuple(float(r["ts"]) for r in rs)
        for m in _SERIES_COLUMNS:
            vals = tuple(None if r.get(m) is None else float(r[m]) for r in rs)
            if any(v is not None for v in vals):
                out.append(Series(dev, m, ts, vals))
    return out


def stats_from_arrays(arrays: Mapping[tuple[str, ...], Any]) -> dict[Place, dict[str, Any]]:
    """``chip_stats`` from in-memory arrays (the PDF already holds them for the export)."""
    import numpy as np

    by_place: dict[tuple[Place, str], Any] = {_place(k): a for k, a in arrays.items()}
    out: dict[Place, dict[str, Any]] = {}
    devs = sorted({p for p, m in by_place if m in _SERIES_COLUMNS and p[1] != HOST_DEVICE},
                  key=lambda p: (p[0] or "", p[1]))

    def agg(dev: Place, metric: str, fn: Callable[[Any], Any]) -> float | None:
        a = by_place.get((dev, metric))
        return None if a is None or len(a[1]) == 0 else float(fn(a[1]))

    for dev in devs:
        series = [by_place[(dev, m)][0] for m in _SERIES_COLUMNS if (dev, m) in by_place]
        n = max((len(t) for t in series), default=0)
        out[dev] = {
            "samples": float(n),
            "util_mean_pct": agg(dev, "util_pct", np.mean),
            "util_min_pct": agg(dev, "util_pct", np.min),
            "temp_max_c": agg(dev, "temp_c", np.max),
            "power_mean_w": agg(dev, "power_w", np.mean),
            "power_max_w": agg(dev, "power_w", np.max),
            "hbm_peak_bytes": agg(dev, "hbm_used_bytes", np.max),
            "hbm_total_bytes": agg(dev, "hbm_total_bytes", np.max),
            "first_ts": min((float(t[0]) for t in series if len(t)), default=None),
            "last_ts": max((float(t[-1]) for t in series if len(t)), default=None),
        }
    return out


def series_from_arrays(arrays: Mapping[tuple[str, ...], Any], bucket_s: float | None) -> list[Series]:
    """Bucket means of the chart metrics (and per-rank step time), like the SQL path."""
    import numpy as np

    named = sorted(((device_key(*place), metric, place[1], a) for (place, metric), a in
                    ((_place(k), a) for k, a in arrays.items())), key=lambda x: x[:2])
    out: list[Series] = []
    for dev, metric, on_node, (t, v) in named:
        if on_node == HOST_DEVICE or metric not in (*_SERIES_COLUMNS, "step_time_s") or len(t) == 0:
            continue
        t = np.asarray(t, dtype=np.float64)
        v = np.asarray(v, dtype=np.float64)
        if bucket_s:
            b = np.floor(t / bucket_s) * bucket_s
            keys, inv = np.unique(b, return_inverse=True)
            sums = np.bincount(inv, weights=v)
            counts = np.bincount(inv)
            t, v = keys, sums / counts
        out.append(Series(dev, metric, tuple(t.tolist()), tuple(v.tolist())))
    return out


def _repeat_offenders(store: Store, reliability: Mapping[str, Any] | None) -> tuple[dict[str, Any], ...] | None:
    """The repeat offenders of the store (``soak.fleet``) among the run's nodes."""
    from soak import fleet

    names = {n.get("node") for n in (reliability or {}).get("per_node") or []}
    if not names:
        return None
    return tuple(h.to_dict() for h in fleet.read(store) if h.repeat_offender and h.name in names)


def run_analysis(store: Store, run: RunRecord, arrays: Mapping[tuple[str, ...], Any] | None = None) -> dict[str, Any] | None:
    """The run judged as the daemon judges it (``soak.judge``: same plan, profile, phases
    and criteria); None when the store does not hold the run."""
    from soak.judge import judge_run

    judged = judge_run(store, run.id, arrays=arrays)
    return None if judged is None else judged.to_dict()


def _device_info(manifest: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Model/serial/bus id per device key, from the manifest (``soak.manifest``).

    Ascend: ``npu.cards[]`` (one serial per card; every chip ``npu{npu_id}-{k}`` of the card
    shares it). NVIDIA: ``nvidia.gpus[]`` as ``cuda{index}``. A generic ``devices`` list with
    a ``device`` key is accepted too.
    """
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(manifest, Mapping):
        return out
    npu = manifest.get("npu")
    if isinstance(npu, Mapping) and isinstance(npu.get("cards"), list):
        for card in npu["cards"]:
            if not isinstance(card, Mapping) or card.get("npu_id") is None:
                continue
            info = {"model": card.get("name") or card.get("product_name"), "serial": card.get("serial_number"),
                    "bus_id": card.get("pcie_bus_info")}
            boards = card.get("chip_boards")
            chip_ids = [b.get("chip_id") for b in boards if isinstance(b, Mapping)] if isinstance(boards, list) else []
            for k in [c for c in chip_ids if c is not None] or range(int(card.get("chips") or 1)):
                out[f"npu{card['npu_id']}-{k}"] = info
    nv = manifest.get("nvidia")
    if isinstance(nv, Mapping) and isinstance(nv.get("gpus"), list):
        for g in nv["gpus"]:
            if isinstance(g, Mapping) and g.get("index") is not None:
                out[f"cuda{g['index']}"] = {"model": g.get("name"), "serial": g.get("serial"), "bus_id": None}
    items = manifest.get("devices")
    if isinstance(items, list):
        for it in items:
            if isinstance(it, Mapping) and it.get("device") is not None:
                out[str(it["device"])] = {"model": it.get("model"), "serial": it.get("serial"), "bus_id": it.get("bus_id")}
    return out


def build_criteria(
    analysis: Mapping[str, Any] | None,
    findings: tuple[FindingView, ...],
    *,
    judged: bool,
    rec: RunRecord | None = None,
) -> tuple[Criterion, ...]:
    """The judge's criteria with measured values (``soak.judge``): those of the analysis; a
    run without one (in progress) gets the judge's per-kind criteria of its findings so far,
    and, ended, the runtime of its record (``soak.criteria``)."""
    if analysis and isinstance(analysis.get("criteria"), list):
        return tuple(criterion_view(c) for c in analysis["criteria"] if isinstance(c, Mapping))
    from soak import criteria as cr

    crits = [] if rec is None or rec.status == "running" else [cr.record_runtime(rec, rec.ended_ts)]
    crits += cr.kind_criteria(findings, judged=judged)
    return tuple(criterion_view(c) for c in crits)


def criterion_view(c: Mapping[str, Any]) -> Criterion:
    values = c.get("values")
    return Criterion(str(c.get("name")), str(c.get("required")), c.get("measured"), c.get("met"),
                     code=str(c.get("code") or ""), values=dict(values) if isinstance(values, Mapping) else {},
                     required_code=str(c.get("required_code") or ""), measured_code=str(c.get("measured_code") or ""))


def _reasons(analysis: Mapping[str, Any] | None) -> tuple[Message, ...]:
    """The verdict's reasons, each with its code and values when the analysis typed them."""
    texts = [str(r) for r in (analysis or {}).get("reasons", []) or []]
    typed = (analysis or {}).get("reasons_typed") or []
    if len(typed) != len(texts):
        typed = [{}] * len(texts)
    return tuple(Message(text, str((ty or {}).get("code") or ""), dict((ty or {}).get("values") or {}))
                 for text, ty in zip(texts, typed, strict=True))


def load_report_data(
    store: Store,
    run_id: str,
    *,
    analysis: Mapping[str, Any] | None = None,
    analyze: bool = True,
    max_points: int = MAX_POINTS,
    with_series: bool = True,
    arrays: Mapping[tuple[str, ...], Any] | None = None,
) -> ReportData:
    """Everything the report shows about ``run_id``. Raises ``InputError`` for an unknown run."""
    from soak.errors import UnknownRun

    rec = store.get_run(run_id)
    if rec is None:
        raise UnknownRun.not_in_store(run_id, store.url)
    last_ts = store.last_sample_ts(run_id)
    running = rec.status == "running"
    run = RunInfo(
        run_id=rec.id,
        status=rec.status,
        workload=rec.workload,
        backend=rec.backend,
        host=rec.host,
        started_at=rec.started_ts,
        ended_at=rec.ended_ts if rec.ended_ts is not None else (last_ts if running else None),
        planned_duration_s=planned_duration_s(rec, plan_of(rec)),
        time_scale=rec.time_scale,
        restarts=rec.restarts,
        plan=rec.plan or {},
        timezone=_host(rec.manifest).get("timezone"),
        utc_offset_s=_host(rec.manifest).get("utc_offset_s"),
    )
    if analysis is None:
        analysis = read_analysis(rec.run_dir)
    if analyze and not running and (analysis is None or not isinstance(analysis.get("criteria"), list)
                                    or int(analysis.get("schema_version") or 1) < SCHEMA_VERSION):
        # no analysis, or one written before the judge stated its criteria with their codes:
        # judge the run now (the report renders codes, it never re-reads sentences)
        analysis = run_analysis(store, rec, arrays) or analysis

    # One source for findings and verdict, so the report never mixes two analyses: the
    # analysis when there is one, else what the daemon stored (a live run's online findings).
    if analysis is not None:
        findings = tuple(_finding_from_dict(d) for d in analysis.get("findings", []))
    else:
        findings = tuple(_finding_from_dict({**f.as_dict(), "node": f.node}) for f in store.load_findings(run_id))

    all_events = store.load_events(run_id)
    captures = captures_from_events(all_events)
    ids = link([{"kind": f.kind, "device": f.device, "start": f.start, "severity": f.severity} for f in findings],
               captures)
    findings = tuple(replace(f, capture=i) for f, i in zip(findings, ids, strict=True))

    faults = fault_views(all_events, findings)
    if arrays is not None:
        stats, fault_readings = stats_from_arrays(arrays), store.chip_fault_readings(run_id)
    else:  # the fault views' readings in the statistics' own scan
        stats = store.chip_stats(run_id, faults=True)
        fault_readings = {k: s.pop("faults") for k, s in stats.items()}
    info = _device_info(rec.manifest)
    per_dev: dict[Place, int] = defaultdict(int)
    for f in findings:
        if f.device:
            per_dev[(f.node, f.device)] += 1
    # the run's manifest is one machine's: a cluster node's chips are described by their own
    chips = tuple(
        ChipSummary(
            device=device_key(node, dev),
            node=node,
            chip=dev,
            model=(info.get(dev, {}) if node is None else {}).get("model"),
            serial=(info.get(dev, {}) if node is None else {}).get("serial"),
            bus_id=(info.get(dev, {}) if node is None else {}).get("bus_id"),
            samples=None if s.get("samples") is None else int(s["samples"]),
            util_mean_pct=s.get("util_mean_pct"),
            util_min_pct=s.get("util_min_pct"),
            temp_max_c=s.get("temp_max_c"),
            power_mean_w=s.get("power_mean_w"),
            power_max_w=s.get("power_max_w"),
            hbm_peak_bytes=s.get("hbm_peak_bytes"),
            hbm_total_bytes=s.get("hbm_total_bytes"),
            findings=per_dev.get((node, dev), 0),
            **chip_fault_fields(fault_readings.get((node, dev)), views_of(faults, node, dev)),
        )
        for (node, dev), s in stats.items()
    )
    series: tuple[Series, ...] = ()
    if with_series:
        end = run.ended_at if run.ended_at is not None else last_ts
        bucket = auto_bucket_s(run.started_at, end, max_points)
        if arrays is not None:
            series = tuple(series_from_arrays(arrays, bucket))
        else:
            series = tuple(device_series(store, run_id, bucket)) + tuple(step_series(store, run_id, bucket))

    from soak.judge import superseded_findings, withdrawn_findings

    # an ended run's findings are the final analysis's: an online finding it does not keep is
    # withdrawn (while the run goes on, the stored findings are the online ones themselves)
    withdrawn = set() if running else {id(e) for e in withdrawn_findings(
        all_events, [{"kind": f.kind, "node": f.node, "device": f.device, "metric": f.metric} for f in findings])}
    # an online finding the final analysis kept, but with other figures (a rate, a time to
    # exhaustion measured over part of the run): an estimate the final one supersedes
    superseded = set() if running else {id(e) for e in superseded_findings(all_events, [
        {"kind": f.kind, "node": f.node, "device": f.device, "metric": f.metric, "code": f.code, "values": f.values}
        for f in findings])}
    events = tuple(
        EventView(
            ts=e.ts,
            kind=e.kind,
            device=None if e.rank is None else rank_device(e.workload or "rank", e.rank),
            message=e.message,
            severity=(e.detail or {}).get("severity") if isinstance(e.detail, Mapping) else None,
            code=str((e.detail or {}).get("code") or "") if isinstance(e.detail, Mapping) else "",
            values=dict((e.detail or {}).get("values") or {}) if isinstance(e.detail, Mapping) else {},
            detail=dict(e.detail) if isinstance(e.detail, Mapping) else {},
            workload=e.workload,
            node=e.node,
            withdrawn=id(e) in withdrawn,
            withdrawn_ts=(rec.ended_ts or last_ts) if id(e) in withdrawn else None,
            superseded=id(e) in superseded,
        )
        for e in all_events
    )
    verdict = "running" if running else ((analysis or {}).get("verdict") or rec.verdict)
    reasons = _reasons(analysis)
    if not reasons and verdict == "fail":
        reasons = tuple(_finding_reason(f) for f in findings if f.severity == "fail")
    versions = (analysis or {}).get("detector_versions") or {}
    thresholds = (analysis or {}).get("thresholds") or {}
    detectors = tuple(
        DetectorInfo(name, str(ver), _thresholds_for(name, thresholds)) for name, ver in sorted(versions.items())
    )
    if isinstance(thresholds, Mapping) and thresholds:
        # The profile's own keys (required runtime, severity caps, phases) close the table.
        top = {k: v for k, v in thresholds.items() if k not in _DETECTOR_SECTIONS.values()}
        detectors += (DetectorInfo("profile", (analysis or {}).get("profile"), top),)
    manifest: dict[str, Any] = {}
    if rec.manifest:
        manifest["environment"] = rec.manifest
    if rec.plan:
        manifest["plan"] = rec.plan
    data = ReportData(
        run=run,
        chips=chips,
        device_faults=faults,
        numerics=numeric_rows(all_events),
        series=series,
        findings=findings,
        events=events,
        verdict=verdict,
        verdict_reasons=reasons,
        criteria=build_criteria(
            analysis,
            findings,
            # The daemon's final analysis stored findings and a verdict: the kinds were judged.
            judged=analysis is not None or (not running and rec.verdict is not None),
            rec=rec,
        ),
        clean_statement=_clean_statement(analysis, verdict),
        detectors=detectors,
        manifest=manifest,
        generated_at=time.time(),
        captures=tuple(_capture_view(c) for c in captures),
        accounting=(analysis or {}).get("accounting"),
        coverage=(analysis or {}).get("coverage"),
        chip_hours=(analysis or {}).get("chip_hours"),
        chip_unit=(analysis or {}).get("chip_unit"),
        links=(analysis or {}).get("links"),
        reliability=(analysis or {}).get("reliability"),
        # every run of the store is read for them: the certificate's, not each refresh of a live view
        repeat_offenders=None if running else _repeat_offenders(store, (analysis or {}).get("reliability")),
    )
    if (rec.nodes or 1) > 1:
        data = replace(data, cluster=_cluster(store, run_id, data, analysis, all_events))
    return data


def _cluster(store: Store, run_id: str, data: ReportData, analysis: Mapping[str, Any] | None,
             events: list[Any]) -> Any:
    """The cluster view of a run over several nodes (``soak.report.cluster``)."""
    from soak.analysis.chip_verdicts import min_coverage_of
    from soak.report.cluster import cluster_view

    rec = store.get_run(run_id)
    lost = {e.node for e in events if e.kind == "node_lost" and e.node}
    return cluster_view(data, store.cluster_nodes(run_id), min_coverage=min_coverage_of((analysis or {}).get("thresholds")),
                        lost_ever=lost, nodes_planned=None if rec is None else rec.nodes)


def _host(manifest: Mapping[str, Any] | None) -> Mapping[str, Any]:
    host = manifest.get("host") if isinstance(manifest, Mapping) else None
    return host if isinstance(host, Mapping) else {}


def _clean_statement(analysis: Mapping[str, Any] | None, verdict: str | None) -> Message | None:
    """The judge's statement of what a passing run shows; nothing for any other verdict."""
    if verdict != "pass" or analysis is None:
        return None
    text = analysis.get("clean_statement")
    if text is None:
        return None
    typed = analysis.get("clean_statement_typed") or {}
    return Message(str(text), str(typed.get("code") or ""), dict(typed.get("values") or {}))


_DETECTOR_SECTIONS = {
    "memory_creep": "memory",
    "utilization_dropouts": "utilization",
    "hang": "hang",
    "comm_timeouts": "comm",
    "thermal": "thermal",
    "throughput_degradation": "throughput",
    "stale_telemetry": "stale",
}


def _thresholds_for(name: str, thresholds: Mapping[str, Any]) -> dict[str, Any]:
    section = thresholds.get(_DETECTOR_SECTIONS.get(name, name)) if isinstance(thresholds, Mapping) else None
    if isinstance(section, Mapping):
        return dict(section)
    direct = thresholds.get(name) if isinstance(thresholds, Mapping) else None
    return dict(direct) if isinstance(direct, Mapping) else {}


def _finding_reason(f: FindingView) -> Message:
    """A failing finding as a reason of the verdict (a stored verdict without the judge's
    reasons), coded like the judge's own so it reads in the report's language."""
    from soak.analysis.verdict import finding_reason, where

    if f.start is None:  # the template says when: without a time, the words as they were
        return Message(f"{f.kind} on {where(f)}: {f.summary}")
    s = finding_reason(f)
    return Message(str(s), s.code, s.values)


def _finding_from_dict(d: Mapping[str, Any]) -> FindingView:
    from soak.store import FINDING_KEYS

    return FindingView(
        kind=str(d.get("kind")),
        device=d.get("device"),
        metric=d.get("metric"),
        start=d.get("start"),
        end=d.get("end"),
        severity=str(d.get("severity") or "warn"),
        summary=str(d.get("summary") or ""),
        evidence={k: v for k, v in d.items() if k not in FINDING_KEYS and k != "capture" and v is not None},
        node=d.get("node"),
        code=str(d.get("code") or ""),
        values=dict(d.get("values") or {}),
    )


def _capture_view(c: Capture) -> CaptureView:
    d = c.detail

    def ops(key: str) -> tuple[tuple[str, float, int], ...] | None:
        rows = d.get(key)
        if rows is None:
            return None
        return tuple((str(o.get("name")), float(o.get("self_ms") or 0.0), int(o.get("calls") or 0)) for o in rows)

    return CaptureView(
        id=c.id, label=c.label, workload=c.workload, rank=c.rank, first_step=d.get("first_step"),
        last_step=d.get("last_step"), steps_per_s=d.get("steps_per_s"), shares=dict(d.get("shares") or {}),
        dominant=d.get("dominant"), top_ops=ops("top_device_ops") or ops("top_host_ops") or (),
        cpu_fallbacks=ops("cpu_fallbacks"), trace=d.get("trace"), error=d.get("error"), backend=d.get("backend"),
    )
