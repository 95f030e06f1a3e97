"""Machine-hall traces for the evaluation harness (``benchmarks/eval_detectors.py --halls N
--time-to-detect``): faults a whole node shares, faults that come and go, and how soon the
online analysis names each.

Healthy halls (``synth_hall``: 16 nodes x 8 chips, 24 h, two chip models, rack and node
inlet differences, the hall's day-night cycle) must give no finding. Faults, at 1x and 2x
the harness' floors (``evaluate.FLOORS``), start at 6 h 03 min:

- ``hall/hot-chip``: one chip hotter than its siblings at equal power;
- ``hall/hot-node``: every chip of one node hotter than the other nodes' at equal power;
- ``hall/power-node``: every chip of one node drawing more power;
- ``hall/slow-node``: one node's ranks slower outside the collectives;
- ``hall/recurring``: one node's ranks slower for 12 min of every hour;
- ``hall/slow-link``: one pair of nodes slower in the hourly link tests.
- ``hall/stalls``: one node's ranks 1.9x slower outside the collectives in a share of the
  readings, all together, the medians unchanged (the tails, ``soak.analysis.tails``);
- ``hall/hot-node-floor``: a whole node hotter at equal power at the node rule's own floor;
- ``hall/hot-node-7c``: a whole node 7 C hotter in halls whose healthy nodes differ by up to
  about 5 C, each beside the same hall healthy;
- ``severity/*``: what the severity policy fails, at 1x and 2x its levels (a slow node, a
  drifting chip, a rack that lost its cooling): the run must fail on that finding.

Time to detect: the analysis is run as the daemon runs it while the run goes on (on the
trace up to then), at online-analysis times after the onset, and the first time the fault
is named is taken. Each step of the search is one online analysis; the steps are the
cadence's multiples listed in ``TTD_STEPS_MIN``, so a time is an upper bound with their
resolution (the daemon's own cadence, ``jobs.analysis_every``, is 5 min).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from soak.analysis import analyze
from soak.analysis.links import LINK_PREFIX
from soak.analysis.model import Finding
from soak.analysis.synth import T0, Fault
from soak.analysis.synth_hall import Hall, generate
from soak.device_names import device_key

ONSET_H = 6.05
N_METRICS = 8  # as the harness counts series-days
# Online analyses after the onset, in minutes: every 5 min for the first hour, then coarser.
TTD_STEPS_MIN = (5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 90, 120, 150, 180, 240, 300, 360, 480, 600)
LINK_FLOOR = 0.20  # the links' relative rule


@dataclass(frozen=True)
class HallCase:
    hall: Hall
    family: str
    multiple: float
    slow_pair: tuple[int, int] | None = None


def hall_healthy_cases(n: int, seed0: int = 9000) -> list[HallCase]:
    """Healthy halls: natural spread typical or doubled, the day-night cycle 2.5 or 4 C."""
    return [HallCase(Hall(f"hall-healthy-{i}", seed=seed0 + i, spread=1.0 + (i % 2),
                          day_night_c=(2.5, 4.0)[(i // 2) % 2]), "hall/healthy", 0.0) for i in range(n)]


def hall_fault_cases(floors: dict[str, float], multiples: tuple[float, ...] = (1.0, 2.0),
                     seed0: int = 9500) -> list[HallCase]:
    out: list[HallCase] = []
    seed = seed0
    def add(family: str, m: float, *faults: Fault, slow_pair: tuple[int, int] | None = None,
            frac: float = 0.0) -> None:
        nonlocal seed
        seed += 1
        pairs = ((*slow_pair, frac),) if slow_pair else ()
        hall = Hall(f"{family}-x{m:g}", seed=seed, faults=faults, slow_pairs=pairs, link_onset_h=ONSET_H)
        out.append(HallCase(hall, family, m, slow_pair))

    for m in multiples:

        add("hall/hot-chip", m, Fault("outlier", "n12/npu0-3", ONSET_H, m * floors["outlier_temp_c"], "temp"))
        add("hall/hot-node", m, Fault("outlier", "n09/*", ONSET_H, m * floors["outlier_temp_c"], "temp"))
        add("hall/power-node", m, Fault("outlier", "n05/*", ONSET_H, m * floors["outlier_power_pct"], "power"))
        add("hall/slow-node", m, Fault("straggler", "n05/*", ONSET_H, m * floors["straggler_pct"]))
        add("hall/recurring", m, Fault("straggler", "n03/*", ONSET_H, m * floors["straggler_pct"], "recurring",
                                    params={"every_s": 3600.0, "duration_s": 720.0}))
        add("hall/slow-link", m, slow_pair=(2, 7), frac=m * LINK_FLOOR)
    for m in multiples:  # after the others: each of those keeps its seed
        add("hall/stalls", m, Fault("straggler", "n09/*", ONSET_H, m * floors["stall_share_pct"], "stalls",
                                    params={"x": 1.9}))
        add("hall/hot-node-floor", m, Fault("outlier", "n09/*", ONSET_H, m * floors["outlier_node_temp_c"], "temp"))
    return out


# The severity cases: what costs the customer, at the levels the severity policy fails
# (``peers.straggler_fail_frac``, ``peers.temp_fail_c``, ``thermal.drift_fail_c``) and beyond.
SEVERITY_LEVELS = {
    "straggler_pct": 12.0,  # a node this much slower at full utilization and capped power, all run
    "drift_c_per_h": 0.3,  # a chip drifting up at unchanged power over 72 h: 10 C off its peers from 33 h
    "rack_temp_c": 12.0,  # a rack of four nodes this much hotter than the hall for 12 h
}
NODE_TEMP_C = 7.0  # a whole node this much hotter than its model's typical node at equal power


def severity_cases(multiples: tuple[float, ...] = (1.0, 2.0), seed0: int = 9700) -> list[HallCase]:
    """The severity cases at ``multiples`` of their levels (each must fail the run, naming
    its cause): a slow node from the start (no change for the throughput detector to see:
    only the straggler rule can fail it), a chip drifting up over 72 h, a rack that lost its
    cooling for 12 h (a hall of one chip model: a rack is half the nodes of a model in a
    hall of two, and half a group has no majority to be judged against)."""
    lv = SEVERITY_LEVELS
    out = []
    for i, m in enumerate(multiples):
        seed = seed0 + 10 * i
        out.append(HallCase(Hall(f"sev-straggler-x{m:g}", seed=seed + 1, faults=(
            Fault("straggler", "n05/*", 0.0, m * lv["straggler_pct"], params={"power_frac": 0.92}),)),
            "severity/slow-node", m))
        out.append(HallCase(Hall(f"sev-drift-x{m:g}", seed=seed + 2, hours=72.0, faults=(
            Fault("thermal", "n12/npu0-3", 0.0, m * lv["drift_c_per_h"], "drift"),)), "severity/drift", m))
        rack = tuple(Fault("outlier", f"n{k:02d}/*", ONSET_H, m * lv["rack_temp_c"], "temp",
                           params={"until_h": ONSET_H + 12.0}) for k in range(4, 8))
        out.append(HallCase(Hall(f"sev-rack-x{m:g}", seed=seed + 3, models=1, faults=rack), "severity/rack", m))
    return out


def node_temp_cases(n: int, seed0: int = 9800) -> list[HallCase]:
    """A whole node ``NODE_TEMP_C`` hotter at equal power in halls of doubled natural node
    spread (healthy node medians spanning up to about 5 C), each beside the same hall without
    it (a healthy case of its own)."""
    out = []
    for i in range(n):
        kw = {"seed": seed0 + i, "spread": (1.25, 1.5, 2.0)[i % 3], "models": 1 + i % 2}
        out.append(HallCase(Hall(f"node-temp-{i}", faults=(Fault("outlier", "n09/*", ONSET_H, NODE_TEMP_C, "temp"),),
                                 **kw), "hall/hot-node-7c", 1.0))
        out.append(HallCase(Hall(f"node-temp-{i}-healthy", **kw), "hall/healthy", 0.0))
    return out


def node_span_c(h: Hall) -> float:
    """How far apart the healthy hall's node medians of temperature are (the largest span
    within a chip model), C."""
    trace, _ = generate(dataclasses.replace(h, faults=()))
    by_node: dict[tuple[int, str], list[float]] = {}
    for s in trace.series("temp_c"):
        node = trace.place(s.device)[0]
        by_node.setdefault((h.model_of(h.node_names.index(node)), node), []).append(float(np.median(s.v)))
    spans = []
    for model in {m for m, _ in by_node}:
        meds = [float(np.median(v)) for (m, _), v in by_node.items() if m == model]
        spans.append(max(meds) - min(meds))
    return max(spans)


def _named(f: Finding, case: HallCase) -> bool:
    """Whether a finding names the case's fault: its chip, its node (``device`` None: the
    whole node), or its link."""
    if f.severity == "info":
        return False
    if case.slow_pair is not None:
        a, b = (f"n{i:02d}" for i in case.slow_pair)
        return f.kind == "straggler" and (f.node, f.device) == (a, f"{LINK_PREFIX}{b}")
    if f.code == "outlier.group.temp_c":  # a group of nodes: the faulty ones, all of them
        return {device_key(n, "*") for n in f.values.get("members") or []} == {x.device for x in case.hall.faults}
    for fault in case.hall.faults:
        if fault.kind == "thermal" and f.metric == "temp_c" and f.kind in ("thermal", "outlier"):
            if f.node is not None and f.device is not None and device_key(f.node, f.device) == fault.device:
                return True  # a drifting chip: its drift, and its lead over its peers
        if f.kind != fault.kind:
            continue
        if fault.device.endswith("/*"):
            if f.device is None and device_key(f.node, "*") == fault.device:
                return True
        elif f.node is not None and f.device is not None and device_key(f.node, f.device) == fault.device:
            return True
    return False


def _consequence(f: Finding, case: HallCase) -> bool:
    """Under synchronous data parallelism the job runs at its slowest rank's pace: a slow
    node slows every rank's step, which the throughput detector rightly reports. A chip the
    fault heats past the thermal threshold is rightly named for it too."""
    if (f.kind, f.metric) == ("throughput_degradation", "step_time_s"):
        return any(fault.kind == "straggler" for fault in case.hall.faults)
    if f.code == "thermal.excursions" and f.node is not None and f.device is not None:
        hot = {x.device for x in case.hall.faults if x.kind in ("outlier", "thermal") and x.style in ("temp", "drift")}
        return bool({device_key(f.node, f.device), device_key(f.node, "*")} & hot)
    return False


def _analysis(case: HallCase, trace: Any, now: float | None = None) -> list[Finding]:
    return [f for f in analyze(trace, phases=case.hall.phases, now=now).findings if f.severity != "info"]


def run_hall_case(case: HallCase) -> dict[str, Any]:
    """The final analysis of one hall: detection and false findings, in the harness' shape."""
    trace, faults = generate(case.hall)
    analysis = analyze(trace, phases=case.hall.phases)
    found = [f for f in analysis.findings if f.severity != "info"]
    hits = [f for f in found if _named(f, case)]
    false = [f for f in found if f not in hits and not _consequence(f, case)]
    errors: dict[str, list[float]] = {}
    for f in hits:
        if f.metric == "temp_c" and f.deviation is not None:
            errors.setdefault("deviation_abs", []).append(f.deviation - faults[0].magnitude)
        elif f.details.get("deviation_pct") is not None and faults:
            errors.setdefault("deviation_abs", []).append(abs(f.details["deviation_pct"]) - faults[0].magnitude)
        if f.period_s is not None and faults and faults[0].style == "recurring":
            errors.setdefault("period_rel", []).append(f.period_s / faults[0].params["every_s"] - 1.0)
    h = case.hall
    return {
        "family": case.family, "multiple": case.multiple, "scenario": h.name,
        "detected": bool(hits) if (faults or case.slow_pair) else None,
        "false": [f"{f.kind}:{device_key(f.node, str(f.device))}:{f.summary}" for f in false],
        "series_days": h.nodes * h.chips * N_METRICS * h.hours / 24.0,
        "errors": errors,
        "named": [f.summary for f in hits][:2],
        "verdict": analysis.verdict,
        # the findings that decided a failing verdict, and whether the fault's own is among them
        "decided_by": [f"{f.code}:{device_key(f.node, str(f.device))}" for f in found if f.severity == "fail"],
        "fails_on_fault": any(f.severity == "fail" for f in hits),
    }


def time_to_detect(case: HallCase) -> dict[str, Any]:
    """Minutes from the onset to the first online analysis that names the fault (None: not
    within the last step), and the other findings that analysis gave."""
    trace, _ = generate(case.hall)
    onset = T0 + ONSET_H * 3600.0
    for minutes in TTD_STEPS_MIN:
        now = onset + minutes * 60.0
        if now > trace.end:
            break
        found = _analysis(case, trace.until(now), now)
        hits = [f for f in found if _named(f, case)]
        if hits:
            return {"family": case.family, "multiple": case.multiple, "minutes": minutes,
                    "code": hits[0].code, "rule": hits[0].details.get("rule"),
                    "others": [f"{f.kind}:{device_key(f.node, str(f.device))}:{f.code}"
                               for f in found if f not in hits and not _consequence(f, case)]}
    return {"family": case.family, "multiple": case.multiple, "minutes": None, "code": None, "rule": None,
            "others": []}


def online_false(case: HallCase, every_min: float = 60.0) -> dict[str, Any]:
    """The online analyses of a healthy hall as its run goes on (every ``every_min`` from
    the first hour): the findings any of them gave (each finding once)."""
    trace, _ = generate(case.hall)
    seen: dict[tuple[str, str | None, str | None, str], float] = {}
    now = T0 + 3600.0
    analyses = 0
    while now <= trace.end:
        for f in _analysis(case, trace.until(now), now):
            seen.setdefault((f.kind, f.node, f.device, f.code), (now - T0) / 3600.0)
        analyses += 1
        now += every_min * 60.0
    return {"scenario": case.hall.name, "analyses": analyses,
            "false": [f"{k}:{device_key(n, str(d))}:{c} at {h:.1f} h" for (k, n, d, c), h in seen.items()]}
