"""The cluster view of a run over many nodes: what the report shows next to the verdict.

One node x chip matrix coloured by each chip's verdict, a verdict with reasons per node, the
stragglers and outliers named, the version check across nodes and the full per-chip table
(attached to the PDF as CSV). Built from a ``ReportData`` and the store's node rows by
``cluster_view``; the PDF (``soak.report.pdf``) and the app render it, the words come from
``soak.report.cluster_text``.

**A chip's verdict** (``chip_verdict``, the one definition): ``nodata`` when the chip was
never read; ``fail`` when a finding on it fails or its readings cover less of the soak than
the profile's ``evidence.min_coverage`` (the judge fails the run for either); ``warn`` when
a finding on it warns; else ``pass``. Findings about a rank or a whole node (stragglers)
count for the node, not for a chip: a rank is not tied to one chip here.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soak.analysis.evidence import is_host
from soak.analysis.model import PEER_KINDS
from soak.report.model import ChipSummary, FindingView, ReportData
from soak.report.verify import CHIPS_NAME

VERDICTS = ("fail", "warn", "pass", "nodata")
CHIPS_CSV_NAME = CHIPS_NAME  # the attachment's name, where ``soak verify`` checks it
DEFAULT_MIN_COVERAGE = 0.95  # soak.analysis.profile.EvidenceParams.min_coverage
_RANK = {"fail": 3, "nodata": 2, "warn": 1, "pass": 0}


@dataclass(frozen=True)
class ChipCell:
    """One chip of one node: its verdict and why, and the figures of the per-chip table."""

    node: str
    chip: str  # the device's name on its node (npu0-1)
    device: str | None  # the report's device key (node/npu0-1); None: the chip was never read
    verdict: str  # fail | warn | pass | nodata
    coverage: float | None = None  # the lowest covered share over its metrics (0-1)
    findings: tuple[tuple[str, str], ...] = ()  # (kind, severity) of each finding on it
    summary: ChipSummary | None = None

    @property
    def low_coverage(self) -> bool:
        return self.verdict == "fail" and not any(s == "fail" for _, s in self.findings)


@dataclass(frozen=True)
class NodeReason:
    """Why a node has its verdict: ``code`` with its values (``cluster_text.reason_text``)."""

    severity: str  # fail | warn | nodata
    code: str  # status | preflight | finding | chips | unread
    values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class NodeView:
    name: str
    rank: int | None
    host: str | None
    status: str | None  # joined, running, finished, failed, lost, stopped (None: no node row)
    preflight: str | None
    restarts: int | None
    chips_expected: int | None
    verdict: str  # fail | warn | pass | nodata
    reasons: tuple[NodeReason, ...] = ()
    lost_ever: bool = False


@dataclass(frozen=True)
class VersionRow:
    """One version field across the nodes: each node's value (None: not in its manifest)."""

    key: str
    values: tuple[str | None, ...]  # in the order of ``ClusterView.nodes``

    @property
    def differs(self) -> bool:
        return len(set(self.values)) > 1

    def common(self) -> tuple[str | None, int]:
        """The value most nodes have, and how many have it."""
        counts: dict[str | None, int] = {}
        for v in self.values:
            counts[v] = counts.get(v, 0) + 1
        best = max(counts.items(), key=lambda kv: (kv[1], kv[0] is not None, str(kv[0])))
        return best


@dataclass(frozen=True)
class ClusterView:
    nodes: tuple[NodeView, ...]
    columns: tuple[str, ...]  # chip names, the matrix's columns
    cells: tuple[ChipCell, ...]  # every (node, chip) the run had or expected
    peers: tuple[FindingView, ...]  # stragglers and outliers, most severe first
    versions: tuple[VersionRow, ...]
    min_coverage: float

    def grid(self) -> dict[tuple[str, str], ChipCell]:
        """{(node, chip): cell}; a pair the node never had is absent."""
        return {(c.node, c.chip): c for c in self.cells}

    def counts(self, cells: Iterable[ChipCell] | None = None) -> dict[str, int]:
        out = dict.fromkeys(VERDICTS, 0)
        for c in self.cells if cells is None else cells:
            out[c.verdict] += 1
        return out

    def flagged(self) -> tuple[ChipCell, ...]:
        """The chips with something to say (a finding, low coverage, no data), worst first."""
        bad = [c for c in self.cells if c.verdict != "pass" or c.findings]
        return tuple(sorted(bad, key=lambda c: (-_RANK[c.verdict], c.node, _natural(c.chip))))


def chip_verdict(severities: Iterable[str], coverage: float | None, min_coverage: float, read: bool) -> str:
    """A chip's verdict (see the module's docstring): the one definition the PDF and app use."""
    if not read:
        return "nodata"
    sev = set(severities)
    if "fail" in sev or (coverage is not None and coverage < min_coverage):
        return "fail"
    return "warn" if "warn" in sev else "pass"


def split_device(device: str) -> tuple[str | None, str]:
    """(node, chip) of a cluster run's device key ``node/chip``; (None, key) otherwise."""
    node, sep, chip = device.partition("/")
    return (node, chip) if sep else (None, device)


def finding_place(f: FindingView) -> tuple[str | None, str | None]:
    """(node, device on that node) a finding is about: its ``node`` evidence when the analysis
    placed it, else the node of a ``node/chip`` key."""
    node = f.evidence.get("node") if isinstance(f.evidence, Mapping) else None
    if f.device is None:
        return (str(node) if node else None), None
    if node:
        return str(node), f.device
    return split_device(f.device)


def cluster_view(
    data: ReportData,
    nodes: Sequence[Any],
    *,
    min_coverage: float | None = None,
    lost_ever: Iterable[str] = (),
) -> ClusterView:
    """The cluster view of ``data`` with the store's node rows (``Store.cluster_nodes``)."""
    minimum = DEFAULT_MIN_COVERAGE if min_coverage is None else float(min_coverage)
    lost = set(lost_ever)
    ratios = (data.coverage or {}).get("ratios") or {}
    chip_keys = {c.device for c in data.chips}
    by_chip: dict[tuple[str, str], list[FindingView]] = {}
    by_node: dict[str, list[FindingView]] = {}
    for f in data.findings:
        if f.severity == "info":
            continue
        node, dev = finding_place(f)
        if node is None:
            continue
        if dev is not None and f"{node}/{dev}" in chip_keys:
            by_chip.setdefault((node, dev), []).append(f)
        else:
            by_node.setdefault(node, []).append(f)

    read: dict[str, dict[str, ChipSummary]] = {}
    for c in data.chips:
        if is_host(c.device):  # the node's host row is no chip
            continue
        node, chip = split_device(c.device)
        if node is not None:
            read.setdefault(node, {})[chip] = c
    rows = {n.name: n for n in nodes}
    names = sorted(set(rows) | set(read), key=lambda n: (getattr(rows.get(n), "rank", None) is None,
                                                          getattr(rows.get(n), "rank", 0) or 0, _natural(n)))
    columns = sorted({chip for chips in read.values() for chip in chips}, key=_natural)
    cells: list[ChipCell] = []
    views: list[NodeView] = []
    for name in names:
        rec = rows.get(name)
        mine = read.get(name, {})
        expected = getattr(rec, "chips", None)
        node_cells = []
        for chip in columns:
            s = mine.get(chip)
            if s is None:
                continue
            cov = ratios.get(s.device)
            low = min(cov.values()) if isinstance(cov, Mapping) and cov else None
            fs = by_chip.get((name, chip), [])
            node_cells.append(ChipCell(name, chip, s.device, chip_verdict((f.severity for f in fs), low, minimum, True),
                                       low, tuple((f.kind, f.severity) for f in fs), s))
        missing = max(0, (expected or 0) - len(node_cells))
        # chips the node declared but never read: in the columns it lacks, then beyond them
        free = [c for c in columns if c not in mine] + [f"#{i}" for i in range(len(columns), len(columns) + missing)]
        for chip in free[:missing]:
            node_cells.append(ChipCell(name, chip, None, "nodata"))
        cells += node_cells
        views.append(_node_view(name, rec, node_cells, by_node.get(name, []), name in lost))
    extra = sorted({c.chip for c in cells} - set(columns), key=_natural)
    return ClusterView(
        nodes=tuple(views),
        columns=tuple(columns) + tuple(extra),
        cells=tuple(cells),
        peers=tuple(f for f in data.findings if f.kind in PEER_KINDS),
        versions=tuple(version_rows(names, {n: getattr(rows.get(n), "manifest", None) for n in names})),
        min_coverage=minimum,
    )


def _node_view(name: str, rec: Any, cells: list[ChipCell], findings: list[FindingView], lost: bool) -> NodeView:
    reasons: list[NodeReason] = []
    status = getattr(rec, "status", None)
    if status in ("lost", "failed") or lost:
        back = lost and status not in ("lost", "failed")
        reasons.append(NodeReason("fail", "status", ("lost" if lost else status, back)))
    pre = getattr(rec, "preflight", None)
    if pre in ("fail", "error"):
        reasons.append(NodeReason("fail", "preflight", (pre,)))
    for f in findings:
        _, dev = finding_place(f)
        reasons.append(NodeReason(f.severity, "finding", (f.kind, dev, f.metric, f.summary)))
    counts = dict.fromkeys(VERDICTS, 0)
    for c in cells:
        counts[c.verdict] += 1
    if counts["nodata"]:
        reasons.append(NodeReason("fail", "unread", (counts["nodata"], len(cells))))
    if counts["fail"] or counts["warn"]:
        worst = "fail" if counts["fail"] else "warn"
        bad = [c for c in cells if c.verdict in ("fail", "warn")]
        reasons.append(NodeReason(worst, "chips", (counts["fail"], counts["warn"], tuple(c.chip for c in bad[:6]),
                                                   len(bad))))
    if not cells and not reasons:
        verdict = "nodata"
    else:
        verdict = max((r.severity for r in reasons), key=lambda s: _RANK.get(s, 0), default="pass")
        verdict = "fail" if verdict == "nodata" else verdict
    return NodeView(name=name, rank=getattr(rec, "rank", None), host=getattr(rec, "host", None), status=status,
                    preflight=pre, restarts=getattr(rec, "restarts", None), chips_expected=getattr(rec, "chips", None),
                    verdict=verdict, reasons=tuple(reasons), lost_ever=lost)


def version_rows(names: Sequence[str], manifests: Mapping[str, Mapping[str, Any] | None]) -> list[VersionRow]:
    """Every locked version field (``soak.cluster.node.locked_versions``) across the nodes."""
    from soak.cluster.node import locked_versions

    table = locked_versions(manifests)
    return [VersionRow(key, tuple(per.get(n) for n in names)) for key, per in table.items()]


def chips_csv(view: ClusterView) -> bytes:
    """The full per-chip table: node, chip, verdict, coverage, key figures, findings."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n")
    w.writerow(["node", "chip", "verdict", "coverage_min", "util_mean_pct", "util_min_pct", "temp_max_c",
                "power_mean_w", "power_max_w", "hbm_peak_bytes", "hbm_total_bytes", "findings", "fail_findings",
                "warn_findings", "finding_kinds", "model", "serial"])

    def v(x: Any) -> str:
        return "" if x is None else (repr(float(x)) if isinstance(x, float) else str(x))

    for c in view.cells:
        s = c.summary or ChipSummary(device=c.device or "")
        w.writerow([c.node, c.chip, c.verdict, v(c.coverage), v(s.util_mean_pct), v(s.util_min_pct), v(s.temp_max_c),
                    v(s.power_mean_w), v(s.power_max_w), v(s.hbm_peak_bytes), v(s.hbm_total_bytes), len(c.findings),
                    sum(1 for _, sev in c.findings if sev == "fail"), sum(1 for _, sev in c.findings if sev == "warn"),
                    " ".join(sorted({k for k, _ in c.findings})), v(s.model), v(s.serial)])
    return out.getvalue().encode("utf-8")


def _natural(name: str) -> tuple[Any, ...]:
    """npu2-0 before npu10-0: digits compare as numbers."""
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
