"""``soak analyze TRACE.csv`` on thousands of damaged traces: each is analysed or refused
with one ``soak: error:`` line and exit 2, never a traceback."""

from __future__ import annotations

import random
import time

import pytest

from tests.fuzz.fuzz_helpers import fuzz_cases, fuzz_seed, mutate_bytes, run_cli

HEADER = "timestamp,device,metric,value\n"
CELLS = {
    "timestamp": ["", "nan", "inf", "-inf", "1e309", "-1", "0", "1.5", "9" * 40, "2026-09-21T10:00:00Z",
                  "2026-13-45T99:99:99", "x", "1e18", "-9223372036854775809"],
    "device": ["", "npu0", "npu0,npu1", '"npu,0"', "中文", "x" * 300, "NA", "\t", '"'],
    "metric": ["", "hbm_used_bytes", "temp_c", "power_w", "aicore_util_pct", "unknown_metric", "NA", "x" * 300],
    "value": ["", "nan", "NaN", "inf", "-inf", "1e309", "-1e309", "1e-320", "-0", "99999999999999999999999",
              "abc", "1,2", "0x10", "N/A", "true"],
}


def _trace(rng: random.Random) -> str:
    rows = []
    t0 = 1_758_400_000.0
    for i in range(rng.randint(2, 40)):
        for dev in ("npu0", "npu1"):
            for metric, base in (("temp_c", 60.0), ("hbm_used_bytes", 3e10), ("aicore_util_pct", 90.0),
                                 ("power_w", 300.0)):
                rows.append(f"{t0 + 10 * i:.1f},{dev},{metric},{base + rng.uniform(-1, 1):.3f}")
    return HEADER + "\n".join(rows) + "\n"


def _structured(rng: random.Random) -> str:
    lines = _trace(rng).splitlines()
    for _ in range(rng.randint(1, 6)):
        lines = lines or [""]
        i = rng.randrange(len(lines))
        what = rng.random()
        if what < 0.7 and i > 0:
            cells = (lines[i].split(",") + ["", "", "", ""])[:4]
            col = rng.randrange(4)
            cells[col] = rng.choice(CELLS[("timestamp", "device", "metric", "value")[col]])
            lines[i] = ",".join(cells)
        elif what < 0.8:
            lines[i] = rng.choice(["", ",,,", "a,b", "1,2,3,4,5", "\ufefftimestamp,device,metric,value",
                                   "timestamp,device,metric", "value,metric,device,timestamp"])
        elif what < 0.9:
            lines = lines[:1] if rng.random() < 0.5 else lines[1:]  # header only / no header
        else:
            lines.insert(i, lines[i])  # duplicated row
    return "\n".join(lines) + rng.choice(["\n", "", "\r\n", "\n\n"])


# numpy warns where it computes nonsense (a NaN or 1e40 cast to int64): a bug, like a traceback
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_fuzzed_trace_csvs_are_analysed_or_one_line_errors(tmp_path) -> None:
    seed, cases = fuzz_seed(4242), fuzz_cases(100)
    rng = random.Random(seed)
    path = tmp_path / "trace.csv"
    base = _trace(random.Random(1)).encode()
    t0 = time.monotonic()
    counts = {0: 0, 1: 0, 2: 0}
    for i in range(cases):
        data = _structured(rng).encode() if rng.random() < 0.6 else mutate_bytes(rng, base)
        path.write_bytes(data)
        out = run_cli(["analyze", str(path), "--format", "json"], f"seed {seed} case {i}: csv {data[:3000]!r}")
        counts[out.rc] += 1
    assert counts[0] > cases // 20 and counts[2] > cases // 20, counts
    print(f"{cases} traces in {time.monotonic() - t0:.1f} s: {counts}")


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize(("cell", "problem"), [
    ("nan", "is not a finite number (unix seconds, e.g. 1795941789.5)"),
    ("inf", "is not a finite number (unix seconds, e.g. 1795941789.5)"),
    ("-Infinity", "is not a finite number (unix seconds, e.g. 1795941789.5)"),
    ("1e309", "is not a finite number (unix seconds, e.g. 1795941789.5)"),
    ("9" * 40, "is out of range (years 1 to 9999 in unix seconds, e.g. 1795941789.5)"),
])
def test_trace_timestamp_that_is_no_time_is_one_line(tmp_path, cell, problem) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(f"{HEADER}1758400000,npu0,temp_c,60\n{cell},npu0,temp_c,61\n1758400020,npu0,temp_c,62\n")
    out = run_cli(["analyze", str(path)], cell)
    assert (out.rc, out.err) == (2, f"soak: error: {path}: line 3: timestamp {cell!r} {problem}\n")
