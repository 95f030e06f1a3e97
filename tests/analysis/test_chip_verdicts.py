"""Each chip's and node's verdict of a cluster run, decided once from the judge's coverage."""

from __future__ import annotations

from dataclasses import dataclass

from soak.analysis.chip_verdicts import (
    PlacedFinding,
    chip_count,
    chip_verdict,
    cluster_chips,
    min_coverage_of,
)
from soak.analysis.profile import EvidenceParams


@dataclass(frozen=True)
class _Node:
    name: str
    rank: int
    chips: int = 2
    status: str = "finished"
    preflight: str | None = "pass"


FULL = {"util_pct": 1.0, "temp_c": 1.0}


def test_chip_verdict_is_fail_warn_pass_or_no_data():
    assert chip_verdict([], None, 0.95, read=False) == "nodata"
    assert chip_verdict(["warn", "fail"], 1.0, 0.95, read=True) == "fail"
    assert chip_verdict([], 0.9, 0.95, read=True) == "fail"  # the judge fails the run for it too
    assert chip_verdict(["warn", "info"], 0.99, 0.95, read=True) == "warn"
    assert chip_verdict(["info"], None, 0.95, read=True) == "pass"


def test_a_lost_nodes_chips_read_before_it_was_lost_but_not_counted_by_the_judge_are_no_data():
    # node-0 was lost mid-run: its chips have readings in the store, but the judge's
    # coverage holds none of them ("only 4 of 6 expected chips were read")
    nodes = [_Node("node-0", 0, status="lost"), _Node("node-1", 1), _Node("node-2", 2)]
    read = [(f"node-{n}", c) for n in range(3) for c in ("npu0-0", "npu0-1")] + [("node-0", "host")]
    coverage = {"chips_expected": 6, "chips_seen": 4,
                "ratios": {f"node-{n}/{c}": FULL for n in (1, 2) for c in ("npu0-0", "npu0-1")}}
    out = cluster_chips(nodes, read, [], coverage=coverage, min_coverage=0.95, nodes_planned=3, lost_ever={"node-0"})
    assert chip_count(coverage) == (6, 4) and len(out.chips) == 6
    assert [(c.node, c.chip, c.verdict, c.code) for c in out.chips if c.node == "node-0"] == [
        ("node-0", "npu0-0", "nodata", "unread"), ("node-0", "npu0-1", "nodata", "unread")]
    assert [n.verdict for n in out.nodes] == ["fail", "pass", "pass"]
    assert [r.code for r in out.nodes[0].reasons] == ["node.status", "node.unread"]


def test_a_chip_read_too_little_fails_on_the_profiles_threshold_and_its_node_with_it():
    nodes = [_Node("a", 0), _Node("b", 1)]
    coverage = {"chips_expected": 4, "chips_seen": 4,
                "ratios": {"a/x0": FULL, "a/x1": {"util_pct": 0.9, "temp_c": 1.0}, "b/x0": FULL, "b/x1": FULL}}
    read = [("a", "x0"), ("a", "x1"), ("b", "x0"), ("b", "x1")]
    strict = cluster_chips(nodes, read, [], coverage=coverage, min_coverage=0.95)
    lenient = cluster_chips(nodes, read, [], coverage=coverage, min_coverage=0.8)
    assert [(c.chip, c.verdict, c.code) for c in strict.chips if c.node == "a"] == [
        ("x0", "pass", "ok"), ("x1", "fail", "coverage")]
    assert [n.verdict for n in strict.nodes] == ["fail", "pass"]
    assert [n.verdict for n in lenient.nodes] == ["pass", "pass"]


def test_a_node_that_declared_fewer_chips_than_its_share_still_shows_the_judges_count():
    # the judge expects 2 chips per node; node b joined without saying how many it has and read none
    nodes = [_Node("a", 0), _Node("b", 1, chips=0)]
    coverage = {"chips_expected": 4, "chips_seen": 2, "ratios": {"a/x0": FULL, "a/x1": FULL}}
    out = cluster_chips(nodes, [("a", "x0"), ("a", "x1")], [PlacedFinding("straggler", "warn", "a", "lm-rank0")],
                        coverage=coverage, min_coverage=0.95, nodes_planned=2)
    assert [(c.node, c.verdict) for c in out.chips] == [("a", "pass"), ("a", "pass"), ("b", "nodata"), ("b", "nodata")]
    assert [(n.name, n.verdict) for n in out.nodes] == [("a", "warn"), ("b", "fail")]


def test_the_coverage_threshold_is_the_profiles():
    assert min_coverage_of({"evidence": {"min_coverage": 0.8}}) == 0.8
    assert min_coverage_of(None) == EvidenceParams().min_coverage
