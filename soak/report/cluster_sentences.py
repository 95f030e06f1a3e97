"""What the report says about the nodes of a cluster and the links between them.

The links test's criterion and findings (``soak.judge``, ``soak.analysis.links``), the judge's
"nodes: ..." reason, the nodes and compute criteria, and the links tables with their
introduction. The single-node sentences (``soak.report.sentences``) include these shapes in
their own lists, in the same order as before, so a sentence is recognised the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from soak.report.names import NODE_STATUS_NAMES, pick
from soak.report.units import num, pct

# The links criterion and findings (soak.judge._links_criterion, soak.analysis.links).
LINK_CRIT_TEXTS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"^no node or pair more than (\S+) below the others; every pair >= (\S+) GB/s \((\S+): expected (\S+) GB/s\)$"),
     "no node or pair more than {0} below the others; every pair ≥ {1} GB/s ({2}: expected {3} GB/s)",
     "没有节点或节点对低于其他的 {0} 以上；每对 ≥ {1} GB/s（{2}：预期 {3} GB/s）"),
    (re.compile(r"^no node or pair more than (\S+) below the others \((\S+): no expected figure, relative rule only\)$"),
     "no node or pair more than {0} below the others ({1}: no expected figure, relative rule only)",
     "没有节点或节点对低于其他的 {0} 以上（{1}：无预期值，仅作相对比较）"),
    (re.compile(r"^no node or pair more than (\S+) below the others$"),
     "no node or pair more than {0} below the others", "没有节点或节点对低于其他的 {0} 以上"),
    (re.compile(r"^no link test recorded: links not judged( yet)?$"),
     "no link test recorded: links not judged{0}", "没有链路测试记录：链路不作判定"),
    (re.compile(r"^(\d+) pair\(s\) of (\d+) nodes in (\d+) test\(s\): median (\S+) GB/s, lowest (\S+) (\S+) GB/s(.*)$"),
     "{0} pair(s) of {1} nodes in {2} test(s): median {3} GB/s, lowest {4} {5} GB/s{tail}",
     "{1} 个节点的 {0} 对，共 {2} 次测试：中位数 {3} GB/s，最低 {4} {5} GB/s{tail}"),
]
LINK_SENTENCES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"^node (\S+): its links' all-reduce busbw (\S+) GB/s \(upper median of its (\d+) pair\(s\), "
                r"median of (\d+) test\(s\)\), (\d+)% below the pairs without it, test by test "
                r"\(their median over all tests (\S+) GB/s\)(.*)$"),
     "node {0}: all-reduce busbw of its links {1} GB/s (upper median of its {2} pair(s), median of {3} test(s)), "
     "{4} % below the pairs without it, test by test (their median over all tests {5} GB/s){tail}",
     "节点 {0}：其链路的 all-reduce 总线带宽 {1} GB/s（其 {2} 对的上中位数，{3} 次测试的中位数），"
     "逐次测试比不含它的节点对低 {4}%（这些节点对所有测试的中位数 {5} GB/s）{tail}"),
    (re.compile(r"^link (\S+) - (\S+): all-reduce busbw (\S+) GB/s \(median of (\d+) test\(s\)\), (\d+)% below "
                r"the other pairs, test by test \(their median over all tests (\S+) GB/s\)(.*)$"),
     "link {0} – {1}: all-reduce busbw {2} GB/s (median of {3} test(s)), {4} % below the other pairs, "
     "test by test (their median over all tests {5} GB/s){tail}",
     "链路 {0} – {1}：all-reduce 总线带宽 {2} GB/s（{3} 次测试的中位数），逐次测试比其他节点对低 {4}%"
     "（其他节点对所有测试的中位数 {5} GB/s）{tail}"),
    (re.compile(r"^(node (\S+): its links'|link (\S+) - (\S+):) all-reduce busbw (\S+) GB/s \((.*)\), below the floor "
                r"(\S+) GB/s \((\d+)% of the expected (\S+) GB/s for (\S+)\)(.*)$"),
     "{0} all-reduce busbw {4} GB/s ({5}), below the floor {6} GB/s ({7} % of the expected {8} GB/s for {9}){tail}",
     "{who}all-reduce 总线带宽 {4} GB/s，低于下限 {6} GB/s（{9} 预期 {8} GB/s 的 {7}%）{tail}"),
]


def link_tail(text: str, lang: str) -> str:
    """The end of a links sentence (who is named, an injected fault, two nodes) in ``lang``."""
    if lang != "zh" or not text:
        return text
    text = text.replace(" (two nodes: no other pair to compare with)", "（两个节点：没有可比较的其他节点对）")
    text = text.replace(" (one node: no other node to compare with)", "（单节点：没有可比较的其他节点）")
    text = re.sub(r" \(injected: (.+)\)$", r"（注入：\1）", text)
    return re.sub(r"^; ", "；", text).replace("node ", "节点 ")



_NODE_PARTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^node (\S+) \(rank (\d+)\) (\w+)( \(came back later\))?$"), "节点 {0}（rank {1}）{s2}{back}"),
    (re.compile(r"^(\d+) node\(s\) never joined$"), "{0} 个节点未加入"),
    (re.compile(r"^(\d+) node\(s\) did not finish$"), "{0} 个节点未运行到结束"),
]


def node_part(part: str) -> str:
    """One part of the judge's "nodes: ..." reason in Chinese."""
    for pattern, zh in _NODE_PARTS:
        m = pattern.match(part)
        if m:
            g = [x or "" for x in m.groups()]
            s2 = pick(NODE_STATUS_NAMES, g[2], "zh") if len(g) > 2 else ""
            return zh.format(*g, s2=s2, back="（后来恢复）" if len(g) > 3 and g[3] else "")
    return part


def node_statuses(text: str) -> str:
    """"node-1 lost, node-2 failed" in Chinese."""
    out = []
    for part in text.split(", "):
        name, _, status = part.rpartition(" ")
        out.append(f"{name} {pick(NODE_STATUS_NAMES, status, 'zh')}" if name else part)
    return "，".join(out)


# The compute and nodes criteria, after the links criterion in the judge's table.
CLUSTER_CRIT_TEXTS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"^no node more than (\S+) below the other nodes; every chip >= (\S+) TFLOP/s \((\S+): dense 16-bit "
                r"peak (\S+), (.+)\)$"),
     "no node more than {0} below the other nodes; every chip ≥ {1} TFLOP/s ({2}: dense 16-bit peak {3}, {4})",
     "没有节点低于其他节点 {0} 以上；每颗芯片 ≥ {1} TFLOP/s（{2}：16 位稠密峰值 {3}，{4}）"),
    (re.compile(r"^no node more than (\S+) below the other nodes \((.+): no expected figure, relative rule only\)$"),
     "no node more than {0} below the other nodes ({1}: no expected figure, relative rule only)",
     "没有节点低于其他节点 {0} 以上（{1}：无预期值，仅作相对比较）"),
    (re.compile(r"^(\d+) rank\(s\) on (\d+) node\(s\): median (\S+) TFLOP/s, lowest ([^;\s]+)(.*)$"),
     "{0} rank(s) on {1} node(s): median {2} TFLOP/s, lowest {3}{tail}",
     "{1} 个节点上 {0} 个进程：中位数 {2} TFLOP/s，最低 {3}{tail}"),
    (re.compile(r"^all (\d+) to the end$"), "all {0} to the end", "全部 {0} 个节点运行到结束"),
    (re.compile(r"^(\d+) of (\d+) joined, (\d+) finished(?:; (.+))?$"),
     "{0} of {1} joined, {2} finished{st}", "已加入 {0} / {1}，完成 {2}{st}"),
]


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
    x = pct(links.get("max_below_median_frac"), 0)
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
    return "N/A" if ratio is None else f"{100 * ratio:.0f}%"


def _vs_expected(busbw: float | None, links: Mapping[str, Any]) -> str:
    exp = links.get("expected_gbps")
    return "N/A" if busbw is None or not exp else f"{100 * busbw / exp:.0f}%"


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
