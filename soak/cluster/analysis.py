"""A cluster run's analysis: each node agent's analysis of its own chips and ranks, its
bucket summaries for the leader, and the leader's cluster step over what the agents stored.

Every agent runs every single-chip detector on its own chips (``analyze_node``) and stores
its findings and bucket summaries (``write_node_buckets``, ``soak.analysis.buckets``); the
leader compares the nodes over those summaries (``cluster_analysis``), never over every
node's raw samples. The judge (``soak.judge``) decides the verdict from the result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from soak.analysis import Analysis, Finding, Phase, Profile, Trace, analyze, judged, peers, shared
from soak.analysis import buckets as bk
from soak.analysis import evidence as ev
from soak.analysis import links as lk
from soak.analysis.model import KINDS, PEER_KINDS
from soak.analysis.verdict import order, reasons
from soak.config import Plan
from soak.runplan import run_phases

NODE_KINDS = tuple(k for k in KINDS if k not in PEER_KINDS)  # what a node agent finds alone


def analyze_node(store: Any, run_id: str, node: str, *, plan: Plan | None, profile: Profile,
                 now: float | None = None, bucket_s: float | None = None) -> Analysis:
    """One node agent's analysis of its own chips and ranks in a cluster run: every
    single-chip detector, no peer comparison (the leader's, over every node's buckets).
    Its findings name ``node``."""
    phases = run_phases(store.load_events(run_id), plan)
    trace = Trace.from_arrays(store.trace_arrays(run_id, bucket_s=bucket_s, node=node), source=f"run {run_id} {node}")
    result = analyze(trace, profile, phases=phases or None, now=now, peer_comparison=False)
    placed = [replace(f, node=node) for f in result.findings]
    return replace(result, findings=placed, reasons=reasons(placed))


def write_node_buckets(store: Any, run_id: str, node: str, *, plan: Plan, profile: Profile, planned_start: float,
                       planned_end: float, upto: float, final: bool = False) -> int:
    """Store ``node``'s bucket summaries (``soak.analysis.buckets``) of the buckets that end by
    ``upto`` (``final``: the one holding ``upto`` too: the run is over) and are not stored
    yet; returns the rows written. Called again after a crash or a resume it writes what is
    missing and nothing twice."""
    rec = store.get_run(run_id)
    width = profile.peers.bucket_s
    tick = plan.sampling.interval_s * float(rec.time_scale or 1.0)
    origin = planned_start
    mark = store.bucket_mark(run_id, node)
    if mark is not None:  # continue on the grid already written
        origin = mark - round((mark - origin) / width) * width
    start = origin if mark is None else mark + width
    whole = (upto - origin) / width
    stop = origin + (math.ceil(whole - 1e-9) if final else math.floor(whole + 1e-9)) * width
    if stop <= start:
        return 0
    trace = Trace.from_arrays(store.trace_arrays(run_id, node=node, start=start - 2 * tick),
                             source=f"run {run_id} {node}")
    return store.add_buckets(run_id, node, bk.node_rows(trace, origin, width, tick, start, stop, planned_end))


def cluster_analysis(store: Any, run_id: str, profile: Profile, phases: Sequence[Phase], origin: float,
                      now: float | None, link_tests: lk.LinkTests) -> Analysis:
    """The leader's cluster step: the node agents' findings, the peer comparison over
    their bucket summaries, one metric at a time, and the pairwise link tests."""
    if phases:
        profile = profile.with_phases(tuple(phases))
    width = profile.peers.bucket_s
    totals = store.bucket_totals(run_id, bk.ANY, -math.inf, math.inf, width)
    findings = [Finding.from_dict(f.as_dict()) for f in store.load_findings(run_id) if f.kind in NODE_KINDS]
    if totals:
        start, end = totals[0][0], totals[-1][0] + width
        grid = bk.grid_for(profile, origin, end if now is None else max(end, now))
        if grid is not None:
            src = bk.StoredBuckets(lambda metric: store.load_buckets(run_id, metric), grid)
            findings += peers.compare(src, profile, origin)
    else:
        start = end = None
    findings += lk.evaluate(link_tests, profile).findings
    # a fault every node's chips share (each node named it once): once for the job
    findings = shared.merge_nodes(findings, len(store.cluster_nodes(run_id)), profile)
    return judged(order(findings), profile, start, end, ev.chip_hours_of_buckets(totals, width, -math.inf, math.inf))
