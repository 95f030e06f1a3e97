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
- ``hall/hot-node-floor``: a whole node hotter at equal power at the node rule's own floor.

Time to detect: the analysis is run as the daemon runs it while the run goes on (on the
trace up to then), at online-analysis times after the onset, and the first time the fault
is named is taken. Each step of the search is one online analysis; the steps are the
cadence's multiples listed in ``TTD_STEPS_MIN``, so a time is an upper bound with their
resolution (the daemon's own cadence, ``jobs.analysis_every``, is 5 min).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def _named(f: Finding, case: HallCase) -> bool:
    """Whether a finding names the case's fault: its chip, its node (``device`` None: the
    whole node), or its link."""
    if f.severity == "info":
        return False
    if case.slow_pair is not None:
        a, b = (f"n{i:02d}" for i in case.slow_pair)
        return f.kind == "straggler" and (f.node, f.device) == (a, f"{LINK_PREFIX}{b}")
    for fault in case.hall.faults:
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
    node slows every rank's step, which the throughput detector rightly reports."""
    return (f.kind, f.metric) == ("throughput_degradation", "step_time_s") and any(
        fault.kind == "straggler" for fault in case.hall.faults)


def _analysis(case: HallCase, trace: Any, now: float | None = None) -> list[Finding]:
    return [f for f in analyze(trace, phases=case.hall.phases, now=now).findings if f.severity != "info"]


def run_hall_case(case: HallCase) -> dict[str, Any]:
    """The final analysis of one hall: detection and false findings, in the harness' shape."""
    trace, faults = generate(case.hall)
    found = _analysis(case, trace)
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
