"""The compute check: a chip below its model's GEMM floor, a node behind the others."""

from __future__ import annotations

from soak.analysis import compute as cp
from soak.analysis.profile import Profile, chip_of


def _rates(per_node: dict[str, list[float]]) -> list[cp.RankRate]:
    out, rank = [], 0
    for node, values in per_node.items():
        for v in values:
            out.append(cp.RankRate(node, "gemm", rank, v, 10, 100.0, 200.0))
            rank += 1
    return out


def test_a_node_12pct_behind_the_others_is_named_and_healthy_spread_is_not() -> None:
    healthy = {f"n{i}": [600.0 + 7 * ((i + r) % 5) for r in range(8)] for i in range(4)}
    v = cp.evaluate(_rates(healthy), "H100")
    assert v.findings == () and {n.status for n in v.nodes} == {"ok"}
    slow = dict(healthy, n2=[x * 0.88 for x in healthy["n2"]])
    v = cp.evaluate(_rates(slow), "H100")
    assert [(f.node, f.device, f.metric, f.severity) for f in v.findings] == [("n2", None, "tflops", "fail")]
    assert -14 < v.findings[0].details["deviation_pct"] < -10
    assert [n.status for n in v.nodes] == ["ok", "ok", "slow", "ok"]


def test_a_chip_below_half_its_peak_fails_on_the_floor_with_the_source() -> None:
    v = cp.evaluate(_rates({"n0": [700.0, 420.0, 710.0]}), "H200")
    assert v.floor_tflops == 989.0 * 0.5 and "datasheet" in v.expected_source
    assert [(f.device, f.details["rule"]) for f in v.findings] == [("gemm-rank1", "floor")]
    assert v.nodes[0].status == "below floor"


def test_cpu_has_no_floor_and_one_node_no_relative_rule() -> None:
    v = cp.evaluate(_rates({"n0": [0.05, 0.01]}), "CPU")
    assert v.floor_tflops is None and v.findings == ()


def test_profile_sets_the_compute_rules() -> None:
    p = Profile.from_dict({"compute": {"max_below_median_frac": 0.3, "min_expected_frac": 0.2}})
    slow = {"n0": [600.0], "n1": [610.0], "n2": [520.0]}
    assert cp.evaluate(_rates(slow), "H100", p).findings == ()
    assert len(cp.evaluate(_rates(slow), "H100").findings) == 1


def test_chip_model_comes_from_the_manifest() -> None:
    assert chip_of({"nvidia": {"gpus": [{"name": "NVIDIA H200"}]}}, "cuda") == "H200"
    assert chip_of({"npu": {"cards": [{"name": "910B3"}]}}, "npu") == "910B"
    assert chip_of(None, "cpu") == "CPU" and chip_of({}, "npu") is None


def test_compute_criterion_reads_in_chinese_with_the_same_numbers() -> None:
    from soak.report.sentences import criterion_name, criterion_value

    assert criterion_name("compute", "zh") == "算力（GEMM 速率）"
    assert criterion_value("8 rank(s) on 3 node(s): median 600 TFLOP/s, lowest 500; node n2", "zh") == (
        "3 个节点上 8 个进程：中位数 600 TFLOP/s，最低 500；节点 n2")
