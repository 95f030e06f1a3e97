"""Trace loading: the CSV contract, bad input as one clear line, exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from soak.analysis import Trace, analyze
from soak.errors import InputError

pytestmark = pytest.mark.compute  # pyproject.toml

HEADER = "timestamp,device,metric,value\n"


def _write(tmp_path, text: str, name: str = "t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_rows_in_any_order_are_sorted_and_na_is_a_gap(tmp_path):
    p = _write(tmp_path, HEADER + "3,npu0-0,util_pct,90\n1,npu0-0,util_pct,95\n2,npu0-0,util_pct,NA\n"
               "2,npu0-1,temp_c,50.5\n1,npu0-0,util_pct,95\n")
    tr = Trace.from_csv(p)
    s = tr.get("npu0-0", "util_pct")
    assert s.t.tolist() == [1.0, 3.0]  # NA dropped (never 0), exact repeat dropped
    assert s.v.tolist() == [95.0, 90.0]
    assert tr.devices == ["npu0-0", "npu0-1"]
    assert tr.get("npu0-1", "temp_c").v.tolist() == [50.5]


def test_a_file_in_series_order_reads_as_the_same_rows_in_any_order(tmp_path):
    # a file written series by series, in time order, is sliced as it is; any other order
    # (or a gap, or a repeat) is sorted and checked series by series: the same trace
    rng = np.random.default_rng(4)
    lines = [f"{t},npu{d}-0,{m},{round(float(rng.normal(50, 5)), 2)}"
             for d in range(3) for m in ("temp_c", "util_pct") for t in range(1000, 1040, 2)]
    grouped = Trace.from_csv(_write(tmp_path, HEADER + "\n".join(lines) + "\n", "a.csv"))
    shuffled = Trace.from_csv(_write(tmp_path, HEADER + "\n".join(rng.permutation(lines)) + "\n", "b.csv"))
    gapped = Trace.from_csv(_write(tmp_path, HEADER + "\n".join(lines) + "\n1041,npu0-0,temp_c,NA\n", "c.csv"))
    assert len(grouped) == 6
    for other in (shuffled, gapped):
        assert [(s.device, s.metric, s.t.tolist(), s.v.tolist()) for s in grouped.series()] == \
            [(s.device, s.metric, s.t.tolist(), s.v.tolist()) for s in other.series()]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("timestamp,device,value\n1,a,5\n", "line 1: missing column(s) metric"),
        (HEADER + "1,a,util_pct,5\n2,a,util_pct,abc\n", "line 3: value 'abc' is not a number"),
        (HEADER + "1,a,util_pct,5\nx,a,util_pct,5\n", "line 3: timestamp 'x' is not a number"),
        (HEADER + "1,a,util_pct,5\n2,a,util_pct,6\n1,a,util_pct,7\n",
         "line 4: duplicate timestamp 1 for a/util_pct with a different value than line 2"),
        (HEADER, "no data rows"),
        (HEADER + "1,,util_pct,5\n", "line 2: device is empty"),
    ],
)
def test_bad_csv_names_file_and_line(tmp_path, text, message):
    p = _write(tmp_path, text)
    with pytest.raises(InputError) as err:
        Trace.from_csv(p)
    assert str(err.value).startswith(str(p))
    assert message in str(err.value)


def test_a_four_column_cluster_export_places_each_chip_on_its_node_as_the_five_column_form(tmp_path):
    # what soak exports of a cluster run: a node's chip written node/device, a rank plain
    four = _write(tmp_path, HEADER + "1,n1/npu0-0,temp_c,50\n1,n2/npu0-0,temp_c,52\n2,n1/npu0-0,temp_c,51\n"
                  "1,lm-rank0,step_time_s,0.5\n", "four.csv")
    five = _write(tmp_path, "timestamp,node,device,metric,value\n1,n1,npu0-0,temp_c,50\n1,n2,npu0-0,temp_c,52\n"
                  "2,n1,npu0-0,temp_c,51\n", "five.csv")
    a, b = Trace.from_csv(four), Trace.from_csv(five)
    assert a.nodes == b.nodes == ["n1", "n2"]
    assert a.place("n1/npu0-0") == b.place("n1/npu0-0") == ("n1", "npu0-0")
    assert a.place("lm-rank0") == (None, "lm-rank0")
    assert a.get("n1/npu0-0", "temp_c").v.tolist() == b.get("n1/npu0-0", "temp_c").v.tolist() == [50.0, 51.0]
    # a single node's four-column trace has no nodes, as before
    assert Trace.from_csv(_write(tmp_path, HEADER + "1,npu0-0,temp_c,50\n", "one.csv")).nodes == []


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        Trace.from_csv(tmp_path / "nope.csv")


def test_from_rows_matches_from_csv(tmp_path):
    rows = [(2.0, "d", "util_pct", 50.0), (1.0, "d", "util_pct", 40.0), (1.5, "d", "temp_c", None)]
    tr = Trace.from_rows(rows)
    assert tr.get("d", "util_pct").v.tolist() == [40.0, 50.0]
    assert tr.get("d", "temp_c") is None
    with pytest.raises(InputError, match="row 2: duplicate timestamp 1"):
        Trace.from_rows([(1, "d", "m", 1.0), (1, "d", "m", 2.0)])


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "soak", "analyze", *args], capture_output=True,
                          text=True, timeout=60)


def test_cli_bad_input_exit_2_one_line(tmp_path):
    p = _write(tmp_path, HEADER + "1,a,util_pct,5\n2,a,util_pct,oops\n")
    r = _cli(str(p), "--format", "json")
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.strip().splitlines() == [f"soak: error: {p}: line 3: value 'oops' is not a number"]


@pytest.mark.slow
def test_cli_json_contract_and_table(tmp_path):
    # 2 h of a chip that hangs (idle, memory held) for 10 min: one hang finding.
    t = np.arange(0, 7200, 5.0)
    util = np.where((t >= 3000) & (t < 3600), 0.0, 95.0)
    lines = [HEADER.strip()]
    for ts, u in zip(t, util, strict=True):
        lines.append(f"{ts + 1.7e9},npu0-0,util_pct,{u}")
        lines.append(f"{ts + 1.7e9},npu0-0,hbm_used_bytes,3e10")
    p = _write(tmp_path, "\n".join(lines) + "\n")
    r = _cli(str(p), "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verdict"] == "fail"
    (f,) = [f for f in out["findings"] if f["kind"] == "hang"]
    assert {"kind", "device", "metric", "start", "end", "severity", "summary"} <= set(f)
    assert f["device"] == "npu0-0" and f["start"] == pytest.approx(1.7e9 + 3000)
    r = _cli(str(p), "--format", "table", "--exit-code")
    assert r.returncode == 1
    assert "hang" in r.stdout and "N/A" in r.stdout  # slope/period/count of a hang print N/A
    assert analyze(Trace.from_csv(p)).to_dict()["verdict"] == "fail"


# A trace CSV with ISO dates instead of unix seconds: the one-line error says what is expected.


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


def test_analyze_a_csv_without_a_known_metric_is_bad_input_not_a_pass(tmp_path, capsys) -> None:
    """No evidence is never a PASS: a trace of metrics soak does not know gives one line, exit 2."""
    from soak.cli import main

    csv = tmp_path / "unknown.csv"
    csv.write_text("timestamp,device,metric,value\n1764000000,npu0-0,fan_rpm,3000\n"
                   "1764000010,npu0-0,fan_rpm,3010\n", encoding="utf-8")
    assert main(["analyze", str(csv)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no reading of a known metric" in err and "fan_rpm" in err
    assert "PASS" not in err
