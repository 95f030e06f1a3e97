"""The pairwise link test between nodes: which pair of nodes, or which node, is slow.

Input: the busbw of every tested pair (``link_test`` events of a run, or the
``pair_busbw_gbps`` rows of a five-column trace: ``node`` one end, ``device`` ``link:OTHER``).
Each pair's figure is its median over the tests. Two rules, each in ``[links]`` of the profile:

- **relative** (``max_below_median_frac`` = X): a node whose pairs are slow — the upper median
  of its pairs' busbw more than X below the median of the pairs without it — is named as
  the node (device None): a slow NIC, port or cable at that node. A pair more than X below
  the median of the other pairs whose ends are not slow is named as the link (``node`` one
  end, ``device`` ``link:OTHER``). Pairs of a slow node are not named again. With two nodes
  there is one pair and nothing to compare it with: the relative rule needs three.
- **absolute floor** (``min_expected_frac``): a pair below that share of its chip model's
  expected figure (``[chips.MODEL].pair_busbw_gbps``, with its source) fails; where most pairs
  (at least two) of a node are below it, the node is named. A model without a figure (CPU, 310P) has no floor.

Findings are ``straggler`` on metric ``pair_busbw_gbps``, severity ``fail`` (capped by the
profile); a fault injected with ``slow-link`` is said in the finding.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import Profile, chip_model
from soak.analysis.trace import Trace

DETECTOR_VERSION = "links/1.0"
METRIC = "pair_busbw_gbps"
LINK_PREFIX = "link:"


@dataclass(frozen=True)
class LinkResult:
    """One pair's busbw in one link test (unix seconds; GB/s = 1e9 bytes/s)."""

    ts: float
    a: str
    b: str
    busbw_gbps: float | None
    size_bytes: int | None = None


@dataclass(frozen=True)
class LinkTests:
    """Every link test of a run or trace, and what judges them."""

    results: tuple[LinkResult, ...] = ()
    chip: str | None = None  # the profile's chip model of the tested devices
    injected: Mapping[str, str] = field(default_factory=dict)  # node -> slow-link spec
    tests: int = 0


def from_events(events: Iterable[Any]) -> LinkTests:
    """The ``link_test`` events of a run (``Store.load_events``), in time order."""
    out: list[LinkResult] = []
    chip: str | None = None
    injected: dict[str, str] = {}
    n = 0
    for e in sorted((e for e in events if e.kind == "link_test"), key=lambda e: e.ts):
        d = e.detail if isinstance(e.detail, Mapping) else {}
        pairs = d.get("pairs")
        if not isinstance(pairs, list):
            continue
        n += 1
        chip = chip_model(d.get("device_name"), d.get("backend")) or chip
        injected.update({str(k): str(v) for k, v in (d.get("injected") or {}).items()})
        for p in pairs:
            if not isinstance(p, Mapping) or not p.get("a") or not p.get("b"):
                continue
            bw = p.get("busbw_gbps")
            out.append(LinkResult(float(e.ts), str(p["a"]), str(p["b"]),
                                  None if bw is None else float(bw),
                                  None if p.get("size_bytes") is None else int(p["size_bytes"])))
    return LinkTests(tuple(out), chip, injected, n)


def from_trace(trace: Trace) -> LinkTests:
    """``pair_busbw_gbps`` rows of a five-column trace: node = one end, device = ``link:OTHER``."""
    out: list[LinkResult] = []
    times: set[float] = set()
    for s in trace.series(METRIC):
        node, dev = trace.place(s.device)
        if node is None or not dev.startswith(LINK_PREFIX):
            continue
        other = dev[len(LINK_PREFIX):]
        for t, v in zip(s.t.tolist(), s.v.tolist(), strict=True):
            out.append(LinkResult(float(t), node, other, float(v)))
            times.add(float(t))
    return LinkTests(tuple(sorted(out, key=lambda r: r.ts)), None, {}, len(times))


@dataclass(frozen=True)
class PairRow:
    a: str
    b: str
    busbw_gbps: float | None  # median over the tests
    tests: int
    vs_median: float | None  # busbw / the cluster's median pair, 1.0 = at the median
    status: str  # ok | slow | slow node | below floor


@dataclass(frozen=True)
class NodeRow:
    node: str
    busbw_gbps: float | None  # upper median of its pairs
    pairs: int
    vs_median: float | None
    status: str  # ok | slow | below floor


@dataclass(frozen=True)
class LinkVerdict:
    """The links criterion's evidence: every pair and node against expected and the median."""

    tests: int
    pairs: tuple[PairRow, ...]
    nodes: tuple[NodeRow, ...]
    median_gbps: float | None
    chip: str | None
    expected_gbps: float | None
    expected_source: str
    floor_gbps: float | None
    max_below_median_frac: float
    findings: tuple[Finding, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "tests": self.tests, "median_gbps": self.median_gbps, "chip": self.chip,
            "expected_gbps": self.expected_gbps, "expected_source": self.expected_source,
            "floor_gbps": self.floor_gbps, "max_below_median_frac": self.max_below_median_frac,
            "pairs": [vars(p) for p in self.pairs], "nodes": [vars(n) for n in self.nodes],
            "version": DETECTOR_VERSION,
        }


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _upper_median(values: Sequence[float]) -> float:
    """The median, the higher middle value for an even count: a node is slow only when more
    than half its pairs are (with two pairs, both)."""
    s = sorted(values)
    return s[len(s) // 2]


def evaluate(tests: LinkTests, profile: Profile | None = None) -> LinkVerdict:
    """Judge every pair and node of ``tests`` by the profile's floor and relative rule."""
    profile = profile or Profile.default()
    p = profile.links
    x = p.max_below_median_frac
    exp = profile.chips.get(tests.chip) if tests.chip else None
    expected = exp.pair_busbw_gbps if exp is not None else None
    floor = expected * p.min_expected_frac if expected is not None else None
    by_pair: dict[tuple[str, str], list[LinkResult]] = defaultdict(list)
    by_test: dict[float, dict[tuple[str, str], float]] = defaultdict(dict)
    for r in tests.results:
        if r.a != r.b:
            by_pair[_key(r.a, r.b)].append(r)
            if r.busbw_gbps is not None and r.busbw_gbps > 0:
                by_test[r.ts][_key(r.a, r.b)] = r.busbw_gbps
    value: dict[tuple[str, str], float] = {}  # GB/s, the pair's median over the tests
    for k, rs in by_pair.items():
        vals = [r.busbw_gbps for r in rs if r.busbw_gbps is not None]
        if vals:
            value[k] = statistics.median(vals)
    # The relative rule compares each pair with the others *of the same test* (a busy fabric
    # or host slows every pair of a test alike): a pair's relative figure is the median over
    # the tests of its busbw over that test's median pair.
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    for pairs in by_test.values():
        mid = statistics.median(pairs.values())
        for k, v in pairs.items():
            ratios[k].append(v / mid)
    rel = {k: statistics.median(r) for k, r in ratios.items()}
    nodes = sorted({n for k in by_pair for n in k})
    median = statistics.median(value.values()) if value else None

    def touching(n: str, of: Mapping[tuple[str, str], float]) -> list[float]:
        return [v for k, v in of.items() if n in k]

    def without(n: str, of: Mapping[tuple[str, str], float]) -> list[float]:
        return [v for k, v in of.items() if n not in k]

    score = {n: _upper_median(touching(n, rel)) for n in nodes if touching(n, rel)}
    slow_nodes: dict[str, float] = {}  # node -> its shortfall against the pairs without it
    for n, sc in score.items():
        if without(n, rel):
            short = 1.0 - sc / statistics.median(without(n, rel))
            if short > x:
                slow_nodes[n] = short
    # a node is named for the floor when most of its pairs (at least two) are below it; with
    # one pair the pair is what is known
    floor_nodes = {n for n in nodes if floor is not None and n not in slow_nodes and len(touching(n, value)) >= 2
                   and _upper_median(touching(n, value)) < floor}
    named = set(slow_nodes) | floor_nodes
    free = {k: v for k, v in rel.items() if not (set(k) & named)}
    slow_pairs: dict[tuple[str, str], float] = {}
    for k, v in free.items():
        others = [w for j, w in free.items() if j != k]
        if len(others) >= 2 and 1.0 - v / statistics.median(others) > x:
            slow_pairs[k] = 1.0 - v / statistics.median(others)
    floor_pairs = {k for k, v in value.items() if floor is not None and v < floor
                   and not (set(k) & named) and k not in slow_pairs}

    def ref_gbps(n: str | None, k: tuple[str, str] | None) -> float | None:
        """The raw median busbw of what a node or pair was compared with."""
        if n is not None:
            vals = without(n, value)
        else:
            vals = [v for j, v in value.items() if j != k and not (set(j) & named)]
        return statistics.median(vals) if vals else None

    findings: list[Finding] = []
    for n in sorted(slow_nodes) + sorted(floor_nodes):
        rs = [r for k, rr in by_pair.items() if n in k for r in rr]
        findings.append(_finding(profile, tests, n, None, _upper_median(touching(n, value)), slow_nodes.get(n),
                                 ref_gbps(n, None), floor, expected, rs, len(touching(n, value))))
    for k in sorted(slow_pairs) + sorted(floor_pairs):
        findings.append(_finding(profile, tests, k[0], k[1], value[k], slow_pairs.get(k), ref_gbps(None, k),
                                 floor, expected, by_pair[k], 1))

    def pair_status(k: tuple[str, str]) -> str:
        if set(k) & named:
            return "slow node"
        if k in slow_pairs:
            return "slow"
        return "below floor" if k in floor_pairs else "ok"

    def node_busbw(n: str) -> float | None:
        vals = touching(n, value)
        return _upper_median(vals) if vals else None

    pair_rows = tuple(
        PairRow(k[0], k[1], value.get(k), len(by_pair[k]),
                None if not median or k not in value else value[k] / median, pair_status(k))
        for k in sorted(by_pair))
    node_rows = tuple(
        NodeRow(n, node_busbw(n), len(touching(n, value)),
                None if not median or node_busbw(n) is None else (node_busbw(n) or 0.0) / median,
                "slow" if n in slow_nodes else "below floor" if n in floor_nodes else "ok")
        for n in nodes)
    return LinkVerdict(len(by_test) or tests.tests, pair_rows, node_rows, median, tests.chip, expected,
                       exp.pair_busbw_source if exp is not None else "", floor, x, tuple(findings))


def _finding(profile: Profile, tests: LinkTests, node: str, other: str | None, v: float, short: float | None,
             ref: float | None, floor: float | None, expected: float | None, rs: Sequence[LinkResult],
             n_pairs: int) -> Finding:
    """``short``: the shortfall against the others of the same tests (relative rule), None
    for the floor; ``ref``: the others' median busbw, GB/s."""
    ts = [r.ts for r in rs]
    n_tests = len({r.ts for r in rs})
    inj = [tests.injected[n] for n in (node, other) if n is not None and n in tests.injected]
    code = "straggler.link_node" if other is None else "straggler.link_pair"
    values: dict[str, Any] = {"node": node, "other": other, "busbw_gbps": v, "pairs": n_pairs, "tests": n_tests,
                              "injected": inj}
    if short is not None:
        values.update({"below_pct": 100 * short, "others_median_gbps": ref})
    else:
        code += "_floor"
        values.update({"floor_gbps": floor, "floor_share_pct": 100 * profile.links.min_expected_frac,
                       "expected_gbps": expected, "chip": tests.chip})
    base = ref if short is not None else expected
    return Finding(
        kind="straggler", device=None if other is None else f"{LINK_PREFIX}{other}", node=node, metric=METRIC,
        start=min(ts), end=max(ts), severity=profile.cap("straggler", "fail"),
        summary=say(code, values), code=code, values=values, onset=min(ts),
        baseline=base, deviation=None if base is None else v - base,
        details={
            "rule": "relative" if short is not None else "floor",
            "deviation_pct": -100.0 * short if short is not None else (
                None if not expected else 100.0 * (v / expected - 1.0)),
            "busbw_gbps": v, "floor_gbps": floor, "expected_gbps": expected, "chip": tests.chip,
            "tests": n_tests, "pairs": n_pairs, "injected": bool(inj),
            "method": "per test, each pair over the test's median pair; median over the tests; "
                      "a node: upper median of its pairs against the pairs without it",
            "version": DETECTOR_VERSION,
        },
    )
