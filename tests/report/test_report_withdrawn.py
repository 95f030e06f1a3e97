"""A finding the online analysis announced and the final analysis does not keep (a hang that
was the planted crash's gap, a step-time rise the whole run does not bear out) is marked
withdrawn in the customer's timeline, with when and why; the console's last line counts it, so
what it said during the run and the final count agree."""

from __future__ import annotations

from soak.judge import withdrawn_findings
from soak.report.loader import load_report_data
from soak.report.rows import event_rows
from soak.store import Store

T0 = 1_790_000_000.0
HANG = {"kind": "hang", "node": None, "device": "lm-rank0", "metric": "step", "severity": "fail",
        "start": T0 + 100, "end": T0 + 1100, "code": "finding.hang",
        "values": {"device": "lm-rank0", "duration_min": 17.0, "ongoing": True}}
CREEP = {"kind": "memory_creep", "node": None, "device": "npu0-0", "metric": "hbm_used_bytes", "severity": "fail",
         "start": T0 + 50, "end": T0 + 3000, "summary": "hbm_used_bytes creeps"}


def _run(db, *, status: str = "finished") -> None:
    with Store.open(db) as s:
        s.create_run("r1", host="h", plan={}, started_ts=T0, planned_end_ts=T0 + 3600)
        s.add_sample_rows([{"run_id": "r1", "ts": T0 + 60 * i, "device": "npu0-0", "up": True, "util_pct": 95.0}
                           for i in range(60)])
        for ts, f in ((T0 + 1200, HANG), (T0 + 1500, CREEP)):
            s.add_event("r1", "finding", ts=ts, message=f.get("summary") or "no progress for 17 min (ongoing)",
                        detail={k: f.get(k) for k in ("kind", "node", "device", "metric", "severity", "start",
                                                      "end", "code", "values")})
        s.replace_findings("r1", [CREEP])  # the final analysis kept the creep only
        if status != "running":
            s.finish_run("r1", status=status, ended_ts=T0 + 3600, verdict="fail")


def test_the_findings_the_final_analysis_did_not_keep() -> None:
    from soak.store.records import EventRecord

    events = [EventRecord(ts=T0 + i, kind="finding", message=f"m{i}",
                          detail={k: f.get(k) for k in ("kind", "node", "device", "metric")})
              for i, f in enumerate((HANG, CREEP, HANG))]
    withdrawn = withdrawn_findings(events, [CREEP])
    assert [e.message for e in withdrawn] == ["m0", "m2"]
    assert withdrawn_findings(events, [CREEP, HANG]) == []


def test_a_withdrawn_finding_is_marked_in_the_timeline(tmp_path) -> None:
    db = tmp_path / "soak.db"
    _run(db)
    with Store.open(db, create=False) as s:
        data = load_report_data(s, "r1", analysis={"verdict": "fail", "findings": [CREEP], "criteria": [],
                                                   "schema_version": 99})
    en = {r[3] for r in event_rows(data.events, lang="en")}
    zh = {r[3] for r in event_rows(data.events, lang="zh")}
    withdrawn_en = [m for m in en if "withdrawn" in m]
    assert len(withdrawn_en) == 1 and withdrawn_en[0].startswith("no progress for 17 min"), en
    assert withdrawn_en[0].endswith("(withdrawn at the run's end 2026-09-21 15:13: the final analysis of the "
                                    "whole run does not keep it)"), withdrawn_en
    assert not any("withdrawn" in m for m in en if "hbm" in m)
    assert sum("已撤回" in m for m in zh) == 1, zh
    assert [e.withdrawn for e in data.events if e.kind == "finding"] == [True, False]


def test_a_running_runs_findings_are_not_withdrawn(tmp_path) -> None:
    # while the run goes on, the stored findings are the online ones: nothing is final yet
    db = tmp_path / "soak.db"
    _run(db, status="running")
    with Store.open(db, create=False) as s:
        data = load_report_data(s, "r1", analyze=False)
    assert not any(e.withdrawn for e in data.events)
