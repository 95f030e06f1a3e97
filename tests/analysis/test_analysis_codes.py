"""Every decision carries a code and typed values, and every code is in one table.

A finding's summary is its code's English template filled from its values, so another
language can render the same finding from the same pair; the set of codes is closed (every
code a producer uses is a key of ``soak.analysis.messages.ENGLISH``), so a table for another
language can be checked against it.
"""

from __future__ import annotations

import ast
import json
import re
import string
from pathlib import Path
from types import SimpleNamespace

import pytest

from soak.analysis import KINDS, Finding, Trace, analyze, numerics
from soak.analysis import compute as cp
from soak.analysis import evaluate as ev
from soak.analysis.messages import (
    CRITERIA,
    CRITERION_TEXTS,
    ENGLISH,
    FINDINGS,
    INTERRUPTIONS,
    NODE_REASONS,
    PARTS,
    REASONS,
    RELIABILITY,
    STATEMENTS,
    Said,
    hm,
    pct,
    render,
    say,
)
from soak.analysis.model import SCHEMA_VERSION
from soak.analysis.synth import generate, link_rows

pytestmark = pytest.mark.compute  # pyproject.toml

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"^(criterion|reason|interruption|part|node|statement|reliability|" + "|".join(KINDS) + r")\.[a-z0-9_.]+$")


def _check(findings: list[Finding]) -> set[str]:
    """Each finding has a registered code of its kind, values, and says its summary from them
    (also after the JSON round trip the analysis document takes)."""
    for f in findings:
        assert f.code in FINDINGS and f.code.startswith(f.kind + "."), (f.kind, f.summary)
        assert f.values, f.code
        assert say(f.code, f.values) == f.summary
        back = json.loads(json.dumps(f.to_dict()))
        assert back["code"] == f.code and say(back["code"], back["values"]) == f.summary
        assert all(not isinstance(v, dict) for v in f.values.values()), f"{f.code}: values are flat"
    return {f.code for f in findings}


def test_every_template_names_only_what_its_fields_and_optional_parts_use() -> None:
    for code, template in ENGLISH.items():
        assert CODE.match(code), code
        flat = re.sub(r"\[\[!?(\w+)\|", "", template).replace("]]", "")
        for _, field, spec, _ in string.Formatter().parse(flat):
            assert field is None or re.fullmatch(r"\w+", field), (code, field)
            assert spec is None or "{" not in spec, code
    assert set(ENGLISH) == (set(FINDINGS) | set(CRITERIA) | set(CRITERION_TEXTS) | set(PARTS) | set(REASONS)
                            | set(NODE_REASONS) | set(STATEMENTS) | set(INTERRUPTIONS) | set(RELIABILITY))
    assert {c.split(".")[0] for c in FINDINGS} <= set(KINDS)


def test_optional_parts_and_named_formats() -> None:
    t = "a[[x| {x:.1f}]][[!x| none]]; {d:hm}, {r:pct}, {t:utc}, {names}, {names:semi}, {ms:metric}"
    assert render(t, {"x": 0.0, "d": 3725, "r": 0.5, "t": 0, "names": ["p", "q"], "ms": ["temp_c"]}) == \
        "a 0.0; 1 h 02 min, 50.0 %, 1970-01-01 00:00:00Z, p, q, p; q, temp_c"
    loud = {"metric": str.upper}
    assert render("{m:metric} {ms:metric}", {"m": "temp_c", "ms": ["a", "b"]}, loud) == "TEMP_C A, B"
    assert render(t, {"x": None, "d": None, "r": None, "t": 60, "names": [], "ms": []}).startswith("a none; N/A, N/A")


def test_a_finding_with_an_unknown_code_or_one_of_another_kind_is_refused() -> None:
    kw = dict(kind="hang", device="npu0", metric="util_pct", start=0.0, end=1.0, severity="fail", summary="s")
    with pytest.raises(ValueError):
        Finding(**kw, code="hang.made_up")
    with pytest.raises(ValueError):
        Finding(**kw, code="thermal.throttled")
    with pytest.raises(KeyError):
        Said("x", "reason.made_up", {})


def test_every_code_written_in_the_source_is_registered() -> None:
    """A code spelled out in soak/ (a string constant that looks like one) is in the table;
    codes made from parts (f-strings) are checked where they are used (``Finding``, ``Said``,
    the criteria)."""
    missing = []
    for path in sorted((ROOT / "soak").rglob("*.py")):
        if "report" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE.match(node.value) \
                    and node.value not in ENGLISH and not node.value.endswith("."):
                missing.append((path.name, node.value))
    assert not missing


def test_links_and_compute_findings_carry_codes() -> None:
    rows = link_rows(8, 6, spread=0.04, seed=7001, slow_pairs={(2, 5): 0.4})
    a = analyze(Trace.from_rows(rows))
    assert _check(a.findings) == {"straggler.link_pair"}
    assert all(f.node and f.device and "/" not in f.node for f in a.findings)
    healthy = {f"n{i}": [600.0 + 7 * ((i + r) % 5) for r in range(8)] for i in range(4)}
    rates = [cp.RankRate(n, "gemm", 8 * i + r, v * (0.88 if n == "n2" else 1.0), 10, 100.0, 200.0)
             for i, (n, vals) in enumerate(healthy.items()) for r, v in enumerate(vals)]
    assert _check(list(cp.evaluate(rates, "H100").findings)) == {"straggler.node_compute"}
    floor = [cp.RankRate("n0", "gemm", r, v, 10, 100.0, 200.0) for r, v in enumerate((700.0, 420.0, 710.0))]
    assert _check(list(cp.evaluate(floor, "H200").findings)) == {"straggler.rank_compute_floor"}


def test_the_analysis_document_carries_schema_version_and_typed_reasons() -> None:
    d = analyze(Trace.from_rows([])).to_dict()
    assert d["schema_version"] == SCHEMA_VERSION == 4
    assert d["reasons_typed"] == [{"code": "reason.no_data", "values": {}}]
    assert d["reasons"] == [say("reason.no_data", {})]


@pytest.mark.slow
def test_every_fault_family_finding_has_a_code_and_says_its_summary() -> None:
    cases: dict[str, ev.Case] = {}
    for c in ev.fault_cases(multiples=(2.0,), hours=36.0) + ev.cluster_fault_cases(multiples=(1.0,), hours=12.0):
        cases.setdefault(c.family, c)
    seen: set[str] = set()
    for case in cases.values():
        trace, _ = generate(case.scenario)
        a = analyze(trace, phases=case.scenario.phases)
        seen |= _check(a.findings)
        doc = a.to_dict()
        assert doc["schema_version"] == SCHEMA_VERSION
        for f in doc["findings"]:
            assert f["device"] is None or "/" not in f["device"], f  # node and device apart
        for r, t in zip(a.reasons, doc["reasons_typed"], strict=True):
            assert t["code"] in REASONS and say(t["code"], t["values"]) == r
    # the numerical findings come from the workloads' events, never from a trace: one event of
    # each kind and class, judged as a run's are, says its code here
    seen |= _check(numerics.assess(_numeric_events()))
    kinds = {c.split(".")[0] for c in seen}
    # a chip's own fault report comes from the run's events, never from a trace: its codes are
    # said by tests/analysis/test_device_faults.py and the daemon's real runs; stale readings
    # are the stale halls' (tests/analysis/test_analysis_stale.py)
    assert kinds == set(KINDS) - {"device_fault", "stale_telemetry"}, set(KINDS) - kinds


def _numeric_events() -> list[SimpleNamespace]:
    base = {"node": "n0", "workload": "lm", "message": None}
    details = [
        ("sdc", 1, {"check": "recompute", "error": 0.5, "tolerance": 1e-6, "suspect_rank": 1,
                    "classification": "chip", "chip": "npu0-1", "serial": "SN-B"}),
        ("sdc", 0, {"check": "replica", "error": None, "tolerance": None, "suspect_rank": 0,
                    "classification": "transient", "chip": "npu0-0", "serial": "SN-A"}),
        ("nonfinite", 1, {"what": "loss", "value": "nan", "suspect_rank": None,
                          "classification": "everywhere"}),
        ("loss_spike", 0, {"loss": 40.0, "median": 2.0, "multiple": 4.0, "suspect_rank": 0,
                           "classification": "transient", "chip": "npu0-0", "serial": "SN-A"}),
    ]
    return [SimpleNamespace(kind=kind, ts=1_760_000_000.0 + i, rank=rank, detail={"step": 100 + i, **d}, **base)
            for i, (kind, rank, d) in enumerate(details)]


def test_one_duration_and_one_share_format_rounded_down() -> None:
    # the demo's training of 7 h 13 min 50 s read "7h 13m" on one page and "7 h 14 min" on another
    assert hm(7 * 3600 + 13 * 60 + 50) == "7 h 13 min"
    assert [hm(s) for s in (0, 42.9, 60, 419.9999999, 3600, 168 * 3600)] == \
        ["0 s", "42 s", "1 min", "7 min", "1 h 00 min", "168 h 00 min"]
    assert hm(None) == hm(float("nan")) == "N/A" and hm(-90) == "-1 min"
    # 99.96 % is never "100.0 %"; 0.848 is 84.8 %, not 84.7 % of its float
    assert [pct(x) for x in (0.9996, 0.848, 1.0, 0.0)] == ["99.9 %", "84.8 %", "100.0 %", "0.0 %"]
    assert pct(None) == "N/A"


def test_the_least_covered_tie_is_broken_by_name_in_one_place() -> None:
    from soak.analysis.evidence import Coverage, lowest_metric

    ratios = {"npu1": {"util_pct": 0.9, "hbm_used_bytes": 0.9}, "npu0": {"util_pct": 0.9, "temp_c": 0.95}}
    cov = Coverage(window_s=100.0, tick_s=1.0, chips_expected=2, ratios=ratios, metrics=("util_pct",))
    assert cov.worst == ("npu0", "util_pct", 0.9)
    assert lowest_metric(ratios["npu1"]) == "hbm_used_bytes" and lowest_metric({}) is None


def test_a_met_kind_criterion_with_findings_says_what_they_are() -> None:
    """"No utilization dropouts: 1 finding(s) - Met" read as a contradiction: the finding was
    explained (a declared restart phase), which the measured cell must say."""
    from soak.criteria import kind_criteria
    from soak.report.sentences import message

    found = [{"kind": "utilization_dropouts", "severity": "info"}, {"kind": "memory_creep", "severity": "warn"}]
    by_kind = {c["values"]["kind"]: c for c in kind_criteria(found, judged=True)}
    drops, creep, hang = by_kind["utilization_dropouts"], by_kind["memory_creep"], by_kind["hang"]
    assert drops["met"] and drops["measured"] == "1 finding(s): 0 failing, 0 warning, 1 explained or informational"
    assert creep["met"] and creep["measured"] == "1 finding(s): 0 failing, 1 warning, 0 explained or informational"
    assert hang["met"] and hang["measured"] == "0"
    zh = message(drops["measured_code"], drops["values"], "zh")
    assert zh == "1 个问题：失败级 0 个，告警 0 个，已解释或仅提示 1 个"


def test_no_time_down_is_said_in_words_not_as_a_zero_figure() -> None:
    from soak.report.rows import accounting_rows
    from soak.report.sentences import message

    none = {"judged_availability": 1.0, "down_s": 0.0}
    assert say("criterion.availability.measured", none).endswith("; never down unexpectedly")
    assert message("criterion.availability.measured", none, "zh").endswith("；无意外停机")
    some = {"judged_availability": 0.98, "down_s": 125.0}
    assert say("criterion.availability.measured", some).endswith("; 2 min down unexpectedly")
    acc = {"planned_s": 3600.0, "window_start": 0.0, "window_end": 3600.0, "training_s": 3600.0, "availability": 1.0,
           "judged_availability": 1.0, "unexcused_down_s": 0.0, "longest_s": 3600.0}
    rows = dict(accounting_rows(acc))
    assert rows["Down for unexpected reasons"] == "none" and dict(accounting_rows(acc, "zh"))["意外停机"] == "无"
