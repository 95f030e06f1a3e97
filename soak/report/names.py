"""The report's names for machine keys, in English and Chinese.

A detector kind, a metric, a severity, an event, an interruption's cause and a node's status
each have a fixed pair of names; a key without one is shown as written.
"""

from __future__ import annotations

from collections.abc import Mapping

KIND_NAMES = {
    "memory_creep": ("memory creep", "内存持续增长"),
    "outlier": ("outlier among peers", "偏离同类"),
    "straggler": ("straggler", "掉队节点"),
    "utilization_dropouts": ("utilization dropouts", "利用率跌落"),
    "hang": ("hang", "挂起"),
    "comm_timeouts": ("communication timeouts", "通信超时"),
    "thermal": ("thermal", "温度异常"),
    "throughput_degradation": ("throughput degradation", "吞吐下降"),
    "device_fault": ("device fault", "芯片故障"),
    "sdc": ("wrong result (silent data corruption)", "计算结果错误（静默数据损坏）"),
    "nonfinite": ("NaN/Inf", "非有限值"), "loss_spike": ("loss spike", "损失突增"),
    "stale_telemetry": ("stale telemetry", "读数停滞"),
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
    # the findings of a chip's own fault report (soak.analysis.device_faults)
    "fault_code": ("fault code", "故障码"), "health": ("health", "健康状态"),
    "ecc_uncorrectable": ("uncorrectable ECC", "不可纠正 ECC"),
    "ecc_isolated_double": ("double-bit isolated pages", "双比特隔离页"),
    "ecc_isolated_single": ("single-bit isolated pages", "单比特隔离页"),
    "ecc_correctable": ("correctable ECC", "可纠正 ECC"), "link": ("network port", "网口"),
    "xid": ("Xid", "Xid"), "row_remap": ("row remapping", "行重映射"),
    "reset_pending": ("reset pending", "待复位"),
    # the numerical checks (soak.analysis.numerics)
    "gemm": ("GEMM", "GEMM"), "collective": ("collective", "集合通信"), "canary": ("canary product", "金丝雀乘积"),
    "recompute": ("cross-chip recompute", "跨芯片重算"), "replica": ("replica agreement", "副本一致性"),
    "loss": ("loss", "损失"), "grad_norm": ("gradient norm", "梯度范数"),
}
SEVERITY_NAMES = {"fail": ("fail", "失败"), "warn": ("warning", "告警"), "info": ("info", "提示")}
EVENT_NAMES = {
    "start": ("start", "开始"), "checkpoint": ("checkpoint", "检查点"), "crash": ("crash", "崩溃"),
    "restart": ("restart", "重启"), "inject": ("fault injected", "注入故障"), "exit": ("exit", "退出"),
    "finding": ("finding", "发现问题"), "stop": ("stop", "停止"), "gap": ("gap", "中断"),
    "outage": ("reader outage", "读数中断"), "store_outage": ("store outage", "数据库中断"),
    "clock_drift": ("clock drift", "时钟偏移"), "device_fault": ("device fault", "芯片故障"),
    "preflight": ("preflight", "预检"), "hang": ("hang", "挂起"),
    "resume": ("resume", "恢复"), "finish": ("finish", "结束"), "gave_up": ("gave up", "放弃"),
    "link_test": ("link test", "链路测试"),
    "sdc": ("wrong result", "计算结果错误"), "nonfinite": ("NaN/Inf", "非有限值"), "loss_spike": ("loss spike", "损失突增"),
    "alignment": ("precision alignment", "精度对齐"),
    # English as the kind is written (the English report names them so); Chinese names them
    **{k: (k, zh) for k, zh in (("data_stall", "数据等待"), ("node_joined", "节点加入"), ("node_lost", "节点失联"),
                                ("cluster_restart", "集群重启"), ("note", "备注"), ("capture", "性能采集"),
                                ("comm_timeout", "通信超时"), ("disk", "磁盘不足"), ("phase", "阶段"))},
}
CAUSE_NAMES = {
    "startup": ("start-up", "启动"), "crash": ("crash", "崩溃"), "hang": ("hang", "挂起"),
    "daemon down": ("daemon down", "守护进程停止"), "stopped": ("stopped", "停止"), "gave up": ("gave up", "放弃"),
    "node lost": ("node lost", "节点失联"),
    # the keys of the reliability's time lost by cause
    "daemon_down": ("daemon down", "守护进程停止"), "gave_up": ("gave up", "放弃"), "node_lost": ("node lost", "节点失联"),
    "not_run": ("not run (ended early)", "未运行（提前结束）"),
    "ahead": ("still ahead (run in progress)", "尚未到来（运行中）"), "injected": ("injected canaries", "注入故障"),
    "productive": ("productive training", "有效训练"),
    "restart": ("restart and re-rendezvous", "重启与重新集合"), "link": ("link failure", "链路故障"),
    "device_fault": ("device fault", "芯片故障"), "sdc": ("wrong result", "计算结果错误"),
    "store_outage": ("store outage (node stopped)", "数据库中断（节点停止）"),
    "redone": ("work redone since the last checkpoint", "检查点后的重算"), "data_stall": ("data stalls", "数据等待"),
    "checkpoint": ("checkpoints", "检查点"), "link_test": ("link tests", "链路测试"),
}


def pick(table: Mapping[str, tuple[str, str]], key: str | None, lang: str) -> str:
    if key is None:
        return "N/A"
    pair = table.get(key)
    if pair is None:
        return key
    return pair[1] if lang == "zh" else pair[0]


def kind_name(kind: str | None, lang: str = "en") -> str:
    return pick(KIND_NAMES, kind, lang)


def metric_name(metric: str | None, lang: str = "en") -> str:
    return pick(METRIC_NAMES, metric, lang)


def severity_name(sev: str | None, lang: str = "en") -> str:
    return pick(SEVERITY_NAMES, sev, lang)


def event_name(kind: str | None, lang: str = "en") -> str:
    return pick(EVENT_NAMES, kind, lang)



NODE_STATUS_NAMES = {
    "joined": ("joined", "已加入"), "running": ("running", "运行中"), "finished": ("finished", "已完成"),
    "failed": ("failed", "失败"), "lost": ("lost", "失联"), "stopped": ("stopped", "已停止"),
}


UNIT_NAMES = {
    "chip-hours": ("chip-hours", "芯片小时"), "chip-hour": ("chip-hour", "芯片小时"),
    "CPU device-hours": ("CPU device-hours", "CPU 设备小时"), "device-hour": ("device-hour", "设备小时"),
}
PREFLIGHT_NAMES = {
    "pass": ("pass", "通过"), "warn": ("pass with warnings", "通过（有告警）"), "fail": ("fail", "未通过"),
    "error": ("error", "出错"), "skipped": ("skipped", "已跳过"),
}


def node_status_name(status: str | None, lang: str = "en") -> str:
    return pick(NODE_STATUS_NAMES, status, lang)


LINK_WHEN_NAMES = {"interval": ("interval", "定期"), "preflight": ("preflight", "预检"), "restart": ("restart", "重启后")}
"""When a link test ran (soak.workloads.linktest)."""
