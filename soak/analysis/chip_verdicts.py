"""Each chip's and each node's verdict of a cluster run: decided here once, from the judge's
coverage and findings, and rendered by the PDF, the app and the chips CSV.

**A chip's verdict** (``chip_verdict``): ``nodata`` when the judgement has no reading of it
(never read, or read only where the judge's evidence does not count it); ``fail`` when a
finding on it fails or its readings cover less of the soak than the profile's
``evidence.min_coverage`` (the judge fails the run for either); ``warn`` when a finding on it
warns; else ``pass``. A chip expected but not read is therefore never a pass.

**A node's verdict** (``node_verdict``): the worst of its reasons, each a ``NodeReason`` with
a ``code`` of ``soak.analysis.messages`` and its ``values``: lost or failed (``node.status``),
a failed self-check (``node.preflight``), a finding about the node or one of its ranks
(``node.finding``), chips without data (``node.unread``: a fail), chips that fail or warn
(``node.chips``). A node with no chip and no reason has no data.

**The chip count** of a run is the judge's coverage: ``chips_expected`` chips, of which
``chips_seen`` were read (``chip_count``); ``cluster_chips`` lays out exactly that many cells.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from soak.analysis.evidence import is_host
from soak.device_names import device_key

VERDICTS = ("fail", "warn", "pass", "nodata")
VERDICT_RANK = {"fail": 3, "nodata": 2, "warn": 1, "pass": 0}  # worst first when sorted descending


@dataclass(frozen=True)
class PlacedFinding:
    """What a verdict needs of a finding: its kind and severity, the node it is about and the
    device on that node (None: about the node, or a rank that is not tied to one chip)."""

    kind: str
    severity: str
    node: str | None
    device: str | None
    metric: str | None = None
    summary: str = ""
    code: str = ""  # the finding's code and values (soak.analysis.messages)
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChipVerdict:
    """One chip of one node. ``code`` says why: ``finding_fail``, ``coverage`` (read less
    than the minimum), ``unread``, ``finding_warn`` or ``ok``."""

    node: str
    chip: str  # the device's name on its node (npu0-1), or ``#k`` for a chip never seen at all
    device: str | None  # the key of its readings (device_key: node/npu0-1); None when none is known
    verdict: str  # fail | warn | pass | nodata
    code: str
    coverage: float | None = None  # the lowest covered share over its metrics (0-1)
    findings: tuple[tuple[str, str], ...] = ()  # (kind, severity) of each finding on it


@dataclass(frozen=True)
class NodeReason:
    """Why a node has its verdict: ``code`` (``node.*`` of ``soak.analysis.messages``) with its
    values, rendered by the report."""

    severity: str  # fail | warn | nodata
    code: str  # node.status | node.preflight | node.finding | node.chips | node.unread
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeVerdict:
    name: str
    verdict: str  # fail | warn | pass | nodata
    reasons: tuple[NodeReason, ...] = ()
    lost_ever: bool = False


@dataclass(frozen=True)
class ClusterChips:
    """Every chip the run expected, node by node, and every node's verdict."""

    chips: tuple[ChipVerdict, ...]
    nodes: tuple[NodeVerdict, ...]
    min_coverage: float


def min_coverage_of(thresholds: Mapping[str, Any] | None) -> float:
    """The profile's ``evidence.min_coverage`` from an analysis' thresholds; the default
    profile's when they do not say."""
    evidence = (thresholds or {}).get("evidence") if isinstance(thresholds, Mapping) else None
    value = evidence.get("min_coverage") if isinstance(evidence, Mapping) else None
    if value is None:
        from soak.analysis.profile import EvidenceParams

        return float(EvidenceParams().min_coverage)
    return float(value)


def chip_count(coverage: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """(chips expected, chips read) as the judge counted them; None without a judgement."""
    if not isinstance(coverage, Mapping) or coverage.get("chips_expected") is None:
        return None
    return int(coverage["chips_expected"]), int(coverage.get("chips_seen") or 0)


def chip_verdict(severities: Iterable[str], coverage: float | None, min_coverage: float, read: bool) -> str:
    """A chip's verdict (see the module's docstring)."""
    return _chip(severities, coverage, min_coverage, read)[0]


def _chip(severities: Iterable[str], coverage: float | None, min_coverage: float, read: bool) -> tuple[str, str]:
    if not read:
        return "nodata", "unread"
    sev = set(severities)
    if "fail" in sev:
        return "fail", "finding_fail"
    if coverage is not None and coverage < min_coverage:
        return "fail", "coverage"
    return ("warn", "finding_warn") if "warn" in sev else ("pass", "ok")


def node_verdict(name: str, *, status: str | None, preflight: str | None, lost: bool,
                 findings: Sequence[PlacedFinding], chips: Sequence[ChipVerdict]) -> NodeVerdict:
    """A node's verdict and reasons (see the module's docstring); ``findings`` are those about
    the node or its ranks, not about one of its chips."""
    reasons: list[NodeReason] = []
    if status in ("lost", "failed") or lost:
        back = lost and status not in ("lost", "failed")
        reasons.append(NodeReason("fail", "node.status", {"status": "lost" if lost else status, "came_back": back}))
    if preflight in ("fail", "error"):
        reasons.append(NodeReason("fail", "node.preflight", {"status": preflight}))
    for f in findings:
        reasons.append(NodeReason(f.severity, "node.finding", {
            "kind": f.kind, "severity": f.severity, "device": f.device, "metric": f.metric, "summary": f.summary,
            "finding_code": f.code or None, "finding_values": dict(f.values)}))
    counts = dict.fromkeys(VERDICTS, 0)
    for c in chips:
        counts[c.verdict] += 1
    if counts["nodata"]:
        reasons.append(NodeReason("fail", "node.unread", {"unread": counts["nodata"], "chips": len(chips)}))
    if counts["fail"] or counts["warn"]:
        bad = [c for c in chips if c.verdict in ("fail", "warn")]
        reasons.append(NodeReason("fail" if counts["fail"] else "warn", "node.chips", {
            "fail": counts["fail"], "warn": counts["warn"], "names": [c.chip for c in bad[:6]],
            "more": len(bad) - 6 if len(bad) > 6 else None}))
    if not chips and not reasons:
        verdict = "nodata"
    else:
        worst = max((r.severity for r in reasons), key=lambda s: VERDICT_RANK.get(s, 0), default="pass")
        verdict = "fail" if worst == "nodata" else worst
    return NodeVerdict(name, verdict, tuple(reasons), lost)


def cluster_chips(nodes: Sequence[Any], read: Iterable[tuple[str, str]], findings: Iterable[PlacedFinding], *,
                  coverage: Mapping[str, Any] | None, min_coverage: float, nodes_planned: int | None = None,
                  lost_ever: Iterable[str] = ()) -> ClusterChips:
    """Every chip's and node's verdict of a cluster run.

    ``nodes`` are the store's node rows (``name``, ``chips``, ``status``, ``preflight``);
    ``read`` the ``(node, chip)`` of every chip with readings in the store; ``coverage`` the
    judge's (``Coverage.to_dict()``, its ratios keyed as the analysis names a chip,
    ``device_key``): a chip it holds no ratio for is not read (``nodata``), and each node gets
    at least its share of ``chips_expected``, so the cells number what the judge expected.
    Without a judgement (a run in progress) a chip with readings is judged on its findings
    alone.
    """
    judged = isinstance(coverage, Mapping) and coverage.get("ratios") is not None
    ratios: Mapping[str, Any] = ((coverage or {}).get("ratios") or {}) if judged else {}
    rows = {n.name: n for n in nodes}
    by_node_chip: dict[str, dict[str, str]] = {}
    for node, chip in read:
        if not is_host(chip):
            by_node_chip.setdefault(node, {})[chip] = device_key(node, chip)
    names = sorted(set(rows) | set(by_node_chip), key=lambda n: (getattr(rows.get(n), "rank", None) is None,
                                                                getattr(rows.get(n), "rank", 0) or 0, natural(n)))
    columns = sorted({c for chips in by_node_chip.values() for c in chips}, key=natural)
    on_chip: dict[tuple[str, str], list[PlacedFinding]] = {}
    on_node: dict[str, list[PlacedFinding]] = {}
    for f in findings:
        if f.severity == "info" or f.node is None:
            continue
        if f.device is not None and f.device in by_node_chip.get(f.node, {}):
            on_chip.setdefault((f.node, f.device), []).append(f)
        else:
            on_node.setdefault(f.node, []).append(f)
    expected_total = (chip_count(coverage) or (0, 0))[0]
    share = expected_total // max(1, nodes_planned or len(names)) if expected_total else 0
    lost = set(lost_ever)
    chips: list[ChipVerdict] = []
    verdicts: list[NodeVerdict] = []
    for name in names:
        rec = rows.get(name)
        mine = by_node_chip.get(name, {})
        cells = []
        for chip in columns:
            key = mine.get(chip)
            if key is None:
                continue
            cov = ratios.get(key)
            low = min(cov.values()) if isinstance(cov, Mapping) and cov else None
            fs = on_chip.get((name, chip), [])
            verdict, code = _chip((f.severity for f in fs), low, min_coverage, key in ratios or not judged)
            cells.append(ChipVerdict(name, chip, key, verdict, code, low, tuple((f.kind, f.severity) for f in fs)))
        missing = max(0, int(getattr(rec, "chips", None) or 0), share if rec is not None else 0)
        missing = max(0, missing - len(cells))
        # chips the node declared but never read: in the columns it lacks, then beyond them
        free = [c for c in columns if c not in mine] + [f"#{i}" for i in range(len(columns), len(columns) + missing)]
        cells += [ChipVerdict(name, chip, None, "nodata", "unread") for chip in free[:missing]]
        chips += cells
        verdicts.append(node_verdict(name, status=getattr(rec, "status", None), preflight=getattr(rec, "preflight", None),
                                     lost=name in lost, findings=on_node.get(name, []), chips=cells))
    return ClusterChips(tuple(chips), tuple(verdicts), min_coverage)


def natural(name: str) -> tuple[Any, ...]:
    """npu2-0 before npu10-0: digits compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
