"""The node compute check: does every chip reach its model's matrix-multiply rate, and does any
node fall behind the others?

Input: the mean TFLOP/s of every rank of the ``gemm`` workload (``Store.rank_rates``), with its
node. Two rules, both in ``[compute]`` of the profile:

- **absolute floor** (``min_expected_frac``): a rank below that share of its chip model's dense
  16-bit peak (``[chips.MODEL].tflops_16bit``, with its source) fails. A large GEMM reaches
  60-80 % of the datasheet peak on a healthy chip, so the default floor (half) names a chip that
  is throttled or broken, never one that is merely below marketing. A model without a figure
  (CPU) has no floor; the workload's float32 on CPU is not a 16-bit rate anyway.
- **relative** (``max_below_median_frac`` = X): a node whose median rank rate is more than X
  below the median of the other nodes is named (SuperBench flags a node more than 5 % below
  its fleet's baseline; the default here is wider because the rate is a run mean, which
  restarts and checkpoints pull down). Needs two nodes.

Findings are ``straggler`` on metric ``tflops`` (``device`` None for a whole node, the rank's
name for a rank below the floor), severity ``fail`` (capped by the profile).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import Profile
from soak.device_names import rank_device

DETECTOR_VERSION = "compute/1.0"
METRIC = "tflops"


@dataclass(frozen=True)
class RankRate:
    """One rank's mean rate over the run (TFLOP/s), from ``steps`` rows."""

    node: str | None
    workload: str
    rank: int
    tflops: float | None
    rows: int = 0
    first_ts: float | None = None
    last_ts: float | None = None

    @property
    def name(self) -> str:
        return rank_device(self.workload, self.rank)


@dataclass(frozen=True)
class NodeRate:
    node: str
    tflops: float | None  # median over its ranks
    ranks: int
    vs_median: float | None  # over the median of the other nodes, 1.0 = at it
    status: str  # ok | slow | below floor


@dataclass(frozen=True)
class ComputeVerdict:
    ranks: tuple[RankRate, ...]
    nodes: tuple[NodeRate, ...]
    chip: str | None
    expected_tflops: float | None
    expected_source: str
    floor_tflops: float | None
    max_below_median_frac: float
    findings: tuple[Finding, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "chip": self.chip, "expected_tflops": self.expected_tflops, "expected_source": self.expected_source,
            "floor_tflops": self.floor_tflops, "max_below_median_frac": self.max_below_median_frac,
            "nodes": [vars(n) for n in self.nodes],
            "ranks": [{"node": r.node, "rank": r.name, "tflops": r.tflops, "rows": r.rows} for r in self.ranks],
            "findings": [f.to_dict() for f in self.findings],
            "version": DETECTOR_VERSION,
        }


def evaluate(rates: Iterable[RankRate], chip: str | None, profile: Profile | None = None) -> ComputeVerdict:
    """Judge the ranks' rates by the profile's floor and the nodes by the relative rule."""
    profile = profile or Profile.default()
    p = profile.compute
    exp = profile.chips.get(chip) if chip else None
    expected = exp.tflops_16bit if exp is not None else None
    floor = expected * p.min_expected_frac if expected is not None else None
    ranks = tuple(sorted((r for r in rates if r.tflops is not None),
                         key=lambda r: (r.node or "", r.workload, r.rank)))
    by_node: dict[str, list[float]] = defaultdict(list)
    for r in ranks:
        by_node[r.node or ""].append(r.tflops or 0.0)
    node_rate = {n: statistics.median(v) for n, v in by_node.items()}

    def others(n: str) -> list[float]:
        return [v for m, v in node_rate.items() if m != n]

    slow: dict[str, float] = {}
    for n, v in node_rate.items():
        if others(n) and statistics.median(others(n)) > 0:
            short = 1.0 - v / statistics.median(others(n))
            if short > p.max_below_median_frac:
                slow[n] = short
    low_ranks = [r for r in ranks if floor is not None and (r.tflops or 0.0) < floor]
    findings = [_node_finding(profile, n, node_rate[n], statistics.median(others(n)), short,
                              [r for r in ranks if (r.node or "") == n]) for n, short in sorted(slow.items())]
    findings += [_rank_finding(profile, r, floor or 0.0, expected or 0.0, chip) for r in low_ranks]
    low_nodes = {r.node or "" for r in low_ranks}
    nodes = tuple(
        NodeRate(n, v, len(by_node[n]),
                 v / statistics.median(others(n)) if others(n) and statistics.median(others(n)) else None,
                 "slow" if n in slow else "below floor" if n in low_nodes else "ok")
        for n, v in sorted(node_rate.items()))
    return ComputeVerdict(ranks, nodes, chip, expected, exp.tflops_source if exp is not None else "", floor,
                          p.max_below_median_frac, tuple(findings))


def _span(rs: Sequence[RankRate]) -> tuple[float, float]:
    firsts = [r.first_ts for r in rs if r.first_ts is not None]
    lasts = [r.last_ts for r in rs if r.last_ts is not None]
    return (min(firsts) if firsts else 0.0, max(lasts) if lasts else 0.0)


def _node_finding(profile: Profile, node: str, v: float, ref: float, short: float,
                  rs: Sequence[RankRate]) -> Finding:
    n_ranks = len(rs)
    start, end = _span(rs)
    values = {"node": node, "tflops": v, "ranks": n_ranks, "below_pct": 100 * short, "others_median_tflops": ref}
    return Finding(
        kind="straggler", device=None, node=node or None, metric=METRIC, start=start, end=end,
        severity=profile.cap("straggler", "fail"),
        summary=say("straggler.node_compute", values), code="straggler.node_compute", values=values,
        baseline=ref, deviation=v - ref,
        details={"rule": "relative", "deviation_pct": -100.0 * short, "tflops": v, "ranks": n_ranks,
                 "version": DETECTOR_VERSION},
    )


def _rank_finding(profile: Profile, r: RankRate, floor: float, expected: float, chip: str | None) -> Finding:
    start, end = _span([r])
    values = {"rank": r.name, "node": r.node, "tflops": r.tflops, "floor_tflops": floor,
              "floor_share_pct": 100 * profile.compute.min_expected_frac, "chip": chip, "expected_tflops": expected}
    return Finding(
        kind="straggler", device=r.name, node=r.node, metric=METRIC, start=start, end=end,
        severity=profile.cap("straggler", "fail"),
        summary=say("straggler.rank_compute_floor", values), code="straggler.rank_compute_floor", values=values,
        baseline=expected, deviation=(r.tflops or 0.0) - expected,
        details={"rule": "floor", "tflops": r.tflops, "floor_tflops": floor, "expected_tflops": expected,
                 "chip": chip, "rows": r.rows, "version": DETECTOR_VERSION},
    )
