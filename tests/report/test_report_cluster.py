"""The cluster view of the report: a 64-node x 16-chip run's matrix on one page, every page
readable, per-chip detail only for the chips with findings, the full per-chip table attached
as CSV and checked by ``soak verify``; chip and node verdicts; the app's chip detail; the
peer and node sentences in Chinese."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from soak.analysis.messages import said, say
from soak.device_names import device_key
from soak.report.cluster import CHIPS_CSV_NAME, cluster_view
from soak.report.loader import criterion_view
from soak.report.model import ChipSummary, FindingView, Message, ReportData, RunInfo
from soak.report.sentences import criterion_cells, finding_text, reason_text
from soak.store import Store
from tests.report.figures import pdf_text
from tests.report.pagecheck import chip_figures, layout_problems, pdf_pages, raw_values
from tests.report.synth import write_cluster_run

RUN = "c-64x16"
STRAGGLER_CODE = "straggler.node.compute_s"
STRAGGLER_VALUES = {"metric": "compute_s", "scope": "cluster", "duration_h": 5.0, "z": 12.0, "confidence": 0.99,
                    "change_pct": 30.0, "baseline_s": 0.4, "node": "node-40", "members": ["lm-rank40"], "ranks": None}
STRAGGLER = say(STRAGGLER_CODE, STRAGGLER_VALUES)
OUTLIER_CODE = "outlier.temp_c"
OUTLIER_VALUES = {"metric": "temp_c", "scope": "node", "duration_h": 18.0, "z": 8.1, "confidence": 1.0,
                  "deviation_c": 6.1, "baseline_c": 55.2}
OUTLIER = say(OUTLIER_CODE, OUTLIER_VALUES)


def _message(s: Any) -> Message:
    return Message(str(s), s.code, s.values)


def _straggler_reason(start: float) -> Any:
    return said("reason.finding", {"severity_label": "FAIL", "severity": "fail", "kind": "straggler",
                                   "where": "node node-40", "node": "node-40", "device": None, "start": start,
                                   "summary": STRAGGLER, "finding_code": STRAGGLER_CODE,
                                   "finding_values": STRAGGLER_VALUES})


def _with_peer_findings(analysis: dict, start: float, end: float) -> dict:
    """The judged run plus what the peer detector reports on a long run (a 1 h run is too
    short for it): a hot chip on node-12 and a slow node-40, as the analysis writes them."""
    out = dict(analysis)
    out["findings"] = [*analysis["findings"],
                       {"kind": "outlier", "node": "node-12", "device": "npu2-1", "metric": "temp_c", "start": start,
                        "end": end, "severity": "warn", "summary": OUTLIER, "deviation_pct": 11.0,
                        "code": OUTLIER_CODE, "values": OUTLIER_VALUES},
                       {"kind": "straggler", "node": "node-40", "device": None, "metric": "compute_s", "start": start,
                        "end": end, "severity": "fail", "summary": STRAGGLER, "deviation_pct": 30.0,
                        "code": STRAGGLER_CODE, "values": STRAGGLER_VALUES}]
    out["verdict"] = "fail"
    reason = _straggler_reason(start)
    out["reasons"] = [*analysis["reasons"], str(reason)]
    out["reasons_typed"] = [*analysis["reasons_typed"], {"code": reason.code, "values": reason.values}]
    return out


@pytest.fixture(scope="module")
def big(tmp_path_factory, keys) -> dict:
    if shutil.which("pdftotext") is None:
        pytest.skip("poppler-utils not installed")
    from soak.judge import judge_run
    from soak.report.build import build_pdf
    from soak.report.loader import load_report_data

    out = tmp_path_factory.mktemp("cluster")
    with Store.open(out / "soak.db") as store:
        shape = write_cluster_run(store, RUN, nodes=64, chips=16, unread=("node-05/npu3-1",),
                                  half_read=("node-09/npu0-0",), other_driver="node-33")
        analysis = _with_peer_findings(judge_run(store, RUN).to_dict(), shape.start, shape.end)
        data = load_report_data(store, RUN, analysis=analysis)
        built = build_pdf(store, RUN, out / "en.pdf", keys=keys, data=data)
    return {"pdf": built.path, "pages": pdf_pages(built.path), "data": data}


@pytest.mark.slow
def test_64_nodes_x_16_chips_fit_one_page_and_every_page_reads(big):
    pages = big["pages"]
    (matrix,) = [p for p in pages if "Every chip of every node" in p.text]
    words = [w.text for w in matrix.words]
    assert all(f"node-{i:02d}" in words for i in range(64))
    # 1024 chips and 64 node verdicts, each one letter (the legend's letters come on top)
    assert sum(words.count(x) for x in ("P", "F", "W", "–")) >= 1024 + 64
    assert words.count("–") >= 1 and words.count("W") >= 2
    nxt = pages[matrix.number]  # the page after the matrix: the verdict per node
    assert nxt.text.startswith("Verdict per node") and "node-00" not in matrix.text.split("node-63")[-1]
    problems = []
    for page in pages:
        problems += [f"page {page.number}: {p}" for p in layout_problems(page.words, page.width, page.height,
                                                                          images=page.images)]
        problems += [f"page {page.number}: {p}" for p in raw_values(page.text)]
    assert not problems, "\n".join(problems[:30])


@pytest.mark.slow  # the 64 x 16 cluster PDF
def test_cluster_pages_name_the_bad_nodes_chips_straggler_and_versions(big):
    text = " ".join(p.text for p in big["pages"])
    assert "64 nodes, 1024 chips: 1 fail, 1 with warnings, 1021 pass, 1 without data" in text
    assert "node-05 5 finished 15/16 fail 1 of 16 chips never read" in text
    assert "node-40 40 finished 16/16 fail straggler" in text and "node node-40 (lm-rank40)" in text
    assert "node-12/npu2-1" in text and "+11.0 %" in text
    assert "* npu.driver_version 24.1.rc2 (63/64) 24.1.rc9: node-33" in text
    assert "1023 accelerator chips" in text and "understates" in text
    # detail only for the chips with something to say: every other chip is in the CSV
    assert "node-09/npu0-0" in text and "node-00/npu0-0" not in text
    assert f"attached as {CHIPS_CSV_NAME}" in text


@pytest.mark.slow  # the 64 x 16 cluster PDF
def test_the_per_chip_csv_is_attached_and_verify_checks_it(big, keys, tmp_path):
    from pyhanko.pdf_utils.reader import PdfFileReader

    from soak.report.verify import read_attachments, verify_pdf

    res = verify_pdf(big["pdf"], keys.cert_path)
    assert res.ok, res.problems
    assert CHIPS_CSV_NAME in res.attachments
    atts = read_attachments(PdfFileReader(io.BytesIO(Path(big["pdf"]).read_bytes()), strict=False))
    rows = list(csv.DictReader(io.StringIO(atts[CHIPS_CSV_NAME].decode())))
    assert len(rows) == 1024
    by = {(r["node"], r["chip"]): r for r in rows}
    assert by[("node-05", "npu3-1")]["verdict"] == "nodata" and by[("node-05", "npu3-1")]["util_mean_pct"] == ""
    assert by[("node-09", "npu0-0")]["verdict"] == "fail" and float(by[("node-09", "npu0-0")]["coverage_min"]) < 0.6
    assert by[("node-12", "npu2-1")]["finding_kinds"] == "outlier"
    doc = json.loads(atts["soak-findings.json"])
    assert doc["chips_csv_sha256"] == hashlib.sha256(atts[CHIPS_CSV_NAME]).hexdigest()


def _data(chips: list[tuple[str, str]], findings: list[FindingView], ratios: dict | None = None) -> ReportData:
    return ReportData(run=RunInfo("c"), chips=tuple(ChipSummary(device=device_key(n, c), node=n, chip=c) for n, c in chips),
                      findings=tuple(findings), coverage=None if ratios is None else {"ratios": ratios})


class _Node:
    def __init__(self, name: str, rank: int, status: str = "finished", preflight: str | None = "pass",
                 chips: int = 2, manifest: dict | None = None) -> None:
        self.name, self.rank, self.status, self.preflight, self.chips = name, rank, status, preflight, chips
        self.host, self.restarts, self.manifest = name, 0, manifest


def test_node_verdicts_follow_their_chips_ranks_status_and_preflight():
    chips = [("a", "npu0"), ("a", "npu1"), ("b", "npu0"), ("b", "npu1"), ("c", "npu0"), ("d", "npu0"), ("d", "npu1")]
    findings = [FindingView("memory_creep", "npu1", "hbm_used_bytes", 0, 1, "warn", "x", node="a"),
                FindingView("straggler", "lm-rank1", "compute_s", 0, 1, "fail", "y", {"node": "b"}, node="b"),
                FindingView("thermal", "npu0", "temp_c", 0, 1, "info", "explained", node="d")]
    nodes = [_Node("a", 0), _Node("b", 1), _Node("c", 2), _Node("d", 3, preflight="fail"), _Node("e", 4, "lost")]
    view = cluster_view(_data(chips, findings), nodes, lost_ever={"e"})
    verdicts = {n.name: n.verdict for n in view.nodes}
    assert verdicts == {"a": "warn", "b": "fail", "c": "fail", "d": "fail", "e": "fail"}
    grid = view.grid()
    assert grid[("a", "npu1")].verdict == "warn" and grid[("b", "npu0")].verdict == "pass"  # a rank is no chip
    assert grid[("c", "npu1")].verdict == "nodata" and grid[("d", "npu0")].verdict == "pass"  # info is explained
    assert [c.verdict for c in view.cells if c.node == "e"] == ["nodata", "nodata"]
    reasons = {n.name: [r.code for r in n.reasons] for n in view.nodes}
    assert reasons["b"] == ["node.finding"] and reasons["c"] == ["node.unread"] and reasons["d"] == ["node.preflight"]
    assert reasons["e"] == ["node.status", "node.unread"]


def test_peer_and_node_sentences_are_said_in_chinese_with_the_same_numbers():
    from soak.criteria import nodes_criterion

    slow = FindingView("straggler", None, "compute_s", 0, 1, "fail", STRAGGLER, node="node-40",
                       code=STRAGGLER_CODE, values=STRAGGLER_VALUES)
    zh = finding_text(slow, "zh")
    assert zh.startswith("节点 node-40（lm-rank40）：计算时间") and "30.0%" in zh and "0.4 秒" in zh and "0.99" in zh
    assert "slower" not in zh and "peers" not in zh and "集群内" in zh
    hot = FindingView("outlier", "npu2-1", "temp_c", 0, 1, "warn", OUTLIER, node="node-12", code=OUTLIER_CODE,
                      values=OUTLIER_VALUES)
    zh = finding_text(hot, "zh")
    assert "温度偏离同节点同类的 55.2 °C +6.1 °C" in zh and "功耗相当" in zh and "8.1 倍" in zh
    assert finding_text(hot, "en").startswith("temperature +6.1 C off its node peers' 55.2 C for 18.0 h")
    reason = reason_text(_message(_straggler_reason(1789999999.0)), "zh")
    assert reason.startswith("失败：节点 node-40 的掉队节点") and "slower" not in reason
    reasons: list = []
    nodes = [_Node("node-0", 0, "finished"), _Node("node-1", 1, "finished"), _Node("node-2", 2, "finished")]
    crit = nodes_criterion(nodes, 3, False, reasons, lost_ever={"node-1"})
    assert reason_text(_message(reasons[0]), "zh") == "节点：节点 node-1（rank 1）失联（后来恢复）"
    assert str(reasons[0]) == "nodes: node node-1 (rank 1) lost (came back later)"
    cells = criterion_cells(criterion_view(crit), "zh")
    assert cells == ("节点", "全部 3 个节点运行到结束", "已加入 3 / 3，完成 3；node-1 已完成", "未达标")
    assert criterion_cells(criterion_view(crit), "en")[:3] == ("Nodes", "all 3 to the end",
                                                           "3 of 3 joined, 3 finished; node-1 finished")


def test_the_app_shows_the_cluster_and_opens_a_chip(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.report.test_report_app import APP

    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        write_cluster_run(store, "c-small", nodes=3, chips=4, unread=("node-01/npu1-1",), other_driver="node-02")
    monkeypatch.setenv("SOAK_REPORT_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=90).run()
    assert not at.exception, at.exception
    assert any("3 nodes, 12 chips" in m.value for m in at.markdown), [m.value for m in at.markdown]
    assert at.selectbox(key="cluster_chip").value == "node-01/npu1-1"  # the chip with something to say first
    at.selectbox(key="cluster_chip").set_value("node-02/npu0-1").run()
    assert not at.exception, at.exception
    assert any("Chip detail: node-02/npu0-1" in m.value for m in at.markdown)
    nodes = at.dataframe[0].value
    assert list(nodes["Node"]) == ["node-00", "node-01", "node-02"] and list(nodes["Verdict"])[1] == "fail"


def _lost_node_pdf_text(tmp_path, keys) -> str:
    """A finished 3-node run (2 chips each) whose node-00 was lost half way: its chips read the
    first half only; the PDF as ``soak report pdf`` writes it, as text."""
    from soak.cli import main

    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        shape = write_cluster_run(store, "c3", nodes=3, chips=2, hours=0.5,
                                  half_read=("node-00/npu0-0", "node-00/npu0-1"))
        store.update_node("c3", "node-00", status="lost", last_seen=(shape.start + shape.end) / 2)
        store.add_event("c3", "node_lost", ts=(shape.start + shape.end) / 2, node="node-00", message="node-00 lost")
    pdf = tmp_path / "c3.pdf"
    assert main(["report", "pdf", "c3", "--db", f"sqlite:///{db}", "-o", str(pdf), "--key", str(keys.key_path),
                 "--cert", str(keys.cert_path)]) == 0
    return pdf_text(pdf)


def test_a_lost_nodes_pdf_states_one_chip_count_names_the_nodes_and_never_passes_its_chips(tmp_path, keys):
    text = _lost_node_pdf_text(tmp_path, keys)
    assert chip_figures(text) == {"cover": 6, "criterion": 6, "cluster": 6}
    cover = text[:text.index("criteria at a glance")]
    assert "3 nodes: node-00, node-01, node-02" in cover and "Host" not in cover
    matrix = text[text.index("Every chip of every node"):].split("Verdict per node")[0]
    row = next(line.split() for line in matrix.splitlines() if line.strip().startswith("node-00"))
    assert row[1:] == ["F", "F", "F"], row  # the node, then both its chips: half read is a fail
    # the cluster view's few lines and the matrix share a page
    assert "Cluster view" in next(p for p in text.split("\f") if "Every chip of every node" in p)
    # each node's own figures: the lost node's half hour is a quarter hour under test, with its loss
    by_node = text[text.index("Reliability by node"):].split("Stragglers and outliers")[0]
    rows = {line.split()[0]: line.split() for line in by_node.splitlines() if line.strip().startswith("node-")}
    assert rows["node-00"][1:] == ["0.250", "15", "min", "50.0", "%", "node", "lost", "1", "2026-09-21", "14:28"]
    assert rows["node-01"][1:] == ["0.500", "15", "min", "50.0", "%", "0", "—"]
