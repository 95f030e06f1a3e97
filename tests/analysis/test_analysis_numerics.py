"""The judging of the workloads' numerical events (``soak.analysis.numerics``).

The heartbeat lines are written as the training workload writes them (its step lines count
``numeric_checks``; ``sdc_mismatch`` and ``nonfinite`` events carry ``check``, ``error``,
``tolerance``, ``suspect_rank`` and ``classification``), read by the daemon's follower and
aggregator into the store, and judged from there, as a run is: two ranks of ``lm`` on two
simulated chips, rank r on the r-th chip."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from soak.analysis import numerics as nm
from soak.config import plan_from_dict
from soak.daemon.heartbeat import HeartbeatFollower, StepAggregator
from soak.judge import judge_run
from soak.store import Store

T0 = 1_760_000_000.0
CHIPS = {"npu0-0": "SN-A", "npu0-1": "SN-B"}
STEPS = 400
CHECK_EVERY = 10  # the training's check period (steps)


def _place(workload: str, rank: int, device: str | None) -> tuple[str | None, str | None]:
    chip = nm.chip_of_rank(rank, device, nm.chip_order(CHIPS), 2)
    return chip, CHIPS.get(chip) if chip else None


def _lines(faults: list[dict[str, Any]], checks: bool = True) -> dict[int, list[dict[str, Any]]]:
    """Each rank's heartbeat lines: a step line per step (0.5 s apart), and ``faults`` (each with
    its ``rank`` and ``step``) as event lines right after their step."""
    out: dict[int, list[dict[str, Any]]] = {0: [], 1: []}
    for step in range(1, STEPS + 1):
        for rank in (0, 1):
            base = {"ts": T0 + 0.5 * step, "workload": "lm", "rank": rank, "world_size": 2, "device": "cpu"}
            line = {**base, "event": "step", "step": step, "step_time_s": 0.5, "loss": 2.0}
            if checks:
                line["numeric_checks"] = step // CHECK_EVERY
            out[rank].append(line)
            for f in faults:
                if f["step"] == step and f["rank"] == rank:
                    out[rank].append({**base, "ts": T0 + 0.5 * step + 0.1, **f})
    return out


def _judge(tmp_path: Path, faults: list[dict[str, Any]], checks: bool = True) -> Any:
    hb = tmp_path / "heartbeats"
    hb.mkdir()
    for rank, lines in _lines(faults, checks).items():
        (hb / f"lm-rank{rank}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    agg = StepAggregator(window_s=5.0, place=_place)
    rows, events = agg.feed(HeartbeatFollower(hb).poll())
    rows += agg.flush(None)
    plan = plan_from_dict({"devices": {"backend": "sim"}, "sim": {"chips": 2},
                           "workloads": [{"name": "lm", "nproc": 2}], "run": {"duration": "200s"}})
    store = Store.open("sqlite://")
    store.create_run("r1", host="node-a", plan=plan.to_dict(), started_ts=T0)
    store.add_sample_rows([{"run_id": "r1", "ts": T0 + i, "device": chip, "up": True, "util_pct": 95.0,
                            "temp_c": 60.0, "power_w": 300.0} for i in range(0, 200) for chip in CHIPS])
    store.add_steps("r1", rows)
    for e in events:
        store.add_event("r1", e["kind"], ts=e["ts"], workload=e["workload"], rank=e["rank"], message=e["message"],
                        detail=e["detail"])
    judged = judge_run(store, "r1", status="finished", ended=T0 + 200)
    stored = store.load_events("r1")
    store.close()
    (crit,) = [c for c in judged.criteria if c["code"] == "criterion.numerics"]
    found = [f for f in judged.findings if f["kind"] in nm.KINDS]
    return judged, crit, found, stored


def _sdc(check: str, cls: str | None, rank: int = 0, suspect: int | None = 1, step: int = 200) -> dict[str, Any]:
    return {"event": "sdc_mismatch", "rank": rank, "step": step, "message": f"{check} differs",
            "check": check, "error": 0.37, "tolerance": 1e-3, "suspect_rank": suspect, "classification": cls}


def test_lm_corrupt_on_rank_1_confirmed_on_its_chip_fails_naming_the_chip_and_serial(tmp_path: Path) -> None:
    judged, crit, found, stored = _judge(tmp_path, [_sdc("recompute", "chip")])
    (f,) = found
    assert (f["kind"], f["device"], f["severity"], f["metric"]) == ("sdc", "npu0-1", "fail", "recompute")
    v = f["values"]
    assert (v["serial"], v["rank"], v["reported_by"], v["step"], v["class"]) == ("SN-B", 1, 0, 200, "chip")
    assert (v["error"], v["tolerance"]) == (0.37, 1e-3)
    assert "confirmed on rank 1's chip (serial SN-B)" in f["summary"]
    assert crit["met"] is False and judged.verdict == "fail"
    # stored as it happened, with its severity and the chip it names
    (e,) = [e for e in stored if e.kind == "sdc"]
    assert (e.rank, e.detail["chip"], e.detail["serial"], e.detail["severity"]) == (0, "npu0-1", "SN-B", "fail")


def test_lm_bitflip_replica_transient_warns_on_rank_1s_chip(tmp_path: Path) -> None:
    _, crit, found, _ = _judge(tmp_path, [_sdc("replica", "transient")])
    (f,) = found
    assert (f["kind"], f["device"], f["severity"], f["metric"], f["values"]["class"]) == (
        "sdc", "npu0-1", "warn", "replica", "transient")
    assert "did not recur on a rerun (transient)" in f["summary"]
    assert crit["met"] is True and crit["values"]["warns"] == 1  # warned, not failed


def test_lm_nan_transient_warns_on_rank_1s_chip_once_for_its_loss_and_gradient(tmp_path: Path) -> None:
    nan = {"event": "nonfinite", "rank": 1, "step": 200, "message": "loss is nan", "what": "loss", "value": "nan",
           "suspect_rank": 1, "classification": "transient"}
    grad = {**nan, "what": "grad_norm", "message": "gradient norm is nan"}
    _, crit, found, _ = _judge(tmp_path, [nan, grad])
    assert {(f["kind"], f["device"], f["severity"], f["metric"]) for f in found} == {
        ("nonfinite", "npu0-1", "warn", "loss"), ("nonfinite", "npu0-1", "warn", "grad_norm")}
    assert "non-finite loss (nan) at step 200" in next(f["summary"] for f in found if f["metric"] == "loss")
    assert crit["met"] is True


def test_a_second_transient_on_one_chip_fails_it(tmp_path: Path) -> None:
    nan = {"event": "nonfinite", "rank": 1, "step": 300, "message": "loss is nan", "what": "loss", "value": "nan",
           "suspect_rank": 1, "classification": "transient"}
    _, crit, found, stored = _judge(tmp_path, [_sdc("replica", "transient"), _sdc("replica", "transient", step=250),
                                               nan])
    by_kind = {f["kind"]: f for f in found}
    f = by_kind["sdc"]
    assert (f["device"], f["severity"], f["count"], f["values"]["transients"]) == ("npu0-1", "fail", 2, 2)
    assert by_kind["nonfinite"]["severity"] == "fail"  # a third upset of that chip, of another kind
    assert crit["met"] is False
    # as the daemon said it when each was stored
    assert [e.detail["severity"] for e in stored if e.kind in nm.KINDS] == ["warn", "fail", "fail"]


def test_everywhere_warns_for_the_workload_and_an_unsettled_suspect_names_no_chip(tmp_path: Path) -> None:
    spike = {"event": "loss_spike", "rank": 0, "step": 250, "message": "loss spike", "loss": 40.0, "median": 2.0,
             "multiple": 10.0, "suspect_rank": None, "classification": "everywhere"}
    _, crit, found, _ = _judge(tmp_path, [spike, _sdc("collective", None, suspect=None)])
    by_kind = {f["kind"]: f for f in found}
    assert (by_kind["loss_spike"]["device"], by_kind["loss_spike"]["severity"]) == (None, "warn")
    assert "recurs on every chip" in by_kind["loss_spike"]["summary"]
    # a wrong result against an exact value that no rank was settled for: fails, no chip named
    assert (by_kind["sdc"]["device"], by_kind["sdc"]["severity"]) == (None, "fail")
    assert "no rank settled as its cause" in by_kind["sdc"]["summary"]
    assert crit["met"] is False


def test_lm_with_checks_and_no_fault_meets_the_criterion_and_states_its_evidence(tmp_path: Path) -> None:
    _, crit, found, _ = _judge(tmp_path, [])
    assert found == []
    assert crit["met"] is True
    v = crit["values"]
    assert (v["checked"], v["chips"], v["checks"]) == (2, 2, 2 * (STEPS // CHECK_EVERY))
    assert v["checked_chips"] == ["npu0-0", "npu0-1"] and v["chip_checks"] == [STEPS // CHECK_EVERY] * 2
    assert v["not_checked"] == []
    assert crit["measured"].startswith(f"{2 * STEPS // CHECK_EVERY} check(s) on 2 of 2 chip(s)")
    assert f"npu0-0 {STEPS // CHECK_EVERY}, npu0-1 {STEPS // CHECK_EVERY}" in crit["measured"]


@pytest.mark.parametrize("sdc", [False, True])
def test_a_workload_without_checks_is_not_judged_unless_it_saw_a_wrong_result(tmp_path: Path, sdc: bool) -> None:
    judged, crit, _, _ = _judge(tmp_path, [_sdc("recompute", "chip")] if sdc else [], checks=False)
    assert crit["met"] is (False if sdc else None)
    assert crit["measured_code"] == "criterion.numerics.measured_none"
    assert crit["measured"].startswith("no numerical check ran: not judged")


def test_the_daemon_opens_the_finding_and_counts_it_on_metrics_as_the_event_is_stored(tmp_path: Path) -> None:
    """What /metrics serves from the stored events alone, before any analysis: the open
    finding (what SoakSilentDataCorruption reads) and the counters per chip and check."""
    from dataclasses import replace

    from soak.daemon.lifecycle import Daemon
    from tests.dashboards.test_dashboards_served_names import RUN, SNAPSHOT, served_samples

    _, _, _, stored = _judge(tmp_path, [_sdc("replica", "transient"), _sdc("replica", "transient", step=250)])
    tally = nm.NumericTally()
    opened = [tally.add(e.kind, e.node, e.workload, e.detail) for e in stored if e.kind in nm.KINDS]
    assert opened == [True, True]  # warned, then failed: the finding was made worse
    daemon = SimpleNamespace(found=None, membership=SimpleNamespace(node=None), fault_watch=None, numerics=tally)
    run = replace(RUN, open_findings=Daemon._open_findings(daemon),
                  numeric=tally.counts({(None, "npu0-0"): 40, (None, "npu0-1"): 40}))
    samples = served_samples(SNAPSHOT, run)
    active = [lv for n, lv, _ in samples if n == "soak_finding_active" and lv["kind"] == "sdc"]
    assert [(lv["device"], lv["severity"], lv["metric"], lv["code"]) for lv in active] == [
        ("npu0-1", "fail", "replica", "sdc.mismatch")]
    counts = {(n, lv["device"], lv["check"]): v for n, lv, v in samples if n.startswith("soak_numeric_")}
    assert counts == {("soak_numeric_checks_total", "npu0-0", "all"): 40.0,
                      ("soak_numeric_checks_total", "npu0-1", "all"): 40.0,
                      ("soak_numeric_mismatches_total", "npu0-1", "replica"): 2.0}
