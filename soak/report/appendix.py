"""The report's appendix: the environment manifest and the run plan as labelled tables.

What a customer reads there is what ran and how it was set up, not a dump of the records:
each group of facts is a table under a heading in the report's language, each fact has a label
(the host and software in words; a plan key as written in ``plan.toml``, so it can be looked
up), values are formatted with their unit, an empty key (unset, blank, an empty list) is left
out, local paths are reduced to what identifies them (a virtual environment's interpreter to
``python 3.11.7``, a folder under the home or the run folder to a relative path), and the
manifest's own bookkeeping (its schema number) is left out. The PDF and the app render the
same tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from soak.config import plan_units
from soak.report.i18n import t
from soak.report.model import fmt_bytes
from soak.report.names import pick
from soak.report.units import dur, plain


@dataclass(frozen=True)
class Table:
    """One labelled table: a heading, and either (label, value) rows (``header`` None) or rows
    under ``header``."""

    title: str
    rows: tuple[tuple[str, ...], ...]
    header: tuple[str, ...] | None = None


# label of each environment fact, by its dotted key in the manifest: (en, zh)
ENV_LABELS: dict[str, tuple[str, str]] = {
    "host.hostname": ("Host name", "主机名"),
    "host.os": ("Operating system", "操作系统"),
    "host.kernel": ("Kernel", "内核"),
    "host.machine": ("Architecture", "架构"),
    "host.cpu_model": ("CPU", "CPU"),
    "host.cpu_count": ("CPU cores", "CPU 核数"),
    "host.timezone": ("Time zone", "时区"),
    "host.memory_bytes": ("Memory", "内存"),
    "collected_at": ("Recorded at", "记录时间"),
    "python": ("Python", "Python"),
    "python_executable": ("Python interpreter", "Python 解释器"),
    "torch_npu.version": ("torch_npu (loaded)", "torch_npu（已加载）"),
    "torch_npu.loads": ("torch_npu loads", "torch_npu 可加载"),
    "torch_npu.error": ("torch_npu error", "torch_npu 错误"),
    "cann.version": ("CANN", "CANN"),
    "cann.components": ("CANN components", "CANN 组件"),
    "ascend.driver_version": ("Ascend driver", "昇腾驱动"),
    "ascend.firmware_version": ("Ascend firmware", "昇腾固件"),
    "npu.npu_smi_version": ("npu-smi", "npu-smi"),
    "npu.driver_version": ("NPU driver (npu-smi)", "NPU 驱动（npu-smi）"),
    "npu.chip_count": ("NPU chips", "NPU 芯片数"),
    "nvidia.driver_version": ("NVIDIA driver", "NVIDIA 驱动"),
    "nvidia.cuda_driver_version": ("CUDA (driver)", "CUDA（驱动）"),
}
# the group each fact belongs to (the first part of its key); what no group names is "other"
_ENV_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("app_host", ("host", "collected_at")),
    ("app_software", ("python", "python_executable", "packages", "torch_npu", "cann", "ascend", "npu", "nvidia")),
)
# the manifest's bookkeeping, not a fact about the machine
_ENV_SKIP = {"schema", "host.utc_offset_s"}
# a card or GPU: (key in the manifest, column heading)
_CARD_COLUMNS = (("npu_id", "app_npu"), ("name", "model"), ("chips", "chips"), ("serial_number", "serial"),
                 ("firmware_version", "app_firmware"), ("pcie_bus_info", "app_bus"))
_GPU_COLUMNS = (("index", "app_gpu"), ("name", "model"), ("serial", "serial"), ("vbios_version", "app_vbios"),
                ("uuid", "app_uuid"))


def _empty(v: Any) -> bool:
    return v is None or v == "" or (isinstance(v, Sequence | Mapping) and not isinstance(v, str) and len(v) == 0)


def _flat(value: Any, prefix: str, out: list[tuple[str, Any]]) -> None:
    """(dotted key, leaf value) of every non-empty leaf; a list of records is one leaf each."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif not _empty(value):
        out.append((prefix, value))


def local_path(value: str, *, home: str | None = None, run_dir: str | None = None, python: str | None = None) -> str:
    """A path of the machine that ran as the report shows it: an interpreter as ``python
    3.11.7``, a path under the run folder relative to it, one under the home as ``~/...``;
    anything else as written."""
    p = PurePosixPath(value)
    if not p.is_absolute():
        return value
    if p.name.startswith("python") and p.parent.name == "bin":
        return f"python {python}" if python else p.name
    for base, shown in ((run_dir, None), (home, "~")):
        if base and PurePosixPath(base).is_absolute():
            try:
                rel = p.relative_to(base)
            except ValueError:
                continue
            return str(rel) if shown is None else f"{shown}/{rel}" if str(rel) != "." else shown
    return value


def _label(key: str, lang: str) -> str:
    if key in ENV_LABELS:
        return pick(ENV_LABELS, key, lang)
    if key.startswith("packages."):
        return key.split(".", 1)[1]
    return key


def environment_tables(env: Mapping[str, Any] | None, lang: str = "en", *, home: str | None = None,
                       run_dir: str | None = None) -> list[Table]:
    """The environment manifest as tables: the host, the software, the cards (or GPUs), and
    whatever else it recorded."""
    if not env:
        return []
    facts: list[tuple[str, Any]] = []
    cards: Sequence[Mapping[str, Any]] = ()
    gpus: Sequence[Mapping[str, Any]] = ()
    for k, v in env.items():
        if k == "npu" and isinstance(v, Mapping):
            cards = v.get("cards") or ()
            v = {sk: sv for sk, sv in v.items() if sk != "cards"}
        if k == "nvidia" and isinstance(v, Mapping):
            gpus = v.get("gpus") or ()
            v = {sk: sv for sk, sv in v.items() if sk != "gpus"}
        _flat(v, k, facts)
    python = env.get("python") if isinstance(env.get("python"), str) else None
    groups: dict[str, list[tuple[str, str]]] = {name: [] for name, _ in _ENV_GROUPS}
    groups["app_other"] = []
    for key, value in facts:
        if key in _ENV_SKIP:
            continue
        text = plain(value)
        if isinstance(value, str):
            text = local_path(value, home=home, run_dir=run_dir, python=python)
            if key == "collected_at":
                text = value.replace("T", " ").replace("Z", " UTC")
        elif key.endswith("_bytes") and isinstance(value, int | float):
            text = fmt_bytes(value)
        head = key.split(".", 1)[0]
        group = next((name for name, heads in _ENV_GROUPS if head in heads), "app_other")
        groups[group].append((_label(key, lang), text))
    out = [Table(t(name, lang), tuple(rows)) for name, rows in groups.items() if rows]
    for title, items, columns in (("app_cards", cards, _CARD_COLUMNS), ("app_gpus", gpus, _GPU_COLUMNS)):
        rows = tuple(tuple("N/A" if _empty(c.get(k)) else plain(c.get(k)) for k, _ in columns)
                     for c in items if isinstance(c, Mapping))
        if rows:
            out.append(Table(t(title, lang), rows, tuple(t(h, lang) for _, h in columns)))
    return out


def plan_tables(plan: Mapping[str, Any] | None, lang: str = "en", *, home: str | None = None,
                run_dir: str | None = None) -> list[Table]:
    """The run plan as one table per section of ``plan.toml``, keys as written there, values
    with their units; a section with nothing set is left out."""
    if not plan:
        return []
    units = plan_units()
    out: list[Table] = []
    # keys outside any section (a plan stored flat, as by an earlier soak or another tool):
    # one table of their own, first, so no key of the plan goes unsaid
    top = {k: v for k, v in plan.items() if not _is_section(v)}
    if top:
        out += plan_tables({"": top}, lang, home=home, run_dir=run_dir)
    for section, body in plan.items():
        if not _is_section(body):
            continue
        items = body if isinstance(body, list) else [body]
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                continue
            facts: list[tuple[str, Any]] = []
            _flat(item, "", facts)
            rows = []
            for key, value in facts:
                unit = units.get(f"{section}[].{key}" if isinstance(body, list) else f"{section}.{key}")
                if key.startswith("thresholds.") or not section:  # a unit in the name: a profile override, a flat plan
                    text = threshold_value(key.rsplit(".", 1)[-1], value, lang)
                elif unit == "s" and isinstance(value, int | float) and not isinstance(value, bool):
                    text = dur(value)
                elif unit == "bytes" and isinstance(value, int | float) and not isinstance(value, bool):
                    text = fmt_bytes(value)
                elif isinstance(value, str):
                    text = local_path(value, home=home, run_dir=run_dir)
                else:
                    text = plain(value)
                rows.append((plan_label(section, key, lang), text))
            if rows:
                title = _section_title(section, lang)
                out.append(Table(f"{title} {i + 1}" if len(items) > 1 else title, tuple(rows)))
    return out


def _is_section(body: Any) -> bool:
    """A ``[section]`` (a table) or ``[[section]]`` (a list of tables) of plan.toml."""
    return isinstance(body, Mapping) or (isinstance(body, list) and bool(body)
                                         and all(isinstance(x, Mapping) for x in body))


def _section_title(section: str, lang: str) -> str:
    if not section:
        return t("plan_title", lang)
    key = f"plan_{section}"
    name = t(key, lang)
    return section if name == key else name


# the detectors that are not a finding's kind, and the sections of the acceptance profile
DETECTOR_NAMES: dict[str, tuple[str, str]] = {
    "peers": ("comparison among peers (outliers, stragglers)", "同类比较（离群芯片、掉队节点）"),
    "links": ("links between nodes", "节点间链路"),
}
PROFILE_SECTIONS: dict[str, tuple[str, str]] = {
    "chips": ("chip figures", "芯片参数"), "compute": ("compute", "算力"), "evidence": ("evidence", "证据"),
    "faults": ("device faults", "芯片故障"), "links": ("links between nodes", "节点间链路"),
    "peers": ("comparison among peers", "同类比较"), "severity": ("severity by kind", "各类问题的严重级别"),
    "memory": ("memory creep", "内存持续增长"), "utilization": ("utilization dropouts", "利用率跌落"),
    "hang": ("hang", "挂起"), "comm": ("communication timeouts", "通信超时"), "thermal": ("thermal", "温度异常"),
    "throughput": ("throughput degradation", "吞吐下降"), "stale": ("stale telemetry", "读数停滞"),
}


def detector_name(name: str, lang: str = "en") -> str:
    """A detector as the report names it: its finding kind's name, or its own."""
    from soak.report.names import kind_name, pick

    if name == "profile":
        return t("profile", lang)
    return pick(DETECTOR_NAMES, name, lang) if name in DETECTOR_NAMES else kind_name(name, lang)


def _without_notes(value: Any) -> Any:
    """A profile's figures without their notes (``*_source``: where a figure comes from, for
    whoever maintains the profile)."""
    if isinstance(value, Mapping):
        return {k: _without_notes(v) for k, v in value.items() if not str(k).endswith(("_source", "_note", "notes"))}
    return value


def detector_thresholds(name: str, thresholds: Mapping[str, Any], lang: str = "en") -> dict[str, Any]:
    """A detector's thresholds as the report lists them: the profile's without its notes and
    with its sections named in the report's language."""
    if name != "profile":
        return dict(thresholds)
    from soak.report.names import pick

    out = _without_notes(thresholds)
    return {pick(PROFILE_SECTIONS, k, lang) if isinstance(v, Mapping) else k: v for k, v in out.items()}


def appendix_tables(manifest: Mapping[str, Any], run_id: str, lang: str = "en") -> tuple[list[Table], list[Table]]:
    """The environment's tables and the plan's, paths reduced against this user's home and the
    run's folder (the plan's data folder and the run id)."""
    import os

    plan = manifest.get("plan") or {}
    data_dir = (plan.get("run") or {}).get("data_dir") if isinstance(plan, Mapping) else None
    where = {"home": os.path.expanduser("~"),
             "run_dir": os.path.join(data_dir, run_id) if isinstance(data_dir, str) else None}
    return environment_tables(manifest.get("environment"), lang, **where), plan_tables(plan, lang, **where)


# -- thresholds in words -----------------------------------------------------------------------
#
# A threshold is read by a customer, not looked up in the profile file: each one the detectors
# decide by has a sentence in both languages, its value written with its unit; any other figure
# of the profile is a labelled row whose label is its name in words and whose value carries the
# unit its name ends with (``_bytes_per_h``, ``_s``, ``_pct`` ...). The raw profile file stays
# attached to the PDF for whoever wants the keys.

# (detector or profile section, key) -> (en, zh), "{v}" the value with its unit
THRESHOLD_WORDS: dict[tuple[str, str], tuple[str, str]] = {
    ("memory_creep", "hbm_min_slope_bytes_per_h"): (
        "memory creep (HBM): a slope of at least {v} sustained past the burn-in",
        "内存持续增长（HBM）：老化期后持续增长至少 {v}"),
    ("memory_creep", "hbm_min_slope_frac_per_h"): (
        "memory creep (HBM), on a large card: at least {v} of its capacity",
        "内存持续增长（HBM），大容量卡：至少为容量的 {v}"),
    ("memory_creep", "rss_min_slope_bytes_per_h"): (
        "memory creep (host memory of a process): a slope of at least {v} sustained past the burn-in",
        "内存持续增长（进程主机内存）：老化期后持续增长至少 {v}"),
    ("memory_creep", "burn_in_h"): ("burn-in left out of the fit: at least {v}", "拟合不计老化期：至少 {v}"),
    ("memory_creep", "burn_in_frac"): ("burn-in: at least this share of the run: {v}", "老化期至少占运行时长的 {v}"),
    ("memory_creep", "ci"): ("confidence of the slope's interval: {v}", "增长率置信区间的置信度：{v}"),
    ("utilization_dropouts", "low_pct"): ("utilization dropout: below {v}", "利用率跌落：低于 {v}"),
    ("utilization_dropouts", "min_duration_s"): ("a dropout lasts at least {v}", "一次跌落至少持续 {v}"),
    ("utilization_dropouts", "max_idle_fraction"): (
        "irregular dropouts fail above {v} of the time", "不规则跌落超过时长的 {v} 判为失败"),
    ("hang", "threshold_s"): ("hang: no training progress for {v}", "挂起：训练 {v} 没有进展"),
    ("comm_timeouts", "min_ratio"): (
        "communication timeouts: a rate at least {v} times the run's baseline", "通信超时：速率至少为基线的 {v} 倍"),
    ("comm_timeouts", "min_count"): ("and at least {v} timeouts", "且至少 {v} 次超时"),
    ("comm_timeouts", "bucket_s"): ("counted in windows of {v}", "按 {v} 的时间窗计数"),
    ("thermal", "threshold_c"): ("overheating: above {v}", "过热：高于 {v}"),
    ("thermal", "min_duration_s"): ("for at least {v}", "持续至少 {v}"),
    ("thermal", "drift_min_c_per_h"): (
        "temperature drift: a rise of at least {v} over two days or more", "温度漂移：两天及以上的运行中至少上升 {v}"),
    ("throughput_degradation", "delta_pct"): (
        "slowdown: step time at least {v} above its baseline", "吞吐下降：步时比基线至少高 {v}"),
    ("throughput_degradation", "fail_pct"): ("a slowdown of {v} or more fails", "变慢 {v} 及以上判为失败"),
    ("throughput_degradation", "confirm_s"): ("confirmed over {v}", "持续 {v} 以确认"),
    ("throughput_degradation", "gradual_min_pct_per_h"): (
        "gradual slowdown: at least {v}", "逐渐变慢：至少 {v}"),
    ("profile", "required_runtime_h"): (
        "required runtime: memory that runs out sooner than {v} fails", "要求的运行时长：内存在 {v} 内耗尽判为失败"),
}

_WORDS_ORDER = list(THRESHOLD_WORDS)

# (detector or profile section, key) -> (en, zh): the label of every other figure of the default
# profile, in words; its value follows it with its unit. A key not named here (a newer
# profile's) is named from the words of its key (``_WORDS``), which tests keep from the
# default profile.
THRESHOLD_LABELS: dict[tuple[str, str], tuple[str, str]] = {
    ("comm_timeouts", "alpha"): ("significance level of the rate test (split across the counters)",
                                 "速率检验的显著性水平（各计数器分摊）"),
    ("comm_timeouts", "rate_counters"): ("counters whose rate is tested", "检验速率的计数器"),
    ("comm_timeouts", "fatal_counters"): ("counters of which every count is a finding", "每次计数即为问题的计数器"),
    ("hang", "hbm_held_frac"): ("a stopped rank still holding this share of its busy HBM is hung",
                                "停止的进程仍占用繁忙时 HBM 的此比例即判为挂起"),
    ("links", "min_expected_frac"): ("a pair below this share of its chip model's bandwidth fails",
                                     "链路对低于芯片型号带宽的此比例判为失败"),
    ("links", "max_below_median_frac"): ("a node or pair this far below the others' median fails",
                                         "节点或链路对低于其他中位数此比例判为失败"),
    ("memory_creep", "envelope_window_s"): ("memory taken at its minimum per window of", "内存按此时间窗取最小值"),
    ("memory_creep", "min_fit_points"): ("fewest points a fit takes", "拟合所需最少点数"),
    ("memory_creep", "onset_min_gain"): ("an onset is stated when the bend cuts the fit's spread by",
                                         "拐点使拟合离散度减少此比例时才给出起点"),
    ("memory_creep", "restart_drop_frac"): ("a restart: memory falls below this share of its level around it",
                                            "判为重启：内存降至前后水平的此比例以下"),
    ("memory_creep", "segments_min"): ("restarts: the runs between them judged together from",
                                       "多次重启：运行段达到此数时合并判断"),
    ("memory_creep", "segment_min_points"): ("a run between restarts counts with at least this many points",
                                             "两次重启间的运行段至少有此数量的点才计入"),
    ("memory_creep", "segments_rising_share"): ("share of those runs that climb on their own, at least",
                                                "其中自身上升的运行段比例至少"),
    ("peers", "bucket_s"): ("compared per window of (each chip's median)", "比较时间窗（取每颗芯片的中位数）"),
    ("peers", "min_peers"): ("fewest peers to compare with", "比较所需最少同类数"),
    ("peers", "k_sigma"): ("out of line: beyond this many times the peers' natural spread",
                           "偏离：超过同类自然离散度的倍数"),
    ("peers", "min_duration_s"): ("out of line for at least", "偏离至少持续"),
    ("peers", "min_share"): ("in at least this share of that stretch's windows", "且占该时段时间窗的比例至少"),
    ("peers", "min_confidence"): ("confidence that it is no passing cycle (sign test)", "不是周期波动的置信度（符号检验）"),
    ("peers", "idle_util_pct"): ("a chip below this utilization is idle, not compared", "利用率低于此值的芯片视为空闲，不比较"),
    ("peers", "power_tol_frac"): ("temperature compared while power is this close to the peers'",
                                  "功耗与同类相差不超过此比例时才比较温度"),
    ("peers", "temp_min_c"): ("a chip hotter than its peers by at least", "芯片比同类至少高出"),
    ("peers", "node_temp_min_c"): ("a whole node hotter than the other nodes by at least", "整节点比其他节点至少高出"),
    ("peers", "node_k_sigma"): ("a whole node: beyond this many times the other nodes' spread",
                                "整节点：超过其他节点离散度的倍数"),
    ("peers", "group_min_nodes"): ("nodes out of line together are one group's finding from",
                                   "同时偏离的节点达到此数即作为一组报告"),
    ("peers", "power_min_frac"): ("power out of line by at least", "功耗偏离至少"),
    ("peers", "util_min_pct"): ("utilization out of line by at least", "利用率偏离至少"),
    ("peers", "hbm_growth_min_frac"): ("HBM growth beyond the peers' (share of capacity), at least",
                                       "HBM 增长超出同类（占容量比例）至少"),
    ("peers", "step_min_frac"): ("straggler: step time above its peers' by at least", "掉队：步时比同类至少高"),
    ("peers", "bw_min_frac"): ("straggler: collective bandwidth below its peers' by at least",
                               "掉队：集合通信带宽比同类至少低"),
    ("peers", "straggler_fail_frac"): ("a straggler slower than its peers by this much fails", "比同类慢此比例的掉队判为失败"),
    ("peers", "temp_fail_c"): ("a chip, node or group of nodes this much hotter than its peers fails",
                               "比同类高出此温度的芯片、节点或节点组判为失败"),
    ("peers", "fail_min_s"): ("a straggler or a hot chip fails when it lasts", "掉队或过热持续此时长才判为失败"),
    ("peers", "outlier_severity"): ("severity of any other outlier", "其他离群的严重级别"),
    ("peers", "large_factor"): ("a short stretch is named when beyond the limit by this factor",
                                "短时偏离超过界限的此倍数时即报告"),
    ("peers", "large_min_s"): ("a short stretch lasts at least", "短时偏离至少持续"),
    ("peers", "episodes_min_count"): ("recurring episodes: at least", "反复发作：至少次数"),
    ("peers", "episodes_many"): ("recurring episodes: named at this many", "反复发作：达到此次数即报告"),
    ("peers", "episodes_min_share"): ("or covering this share of the compared windows", "或占比较时间窗的比例"),
    ("peers", "tail_min_share"): ("slow steps beyond its peers' share by at least", "慢步比例比同类至少多"),
    ("peers", "tail_window_s"): ("slow steps counted over the last", "慢步按最近此时长统计"),
    ("peers", "tail_fail_cost_frac"): ("stalls that cost the job this share of its time fail", "使作业损失此比例时间的停顿判为失败"),
    ("stale_telemetry", "min_unchanged_s"): ("a reading unchanged for at least", "读数不变至少"),
    ("stale_telemetry", "peer_factor"): ("and this many times its peers' longest unchanged stretch",
                                         "且为同类最长不变时长的倍数"),
    ("stale_telemetry", "min_readings"): ("over at least this many readings", "且至少有此数量的读数"),
    ("stale_telemetry", "min_peers"): ("fewest peers to judge by", "判断所需最少同类数"),
    ("stale_telemetry", "min_peers_moving_frac"): ("share of its peers that changed meanwhile, at least",
                                                   "期间读数变化的同类比例至少"),
    ("stale_telemetry", "counter_quiet_moves"): ("a counter: still for as long as its peers take to move this many times",
                                                 "计数器：静止时长达到同类变化此次数所需的时长"),
    ("thermal", "hysteresis_c"): ("overheating ends this far below the limit", "回落至界限以下此温度才算结束"),
    ("thermal", "drift_fail_c"): ("a drift this far beyond its peers' own rise fails", "漂移超出同类升温此温度判为失败"),
    ("thermal", "drift_max_power_pct_per_h"): ("a drift counts while power rises by at most", "功耗上升不超过此速率时才计漂移"),
    ("thermal", "drift_min_hours"): ("drift judged on a 24 h moving average in runs of", "运行达到此时长时按 24 小时滑动平均判断漂移"),
    ("thermal", "drift_short_min_c_per_h"): ("shorter runs: a rise of at least", "较短运行：至少上升"),
    ("thermal", "drift_short_min_hours"): ("shorter runs judged from", "较短运行至少此时长才判断漂移"),
    ("thermal", "throttle_mask"): ("clock-throttle reasons counted (NVML bit mask)", "计入的降频原因（NVML 位掩码）"),
    ("thermal", "throttle_min_s"): ("throttled for at least", "降频至少持续"),
    ("throughput_degradation", "baseline_len_h"): ("baseline length", "基线长度"),
    ("throughput_degradation", "baseline_start_h"): ("baseline begins after", "基线开始于"),
    ("throughput_degradation", "block_s"): ("step time averaged per block of", "步时按此时长分块平均"),
    ("throughput_degradation", "bootstrap"): ("bootstrap resamples of its interval", "区间的自助重采样次数"),
    ("throughput_degradation", "cusum_h"): ("CUSUM alarm level (in smallest slowdowns)", "CUSUM 报警线（以最小变慢量计）"),
    ("utilization_dropouts", "global_min_share"): ("the job's stall: at least this share of the chips at once",
                                                   "作业级停顿：至少此比例的芯片同时跌落"),
    ("utilization_dropouts", "max_cv"): ("periodic: variation of the intervals at most", "周期性：间隔的变异系数至多"),
    ("utilization_dropouts", "max_p"): ("periodic: chance that random dips look so, at most", "周期性：随机跌落呈现同样规律的概率至多"),
    ("utilization_dropouts", "merge_gap_s"): ("dips closer than this are one", "间隔小于此值的跌落合并为一次"),
    ("utilization_dropouts", "min_events"): ("periodic: at least this many dips", "周期性：至少跌落次数"),
    ("utilization_dropouts", "min_share"): ("periodic: share of the intervals on the period, at least",
                                            "周期性：符合周期的间隔比例至少"),
    ("utilization_dropouts", "share_tol"): ("an interval on the period within", "间隔与周期相差不超过"),
    ("compute", "min_expected_frac"): ("a rank below this share of its chip's 16-bit peak fails",
                                       "低于芯片 16 位峰值算力此比例的进程判为失败"),
    ("compute", "max_below_median_frac"): ("a node this far below the other nodes' median fails",
                                           "低于其他节点中位数此比例的节点判为失败"),
    ("evidence", "min_coverage"): ("share of the soak each chip's metrics were read, at least",
                                   "每颗芯片各指标的读数覆盖率至少"),
    ("evidence", "min_availability"): ("share of the run spent training, at least", "训练时间占运行的比例至少"),
    ("evidence", "max_uninjected_restarts"): ("crashes and hangs not injected, at most", "非注入的崩溃与挂起至多"),
    ("evidence", "min_uninterrupted_h"): ("longest uninterrupted training required (0: reported only)",
                                          "要求的最长不间断训练（0：仅报告）"),
    ("evidence", "restart_clock_on_failure"): ("the burn-in clock restarts at a failure", "故障后老化计时重新开始"),
    ("evidence", "max_duration_h"): ("longest run the restarted clock may make (0: the plan's duration)",
                                     "重新计时后运行最长时长（0：计划时长）"),
    ("faults", "correctable_max_per_h"): ("correctable ECC errors warn above", "可纠正 ECC 错误超过此速率告警"),
    ("faults", "correctable_peer_factor"): ("or above this many times the chips' median", "或超过芯片中位数的此倍数"),
    ("faults", "correctable_peer_min"): ("once a chip has at least", "且芯片至少已有"),
    ("faults", "max_link_down_s"): ("a network port down longer than this fails", "网口中断超过此时长判为失败"),
    ("faults", "max_link_flaps"): ("more port flaps than this fail", "网口抖动超过此次数判为失败"),
    ("faults", "max_read_interval_s"): ("fault views read at least once per", "故障视图至少每隔此时长读取一次"),
    ("faults", "min_reads"): ("fault views read at least", "故障视图至少读取次数"),
    ("chips", "pair_busbw_gbps"): ("pair bus bandwidth", "点对点总线带宽"),
    ("chips", "tflops_16bit"): ("16-bit TFLOPS", "16 位 TFLOPS"),
    ("profile", "name"): ("profile", "配置名称"),
}

# a word of a threshold's name -> (en, zh); a name's words joined make its label
_WORDS: dict[str, tuple[str, str]] = {
    "min": ("minimum", "最小"), "max": ("maximum", "最大"), "frac": ("share", "比例"), "share": ("share", "比例"),
    "duration": ("duration", "时长"), "window": ("window", "时间窗"), "bucket": ("window", "时间窗"),
    "count": ("count", "次数"), "ratio": ("ratio", "倍数"), "alpha": ("significance", "显著性水平"),
    "threshold": ("threshold", "阈值"), "hysteresis": ("hysteresis", "回差"), "drift": ("drift", "漂移"),
    "temp": ("temperature", "温度"), "power": ("power", "功耗"), "util": ("utilization", "利用率"),
    "hbm": ("HBM", "HBM"), "rss": ("host memory", "主机内存"), "slope": ("slope", "斜率"),
    "step": ("step time", "步时"), "bw": ("bandwidth", "带宽"), "peers": ("peers", "同类"),
    "node": ("node", "节点"), "k": ("", ""), "sigma": ("spread multiple", "离散倍数"), "fail": ("fail at", "失败线"),
    "confidence": ("confidence", "置信度"), "ci": ("confidence", "置信度"), "idle": ("idle", "空闲"),
    "growth": ("growth", "增长"), "straggler": ("straggler", "掉队"), "outlier": ("outlier", "离群"),
    "severity": ("severity", "严重级别"), "large": ("large", "大"), "factor": ("factor", "倍数"),
    "episodes": ("episodes", "发作"), "many": ("many", "多次"), "tail": ("tail", "尾部"), "cost": ("cost", "代价"),
    "group": ("group", "组"), "nodes": ("nodes", "节点数"), "expected": ("expected", "预期"),
    "baseline": ("baseline", "基线"), "start": ("start", "开始"), "len": ("length", "长度"),
    "confirm": ("confirmation", "确认"), "gradual": ("gradual", "逐渐"), "block": ("block", "分块"),
    "cusum": ("CUSUM alarm level", "CUSUM 报警线"), "bootstrap": ("bootstrap resamples", "自助重采样次数"),
    "burn": ("burn", "老化"), "in": ("in", "期"), "envelope": ("envelope", "包络"), "fit": ("fit", "拟合"),
    "points": ("points", "点数"), "onset": ("onset", "起点"), "gain": ("gain", "增益"),
    "events": ("events", "事件数"), "cv": ("variation", "变异系数"), "tol": ("tolerance", "容差"),
    "p": ("p-value", "p 值"), "global": ("global", "全局"), "held": ("held", "占用"), "throttle": ("throttle", "降频"),
    "mask": ("mask", "掩码"), "hours": ("hours", "小时数"), "short": ("short runs", "短运行"),
    "low": ("low", "低"), "merge": ("merge", "合并"), "gap": ("gap", "间隔"), "rate": ("rate", "速率"),
    "counters": ("counters", "计数器"), "fatal": ("fatal", "致命"), "delta": ("change", "变化"),
    "per": ("per", "每"), "sample": ("sample", "采样"), "interval": ("interval", "间隔"),
    "coverage": ("coverage", "覆盖率"), "ecc": ("ECC", "ECC"), "correctable": ("correctable", "可纠正"),
    "uncorrectable": ("uncorrectable", "不可纠正"), "required": ("required", "要求的"), "runtime": ("runtime", "运行时长"),
    "below": ("below", "低于"), "median": ("median", "中位数"), "uninjected": ("uninjected", "非注入"),
    "restarts": ("restarts", "重启次数"), "availability": ("availability", "可用率"),
    "uninterrupted": ("uninterrupted", "不间断时长"), "restart": ("restart", "重启"), "clock": ("clock", "计时"),
    "on": ("on", ""), "failure": ("failure", "失败时"), "link": ("link", "链路"), "down": ("down", "中断"),
    "flaps": ("flaps", "抖动次数"), "read": ("read", "读取"), "reads": ("reads", "读取次数"),
    "peer": ("peer", "同类"), "pair": ("pair", "点对点"), "busbw": ("bus bandwidth", "总线带宽"),
    "tflops": ("TFLOPS", "TFLOPS"), "16bit": ("16-bit", "16 位"), "counter": ("counter", "计数器"),
    "quiet": ("quiet", "静止"), "moves": ("moves", "变化次数"), "moving": ("moving", "变化中"),
    "readings": ("readings", "读数"), "unchanged": ("unchanged", "不变"), "name": ("name", "名称"),
    "workload": ("workload", "负载"), "id": ("id", "编号"), "run": ("run", "运行"),
}

# a name's unit suffix -> how its value is written
_SUFFIXES = ("_bytes_per_h", "_frac_per_h", "_pct_per_h", "_c_per_h", "_per_h", "_bytes", "_pct",
             "_s", "_h", "_c", "_w", "_gbps", "_hours")


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def threshold_value(key: str, value: Any, lang: str = "en") -> str:
    """A threshold's value with the unit its name ends with."""
    from soak.report.names import METRIC_NAMES, kind_name, metric_name, severity_name

    if isinstance(value, bool) or not isinstance(value, int | float):
        if isinstance(value, str) and value in ("fail", "warn", "info"):
            return severity_name(value, lang)
        if isinstance(value, list | tuple) and all(isinstance(x, str) for x in value):
            return ", ".join(metric_name(x, lang) if x in METRIC_NAMES else kind_name(x, lang) for x in value)
        return plain(value) if lang == "en" else plain(value).replace("yes", "是").replace("no", "否")
    v = float(value)
    per_h = "/h"  # the unit style of the figures in both languages (soak.report.pdf_style.zh_durations)
    if key.endswith("_bytes_per_h"):
        return _si(v, "B") + per_h
    if key.endswith(("_frac_per_h", "_pct_per_h")):
        return f"{v * 100 if key.endswith('_frac_per_h') else v:.3g} %{per_h}"
    if key.endswith("_c_per_h"):
        return f"{v:.3g} °C{per_h}"
    if key.endswith("_per_h"):
        return f"{v:.3g}{per_h}"
    if key.endswith("_bytes"):
        return fmt_bytes(v)
    if key == "cusum_h":  # in units of the smallest slowdown, not hours
        return f"{v:.3g}"
    if key.endswith(("_frac", "_share")) or key in ("ci", "min_share", "min_confidence", "max_idle_fraction",
                                                      "min_coverage", "min_availability", "onset_min_gain",
                                                      "share_tol"):
        return f"{v * 100:.3g} %"
    if key.endswith("_pct"):
        return f"{v:.3g} %"
    if key.endswith("_s"):
        return dur(v)
    if key.endswith(("_h", "_hours")):
        return dur(v * 3600)
    if key.endswith("_c"):
        return f"{v:.3g} °C"
    if key.endswith("_w"):
        return f"{v:.3g} W"
    if key.endswith("_gbps"):
        return f"{v:.3g} GB/s"
    return plain(value)


_LABELS_ORDER = {k: i for i, k in enumerate(THRESHOLD_LABELS)}


def _label_rank(section: str, key: str) -> tuple[int, str]:
    """Where a figure's row goes: in the label table's order (a condition after what it
    qualifies), keys without a label after them, by name."""
    return _LABELS_ORDER.get((section, key), len(_LABELS_ORDER)), key


def threshold_label(key: str, lang: str = "en", section: str | None = None) -> str:
    """A threshold's name in words, without its unit suffix: its label in ``section`` (a
    detector or a section of the profile), else made of the words of its key."""
    from soak.report.names import KIND_NAMES, kind_name

    if (section, key) in THRESHOLD_LABELS:
        return pick(THRESHOLD_LABELS, (section, key), lang)  # type: ignore[arg-type]
    if key in KIND_NAMES:
        return kind_name(key, lang)
    stem = key
    for suffix in _SUFFIXES:
        if stem.endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
            break
    words = [_WORDS.get(w, (w, w))[1 if lang == "zh" else 0] for w in stem.split("_")]
    words = [w for w in words if w]
    if lang == "zh":
        return "".join(words) or key
    text = " ".join(words) or key
    return text[:1].upper() + text[1:]


def threshold_rows(name: str, thresholds: Mapping[str, Any], lang: str = "en",
                   tz: Any = None) -> list[tuple[str, str]]:
    """A detector's thresholds as (what, value) rows in words: a sentence where the threshold
    has one (the value inside it, the second cell empty), else its name in words and its value
    with its unit; a section of the profile as one row per figure under the section's name."""
    from soak.report.names import pick

    said: list[tuple[str, str]] = []  # the sentences: what a finding is decided by, first
    order: list[int] = []  # ... in the order they read (the threshold, then its conditions)
    out: list[tuple[str, str]] = []
    source = _without_notes(thresholds) if name == "profile" else thresholds
    for key in sorted(source, key=lambda k: _label_rank(name, k)):
        value = source[key]
        if key == "phases" and isinstance(value, Sequence):
            from soak.report.rows import phase_text

            text = phase_text(value, lang, tz) if tz is not None else phase_text(value, lang)
            out.append(("declared phases" if lang == "en" else "声明的阶段", text or "N/A"))
        elif key == "severity" and isinstance(value, Mapping) and all(isinstance(x, str) for x in value.values()):
            # the highest severity each kind may reach: one row per level, its kinds named
            from soak.report.names import kind_name, severity_name

            section = pick(PROFILE_SECTIONS, key, lang)
            sep, comma = (": ", ", ") if lang == "en" else ("：", "、")
            for level in sorted(set(value.values()), key=lambda x: ("fail", "warn", "info").index(x)
                                if x in ("fail", "warn", "info") else 3):
                kinds = comma.join(kind_name(k, lang) for k in sorted(value) if value[k] == level)
                out.append((f"{section}{sep}{severity_name(level, lang)}", kinds))
        elif isinstance(value, Mapping):
            section = pick(PROFILE_SECTIONS, key, lang) if key in PROFILE_SECTIONS else threshold_label(key, lang)
            for sk in sorted(value, key=lambda k: _label_rank(key, k)):
                sub = value[sk]
                if isinstance(sub, Mapping):  # a chip model's figures: one row, figures joined
                    text = ("；" if lang == "zh" else "; ").join(
                        f"{threshold_label(k, lang, key)} {threshold_value(k, x, lang)}" for k, x in sorted(sub.items()))
                    out.append((f"{section}: {sk}" if lang == "en" else f"{section}：{sk}", text))
                else:
                    sep = ": " if lang == "en" else "："
                    out.append((f"{section}{sep}{threshold_label(sk, lang, key)}", threshold_value(sk, sub, lang)))
        else:
            words = THRESHOLD_WORDS.get((name, key))
            v = threshold_value(key, value, lang)
            if words is not None:
                said.append((words[1 if lang == "zh" else 0].format(v=v), ""))
                order.append(_WORDS_ORDER.index((name, key)))
            else:
                label = threshold_label(key, lang, name)
                out.append((label[:1].upper() + label[1:] if lang == "en" else label, v))
    return [row for _, row in sorted(zip(order, said, strict=True))] + out


def threshold_lines(name: str, thresholds: Mapping[str, Any], lang: str = "en", tz: Any = None) -> list[str]:
    """The rows of ``threshold_rows`` as lines of one table cell."""
    sep = ": " if lang == "en" else "："
    return [label if not value else f"{label}{sep}{value}" for label, value in threshold_rows(name, thresholds, lang, tz)]


# label of each plan key, by its dotted key in plan.toml (``workloads`` for a workload's keys):
# (en, zh); a key not named here (a newer plan's) is shown as written in plan.toml
PLAN_LABELS: dict[str, tuple[str, str]] = {
    "run.duration": ("Planned duration", "计划时长"), "run.data_dir": ("Run folder", "运行目录"),
    "run.db": ("Store", "数据库"), "run.time_scale": ("Time scale (recorded s per wall s)", "时间缩放（每秒实际时间记录的秒数）"),
    "run.preflight": ("Environment self-check first", "先做环境自检"), "run.id": ("Run id", "运行编号"),
    "devices.backend": ("Telemetry backend", "遥测后端"), "devices.npu_smi": ("npu-smi", "npu-smi"),
    "devices.plog_dir": ("HCCL log folder", "HCCL 日志目录"), "devices.expect_chips": ("Chips expected", "预期的芯片数量"),
    "sampling.interval": ("Sampling interval", "采样间隔"), "sampling.flush_every": ("Written to the store every", "写入数据库间隔"),
    "sampling.detail_interval": ("Health and ECC read every", "健康与 ECC 读取间隔"),
    "faults.inject": ("Faults injected", "注入的故障"), "faults.codes_file": ("Site fault-code table", "现场故障码表"),
    "acceptance.profile": ("Acceptance profile", "验收配置"), "acceptance.thresholds": ("Profile overrides", "配置覆盖值"),
    "phases.checkpoint_every": ("Checkpoint every", "检查点间隔"),
    "phases.checkpoint_duration": ("Checkpoint may idle the chips for", "检查点允许芯片空闲的时间"),
    "sim.family": ("Simulated chip family", "模拟芯片系列"), "sim.chips": ("Simulated chips", "模拟的芯片数量"),
    "sim.scenario": ("Scenario", "场景"), "sim.fault": ("Tool fault", "工具故障"), "sim.seed": ("Random seed", "随机种子"),
    "sim.driver_version": ("Simulated driver version", "模拟驱动版本"),
    "exporter.listen": ("Metrics address", "指标地址"), "exporter.web_config": ("Metrics TLS and auth", "指标 TLS 与认证"),
    "restart.max_restarts": ("Restarts before giving up", "放弃前的重启次数"),
    "restart.backoff_initial": ("First restart delay", "首次重启延迟"), "restart.backoff_max": ("Longest restart delay", "最长重启延迟"),
    "restart.hang_timeout": ("Hung after no step for", "无进展判为挂起的时间"),
    "restart.stop_grace": ("Grace before a forced stop", "强制停止前的等待"),
    "jobs.analysis_every": ("Online analysis every", "在线分析间隔"),
    "jobs.wal_checkpoint_every": ("Store log compacted every", "数据库日志整理间隔"),
    "jobs.disk_check_every": ("Free disk checked every", "磁盘空间检查间隔"),
    "jobs.min_free": ("Stop below free disk", "磁盘剩余低于此值时停止"),
    "capture.steps": ("Steps per profiler capture", "每次性能采集的步数"), "capture.every": ("Capture every", "采集间隔"),
    "capture.max_per_hour": ("Captures per hour at most", "每小时最多采集次数"),
    "capture.max_trace": ("Largest trace kept", "保留的最大追踪文件"),
    "cluster.nodes": ("Nodes", "节点数"), "cluster.node_rank": ("This node's rank", "本节点序号"),
    "cluster.node_name": ("This node's name", "本节点名称"), "cluster.rendezvous": ("Rendezvous address", "汇合地址"),
    "cluster.advertise": ("Address advertised", "对外地址"), "cluster.join_timeout": ("Nodes wait to join for", "节点加入的等待时间"),
    "cluster.node_silence": ("Node lost after silence of", "无响应判为节点失联的时间"),
    "cluster.link_test_every": ("Link test every", "链路测试间隔"), "cluster.link_test_bytes": ("Link test size", "链路测试数据量"),
    "cluster.store_outage_max": ("Store outage ridden out for", "数据库中断的容忍时间"),
    "cluster.max_clock_offset": ("Largest clock offset", "最大时钟偏差"),
    "cluster.on_node_lost": ("When a node is lost", "节点失联时"),
    "reliability.project_nodes": ("MTTF projected to job sizes (nodes)", "平均无故障时间推算的作业规模（节点）"),
    "numerics.check_every": ("Numerical check every (steps)", "数值校验间隔（步）"),
    "numerics.spike_multiple": ("Loss spike at (times the median)", "损失突增判定（中位数倍数）"),
    "numerics.align_steps": ("Precision alignment steps", "精度对齐步数"),
    "workloads.name": ("Workload", "负载"), "workloads.size": ("Model size", "模型规模"),
    "workloads.nproc": ("Ranks on this node", "本节点进程数"), "workloads.extra": ("Extra arguments", "额外参数"),
}


def plan_label(section: str, key: str, lang: str = "en") -> str:
    """A plan key as the appendix names it: in words, or as written where it has no name;
    an override of the profile (``thresholds.x``) by the threshold's name."""
    full = f"{section}.{key}" if section else key
    if full in PLAN_LABELS:
        return pick(PLAN_LABELS, full, lang)
    if key.startswith("thresholds.") or not section:  # an override; a flat plan's key (unit in its name)
        return threshold_label(key.rsplit(".", 1)[-1], lang)
    return key
