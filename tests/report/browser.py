"""Headless Chromium driven over the DevTools protocol: open a page, wait until its text shows
what a person waits for (not a fixed time: a busy machine only makes the wait longer), click,
read text boxes, take a screenshot. Uses ``websockets`` (a dependency of Streamlit)."""

from __future__ import annotations

import base64
import json
import re
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests import procs
from tests.report.pagecheck import Box

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Every visible piece of text in the app's main area with its box (one per line of a text node).
_TEXT_BOXES = """
(() => {
  const root = document.querySelector('[data-testid="stMain"]') || document.body;
  const out = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const text = node.textContent.trim();
    const el = node.parentElement;
    if (!text || !el || !el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    if (el.closest('[data-testid="stToolbar"], [data-testid="stDecoration"], .vega-embed summary')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) {
      if (r.width > 0.5 && r.height > 0.5) out.push([text, r.left + scrollX, r.top + scrollY, r.right + scrollX, r.bottom + scrollY]);
    }
  }
  return {boxes: out, width: document.documentElement.clientWidth, text: root.innerText};
})()
"""


_CONTENT_HEIGHT = """
Math.max(...[...document.querySelectorAll('[data-testid="stMain"], [data-testid="stMainBlockContainer"], body')]
         .map(e => e.scrollHeight))
"""


class Browser:
    def __init__(self, profile: Path, width: int = 1400, height: int = 1000) -> None:
        from websockets.sync.client import connect

        profile.mkdir(parents=True, exist_ok=True)
        (profile / "DevToolsActivePort").unlink(missing_ok=True)  # a previous browser's port
        self.proc = procs.start(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", "--remote-debugging-port=0", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", "about:blank"],
            profile.parent, "chromium",
        )
        self.ws = None
        try:
            self._connect(profile / "DevToolsActivePort", connect)
        except BaseException:
            self.close()
            raise
        self._id = 0
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _connect(self, port_file: Path, connect: Any) -> None:
        procs.wait_until(lambda: port_file.exists() and port_file.read_text().strip(), self.proc, 60,
                         what="chromium's DevTools port")
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(t for t in json.loads(r.read()) if t["type"] == "page")
        self._conn = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self.ws = self._conn.__enter__()  # closed in close()

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=120))
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return res.get("result", {}).get("value")

    def goto(self, url: str) -> float:
        """Navigate; returns the monotonic time of the request."""
        t0 = time.monotonic()
        self.call("Page.navigate", url=url)
        return t0

    def text(self) -> str:
        return self.eval("document.body ? document.body.innerText : ''") or ""

    def wait_text(self, pattern: str, timeout_s: float = 120.0, gone: str | None = None) -> float:
        """Wait until the page's text matches ``pattern`` (and no longer ``gone``); returns when."""
        rx, rg = re.compile(pattern), re.compile(gone) if gone else None
        text = ""

        def shown() -> float:
            nonlocal text
            text = self.text()
            return time.monotonic() if rx.search(text) and not (rg and rg.search(text)) else 0.0

        return procs.wait_until(shown, self.proc, timeout_s, what=f"{pattern!r} on the page",
                                context=lambda: f"page text: {text[-1500:]!r}")

    def wait_quiet(self, timeout_s: float = 60.0) -> None:
        """Wait until Streamlit's "running" indicator is gone and the page text stops changing."""
        deadline = time.monotonic() + timeout_s
        last, same = None, 0
        while time.monotonic() < deadline:
            running = self.eval("!!document.querySelector('[data-testid=\"stStatusWidget\"]')")
            now = self.text()
            same = same + 1 if (now == last and not running) else 0
            if same >= 5:
                return
            last = now
            time.sleep(0.2)

    def click_label(self, label: str, timeout_s: float = 60.0) -> None:
        """Click the sidebar radio option whose text is ``label`` once it is drawn: a page drawn
        again in another language names its options a moment after its title (on a busy
        machine, seconds)."""
        click = ("(() => { for (const l of document.querySelectorAll('[data-testid=\"stSidebar\"] label')) {"
                 f" if (l.innerText.trim() === {json.dumps(label)}) {{ l.click(); return true; }} }} return false; }})()")
        options = ("Array.from(document.querySelectorAll('[data-testid=\"stSidebar\"] label'))"
                   ".map(l => l.innerText.trim()).join(' | ')")
        procs.wait_until(lambda: bool(self.eval(click)), self.proc, timeout_s, what=f"sidebar option {label!r}",
                         context=lambda: f"sidebar options: {self.eval(options)!r}")

    def text_boxes(self) -> tuple[list[Box], float, str]:
        res = self.eval(_TEXT_BOXES)
        return [Box(*b) for b in res["boxes"]], float(res["width"]), res["text"]

    def screenshot(self, path: Path, width: int = 1400) -> None:
        """The whole page: the viewport is made as tall as the app's scrolled content first."""
        height = self.eval(_CONTENT_HEIGHT)
        height = max(600, min(int(height or 1000), 6000))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.wait_quiet(20)
        shot = self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=1000, deviceScaleFactor=1, mobile=False)

    def close(self) -> None:
        if self.ws is not None:
            try:
                self._conn.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - closing a browser that may be gone already
                pass
        self.proc.stop(grace_s=10)
        self.proc.close()  # what is left of its group (renderers, zygote)
