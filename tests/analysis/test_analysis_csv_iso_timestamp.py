"""A trace CSV with ISO dates instead of unix seconds: the one-line error says what is expected."""

from __future__ import annotations

import subprocess
import sys


def test_iso_timestamp_names_unix_seconds(tmp_path):
    p = tmp_path / "iso.csv"
    p.write_text("timestamp,device,metric,value\n2026-11-29T10:00:00Z,npu0-0,util_pct,95\n")
    r = subprocess.run([sys.executable, "-m", "soak", "analyze", str(p)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"soak: error: {p}: line 2: timestamp '2026-11-29T10:00:00Z' is not a number "
        "(unix seconds, e.g. 1795941789.5)"
    ]
