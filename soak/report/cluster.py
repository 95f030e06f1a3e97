"""The cluster view of a run over many nodes: what the report shows next to the verdict.

One node x chip matrix coloured by each chip's verdict, a verdict with reasons per node, the
stragglers and outliers named, the version check across nodes and the full per-chip table
(attached to the PDF as CSV). Built from a ``ReportData`` and the store's node rows by
``cluster_view``; the PDF (``soak.report.pdf``) and the app render it, the words come from
``soak.report.cluster_text``.

Every chip's and node's verdict is decided by ``soak.analysis.chip_verdicts`` from the
judge's coverage and findings; this module only lays them out with the chips' figures.
Findings about a rank or a whole node (stragglers) count for the node, not for a chip: a rank
is not tied to one chip here.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soak.analysis.chip_verdicts import (
    VERDICT_RANK,
    VERDICTS,
    NodeReason,
    PlacedFinding,
    cluster_chips,
    min_coverage_of,
    natural,
)
from soak.analysis.model import PEER_KINDS
from soak.report.model import ChipSummary, FindingView, ReportData
from soak.report.verify import CHIPS_NAME

CHIPS_CSV_NAME = CHIPS_NAME  # the attachment's name, where ``soak verify`` checks it


@dataclass(frozen=True)
class ChipCell:
    """One chip of one node: its verdict and why, and the figures of the per-chip table."""

    node: str
    chip: str  # the device's name on its node (npu0-1)
    device: str | None  # the report's device key (node/npu0-1); None: the chip was never read
    verdict: str  # fail | warn | pass | nodata (soak.analysis.chip_verdicts decides)
    coverage: float | None = None  # the lowest covered share over its metrics (0-1)
    findings: tuple[tuple[str, str], ...] = ()  # (kind, severity) of each finding on it
    summary: ChipSummary | None = None
    code: str = "ok"  # why: soak.analysis.chip_verdicts.ChipVerdict.code

    @property
    def low_coverage(self) -> bool:
        return self.code == "coverage"

    @property
    def device_fault(self) -> bool:
        """The chip's own fault report raised a finding (the matrix marks it)."""
        return any(kind == "device_fault" for kind, _ in self.findings)


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
        return tuple(sorted(bad, key=lambda c: (-VERDICT_RANK[c.verdict], c.node, natural(c.chip))))


def cluster_view(
    data: ReportData,
    nodes: Sequence[Any],
    *,
    min_coverage: float | None = None,
    lost_ever: Iterable[str] = (),
    nodes_planned: int | None = None,
) -> ClusterView:
    """The cluster view of ``data`` with the store's node rows (``Store.cluster_nodes``): the
    verdicts ``soak.analysis.chip_verdicts`` decides from the judge's coverage, laid out."""
    minimum = min_coverage_of(None) if min_coverage is None else float(min_coverage)
    placed = [PlacedFinding(f.kind, f.severity, f.node, f.device, f.metric, f.summary, f.code, f.values)
              for f in data.findings]
    read = [(c.node, c.chip) for c in data.chips if c.node is not None and c.chip is not None]
    decided = cluster_chips(nodes, read, placed, coverage=data.coverage,
                            min_coverage=minimum, nodes_planned=nodes_planned, lost_ever=lost_ever)
    summaries = {c.device: c for c in data.chips}
    cells = tuple(ChipCell(c.node, c.chip, c.device, c.verdict, c.coverage, c.findings,
                           summaries.get(c.device) if c.device else None, c.code) for c in decided.chips)
    rows = {n.name: n for n in nodes}
    views = tuple(NodeView(name=v.name, rank=getattr(rows.get(v.name), "rank", None),
                           host=getattr(rows.get(v.name), "host", None), status=getattr(rows.get(v.name), "status", None),
                           preflight=getattr(rows.get(v.name), "preflight", None),
                           restarts=getattr(rows.get(v.name), "restarts", None),
                           chips_expected=getattr(rows.get(v.name), "chips", None),
                           verdict=v.verdict, reasons=v.reasons, lost_ever=v.lost_ever) for v in decided.nodes)
    names = [v.name for v in views]
    read = [c.chip for c in cells if c.device is not None]
    columns = sorted(set(read), key=natural)
    extra = sorted({c.chip for c in cells} - set(columns), key=natural)
    return ClusterView(
        nodes=views,
        columns=tuple(columns) + tuple(extra),
        cells=cells,
        peers=tuple(f for f in data.findings if f.kind in PEER_KINDS),
        versions=tuple(version_rows(names, {n: getattr(rows.get(n), "manifest", None) for n in names})),
        min_coverage=minimum,
    )


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
