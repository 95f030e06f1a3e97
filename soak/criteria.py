"""The criteria a run is judged on, each evaluated from its evidence: met, not met, or not
judged (``None``), with what was required and what was measured. ``soak.judge`` collects
them and decides the verdict; nothing here decides one.

Besides the detectors' findings (one criterion per finding kind) a run must show:

- **coverage**: every chip read, every metric it provides, for at least the profile's share
  of the soak (``evidence.min_coverage``); a run with no chip reading cannot pass;
- **runtime and availability**: the run reached its planned end, and the time it did not
  train for a reason the plan did not expect stays under ``1 - evidence.min_availability``;
- **restarts**: no crash or hang that was not injected (``evidence.max_uninjected_restarts``);
- **preflight**: the node passed its self-check, when the plan ran one;
- **nodes** (a cluster run): every node joined and stayed to the end;
- **links** (several nodes): the pairwise link test between nodes found no pair or node below
  the profile's floor or more than ``links.max_below_median_frac`` below the others
  (``soak.analysis.links``); a run or trace of several nodes without a link test is not judged
  on its links (the criterion says so), and a single node has no such criterion.
- **numerical correctness**: no chip computed a confirmed wrong result (``soak.analysis.numerics``),
  judged on the chips the workloads' own checks reached (their count is the evidence); a run
  whose workloads check nothing is not judged on it, as one whose fault views never answered
  is not judged on device faults: neither claims what it did not see, neither fails the run
  for it, and a failing finding seen still fails it.
- **compute** (a run with the ``gemm`` workload): every rank reaches ``compute.min_expected_frac``
  of its chip model's dense 16-bit peak, and no node is more than ``compute.max_below_median_frac``
  below the other nodes (``soak.analysis.compute``).

A criterion that fails adds its reason, in words, to the ``reasons`` list it is given.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from soak.analysis import compute as cp
from soak.analysis import evidence as ev
from soak.analysis import links as lk
from soak.analysis import numerics as nm
from soak.analysis import sampling as sm
from soak.analysis.messages import CRITERIA, CRITERION_TEXTS, said, say
from soak.analysis.model import KINDS
from soak.config import Plan
from soak.device_names import device_key

_SEVERITY_RANK = {"info": 0, "warn": 1, "fail": 2}


def _criterion(met: bool | None, *, code: str, values: Mapping[str, Any], required: str = ".required",
               measured: str = ".measured", **detail: Any) -> dict[str, Any]:
    """A criterion: its name, required and measured lines are its codes' English over
    ``values``; ``required``/``measured`` are the suffixes of their codes (after ``code``, or
    after ``criterion.kind`` for a finding kind's)."""
    if code not in CRITERIA:
        raise KeyError(f"unknown criterion code {code!r}")
    stem = code.rsplit(".", 1)[0] if code.startswith("criterion.kind.") else code  # one text for every kind
    required_code, measured_code = stem + required, stem + measured
    if required_code not in CRITERION_TEXTS or measured_code not in CRITERION_TEXTS:
        raise KeyError(f"criterion {code!r}: no template {required_code!r} or {measured_code!r}")
    return {"name": say(code, values), "required": say(required_code, values),
            "measured": say(measured_code, values), "met": met, **detail,
            "code": code, "values": dict(values), "required_code": required_code, "measured_code": measured_code}


def _reason(reasons: list[str], code: str, values: Mapping[str, Any]) -> None:
    reasons.append(said(code, values))


def time_criteria(acc: ev.Accounting, params: Any, status: str, reasons: list[str]) -> list[dict[str, Any]]:
    """Runtime, availability and the longest uninterrupted training, from the time accounting."""
    out = []
    reached = acc.reached_end
    # a run in progress is not judged on its length yet; one stopped on request is not judged
    running = status in ("running", "stopped") and not reached
    out.append(_criterion(
        None if running else reached, planned_s=acc.planned_s, training_s=acc.training_s,
        code="criterion.runtime", values={"planned_s": acc.planned_s, "ran_s": acc.window_end - acc.window_start,
                                          "training_s": acc.training_s, "running": running}))
    if not running and not reached:
        _reason(reasons, "reason.runtime_short", {"ran_s": acc.window_end - acc.window_start,
                                                  "planned_s": acc.planned_s})
    judged = acc.judged_availability
    down = [i for i in acc.interruptions if not i.excused]
    # start-up is excused, but a run that never trained shows nothing
    met = None if judged is None else (judged >= params.min_availability and acc.training_s > 0)
    out.append(_criterion(
        met, availability=acc.availability, judged_availability=judged,
        code="criterion.availability", values={
            "min_availability": params.min_availability, "judged_availability": judged,
            "availability": acc.availability, "training_s": acc.training_s, "planned_s": acc.planned_s,
            "down_s": acc.unexcused_down_s, "causes": sorted({i.code for i in acc.interruptions if i.cause != ev.STARTUP}),
            **_cause_counts(acc.interruptions)}))
    if met is False and acc.training_s <= 0:
        _reason(reasons, "reason.no_training", {})
    elif met is False:
        _reason(reasons, "reason.availability", {
            "down_s": acc.unexcused_down_s, "causes": sorted({i.cause for i in down}),
            "cause_codes": sorted({i.code for i in down}), "judged_availability": judged,
            "min_availability": params.min_availability})
    if params.min_uninterrupted_h > 0:
        ok = acc.longest_s >= params.min_uninterrupted_h * 3600
        values = {"longest_s": acc.longest_s, "required_s": params.min_uninterrupted_h * 3600}
        out.append(_criterion(None if running and not ok else ok, code="criterion.longest_uninterrupted", values=values))
        if not ok and not running:
            _reason(reasons, "reason.longest_uninterrupted", values)
    else:
        out.append(_criterion(None, code="criterion.longest_uninterrupted",
                              values={"longest_s": acc.longest_s, "required_s": None}))
    return out


def _cause_counts(interruptions: Sequence[ev.Interruption]) -> dict[str, list[Any]]:
    """How many interruptions of each cause, injected apart (start-up left out), as three
    lists in the order of "injected crash", "injected hang", ..., "crash", ..."""
    counts: dict[tuple[str, bool], int] = {}
    for i in interruptions:
        if i.cause == ev.STARTUP:
            continue
        counts[(i.cause, bool(i.injected))] = counts.get((i.cause, bool(i.injected)), 0) + 1
    keys = sorted(counts, key=lambda k: f"{'injected ' if k[1] else ''}{k[0]}")
    return {"count_causes": [c for c, _ in keys], "count_injected": [inj for _, inj in keys],
            "count_n": [counts[k] for k in keys]}


def restart_criterion(acc: ev.Accounting, params: Any, reasons: list[str]) -> dict[str, Any]:
    """Crashes and hangs that were not injected, at most ``evidence.max_uninjected_restarts``."""
    stops = [i for i in acc.interruptions if i.cause in (ev.CRASH, ev.HANG)]
    bad = [i for i in stops if not i.injected]
    injected = len(stops) - len(bad)
    limit = int(params.max_uninjected_restarts)
    met = len(bad) <= limit
    if not met:
        _reason(reasons, "reason.restarts", {
            "stop_codes": [i.code for i in bad[:5]], "workloads": [i.workload for i in bad[:5]],
            "messages": [(i.message or "").rstrip(": ") or None for i in bad[:5]], "starts": [i.start for i in bad[:5]],
            "more": len(bad) - 5 if len(bad) > 5 else None})
    return _criterion(met, uninjected=len(bad), injected=injected, code="criterion.restarts",
                      values={"limit": limit, "uninjected": len(bad), "injected": injected,
                              "has_injected": injected > 0})


def coverage_criterion(cov: ev.Coverage, params: Any, backend: str | None, reasons: list[str]) -> dict[str, Any]:
    """Every expected chip read, every metric for ``evidence.min_coverage`` of the soak."""
    chip, metric, worst = cov.worst
    minimum = params.min_coverage
    measured = (".measured_none" if cov.chips_seen == 0
                else ".measured_missing" if cov.chips_expected > cov.chips_seen else ".measured")
    met = cov.chips_seen > 0 and cov.chips_expected <= cov.chips_seen and worst >= minimum
    if not met:
        errors = sorted({f"{o.get('reader')}: {o.get('error')}" for o in cov.outages if o.get("error")})
        base = {"reader_errors": errors[:3], "chips_seen": cov.chips_seen, "chips_expected": cov.chips_expected}
        if cov.chips_seen == 0:
            _reason(reasons, "reason.no_chip_read", base)
        elif cov.chips_expected > cov.chips_seen:
            _reason(reasons, "reason.chips_missing", base)
        low = cov.below(minimum)
        if low:
            _reason(reasons, "reason.coverage_low", {
                **base, "min_coverage": minimum, "chips": len({c for c, _, _ in low}),
                "low_chips": [c for c, _, _ in low[:6]], "low_metrics": [m for _, m, _ in low[:6]],
                "low_ratios": [r for _, _, r in low[:6]], "more": len(low) > 6})
    return _criterion(met, measured=measured, min_ratio=worst, chips_seen=cov.chips_seen, chips_expected=cov.chips_expected,
                      code="criterion.coverage", values={
                          "min_coverage": minimum, "lowest_ratio": worst, "lowest_chip": chip, "lowest_metric": metric,
                          "chips_seen": cov.chips_seen, "chips_expected": cov.chips_expected,
                          "metrics": len(cov.metrics)})


def preflight_criterion(events: Sequence[Any], plan: Plan | None, reasons: list[str]) -> dict[str, Any] | None:
    """The node's self-check passed; None when the plan ran none."""
    if plan is None or not plan.run.preflight:
        return None
    pre = [e for e in events if e.kind == "preflight"]
    if not pre:
        return _criterion(None, code="criterion.preflight", values={"status": None})
    detail = pre[-1].detail if isinstance(pre[-1].detail, Mapping) else {}
    status = str(detail.get("status"))
    met = status in ("pass", "warn")
    if not met:
        _reason(reasons, "reason.preflight", {"message": pre[-1].message, "status": status})
    return _criterion(met, code="criterion.preflight", values={"status": status})


def nodes_criterion(nodes: Sequence[Any], expected: int, running: bool, reasons: list[str],
                     lost_ever: set[str] | None = None) -> dict[str, Any]:
    """A cluster run: every node joined and stayed to the end (a node lost and back later
    still fails it: the job ran without it)."""
    lost_ever = lost_ever or set()
    bad = [n for n in nodes if n.status in ("lost", "failed") or n.name in lost_ever]
    done = [n for n in nodes if n.status == "finished"]
    met: bool | None = len(nodes) == expected and not bad and (running or len(done) == expected)
    if running and met:
        met = None
    if met is False:
        missing = expected - len(nodes)
        _reason(reasons, "reason.nodes", {"nodes": [n.name for n in bad], "ranks": [n.rank for n in bad],
                             "statuses": ["lost" if n.name in lost_ever else n.status for n in bad],
                             "came_back": [n.name for n in bad if n.name in lost_ever and n.status not in ("lost", "failed")],
                             "never_joined": max(missing, 0),
                             "not_finished": expected - len(done) - len(bad) if not bad and not missing else 0})
    return _criterion(met, lost=[n.name for n in bad if n.status == "lost"], code="criterion.nodes",
                      values={"expected": expected, "joined": len(nodes), "finished": len(done),
                              "bad_nodes": [n.name for n in bad], "bad_statuses": [n.status for n in bad]})


def links_criterion(v: lk.LinkVerdict, running: bool) -> dict[str, Any]:
    """Several nodes: the pairwise link test. No test recorded is not judged (met None), never
    a pass: the criterion says so and the verdict says nothing about the links."""
    values = [p.busbw_gbps for p in v.pairs if p.busbw_gbps is not None]
    if not v.tests or not values:
        return _criterion(None, tests=v.tests, code="criterion.links", measured=".measured_none",
                          values={**_links_values(v), "running": running})
    low = min((p for p in v.pairs if p.busbw_gbps is not None), key=lambda p: p.busbw_gbps or 0.0)
    bad = [f for f in v.findings if f.severity == "fail"]
    return _criterion(not bad, tests=v.tests, median_gbps=v.median_gbps,
                      floor_gbps=v.floor_gbps, code="criterion.links", values={
                          **_links_values(v), "lowest_a": low.a, "lowest_b": low.b, "lowest_gbps": low.busbw_gbps,
                          "two_nodes": len(v.nodes) < 3,
                          "failing_nodes": [f.node for f in bad],
                          "failing_others": [None if f.device is None else f.device[len(lk.LINK_PREFIX):] for f in bad]})


def _links_values(v: lk.LinkVerdict) -> dict[str, Any]:
    """The numbers a links criterion states, as its ``values``."""
    return {"max_below_median_pct": 100 * v.max_below_median_frac, "floor_gbps": v.floor_gbps, "chip": v.chip,
            "expected_gbps": v.expected_gbps, "tests": v.tests, "pairs": len(v.pairs), "nodes": len(v.nodes),
            "median_gbps": v.median_gbps, "relative_only": v.floor_gbps is None and bool(v.chip)}


def compute_criterion(v: cp.ComputeVerdict, reasons: list[str]) -> dict[str, Any]:
    """The GEMM workload's rate per rank against its chip's peak, and per node against the others."""
    rates = [r.tflops for r in v.ranks if r.tflops is not None]
    bad = [f for f in v.findings if f.severity == "fail"]
    if bad:
        _reason(reasons, "reason.compute", {"finding_codes": [f.code for f in bad[:3]],
                                            "finding_values": [f.values for f in bad[:3]],
                                            "nodes": [f.node for f in bad[:3]], "devices": [f.device for f in bad[:3]],
                                            "more": len(bad) > 3})
    return _criterion(not bad, floor_tflops=v.floor_tflops, code="criterion.compute",
                      values={"max_below_median_pct": 100 * v.max_below_median_frac, "floor_tflops": v.floor_tflops,
                              "chip": v.chip, "chip_named": v.chip or "chip model unknown",
                              "expected_tflops": v.expected_tflops, "expected_source": v.expected_source,
                              "ranks": len(v.ranks), "nodes": len(v.nodes), "one_node": len(v.nodes) < 2,
                              "median_tflops": statistics.median(rates),
                              "lowest_tflops": min(rates), "failing_nodes": [f.node for f in bad],
                              "failing_devices": [f.device for f in bad]})


def kind_criteria(findings: Sequence[Any], *, judged: bool, blind: Sequence[sm.Blind] = (),
                  interval_s: float | None = None, profile: Any = None,
                  not_judged: Mapping[str, Sequence[str]] | None = None) -> list[dict[str, Any]]:
    """One per finding kind: no finding of it fails (findings as objects or dicts).

    A kind in ``blind`` (``soak.analysis.sampling``) is not judged at the run's sampling: met
    None, with the interval it needs, unless one of its findings fails anyway (what was seen
    still counts). With the sampling ``interval_s`` known, a kind that sees only longer events
    there than at a fine sampling states the shortest it sees (``shortest_s``). ``not_judged``
    (default: from the findings, ``soak.analysis.stale.not_judged``) names per kind the chips
    whose readings of its metric were stale: the kind does not judge them, and says so."""
    from soak.analysis.stale import not_judged as stale_chips

    out = []
    excluded = stale_chips(findings) if not_judged is None else not_judged
    blind_of = {b.kind: b for b in blind}
    for kind in KINDS:
        if kind == "device_fault" or kind in nm.KINDS:  # judged with their evidence: device_faults_ and numerics_criterion
            continue
        mine = [f for f in findings if (f.kind if hasattr(f, "kind") else f.get("kind")) == kind]
        sev = [f.severity if hasattr(f, "severity") else f.get("severity") for f in mine]
        worst = max((_SEVERITY_RANK.get(s, 1) for s in sev), default=-1)
        values: dict[str, Any] = {"kind": kind, "findings": len(mine), "found": bool(mine)}
        if excluded.get(kind):
            values["not_judged"] = list(excluded[kind])
        if mine:  # what the findings are, so a met criterion with findings says why they do not fail it
            values.update(fails=sev.count("fail"), warns=sev.count("warn"),
                          infos=sum(1 for s in sev if s not in ("fail", "warn")))
        b = blind_of.get(kind)
        shortest = None if b is not None else sm.limited_s(kind, interval_s, profile)
        if shortest is not None:
            values["shortest_s"] = shortest
        if b is not None and worst < 2:
            out.append(_criterion(None, code=f"criterion.kind.{kind}", measured=".measured_blind",
                                  values={**values, **b.values(), "blind": True}))
            continue
        out.append(_criterion((worst < 2) if (judged or mine) else None,
                              code=f"criterion.kind.{kind}", values=values))
    return out


def blind_reasons(criteria: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Why a verdict does not claim its blind criteria: one ``reason.blind`` each."""
    return [said("reason.blind", {k: c["values"][k] for k in ("kind", "interval_s", "max_interval_s", "steps")
                                  if k in c["values"]})
            for c in criteria if c.get("met") is None and (c.get("values") or {}).get("blind")]


def device_faults_criterion(findings: Sequence[Any], evidence: Any, params: Any,
                           read_interval_s: float | None = None) -> dict[str, Any]:
    """No chip reported a fault that fails it (``soak.analysis.device_faults``), judged on the
    chips whose fault views answered; a run where none answered is not judged on it (a clean
    ECC record that was never read is claimed nowhere).

    Like the detectors it declares the sampling it needs (``soak.analysis.sampling``): each
    chip's fault views read at least ``params.min_reads`` times (a counter's rise shows between
    two reads), once per ``params.max_read_interval_s`` of the run or more often
    (``read_interval_s``: the detail interval times the time scale; a fault code or health word
    between two reads is not seen). A chip read fewer times is not judged; a run read less often
    is not judged at all, unless a fault it did see fails it."""
    mine = [f for f in findings if (f.kind if hasattr(f, "kind") else f.get("kind")) == "device_fault"]
    sev = [f.severity if hasattr(f, "severity") else f.get("severity") for f in mine]
    fails, warns = sev.count("fail"), sev.count("warn")
    min_reads = max(1, int(params.min_reads))
    read, not_read = evidence.read(min_reads), evidence.not_read(min_reads)
    # every count is of reads: a view's values are stored only in the tick that read them
    readings = sum(evidence.chips[k][1] for k in read)
    slow = read_interval_s is not None and read_interval_s > params.max_read_interval_s * (1 + 1e-9)
    values = {"chips": len(evidence.chips), "read": len(read), "readings": readings, "fails": fails, "warns": warns,
              "failing": fails > 0, "warning": warns > 0,
              "not_read": [device_key(n, d) for n, d in not_read],
              "max_link_down_s": params.max_link_down_s, "max_link_flaps": params.max_link_flaps,
              "min_reads": min_reads, "max_read_interval_s": params.max_read_interval_s,
              "read_interval_s": read_interval_s,
              "most_reads": max((e[1] for e in evidence.chips.values()), default=0)}
    if slow:
        # blind like a detector at too coarse a sampling: a verdict does not claim it (reason.blind)
        values.update(blind=True, kind="device_fault", interval_s=read_interval_s,
                      max_interval_s=params.max_read_interval_s)
        return _criterion(False if fails else None, code="criterion.device_faults", values=values,
                          measured=".measured_cadence")
    if not read:
        # a fault the chip did report still fails the run: only a clean record needs readings
        return _criterion(False if fails else None, code="criterion.device_faults", values=values,
                          measured=".measured_none")
    return _criterion(fails == 0, code="criterion.device_faults", values=values)


def numerics_criterion(findings: Sequence[Any], evidence: nm.NumericEvidence,
                       chips: Sequence[tuple[str | None, str]]) -> dict[str, Any]:
    """No confirmed wrong result, NaN or Inf (``soak.analysis.numerics``), with the checks run
    per chip as its evidence; ``chips`` the run's chips as (node, chip). Not judged where no
    check ran at all (a failing finding still fails it), and on a chip no check reached. Its
    failing findings are the verdict's reasons (``reason.finding``), as every finding's are."""
    mine = [f for f in findings if (f.kind if hasattr(f, "kind") else f.get("kind")) in nm.KINDS]
    sev = [f.severity if hasattr(f, "severity") else f.get("severity") for f in mine]
    fails, warns = sev.count("fail"), sev.count("warn")
    per_chip = evidence.per_chip()
    checked = {k: n for k, n in per_chip.items() if n > 0}
    named = [device_key(n, d) for n, d in sorted(checked, key=lambda k: (k[0] or "", k[1]))]
    steps = [r for r in evidence.ranks if r.checks > 0]
    values = {"chips": max(len(chips), len(checked)), "checked": len(checked), "checks": sum(checked.values()),
              "checked_chips": named, "chip_checks": [checked[k] for k in sorted(checked, key=lambda k: (k[0] or "", k[1]))],
              "steps_first": min((r.first_step for r in steps), default=None),
              "steps_last": max((r.last_step for r in steps), default=None),
              "not_checked": [device_key(n, d) for n, d in chips if (n, d) not in checked],
              "fails": fails, "warns": warns, "failing": fails > 0, "warning": warns > 0}
    if not checked:
        return _criterion(False if fails else None, code="criterion.numerics", values=values, measured=".measured_none")
    return _criterion(fails == 0, code="criterion.numerics", values=values)


def record_runtime(rec: Any, ended: float | None) -> dict[str, Any]:
    """A run without a plan (imported): judged on its record alone."""
    planned = None if rec.planned_end_ts is None else rec.planned_end_ts - rec.started_ts
    dur = None if ended is None else ended - rec.started_ts
    met = None if planned is None or dur is None else dur >= planned - max(2.0, 0.001 * planned)
    return _criterion(met, code="criterion.runtime", required=".required_record", measured=".measured_record", values={"planned_s": planned, "ran_s": dur, "training_s": None,
                                                        "running": False})
