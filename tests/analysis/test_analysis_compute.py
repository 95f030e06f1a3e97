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
    from soak.criteria import compute_criterion
    from soak.report.loader import criterion_view
    from soak.report.model import Message
    from soak.report.sentences import criterion_cells, reason_text

    healthy = {f"n{i}": [600.0 + 7 * ((i + r) % 5) for r in range(8)] for i in range(4)}
    rates = [cp.RankRate(n, "gemm", 8 * i + r, v * (0.85 if n == "n2" else 1.0), 10, 100.0, 200.0)
             for i, (n, vals) in enumerate(healthy.items()) for r, v in enumerate(vals)]
    reasons: list = []
    crit = criterion_view(compute_criterion(cp.evaluate(rates, "H100"), reasons))
    name, required, measured, met = criterion_cells(crit, "zh")
    assert name == "算力（GEMM 速率）" and met == "未达标"
    assert required.startswith("没有节点低于其他节点 10% 以上；每颗芯片 ≥ 494 TFLOP/s（H100：16 位稠密峰值 989")
    assert measured.startswith("4 个节点上 32 个 rank：中位数 ") and measured.endswith("；节点 n2")
    assert crit.measured.startswith("32 rank(s) on 4 node(s): median ") and crit.measured.endswith("; node n2")
    (reason,) = reasons
    zh = reason_text(Message(str(reason), reason.code, reason.values), "zh")
    assert zh.startswith("算力：节点 n2：GEMM 速率 ") and "低 15%" in zh and "below" not in zh
