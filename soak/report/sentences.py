"""The detectors' and the judge's sentences re-said in the report's language.

``finding_text`` / ``reason_text`` / ``criterion_cells``: the fixed sentence shapes are
recognised and re-said in English or Chinese with the same numbers; a sentence of an unknown
shape is shown as written rather than guessed at. The cluster's shapes (links, nodes,
compute) live in ``soak.report.cluster_sentences`` and are matched from here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, tzinfo
from typing import Any

from soak.report.cluster_sentences import (
    CLUSTER_CRIT_TEXTS,
    LINK_CRIT_TEXTS,
    LINK_SENTENCES,
    link_tail,
    node_part,
    node_statuses,
)
from soak.report.i18n import t
from soak.report.names import CAUSE_NAMES, event_name, kind_name, metric_name, pick, severity_name
from soak.report.units import when

_N = r"(-?[\d.]+)"
# (pattern, English, Chinese): the detectors' summary shapes (soak.analysis.*), same numbers.
_FINDING_SENTENCES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(rf"^(\S+) creeps {_N} (\w+)/h \(90% CI {_N}\.\.{_N}\) since (onset \(change point\)|burn-in); "
                rf"\+{_N} (\w+) over the fit; (capacity unknown|exhausted in {_N} h|at this rate it runs out in {_N} h "
                rf"\((within|beyond) the required {_N} h\))$"),
     "{m0} grows {1} {2}/h (90 % CI {3}–{4}) since {since}; +{6} {7} over the fit; {left}",
     "{m0}自{since}起每小时增长 {1} {2}（90% 置信区间 {3}–{4}）；拟合期内共增长 {6} {7}；{left}"),
    (re.compile(r"^(\d+) utilization drops during declared (\S+) phases \(expected\)$"),
     "{0} utilization drops during the declared {p1} phases (expected)",
     "{0} 次利用率跌落均发生在声明的{p1}阶段内（预期内）"),
    (re.compile(rf"^(\d+) utilization drops below {_N}% (every (\d+) s \(CV {_N}\)|not periodic), mean (\d+) s, "
                rf"idle {_N}%, (on all chips at once \((\d+)% shared\): a global stall such as data loading|on this chip)$"),
     "{0} utilization drops below {1} % {period}, {5} s on average, idle {6} % of the time, {where}",
     "利用率 {0} 次跌至 {1}% 以下，{period}，平均每次 {5} 秒，空闲占 {6}%，{where}"),
    (re.compile(r"^no progress for (\d+) min( \(ongoing\))?: (.+)$"),
     "no progress for {0} min{ongoing}: {what}",
     "{0} 分钟没有进展{ongoing}：{what}"),
    (re.compile(rf"^(\S+) rising: (\d+) in the last third vs (\d+) in the first \((inf|{_N})x, p=(\S+)\), (\d+) in all$"),
     "{m0} rising: {1} in the last third of the run vs {2} in the first ({3}×, p = {5}), {6} in all",
     "{m0}呈上升趋势：最后三分之一时段 {1} 次，最初三分之一 {2} 次（{3} 倍，p = {5}），共 {6} 次"),
    (re.compile(r"^fatal (\S+) \+(\d+): a collective timed out and the job aborted$"),
     "{m0} +{1}: a collective operation timed out and the job aborted",
     "{m0} +{1}：集合通信超时，作业中止"),
    (re.compile(rf"^(\d+) excursion\(s\) above {_N} C, {_N} min in all, peak {_N} C$"),
     "{0} excursion(s) above {1} °C, {2} min in all, peak {3} °C",
     "{0} 次超过 {1} °C，共 {2} 分钟，峰值 {3} °C"),
    (re.compile(rf"^temperature drifts up {_N} C/h \(90% CI {_N}\.\.{_N}\), {_N} -> {_N} C \(hourly medians\)$"),
     "temperature drifts up {0} °C/h (90 % CI {1}–{2}), {3} → {4} °C (hourly medians)",
     "温度以每小时 {0} °C 的速度上升（90% 置信区间 {1}–{2}），{3} → {4} °C（小时中位数）"),
    (re.compile(r"^clocks throttled for ([\d.]+) min: (.+)$"),
     "clocks throttled for {0} min: {1}",
     "降频 {0} 分钟：{1}"),
    (re.compile(rf"^step time up {_N}% \(90% CI {_N}\.\.{_N}\) (abruptly|gradually \({_N} %/h\)): {_N} -> {_N} ms$"),
     "step time up {0} % (90 % CI {1}–{2}) {how}: {5} → {6} ms",
     "步时增加 {0}%（90% 置信区间 {1}–{2}），{how}：{5} → {6} ms"),
    *LINK_SENTENCES,
]

_HANG_WHAT = {
    "utilization at ~0 while HBM stays allocated": ("utilization near 0 while HBM stays allocated",
                                                    "利用率接近 0 而 HBM 仍被占用"),
    "progress heartbeats stopped while telemetry continued": ("progress heartbeats stopped while telemetry went on",
                                                              "训练心跳停止而遥测仍在继续"),
    "no progress (idle chip and no heartbeats)": ("idle chip and no heartbeats", "芯片空闲且无心跳"),
}



# The peer detector's sentences (soak.analysis.peers._make): a straggler, an outlier.
_STRAGGLER = re.compile(r"^(?:node (\S+)(?: \((.+?)\))?: )?(\w+) ([\d.]+)% (slower|lower) than its (node|cluster) "
                        r"peers' (\S+) (\S+) for ([\d.]+) h; (inf|[\d.]+) x the natural spread, confidence ([\d.]+)$")
_OUTLIER = re.compile(r"^(\w+)( growth)? ([+-]?[\d.]+) (\S+) off its (node|cluster) peers' (-?[\d.]+) (\S+)"
                      r"(?: \(([+-][\d.]+)%\))? for ([\d.]+) h( at comparable power)?; (inf|[\d.]+) x the natural "
                      r"spread, confidence ([\d.]+)$")
_SCOPE = {"node": ("on its node", "同节点"), "cluster": ("in the cluster", "集群内")}


def _unit(u: str) -> str:
    return "°C" if u == "C" else u


def peer_text(summary: str, lang: str = "en") -> str | None:
    """A straggler's or outlier's summary in ``lang`` (same numbers); None for another shape."""
    zh = lang == "zh"
    m = _STRAGGLER.match(summary)
    if m:
        node, members, metric, pct_, how, scope, base, unit, hours, z, conf = m.groups()
        z = "∞" if z == "inf" else z
        who = ""
        if node:
            who = (f"节点 {node}" + (f"（{members}）" if members else "") + "：") if zh else (
                f"node {node}" + (f" ({members})" if members else "") + ": ")
        if zh:
            word = "慢" if how == "slower" else "低"
            return (f"{who}{metric_name(metric, lang)}比{pick(_SCOPE, scope, lang)}同类的 {base} {_unit(unit)} "
                    f"{word} {pct_}%，持续 {hours} 小时（自然离散度的 {z} 倍，置信度 {conf}）")
        return (f"{who}{metric_name(metric, lang)} {pct_} % {how} than its peers {pick(_SCOPE, scope, lang)} "
                f"({base} {_unit(unit)}) for {hours} h ({z}× the natural spread, confidence {conf})")
    m = _OUTLIER.match(summary)
    if m:
        metric, growth, dev, unit, scope, base, _u2, pct_, hours, power, z, conf = m.groups()
        z = "∞" if z == "inf" else z
        share = f" ({pct_} %)" if pct_ else ""
        if zh:
            return (f"{metric_name(metric, lang)}{'增长' if growth else ''}偏离{pick(_SCOPE, scope, lang)}同类的 "
                    f"{base} {_unit(unit)}，偏差 {dev} {_unit(unit)}{share.replace(' (', '（').replace(')', '）')}，"
                    f"持续 {hours} 小时{'（功耗相当）' if power else ''}（自然离散度的 {z} 倍，置信度 {conf}）")
        return (f"{metric_name(metric, lang)}{' growth' if growth else ''} {dev} {_unit(unit)} off its peers "
                f"{pick(_SCOPE, scope, lang)} ({base} {_unit(unit)}){share} for {hours} h"
                f"{' at comparable power' if power else ''} ({z}× the natural spread, confidence {conf})")
    return None


def finding_text(summary: str | None, lang: str = "en") -> str:
    """A finding's summary re-said in ``lang`` with readable names and units."""
    if not summary:
        return "N/A"
    zh = lang == "zh"
    peer = peer_text(summary, lang)
    if peer is not None:
        return peer
    for pattern, en_tpl, zh_tpl in _FINDING_SENTENCES:
        m = pattern.match(summary)
        if not m:
            continue
        g = [x or "" for x in m.groups()]
        extra: dict[str, str] = {"m0": metric_name(g[0], lang)}
        if pattern is _FINDING_SENTENCES[0][0]:
            change = g[5].startswith("onset")
            extra["since"] = ("变化点" if change else "老化期结束") if zh else ("its onset (change point)" if change else "the burn-in")
            if g[8].startswith("capacity"):
                extra["left"] = "容量未知" if zh else "capacity unknown"
            elif g[9]:
                extra["left"] = f"约 {g[9]} 小时后耗尽" if zh else f"full in about {g[9]} h"
            else:  # "runs out in N h (within|beyond the required R h)"
                inside = g[11] == "within"
                extra["left"] = (f"按此速率约 {g[10]} 小时后耗尽（{'在' if inside else '超出'}要求的 {g[12]} 小时{'内' if inside else ''}）"
                                 if zh else f"at this rate full in about {g[10]} h ({g[11]} the required {g[12]} h)")
        elif pattern is _FINDING_SENTENCES[1][0]:
            extra["p1"] = event_name(g[1], lang)
        elif pattern is _FINDING_SENTENCES[2][0]:
            extra["period"] = ((f"每 {g[3]} 秒一次（CV {g[4]}）" if zh else f"every {g[3]} s (CV {g[4]})") if g[3]
                               else ("无周期" if zh else "not periodic"))
            extra["where"] = ((f"所有芯片同时发生（{g[8]}% 重合）：全局停顿，如数据加载" if zh
                               else f"on all chips at once ({g[8]} % shared): a global stall such as data loading")
                              if g[8] else ("仅本芯片" if zh else "on this chip only"))
        elif pattern is _FINDING_SENTENCES[3][0]:
            extra["ongoing"] = ("（仍在持续）" if zh else " (ongoing)") if g[1] else ""
            pair = _HANG_WHAT.get(g[2])
            extra["what"] = g[2] if pair is None else pair[1 if zh else 0]
        elif any(pattern is p for p, _, _ in LINK_SENTENCES):
            extra["tail"] = link_tail(g[-1], lang)
            if pattern is LINK_SENTENCES[2][0]:
                extra["who"] = f"节点 {g[1]}：其链路的 " if g[1] else f"链路 {g[2]} – {g[3]}："
        elif pattern is _FINDING_SENTENCES[9][0]:
            extra["how"] = (("突然上升" if zh else "abruptly") if g[3] == "abruptly"
                            else (f"逐渐上升（每小时 {g[4]}%）" if zh else f"gradually ({g[4]} %/h)"))
        return (zh_tpl if zh else en_tpl).format(*g, **extra)
    return summary


_REASON_FINDING = re.compile(r"^(FAIL|WARN) (\w+) on (node \S+|\S+) from (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)Z: (.*)$")
_REASONS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^no failing or warning findings$"), "无失败级或告警级问题"),
    (re.compile(r"^runtime: the run ended after (.+) of its planned (.+)$"), "运行时长：运行 {0} 后即结束，计划为 {1}"),
    (re.compile(r"^availability: no workload trained during the run$"), "可用率：运行期间没有负载在训练"),
    (re.compile(r"^availability: (.+) without training \((.+)\); (\S+) < (\S+)$"),
     "可用率：{0} 未在训练（{c1}）；{2} < {3}"),
    (re.compile(r"^longest uninterrupted training (.+) < (.+)$"), "最长连续训练 {0} < {1}"),
    (re.compile(r"^restarts: (.+)$"), "非注入的崩溃或挂起：{0}"),
    (re.compile(r"^evidence: no chip was read during the run(.*)$"), "数据证据：运行期间没有读到任何芯片{0}"),
    (re.compile(r"^evidence: only (\d+) of (\d+) expected chips were read(.*)$"),
     "数据证据：预期 {1} 颗芯片，只读到 {0} 颗{2}"),
    (re.compile(r"^evidence: readings cover less than (\S+) on (\d+) chip\(s\): (.*)$"),
     "数据证据：{1} 颗芯片的读数覆盖率低于 {0}：{2}"),
    (re.compile(r"^preflight: (.*)$"), "预检：{0}"),
    (re.compile(r"^run failed: (.*)$"), "运行失败：{0}"),
    (re.compile(r"^run stopped before its planned end(.*): not judged$"), "运行在计划结束前被停止{0}：不作判定"),
]


def _causes(text: str, lang: str) -> str:
    """"1 injected crash, 2 hang" in ``lang``."""
    if lang != "zh":
        return text
    out = []
    for part in text.split(", "):
        m = re.match(r"^(\d+) (injected )?(.+)$", part)
        if not m:
            out.append(part)
            continue
        out.append(f"{m.group(1)} 次{'注入的' if m.group(2) else ''}{pick(CAUSE_NAMES, m.group(3), 'zh')}")
    return "，".join(out)


def reason_text(reason: str, lang: str = "en", tz: tzinfo = UTC) -> str:
    """One reason of the verdict in ``lang``; a finding's reason with its time in ``tz``."""
    m = _REASON_FINDING.match(reason)
    if m:
        sev, kind, dev, at, summary = m.groups()
        ts = datetime.strptime(at, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
        if lang == "zh":
            dev = f"节点 {dev[5:]}" if dev.startswith("node ") else dev
            return f"{severity_name(sev.lower(), lang)}：{dev} 的{kind_name(kind, lang)}，自 {when(ts, tz)} 起：{finding_text(summary, lang)}"
        return f"{kind_name(kind, lang)} on {dev} from {when(ts, tz)}: {finding_text(summary, lang)}"
    if lang != "zh":
        return reason
    if reason.startswith("nodes: "):
        return "节点：" + "；".join(node_part(p) for p in reason[7:].split("; "))
    for pattern, zh in _REASONS:
        m = pattern.match(reason)
        if m:
            g = list(m.groups())
            return zh.format(*g, c1=_causes(g[1], lang) if len(g) > 1 else "")
    return reason



_CRIT_NAMES = {
    "runtime": ("Runtime", "运行时长"),
    "availability": ("Availability", "可用率"),
    "longest uninterrupted": ("Longest uninterrupted training", "最长连续训练"),
    "crashes and hangs": ("Crashes and hangs", "崩溃与挂起"),
    "evidence coverage": ("Evidence coverage", "数据覆盖率"),
    "preflight": ("Preflight", "预检"),
    "nodes": ("Nodes", "节点"),
    "links": ("Links between nodes", "节点间链路"),
    "compute": ("Compute (GEMM rate)", "算力（GEMM 速率）"),
}
_CRIT_TEXTS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"^>= (.+) planned$"), "≥ {0} (planned)", "≥ 计划的 {0}"),
    (re.compile(r"^>= (\S+) \(start-up and injected faults excepted\)$"),
     "≥ {0} (start-up and injected faults excepted)", "≥ {0}（不计启动与注入故障）"),
    (re.compile(r"^>= (\S+) of the soak, every chip and metric$"),
     "≥ {0} of the soak, every chip and metric", "每颗芯片每项指标 ≥ 拷机时长的 {0}"),
    (re.compile(r"^<= (\d+) not injected$"), "≤ {0} not injected", "非注入的 ≤ {0}"),
    (re.compile(r"^>= (.+)$"), "≥ {0}", "≥ {0}"),
    (re.compile(r"^reported$"), "reported", "仅报告"),
    (re.compile(r"^pass$"), "pass", "通过"),
    (re.compile(r"^warn$"), "pass (with warnings)", "通过（有告警）"),
    (re.compile(r"^fail$"), "fail", "未通过"),
    (re.compile(r"^0 fail$"), "0 failing", "0 个失败级"),
    (re.compile(r"^0$"), "none", "无"),
    (re.compile(r"^(\d+) finding\(s\)$"), "{0} finding(s)", "{0} 个问题"),
    (re.compile(r"^not recorded$"), "not recorded", "未记录"),
    (re.compile(r"^ran (.+) of (.+), training (.+)$"), "ran {0} of {1}, training {2}", "运行 {0}（计划 {1}），其中训练 {2}"),
    (re.compile(r"^(\S+) judged; trained (.+) of (.+) planned \((\S+)\); (.+) down unexpectedly(?: \((.+)\))?$"),
     "{0} judged; trained {1} of {2} planned ({3}); {4} down unexpectedly{c5}",
     "判定 {0}；计划 {2} 中训练 {1}（{3}）；意外停机 {4}{c5}"),
    (re.compile(r"^(\d+) uninjected crash/hang(?:, (\d+) injected \(expected canary\))?$"),
     "{0} not injected{inj}", "非注入的 {0} 次{inj}"),
    (re.compile(r"^lowest (\S+) \((\S+) (\S+)\); (\d+) chips x (\d+) metrics$"),
     "lowest {0} ({1} {m2}); {3} chips × {4} metrics", "最低 {0}（{1} {m2}）；{3} 颗芯片 × {4} 项指标"),
    (re.compile(r"^(\d+) of (\d+) chips read$"), "{0} of {1} chips read", "读到 {0} / {1} 颗芯片"),
    (re.compile(r"^no chip readings at all$"), "no chip readings at all", "没有任何芯片读数"),
    *LINK_CRIT_TEXTS,
    *CLUSTER_CRIT_TEXTS,
]


def criterion_name(name: str, lang: str = "en") -> str:
    if name.startswith("no ") and name.endswith(" (fail)"):
        kind = kind_name(name[3:-7], lang)
        return f"无失败级{kind}" if lang == "zh" else f"No failing {kind}"
    return pick(_CRIT_NAMES, name, lang)


def criterion_value(text: str | None, lang: str = "en") -> str:
    """A criterion's required or measured value as the judge writes it, in ``lang``."""
    if text is None:
        return "N/A"
    zh = lang == "zh"
    for pattern, en_tpl, zh_tpl in _CRIT_TEXTS:
        m = pattern.match(text)
        if not m:
            continue
        g = [x or "" for x in m.groups()]
        extra = {"c5": "", "inj": "", "m2": "", "tail": "", "st": ""}
        if "{st}" in en_tpl and g[3]:
            extra["st"] = f"；{node_statuses(g[3])}" if zh else f"; {g[3]}"
        if "{c5}" in en_tpl and g[5]:
            extra["c5"] = f"（{_causes(g[5], lang)}）" if zh else f" ({g[5]})"
        if "{inj}" in en_tpl and g[1]:
            extra["inj"] = f"，注入的 {g[1]} 次（预期的演练故障）" if zh else f", {g[1]} injected (expected canary)"
        if "{m2}" in en_tpl:
            extra["m2"] = metric_name(g[2], lang)
        if "{tail}" in en_tpl:
            extra["tail"] = link_tail(g[-1], lang)
        return (zh_tpl if zh else en_tpl).format(*g, **extra)
    return text


def met_word(met: bool | None, lang: str = "en") -> str:
    """One casing everywhere: "Met" / "Missed" / "Not judged"."""
    return t({True: "met_yes", False: "met_no", None: "met_na"}[met], lang)


def criterion_cells(c: Any, lang: str = "en") -> tuple[str, str, str, str]:
    """(name, required, measured, met) of a ``Criterion`` for a table row."""
    return criterion_name(c.name, lang), criterion_value(c.required, lang), criterion_value(c.measured, lang), met_word(c.met, lang)

