"""A vendor tool that floods or hangs on the first call: /metrics answers from the start.

The flooding npu-smi prints a real table (fixture 001, see tests/fixtures/npu/INDEX.md) and
then ``exec yes garbage`` for ever. Before the output cap the exporter read all of it into
memory (1.3 GB within 2 s) and never started listening; here it runs under a 1 GiB address
space limit and must keep answering, with each flood counted as an npu-smi reader error.
"""

from __future__ import annotations

import re
import resource
from pathlib import Path

from exporter_helpers import ROOT, free_port, http_get, scrape_when, soak_exporter_argv, wait_for

TABLE = ROOT / "tests" / "fixtures" / "npu" / "001_910B3_8card_procs.txt"
MEMORY_LIMIT_BYTES = 1 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def _tool(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "npu-smi"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _npu_smi_errors(text: str) -> float:
    m = re.search(r'^soak_reader_errors_total\{reader="npu-smi"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def _peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1))  # type: ignore[union-attr]


def test_npu_smi_flooding_after_its_table_is_cut_off_and_counted(tmp_path: Path, spawn) -> None:
    tool = _tool(tmp_path, f"cat '{TABLE}'\nexec yes garbage")
    port = free_port()
    proc = spawn(soak_exporter_argv(port, "--backend", "npu", "--npu-smi", str(tool), "--interval", "0.5",
                                    "--detail-interval", "0"), preexec_fn=_limit_memory)
    url = f"http://127.0.0.1:{port}/metrics"
    # several floods in a row, each killed at the cap and counted; the exporter lives on
    wait_for(lambda: _npu_smi_errors(http_get(url)) >= 3, 60, "three npu-smi floods counted")
    assert proc.poll() is None
    text = http_get(url)
    assert "soak_exporter_snapshot_stale 0.0" in text  # ticks complete: the flood is a marked gap
    assert "soak_device_up{" not in text  # no table was ever read whole: no chip is made up
    print(f"exporter peak RSS with a flooding npu-smi: {_peak_rss_kib(proc.pid) / 1024:.0f} MiB")


def test_metrics_answer_while_the_first_npu_smi_call_hangs(tmp_path: Path, spawn) -> None:
    tool = _tool(tmp_path, "exec sleep 35")  # ends by itself soon after the timeout
    port = free_port()
    spawn(soak_exporter_argv(port, "--backend", "npu", "--npu-smi", str(tool), "--timeout", "30",
                             "--detail-interval", "0"))
    # answered long before the 30 s tool timeout ends the first reading
    text = scrape_when(f"http://127.0.0.1:{port}/metrics", "soak_exporter_snapshot_stale", 20)
    assert "soak_exporter_snapshot_stale 1.0" in text
    assert "soak_device_up{" not in text and "soak_reader_errors_total" not in text
