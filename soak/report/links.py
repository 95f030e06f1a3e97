"""The links between the nodes of a cluster as the report shows them: the busbw tables of
the pairwise link test (``soak.analysis.links``) and their introduction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soak.report.names import pick
from soak.report.units import num, pct

# -- links between nodes (the pairwise link test: soak.analysis.links) --------------------------

_LINK_STATUS = {"ok": ("ok", "正常"), "slow": ("slow", "偏慢"), "slow node": ("slow node", "所属节点偏慢"),
                "below floor": ("below floor", "低于下限")}


def link_status(status: str | None, lang: str = "en") -> str:
    return pick(_LINK_STATUS, status, lang)


def links_intro(links: Mapping[str, Any] | None, lang: str = "en") -> str:
    """What the busbw tables compare with: the chip model's figure and its source, the floor,
    the relative rule."""
    if not links:
        return ""
    zh = lang == "zh"
    x = pct(links.get("max_below_median_frac"))
    n = int(links.get("tests") or 0)
    if zh:
        text = (f"每对节点各出一个进程做 all-reduce，总线带宽按 nccl-tests 定义（两进程时等于 algbw）；共 {n} 次测试，"
                f"每对取中位数。相对规则：逐次测试，节点或节点对比其他的低 {x} 以上即未通过。")
    else:
        text = (f"One rank on each node of a pair all-reduces; busbw as nccl-tests defines it (equal to algbw for "
                f"two ranks); {n} test(s), each pair's median. Relative rule: a node or pair more than {x} below "
                f"the others, test by test, fails.")
    chip, exp, floor = links.get("chip"), links.get("expected_gbps"), links.get("floor_gbps")
    source = links.get("expected_source") or ""
    if exp is not None:
        text += (f" 绝对下限：{chip} 预期 {num(exp)} GB/s（来源：{source}），下限 {num(floor)} GB/s。" if zh
                 else f" Absolute floor: {chip} expected {num(exp)} GB/s (source: {source}), floor {num(floor)} GB/s.")
    elif chip:
        text += (f" {chip} 无固定预期值（{source}），仅作相对比较。" if zh
                 else f" {chip}: no fixed expected figure ({source}); relative rule only.")
    return text


def _vs(ratio: float | None) -> str:
    return pct(ratio)


def _vs_expected(busbw: float | None, links: Mapping[str, Any]) -> str:
    exp = links.get("expected_gbps")
    return "N/A" if busbw is None or not exp else pct(busbw / exp)


def link_pair_rows(links: Mapping[str, Any] | None, lang: str = "en") -> list[tuple[str, str, str, str, str, str]]:
    """(pair, busbw GB/s, tests, vs the cluster median, vs expected, status) per tested pair."""
    out = []
    for p in (links or {}).get("pairs") or []:
        out.append((f"{p.get('a')} – {p.get('b')}", num(p.get("busbw_gbps")), str(p.get("tests") or 0),
                    _vs(p.get("vs_median")), _vs_expected(p.get("busbw_gbps"), links or {}),
                    link_status(p.get("status"), lang)))
    return out


def link_node_rows(links: Mapping[str, Any] | None, lang: str = "en") -> list[tuple[str, str, str, str, str, str]]:
    """(node, busbw GB/s: upper median of its pairs, pairs, vs the median, vs expected, status)."""
    out = []
    for n in (links or {}).get("nodes") or []:
        out.append((str(n.get("node")), num(n.get("busbw_gbps")), str(n.get("pairs") or 0), _vs(n.get("vs_median")),
                    _vs_expected(n.get("busbw_gbps"), links or {}), link_status(n.get("status"), lang)))
    return out


def links_shown(links: Mapping[str, Any] | None, max_pairs: int) -> tuple[Mapping[str, Any] | None, int]:
    """``links`` with at most ``max_pairs`` pairs for a page: every pair not ok, then the
    lowest of the others; and how many were left out (all ok). 16 nodes have 120 pairs."""
    pairs = list((links or {}).get("pairs") or [])
    if links is None or len(pairs) <= max_pairs:
        return links, 0
    bad = [p for p in pairs if p.get("status") != "ok"]
    ok = sorted((p for p in pairs if p.get("status") == "ok"), key=lambda p: p.get("busbw_gbps") or 0.0)
    keep = bad + ok[: max(0, max_pairs - len(bad))]
    order = {id(p): i for i, p in enumerate(pairs)}
    keep.sort(key=lambda p: order[id(p)])
    return {**links, "pairs": keep}, len(pairs) - len(keep)
