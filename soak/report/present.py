"""What the report says, as text a customer can read: the PDF and the app both call this.

The analysis writes machine values (unix seconds, bytes per hour, dotted keys, English
sentences with metric names). Here they become times in the run's own time zone, rates with
units, numbers rounded to what they mean, and sentences in English or Chinese:

- ``finding_text`` / ``reason_text`` / ``criterion_cells``: the detectors' and the judge's
  fixed sentence shapes are recognised and re-said in the report's language (with the same
  numbers); a sentence of an unknown shape is shown as written rather than guessed at;
- ``evidence_rows``: a finding's evidence (CI, onset, method, ...) as label/value pairs;
- ``event_rows``: the event timeline, routine events (checkpoints) condensed into one line;
- ``threshold_text``: a detector's thresholds, declared phases summarised;
- ``manifest_rows``: the environment manifest with one row per fact;
- ``accounting_rows`` / ``interruption_rows`` / ``coverage_rows``: where the planned time went
  and how well each chip was read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

from soak.report.i18n import t
from soak.report.model import EventView, FindingView, fmt_bytes

# -- time ------------------------------------------------------------------------------------


def run_zone(name: str | None = None, utc_offset_s: float | None = None) -> tzinfo:
    """The run's time zone: its IANA name when the host had one, else its UTC offset, else UTC."""
    if name:
        try:
            from zoneinfo import ZoneInfo

            return ZoneInfo(name)
        except (KeyError, ValueError, OSError, ImportError):
            pass
    if utc_offset_s is not None:
        return timezone(timedelta(seconds=int(utc_offset_s)))
    return UTC


def zone_label(tz: tzinfo, at: float | None = None) -> str:
    """"Asia/Shanghai (UTC+08:00)", or "UTC"."""
    moment = datetime.fromtimestamp(at or 0.0, tz=tz)
    off = moment.utcoffset() or timedelta(0)
    if off == timedelta(0) and str(tz) in ("UTC", "UTC+00:00", "Etc/UTC"):
        return "UTC"
    total = int(off.total_seconds())
    sign = "+" if total >= 0 else "-"
    hh, mm = divmod(abs(total) // 60, 60)
    offset = f"UTC{sign}{hh:02d}:{mm:02d}"
    key = getattr(tz, "key", None)
    return f"{key} ({offset})" if key else offset


def when(ts: float | None, tz: tzinfo = UTC, *, seconds: bool = False) -> str:
    """A moment as a date and time in ``tz`` ("2026-11-30 22:33"); None is "N/A"."""
    if ts is None or (isinstance(ts, float) and not math.isfinite(ts)):
        return "N/A"
    return datetime.fromtimestamp(ts, tz=tz).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def span(a: float | None, b: float | None, tz: tzinfo = UTC) -> str:
    """"2026-11-30 22:33 – 23:10" (the date once when both ends share it)."""
    if a is None or b is None:
        return f"{when(a, tz)} – {when(b, tz)}"
    left, right = when(a, tz), when(b, tz)
    if left[:10] == right[:10]:
        right = right[11:]
    return f"{left} – {right}"


def dur(seconds: float | None) -> str:
    """A duration rounded to what it means: "45 s", "12 min", "2 h 05 min", "3 d 4 h"."""
    if seconds is None or (isinstance(seconds, float) and not math.isfinite(seconds)):
        return "N/A"
    s = abs(float(seconds))
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        h, m = divmod(int(round(s / 60)), 60)
        return f"{h} h {m:02d} min"
    d, h = divmod(int(round(s / 3600)), 24)
    return f"{d} d {h} h"


def num(x: float | None, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, no exponent for everyday sizes."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "N/A"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    ax = abs(x)
    if ax == 0:
        return "0"
    if ax >= 10 ** digits:
        return f"{x:.0f}"
    if ax < 1e-3:
        return f"{x:.1e}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(ax))))
    return f"{x:.{decimals}f}"


def pct(share: float | None, digits: int = 1) -> str:
    return "N/A" if share is None else f"{100 * share:.{digits}f} %"


def mb(nbytes: float | None) -> str:
    return "N/A" if nbytes is None else f"{nbytes / 1e6:.1f} MB"


# -- names -----------------------------------------------------------------------------------

KIND_NAMES = {
    "memory_creep": ("memory creep", "内存持续增长"),
    "outlier": ("outlier among peers", "偏离同类"),
    "straggler": ("straggler", "掉队节点"),
    "utilization_dropouts": ("utilization dropouts", "利用率跌落"),
    "hang": ("hang", "挂起"),
    "comm_timeouts": ("communication timeouts", "通信超时"),
    "thermal": ("thermal", "温度异常"),
    "throughput_degradation": ("throughput degradation", "吞吐下降"),
}
METRIC_NAMES = {
    "util_pct": ("utilization", "利用率"),
    "hbm_used_bytes": ("HBM in use", "HBM 占用"),
    "hbm_total_bytes": ("HBM capacity", "HBM 容量"),
    "host_rss_bytes": ("host memory (RSS)", "主机内存 (RSS)"),
    "temp_c": ("temperature", "温度"),
    "power_w": ("power", "功耗"),
    "step_time_s": ("step time", "步时"),
    "compute_s": ("compute time (outside collectives)", "计算时间（集合通信之外）"),
    "comm_timeouts_total": ("communication timeouts", "通信超时"),
    "comm_fatal_timeouts_total": ("fatal communication timeouts", "致命通信超时"),
    "throttle_reasons": ("clock throttling", "降频"),
    "pair_busbw_gbps": ("busbw between nodes", "节点间总线带宽"),
}
SEVERITY_NAMES = {"fail": ("fail", "失败"), "warn": ("warning", "告警"), "info": ("info", "提示")}
EVENT_NAMES = {
    "start": ("start", "开始"), "checkpoint": ("checkpoint", "检查点"), "crash": ("crash", "崩溃"),
    "restart": ("restart", "重启"), "inject": ("fault injected", "注入故障"), "exit": ("exit", "退出"),
    "finding": ("finding", "发现问题"), "stop": ("stop", "停止"), "gap": ("gap", "中断"),
    "outage": ("reader outage", "读数中断"), "preflight": ("preflight", "预检"), "hang": ("hang", "挂起"),
    "resume": ("resume", "恢复"), "finish": ("finish", "结束"), "gave_up": ("gave up", "放弃"),
    "link_test": ("link test", "链路测试"),
}
CAUSE_NAMES = {
    "startup": ("start-up", "启动"), "crash": ("crash", "崩溃"), "hang": ("hang", "挂起"),
    "daemon down": ("daemon down", "守护进程停止"), "stopped": ("stopped", "停止"), "gave up": ("gave up", "放弃"),
}


def _pick(table: Mapping[str, tuple[str, str]], key: str | None, lang: str) -> str:
    if key is None:
        return "N/A"
    pair = table.get(key)
    if pair is None:
        return key
    return pair[1] if lang == "zh" else pair[0]


def kind_name(kind: str | None, lang: str = "en") -> str:
    return _pick(KIND_NAMES, kind, lang)


def metric_name(metric: str | None, lang: str = "en") -> str:
    return _pick(METRIC_NAMES, metric, lang)


def severity_name(sev: str | None, lang: str = "en") -> str:
    return _pick(SEVERITY_NAMES, sev, lang)


def event_name(kind: str | None, lang: str = "en") -> str:
    return _pick(EVENT_NAMES, kind, lang)


# -- sentences -------------------------------------------------------------------------------

# The links criterion and findings (soak.judge._links_criterion, soak.analysis.links).
_LINK_CRIT_TEXTS: list[tuple[re.Pattern[str], str, str]] = [
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
_LINK_SENTENCES: list[tuple[re.Pattern[str], str, str]] = [
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
    *_LINK_SENTENCES,
]

_HANG_WHAT = {
    "utilization at ~0 while HBM stays allocated": ("utilization near 0 while HBM stays allocated",
                                                    "利用率接近 0 而 HBM 仍被占用"),
    "progress heartbeats stopped while telemetry continued": ("progress heartbeats stopped while telemetry went on",
                                                              "训练心跳停止而遥测仍在继续"),
    "no progress (idle chip and no heartbeats)": ("idle chip and no heartbeats", "芯片空闲且无心跳"),
}


def _link_tail(text: str, lang: str) -> str:
    """The end of a links sentence (who is named, an injected fault, two nodes) in ``lang``."""
    if lang != "zh" or not text:
        return text
    text = text.replace(" (two nodes: no other pair to compare with)", "（两个节点：没有可比较的其他节点对）")
    text = text.replace(" (one node: no other node to compare with)", "（单节点：没有可比较的其他节点）")
    text = re.sub(r" \(injected: (.+)\)$", r"（注入：\1）", text)
    return re.sub(r"^; ", "；", text).replace("node ", "节点 ")


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
            return (f"{who}{metric_name(metric, lang)}比{_pick(_SCOPE, scope, lang)}同类的 {base} {_unit(unit)} "
                    f"{word} {pct_}%，持续 {hours} 小时（自然离散度的 {z} 倍，置信度 {conf}）")
        return (f"{who}{metric_name(metric, lang)} {pct_} % {how} than its peers {_pick(_SCOPE, scope, lang)} "
                f"({base} {_unit(unit)}) for {hours} h ({z}× the natural spread, confidence {conf})")
    m = _OUTLIER.match(summary)
    if m:
        metric, growth, dev, unit, scope, base, _u2, pct_, hours, power, z, conf = m.groups()
        z = "∞" if z == "inf" else z
        share = f" ({pct_} %)" if pct_ else ""
        if zh:
            return (f"{metric_name(metric, lang)}{'增长' if growth else ''}偏离{_pick(_SCOPE, scope, lang)}同类的 "
                    f"{base} {_unit(unit)}，偏差 {dev} {_unit(unit)}{share.replace(' (', '（').replace(')', '）')}，"
                    f"持续 {hours} 小时{'（功耗相当）' if power else ''}（自然离散度的 {z} 倍，置信度 {conf}）")
        return (f"{metric_name(metric, lang)}{' growth' if growth else ''} {dev} {_unit(unit)} off its peers "
                f"{_pick(_SCOPE, scope, lang)} ({base} {_unit(unit)}){share} for {hours} h"
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
        elif any(pattern is p for p, _, _ in _LINK_SENTENCES):
            extra["tail"] = _link_tail(g[-1], lang)
            if pattern is _LINK_SENTENCES[2][0]:
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
        out.append(f"{m.group(1)} 次{'注入的' if m.group(2) else ''}{_pick(CAUSE_NAMES, m.group(3), 'zh')}")
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
        return "节点：" + "；".join(_node_part(p) for p in reason[7:].split("; "))
    for pattern, zh in _REASONS:
        m = pattern.match(reason)
        if m:
            g = list(m.groups())
            return zh.format(*g, c1=_causes(g[1], lang) if len(g) > 1 else "")
    return reason


NODE_STATUS_NAMES = {
    "joined": ("joined", "已加入"), "running": ("running", "运行中"), "finished": ("finished", "已完成"),
    "failed": ("failed", "失败"), "lost": ("lost", "失联"), "stopped": ("stopped", "已停止"),
}
_NODE_PARTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^node (\S+) \(rank (\d+)\) (\w+)( \(came back later\))?$"), "节点 {0}（rank {1}）{s2}{back}"),
    (re.compile(r"^(\d+) node\(s\) never joined$"), "{0} 个节点未加入"),
    (re.compile(r"^(\d+) node\(s\) did not finish$"), "{0} 个节点未运行到结束"),
]


def node_status_name(status: str | None, lang: str = "en") -> str:
    return _pick(NODE_STATUS_NAMES, status, lang)


def _node_part(part: str) -> str:
    """One part of the judge's "nodes: ..." reason in Chinese."""
    for pattern, zh in _NODE_PARTS:
        m = pattern.match(part)
        if m:
            g = [x or "" for x in m.groups()]
            s2 = _pick(NODE_STATUS_NAMES, g[2], "zh") if len(g) > 2 else ""
            return zh.format(*g, s2=s2, back="（后来恢复）" if len(g) > 3 and g[3] else "")
    return part


def _node_statuses(text: str) -> str:
    """"node-1 lost, node-2 failed" in Chinese."""
    out = []
    for part in text.split(", "):
        name, _, status = part.rpartition(" ")
        out.append(f"{name} {_pick(NODE_STATUS_NAMES, status, 'zh')}" if name else part)
    return "，".join(out)


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
    *_LINK_CRIT_TEXTS,
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


def criterion_name(name: str, lang: str = "en") -> str:
    if name.startswith("no ") and name.endswith(" (fail)"):
        kind = kind_name(name[3:-7], lang)
        return f"无失败级{kind}" if lang == "zh" else f"No failing {kind}"
    return _pick(_CRIT_NAMES, name, lang)


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
            extra["st"] = f"；{_node_statuses(g[3])}" if zh else f"; {g[3]}"
        if "{c5}" in en_tpl and g[5]:
            extra["c5"] = f"（{_causes(g[5], lang)}）" if zh else f" ({g[5]})"
        if "{inj}" in en_tpl and g[1]:
            extra["inj"] = f"，注入的 {g[1]} 次（预期的演练故障）" if zh else f", {g[1]} injected (expected canary)"
        if "{m2}" in en_tpl:
            extra["m2"] = metric_name(g[2], lang)
        if "{tail}" in en_tpl:
            extra["tail"] = _link_tail(g[-1], lang)
        return (zh_tpl if zh else en_tpl).format(*g, **extra)
    return text


def met_word(met: bool | None, lang: str = "en") -> str:
    """One casing everywhere: "Met" / "Missed" / "Not judged"."""
    return t({True: "met_yes", False: "met_no", None: "met_na"}[met], lang)


def criterion_cells(c: Any, lang: str = "en") -> tuple[str, str, str, str]:
    """(name, required, measured, met) of a ``Criterion`` for a table row."""
    return criterion_name(c.name, lang), criterion_value(c.required, lang), criterion_value(c.measured, lang), met_word(c.met, lang)


# -- evidence --------------------------------------------------------------------------------

_EVIDENCE_LABELS = {
    "onset": ("Onset", "开始时间"),
    "slope_per_hour": ("Rate", "增长速率"),
    "slope_ci90": ("Rate, 90 % CI", "速率 90% 置信区间"),
    "tau_per_hour": ("Rate threshold", "速率阈值"),
    "quarter_slopes_per_hour": ("Rate in each quarter", "各四分之一时段速率"),
    "fit_window": ("Fitted over", "拟合时段"),
    "burn_in_h": ("Burn-in", "老化期"),
    "envelope_window_s": ("Envelope window", "包络窗口"),
    "growth": ("Growth over the fit", "拟合期内增长"),
    "capacity": ("Capacity", "容量"),
    "hours_to_exhaustion": ("Time to exhaustion", "预计耗尽时间"),
    "exhausted_at": ("Full at", "预计耗尽时刻"),
    "required_runtime_h": ("Required runtime", "要求运行时长"),
    "onset_method": ("Onset from", "开始时间依据"),
    "regime_start": ("Regime since", "当前阶段开始"),
    "method": ("Method", "方法"),
    "version": ("Detector version", "检测器版本"),
    "period_s": ("Period", "周期"),
    "count": ("Count", "次数"),
    "explained_by": ("Explained by", "解释"),
    "idle_fraction": ("Idle share", "空闲占比"),
    "mean_duration_s": ("Mean duration", "平均时长"),
    "max_duration_s": ("Longest", "最长"),
    "robust_cv": ("Period regularity (CV)", "周期规律性 (CV)"),
    "share_in_period": ("Share on the period", "符合周期的比例"),
    "scope": ("Scope", "范围"),
    "shared_with_other_devices": ("Shared with other chips", "与其他芯片重合"),
    "first_seen": ("First seen", "首次出现"),
    "onset_of_periodicity": ("Periodic since", "周期开始"),
    "signature": ("Signature", "特征"),
    "duration_s": ("Duration", "持续时间"),
    "ongoing": ("Ongoing at the end", "结束时仍在持续"),
    "threshold_s": ("Threshold", "阈值"),
    "total": ("Total", "总数"),
    "first_rate_per_h": ("Rate in the first third", "前三分之一速率"),
    "last_rate_per_h": ("Rate in the last third", "后三分之一速率"),
    "ratio": ("Ratio", "比值"),
    "p_value": ("p-value", "p 值"),
    "alpha_per_test": ("Significance per test", "单次检验显著性水平"),
    "fatal": ("Fatal", "致命"),
    "episodes": ("Episodes", "事件段"),
    "peak_c": ("Peak", "峰值"),
    "threshold_c": ("Threshold", "阈值"),
    "hysteresis_c": ("Hysteresis", "回差"),
    "drift_c_per_h": ("Drift", "漂移"),
    "ci90": ("90 % CI", "90% 置信区间"),
    "quarter_slopes": ("Drift in each quarter", "各四分之一时段漂移"),
    "reason_bits": ("Reason bits", "原因位"),
    "reasons": ("Reasons", "原因"),
    "mode": ("Mode", "方式"),
    "change_pct": ("Change", "变化"),
    "change_ci90_pct": ("Change, 90 % CI", "变化 90% 置信区间"),
    "baseline_ms": ("Baseline step time", "基线步时"),
    "final_ms": ("Final step time", "最终步时"),
    "baseline_window": ("Baseline window", "基线时段"),
    "slope_pct_per_h": ("Trend", "趋势"),
    "slope_ci90_pct_per_h": ("Trend, 90 % CI", "趋势 90% 置信区间"),
    "cusum_delta_log": ("CUSUM step (log)", "CUSUM 步长（对数）"),
    "coincides_with": ("Coincides with", "同时发生"),
}
_SKIP = {"explained_by", "details"}
_TIME_KEYS = {"onset", "regime_start", "first_seen", "onset_of_periodicity", "exhausted_at"}
_SPAN_KEYS = {"fit_window", "baseline_window"}
_DURATION_KEYS = {"envelope_window_s", "period_s", "mean_duration_s", "max_duration_s", "duration_s", "threshold_s"}
_SHARE_KEYS = {"idle_fraction", "share_in_period", "shared_with_other_devices"}
_METHOD_ZH = {
    "Theil-Sen on block-minimum envelope, burn-in, quarter rule": "块最小值包络上的 Theil–Sen 斜率，去除老化期，四分段一致性规则",
    "run-length episodes; period from inter-episode intervals": "游程分段；周期取自相邻事件间隔",
    "exact conditional binomial test, last vs first third": "精确条件二项检验：最后三分之一对比最初三分之一",
    "line extended back": "直线外推",
    "change point": "变化点",
    "global": "全局（所有芯片）",
    "device": "单芯片",
    "abrupt": "突变",
    "gradual": "渐变",
    "idle": "空闲且占用 HBM",
    "busy": "心跳停止",
}


def _rate_unit(metric: str | None) -> tuple[float, str]:
    if metric and metric.endswith("_bytes"):
        return 1e6, "MB/h"
    if metric == "temp_c":
        return 1.0, "°C/h"
    if metric == "power_w":
        return 1.0, "W/h"
    if metric == "step_time_s":
        return 1e-3, "ms/h"
    return 1.0, "/h"


def _value(key: str, v: Any, f: FindingView, tz: tzinfo, lang: str) -> str | None:
    """One evidence value as text, or None to leave it out."""
    zh = lang == "zh"
    scale, unit = _rate_unit(f.metric)
    if v is None:
        return None
    if key in _TIME_KEYS and isinstance(v, int | float):
        return when(v, tz)
    if key in _SPAN_KEYS and isinstance(v, Sequence) and len(v) == 2:
        return span(v[0], v[1], tz)
    if key in _DURATION_KEYS and isinstance(v, int | float):
        return dur(v)
    if key in _SHARE_KEYS and isinstance(v, int | float):
        return pct(v)
    if key in ("slope_per_hour", "tau_per_hour") and isinstance(v, int | float):
        return f"{num(v / scale)} {unit}"
    if key in ("slope_ci90", "quarter_slopes_per_hour") and isinstance(v, Sequence):
        sep = "–" if key == "slope_ci90" else ", "
        return sep.join(num(x / scale) for x in v) + f" {unit}"
    if key in ("burn_in_h", "required_runtime_h") and isinstance(v, int | float):
        return dur(v * 3600) if key == "required_runtime_h" else f"{v:.1f} h"
    if key == "burn_in_h":
        return f"{v:.1f} h"
    if key == "hours_to_exhaustion":
        return dur(v * 3600)
    if key in ("growth", "capacity") and isinstance(v, int | float):
        return mb(v) if key == "growth" and (f.metric or "").endswith("_bytes") else (
            fmt_bytes(v) if (f.metric or "").endswith("_bytes") else num(v))
    if key in ("first_rate_per_h", "last_rate_per_h"):
        return f"{num(v)} /h"
    if key == "ratio":
        return "∞" if v is None or (isinstance(v, float) and math.isinf(v)) else f"{num(v)}×"
    if key in ("peak_c", "threshold_c", "hysteresis_c"):
        return f"{num(v)} °C"
    if key == "drift_c_per_h":
        return f"{num(v)} °C/h"
    if key in ("ci90", "quarter_slopes") and isinstance(v, Sequence):
        return ("–" if key == "ci90" else ", ").join(num(x) for x in v) + " °C/h"
    if key == "episodes" and isinstance(v, Sequence):
        longest = max((e.get("duration_s") or 0 for e in v if isinstance(e, Mapping)), default=0)
        return (f"{len(v)} 段，最长 {dur(longest)}" if zh else f"{len(v)}, the longest {dur(longest)}")
    if key in ("change_pct", "slope_pct_per_h"):
        return f"{num(v)} %" + ("/h" if key == "slope_pct_per_h" else "")
    if key in ("change_ci90_pct", "slope_ci90_pct_per_h") and isinstance(v, Sequence):
        return "–".join(num(x) for x in v) + (" %/h" if "per_h" in key else " %")
    if key in ("baseline_ms", "final_ms"):
        return f"{num(v)} ms"
    if key == "version" and isinstance(v, str):
        return v.split("/", 1)[-1]
    if isinstance(v, bool):
        return ("是" if v else "否") if zh else ("yes" if v else "no")
    if isinstance(v, str):
        return _METHOD_ZH.get(v, v) if zh else v
    if isinstance(v, int | float) and key.endswith(("_at", "_ts", "_time", "start", "end")) and 1e9 < v < 4e9:
        return when(v, tz)
    if isinstance(v, int | float) and key.endswith("_h"):
        return dur(v * 3600)
    if isinstance(v, int | float) and key.endswith("_s"):
        return dur(v)
    if isinstance(v, int | float):
        return num(v)
    return plain(v)


def plain(v: Any) -> str:
    """Any value without JSON or Python syntax: lists joined, records as "key value" pairs."""
    if v is None:
        return "N/A"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return num(v) if isinstance(v, float) else str(v)
    if isinstance(v, Mapping):
        return ", ".join(f"{k} {plain(x)}" for k, x in v.items())
    if isinstance(v, Sequence) and not isinstance(v, str | bytes):
        if v and all(isinstance(x, Mapping) for x in v):
            return "; ".join(plain(x) for x in v)
        return ", ".join(plain(x) for x in v) or "N/A"
    return str(v)


def evidence_rows(f: FindingView, tz: tzinfo = UTC, lang: str = "en") -> list[tuple[str, str]]:
    """A finding's evidence as (label, value) rows, in a fixed order, no raw JSON."""
    ev: dict[str, Any] = {}
    for k, v in f.evidence.items():
        if k == "details" and isinstance(v, Mapping):
            ev.update({dk: dv for dk, dv in v.items() if dk not in ev})
        else:
            ev[k] = v
    # the rate and its CI read as one line
    if "slope_ci90" in ev and ev.get("slope_per_hour") is not None:
        scale, unit = _rate_unit(f.metric)
        lo, hi = ev.pop("slope_ci90")
        ev["slope"] = f"{num(ev.pop('slope_per_hour') / scale)} {unit} (90 % CI {num(lo / scale)}–{num(hi / scale)})"
    if ev.get("onset") is not None and ev.get("onset_method"):
        ev["onset"] = f"{when(ev['onset'], tz)} ({_value('onset_method', ev.pop('onset_method'), f, tz, lang)})"
    order = list(_EVIDENCE_LABELS)
    keys = sorted(ev, key=lambda k: (0 if k == "slope" else 1, order.index(k) if k in order else len(order), k))
    rows = []
    for k in keys:
        if k in _SKIP:
            continue
        v = ev[k]
        if k == "slope":
            label = ("增长速率" if lang == "zh" else "Rate")
            text = v
        elif k == "onset" and isinstance(v, str):
            label, text = _pick(_EVIDENCE_LABELS, k, lang), v
        else:
            label = _pick(_EVIDENCE_LABELS, k, lang) if k in _EVIDENCE_LABELS else k.replace("_", " ").capitalize()
            text = _value(k, v, f, tz, lang)
        if text is None or text == "":
            continue
        rows.append((label, text))
    return rows


# -- events ----------------------------------------------------------------------------------

ROUTINE_EVENTS = ("checkpoint",)
_MAX_SAME = 12  # more events of one kind than this are condensed too


def event_rows(events: Sequence[EventView], tz: tzinfo = UTC, lang: str = "en") -> list[tuple[str, str, str, str]]:
    """(time, event, device, message) rows; routine or very frequent kinds as one line each with
    count and cadence, placed at their first occurrence."""
    by_kind: dict[str, list[EventView]] = {}
    for e in events:
        by_kind.setdefault(e.kind, []).append(e)
    condensed = {k for k, es in by_kind.items() if len(es) > 1 and (k in ROUTINE_EVENTS or len(es) > _MAX_SAME)}
    rows: list[tuple[str, str, str, str]] = []
    done: set[str] = set()
    for e in events:
        if e.kind in condensed:
            if e.kind in done:
                continue
            done.add(e.kind)
            es = by_kind[e.kind]
            gaps = sorted(b.ts - a.ts for a, b in zip(es, es[1:], strict=False))
            cadence = gaps[len(gaps) // 2] if gaps else None
            who = sorted({x.device for x in es if x.device})
            msg = (f"{len(es)} 次，约每 {dur(cadence)} 一次，{when(es[0].ts, tz)} 至 {when(es[-1].ts, tz)}" if lang == "zh"
                   else f"{len(es)} times, about every {dur(cadence)}, {when(es[0].ts, tz)} to {when(es[-1].ts, tz)}")
            rows.append((span(es[0].ts, es[-1].ts, tz), f"{event_name(e.kind, lang)} ×{len(es)}", ", ".join(who[:3]), msg))
            continue
        message = finding_text(e.message, lang) if e.kind == "finding" else _message(e.message)
        rows.append((when(e.ts, tz, seconds=True), event_name(e.kind, lang), e.device or "", message))
    return rows


def _message(text: str | None) -> str:
    """An event's message; one a workload wrote as a JSON record reads as "key value" pairs."""
    if not text:
        return ""
    if text.lstrip().startswith(("{", "[")):
        import json

        try:
            return plain(json.loads(text))
        except ValueError:
            pass
    return text


# -- thresholds, phases ------------------------------------------------------------------------


def phase_text(phases: Iterable[Mapping[str, Any]], lang: str = "en") -> str:
    """Declared phases summarised: count, cadence, duration of each named phase."""
    out = []
    for ph in phases:
        if not isinstance(ph, Mapping):
            continue
        name = event_name(str(ph.get("name")), lang)
        windows = [w for w in ph.get("windows") or [] if isinstance(w, Sequence) and len(w) == 2]
        parts = []
        if ph.get("every_s"):
            parts.append(f"每 {dur(ph['every_s'])}" if lang == "zh" else f"every {dur(ph['every_s'])}")
        if ph.get("duration_s"):
            parts.append(f"持续 {dur(ph['duration_s'])}" if lang == "zh" else f"lasting {dur(ph['duration_s'])}")
        if windows:
            starts = sorted(float(a) for a, _ in windows)
            lengths = sorted(float(b) - float(a) for a, b in windows)
            gaps = sorted(b - a for a, b in zip(starts, starts[1:], strict=False))
            typical = lengths[len(lengths) // 2]
            if lang == "zh":
                parts.append(f"{len(windows)} 个时段，每段约 {dur(typical)}" + (f"，约每 {dur(gaps[len(gaps) // 2])} 一次" if gaps else ""))
            else:
                parts.append(f"{len(windows)} window{'s' if len(windows) != 1 else ''} of about {dur(typical)}"
                             + (f", about every {dur(gaps[len(gaps) // 2])}" if gaps else ""))
        out.append(f"{name}: {', '.join(parts) or 'N/A'}" if lang != "zh" else f"{name}：{'，'.join(parts) or 'N/A'}")
    return "; ".join(out) if lang != "zh" else "；".join(out)


def threshold_text(thresholds: Mapping[str, Any], lang: str = "en") -> list[str]:
    """One "key = value" line per threshold; sections one line each; phases summarised."""
    lines = []
    for k in sorted(thresholds):
        v = thresholds[k]
        if k == "phases" and isinstance(v, Sequence):
            lines.append(f"phases = {phase_text(v, lang) or 'N/A'}")
        elif isinstance(v, Mapping):
            lines.append(f"{k}: " + ", ".join(f"{sk} = {plain(sv)}" for sk, sv in sorted(v.items())))
        else:
            lines.append(f"{k} = {plain(v)}")
    return lines


# -- manifest ----------------------------------------------------------------------------------


def _flat(value: Any, prefix: str, out: list[tuple[str, str]]) -> None:
    if isinstance(value, Mapping):
        for k in sorted(value, key=str):
            _flat(value[k], f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if value and all(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                out.append((f"{prefix}[{i}]", plain(item)))
        else:
            out.append((prefix, ", ".join(plain(v) for v in value) or "N/A"))
    else:
        out.append((prefix, plain(value)))


def manifest_rows(section: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(dotted key, value) rows of one manifest section. A fact the manifest holds twice (the
    driver version from the driver's files and from npu-smi) is one row: a missing reading
    is left out where another source has the value."""
    rows: list[tuple[str, str]] = []
    _flat(section, "", rows)
    known = {k.rsplit(".", 1)[-1]: v for k, v in rows if v != "N/A"}
    out = []
    for k, v in rows:
        leaf = k.rsplit(".", 1)[-1]
        if v == "N/A" and leaf in known and leaf.endswith(("_version", "version")):
            continue
        out.append((k, v))
    return out


# -- accounting and coverage -----------------------------------------------------------------


def accounting_rows(acc: Mapping[str, Any] | None, lang: str = "en") -> list[tuple[str, str]]:
    """Where the planned time went, as (label, value) rows."""
    if not acc:
        return []
    rows = [
        (t("acc_planned", lang), dur(acc.get("planned_s"))),
        (t("acc_ran", lang), dur(None if acc.get("window_end") is None else acc["window_end"] - acc["window_start"])),
        (t("acc_training", lang), f"{dur(acc.get('training_s'))} ({pct(acc.get('availability'))})"),
        (t("acc_judged", lang), pct(acc.get("judged_availability"))),
        (t("acc_down", lang), dur(acc.get("unexcused_down_s"))),
        (t("acc_longest", lang), dur(acc.get("longest_s"))),
    ]
    return rows


def interruption_rows(acc: Mapping[str, Any] | None, tz: tzinfo = UTC, lang: str = "en") -> list[tuple[str, str, str, str, str]]:
    """(from, how long, cause, counted?, message) per interruption; injected faults say so."""
    out = []
    for i in (acc or {}).get("interruptions") or []:
        cause = _pick(CAUSE_NAMES, i.get("cause"), lang)
        if i.get("injected"):
            cause = f"注入的{cause}（预期的演练故障）" if lang == "zh" else f"injected {cause} (expected canary)"
        excused = i.get("injected") or i.get("cause") == "startup"
        counted = t("acc_excused", lang) if excused else t("acc_counted", lang)
        out.append((when(i.get("start"), tz), dur(i.get("duration_s")), cause, counted,
                    _who(i.get("workload"), i.get("message"))))
    return out


def _who(workload: str | None, message: str | None) -> str:
    """"lm: crashed (exit 1)", the workload named once."""
    message = message or ""
    if not workload or message.startswith(f"{workload}:"):
        return message
    return f"{workload}: {message}" if message else workload


def coverage_rows(cov: Mapping[str, Any] | None, lang: str = "en") -> list[tuple[str, str, str]]:
    """(chip, lowest covered share and its metric, every metric's share) per chip."""
    out = []
    for chip, metrics in sorted(((cov or {}).get("ratios") or {}).items()):
        if not metrics:
            continue
        low_m = min(metrics, key=lambda m: metrics[m])
        out.append((chip, f"{pct(metrics[low_m])} ({metric_name(low_m, lang)})",
                    ", ".join(f"{metric_name(m, lang)} {pct(r)}" for m, r in sorted(metrics.items()))))
    return out


# -- links between nodes (the pairwise link test: soak.analysis.links) --------------------------

_LINK_STATUS = {"ok": ("ok", "正常"), "slow": ("slow", "偏慢"), "slow node": ("slow node", "所属节点偏慢"),
                "below floor": ("below floor", "低于下限")}


def link_status(status: str | None, lang: str = "en") -> str:
    return _pick(_LINK_STATUS, status, lang)


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
