"""``soak nodes``: every node across a store's runs, and the node that failed in two runs named
a repeat offender, on every backend."""

from __future__ import annotations

import json
import math

import pytest

from soak import fleet
from soak.cli import main

HOUR = 3600.0


def _run(store, run_id: str, host: str, t0: float, events=(), findings=(), verdict: str = "pass") -> None:
    store.create_run(run_id, host=host, plan={"run": {"duration": HOUR}}, started_ts=t0, planned_end_ts=t0 + HOUR,
                     workload="lm", backend="cpu")
    store.add_event(run_id, "start", ts=t0 + 10, workload="lm", rank=0)
    for kind, at, message in events:
        store.add_event(run_id, kind, ts=t0 + at, workload="lm", rank=0, message=message)
        if kind in ("crash", "hang"):
            store.add_event(run_id, "start", ts=t0 + at + 20, workload="lm", rank=0)
    if findings:
        store.replace_findings(run_id, findings)
    store.finish_run(run_id, status="finished", ended_ts=t0 + HOUR, verdict=verdict)


def _fill(store) -> None:
    t0 = 1_700_000_000.0
    _run(store, "r1", "node-a", t0, [("crash", 600, "lm: crashed (signal 9)")], verdict="fail")
    _run(store, "r2", "node-b", t0 + 2 * HOUR)
    _run(store, "r3", "node-a", t0 + 4 * HOUR, [("hang", 900, "lm: no step for 600 s")], verdict="fail")
    # an injected crash is the plan's canary: not a failure of node-b
    _run(store, "r4", "node-b", t0 + 6 * HOUR, [("inject", 290, "crash: exiting at step 40"),
                                                ("crash", 300, "lm: crashed (exit 1)")])
    _run(store, "r5", "node-c", t0 + 8 * HOUR, findings=[
        {"kind": "thermal", "device": "npu0", "metric": "temp_c", "start": t0 + 8 * HOUR + 60,
         "end": t0 + 8 * HOUR + 600, "severity": "fail", "summary": "3 excursion(s) above 95 C"}], verdict="fail")


def test_a_node_that_failed_in_two_runs_is_a_repeat_offender(store) -> None:
    _fill(store)
    nodes = {n.name: n for n in fleet.read(store)}
    assert set(nodes) == {"node-a", "node-b", "node-c"}
    a, b, c = nodes["node-a"], nodes["node-b"], nodes["node-c"]
    assert a.repeat_offender and a.failed_runs == ("r1", "r3") and a.runs == ("r1", "r3")
    assert a.failures == {"crash": 1, "hang": 1, "node_lost": 0, "link": 0, "device_fault": 0, "sdc": 0}
    assert a.last_failure_run == "r3" and a.last_failure == 1_700_000_000.0 + 4 * HOUR + 900
    assert a.node_hours == pytest.approx(2.0)
    assert not b.repeat_offender and b.failed_runs == () and b.failures == {"crash": 0, "hang": 0, "node_lost": 0, "link": 0, "device_fault": 0, "sdc": 0}
    assert not c.repeat_offender and c.failed_runs == ("r5",) and c.findings == {"thermal": 1}
    assert [n.name for n in fleet.read(store)][0] == "node-a"  # repeat offenders first


def test_soak_nodes_prints_every_node_as_json(store_url, capsys) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")  # the command opens its own
    from soak.store import Store

    with Store.open(store_url) as store:
        _fill(store)
    assert main(["nodes", "--db", store_url, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by = {n["name"]: n for n in out["nodes"]}
    assert by["node-a"]["repeat_offender"] is True and by["node-a"]["failed_runs"] == ["r1", "r3"]
    assert by["node-b"]["repeat_offender"] is False and by["node-b"]["runs"] == ["r2", "r4"]
    assert math.isclose(by["node-b"]["node_hours"], 2.0)
    assert main(["nodes", "--db", store_url]) == 0
    table = capsys.readouterr().out
    assert next(line for line in table.splitlines() if line.startswith("node-a")).endswith("REPEAT OFFENDER")


# A second agent claiming a node of a running cluster run: a rank another node holds is
# refused; the same node name takes that node's place (how a resumed agent comes back).
def test_a_join_at_a_rank_another_node_holds_is_refused_and_the_same_name_takes_its_place(store) -> None:
    from soak.errors import StoreError

    run = {"host": "h0", "plan": {}, "started_ts": 1_764_000_000.0, "backend": "sim"}
    join = dict(nodes=2, plan_digest="d" * 64, joined_ts=1_764_000_000.0, run=run)
    store.join_cluster("c1", node="node-0", rank=0, host="h0", **join)
    with pytest.raises(StoreError, match=r"^node intruder: rank 0 of cluster run c1 is already node node-0$"):
        store.join_cluster("c1", node="intruder", rank=0, host="elsewhere", **join)
    with pytest.raises(StoreError, match=r"^node node-1: its plan differs from cluster run c1's"):
        store.join_cluster("c1", node="node-1", rank=1, host="h1", **{**join, "plan_digest": "e" * 64})
    store.join_cluster("c1", node="node-0", rank=0, host="h0-again", **join)
    assert [(n.name, n.host) for n in store.cluster_nodes("c1")] == [("node-0", "h0-again")]


# A second agent given the name of a live node (a copied command line, or someone posing as
# it): refused while the node is seen within the run's node silence from its own host; its
# own agent, resumed on that host, or any host once the node fell silent, takes its place.
def test_a_second_agent_with_the_name_of_a_live_node_is_refused(store) -> None:
    from soak.errors import StoreError

    now = [1_764_000_000.0]
    store.clock = lambda: now[0]
    run = {"host": "h0", "plan": {}, "started_ts": now[0], "backend": "sim"}
    join = dict(rank=0, nodes=2, plan_digest="d" * 64, joined_ts=now[0], run=run, live_within_s=60.0)
    store.join_cluster("c1", node="node-0", host="10.0.0.1", **join)
    now[0] += 30
    with pytest.raises(StoreError, match=r"^node node-0: cluster run c1's node node-0 is live on 10\.0\.0\.1 "
                                         r"\(seen 30 s ago\): a second agent cannot take its name$"):
        store.join_cluster("c1", node="node-0", host="10.0.0.9", **join)
    store.join_cluster("c1", node="node-0", host="10.0.0.1", **join)  # its own agent, resumed
    now[0] += 61
    store.join_cluster("c1", node="node-0", host="10.0.0.9", **join)  # silent past the bound: moved
    assert [(n.name, n.host) for n in store.cluster_nodes("c1")] == [("node-0", "10.0.0.9")]


def _faults(store, run_id: str, host: str, t0: float, changes, node: str | None = None) -> None:
    """A run whose chips reported faults, as the daemon writes them (``FaultChange.detail()``)."""
    from soak.analysis.device_faults import FaultChange

    _run(store, run_id, host, t0)
    for at, device, signal, severity, kw in changes:
        c = FaultChange(t0 + at, device, signal, severity, **kw)
        store.add_event(run_id, "device_fault", ts=c.ts, message=c.message(), detail=c.detail(), node=node)


def test_soak_nodes_lists_a_chip_that_faulted_in_two_runs_by_serial_first(store_url, capsys) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")  # the command opens its own
    from soak.store import Store

    t0, bad, once = 1_700_000_000.0, "1025C9010000", "1025C9030000"
    with Store.open(store_url) as store:
        # the same card in two runs, moved from npu1-0 on node-a to npu0-0 on node-b
        _faults(store, "r1", "node-a", t0, [
            (600, "npu1-0", "health", "fail", {"level": "Alarm"}),  # its serial not read yet
            (900, "npu1-0", "ecc_uncorrectable", "fail", {"serial": bad, "value": 3.0}),
            (1500, "npu1-0", "ecc_uncorrectable", "fail", {"serial": bad, "value": 15.0, "previous": 3.0}),
            (2000, "npu3-0", "ecc_correctable", "info", {"serial": once, "value": 4.0}),
            (2100, "npu1-0", "health", "info", {"serial": bad, "level": "OK", "cleared": True}),
        ])
        _faults(store, "r2", "node-b", t0 + 2 * HOUR, [
            (300, "npu0-0", "fault_code", "fail", {"serial": bad, "code": "80E3A201", "text": "error code 80E3A201",
                                                   "level": "SeparateNPU", "action": "isolate the chip"}),
        ])
        _run(store, "r3", "node-c", t0 + 4 * HOUR)  # no chip reported anything
    assert main(["nodes", "--db", store_url, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {n["name"] for n in out["nodes"]} == {"node-a", "node-b", "node-c"} and out["repeat_runs"] == 2
    first, second = out["chips"]
    assert first == {
        "serial": bad, "places": ["node-a/npu1-0", "node-b/npu0-0"], "runs": ["r1", "r2"], "failed_runs": ["r1", "r2"],
        "repeat_offender": True, "severity": "fail",
        "faults": [
            {"run_id": "r1", "ts": t0 + 600, "node": None, "device": "npu1-0", "signal": "health", "code": None,
             "severity": "fail", "times": 1},
            {"run_id": "r1", "ts": t0 + 900, "node": None, "device": "npu1-0", "signal": "ecc_uncorrectable",
             "code": None, "severity": "fail", "times": 2},
            {"run_id": "r2", "ts": t0 + 2 * HOUR + 300, "node": None, "device": "npu0-0", "signal": "fault_code",
             "code": "80E3A201", "severity": "fail", "times": 1},
        ],
    }
    # correctable errors alone are no fault of the chip's: listed, not an offence
    assert (second["serial"], second["failed_runs"], second["repeat_offender"]) == (once, [], False)
    assert main(["nodes", "--db", store_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("CHIP SERIAL")))
    assert lines[head + 1].startswith(bad) and lines[head + 1].endswith("REPEAT OFFENDER")
    assert "node-a/npu1-0, node-b/npu0-0" in lines[head + 1] and "80E3A201" in lines[head + 3]
    assert lines[head + 4].startswith(once)


def test_soak_nodes_counts_a_chip_with_a_wrong_result_in_two_runs_as_a_repeat_offender(store_url, capsys) -> None:
    """The wrong results a workload's check pinned on a chip, as the daemon stores them
    (``soak.daemon.heartbeat``: the suspect rank's chip and serial, the severity): a chip wrong
    in two runs is a repeat offender by its serial; a result no chip was named for is no
    chip's, a transient is listed but no offence."""
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    from soak.store import Store

    t0, bad, once = 1_700_000_000.0, "1025C9000001", "1025C9000002"

    def sdc(store, run_id, at, chip, serial, severity, cls, check="gemm_cpu"):
        store.add_event(run_id, "sdc", ts=t0 + at, workload="gemm", rank=1, message="wrong product",
                        detail={"step": 30, "check": check, "error": 104.0, "tolerance": 1e-3, "suspect_rank": 1,
                                "classification": cls, "chip": chip, "serial": serial, "severity": severity})

    with Store.open(store_url) as store:
        _run(store, "r1", "node-a", t0)
        sdc(store, "r1", 600, "npu1-0", bad, "fail", "chip")
        sdc(store, "r1", 700, "npu2-0", once, "warn", "transient", check="replica")
        sdc(store, "r1", 800, None, None, "fail", None, check="collective")  # nobody settled: no chip
        _run(store, "r2", "node-b", t0 + 2 * HOUR)
        sdc(store, "r2", 2 * HOUR + 300, "npu0-0", bad, "fail", "chip")
    assert main(["nodes", "--db", store_url, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    first, second = out["chips"]
    assert (first["serial"], first["places"], first["failed_runs"], first["repeat_offender"]) == (
        bad, ["node-a/npu1-0", "node-b/npu0-0"], ["r1", "r2"], True)
    assert [(f["signal"], f["code"], f["severity"]) for f in first["faults"]] == [("sdc", "gemm_cpu", "fail")] * 2
    assert (second["serial"], second["failed_runs"], second["severity"], second["repeat_offender"]) == (
        once, ["r1"], "warn", False)


def test_soak_nodes_says_when_no_chip_reported_a_fault(store_url, capsys) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    from soak.store import Store

    with Store.open(store_url) as store:
        _fill(store)
    assert main(["nodes", "--db", store_url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["chips"] == []
    assert main(["nodes", "--db", store_url]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "no chip reported a fault in any run"
