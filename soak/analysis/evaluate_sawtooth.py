"""Sawtooth halls for the evaluation harness (``python -m soak.analysis.evaluate --sawtooth N``):
a leak that every restart resets, and healthy jobs restarted as often.

Each hall (``synth_sawtooth``: 16 nodes x 8 chips, 72 h at 30 s) restarts its job at
intervals drawn from a range; one node's chips leak at a rate from each restart on. The
ranges give 3 to about 20 runs between restarts. Half the halls carry the run's restart
events, half leave the analysis to find the restarts in the memory itself. A leak is found
when every chip of the leaking node has a ``memory_creep`` finding (one of the node, naming
them, where they all share it; ``node``: the node is also
named against the other nodes, ``outlier.node.restarts.hbm_used_bytes``); every other finding (a
chip off that node, or another kind) is false, except, in a hall without the run's events,
the utilization drops every chip shows at once at each restart (``restarts_named``: the
restarts themselves, which the run's events would explain). The healthy halls restart as often, with
the allocator's per-start differences, early step-ups, and on some a slow memory wave.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from soak.analysis import analyze
from soak.analysis.synth_sawtooth import SawtoothHall, generate
from soak.device_names import device_key

# hours between restarts -> the family's name (about how many runs a 72 h hall gets)
EVERY_H: dict[str, tuple[float, float]] = {
    "sawtooth/every-24-30h": (24.0, 30.0),  # 3 runs
    "sawtooth/every-10-12h": (10.0, 12.0),  # 6 to 7
    "sawtooth/every-5-7h": (5.0, 7.0),  # about 12
    "sawtooth/every-3-4h": (3.0, 4.0),  # about 20
    "sawtooth/every-3-12h": (3.0, 12.0),  # the mix: 8 to 12
}
RATES_MB_PER_H = (10.0, 20.0, 40.0, 60.0)
FLOOR_MB_PER_H = 5.0  # below tau on a 64 GiB chip (6.9 MB/h), at tau on a 32 GiB one
N_METRICS = 8  # as the harness counts series-days


@dataclass(frozen=True)
class SawtoothCase:
    hall: SawtoothHall
    family: str
    rate_mb_per_h: float  # 0 for a healthy hall


def healthy_cases(n: int, seed0: int = 12000) -> list[SawtoothCase]:
    """Healthy restarted halls: every interval range in turn, events or not, every third
    with a slow memory wave."""
    names = list(EVERY_H)
    out = []
    for i in range(n):
        fam = names[i % len(names)]
        h = SawtoothHall(f"sawtooth-healthy-{i}", seed=seed0 + i, every_h=EVERY_H[fam], events=i % 2 == 0,
                         wave=i % 3 == 2)
        out.append(SawtoothCase(h, "sawtooth/healthy", 0.0))
    return out


def fault_cases(rates: tuple[float, ...] = RATES_MB_PER_H, seed0: int = 12500) -> list[SawtoothCase]:
    """One node leaking at each rate, restarted at each interval range; the leaking node of
    either chip model (64 or 32 GiB), events given or not, in turn."""
    out = []
    seed = seed0

    def add(fam: str, rate: float) -> None:
        nonlocal seed
        seed += 1
        node = ("n05", "n12")[seed % 2]
        h = SawtoothHall(f"{fam}-{rate:g}mbh-{seed}", seed=seed, every_h=EVERY_H[fam], events=seed % 4 < 2,
                         leak_node=node, leak_mb_per_h=rate)
        out.append(SawtoothCase(h, fam, rate))

    for fam in EVERY_H:
        for rate in rates:
            add(fam, rate)
    for fam in EVERY_H:  # at the floor, after the others: each of those keeps its seed
        add(fam, FLOOR_MB_PER_H)
    return out


def run_case(case: SawtoothCase) -> dict[str, Any]:
    """The final analysis of one hall: the leak found or not, the false findings, the
    slopes and runs the findings gave."""
    h = case.hall
    trace, _ = generate(h)
    found = [f for f in analyze(trace, phases=h.phases).findings if f.severity != "info"]
    leak = [f for f in found if f.kind == "memory_creep" and h.leak_node is not None and f.node == h.leak_node]
    # a leaking chip's growth out of line with its peers names the same fault
    related = [f for f in found if f.kind == "outlier" and f.metric == "hbm_used_bytes"
               and h.leak_node is not None and f.node == h.leak_node]
    # without the run's events, a job restarted every few hours idles every chip at once at
    # each restart: the utilization detector names those drops (the restarts, not a leak)
    restarts = [f for f in found if not h.events and f.code.startswith("utilization_dropouts.global")]
    false = [f for f in found if f not in leak and f not in related and f not in restarts]
    # a leak every chip of the node shares is one finding of the node naming its chips
    chips = {m for f in leak for m in (f.details.get("members") or [device_key(f.node, str(f.device))])}
    slopes = [f.slope_per_hour / (case.rate_mb_per_h * 1e6) - 1.0 for f in leak if f.slope_per_hour]
    return {
        "family": case.family, "rate_mb_per_h": case.rate_mb_per_h, "scenario": h.name,
        "segments": h.segments, "events": h.events,
        "detected": len(chips) == h.chips if h.leak_node else None,
        "chips_named": len(chips),
        # the node named as a node, against the other nodes (creep_peers)
        "node_named": any(f.code == "outlier.node.restarts.hbm_used_bytes" for f in related),
        "across_restarts": sum(int(f.details.get("shared_by") or 1) for f in leak
                               if f.code.startswith("memory_creep.restarts.")),
        "slope_rel": slopes,
        "restarts_named": len(restarts),
        "false": [f"{f.kind}:{device_key(f.node, str(f.device))}:{f.summary}" for f in false],
        "hbm_series_days": h.nodes * h.chips * h.hours / 24.0,
        "series_days": h.nodes * h.chips * N_METRICS * h.hours / 24.0,
    }


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for r in results:
        key = f"{r['family']} {r['rate_mb_per_h']:g}"
        row = rows.setdefault(key, {"family": r["family"], "rate_mb_per_h": r["rate_mb_per_h"], "n": 0,
                                    "found": 0, "segments": [], "slope_rel": [], "false": [],
                                    "hbm_series_days": 0.0, "series_days": 0.0, "events": 0,
                                    "restarts_named": 0})
        row["n"] += 1
        row["found"] += bool(r["detected"])
        row["node_named"] = row.get("node_named", 0) + bool(r["node_named"])
        row["segments"].append(r["segments"])
        row["slope_rel"] += r["slope_rel"]
        row["false"] += r["false"]
        row["hbm_series_days"] += r["hbm_series_days"]
        row["series_days"] += r["series_days"]
        row["events"] += bool(r["events"])
        row["restarts_named"] += r["restarts_named"]
    return rows


def targets(rows: dict[str, Any], min_rate_mb_per_h: float = 20.0) -> dict[str, bool]:
    """No false finding; every leak of ``min_rate_mb_per_h`` or more found; its slope
    within 20 %."""
    ok = {"zero_false_findings": True, "leaks_from_20_mb_per_h_found": True, "slope_within_20pct": True}
    for row in rows.values():
        if row["false"]:
            ok["zero_false_findings"] = False
        if row["rate_mb_per_h"] >= min_rate_mb_per_h:
            ok["leaks_from_20_mb_per_h_found"] &= row["found"] == row["n"]
            ok["slope_within_20pct"] &= all(abs(x) <= 0.20 for x in row["slope_rel"])
    return ok


def print_rows(rows: dict[str, Any], ok: dict[str, bool]) -> None:
    print(f"\n{'sawtooth family':<24} {'MB/h':>5} {'n':>2} {'runs':>7} {'found':>6} {'node':>5} {'slope err':>9} "
          f"{'false':>5} {'HBM series-days':>15} {'series-days':>11}")
    for row in rows.values():
        segs = f"{min(row['segments'])}-{max(row['segments'])}"
        err = max((abs(x) for x in row["slope_rel"]), default=None)
        found = "" if row["rate_mb_per_h"] == 0 else f"{row['found']}/{row['n']}"
        node = "" if row["rate_mb_per_h"] == 0 else f"{row['node_named']}/{row['n']}"
        print(f"{row['family']:<24} {row['rate_mb_per_h']:>5g} {row['n']:>2} {segs:>7} {found:>6} {node:>5} "
              f"{'' if err is None else f'{err:.1%}':>9} {len(row['false']):>5} {row['hbm_series_days']:>15.0f} "
              f"{row['series_days']:>11.0f}")
        for ex in row["false"][:3]:
            print(f"    false: {ex[:140]}")
    print("sawtooth targets: " + ", ".join(f"{k}={'met' if v else 'NOT met'}" for k, v in ok.items()))
