"""The chips' own fault reports in the report: the "Device faults" table (PDF in both languages,
the app), the per-chip table's health, ECC and link columns, and a clean run's one line.

The events are written as the daemon writes them: ``FaultChange.detail()`` of changes shaped
as those of a recorded simulated run (``soak run --backend sim --sim-chips 4 --sim-scenario
"ecc_errors:...,health_alarm:...,codes=A4025021+80E3A201,...,link_down:..."``): health Alarm
with no serial read yet, uncorrectable ECC and isolated pages from nothing, correctable errors,
two fault codes set and cleared together, and a port down and up again.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from streamlit.testing.v1 import AppTest

from soak.analysis.device_faults import FaultChange
from soak.report.build import build_pdf
from soak.report.loader import load_report_data
from soak.store import Store
from tests.report.figures import pdf_text
from tests.report.synth import write_run
from tests.report.test_report_app import APP

T0 = 1_790_000_000.0
SOURCE = "built-in: Ascend/mind-cluster faultCode.json @22bb3d98"
poppler = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")


def _changes(t0: float) -> list[FaultChange]:
    # the cards' serials as the run's manifest has them (tests.report.synth: one per card)
    s1, s2, s0 = "032100000000", "032100000001", "032100000000"
    out = [
        FaultChange(t0 + 600, "npu1-0", "health", "fail", level="Alarm"),
        FaultChange(t0 + 900, "npu0-1", "ecc_uncorrectable", "fail", serial=s1, value=3.0),
        FaultChange(t0 + 900, "npu0-1", "ecc_isolated_double", "fail", serial=s1, value=3.0),
        FaultChange(t0 + 900, "npu0-1", "ecc_correctable", "info", serial=s1, value=24.0),
        FaultChange(t0 + 1200, "npu1-0", "fault_code", "fail", serial=s2, code="80E3A201", text="error code 80E3A201",
                    level="SeparateNPU", action="isolate the chip", source=SOURCE, interrupts=True),
        FaultChange(t0 + 1200, "npu1-0", "fault_code", "info", serial=s2, code="A4025021",
                    text="ascend_monitor adda heart beat lost error", level="NotHandleFault",
                    action="none: the device plugin does not handle it", source=SOURCE),
        FaultChange(t0 + 1300, "npu0-0", "link_down", "warn", serial=s0, value=0.0, previous=1.0),
        FaultChange(t0 + 1500, "npu0-1", "ecc_uncorrectable", "fail", serial=s1, value=15.0, previous=3.0),
        FaultChange(t0 + 1500, "npu0-1", "ecc_correctable", "info", serial=s1, value=103.0, previous=24.0),
        FaultChange(t0 + 1900, "npu0-0", "link_up", "info", serial=s0, value=1.0, previous=0.0, cleared=True),
        FaultChange(t0 + 2100, "npu1-0", "health", "info", serial=s2, level="OK", cleared=True),
        FaultChange(t0 + 2400, "npu1-0", "fault_code", "info", serial=s2, code="80E3A201", level="SeparateNPU",
                    source=SOURCE, cleared=True),
        FaultChange(t0 + 2400, "npu1-0", "fault_code", "info", serial=s2, code="A4025021", level="NotHandleFault",
                    source=SOURCE, cleared=True),
    ]
    return out


def _faulty(store: Store, run_id: str = "df-1", start: float = T0, changes=None) -> None:
    write_run(store, run_id, chips=4, hours=1.0, interval_s=30.0, start=start, creep=False, crash=False,
              findings=False)
    for c in _changes(start) if changes is None else changes:
        store.add_event(run_id, "device_fault", ts=c.ts, message=c.message(), detail=c.detail())


def test_device_faults_rows_are_one_per_chip_signal_and_code_fail_first(tmp_path):
    with Store.open(tmp_path / "soak.db") as store:
        _faulty(store)
        data = load_report_data(store, "df-1", with_series=False)
    rows = [(v.device, v.signal, v.code, v.severity, v.times, v.value, v.previous, v.cleared)
            for v in data.device_faults]
    assert rows == [
        ("npu1-0", "health", None, "fail", 1, None, None, True),
        ("npu0-1", "ecc_uncorrectable", None, "fail", 2, 15.0, None, False),
        ("npu0-1", "ecc_isolated_double", None, "fail", 1, 3.0, None, False),
        ("npu1-0", "fault_code", "80E3A201", "fail", 1, None, None, True),
        # the port's down and up are one row, as severe as the judge's finding: down 600 s, past
        # the 60 s bound, fails (the change itself was a warning)
        ("npu0-0", "link", None, "fail", 1, 1.0, 1.0, True),
        # the judge warns on 103 correctable errors in an hour against peers with none
        ("npu0-1", "ecc_correctable", None, "warn", 2, 103.0, None, False),
        ("npu1-0", "fault_code", "A4025021", "info", 1, None, None, True),
    ]
    health = data.device_faults[0]
    assert (health.level, health.serial) == ("Alarm", "032100000001")  # the serial a later change read
    chips = {c.device: (c.health, c.ecc_uncorrectable, c.ecc_correctable, c.link_downs) for c in data.chips}
    # samples read OK, no ECC and the port up; the watch's changes say more
    assert chips == {"npu0-0": ("OK", 0.0, 0.0, 1), "npu0-1": ("OK", 15.0, 103.0, 0),
                     "npu1-0": ("Alarm", 0.0, 0.0, 0), "npu1-1": ("OK", 0.0, 0.0, 0)}


def test_a_chip_never_read_shows_na_in_its_fault_columns(tmp_path):
    with Store.open(tmp_path / "soak.db") as store:
        write_run(store, "old", chips=2, hours=0.2, interval_s=60.0, creep=False, crash=False, findings=False)
        # a chip whose tool gave no health word, no ECC counts and no port state
        store.add_sample_rows([{"run_id": "old", "ts": T0 + 5 + i * 60, "device": "npu7-0", "up": True,
                                "util_pct": 90.0} for i in range(10)])
        data = load_report_data(store, "old", with_series=False)
    from soak.report.device_faults import chip_columns

    by = {c.device: chip_columns(c) for c in data.chips}
    assert by["npu7-0"] == ("N/A", "N/A", "N/A")
    assert by["npu0-0"] == ("OK", "0 / 0", "up")


def cells(path, heading: str, before: str | None = None, *, past: str | None = None) -> list[str]:
    """The text of a PDF's cells from the heading ``heading`` (the first after the heading
    ``past``) up to the heading ``before``, in reading order, each without its white space (a
    cell wraps where its column is narrow); the first is what follows the heading in its
    paragraph (an intro, a table's first heading, the one line of a clean run)."""
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
    out = ["".join(p.split()) for p in text.split("\n\n") if p.strip()]
    i = next(k for k, c in enumerate(out) if c.startswith(past)) if past else 0
    i = next(k for k in range(i, len(out)) if out[k].startswith(heading))
    j = next(k for k in range(i + 1, len(out)) if out[k].startswith(before)) if before else len(out)
    return [out[i][len(heading):], *out[i + 1:j]]


def _rows(found: list[str], first: str, width: int, n: int) -> list[list[str]]:
    i = found.index(first)
    return [found[i + k * width:i + (k + 1) * width] for k in range(n)]


@poppler
@pytest.mark.slow
def test_pdf_holds_the_device_faults_table_in_english_and_chinese(tmp_path):
    with Store.open(tmp_path / "soak.db") as store:
        _faulty(store)
        en = build_pdf(store, "df-1", tmp_path / "en.pdf", lang="en").path
        zh = build_pdf(store, "df-1", tmp_path / "zh.pdf", lang="zh").path
    table = cells(en, "Devicefaults", past="Per-chipsummary")
    assert table[1:10] == ["Firstseen", "Chip", "Serial", "Signal", "Code", "Meaning", "Level", "Action",
                           "Howoften,lastvalue"]
    # fail first (the health alarm, then ECC, the code, the port down past its bound), then the
    # warning on correctable errors, the info code last; times in the run's zone (UTC here)
    assert _rows(table, "2026-09-2114:23:20", 9, 7) == [
        ["2026-09-2114:23:20", "npu1-0", "032100000001", "health", "N/A", "thechip'shealthword", "Alarm", "N/A",
         "1×,clearedsince"],
        ["2026-09-2114:28:20", "npu0-1", "032100000000", "uncorrectableECC", "N/A", "double-bit(uncorrected)memoryerrors",
         "fail", "N/A", "2×,0→15"],
        ["2026-09-2114:28:20", "npu0-1", "032100000000", "double-bitisolatedpages", "N/A",
         "memorypagesisolatedfordouble-biterrors", "fail", "N/A", "1×,0→3"],
        ["2026-09-2114:33:20", "npu1-0", "032100000001", "faultcode", "80E3A201", "errorcode80E3A201",
         "SeparateNPU(fail)", "isolatethechip", "1×,clearedsince"],
        ["2026-09-2114:35:00", "npu0-0", "032100000000", "networkport", "N/A", "thechip'snetworkportwentdown", "fail",
         "N/A", "down1×,upagain"],
        ["2026-09-2114:28:20", "npu0-1", "032100000000", "correctableECC", "N/A", "single-bitmemoryerrors,corrected",
         "warning", "N/A", "2×,0→103"],
        ["2026-09-2114:33:20", "npu1-0", "032100000001", "faultcode", "A4025021", "ascend_monitoraddaheartbeatlosterror",
         "NotHandleFault(info)", "none:thedeviceplugindoesnothandleit", "1×,clearedsince"],
    ]
    # the per-chip table's new columns: each chip's worst health word, ECC rises and port
    chips = cells(en, "Per-chipsummary", "Devicefaults")
    assert chips[:12] == ["Device", "Model", "Serial", "Utilmean%", "Utilmin%", "Tempmax°C", "PowermeanW", "HBMpeak",
                          "Findings", "Health", "ECCuncorr./corr.", "Link"]
    # a table split over two pages: the footer between, and its header again on the second
    head, body = chips[:12], list(chips[12:])
    if any(c.startswith("simulatedfleet") for c in body):  # the footer, and its page number
        k = next(k for k, c in enumerate(body) if c.startswith("simulatedfleet"))
        body[k:k + 1 + (k + 1 < len(body) and body[k + 1].isdigit())] = []
    while any(body[k:k + 12] == head for k in range(len(body))):
        k = next(k for k in range(len(body)) if body[k:k + 12] == head)
        body[k:k + 12] = []
    chips = head + body
    fault_cells = {chips[k]: chips[k + 9:k + 12] for k in range(12, len(chips), 12)}
    assert fault_cells == {"npu0-0": ["OK", "0/0", "down1×"], "npu0-1": ["OK", "15/103", "up"],
                           "npu1-0": ["Alarm", "0/0", "up"], "npu1-1": ["OK", "0/0", "up"]}
    zt = cells(zh, "芯片故障", past="逐芯片汇总")
    assert zt[1:10] == ["首次出现", "芯片", "序列号", "信号", "故障码", "含义", "级别", "处理", "次数与最后读数"]
    rows = _rows(zt, "2026-09-2114:23:20", 9, 7)
    assert rows[0] == ["2026-09-2114:23:20", "npu1-0", "032100000001", "健康状态", "N/A", "芯片报告的健康状态", "Alarm", "N/A",
                       "1次，已清除"]
    assert rows[1][3:] == ["不可纠正ECC", "N/A", "双比特（不可纠正）内存错误", "失败", "N/A", "2次，0→15"]
    assert rows[3][3:] == ["故障码", "80E3A201", "errorcode80E3A201", "SeparateNPU（失败）", "isolatethechip", "1次，已清除"]
    assert rows[4][3:] == ["网口", "N/A", "芯片网口断开", "失败", "N/A", "断开1次，已恢复"]
    zchips = cells(zh, "逐芯片汇总", "芯片故障")
    assert zchips[9:12] == ["健康状态", "ECC不可纠正/可纠正", "网口"]
    assert {zchips[k]: zchips[k + 9:k + 12] for k in range(12, len(zchips), 12)}["npu0-0"] == ["OK", "0/0", "断开1次"]


@poppler
@pytest.mark.slow
def test_a_clean_run_says_in_one_line_how_many_chips_fault_reports_were_read(tmp_path):
    with Store.open(tmp_path / "soak.db") as store:
        write_run(store, "clean", chips=2, hours=0.5, interval_s=30.0, creep=False, crash=False, findings=False)
        en = build_pdf(store, "clean", tmp_path / "en.pdf", lang="en").path
        zh = build_pdf(store, "clean", tmp_path / "zh.pdf", lang="zh").path
    found = cells(en, "Devicefaults", "Per-chiptimelines", past="Per-chipsummary")
    assert found[0] == "Nochipreportedafault:thefaultreportsof2of2chipswereread(120readings)."
    assert "Firstseen" not in found  # no empty table
    assert cells(zh, "芯片故障", past="逐芯片汇总")[0] == "没有芯片报告故障：已读取2个芯片中2个的故障报告（120次读数）。"


def test_app_overview_shows_the_device_faults_table_and_the_chip_columns(tmp_path, monkeypatch):
    run_dir = tmp_path / "df-1"
    run_dir.mkdir()
    with Store.open(run_dir / "soak.db") as store:
        _faulty(store)
    monkeypatch.setenv("SOAK_REPORT_DB", "")
    monkeypatch.setenv("SOAK_REPORT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SOAK_REPORT_LANG", "zh")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    faults = at.table[-1].value
    assert faults.index.name == "首次出现"
    assert list(faults["信号"]) == ["健康状态", "不可纠正 ECC", "双比特隔离页", "故障码", "网口", "可纠正 ECC", "故障码"]
    assert list(faults["故障码"])[3] == "80E3A201" and list(faults["次数与最后读数"])[4] == "断开 1 次，已恢复"
    chips = next(tb.value for tb in at.table if "序列号" in tb.value.columns)
    assert chips.index.name == "设备"
    assert chips.loc["npu0-1", "ECC 不可纠正 / 可纠正"] == "15 / 103"
    assert chips.loc["npu1-0", "健康状态"] == "Alarm" and chips.loc["npu0-0", "网口"] == "断开 1 次"


@poppler
@pytest.mark.slow
def test_a_cluster_pdf_marks_the_faulty_chip_in_its_matrix_and_names_its_node(tmp_path):
    from tests.report.synth import write_cluster_run

    with Store.open(tmp_path / "soak.db") as store:
        shape = write_cluster_run(store, "c3", nodes=3, chips=2, hours=0.5)
        c = FaultChange(shape.start + 600, "npu0-1", "ecc_uncorrectable", "fail", serial="node-01-00", value=2.0)
        store.add_event("c3", "device_fault", ts=c.ts, message=c.message(), detail=c.detail(), node="node-01")
        pdf = build_pdf(store, "c3", tmp_path / "c3.pdf", lang="en").path
    text = pdf_text(pdf)
    matrix = text[text.index("Every chip of every node"):].split("Verdict per node")[0]
    rows = {line.split()[0]: line.split()[1:] for line in matrix.splitlines() if line.strip().startswith("node-")}
    assert rows == {"node-00": ["P", "P", "P"], "node-01": ["F", "P", "F!"], "node-02": ["P", "P", "P"]}
    assert "! the chip reported a device fault" in " ".join(matrix.split())
    # the flagged chip's row in the cluster's chip table, and the Device faults table with its node
    flagged = cells(pdf, "Chipswithfindings", "Thefullper-chiptable")
    assert flagged[7:10] == ["Health", "ECCuncorr./corr.", "Link"]
    row = flagged[flagged.index("node-01"):flagged.index("node-01") + 11]
    # these agents' samples hold no ECC counts or port state: the watch's rise, N/A for the rest
    assert row[:4] + row[7:10] == ["node-01", "npu0-1", "fail", "100.0%", "OK", "2/N/A", "N/A"]
    faults = cells(pdf, "Devicefaults", past="Per-chipsummary")
    assert faults[1:11] == ["Firstseen", "Node", "Chip", "Serial", "Signal", "Code", "Meaning", "Level", "Action",
                            "Howoften,lastvalue"]
    assert faults[11:21] == ["2026-09-2114:23:20", "node-01", "npu0-1", "node-01-00", "uncorrectableECC", "N/A",
                             "double-bit(uncorrected)memoryerrors", "fail", "N/A", "1×,0→2"]


def test_the_cluster_app_frames_the_faulty_chip_and_shows_its_fault_columns(tmp_path, monkeypatch):
    import json

    import pyarrow as pa

    from tests.report.synth import write_cluster_run

    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        shape = write_cluster_run(store, "c3", nodes=3, chips=2, hours=0.5)
        c = FaultChange(shape.start + 600, "npu0-1", "ecc_uncorrectable", "fail", serial="node-01-00", value=2.0)
        store.add_event("c3", "device_fault", ts=c.ts, message=c.message(), detail=c.detail(), node="node-01")
    monkeypatch.setenv("SOAK_REPORT_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=90).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="cluster_chip").value == "node-01/npu0-1"  # the faulty chip first
    assert any("framed in black reported a device fault" in c.value for c in at.caption)
    (matrix,) = [c.proto for c in at.get("vega_lite_chart") if '"fault' in c.proto.spec]
    stroke = json.loads(matrix.spec)["encoding"]["stroke"]
    assert stroke["condition"] == {"test": "(datum.fault === '!')", "value": "black"}, stroke
    cells = pa.ipc.open_stream(matrix.datasets[0].data.data).read_pandas()
    assert [tuple(r) for r in cells[cells["fault"] == "!"][["node", "chip"]].values] == [("node-01", "npu0-1")]
    detail = at.table[0].value
    assert list(detail.columns[-4:]) == ["Health", "ECC uncorr. / corr.", "Link", "Findings"]
    assert list(detail.iloc[0][-4:-1]) == ["OK", "2 / N/A", "N/A"]
    faults = at.table[-1].value
    assert list(faults["Node"]) == ["node-01"] and list(faults["Chip"]) == ["npu0-1"]


def test_the_app_says_in_one_line_that_no_chip_reported_a_fault(tmp_path, monkeypatch):
    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        write_run(store, "clean", chips=2, hours=0.5, interval_s=30.0, creep=False, crash=False, findings=False)
    monkeypatch.setenv("SOAK_REPORT_DB", str(db))
    monkeypatch.setenv("SOAK_REPORT_LANG", "zh")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    heads = [h.value for h in at.subheader]
    assert heads[heads.index("芯片故障") - 1] == "逐芯片汇总"
    assert "没有芯片报告故障：已读取 2 个芯片中 2 个的故障报告（120 次读数）。" in [m.value for m in at.markdown]
    assert "首次出现" not in [t.value.index.name for t in at.table]  # no empty table
