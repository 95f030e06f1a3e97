"""Capture summaries, the finding -> capture link and the daemon's capture requests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from soak.analysis.captures import (
    CapturePlanner,
    Request,
    captures_from_events,
    explain,
    link,
    read_requests,
    summarize_trace,
    write_request,
)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "profile" / "lm-tiny-cpu-slow-data.pt.trace.json.gz"
WALL_US = 321641.681  # README.md of the fixture


def _trace() -> dict:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def test_recorded_slow_data_trace_names_data_loading() -> None:
    s = summarize_trace(_trace(), backend="cpu", wall_us=WALL_US)
    assert s["dominant"] == "data"
    assert s["shares"]["data"] == pytest.approx(0.6404, abs=1e-4)  # 0.2 s sleep of 0.32 s
    assert s["shares"]["backward"] == pytest.approx(0.1726, abs=1e-4)
    assert s["shares"]["comm"] == 0.0
    assert sum(s["shares"].values()) == pytest.approx(1.0)
    assert s["top_host_ops"][0] == {"name": "aten::mm", "self_ms": 36.98, "calls": 54}
    assert s["top_device_ops"] == s["top_host_ops"]  # on CPU the device is the CPU
    assert s["cpu_fallbacks"] is None and s["cpu_fallbacks_note"] == "not applicable on CPU"
    assert not any(op["name"].startswith("soak.") for op in s["top_host_ops"])


def _x(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def test_self_time_and_cpu_fallbacks_on_a_device_backend() -> None:
    trace = {"traceEvents": [
        _x("soak.forward", 0, 100, "user_annotation"),
        _x("aten::linear", 0, 60),
        _x("aten::addmm", 10, 40),
        _x("cudaLaunchKernel", 20, 5, "cuda_runtime"),
        _x("aten::nonzero", 70, 20),  # arithmetic, no kernel under it: ran on the CPU
        _x("aten::view", 95, 2),  # metadata only: not a fallback
        _x("sgemm_kernel", 30, 50, "kernel", tid=7),
    ]}
    s = summarize_trace(trace, backend="cuda", wall_us=200)
    host = {o["name"]: o["self_ms"] for o in s["top_host_ops"]}
    assert host == {"aten::linear": 0.02, "aten::addmm": 0.035, "aten::nonzero": 0.02, "aten::view": 0.002}
    assert s["top_device_ops"] == [{"name": "sgemm_kernel", "self_ms": 0.05, "calls": 1}]
    assert [o["name"] for o in s["cpu_fallbacks"]] == ["aten::nonzero"]
    assert s["shares"]["forward"] == 0.5 and s["shares"]["idle"] == 0.5 and s["cpu_fallbacks_note"] is None


def _event(ts: float, rank: int, **detail) -> SimpleNamespace:
    return SimpleNamespace(kind="capture", ts=ts, workload="lm", rank=rank, detail=detail)


def test_a_finding_links_the_capture_asked_for_it_not_the_baseline() -> None:
    caps = captures_from_events([
        _event(10, 0, label="baseline", error=None),
        _event(50, 0, label="cadence", error=None),
        _event(70, 1, label="request", error=None, finding={"kind": "utilization_dropouts", "devices": ["npu:1"]}),
        _event(90, 0, label="request", error="profiler did not start", finding={"kind": "throughput_degradation"}),
    ])
    findings = [
        {"kind": "utilization_dropouts", "device": "npu:1", "start": 40, "severity": "fail"},
        {"kind": "throughput_degradation", "device": "npu:0", "start": 60, "severity": "warn"},
        {"kind": "memory_creep", "device": "npu:0", "start": 0, "severity": "fail"},
        {"kind": "straggler", "device": "npu:3", "start": 95, "severity": "warn"},
    ]
    # the failed request is never a link; a finding without its own capture takes the next one
    assert link(findings, caps) == [3, 3, None, None]
    ex = explain(findings, caps)
    assert [(e.finding["kind"], e.capture and e.capture.id, e.baseline and e.baseline.id) for e in ex] == [
        ("utilization_dropouts", 3, 1), ("throughput_degradation", 3, 1), ("straggler", None, 1)]


def test_planner_times_the_capture_on_the_next_periodic_drop_and_limits_the_rate(tmp_path) -> None:
    planner = CapturePlanner(tmp_path, max_per_hour=2, steps=10)
    drop = {"kind": "utilization_dropouts", "device": "cpu", "severity": "fail", "start": 100.0, "end": 184.0,
            "period_s": 20.0, "details": {"mean_duration_s": 4.0}}
    host = {**drop, "device": "host"}
    made = planner.decide([drop, host, {**drop, "severity": "info", "kind": "throughput_degradation"}],
                          now=190.0, to_wall=lambda ts: ts + 1000.0)
    assert len(made) == 1  # one global stall: one request for both rows
    (req,) = read_requests(tmp_path)
    # last drop started at 180; the next at 200 -> [200 - 4, 200 + 4 + 4] on the wall clock
    assert (req.start_ts, req.end_ts) == (1196.0, 1208.0)
    assert req.ranks is None and req.finding["devices"] == ["cpu", "host"]
    assert planner.decide([drop], now=200.0, to_wall=lambda ts: ts) == []  # asked already
    slow = {"kind": "throughput_degradation", "device": "cpu", "severity": "warn", "start": 0.0, "end": 200.0}
    assert len(planner.decide([slow], now=200.0, to_wall=lambda ts: ts)) == 1
    strag = {"kind": "straggler", "device": "npu:3", "severity": "warn", "start": 0.0, "end": 200.0}
    assert planner.decide([strag], now=210.0, to_wall=lambda ts: ts) == []  # 2 in the last hour
    assert len(planner.decide([strag], now=210.0, to_wall=lambda ts: ts + 3600.0)) == 1


def test_requests_round_trip_and_skip_unreadable_files(tmp_path) -> None:
    write_request(tmp_path, Request(2, 5.0, 6.0, "why", ranks=(1,), workloads=("lm",)))
    (tmp_path / "profile" / "request-3.json").write_text("{half", encoding="utf-8")
    (r,) = read_requests(tmp_path)
    assert (r.n, r.ranks, r.concerns("lm", 1), r.concerns("lm", 0), r.concerns("gemm", 1)) == (2, (1,), True, False, False)
