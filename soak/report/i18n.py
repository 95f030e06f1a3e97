"""English and Chinese strings of the report (PDF and app).

One table, keyed by a short id. A missing Chinese string falls back to English so a new label
never breaks the zh report; ``tests/report`` checks both columns are complete.
"""

from __future__ import annotations

from soak.provenance import simulated_fleet, time_scaled

LANGS: tuple[str, ...] = ("en", "zh")

STRINGS: dict[str, tuple[str, str]] = {
    "title": ("Soak test acceptance report", "稳定性拷机验收报告"),
    "app_title": ("soak: acceptance report", "soak：验收报告"),
    "customer": ("Customer", "客户"),
    "site": ("Site", "站点"),
    "cluster": ("Cluster", "集群"),
    "node": ("Node", "节点"),
    "host": ("Host", "主机"),
    "run_id": ("Run ID", "运行 ID"),
    "workload": ("Workload", "负载"),
    "backend": ("Backend", "后端"),
    "status": ("Status", "状态"),
    "run_window": ("Run window", "运行时段"),
    "started": ("Started", "开始"),
    "ended": ("Ended", "结束"),
    "duration": ("Duration", "时长"),
    "planned": ("Planned duration", "计划时长"),
    "time_scale": ("Time scale", "时间倍率"),
    "restarts": ("Restarts", "重启次数"),
    "chips": ("Chips", "芯片数"),
    "chips_read_of": ("{seen} of {expected} read", "应读 {expected}，已读 {seen}"),
    "nodes": ("Nodes", "节点"),
    "nodes_line": ("{n} nodes: {names}", "{n} 个节点：{names}"),
    "serials": ("Serial numbers", "序列号"),
    "verdict": ("Verdict", "结论"),
    "verdict_pass": ("PASS", "通过"),
    "verdict_fail": ("FAIL", "未通过"),
    "verdict_running": ("RUNNING", "运行中"),
    "verdict_none": ("NOT ANALYSED", "未分析"),
    "why": ("Why", "原因"),
    "criteria": ("Acceptance criteria", "验收标准"),
    "criterion": ("Criterion", "标准"),
    "required": ("Required", "要求"),
    "measured": ("Measured", "实测"),
    "met": ("Met", "达标"),
    "met_yes": ("Met", "达标"),
    "met_no": ("Missed", "未达标"),
    "met_na": ("Not judged", "未判定"),
    "profile": ("Profile (whole run)", "验收配置（全局）"),
    "at_a_glance": ("Acceptance criteria at a glance", "验收标准一览"),
    "time_zone": ("Time zone", "时区"),
    "times_in": ("Times in {zone}", "时间均为 {zone}"),
    "accounting": ("Where the planned time went", "计划时间的去向"),
    "acc_planned": ("Planned soak", "计划拷机时长"),
    "acc_ran": ("Ran", "实际运行"),
    "acc_training": ("Training (share of planned)", "训练时间（占计划）"),
    "acc_judged": ("Availability as judged (start-up, injected faults excepted)", "判定可用率（不计启动与注入故障）"),
    "acc_down": ("Down for unexpected reasons", "意外停机"),
    "acc_longest": ("Longest uninterrupted training", "最长连续训练"),
    "interruptions": ("Interruptions", "中断"),
    "from": ("From", "开始"),
    "how_long": ("How long", "时长"),
    "int_cause": ("Cause", "原因"),
    "counted": ("Counted against availability", "是否计入可用率"),
    "acc_excused": ("no (expected)", "否（预期内）"),
    "acc_counted": ("yes", "是"),
    "coverage": ("Evidence coverage per chip", "逐芯片数据覆盖率"),
    "links": ("Links between nodes: busbw per pair and per node", "节点间链路：逐对与逐节点总线带宽"),
    "link_pair": ("Pair", "节点对"),
    "link_busbw": ("busbw GB/s", "总线带宽 GB/s"),
    "link_node_busbw": ("busbw GB/s (upper median of its pairs)", "总线带宽 GB/s（其各对的上中位数）"),
    "link_tests": ("Tests", "测试次数"),
    "link_pairs": ("Pairs", "对数"),
    "link_vs_median": ("vs cluster median", "相对集群中位数"),
    "link_vs_expected": ("vs expected", "相对预期"),
    "links_more": ("{n} more pairs, all ok, are left out here: every pair is in the attached findings JSON (links).",
                   "另有 {n} 对均正常，此处从略：每一对都在所附问题 JSON 的 links 中。"),
    "cov_lowest": ("Lowest", "最低"),
    "cov_all": ("Every metric", "各项指标"),
    "cov_note": (
        "Share of the soak covered by good readings; a reading covers up to two ticks ({tick}).",
        "良好读数覆盖拷机时长的比例；每个读数最多覆盖两个采样周期（{tick}）。",
    ),
    "legend_event": ("crash, restart, injected fault or exit", "崩溃、重启、注入故障或退出"),
    "legend_finding": ("finding span", "问题时段"),
    "legend_flagged": ("chip with a finding", "有问题的芯片"),
    "legend_finding_note": ("shaded on the charts where a finding applies", "图中阴影为问题所在时段"),
    "legend_others": ("other chips", "其他芯片"),
    "run_time_h": ("hours since start", "自开始起的小时数"),
    "env_section": ("Environment", "环境"),
    "plan_section": ("Plan", "计划"),
    "pdf_in_run": ("Reports already in the run folder", "运行目录中已有的报告"),
    "pdf_none_in_run": ("No PDF in the run folder yet.", "运行目录中还没有 PDF。"),
    "pdf_build_draft": ("Build an unsigned draft", "生成未签名草稿"),
    "pdf_remote_no_sign": (
        "This app listens beyond this machine, so it does not sign: sign on the machine that holds the key "
        "with `soak report pdf {run} -o FILE.pdf`, or enter the signing passphrase.",
        "本应用对外网开放，因此不在此签名：请在持有密钥的机器上用 `soak report pdf {run} -o 文件.pdf` 签名，或输入签名口令。",
    ),
    "passphrase": ("Signing passphrase", "签名口令"),
    "passphrase_wrong": ("Wrong passphrase: the PDF was not built.", "口令错误：未生成 PDF。"),
    "signed_yes": ("signed", "已签名"),
    "signed_no": ("unsigned", "未签名"),
    "chip_summary": ("Per-chip summary", "逐芯片汇总"),
    "device": ("Device", "设备"),
    "model": ("Model", "型号"),
    "serial": ("Serial", "序列号"),
    "util_mean": ("Util mean %", "平均利用率 %"),
    "util_min": ("Util min %", "最低利用率 %"),
    "temp_max": ("Temp max °C", "最高温度 °C"),
    "power_mean": ("Power mean W", "平均功耗 W"),
    "hbm_peak": ("HBM peak", "HBM 峰值"),
    "step_median": ("Step median s", "步时中位数 s"),
    "findings": ("Findings", "发现的问题"),
    "time_went": ("Where the time went", "时间都花在哪里"),
    "time_went_intro": ("Profiler captures of a few consecutive steps: the baseline after warm-up beside the "
                        "capture taken at each finding.",
                        "对连续若干训练步的性能采集：预热后的基线与每个发现触发的采集并列对比。"),
    "no_captures": ("No profiler captures.", "没有性能采集。"),
    "no_capture_for_finding": ("No capture was taken for this finding.", "该发现没有对应的性能采集。"),
    "capture_link": ("capture #{id}", "采集 #{id}"),
    "capture_col": ("At the finding", "发现时"),
    "baseline_col": ("Baseline", "基线"),
    "capture_what": ("Capture", "采集"),
    "label_baseline": ("baseline", "基线"),
    "label_request": ("at a finding", "发现触发"),
    "label_cadence": ("planned", "定期"),
    "steps_per_s": ("Steps/s", "步/秒"),
    "share_data": ("Data loading", "数据加载"),
    "share_forward": ("Forward", "前向计算"),
    "share_backward": ("Backward", "反向计算"),
    "share_optimizer": ("Optimizer", "优化器"),
    "share_comm": ("Communication", "通信"),
    "share_idle": ("Idle gaps", "空闲间隙"),
    "dominant": ("Dominant share", "耗时最多"),
    "top_op": ("Top operator {n}", "耗时第 {n} 的算子"),
    "cpu_fallbacks": ("CPU fallbacks", "回退到 CPU 的算子"),
    "fallbacks_na": ("not applicable on CPU", "CPU 上不适用"),
    "none_word": ("none", "无"),
    "trace": ("Trace", "追踪文件"),
    "capture_failed": ("capture failed: {error}", "采集失败：{error}"),
    "cause": ("Cause: {phase} takes {share} of the captured steps.", "原因：{phase}占采集步骤时间的 {share}。"),
    "no_findings": ("No findings.", "未发现问题。"),
    "kind": ("Kind", "类型"),
    "metric": ("Metric", "指标"),
    "severity": ("Severity", "严重程度"),
    "start": ("Start", "开始"),
    "end": ("End", "结束"),
    "summary": ("Summary", "摘要"),
    "evidence": ("Evidence", "证据"),
    "charts": ("Per-chip timelines", "逐芯片时间线"),
    "events": ("Event timeline", "事件时间线"),
    "no_events": ("No events.", "无事件。"),
    "time": ("Time", "时间"),
    "event": ("Event", "事件"),
    "message": ("Message", "说明"),
    "manifest": ("Environment manifest", "环境清单"),
    "key": ("Key", "键"),
    "value": ("Value", "值"),
    "clean_statement": ("Clean-run statement", "无异常声明"),
    "no_clean_statement": (
        "No clean-run statement: the run has findings or was not analysed.",
        "无无异常声明：本次运行存在问题或未经分析。",
    ),
    "detectors": ("Detector versions and thresholds", "检测器版本与阈值"),
    "detector": ("Detector", "检测器"),
    "version": ("Version", "版本"),
    "thresholds": ("Thresholds", "阈值"),
    "data_integrity": ("Raw data integrity", "原始数据完整性"),
    "data_sha256": ("SHA-256 of the exported raw data (CSV)", "导出原始数据 (CSV) 的 SHA-256"),
    "data_rows": ("Rows in the raw data", "原始数据行数"),
    "attachments_note": (
        "The raw data (CSV) and the findings (JSON) are attached to this PDF. "
        "Check the signature and the digest with: soak verify THIS.pdf --cert CERT.pem",
        "原始数据 (CSV) 与发现的问题 (JSON) 已作为附件嵌入本 PDF。"
        "可用 soak verify 本文件.pdf --cert 证书.pem 校验签名与摘要。",
    ),
    "signature": ("Signature", "签名"),
    "signature_note": (
        "Signed by the delivery engineer's key; the certificate (and its fingerprint) is handed over "
        "separately: only a signature by that certificate makes this report the vendor's.",
        "由交付工程师的密钥签名；证书（及其指纹）另行交付：只有该证书的签名才表明本报告出自供应商。",
    ),
    "unsigned": ("UNSIGNED DRAFT", "未签名草稿"),
    "generated": ("Generated", "生成时间"),
    "page": ("Page", "第"),
    "runs": ("Runs", "运行列表"),
    "no_runs": ("No runs in this store yet.", "存储中还没有运行记录。"),
    "overview": ("Overview", "概览"),
    "page_nav": ("Page", "页面"),
    "timelines": ("Timelines", "时间线"),
    "download_pdf": ("Download signed PDF", "下载已签名 PDF"),
    "build_pdf": ("Build the PDF", "生成 PDF"),
    "pdf_unsigned_hint": (
        "No signing key found: the PDF is unsigned. Create one with: soak keys init",
        "未找到签名密钥：PDF 未签名。请先运行 soak keys init",
    ),
    "language": ("Language", "语言"),
    "select_run": ("Run", "运行"),
    "select_chip": ("Chip", "芯片"),
    "live": ("Live: refreshes every few seconds", "实时：每隔几秒自动刷新"),
    "util_pct": ("Utilization %", "利用率 %"),
    "temp_c": ("Temperature °C", "温度 °C"),
    "hbm_used_bytes": ("HBM used GiB", "HBM 已用 GiB"),
    "power_w": ("Power W", "功耗 W"),
    "step_time_s": ("Step time s", "步时 s"),
    "na": ("N/A", "N/A"),
    "sim_fleet": ("simulated fleet", "模拟设备集群"),
    "sim_accelerated": ("accelerated time ×{scale}", "时间加速 ×{scale}"),
    "sim_slowed": ("slowed time ×{scale}", "时间放慢 ×{scale}"),
    "sim_not_acceptance": ("not an acceptance of hardware", "不构成硬件验收"),
    "run_window_scaled": ("Run window (run time line ×{scale})", "运行时段（运行时间线 ×{scale}）"),
    "duration_wall": ("{run} on the run time line; {wall} wall clock", "运行时间线 {run}；实际用时 {wall}"),
    "generated_wall": ("Generated (wall clock)", "生成时间（实际时间）"),
    "time_line_note": (
        "Times of this run (window, findings, events, charts) are on its scaled time line: each "
        "wall-clock second was recorded as {scale} s, from the moment the run started. The "
        "generation time is wall-clock time, so it can read earlier than the run's end.",
        "本次运行的时间（时段、问题、事件、图表）均在其缩放时间线上：自运行开始起，每 1 秒实际时间记为 "
        "{scale} 秒。生成时间为实际时间，因此可能早于运行结束时间。",
    ),
}


def t(key: str, lang: str = "en") -> str:
    """The string ``key`` in ``lang`` ("en" or "zh"); unknown keys come back as the key."""
    pair = STRINGS.get(key)
    if pair is None:
        return key
    return pair[1] if lang == "zh" and pair[1] else pair[0]


def simulation_label(backend: str | None, time_scale: float | None, lang: str = "en") -> str | None:
    """"simulated fleet, accelerated time ×600 — not an acceptance of hardware", or None for a
    run on hardware in real time. The cover, every page's footer and the app header show it."""
    parts = []
    if simulated_fleet(backend):
        parts.append(t("sim_fleet", lang))
    if time_scaled(time_scale):
        key = "sim_accelerated" if time_scale > 1 else "sim_slowed"
        parts.append(t(key, lang).format(scale=f"{time_scale:g}"))
    if not parts:
        return None
    return f"{('，' if lang == 'zh' else ', ').join(parts)} — {t('sim_not_acceptance', lang)}"


def verdict_label(verdict: str | None, lang: str = "en") -> str:
    key = {"pass": "verdict_pass", "fail": "verdict_fail", "running": "verdict_running"}.get(
        verdict or "", "verdict_none"
    )
    return t(key, lang)


# The cluster view (soak.report.cluster, soak.report.cluster_text): kept apart for readability.
CLUSTER_STRINGS: dict[str, tuple[str, str]] = {
    "cluster_view": ("Cluster view", "集群视图"),
    "cluster_verdict": ("Cluster verdict", "集群结论"),
    "cluster_counts": (
        "{nodes} nodes, {chips} chips: {fail} fail, {warn} with warnings, {ok} pass, {nodata} without data",
        "{nodes} 个节点，{chips} 颗芯片：失败 {fail}，告警 {warn}，通过 {ok}，无数据 {nodata}",
    ),
    "cluster_matrix": ("Every chip of every node", "各节点的全部芯片"),
    "cluster_legend": (
        "F fail · W warning · P pass · – no data (no readings the evidence counts). A chip fails on a failing finding "
        "about it or on readings covering less than {cov} of the soak; findings about a rank or a "
        "whole node (stragglers) count for the node.",
        "F 失败 · W 告警 · P 通过 · – 无数据（无计入证据的读数）。芯片有失败级问题，或其读数覆盖不足拷机时长的 "
        "{cov}，即判为失败；关于 rank 或整个节点的问题（掉队者）计入节点。",
    ),
    "chip_v_fail": ("fail", "失败"),
    "chip_v_warn": ("warning", "告警"),
    "chip_v_pass": ("pass", "通过"),
    "chip_v_nodata": ("no data", "无数据"),
    "node_verdicts": ("Verdict per node", "各节点结论"),
    "node_col": ("Node", "节点"),
    "rank_col": ("Rank", "Rank"),
    "node_status": ("Status", "状态"),
    "node_chips": ("Chips", "芯片"),
    "reasons_col": ("Why", "原因"),
    "node_ok": ("no finding; every chip read and passed", "无问题；所有芯片均已读到并通过"),
    "peers_title": ("Stragglers and outliers", "掉队者与离群芯片"),
    "no_peers": (
        "No straggler or outlier: every chip, rank and node stayed in line with its peers.",
        "无掉队者或离群芯片：所有芯片、rank 与节点均与同类保持一致。",
    ),
    "where_col": ("Where", "位置"),
    "deviation": ("Deviation", "偏差"),
    "versions_title": ("Versions across nodes", "各节点版本核对"),
    "versions_agree": ("All {n} version fields agree on every node.", "全部 {n} 个版本字段在各节点一致。"),
    "versions_differ": ("{n} of {m} version fields differ between nodes (marked *, listed first).",
                        "{m} 个版本字段中有 {n} 个在节点间不一致（以 * 标出，排在最前）。"),
    "version_field": ("Field", "字段"),
    "version_value": ("Value on most nodes", "多数节点的取值"),
    "version_other": ("Other values", "其他取值"),
    "version_none": ("No node recorded a version manifest.", "没有节点记录版本清单。"),
    "cluster_statement": ("Clean-run statement for the cluster", "集群无故障运行声明"),
    "cluster_hours": (
        "{nodes} nodes, {chips} accelerator chips: {hours} {unit} in all. Chip-hours count "
        "accelerator chips (not ranks, hosts or CPUs), only while training and read; an hour "
        "without readings never counts, so the figure understates what the cluster carried.",
        "{nodes} 个节点，{chips} 颗加速芯片：共 {hours} {unit}。芯片小时只计加速芯片（不计 rank、主机或 "
        "CPU），且只计训练中并有读数的时间；没有读数的时间一律不计，因此该数字低估集群实际承载的负荷。",
    ),
    "cluster_no_statement": ("No clean-run statement: the cluster did not pass.",
                             "无无故障运行声明：集群未通过验收。"),
    "chips_flagged": ("Chips with findings", "有问题的芯片"),
    "chips_flagged_none": ("Every chip passed.", "所有芯片均通过。"),
    "chips_csv_note": (
        "The full per-chip table ({n} chips: node, chip, verdict, coverage, key figures, findings) "
        "is attached as {name}, covered by the signature like the raw data.",
        "完整的逐芯片表（{n} 颗芯片：节点、芯片、结论、覆盖率、关键数值、问题数）作为附件 {name}，"
        "与原始数据一样受签名保护。",
    ),
    "chip_detail": ("Chip detail", "芯片详情"),
    "chip_pick": ("Open a chip (or click its cell)", "打开芯片（或点击矩阵单元格）"),
    "r_status": ("node {status}", "节点{status}"),
    "r_back": (" (came back later)", "（后来恢复）"),
    "r_preflight": ("preflight {status}", "预检{status}"),
    "r_coverage": ("readings cover {got} < {min}", "读数覆盖 {got} < {min}"),
    "r_unread": ("{n} of {m} chips never read", "{m} 颗芯片中有 {n} 颗从未读到"),
    "r_chips": ("{fail} chip(s) fail, {warn} with warnings: {names}", "芯片失败 {fail} 颗、告警 {warn} 颗：{names}"),
}
STRINGS.update(CLUSTER_STRINGS)
