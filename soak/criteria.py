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
from soak.analysis.model import KINDS
from soak.config import Plan

_SEVERITY_RANK = {"info": 0, "warn": 1, "fail": 2}


def _hm(seconds: float | None) -> str:
    """A duration as people read it (``1d 2h 3m``, ``4m 5s``); N/A when unknown."""
    if seconds is None:
        return "N/A"
    s = int(round(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h {m}m"
    if h:
        return f"{h}h {m}m"
    return f"{m}m {s}s" if m else f"{s}s"


def _pct(x: float | None) -> str:
    return "N/A" if x is None else f"{100 * x:.1f}%"


def _criterion(name: str, required: str, measured: str, met: bool | None, **detail: Any) -> dict[str, Any]:
    return {"name": name, "required": required, "measured": measured, "met": met, **detail}


def time_criteria(acc: ev.Accounting, params: Any, status: str, reasons: list[str]) -> list[dict[str, Any]]:
    """Runtime, availability and the longest uninterrupted training, from the time accounting."""
    out = []
    reached = acc.reached_end
    # a run in progress is not judged on its length yet; one stopped on request is not judged
    running = status in ("running", "stopped") and not reached
    out.append(_criterion(
        "runtime", f">= {_hm(acc.planned_s)} planned",
        f"ran {_hm(acc.window_end - acc.window_start)} of {_hm(acc.planned_s)}, training {_hm(acc.training_s)}",
        None if running else reached, planned_s=acc.planned_s, training_s=acc.training_s))
    if not running and not reached:
        reasons.append(f"runtime: the run ended after {_hm(acc.window_end - acc.window_start)} "
                       f"of its planned {_hm(acc.planned_s)}")
    judged = acc.judged_availability
    down = [i for i in acc.interruptions if not i.excused]
    causes = _causes(acc.interruptions)
    # start-up is excused, but a run that never trained shows nothing
    met = None if judged is None else (judged >= params.min_availability and acc.training_s > 0)
    out.append(_criterion(
        "availability", f">= {_pct(params.min_availability)} (start-up and injected faults excepted)",
        f"{_pct(judged)} judged; trained {_hm(acc.training_s)} of {_hm(acc.planned_s)} planned "
        f"({_pct(acc.availability)}); {_hm(acc.unexcused_down_s)} down unexpectedly"
        + (f" ({causes})" if causes else ""),
        met, availability=acc.availability, judged_availability=judged))
    if met is False and acc.training_s <= 0:
        reasons.append("availability: no workload trained during the run")
    elif met is False:
        reasons.append(f"availability: {_hm(acc.unexcused_down_s)} without training "
                       f"({', '.join(sorted({i.cause for i in down}))}); "
                       f"{_pct(judged)} < {_pct(params.min_availability)}")
    if params.min_uninterrupted_h > 0:
        ok = acc.longest_s >= params.min_uninterrupted_h * 3600
        out.append(_criterion("longest uninterrupted", f">= {_hm(params.min_uninterrupted_h * 3600)}",
                              _hm(acc.longest_s), None if running and not ok else ok))
        if not ok and not running:
            reasons.append(f"longest uninterrupted training {_hm(acc.longest_s)} < "
                           f"{_hm(params.min_uninterrupted_h * 3600)}")
    else:
        out.append(_criterion("longest uninterrupted", "reported", _hm(acc.longest_s), None))
    return out


def _causes(interruptions: Sequence[ev.Interruption]) -> str:
    counts: dict[str, int] = {}
    for i in interruptions:
        if i.cause == ev.STARTUP:
            continue
        key = f"{'injected ' if i.injected else ''}{i.cause}"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def restart_criterion(acc: ev.Accounting, params: Any, reasons: list[str]) -> dict[str, Any]:
    """Crashes and hangs that were not injected, at most ``evidence.max_uninjected_restarts``."""
    stops = [i for i in acc.interruptions if i.cause in (ev.CRASH, ev.HANG)]
    bad = [i for i in stops if not i.injected]
    injected = len(stops) - len(bad)
    limit = int(params.max_uninjected_restarts)
    met = len(bad) <= limit
    measured = f"{len(bad)} uninjected crash/hang" + (f", {injected} injected (expected canary)" if injected else "")
    if not met:
        reasons.append("restarts: " + "; ".join(f"{i.cause} of {i.workload}: {i.message or ''}".rstrip(": ")
                                                for i in bad[:5]) + (f" (+{len(bad) - 5} more)" if len(bad) > 5 else ""))
    return _criterion("crashes and hangs", f"<= {limit} not injected", measured, met,
                      uninjected=len(bad), injected=injected)


def coverage_criterion(cov: ev.Coverage, params: Any, backend: str | None, reasons: list[str]) -> dict[str, Any]:
    """Every expected chip read, every metric for ``evidence.min_coverage`` of the soak."""
    chip, metric, worst = cov.worst
    minimum = params.min_coverage
    if cov.chips_seen == 0:
        measured = "no chip readings at all"
    elif cov.chips_expected > cov.chips_seen:
        measured = f"{cov.chips_seen} of {cov.chips_expected} chips read"
    else:
        measured = f"lowest {_pct(worst)} ({chip} {metric}); {cov.chips_seen} chips x {len(cov.metrics)} metrics"
    met = cov.chips_seen > 0 and cov.chips_expected <= cov.chips_seen and worst >= minimum
    if not met:
        errors = sorted({f"{o.get('reader')}: {o.get('error')}" for o in cov.outages if o.get("error")})
        said = f" (reader errors: {'; '.join(errors[:3])})" if errors else ""
        if cov.chips_seen == 0:
            reasons.append(f"evidence: no chip was read during the run{said}")
        elif cov.chips_expected > cov.chips_seen:
            reasons.append(f"evidence: only {cov.chips_seen} of {cov.chips_expected} expected chips were read{said}")
        low = cov.below(minimum)
        if low:
            chips = sorted({c for c, _, _ in low})
            named = ", ".join(f"{c} {m} {_pct(r)}" for c, m, r in low[:6])
            reasons.append(f"evidence: readings cover less than {_pct(minimum)} on {len(chips)} chip(s): "
                           f"{named}{' ...' if len(low) > 6 else ''}{said}")
    return _criterion("evidence coverage", f">= {_pct(minimum)} of the soak, every chip and metric", measured,
                      met, min_ratio=worst, chips_seen=cov.chips_seen, chips_expected=cov.chips_expected)


def preflight_criterion(events: Sequence[Any], plan: Plan | None, reasons: list[str]) -> dict[str, Any] | None:
    """The node's self-check passed; None when the plan ran none."""
    if plan is None or not plan.run.preflight:
        return None
    pre = [e for e in events if e.kind == "preflight"]
    if not pre:
        return _criterion("preflight", "pass", "not recorded", None)
    detail = pre[-1].detail if isinstance(pre[-1].detail, Mapping) else {}
    status = str(detail.get("status"))
    met = status in ("pass", "warn")
    if not met:
        reasons.append(f"preflight: {pre[-1].message}")
    return _criterion("preflight", "pass", status, met)


def nodes_criterion(nodes: Sequence[Any], expected: int, running: bool, reasons: list[str],
                     lost_ever: set[str] | None = None) -> dict[str, Any]:
    """A cluster run: every node joined and stayed to the end (a node lost and back later
    still fails it: the job ran without it)."""
    lost_ever = lost_ever or set()
    bad = [n for n in nodes if n.status in ("lost", "failed") or n.name in lost_ever]
    done = [n for n in nodes if n.status == "finished"]
    measured = f"{len(nodes)} of {expected} joined, {len(done)} finished"
    if bad:
        measured += "; " + ", ".join(f"{n.name} {n.status}" for n in bad)
    met: bool | None = len(nodes) == expected and not bad and (running or len(done) == expected)
    if running and met:
        met = None
    if met is False:
        missing = expected - len(nodes)
        reasons.append("nodes: " + "; ".join(
            [f"node {n.name} (rank {n.rank}) {'lost' if n.name in lost_ever else n.status}"
             + (" (came back later)" if n.name in lost_ever and n.status not in ("lost", "failed") else "")
             for n in bad]
            + ([f"{missing} node(s) never joined"] if missing > 0 else [])
            + ([f"{expected - len(done) - len(bad)} node(s) did not finish"] if not bad and not missing else [])))
    return _criterion("nodes", f"all {expected} to the end", measured, met,
                      lost=[n.name for n in bad if n.status == "lost"])


def links_criterion(v: lk.LinkVerdict, running: bool) -> dict[str, Any]:
    """Several nodes: the pairwise link test. No test recorded is not judged (met None), never
    a pass: the criterion says so and the verdict says nothing about the links."""
    x = f"{100 * v.max_below_median_frac:g}%"
    required = f"no node or pair more than {x} below the others"
    if v.floor_gbps is not None:
        required += f"; every pair >= {v.floor_gbps:.3g} GB/s ({v.chip}: expected {v.expected_gbps:g} GB/s)"
    elif v.chip:
        required += f" ({v.chip}: no expected figure, relative rule only)"
    values = [p.busbw_gbps for p in v.pairs if p.busbw_gbps is not None]
    if not v.tests or not values:
        measured = "no link test recorded: links not judged" + (" yet" if running else "")
        return _criterion("links", required, measured, None, tests=v.tests)
    low = min((p for p in v.pairs if p.busbw_gbps is not None), key=lambda p: p.busbw_gbps or 0.0)
    measured = (f"{len(v.pairs)} pair(s) of {len(v.nodes)} nodes in {v.tests} test(s): median {v.median_gbps:.3g} GB/s, "
                f"lowest {low.a}-{low.b} {low.busbw_gbps:.3g} GB/s")
    if len(v.nodes) < 3:
        measured += " (two nodes: no other pair to compare with)"
    bad = [f for f in v.findings if f.severity == "fail"]
    if bad:
        measured += "; " + _first_names([("node " + f.node) if f.device is None
                                         else f"{f.node}-{f.device[len(lk.LINK_PREFIX):]}" for f in bad])
    return _criterion("links", required, measured, not bad, tests=v.tests, median_gbps=v.median_gbps,
                      floor_gbps=v.floor_gbps)


def _first_names(names: Sequence[str], most: int = 6) -> str:
    """Who a criterion's measured line names: the first ``most``, then "..."."""
    return ", ".join(names[:most]) + (" ..." if len(names) > most else "")


def compute_criterion(v: cp.ComputeVerdict, reasons: list[str]) -> dict[str, Any]:
    """The GEMM workload's rate per rank against its chip's peak, and per node against the others."""
    x = f"{100 * v.max_below_median_frac:g}%"
    required = f"no node more than {x} below the other nodes"
    if v.floor_tflops is not None:
        required += (f"; every chip >= {v.floor_tflops:.3g} TFLOP/s ({v.chip}: dense 16-bit peak "
                     f"{v.expected_tflops:g}, {v.expected_source})")
    else:
        required += f" ({v.chip or 'chip model unknown'}: no expected figure, relative rule only)"
    rates = [r.tflops for r in v.ranks if r.tflops is not None]
    measured = (f"{len(v.ranks)} rank(s) on {len(v.nodes)} node(s): median {statistics.median(rates):.3g} TFLOP/s, "
                f"lowest {min(rates):.3g}")
    if len(v.nodes) < 2:
        measured += " (one node: no other node to compare with)"
    bad = [f for f in v.findings if f.severity == "fail"]
    if bad:
        named = [("node " + (f.node or "?")) if f.device is None else f"{f.node + '/' if f.node else ''}{f.device}"
                 for f in bad]
        measured += "; " + _first_names(named)
        reasons.append("compute: " + "; ".join(f.summary for f in bad[:3]) + (" ..." if len(bad) > 3 else ""))
    return _criterion("compute", required, measured, not bad, floor_tflops=v.floor_tflops)


def kind_criteria(findings: Sequence[Any], *, judged: bool) -> list[dict[str, Any]]:
    """One per finding kind: no finding of it fails (findings as objects or dicts)."""
    out = []
    for kind in KINDS:
        mine = [f for f in findings if (f.kind if hasattr(f, "kind") else f.get("kind")) == kind]
        sev = [f.severity if hasattr(f, "severity") else f.get("severity") for f in mine]
        worst = max((_SEVERITY_RANK.get(s, 1) for s in sev), default=-1)
        measured = f"{len(mine)} finding(s)" if mine else "0"
        out.append(_criterion(f"no {kind} (fail)", "0 fail", measured, (worst < 2) if (judged or mine) else None))
    return out


def record_runtime(rec: Any, ended: float | None) -> dict[str, Any]:
    """A run without a plan (imported): judged on its record alone."""
    planned = None if rec.planned_end_ts is None else rec.planned_end_ts - rec.started_ts
    dur = None if ended is None else ended - rec.started_ts
    met = None if planned is None or dur is None else dur >= planned - max(2.0, 0.001 * planned)
    return _criterion("runtime", "N/A" if planned is None else f">= {_hm(planned)}", _hm(dur), met)
