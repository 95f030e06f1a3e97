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
        for attempt in range(4):  # a blank page (still loading) is a PNG of a few KB
            chromium(url, str(tmp_path / f"p2-{attempt}"), f"--screenshot={png}")
            data = png.read_bytes() if png.exists() else b""
            if len(data) > 20_000:
                break
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
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
