"""A finding's evidence (CI, onset, method, ...) as label/value rows a customer can read."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, tzinfo
from typing import Any

from soak.report.model import FindingView, fmt_bytes
from soak.report.names import pick
from soak.report.units import dur, num, pct, plain, span, when

_EVIDENCE_LABELS = {
    "onset": ("Onset", "出现时刻"),
    "slope_per_hour": ("Rate", "增长速率"),
    "slope_ci90": ("Rate, 90% CI", "速率 90% 置信区间"),
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
    "onset_method": ("Onset from", "出现时刻依据"),
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
    "ci90": ("90% CI", "90% 置信区间"),
    "quarter_slopes": ("Drift in each quarter", "各四分之一时段漂移"),
    "reason_bits": ("Reason bits", "原因位"),
    "reasons": ("Reasons", "原因"),
    "mode": ("Mode", "方式"),
    "change_pct": ("Change", "变化"),
    "change_ci90_pct": ("Change, 90% CI", "变化 90% 置信区间"),
    "baseline_ms": ("Baseline step time", "基线步时"),
    "final_ms": ("Final step time", "最终步时"),
    "baseline_window": ("Baseline window", "基线时段"),
    "slope_pct_per_h": ("Trend", "趋势"),
    "slope_ci90_pct_per_h": ("Trend, 90% CI", "趋势 90% 置信区间"),
    "cusum_delta_log": ("CUSUM step (log)", "CUSUM 步长（对数）"),
    "coincides_with": ("Coincides with", "同时发生"),
}
# code and values say the finding once more, typed, for its sentence: not evidence rows of their own
_SKIP = {"explained_by", "details", "code", "values"}
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


def _rate_text(metric: str | None) -> Any:
    """How a rate is written: a memory rate in MB/h with one decimal, as the finding's own
    sentence writes it (``soak.analysis.messages``: "creeps 839.9 MB/h"), so the table and the
    sentence beside it say one figure; any other to three significant digits."""
    if metric and metric.endswith("_bytes"):
        return lambda x: f"{x:.1f}"
    return num


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
    if key == "slope_per_hour" and isinstance(v, int | float):
        return f"{_rate_text(f.metric)(v / scale)} {unit}"
    if key == "tau_per_hour" and isinstance(v, int | float):
        return f"{num(v / scale)} {unit}"
    if key in ("slope_ci90", "quarter_slopes_per_hour") and isinstance(v, Sequence):
        sep = "–" if key == "slope_ci90" else ", "
        return sep.join(num(x / scale) for x in v) + f" {unit}"
    if key in ("burn_in_h", "required_runtime_h") and isinstance(v, int | float):
        return dur(v * 3600)
    if key == "hours_to_exhaustion":
        return dur(v * 3600)
    if key in ("growth", "capacity") and isinstance(v, int | float):
        # the growth in whole MB, as the finding's sentence writes it ("+4899 MB over the fit")
        return f"{v / 1e6:.0f} MB" if key == "growth" and (f.metric or "").endswith("_bytes") else (
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
        rate = _rate_text(f.metric)
        ci = "90% 置信区间" if lang == "zh" else "90% CI"
        left, right = ("（", "）") if lang == "zh" else (" (", ")")
        ev["slope"] = (f"{rate(ev.pop('slope_per_hour') / scale)} {unit}"
                       f"{left}{ci} {rate(lo / scale)}–{rate(hi / scale)}{right}")
    if ev.get("onset") is not None and ev.get("onset_method"):
        how = _value("onset_method", ev.pop("onset_method"), f, tz, lang)
        ci = ev.pop("onset_ci90", None)
        if isinstance(ci, Sequence) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci):
            # the change point's 90 % interval, as the rate's is written
            how += f"，90% 置信区间 {span(ci[0], ci[1], tz)}" if lang == "zh" else f", 90% CI {span(ci[0], ci[1], tz)}"
        ev["onset"] = f"{when(ev['onset'], tz)}（{how}）" if lang == "zh" else f"{when(ev['onset'], tz)} ({how})"
    ev.pop("onset_ci90", None)  # said with the onset, or none (no change point)
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
            label, text = pick(_EVIDENCE_LABELS, k, lang), v
        else:
            label = pick(_EVIDENCE_LABELS, k, lang) if k in _EVIDENCE_LABELS else k.replace("_", " ").capitalize()
            text = _value(k, v, f, tz, lang)
        if text is None or text == "":
            continue
        rows.append((label, text))
    return rows

