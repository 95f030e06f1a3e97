"""The served app in a real browser: ``soak report serve`` + headless Chromium (DOM and PNG)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from soak.cli import main
from tests.report.serve_helpers import start_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(url: str, profile: str, *extra: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    # --headless=new waits for the app's websocket updates within the virtual-time budget;
    # the old headless mode dumps the page before Streamlit has drawn anything.
    cmd = [
        CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--window-size=1400,1000", "--virtual-time-budget=15000", *extra, url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)


def test_serve_defaults_to_loopback_and_headless(capsys):
    assert main(["report", "serve", "--dry-run", "--data-dir", "somewhere"]) == 0
    cmd = capsys.readouterr().out
    assert "streamlit run" in cmd and cmd.rstrip().split(" -- ")[0].endswith("--client.toolbarMode viewer")
    assert "--server.address 127.0.0.1" in cmd and "--server.headless true" in cmd
    assert "--browser.gatherUsageStats false" in cmd
    assert main(["report", "serve", "--port", "0", "--dry-run"]) == 2


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_served_app_shows_the_verdict_in_chromium(recorded, tmp_path):
    server, port, log = start_server(recorded["data_dir"], tmp_path / "serve.log")
    try:
        url = f"http://127.0.0.1:{port}/"
        # The first page view runs the script cold (imports, first queries) in real time while
        # the browser's clock is virtual: on a loaded machine give it a few looks (bounded).
        for attempt in range(12):
            dom = chromium(url, str(tmp_path / f"p1-{attempt}"), "--dump-dom").stdout
            text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))
            if "Verdict" in text:
                break
            time.sleep(2.0)  # real time for the server's cold first run (virtual time does not wait)
        assert "Verdict: FAIL" in text, text[-2000:]
        assert "memory_creep on npu1-1" in text
        png = tmp_path / "app.png"
        for attempt in range(4):  # a page still loading shows no verdict yet
            chromium(url, str(tmp_path / f"p2-{attempt}"), f"--screenshot={png}")
            seen = _what_the_screenshot_shows(png)
            if seen["verdict_red_px"] >= 300:
                break
        # any PNG over 20 kB passed before, an error page too: look at what it shows. The
        # verdict "FAIL" is written in the theme's red (:red[...]), and the page has text and
        # tables on it, not a blank or a one-colour error box.
        assert seen["verdict_red_px"] >= 300, seen
        assert seen["ink_fraction"] > 0.02 and seen["colours"] > 50, seen
        if os.environ.get("SOAK_SAVE_SCREENSHOT"):
            shutil.copy(png, os.environ["SOAK_SAVE_SCREENSHOT"])
    finally:
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
