"""The busbw tables of a run of several nodes, in the PDF (en and zh) and the app's words."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from soak.analysis import links as lk
from soak.analysis.synth import link_rows
from soak.analysis.trace import Trace
from soak.report.links import link_node_rows, link_pair_rows, links_intro, links_shown
from soak.report.model import ReportData, RunInfo
from soak.report.pdf import render_pdf
from tests.report.figures import pdf_text


def _links() -> dict:
    pairs = [("n0", "n1", 14.0), ("n0", "n2", 20.0), ("n1", "n2", 14.2)]
    ev = [SimpleNamespace(kind="link_test", ts=float(i), detail={
        "pairs": [{"a": a, "b": b, "busbw_gbps": v} for a, b, v in pairs],
        "backend": "npu", "device_name": "Ascend910B3", "injected": {}}) for i in range(3)]
    return lk.evaluate(lk.from_events(ev)).to_dict()


def test_pair_and_node_rows_against_the_median_and_the_chip_models_figure():
    links = _links()
    assert link_pair_rows(links) == [
        # shares as every figure writes them: one decimal, rounded down (98.5 %, not 99%)
        ("n0 – n1", "14.0", "3", "98.5 %", "70.0 %", "slow node"),
        ("n0 – n2", "20.0", "3", "140.8 %", "100.0 %", "ok"),
        ("n1 – n2", "14.2", "3", "100.0 %", "71.0 %", "slow node")]
    assert [r[0] for r in link_node_rows(links) if r[-1] == "slow"] == ["n1"]
    assert [r[-1] for r in link_node_rows(links, "zh")] == ["正常", "偏慢", "正常"]
    intro = links_intro(links)
    assert "910B expected 20.0 GB/s (source: Atlas 800T A2" in intro and "floor 15.0 GB/s" in intro
    assert "more than 20.0 % below" in intro and "绝对下限：910B 预期 20.0 GB/s" in links_intro(links, "zh")


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")
@pytest.mark.parametrize("lang, title", [("en", "Links between nodes"), ("zh", "节点间链路")])
def test_the_pdf_shows_the_busbw_tables(tmp_path, lang, title):
    data = ReportData(run=RunInfo("c1", status="finished", backend="npu", started_at=0.0, ended_at=3600.0),
                      links=_links(), verdict="fail")
    pdf, _, _ = render_pdf(data, lang=lang)
    path = tmp_path / "r.pdf"
    path.write_bytes(pdf)
    text = pdf_text(path)
    assert title in text and "n0 – n2" in text and "140.8 %" in text
    assert ("slow node" if lang == "en" else "所属节点偏慢") in text


def test_sixteen_nodes_show_every_pair_not_ok_and_say_how_many_ok_ones_are_left_out():
    rows = link_rows(16, 3, slow_pairs={(2, 9): 0.4}, seed=1)
    links = lk.evaluate(lk.from_trace(Trace.from_rows(rows))).to_dict()
    shown, omitted = links_shown(links, 40)
    assert len(links["pairs"]) == 120 and len(shown["pairs"]) == 40 and omitted == 80
    assert [(p["a"], p["b"]) for p in shown["pairs"] if p["status"] != "ok"] == [("n02", "n09")]
    assert links_shown(links, 200) == (links, 0)
