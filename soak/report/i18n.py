"""English and Chinese strings of the report (PDF and app).

One table, keyed by a short id. A missing Chinese string falls back to English so a new label
never breaks the zh report; ``tests/report`` checks both columns are complete.
"""

from __future__ import annotations

from soak.analysis.messages import SHARED_CODES
from soak.analysis.model import KINDS
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
    "workload_procs": ("{name} on {nproc} process(es)", "{name}（{nproc} 个进程）"),
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
    "reliability": ("Reliability: effective training time and time to failure", "可靠性：有效训练时间与无故障时间"),
    "rel_share": ("Share of the planned time", "占计划时间"),
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
    "legend_rank": ("rank {rank}", "进程 rank {rank}"),
    "legend_other_ranks": ("other ranks", "其他进程（rank）"),
    "run_time_h": ("hours since start", "自开始起的小时数"),
    "pdf_in_run": ("Reports already in the run folder", "运行目录中已有的报告"),
    "pdf_none_in_run": ("No PDF in the run folder yet.", "运行目录中还没有 PDF。"),
    "pdf_build_draft": ("Build an unsigned draft", "生成未签名草稿"),
    "pdf_remote_no_sign": (
        "This app listens beyond this machine, so it does not sign: sign on the machine that holds the key "
        "with `soak report pdf {run} -o FILE.pdf`.",
        "本应用对外网开放，因此不在此签名：请在持有密钥的机器上用 `soak report pdf {run} -o 文件.pdf` 签名。",
    ),
    "pdf_no_token": (
        "This session does not sign: anyone on this machine can reach the app, so it signs only in a session "
        "opened at the address `soak report serve` printed (its token). Or sign with `soak report pdf {run} -o FILE.pdf`.",
        "本会话不签名：本机任何用户都能访问本应用，只有从 `soak report serve` 打印的地址（含令牌）打开的会话才签名；"
        "或用 `soak report pdf {run} -o 文件.pdf` 签名。",
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
    "chip_health": ("Health", "健康状态"),
    "chip_ecc": ("ECC uncorr. / corr.", "ECC 不可纠正 / 可纠正"),
    "chip_link": ("Link", "网口"),
    "link_up_all": ("up", "正常"),
    "link_down_n": ("down {n} ×", "断开 {n} 次"),
    "device_faults": ("Device faults", "芯片故障"),
    "df_intro": ("What each chip's own fault report said (health, fault codes, ECC, network port), one row per chip "
                 "and signal (and per code), failing first; every change is in the event timeline.",
                 "各芯片自身故障报告（健康状态、故障码、ECC、网口）所报内容：每个芯片每种信号（及每个故障码）一行，"
                 "失败级在前；每次变化见事件时间线。"),
    "df_first": ("First seen", "首次出现"),
    "df_chip": ("Chip", "芯片"),
    "df_signal": ("Signal", "信号"),
    "df_code": ("Code", "故障码"),
    "df_meaning": ("Meaning", "含义"),
    "df_level": ("Level", "级别"),
    "df_action": ("Action", "处理"),
    "df_times": ("How often, last value", "次数与最后读数"),
    "df_none": ("No chip reported a fault: the fault reports of {read} of {chips} chips were read ({readings} readings).",
                "没有芯片报告故障：已读取 {chips} 个芯片中 {read} 个的故障报告（{readings} 次读数）。"),
    "df_not_read": (" Not read: {chips}.", "未读取：{chips}。"),
    "df_none_unread": ("No chip reported a fault, but no chip's fault report (health, ECC) was read ({chips} chips): "
                       "not judged.",
                       "没有芯片报告故障，但未读取到任何芯片的故障报告（健康状态、ECC；共 {chips} 个芯片）：不作判定。"),
    "df_none_unjudged": ("No chip reported a fault (the run was not judged on the chips' fault reports).",
                         "没有芯片报告故障（本次运行未按芯片故障报告判定）。"),
    "df_more": ("… +{n} more rows (soak-findings.json)", "… 另有 {n} 行（见 soak-findings.json）"),
    "numerics": ("Numerical correctness", "数值正确性"),
    "nm_intro": ("Every wrong result, NaN/Inf and loss spike the workloads' own checks found, failing first; above, "
                 "the checks each chip ran.",
                 "工作负载自身校验发现的每个错误结果、NaN/Inf 与损失突增，失败级在前；上方为各芯片运行的校验次数。"),
    "nm_none": ("No check found a wrong result.", "校验未发现错误结果。"),
    "nm_unjudged": ("The run was not judged on numerical correctness.", "本次运行未按数值正确性判定。"),
    "nm_time": ("Time", "时间"),
    "nm_rank": ("Rank", "Rank"),
    "nm_step": ("Step", "步"),
    "nm_what": ("What", "类型"),
    "nm_check": ("Check", "校验"),
    "nm_error": ("Error", "误差"),
    "nm_tolerance": ("Tolerance", "容差"),
    "nm_class": ("Settled as", "判定"),
    "nm_severity": ("Severity", "严重性"),
    "nm_direct": ("this chip (against a reference)", "本芯片（对照参考值）"),
    "nm_unsettled": ("not settled", "未确定"),
    "nm_no_chip": ("no chip named", "未指明芯片"),
    "nm_more": ("… +{n} more rows (the run's events)", "… 另有 {n} 行（见运行事件）"),
    "df_matrix_mark": ("! the chip reported a device fault", "! 芯片报告了故障"),
    "df_matrix_mark_app": ("A chip framed in black reported a device fault (its tooltip: fault !).",
                           "黑框标出的芯片报告了故障（提示中 fault 为 !）。"),
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
    # the verdict line: the findings that decided it (the severity policy's fails)
    "decided_by": ("decided by {what}", "判定依据：{what}"),
    "decided_more": ("and {n} more", "另有 {n} 个"),
    "decided_none": ("no failing finding", "无失败级问题"),
    "decided_warns": ("no failing finding; {n} warning(s)", "无失败级问题；告警 {n} 个"),
    "where_job": ("the job", "整个作业"),
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
    # the appendix (soak.report.appendix): the manifest and the plan as labelled tables
    "appendix": ("Appendix: thresholds, environment manifest and run plan", "附录：阈值、环境清单与运行计划"),
    "appendix_intro": ("The thresholds the detectors judged by, in words (the acceptance profile itself is attached); "
                       "what the node ran on and how the run was set up, as recorded when it started. Keys left "
                       "unset are left out; each plan setting is named in words, in the order of the run's plan file (plan.toml).",
                       "各检测器判定所依据的阈值（以文字说明，验收配置文件本身已作为附件）；运行开始时记录的节点环境与运行设置。"
                       "未设置的项不列出；计划的各项设置以文字命名，顺序与运行计划文件（plan.toml）一致。"),
    "app_host": ("Host", "主机"),
    "app_software": ("Software", "软件"),
    "app_other": ("Other recorded facts", "其他记录"),
    "app_cards": ("Accelerator cards", "加速卡"),
    "app_gpus": ("GPUs", "GPU"),
    "app_npu": ("NPU", "NPU"),
    "app_gpu": ("GPU", "GPU"),
    "app_firmware": ("Firmware", "固件"),
    "app_bus": ("PCIe bus", "PCIe 总线"),
    "app_vbios": ("VBIOS", "VBIOS"),
    "app_uuid": ("UUID", "UUID"),
    "plan_title": ("Run plan", "运行计划"),
    "plan_run": ("Run", "运行"),
    "plan_devices": ("Devices", "设备"),
    "plan_workloads": ("Workload", "负载"),
    "plan_sampling": ("Sampling", "采样"),
    "plan_faults": ("Injected faults", "故障注入"),
    "plan_acceptance": ("Acceptance", "验收"),
    "plan_phases": ("Planned phases", "计划阶段"),
    "plan_sim": ("Simulated fleet", "模拟设备"),
    "plan_exporter": ("Metrics exporter", "指标导出"),
    "plan_restart": ("Restarts", "重启"),
    "plan_jobs": ("Background jobs", "后台任务"),
    "plan_capture": ("Performance captures", "性能采集"),
    "plan_cluster": ("Cluster", "集群"),
    "plan_reliability": ("Reliability", "可靠性"),
    "plan_numerics": ("Numerical checks", "数值校验"),
    "plan_links": ("Links between nodes", "节点间链路"),
    "plan_peers": ("Comparison among peers", "同类比较"),
    "key": ("Key", "键"),
    "value": ("Value", "值"),
    "clean_statement": ("Clean-run statement", "无异常声明"),
    "no_clean_statement": (
        "No clean-run statement: the run has findings or was not analysed.",
        "不出具无异常声明：本次运行存在问题或未经分析。",
    ),
    "detectors": ("Detector versions and thresholds", "检测器版本与阈值"),
    "detector": ("Detector", "检测器"),
    "version": ("Version", "版本"),
    "thresholds": ("Thresholds", "阈值"),
    "data_integrity": ("Raw data integrity", "原始数据完整性"),
    "data_sha256": ("SHA-256 of the exported raw data (CSV)", "导出原始数据 (CSV) 的 SHA-256"),
    "data_rows": ("Rows in the raw data", "原始数据行数"),
    "attachments_note": (
        "The raw data ({raw}), the acceptance profile it was judged by ({profile}) and the findings "
        "(JSON) are attached to this PDF. Analyse the raw data again with: soak analyze {raw} --profile "
        "{profile} (without the profile, the default profile's thresholds apply). "
        "Check the signature and the digests with: soak verify THIS.pdf --cert CERT.pem",
        "原始数据 ({raw})、评判所用的验收配置 ({profile}) 与发现的问题 (JSON) 已作为附件嵌入本 PDF。"
        "重新分析原始数据：soak analyze {raw} --profile {profile}（不带该配置时按默认配置的阈值）。"
        "可用 soak verify 本文件.pdf --cert 证书.pem 校验签名与摘要。",
    ),
    "signature": ("Signature", "签名"),
    "signature_note": (
        "Signed by the delivery engineer's key; the certificate (and its fingerprint) is handed over "
        "separately: only a signature by that certificate makes this report the vendor's.",
        "由交付工程师的密钥签名；证书（及其指纹）另行交付：只有该证书的签名才表明本报告出自供应商。",
    ),
    "unsigned": ("UNSIGNED DRAFT", "未签名草稿"),
    "finding_withdrawn": (" (withdrawn at the run's end {when}: the final analysis of the whole run does not keep it)",
                          "（已撤回：运行结束时 {when} 的全程最终分析未保留此问题）"),
    "signed_by": ("Signed by: {name} (certificate SHA-256 {fingerprint})", "签名者：{name}（证书 SHA-256 {fingerprint}）"),
    # the visible signature's stamp; pyhanko fills in %(signer)s (the certificate's common
    # name) and %(ts)s (the signing time)
    "stamp_signer": ("Signed by: %(signer)s", "签名者：%(signer)s"),
    "stamp_signer_fp": ("Signed by: certificate SHA-256 {fingerprint}...", "签名者：证书 SHA-256 {fingerprint}..."),
    "stamp_time": ("Time: %(ts)s", "签名时间：%(ts)s"),
    "stamp_run": ("Run: {run}", "运行 ID：{run}"),
    "stamp_verdict": ("Verdict: {verdict}", "结论：{verdict}"),
    "stamp_data": ("Data SHA-256: {sha}...", "原始数据 SHA-256：{sha}..."),
    "demo_key": ("Signed with the soak demo's key: not an acceptance signature",
                 "使用 soak 演示密钥签名：不构成验收签名"),
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
    "finding_superseded": (" (online estimate while the run went on; the final analysis of the whole run revised it: "
                           "see the finding)", "（运行中的在线估计；全程最终分析已修订：以该问题的最终结果为准）"),
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
    "rel_by_node": ("Reliability by node", "各节点可靠性"),
    "startup_message": ("workload start-up", "工作负载启动"),
    "rel_node_hours": ("Node-hours", "节点小时"), "rel_productive": ("Productive", "有效训练"),
    "rel_ettr": ("ETTR", "ETTR"), "rel_failures": ("Failures", "故障"), "rel_last_failure": ("Last failure", "最近故障"),
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
                             "不出具无故障运行声明：集群未通过验收。"),
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
    "r_coverage": ("readings cover {got} < {min}", "读数覆盖 {got} < {min}"),
}
STRINGS.update(CLUSTER_STRINGS)


# -- the judgement's sentences in Chinese: one template per code of soak.analysis.messages ----
# Same values and syntax as the English table; names of machine keys (``{x:metric}``, ...)
# are written by the report's formats in the report's language (soak.report.sentences).
_PEERS_TAIL_ZH = "（自然离散度的 {z:.1f} 倍，置信度 {confidence:.2f}）"
_NODE_ZH = "节点 {node}[[members|（{members}）]][[ranks|（{ranks} 个 rank）]]："
_STRAGGLER_ZH = {
    "step_time_s": "步时比{scope:scope}同类的 {baseline_s:.4g} 秒慢 {change_pct:.1f}%，持续 {duration_h:.1f} 小时",
    "compute_s": "计算时间（集合通信之外）比{scope:scope}同类的 {baseline_s:.4g} 秒慢 {change_pct:.1f}%，持续 {duration_h:.1f} 小时",
    "busbw_gbps": "总线带宽比{scope:scope}同类的 {baseline_gbps:.1f} GB/s 低 {change_pct:.1f}%，持续 {duration_h:.1f} 小时",
}
_NODE_CHIPS_ZH = "节点 {node}[[members|（{members}）]][[chips|（{chips} 个芯片）]]："
_EPISODE_DEVIATION_ZH = {
    "temp_c": "功耗相当时，温度偏离{scope:scope}同类的 {baseline_c:.1f} °C {deviation_c:+.1f} °C",
    "power_w": "功耗偏离{scope:scope}同类的 {baseline_w:.1f} W {deviation_w:+.1f} W（{change_pct:+.1f}%）",
    "util_pct": "利用率偏离{scope:scope}同类的 {baseline_pct:.1f}% {deviation_pct:+.1f}%",
    "hbm_used_bytes": "HBM 占用增长偏离{scope:scope}同类的 {baseline_mb:.0f} MB {deviation_mb:+.0f} MB",
    "step_time_s": "步时比{scope:scope}同类的 {baseline_s:.4g} 秒慢 {change_pct:.1f}%",
    "compute_s": "计算时间（集合通信之外）比{scope:scope}同类的 {baseline_s:.4g} 秒慢 {change_pct:.1f}%",
    "busbw_gbps": "总线带宽比{scope:scope}同类的 {baseline_gbps:.1f} GB/s 低 {change_pct:.1f}%",
}
_OUTLIER_ZH = {m: d + "，持续 {duration_h:.1f} 小时" for m, d in _EPISODE_DEVIATION_ZH.items()
               if m in ("temp_c", "power_w", "util_pct", "hbm_used_bytes")}
_EPISODES_ZH = ("{deviation}，共 {count} 次，每次通常 {typical_min:.0f} 分钟[[period_min|，每 {period_min:.0f} 分钟一次]]"
                "[[!period_min|，无周期]]，占运行时间的 {share_pct:.0f}%"
                "[[slowdown_pct|；其间作业步时变化 {slowdown_pct:+.1f}%，损失运行中训练时间的 {lost_pct:.1f}%]]")
_TAILS_ZH = ("{metric:metric}在 {share_pct:.1f}% 的读数中停顿（同类 {peers_share_pct:.1f}%）"
             "[[stall_x|，达其中位数的 {stall_x:.2f} 倍]]，持续 {duration_h:.1f} 小时"
             "[[cost_pct|；停顿时作业步时 {step_in_stalls_s:.3g} 秒，其余时候 {step_outside_s:.3g} 秒："
             "作业时间多 {cost_pct:.1f}%]]；置信度 {confidence:.2f}")
_LINK_FLOOR_ZH = "，低于下限 {floor_gbps:.3g} GB/s（{chip} 预期 {expected_gbps:g} GB/s 的 {floor_share_pct:.0f}%）[[injected|（注入：{injected}）]]"
_LINK_REL_ZH = ("，逐次测试比{whom}低 {below_pct:.0f}%[[others_median_gbps|（其所有测试的中位数 {others_median_gbps:.3g} GB/s）]]"
                "[[injected|（注入：{injected}）]]")
_LINK_NODE_ZH = "节点 {node}：其链路的 all-reduce 总线带宽 {busbw_gbps:.3g} GB/s（其 {pairs} 对的上中位数，{tests} 次测试的中位数）"
_LINK_PAIR_ZH = "链路 {node} – {other}：all-reduce 总线带宽 {busbw_gbps:.3g} GB/s（{tests} 次测试的中位数）"
_MEMORY_ZH = ("{metric:metric}自[[change_point|变化点]][[!change_point|老化期结束]]起每小时增长 {slope_mb_per_h:.1f} MB"
              "（90% 置信区间 {slope_low_mb_per_h:.1f}–{slope_high_mb_per_h:.1f}）；拟合期内共增长 {growth_mb:.0f} MB；")
_MEMORY_RESTARTS_ZH = ("{metric:metric}在两次重启之间的 {segments} 段运行中每小时均增长 {slope_mb_per_h:.1f} MB"
                       "（90% 置信区间 {slope_low_mb_per_h:.1f}–{slope_high_mb_per_h:.1f}，其中 {rising} 段各自上升），"
                       "每段在 {hours_min_h:.1f}–{hours_max_h:.1f} 小时内增长 {growth_min_mb:.0f}–{growth_max_mb:.0f} MB，"
                       "直到重启释放；")
_CREEP_PEERS_ZH = ("{metric:metric}在两次重启之间的 {segments} 段运行中每小时均增长 {slope_mb_per_h:.1f} MB，"
                   "比{scope:scope}同类的 {baseline_mb_per_h:.1f} MB/h 高 {deviation_mb_per_h:+.1f} MB/h"
                   "（限值 {limit_mb_per_h:.1f}）；每段在重启释放前增长 {growth_min_mb:.0f}–{growth_max_mb:.0f} MB")
_UTIL_ZH = ("利用率 {count} 次跌至 {low_pct:g}% 以下，[[periodic|每 {period_s:.0f} 秒一次（CV {cv:.2f}）]][[!periodic|无周期]]，"
            "平均每次 {mean_duration_s:.0f} 秒，空闲占 {idle_fraction:.1%}，")
_HANG_ZH = "{duration_min:.0f} 分钟没有进展[[ongoing|（仍在持续）]]："
_THROUGHPUT_ZH = ("步时增加 {change_pct:.1f}%（90% 置信区间 {change_low_pct:.1f}–{change_high_pct:.1f}），{how}："
                  "{baseline_ms:.1f} → {final_ms:.1f} ms")
_NUMERIC_CLASS_ZH = ("[[class_chip|；已确认为 rank {rank} 的芯片]][[serial|（序列号 {serial}）]]"
                     "[[class_transient|；重算后未复现（瞬时）]][[transients|；该芯片已有 {transients} 次瞬时错误]]"
                     "[[class_everywhere|；所有芯片均复现：模型自身的数值问题，非芯片]][[unsettled|；未能确定是哪个 rank]]")
# how a numerical fault of the event timeline was settled: on which chip, or not again
_EVENT_CLASS_ZH = ("[[chip_rank|：仅在 rank {chip_rank} 的芯片上复现]][[class_chip_only|：在该芯片上复现，CPU 上未复现]]"
                   "[[class_transient|：重算后未复现（瞬时）]][[class_everywhere|：在 CPU 上同样复现（数据或模型本身）]]")
_LINK_RULE_ZH = "没有节点或节点对低于其他的 {max_below_median_pct:g}% 以上"
_COMPUTE_RULE_ZH = "没有节点低于其他节点 {max_below_median_pct:g}% 以上"

CHINESE: dict[str, str] = {
    "memory_creep.runs_out_within_required": _MEMORY_ZH + (
        "按此速率 {hours_to_exhaustion_h:hours} 后耗尽（在要求的 {required_h:hours} 内）"),
    "memory_creep.runs_out_beyond_required": _MEMORY_ZH + (
        "按此速率 {hours_to_exhaustion_h:hours} 后耗尽（超出要求的 {required_h:hours}）"),
    "memory_creep.capacity_unknown": _MEMORY_ZH + "容量未知",
    "memory_creep.restarts.runs_out_within_required": _MEMORY_RESTARTS_ZH + (
        "按此速率重启后约 {hours_to_exhaustion_h:.0f} 小时耗尽（在要求的 {required_h:g} 小时内）"),
    "memory_creep.restarts.runs_out_beyond_required": _MEMORY_RESTARTS_ZH + (
        "按此速率重启后约 {hours_to_exhaustion_h:.0f} 小时耗尽（超出要求的 {required_h:g} 小时）"),
    "memory_creep.restarts.capacity_unknown": _MEMORY_RESTARTS_ZH + "容量未知",
    "utilization_dropouts.global": _UTIL_ZH + "所有芯片同时发生（{shared_fraction:.0%} 重合）：全局停顿，如数据加载",
    "utilization_dropouts.device": _UTIL_ZH + "仅本芯片",
    "utilization_dropouts.explained": "{count} 次利用率跌落均发生在声明的{phase:event}阶段内（预期内）",
    "hang.idle_hbm_held": _HANG_ZH + "利用率接近 0 而 HBM 仍被占用",
    "hang.heartbeats_stopped": _HANG_ZH + "训练心跳停止而遥测仍在继续",
    "hang.no_progress": _HANG_ZH + "芯片空闲且无心跳",
    "comm_timeouts.rising": ("{metric:metric}呈上升趋势：最后三分之一时段 {last_third_count} 次，最初三分之一 "
                             "{first_third_count} 次（{ratio:.1f} 倍，p = {p_value:.1e}），共 {total:.0f} 次"),
    "comm_timeouts.fatal": "{metric:metric} +{increment:.0f}：集合通信超时，作业中止",
    "thermal.excursions": "{count} 次超过 {threshold_c:g} °C，共 {total_min:.1f} 分钟，峰值 {peak_c:.1f} °C",
    "thermal.drift": ("温度以每小时 {slope_c_per_h:.2f} °C 的速度上升（90% 置信区间 {slope_low_c_per_h:.2f}–"
                      "{slope_high_c_per_h:.2f}）[[power_trend_pct_per_h|，功耗基本不变（每小时 {power_trend_pct_per_h:+.2f}%）]]，"
                      "{first_c:.1f} → {last_c:.1f} °C（小时中位数）；按此速率每天升高 {per_day_c:.1f} °C"),
    "thermal.throttled": "降频 {duration_min:.1f} 分钟：{reasons}",
    "throughput_degradation.abrupt": _THROUGHPUT_ZH.replace("{how}", "突然上升"),
    "throughput_degradation.gradual": _THROUGHPUT_ZH.replace("{how}", "逐渐上升（每小时 {slope_pct_per_h:.2f}%）"),
    "outlier.temp_c": ("功耗相当时，温度偏离{scope:scope}同类的 {baseline_c:.1f} °C {deviation_c:+.1f} °C，"
                       "持续 {duration_h:.1f} 小时" + _PEERS_TAIL_ZH),
    "outlier.power_w": ("功耗偏离{scope:scope}同类的 {baseline_w:.1f} W {deviation_w:+.1f} W（{change_pct:+.1f}%），"
                        "持续 {duration_h:.1f} 小时" + _PEERS_TAIL_ZH),
    "outlier.util_pct": ("利用率偏离{scope:scope}同类的 {baseline_pct:.1f}% {deviation_pct:+.1f}%，"
                         "持续 {duration_h:.1f} 小时" + _PEERS_TAIL_ZH),
    "outlier.hbm_used_bytes": ("HBM 占用增长偏离{scope:scope}同类的 {baseline_mb:.0f} MB {deviation_mb:+.0f} MB，"
                               "持续 {duration_h:.1f} 小时" + _PEERS_TAIL_ZH),
    **{f"outlier.node.{m}": _NODE_CHIPS_ZH + t_ + _PEERS_TAIL_ZH for m, t_ in _OUTLIER_ZH.items()},
    "outlier.group.temp_c": ("节点 {members}（{nodes} 个节点）在功耗相当时一同偏离其他节点的 {baseline_c:.1f} °C "
                             "{deviation_c:+.1f} °C，持续 {duration_h:.1f} 小时（最高 {worst_c:+.1f} °C）："
                             "机房原因，其机柜或机柜列的散热"),
    "outlier.restarts.hbm_used_bytes": _CREEP_PEERS_ZH,
    "outlier.node.restarts.hbm_used_bytes": _NODE_CHIPS_ZH + _CREEP_PEERS_ZH,
    **{f"{'outlier' if m in _OUTLIER_ZH else 'straggler'}.episodes.{m}": _EPISODES_ZH.replace("{deviation}", d)
       for m, d in _EPISODE_DEVIATION_ZH.items()},
    **{f"outlier.node.episodes.{m}": _NODE_CHIPS_ZH + _EPISODES_ZH.replace("{deviation}", d)
       for m, d in _EPISODE_DEVIATION_ZH.items() if m in _OUTLIER_ZH},
    **{f"straggler.node.episodes.{m}": _NODE_ZH + _EPISODES_ZH.replace("{deviation}", d)
       for m, d in _EPISODE_DEVIATION_ZH.items() if m not in _OUTLIER_ZH},
    **{f"straggler.{m}": t_ + _PEERS_TAIL_ZH for m, t_ in _STRAGGLER_ZH.items()},
    **{f"straggler.node.{m}": _NODE_ZH + t_ + _PEERS_TAIL_ZH for m, t_ in _STRAGGLER_ZH.items()},
    **{f"straggler.tail.{m}": _TAILS_ZH for m in ("compute_s", "step_time_s")},
    **{f"straggler.node.tail.{m}": _NODE_ZH + _TAILS_ZH for m in ("compute_s", "step_time_s")},
    "straggler.node_compute": ("节点 {node}：GEMM 速率 {tflops:.3g} TFLOP/s（其 {ranks} 个 rank 的中位数），"
                               "比其他节点的中位数 {others_median_tflops:.3g} TFLOP/s 低 {below_pct:.0f}%"),
    "straggler.rank_compute_floor": ("{rank}：全程 GEMM 速率 {tflops:.3g} TFLOP/s，低于下限 {floor_tflops:.3g}"
                                     "（{chip} 16 位稠密峰值 {expected_tflops:g} 的 {floor_share_pct:.0f}%）"),
    "straggler.link_node": _LINK_NODE_ZH + _LINK_REL_ZH.replace("{whom}", "不含它的节点对"),
    "straggler.link_node_floor": _LINK_NODE_ZH + _LINK_FLOOR_ZH,
    "straggler.link_pair": _LINK_PAIR_ZH + _LINK_REL_ZH.replace("{whom}", "其他节点对"),
    "straggler.link_pair_floor": _LINK_PAIR_ZH + _LINK_FLOOR_ZH,
    "device_fault.fault_code": ("故障码 {code}（[[unknown|未知故障码]][[!unknown|{level}]]）[[text|：{text}]]"
                                "[[action|；处理：{action}]][[cleared|（此后已清除）]]"),
    "device_fault.health": "芯片报告健康状态 {words}[[cleared|（此后恢复 OK）]]",
    "device_fault.ecc_uncorrectable": "不可纠正（双比特）ECC 错误 [[previous|{previous:.0f}]][[!previous|0]] → {value:.0f}",
    "device_fault.ecc_isolated_double": "双比特隔离内存页 [[previous|{previous:.0f}]][[!previous|0]] → {value:.0f}",
    "device_fault.ecc_isolated_single": "单比特隔离内存页 [[previous|{previous:.0f}]][[!previous|0]] → {value:.0f}",
    "device_fault.ecc_correctable": ("可纠正 ECC 错误 {count:.0f} 个[[per_h|（每小时 {per_h:.1f} 个，上限 {max_per_h:g}）]]"
                                     "[[peer_median|，超过各芯片中位数 {peer_median:.0f} 的 {peer_factor:g} 倍]]"),
    "device_fault.link": ("网口[[seen_down|断开 {downs} 次，最长 {longest_down_s:.0f} 秒]][[still_down|（仍断开）]]"
                          "[[!seen_down|未见断开]]，闪断 {flaps} 次；上限：断开 {max_link_down_s:g} 秒，闪断 {max_link_flaps} 次"),
    "device_fault.xid": "Xid [[code|{code}（{level}）]][[!code|（编号未知）]][[text|：{text}]][[action|；处理：{action}]]",
    "device_fault.row_remap": "行重映射失败：显存无法隔离故障行",
    "device_fault.reset_pending": "有行重映射或页隔离等待 GPU 复位",
    "sdc.mismatch": ("{check} 校验结果错误[[comparison|（{comparison}）]][[step|，第 {step} 步]]"
                     "[[error|：误差 {error:.3g}]][[tolerance|，容差 {tolerance:g}]]；共 {count} 次" + _NUMERIC_CLASS_ZH),
    "nonfinite.value": "{what:metric}出现非有限值（{value}）[[step|，第 {step} 步]]；共 {count} 次" + _NUMERIC_CLASS_ZH,
    "loss_spike.spike": ("损失突增[[loss| {loss:.4g}]][[step|，第 {step} 步]][[multiple|，超过]][[median|近期中位数 {median:.4g} 的]]"
                         "[[multiple| {multiple:g} 倍]]；共 {count} 次" + _NUMERIC_CLASS_ZH),
    "stale_telemetry.frozen": ("{metric:metric} 自 {since:utc} 起 {unchanged_h:.1f} 小时读数不变（{value:g}）"
                               "[[ongoing|（仍未变化）]]，而其 {peers} 个同类中 {peers_moving} 个在变化（同类最长不变时段"
                               "中位数 {peer_median_h:.2f} 小时）：读数卡住，不计为证据"),
    # criteria: names, then required and measured lines
    "criterion.runtime": "运行时长",
    "criterion.availability": "可用率",
    "criterion.longest_uninterrupted": "最长连续训练",
    "criterion.restarts": "崩溃与挂起",
    "criterion.coverage": "数据覆盖率",
    "criterion.preflight": "预检",
    "criterion.nodes": "节点",
    "criterion.links": "节点间链路",
    "criterion.compute": "算力（GEMM 速率）",
    "criterion.device_faults": "芯片故障",
    "criterion.numerics": "数值正确性",
    "criterion.numerics.required": "任何芯片上没有已确认的错误结果或非有限值（同一芯片两次瞬时错误即失败）；每个芯片的结果都经过校验",
    "criterion.numerics.measured": ("{checked}/{chips} 个芯片共校验 {checks} 次[[steps_last|，第 {steps_first}–{steps_last} 步]]"
                                    "（{per_chip}）：[[failing|{fails} 个失败]][[!failing|无失败]][[warning|，{warns} 个告警]]"
                                    "[[not_checked|；{not_checked} 未经校验：不作判定]]"),
    "criterion.numerics.measured_none": "没有运行任何数值校验：不作判定[[failing|；已见 {fails} 个失败级发现]]",
    "part.chip_checks": "{chip} {checks} 次",
    **{f"criterion.kind.{k}": "无失败级{kind:kind}" for k in KINDS},
    "criterion.runtime.required": "≥ 计划的 {planned_s:hm}",
    "criterion.runtime.measured": "运行 {ran_s:hm}（计划 {planned_s:hm}），其中训练 {training_s:hm}",
    "criterion.runtime.required_record": "[[planned_s|≥ {planned_s:hm}]][[!planned_s|N/A]]",
    "criterion.runtime.measured_record": "{ran_s:hm}",
    "criterion.availability.required": "≥ {min_availability:pct}（不计启动与注入故障）",
    "criterion.availability.measured": ("运行时间的 {judged_availability:pct}（不计启动与注入故障）；"
                                        "[[was_down|意外停机 {down_s:hm}]][[!was_down|无意外停机]][[cause_counts|（{cause_counts}）]]"),
    "criterion.longest_uninterrupted.required": "[[required_s|≥ {required_s:hm}]][[!required_s|仅报告]]",
    "criterion.longest_uninterrupted.measured": "{longest_s:hm}",
    "criterion.restarts.required": "非注入的 ≤ {limit}",
    "criterion.restarts.measured": "非注入的 {uninjected} 次[[has_injected|，注入的 {injected} 次（预期的演练故障）]]",
    "criterion.coverage.required": "每颗芯片每项指标 ≥ 拷机时长的 {min_coverage:pct}",
    "criterion.coverage.measured": ("最低 {lowest_ratio:pct}（{lowest_chip} {lowest_metric:metric}）；"
                                    "{chips_seen} 颗芯片 × {metrics} 项指标"),
    "criterion.coverage.measured_missing": "读到 {chips_seen} / {chips_expected} 颗芯片",
    "criterion.coverage.measured_none": "没有任何芯片读数",
    "criterion.preflight.required": "通过",
    "criterion.preflight.measured": "[[status|{status:preflight}]][[!status|未记录]]",
    "criterion.nodes.required": "全部 {expected} 个节点运行到结束",
    "criterion.nodes.measured": "已加入 {joined} / {expected}，完成 {finished}[[bad|；{bad}]]",
    "criterion.links.required": (_LINK_RULE_ZH + "[[floor_gbps|；每对 ≥ {floor_gbps:.3g} GB/s（{chip}：预期 "
                                 "{expected_gbps:g} GB/s）]][[relative_only|（{chip}：无预期值，仅作相对比较）]]"),
    "criterion.links.measured": ("{nodes} 个节点的 {pairs} 对，共 {tests} 次测试：中位数 {median_gbps:.3g} GB/s，"
                                 "最低 {lowest_a}-{lowest_b} {lowest_gbps:.3g} GB/s"
                                 "[[two_nodes|（两个节点：没有可比较的其他节点对）]][[failing|；{failing}]]"),
    "criterion.links.measured_none": "没有链路测试记录：链路不作判定",
    "criterion.compute.required": (_COMPUTE_RULE_ZH + "[[floor_tflops|；每颗芯片 ≥ {floor_tflops:.3g} TFLOP/s（{chip}："
                                   "16 位稠密峰值 {expected_tflops:g}，{expected_source}）]]"
                                   "[[!floor_tflops|（{chip_named}：无预期值，仅作相对比较）]]"),
    "criterion.compute.measured": ("{nodes} 个节点上 {ranks} 个 rank：中位数 {median_tflops:.3g} TFLOP/s，"
                                   "最低 {lowest_tflops:.3g}[[one_node|（单节点：没有可比较的其他节点）]][[failing|；{failing}]]"),
    "criterion.device_faults.required": ("无隔离芯片级故障码、不可纠正 ECC 错误、行重映射失败或硬件类 Xid；"
                                         "每个网口断开 ≤ {max_link_down_s:g} 秒且闪断 ≤ {max_link_flaps} 次"
                                         "[[min_reads|；每个芯片的故障视图至少读取 {min_reads} 次，且按运行时间至少每 "
                                         "{max_read_interval_s:hm} 读取一次]]"),
    "criterion.device_faults.measured": ("已读取 {chips} 个芯片中 {read} 个的故障报告（{readings} 次读数）："
                                         "[[failing|{fails} 个失败]][[!failing|无失败]][[warning|，{warns} 个告警]]"
                                         "[[not_read|；未读取：{not_read}]]"),
    "criterion.device_faults.measured_none": "未读取到任何芯片的故障报告（健康状态、ECC）：不作判定[[failing|；已见 {fails} 个失败级故障]]",
    "criterion.device_faults.measured_cadence": ("不作判定：故障视图按运行时间每 {read_interval_s:hm} 读取一次（单个芯片最多 "
                                                 "{most_reads} 次读数），需要至少每 {max_read_interval_s:hm} 一次"
                                                 "[[failing|；已见 {fails} 个失败级故障]]"),
    "criterion.kind.required": "0 个失败级[[shortest_s|（此采样下可见时长 {shortest_s:hm} 及以上）]]",
    "criterion.kind.measured_blind": ("不作判定：每 {interval_s:hm} 一[[steps|条步骤记录]][[!steps|次读数]]，"
                                      "需要至少每 {max_interval_s:hm} 一次"
                                      "[[found|；{findings} 个问题]]"),
    "criterion.kind.measured": ("[[found|{findings} 个问题]][[fails|：失败级 {fails} 个，告警 {warns} 个，已解释或仅提示 {infos} 个]][[!found|无]]"
                                "[[not_judged|；未判定 {not_judged}（读数停滞）]]"),
    # parts of sentences
    "part.where_node": "节点 {node}",
    "part.where_node_device": "{node}/{device}",
    "part.where_device": "{device}",
    "part.where_job": "整个作业",
    "part.link_pair": "{node}-{other}",
    "part.node_status": "{node} {status:node_status}",
    "part.node_problem": "节点 {node}（rank {rank}）{status:node_status}[[came_back|（后来恢复）]]",
    "part.never_joined": "{count} 个节点未加入",
    "part.not_finished": "{count} 个节点未运行到结束",
    "part.cause_count": "{count} 次[[injected|注入的]]{cause:cause}",
    "part.low_coverage": "{chip} {metric:metric} {ratio:pct}",
    "part.lost": "{cause:cause} {seconds:hm}",
    # reasons of a verdict
    "reason.finding": "{severity_label:severity}：{where} 的{kind:kind}，自 {start:utc} 起：{summary}",
    "reason.no_findings": "无失败级或告警级问题",
    "reason.no_data": "数据中没有任何读数：无法证明任何事项",
    "reason.runtime_short": "运行时长：运行 {ran_s:hm} 后即结束，计划为 {planned_s:hm}",
    "reason.no_training": "可用率：运行期间没有负载在训练",
    "reason.availability": "可用率：{down_s:hm} 未在训练（{causes:cause}）；{judged_availability:pct} < {min_availability:pct}",
    "reason.longest_uninterrupted": "最长连续训练 {longest_s:hm} < {required_s:hm}",
    "reason.restarts": "非注入的崩溃或挂起：{stops:semi}[[more|（另有 {more} 次）]]",
    "reason.no_chip_read": "数据证据：运行期间没有读到任何芯片[[reader_errors|（读取错误：{reader_errors:semi}）]]",
    "reason.chips_missing": ("数据证据：预期 {chips_expected} 颗芯片，只读到 {chips_seen} 颗"
                             "[[reader_errors|（读取错误：{reader_errors:semi}）]]"),
    "reason.coverage_low": ("数据证据：{chips} 颗芯片的读数覆盖率低于 {min_coverage:pct}：{low}[[more| …]]"
                            "[[reader_errors|（读取错误：{reader_errors:semi}）]]"),
    "reason.preflight": "预检：{message}",
    "reason.nodes": "节点：{problems:semi}",
    "reason.compute": "算力：{summaries:semi}[[more| …]]",
    "reason.run_failed": "运行失败：[[why|{why}]][[!why|负载在计划结束前停止]]",
    "reason.run_stopped": "运行在计划结束前被停止[[why|（{why}）]]：不作判定",
    "reason.blind": ("{kind:kind}无法判定：每 {interval_s:hm} 一[[steps|条步骤记录]][[!steps|次读数]]，"
                     "需要至少每 {max_interval_s:hm} 一次"),
    # why a node has its verdict
    "node.status": "节点{status:node_status}[[came_back|（后来恢复）]]",
    "node.preflight": "预检{status:preflight}",
    "node.finding": "{kind:kind}[[device| {device}]]（{severity:severity}）：{summary}",
    "node.unread": "{chips} 颗芯片中有 {unread} 颗从未读到",
    "node.chips": "芯片失败 {fail} 颗、告警 {warn} 颗：{names}[[more|（+{more}）]]",
    # the clean-run statement
    "statement.no_data": "没有芯片数据：本次运行不能说明任何故障率",
    "statement.clean": ("{hours_text} {unit:unit}内 0 次失败：以 95% 置信度，故障率低于每{per:unit} {bound_per_h:.2e}"
                        "（-ln(0.05)/T，约 3/T），即平均无故障时间超过 {mtbf_text} {unit:unit}"
                        "[[cpu|；计数对象：主机 CPU，无加速器]]"),
    "statement.failures": ("{hours_text} {unit:unit}内 {n_fail} 个失败级问题：观测故障率每{per:unit} {rate_per_h:.2e}，"
                           "95% 置信上限 {bound_per_h:.2e}（精确泊松）[[cpu|；计数对象：主机 CPU，无加速器]]"),
    # interruptions
    "interruption.startup": "{workload} 启动",
    "interruption.crash": "{workload} 崩溃[[message|：{message}]]",
    "interruption.hang": "{workload} 挂起[[message|：{message}]]",
    "interruption.daemon_down": "守护进程停止",
    "interruption.stopped": "停止",
    "interruption.gave_up": "{workload} 放弃重启",
    "interruption.node_lost": "作业失去一个节点[[message|：{message}]]",
    # reliability
    "reliability.ettr": ("有效训练时间比 (ETTR) [[ettr|{ettr:pct}]][[!ettr|N/A]]：计划 {planned_s:hm}，有效训练 {productive_s:hm}"
                         "[[injected_s|，扣除 {injected_count} 次注入故障的 {injected_s:hm}（其中断及之后重做的工作；注入故障从不计入机器）]]；"
                         "损失 {lost_total_s:hm}[[lost|（{lost}）]]"),
    "reliability.failures": ("{node_hours:.3g} 节点小时内机器非预期故障 {failures} 次（崩溃 {crash}、挂起 {hang}、"
                             "节点失联 {node_lost}[[link|、链路故障 {link}]]、芯片故障 {device_fault}[[sdc|、芯片计算错误 {sdc}]]）[[node_mttf_h|：每节点平均无故障时间 {node_mttf_h:.3g} 小时]]"),
    "reliability.overhead": "作业运行 {training_s:hm}，其中 {overhead_s:hm} 未在训练：{overhead}；有效训练 {productive_s:hm}",
    "reliability.mttf_lower": ("以 90% 置信度，每节点平均无故障时间 >= {node_mttf_h_lower90:.3g} 小时"
                               "（2T / χ²(0.90; {dof}) = {two_t:.3g} / {chi2:.3f}，T = {node_hours:.3g} 节点·小时）"),
    "reliability.projection": "{nodes} 个节点的作业[[this_cluster|（本集群）]]：以 90% 置信度，平均无故障时间 >= {mttf_h_lower90:.3g} 小时",
    "reliability.meaning": ("这是下限而非预测：{node_hours:.3g} 节点小时、{failures} 次故障，最多只能说明每节点平均无故障时间"
                            "高于 {node_mttf_h_lower90:.3g} 小时；要说明更多，只能运行更久或用更多节点"),
    "reliability.repeat_offender": "节点 {node} 在存储的 {runs} 次运行中出现故障：{run_ids}[[more|（+{more}）]]",
    "reliability.no_repeat_offender": "本次运行的节点均未在存储的两次及以上运行中出现故障",
}
"""Every code of ``soak.analysis.messages.ENGLISH`` in Chinese (a test checks it is complete)."""
CHINESE.update({f"{c}.shared": "{shared_chips} 个芯片[[shared_node|（节点 {shared_node}）]]（最严重：{shared_worst}）："
                + CHINESE[c] for c in SHARED_CODES})


# -- the events' messages in Chinese: one template per code of soak.report.event_text ---------
# The English report shows each message as the daemon wrote it; these say the same from the
# values it recorded beside it. ``{x:dur}`` is a duration as the report writes one
# (soak.report.units.dur), ``{x:secs}`` a short one in seconds with its significant digits.
_GAVE_UP_ZH = "{workload}：重启 {restarts} 次后放弃（"
_JOB_RESTARTS_ZH = "，节点 {node}：整个作业重启（第 {generation} 代）"
_FAILED_ZH = {"signal": "{workload}：崩溃（信号 {signal}）", "exit": "{workload}：崩溃（退出码 {exit_code}）",
              "hang": "{workload}：{stalled_s:dur} 没有训练进展，已终止"}
_CLUSTER_NOTE_ZH = {"run_ending": "（运行结束时：另一节点已先停止）", "failed_elsewhere": "（集群作业已在另一节点失败）"}
EVENT_CHINESE: dict[str, str] = {
    "event.start": "运行开始：{workloads:procs}，计划时长 {duration_s:dur}",
    "event.start.rank": "进程启动：模型规模 {model_size}，共 {world_size} 个进程[[inject|，计划注入故障 {inject}]]",
    "event.stop.gave_up.hung": _GAVE_UP_ZH + "挂起）",
    "event.stop.gave_up.signal": _GAVE_UP_ZH + "崩溃，信号 {signal}）",
    "event.stop.gave_up.exit": _GAVE_UP_ZH + "崩溃，退出码 {exit_code}）",
    "event.stop.signal": "已停止（收到信号 {signal}）",
    "event.stop.store": "已停止（数据库无响应）",
    "event.stop.disk": "已停止（磁盘空间不足）",
    "event.stop.join_timeout": ("{join_timeout_s:dur} 内只有 {joined_count} / {nodes} 个节点加入"
                                "（缺少 rank {missing_ranks}；已加入：[[joined|{joined}]][[!joined|无]]）"),
    "event.restart": "{workload}：第 {restarts} 次重启（第 {attempt} 次尝试）",
    "event.restart.uncounted": "{workload}：随集群作业重启，不计入重启次数（第 {attempt} 次尝试）",
    "event.crash.signal": _FAILED_ZH["signal"],
    "event.crash.exit": _FAILED_ZH["exit"],
    "event.hang": _FAILED_ZH["hang"],
    "event.exit.finished": "{workload}：已完成（退出码 0）",
    "event.checkpoint": "第 {step} 步的检查点[[seconds|，用时 {seconds:secs}]]",
    "event.resume.daemon": "由进程 {pid} 恢复运行",
    "event.resume.step": "从第 {step} 步的检查点恢复",
    "event.gap": "守护进程停止 {down_s:dur}（运行时间线）[[node|，节点 {node}]]",
    "event.note.burn_in": ("老化时钟：需要连续 {min_uninterrupted_h:g} 小时没有意外故障，自拷机开始后 {since_s:dur} 起计；"
                           "运行延长至 {end_s:dur}[[capped|（允许的最长时长）]]"),
    "event.note.manifest_failed": "环境清单采集失败：{error}",
    "event.note.blind": ("{kind:kind}无法判定：每 {interval_s:dur} 一[[steps|条步骤记录]][[!steps|次读数]]，"
                         "需要至少每 {max_interval_s:dur} 一次"
                         "[[fix_interval_s|；请使用 --interval {fix_interval_s:g}s 或更短]]"
                         "[[fix_time_scale|，或 --time-scale {fix_time_scale:g} 或更低]]"),
    **{f"event.note.{why}.{how}": failed + note for why, note in _CLUSTER_NOTE_ZH.items()
       for how, failed in _FAILED_ZH.items()},
    "event.preflight": "预检{status:preflight}[[failed|：未通过的检查 {failed}]]",
    "event.outage.reader": "读取器 {reader} 无读数：{error}[[chips|（{chips} 颗芯片）]]",
    "event.outage.devices": "芯片无读数：{error}[[chips|（{chips} 颗芯片）]]",
    "event.data_stall": "第 {step} 步等待数据 {seconds:secs}",
    # the numerical checks inside training (soak.workloads.numerics)
    "event.alignment.within": ("精度对齐：前 {steps} 步的损失与 CPU float64 参考对比，最大相对误差 {max_rel_diff:.3g}，"
                               "在容差 {tolerance:.3g} 以内"),
    "event.alignment.beyond": ("精度对齐：前 {steps} 步的损失与 CPU float64 参考对比，最大相对误差 {max_rel_diff:.3g}，"
                               "超出容差 {tolerance:.3g}"),
    "event.sdc": ("{check:metric}校验结果错误[[step|（第 {step} 步）]][[error|：相对误差 {error:.3g}]]"
                  "[[tolerance|，容差 {tolerance:.3g}]]" + _EVENT_CLASS_ZH),
    "event.nonfinite": "{what:metric}出现非有限值（{value}）[[step|，第 {step} 步]]" + _EVENT_CLASS_ZH,
    "event.loss_spike": ("损失 {loss:.4g}[[step|（第 {step} 步）]]达到近期中位数 {median:.4g} 的 {multiple:g} 倍以上"
                         + _EVENT_CLASS_ZH),
    "event.data_stall.planned": "{spec}：等待数据 {seconds:secs}",
    "event.inject.armed": "已布设注入故障 {spec}",
    "event.inject.exit": "{spec}：以状态 {exit_code} 退出",
    "event.inject.hang": "{spec}：rank 停止步进",
    "event.inject.slow": "{spec}：自第 {step} 步起 rank 减速为 {factor:g} 倍耗时",
    "event.inject.corrupt": "{spec}：已扰动校验结果 [0, 0]",
    "event.store_outage": "数据库 {wall_s:dur} 未响应[[node|（节点 {node}）]]；已写入 {replayed} 条暂存记录",
    "event.node_joined": "节点 {node}（rank {rank}）从 {host} 加入",
    "event.node_lost": "节点 {node}（rank {rank}）失联：{silent_s:dur} 未见（上限 {bound_s:dur}）[[found_by|，由 {found_by} 发现]]",
    "event.cluster_restart.rendezvous": ("节点 {previous_rendezvous_node}（{previous_status:node_status}）承载作业的 rendezvous："
                                         "作业在其他节点上重启（第 {generation} 代），rendezvous 移至节点 {rendezvous_node}"
                                         "（{rendezvous}）"),
    "event.cluster_restart.rejoined": "节点 {node} 已恢复：作业随其重启（第 {generation} 代）",
    "event.cluster_restart.lost": "节点 {lost} 失联：作业在其他节点上重启（第 {generation} 代）",
    **{f"event.cluster_restart.{how}": failed + _JOB_RESTARTS_ZH for how, failed in _FAILED_ZH.items()},
    "event.capture": ("性能采集（{label:capture_label}）第 {first_step}-{last_step} 步：{top1:share} {top1_share:.0%}"
                      "[[top2|，{top2:share} {top2_share:.0%}]][[top3|，{top3:share} {top3_share:.0%}]]"),
    "event.capture.failed": "采集失败：{error}",
    "event.link_test": ("链路测试（{when:link_when}）：{nodes} 个节点的 {pairs} 对，{size_mib:g} MiB all-reduce"
                        "[[lowest_a|；最低 {lowest_a}-{lowest_b} {lowest_gbps:.2f} GB/s]]"),
    "event.clock_drift.off": ("节点 {node}：时钟与数据库偏差 {offset_s:+.1f} s（上限 {bound_s:g} s，cluster.max_clock_offset），"
                              "其读数的时间也偏差同样多"),
    "event.device_fault.fault_code": ("{device}[[serial|（序列号 {serial}）]]：故障码 {code}（{level}）[[text|：{text}]]"
                                      "[[action|；处理：{action}]]"),
    "event.device_fault.fault_code.cleared": "{device}[[serial|（序列号 {serial}）]]：故障码 {code} 已清除",
    "event.device_fault.health": "{device}[[serial|（序列号 {serial}）]]：健康状态 {level}",
    "event.device_fault.health.cleared": "{device}[[serial|（序列号 {serial}）]]：健康状态恢复为 {level}",
    "event.device_fault.ecc_uncorrectable": ("{device}[[serial|（序列号 {serial}）]]：不可纠正 ECC 错误 "
                                             "[[previous|{previous:.0f}]][[!previous|无]] → {value:.0f}"),
    "event.device_fault.ecc_isolated_double": ("{device}[[serial|（序列号 {serial}）]]：双比特隔离页 "
                                               "[[previous|{previous:.0f}]][[!previous|无]] → {value:.0f}"),
    "event.device_fault.ecc_isolated_single": ("{device}[[serial|（序列号 {serial}）]]：单比特隔离页 "
                                               "[[previous|{previous:.0f}]][[!previous|无]] → {value:.0f}"),
    "event.device_fault.ecc_correctable": ("{device}[[serial|（序列号 {serial}）]]：可纠正 ECC 错误 "
                                           "[[previous|{previous:.0f}]][[!previous|无]] → {value:.0f}"),
    "event.device_fault.link_down": "{device}[[serial|（序列号 {serial}）]]：网口断开",
    "event.device_fault.link_up": "{device}[[serial|（序列号 {serial}）]]：网口恢复",
    "event.device_fault.link_flap": ("{device}[[serial|（序列号 {serial}）]]：网口闪断（恢复次数 "
                                     "[[previous|{previous:.0f}]][[!previous|无]] → {value:.0f}）"),
    "event.device_fault.xid": ("{device}[[serial|（序列号 {serial}）]]：Xid [[code|{code}（{level}）]][[!code|（编号未知）]]"
                               "[[text|：{text}]][[action|；处理：{action}]]"),
    "event.device_fault.row_remap_failed": "{device}[[serial|（序列号 {serial}）]]：行重映射失败",
    "event.device_fault.row_remap_pending": "{device}[[serial|（序列号 {serial}）]]：行重映射等待复位",
    "event.device_fault.retired_pages_pending": "{device}[[serial|（序列号 {serial}）]]：隔离页等待复位",
    "event.clock_drift.back": "节点 {node}：时钟已回到与数据库相差 {bound_s:g} s 以内（{offset_s:+.1f} s）",
    "event.disk": ("{run_dir}：运行目录所在磁盘仅剩 {free_mib:.1f} MiB（需要 {need_mib:.1f} MiB）；"
                   "[[filled|磁盘已写满]][[!filled|在写满前停止]]（运行已停止，数据已保留）"),
}
"""Every code of ``soak.report.event_text`` in Chinese (a test checks it is complete)."""


def chinese_text() -> str:
    """Every character of the report's Chinese words: this table's and those of the modules that
    word its sentences, events and evidence. The CJK font must have all of them (``fonts``)."""
    import importlib

    seen: set[str] = set()

    def walk(value: object, depth: int = 0) -> None:
        if isinstance(value, str):
            seen.update(value)
        elif depth < 4 and isinstance(value, dict):
            for k, v in value.items():
                walk(k, depth + 1)
                walk(v, depth + 1)
        elif depth < 4 and isinstance(value, tuple | list | frozenset | set):
            for v in value:
                walk(v, depth + 1)

    for module in ("i18n", "names", "appendix", "sentences", "event_text", "evidence_text", "reliability_text", "cluster_text",
                   "links", "rows", "timewent", "units"):
        mod = importlib.import_module(f"soak.report.{module}")
        for name, value in vars(mod).items():
            if not name.startswith("__"):
                walk(value)
    return "".join(sorted(c for c in seen if ord(c) > 0x7F))


STRINGS.update({
    "app_needs_token": (
        "This app shows its runs only in a session opened at the address `soak report serve` printed (with its "
        "token): every user of this machine can reach it.",
        "本应用只在从 `soak report serve` 打印的地址（含令牌）打开的会话中显示运行数据：本机任何用户都能访问它。",
    ),
})
