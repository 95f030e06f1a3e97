"""The served app in a real browser: ``soak report serve`` + headless Chromium (DOM and PNG)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from soak.cli import main
from tests.report.serve_helpers import session_url, start_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_serve_defaults_to_loopback_and_headless(capsys):
    assert main(["report", "serve", "--dry-run", "--data-dir", "somewhere"]) == 0
    cmd = capsys.readouterr().out
    streamlit_part = cmd.rstrip().split(" -- ")[0]
    assert "streamlit run" in cmd and "--client.toolbarMode viewer" in streamlit_part
    assert "--server.allowedHosts 127.0.0.1" in streamlit_part  # not the app's own arguments
    assert "--server.address 127.0.0.1" in cmd and "--server.headless true" in cmd
    assert "--browser.gatherUsageStats false" in cmd
    assert main(["report", "serve", "--port", "0", "--dry-run"]) == 2


PAGES = {  # sidebar label -> text that shows the page has drawn
    "en": [("Overview", "Per-chip summary"), ("Timelines", "Utilization"), ("Findings", "Evidence"),
           ("Event timeline", "Restarts"), ("Environment manifest", "Run plan"), ("Download signed PDF", "Reports already")],
    "zh": [("概览", "逐芯片汇总"), ("时间线", "利用率"), ("发现的问题", "证据"), ("事件时间线", "重启次数"),
           ("环境清单", "运行计划"), ("下载已签名 PDF", "运行目录中已有的报告")],
}


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_every_app_page_reads_in_a_browser(recorded, tmp_path):
    """Each page, in English and Chinese, in a real browser: drawn (waited for, however busy the
    machine), no text outside the page or over other text, no raw JSON; PNGs of every page go
    to $SOAK_SAVE_SCREENSHOTS when set."""
    from tests.report.browser import Browser
    from tests.report.pagecheck import layout_problems, raw_values

    server, port, log = start_server(recorded["data_dir"], tmp_path / "serve.log")
    browser = None
    save = os.environ.get("SOAK_SAVE_SCREENSHOTS")
    try:
        browser = Browser(tmp_path / "profile")
        browser.goto(session_url(tmp_path / "serve.log", port))
        browser.wait_text(r"Verdict: FAIL")
        browser.wait_quiet()
        png = tmp_path / "app.png"
        browser.screenshot(png)
        # The verdict "FAIL" is written in the theme's red (:red[...]), and the page has text
        # and tables on it, not a blank or a one-colour error box.
        seen = _what_the_screenshot_shows(png)
        assert seen["verdict_red_px"] >= 300, seen
        assert seen["ink_fraction"] > 0.02 and seen["colours"] > 50, seen
        if os.environ.get("SOAK_SAVE_SCREENSHOT"):
            shutil.copy(png, os.environ["SOAK_SAVE_SCREENSHOT"])
        problems = []
        for lang in ("en", "zh"):
            if lang == "zh":
                browser.click_label("中文")
                browser.wait_text("soak：验收报告")
            for label, drawn in PAGES[lang]:
                browser.click_label(label)
                browser.wait_text(drawn)
                browser.wait_quiet()
                boxes, width, text = browser.text_boxes()
                problems += [f"{lang} {label}: {p}" for p in layout_problems(boxes, width, min_words=5) + raw_values(text)]
                png = tmp_path / f"app-{lang}-{len(problems)}-{label}.png"
                browser.screenshot(png)
                assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
                if save:
                    shutil.copy(png, Path(save) / f"app-{lang}-{PAGES[lang].index((label, drawn))}.png")
        assert not problems, "\n".join(problems[:20])
    finally:
        if browser is not None:
            browser.close()
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=5)
        log.close()


def _what_the_screenshot_shows(png) -> dict:
    """Counts of what a screenshot holds: pixels of the theme's red (the verdict "FAIL",
    about rgb(158, 48, 59)) right of the sidebar, the fraction of pixels that are not page
    background, and the number of distinct colours."""
    import numpy as np
    from PIL import Image

    if not png.exists():
        return {"verdict_red_px": 0, "ink_fraction": 0.0, "colours": 0}
    px = np.asarray(Image.open(png).convert("RGB")).astype(int)
    main = px[:, px.shape[1] // 4:]  # the sidebar's selected radio buttons are red too
    r, g, b = main[..., 0], main[..., 1], main[..., 2]
    red = int(np.count_nonzero((r > 120) & (r - g > 70) & (r - b > 60)))
    flat = px.reshape(-1, 3)
    colours, counts = np.unique(flat, axis=0, return_counts=True)
    background = colours[counts.argmax()]
    ink = float(np.mean(np.abs(flat - background).sum(axis=1) > 60))
    return {"verdict_red_px": red, "ink_fraction": round(ink, 4), "colours": len(colours)}
