"""A run on the simulated fleet or on an accelerated time line says so on the PDF's cover and in
every page's footer (it used to read like an acceptance of hardware), and its times are labelled:
run times on the run's time line, the generation time on the wall clock."""

from __future__ import annotations

import re
import shutil
import time
from datetime import UTC, datetime

import pytest

from soak.report.build import build_pdf
from soak.store import Store
from tests.report.figures import pdf_text
from tests.report.synth import write_run

# slow: renders and reads whole PDFs
pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")]

EN_LABEL = "simulated fleet, accelerated time ×600 — not an acceptance of hardware"
ZH_LABEL = "模拟设备集群，时间加速 ×600 — 不构成硬件验收"


def _pages(path) -> list[str]:
    text = pdf_text(path)
    return [p for p in text.split("\f") if p.strip()]


def _pdf(tmp_path, *, backend: str, time_scale: float, lang: str = "en", start: float = 1_790_000_000.0):
    db = tmp_path / f"{backend}-{time_scale:g}.db"
    with Store.open(db) as store:
        write_run(store, "r-1", chips=2, hours=4.0, interval_s=60.0, start=start)
        store.update_run("r-1", backend=backend, time_scale=time_scale)
        return build_pdf(store, "r-1", tmp_path / f"{backend}-{lang}.pdf", lang=lang, keys=None).path


def test_accelerated_sim_run_is_labelled_on_the_cover_and_every_page(tmp_path):
    # 4 h of run time started a minute ago on a ×600 time line: the run "ends" hours from now.
    pages = _pages(_pdf(tmp_path, backend="sim", time_scale=600, start=time.time() - 60))
    assert len(pages) >= 4
    cover = pages[0]
    assert cover.index(EN_LABEL) < cover.index("Verdict:")  # under the title, before the verdict
    assert all(EN_LABEL in p for p in pages), [i for i, p in enumerate(pages) if EN_LABEL not in p]
    assert "Run window (run time line ×600)" in cover
    assert "4 h 00 min on the run time line; 24 s wall clock" in cover
    assert "each wall-clock second was recorded as 600 s" in " ".join(cover.split())
    # "Generated" is the wall clock, now, and says so; it reads earlier than the run's end.
    stamp = re.search(r"Generated \(wall clock\): (\S+ \S+) · Times in UTC", cover).group(1)
    generated = datetime.strptime(stamp, "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp()
    assert abs(generated - time.time()) < 180


def test_chinese_pdf_of_an_accelerated_sim_run_says_so_on_every_page(tmp_path):
    pages = _pages(_pdf(tmp_path, backend="sim", time_scale=600, lang="zh"))
    assert all(ZH_LABEL in p for p in pages)
    assert "运行时段（运行时间线 ×600）" in pages[0] and "生成时间（实际时间）" in pages[0]


def test_sim_fleet_in_real_time_is_labelled_without_a_time_line(tmp_path):
    pages = _pages(_pdf(tmp_path, backend="sim", time_scale=1.0))
    assert all("simulated fleet — not an acceptance of hardware" in p for p in pages)
    assert "time line" not in "".join(pages) and "Generated:" in pages[0]


def test_accelerated_run_on_hardware_is_labelled_too(tmp_path):
    pages = _pages(_pdf(tmp_path, backend="npu", time_scale=60))
    assert all("accelerated time ×60 — not an acceptance of hardware" in p for p in pages)
    assert "simulated fleet" not in "".join(pages)


def test_run_on_hardware_in_real_time_has_no_simulation_label(tmp_path):
    text = "".join(_pages(_pdf(tmp_path, backend="npu", time_scale=1.0)))
    assert "not an acceptance" not in text and "simulated" not in text and "time line" not in text
    assert "Run window " in text and "Generated:" in text
