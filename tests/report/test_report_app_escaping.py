"""Every data string the app shows reaches its Markdown through one helper, ``shown`` (was: a
chip's fault text and a node name were rendered as Markdown: a link, and an external image
fetched from wherever it named)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from soak.report.shown import shown

APP = str(Path(__file__).resolve().parents[2] / "soak" / "report" / "app.py")
HOSTILE = "[click](http://evil.example/x) www.evil.example a@evil.example ![img](http://evil.example/p.png) <b>x</b> :red[y] $z$ **w**\n# h"
# a Markdown construct starts at a character no backslash escapes
_LIVE = re.compile(r"(?<!\\)[\[\]<>$*#_`|~&@]|(?<!\\)://|www\.")


def test_shown_escapes_every_markdown_construct() -> None:
    out = shown(HOSTILE)
    assert "\n" not in out and not _LIVE.search(out)
    # the text reads as it was once the escapes are taken away
    assert re.sub(r"\\(.)", r"\1", out) == HOSTILE.replace("\n", " ")


def _faults_page() -> None:
    from types import SimpleNamespace

    from soak.report.app import section_device_faults
    from soak.report.model import DeviceFaultView

    hostile = "[click](http://evil.example/x) ![img](http://evil.example/p.png)"
    view = DeviceFaultView(device="npu0", signal="fault_code", severity="fail", first_ts=1.79e9, last_ts=1.79e9,
                           node="node-a01", code="80E01801", text=hostile, level="SeparateNPU", times=1)
    data = SimpleNamespace(device_faults=[view], cluster=SimpleNamespace(), criteria=[],
                           run=SimpleNamespace(timezone="UTC", utc_offset_s=0))
    section_device_faults(data, "en")


def test_a_fault_text_reaches_the_page_escaped() -> None:
    at = AppTest.from_function(_faults_page, default_timeout=60).run()
    assert not at.exception, at.exception
    table = at.table[0].value
    cells = [str(v) for v in table.reset_index().to_numpy().ravel()]
    meaning = next(c for c in cells if "evil" in c)
    assert not _LIVE.search(meaning), meaning  # no link, no image: the text as the chip gave it


@pytest.mark.parametrize("token, admitted", [(None, False), ("guessed", False), ("t0ken", True)])
def test_a_session_without_the_servers_token_sees_no_run(recorded, monkeypatch, token, admitted) -> None:
    from soak.report.signing import SIGN_TOKEN_ENV

    monkeypatch.setenv("SOAK_REPORT_DB", "")
    monkeypatch.setenv("SOAK_REPORT_DATA_DIR", str(recorded["data_dir"]))
    monkeypatch.setenv(SIGN_TOKEN_ENV, "t0ken")  # as `soak report serve` on loopback starts the app
    at = AppTest.from_file(APP, default_timeout=60)
    if token is not None:
        at.query_params["token"] = token
    at.run()
    assert not at.exception, at.exception
    shown_text = re.sub(r"\\(.)", r"\1", " ".join(str(e.value) for e in [*at.markdown, *at.caption, *at.error,
                                                                          *at.warning]))
    assert (recorded["run_id"] in shown_text) is admitted
    assert bool(at.error and "soak report serve" in at.error[0].value) is not admitted
    if not admitted:  # no page, no PDF button: nothing of the run's data
        assert [r.key for r in at.sidebar.radio] == ["lang"] and not at.get("button")
