"""The event table in Chinese: each message said from the values its event recorded beside it.

The English report shows each message exactly as the daemon wrote it; the Chinese one renders
the same facts from the event's detail (``soak.report.event_text``), and an event recorded
without them (an older run, a message of free text) as written. The events are real ones from
runs' stores, or shaped as the line that records them writes them
(``tests/fixtures/events/README.md``)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from soak.report.event_text import CODES, event_code, recorded
from soak.report.i18n import EVENT_CHINESE
from soak.report.model import EventView
from soak.report.rows import event_rows
from soak.report.sentences import event_text
from soak.report.units import run_zone

pytestmark = pytest.mark.compute  # pyproject.toml

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "events" / "events.json"
EVENTS = {e["id"]: e for e in json.loads(FIXTURE.read_text(encoding="utf-8"))}
TS = 1_796_177_260.0

# every translated case, said in Chinese as the report must say it
ZH = {
    "start": "运行开始：lm（1 个进程），计划时长 30 s",
    "start_scaled": "运行开始：lm（1 个进程），计划时长 8 h 00 min",
    "rank_start_settings": "进程启动：模型规模 tiny，共 1 个进程，计划注入故障 crash:300",
    "gap": "守护进程停止 4 s（运行时间线）",
    "resume_daemon": "由进程 18477 恢复运行",
    "resume_step": "从第 80 步的检查点恢复",
    "resume_checkpoint": "从第 40 步的检查点恢复",
    "checkpoint": "第 5 步的检查点",
    "checkpoint_timed": "第 20 步的检查点，用时 0.00883 s",
    "capture": "性能采集（基线）第 21-30 步：反向计算 49%，前向计算 26%，优化器 16%",
    "capture_failed": "采集失败：profiler did not start: RuntimeError: CUPTI_ERROR_NOT_INITIALIZED",
    "outage_reader": "读取器 npu-smi 无读数：error_text: npu-smi: dcmi module initialize failed. ret is -8005",
    "outage_devices": "芯片无读数：error_text: npu-smi: dcmi module initialize failed. ret is -8005（4 颗芯片）",
    "crash_signal": "lm：崩溃（信号 9）",
    "crash_exit": "lm：崩溃（退出码 1）",
    "restart": "lm：第 1 次重启（第 2 次尝试）",
    "restart_uncounted": "lm：随集群作业重启，不计入重启次数（第 3 次尝试）",
    "hang": "lm：2 min 没有训练进展，已终止",
    "exit_finished": "lm：已完成（退出码 0）",
    "stop_signal": "已停止（收到信号 SIGTERM）",
    "stop_store": "已停止（数据库无响应）",
    "stop_disk": "已停止（磁盘空间不足）",
    "gave_up_hung": "lm：重启 3 次后放弃（挂起）",
    "gave_up_signal": "lm：重启 3 次后放弃（崩溃，信号 9）",
    "gave_up_exit": "gemm：重启 5 次后放弃（崩溃，退出码 1）",
    "join_timeout": "10 min 内只有 2 / 3 个节点加入（缺少 rank 2；已加入：node-0, node-1）",
    "data_stall": "第 40 步等待数据 1.23 s",
    "store_outage": "数据库 1 min 未响应（节点 node-1）；已写入 42 条暂存记录",
    "numeric_alignment": "精度对齐：前 10 步的损失与 CPU float64 参考对比，最大相对误差 9.22e-08，在容差 0.000244 以内",
    "numeric_alignment_beyond": "精度对齐：前 10 步的损失与 CPU float64 参考对比，最大相对误差 0.00312，超出容差 0.000244",
    "numeric_nonfinite": "损失出现非有限值（nan），第 150 步：重算后未复现（瞬时）",
    "numeric_sdc": "跨芯片重算校验结果错误（第 400 步）：相对误差 0.0103，容差 9.54e-07：仅在 rank 1 的芯片上复现",
    "numeric_loss_spike": "损失 9.812（第 512 步）达到近期中位数 2.316 的 4 倍以上：仅在 rank 0 的芯片上复现",
    "node_joined": "节点 node-1（rank 1）从 10.0.0.12 加入",
    "node_lost": "节点 node-2（rank 2）失联：30 s 未见（上限 30 s）",
    "node_lost_judge": "节点 node-3（rank 3）失联：30 min 未见（上限 30 s），由 ops-laptop 发现",
    "cluster_restart_lost": "节点 node-2 失联：作业在其他节点上重启（第 2 代）",
    "cluster_restart_rejoined": "节点 node-2 已恢复：作业随其重启（第 3 代）",
    "cluster_restart_rendezvous": ("节点 node-0（失联）承载作业的 rendezvous：作业在其他节点上重启（第 2 代），"
                                   "rendezvous 移至节点 node-1（10.0.0.12:29400）"),
    "cluster_restart_crash": "lm：崩溃（信号 9），节点 node-1：整个作业重启（第 2 代）",
    "cluster_restart_hang": "lm：2 min 没有训练进展，已终止，节点 node-1：整个作业重启（第 4 代）",
    "cluster_restart_exit": "gemm：崩溃（退出码 3），节点 node-2：整个作业重启（第 5 代）",
    "clock_drift_off": ("节点 node-1：时钟与数据库偏差 +2.7 s（上限 1 s，cluster.max_clock_offset），"
                        "其读数的时间也偏差同样多"),
    "clock_drift_back": "节点 node-1：时钟已回到与数据库相差 1 s 以内（+0.2 s）",
    "preflight_pass": "预检通过",
    "preflight_fail": "预检未通过：未通过的检查 hbm, ecc",
    "link_test": "链路测试（定期）：3 个节点的 3 对，64 MiB all-reduce；最低 node-0-node-2 11.20 GB/s",
    "disk": ("/data/soak/runs/r1：运行目录所在磁盘仅剩 812.5 MiB（需要 2048.0 MiB）；在写满前停止"
             "（运行已停止，数据已保留）"),
    "manifest_failed": "环境清单采集失败：npu-smi: no answer within 10 s",
    "note_failed_elsewhere_signal": "lm：崩溃（信号 9）（集群作业已在另一节点失败）",
    "note_failed_elsewhere_exit": "lm：崩溃（退出码 1）（集群作业已在另一节点失败）",
    "note_failed_elsewhere_hang": "lm：2 min 没有训练进展，已终止（集群作业已在另一节点失败）",
    "note_run_ending_signal": "lm：崩溃（信号 9）（运行结束时：另一节点已先停止）",
    "note_run_ending_exit": "lm：崩溃（退出码 1）（运行结束时：另一节点已先停止）",
    "note_run_ending_hang": "lm：2 min 没有训练进展，已终止（运行结束时：另一节点已先停止）",
    "note_blind": ("内存持续增长无法判定：每 10 min 一次读数，需要至少每 5 min 一次；请使用 --interval 0.5s 或更短，"
                   "或 --time-scale 300 或更低"),
    "burn_in": "老化时钟：需要连续 0.00277778 小时没有意外故障，自拷机开始后 5 s 起计；运行延长至 15 s",
    "inject_armed": "已布设注入故障 crash:50",
    "inject_exit": "crash:50：以状态 1 退出",
    "inject_hang": "hang:300：rank 停止步进",
    "inject_slow": "slow-rank:1,1.5,200：自第 200 步起 rank 减速为 1.5 倍耗时",
    "inject_corrupt": "corrupt：已扰动校验结果 [0, 0]",
    "data_stall_planned": "stall:600,30：等待数据 30.0 s",
    # a chip's own fault report (the values as recorded: the table's level, action and meaning)
    "device_fault_health": "npu2-0（序列号 1025C9020000）：健康状态 Alarm",
    "device_fault_link_down": "npu0-0（序列号 1025C9000000）：网口断开",
    "device_fault_ecc_uncorrectable": "npu1-0（序列号 1025C9010000）：不可纠正 ECC 错误 0 → 1",
    "device_fault_ecc_isolated_double": "npu1-0（序列号 1025C9010000）：双比特隔离页 0 → 1",
    "device_fault_ecc_correctable": "npu1-0（序列号 1025C9010000）：可纠正 ECC 错误 0 → 8",
    "device_fault_fault_code": "npu2-0（序列号 1025C9020000）：故障码 80E3A201（SeparateNPU）：error code 80E3A201；处理：isolate the chip",
    "device_fault_link_flap": "npu3-0（序列号 1025C9030000）：网口闪断（恢复次数 3 → 5）",
    "device_fault_link_up": "npu0-0（序列号 1025C9000000）：网口恢复",
    "device_fault_health_cleared": "npu2-0（序列号 1025C9020000）：健康状态恢复为 OK",
    "device_fault_fault_code_cleared": "npu2-0（序列号 1025C9020000）：故障码 80E3A201 已清除",
    "device_fault_ecc_isolated_single": "cuda0（序列号 1320221000001）：单比特隔离页 0 → 2",
    "device_fault_xid": "cuda0（序列号 1320221000001）：Xid 79（hardware）：GPU has fallen off the bus (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS)；处理：RESTART_BM; investigate: CONTACT_SUPPORT",
    "device_fault_row_remap_failed": "cuda0（序列号 1320221000001）：行重映射失败",
    "device_fault_row_remap_pending": "cuda0（序列号 1320221000001）：行重映射等待复位",
    "device_fault_retired_pages_pending": "cuda0（序列号 1320221000001）：隔离页等待复位",
}
# recorded without the values (or free text): as written in Chinese too
AS_WRITTEN = ("start_older", "burn_in_older", "node_lost_older", "demo_crash_no_detail", "inject", "rank_exit_sigterm",
              "stop_node_lost", "preflight_drift")
# words the Chinese report shares with the English: units (dur's "min"), vendor and config terms,
# the tool's name (every page's footer), the flags of ``soak run`` (--interval, --time-scale)
SHARED = {"interval", "time", "scale", "rank", "rendezvous", "all", "reduce", "mib", "gb", "cluster", "max_clock_offset", "min", "soak", "ecc", "xid",
          "cpu", "float"}  # "CPU float64": the reference the precision alignment compares with


def view(e: dict) -> EventView:
    return EventView(ts=TS, kind=e["kind"], device=None if e["rank"] is None else f"{e['workload']}-rank{e['rank']}",
                     message=e["message"], detail=e["detail"], workload=e["workload"], node=e["node"])


def _quoted(said: dict) -> list[str]:
    """The texts the values hold (names, hosts, an error's own text): quoted as they are."""
    texts = [str(v) for v in said.values() if isinstance(v, str)]
    texts += [str(x) for v in said.values() if isinstance(v, list) for x in v if isinstance(x, str)]
    return texts + [str(x["name"]) for v in said.values() if isinstance(v, list) for x in v if isinstance(x, dict)]


def english_left(zh: str, said: dict) -> set[str]:
    """English words of ``zh`` that are not in the values it quotes."""
    rest = zh
    for text in sorted(_quoted(said), key=len, reverse=True):
        rest = rest.replace(text, " ")
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z_]+", rest)}
    return {w for w in words if len(w) > 1} - SHARED


def test_every_code_has_a_chinese_template_and_a_recorded_case():
    assert set(EVENT_CHINESE) == set(CODES)
    covered = {event_code(view(EVENTS[i]))[0] for i in ZH}
    assert covered == set(CODES), set(CODES) - covered


@pytest.mark.parametrize("case", sorted(EVENTS))
def test_the_english_message_is_shown_exactly_as_recorded(case):
    e = EVENTS[case]
    assert event_text(view(e), "en") == recorded(e["message"])
    if not e["message"].startswith("{"):
        assert event_text(view(e), "en") == e["message"]


@pytest.mark.parametrize("case", sorted(ZH))
def test_the_chinese_message_is_said_from_the_recorded_values(case):
    e = view(EVENTS[case])
    zh = event_text(e, "zh")
    assert zh == ZH[case]
    assert zh != e.message
    code, values = event_code(e)
    assert not english_left(zh, values), (case, zh)


@pytest.mark.parametrize("case", AS_WRITTEN)
def test_an_event_without_the_values_of_its_message_is_shown_as_written(case):
    e = EVENTS[case]
    assert event_code(view(e)) is None
    assert event_text(view(e), "zh") == recorded(e["message"])


def test_the_event_table_in_chinese_shows_the_messages_in_chinese_in_the_runs_zone():
    events = [view(EVENTS[i]) for i in ("start", "crash_signal", "restart", "node_lost", "inject")]
    rows = event_rows(events, run_zone("Asia/Shanghai"), "zh")
    assert [r[1] for r in rows] == ["开始", "崩溃", "重启", "节点失联", "注入故障"]
    assert [r[3] for r in rows] == [ZH["start"], ZH["crash_signal"], ZH["restart"], ZH["node_lost"],
                                    "crash:200: exiting with status 1"]
    assert rows[0][0].endswith(time.strftime("%H:%M:%S", time.gmtime(TS + 8 * 3600)))
    assert [r[3] for r in event_rows(events, run_zone("Asia/Shanghai"), "en")] == [e.message for e in events]


def test_a_ranks_injected_fault_reads_in_chinese_through_the_heartbeat_follower():
    """Heartbeat lines a real rank wrote (``heartbeat-inject.jsonl``: crash:50 armed, then
    acting), folded into events by the daemon's follower, then read by the report."""
    from soak.daemon.heartbeat import StepAggregator

    lines = (FIXTURE.parent / "heartbeat-inject.jsonl").read_text(encoding="utf-8").splitlines()
    _, events = StepAggregator().feed([json.loads(line) for line in lines])
    views = [EventView(ts=e["ts"], kind=e["kind"], message=e["message"], detail=e["detail"], workload=e["workload"])
             for e in events]
    assert [event_text(e, "en") for e in views] == ["armed crash:50", "crash:50: exiting with status 1"]
    assert [event_text(e, "zh") for e in views] == ["已布设注入故障 crash:50", "crash:50：以状态 1 退出"]


def test_a_cluster_members_own_events_read_in_chinese(tmp_path):
    """The membership's events as it records them in a store (joins, a node lost, the job's
    rendezvous moved, a crash restarting the job), then read by the report."""
    from soak.cluster.member import ClusterMember
    from soak.config import plan_from_dict
    from soak.store import Store

    plan = plan_from_dict({"run": {"db": "postgresql+psycopg://soak@db.example/soak", "id": "c1"},
                           "cluster": {"nodes": 3, "rendezvous": "10.0.0.10:29400", "node_silence": "60s"}})
    now = time.time()
    run = dict(host="h", plan=plan.to_dict(), started_ts=now, planned_end_ts=now + 3600, workload="lm",
               backend="sim", time_scale=1.0, run_dir=str(tmp_path))
    with Store.open(f"sqlite:///{tmp_path / 'soak.db'}") as store:
        members = [ClusterMember(plan, store, "c1", f"node-{r}", r) for r in range(3)]
        for m in members:
            m.join(run, host=f"10.0.0.1{m.rank}", listen=None)
            m.touch(force=True, status="running")
        store.update_node("c1", "node-0", last_seen=store.store_now() - 75)
        lost = members[1].find_lost()
        assert [n.name for n in lost] == ["node-0"]
        assert members[1].move_rendezvous(lost) is not None
        members[1].generation = store.get_run("c1").generation
        assert members[1].job_failed("lm", "lm: crashed (signal 9)", 0, failure={"kind": "crash", "attempt": 1,
                                                                                   "exit_code": -9})
        events = [EventView(ts=e.ts, kind=e.kind, message=e.message, detail=e.detail, workload=e.workload, node=e.node)
                  for e in store.load_events("c1")]
    said = [(e.kind, event_text(e, "zh")) for e in events]
    assert said[:3] == [("node_joined", f"节点 node-{r}（rank {r}）从 10.0.0.1{r} 加入") for r in range(3)]
    kind, lost_zh = said[3]
    assert kind == "node_lost" and re.fullmatch(r"节点 node-0（rank 0）失联：1 min 未见（上限 1 min）", lost_zh)
    assert said[4:] == [
        ("cluster_restart", "节点 node-0（失联）承载作业的 rendezvous：作业在其他节点上重启（第 1 代），"
                            "rendezvous 移至节点 node-1（10.0.0.11:29400）"),
        ("cluster_restart", "lm：崩溃（信号 9），节点 node-1：整个作业重启（第 2 代）"),
    ]
    assert [event_text(e, "en") for e in events] == [e.message for e in events]
    assert events[3].message.startswith("node node-0 (rank 0) lost: not seen for ")


def test_the_disk_watchs_stop_reads_in_chinese(tmp_path):
    from soak.daemon.disk import DiskWatch

    stops = []
    watch = DiskWatch(tmp_path, "r1", 1 << 30, stops.append)
    watch.stop_run(851_968_000, 2_147_483_648)
    e = EventView(ts=TS, kind="disk", message=watch.message, detail=watch.detail)
    assert stops == ["disk"] and event_text(e, "en") == watch.message
    assert event_text(e, "zh") == (f"{tmp_path}：运行目录所在磁盘仅剩 812.5 MiB（需要 2048.0 MiB）；在写满前停止"
                                   "（运行已停止，数据已保留）")
    watch.stop_run(0, 2_147_483_648, "the disk filled")
    assert "磁盘已写满" in event_text(EventView(ts=TS, kind="disk", message=watch.message, detail=watch.detail), "zh")


@pytest.mark.slow
def test_chinese_pdf_event_table_says_the_recorded_events_in_chinese(tmp_path):
    """A run whose store holds one event of every translated case: its Chinese PDF's event
    table says each in Chinese, and none of their English messages is left there."""
    import shutil

    from soak.report.build import build_pdf
    from soak.store import Store
    from tests.conftest import skip_unless_ci
    from tests.report.pagecheck import layout_problems, pdf_pages
    from tests.report.synth import write_run

    if shutil.which("pdftotext") is None or shutil.which("pdfimages") is None:
        skip_unless_ci("pdftotext, pdfimages not installed (poppler-utils)")
    # checkpoints: one condensed line; the chips' fault reports are more than the table shows of
    # one kind (condensed there too: the PDF's device-faults table lists them)
    cases = [c for c in ZH if EVENTS[c]["kind"] not in ("checkpoint", "device_fault")]
    with Store.open(tmp_path / "soak.db") as store:
        shape = write_run(store, "r-events", chips=4, hours=2.0, crash=False, creep=False, findings=False)
        for i, case in enumerate(cases):
            e = EVENTS[case]
            store.add_event("r-events", e["kind"], ts=shape.start + 120 + 60 * i, workload=e["workload"], rank=e["rank"],
                            node=e["node"], message=e["message"], detail=e["detail"])
        pdf = build_pdf(store, "r-events", tmp_path / "zh.pdf", lang="zh").path
    pages = pdf_pages(pdf)
    text = " ".join(p.text for p in pages)
    start = text.index("事件时间线")
    table = text[start:text.index("无异常声明", start)]  # the next heading: the clean-run statement
    flat = re.sub(r"\s+", "", table)
    # the PDF writes a sentence's durations in the figures' style (``zh_durations``)
    from soak.report.pdf_style import zh_durations

    missing = [c for c in cases if re.sub(r"\s+", "", zh_durations(ZH[c])) not in flat]
    assert not missing, [(c, ZH[c]) for c in missing]
    # no word of these messages' English is left once the texts they quote (names, hosts, an
    # error's own words) are set aside; the synthetic run's own start has no detail, so it is
    # shown as written
    quoted = {q for c in cases for q in _quoted(event_code(view(EVENTS[c]))[1])}
    rest = table.replace("run started: lm on 4 chips", " ")
    for q in sorted(quoted, key=len, reverse=True):
        rest = rest.replace(q, " ")
    left = {}
    for c in cases:
        english = english_left(EVENTS[c]["message"], event_code(view(EVENTS[c]))[1])
        found = sorted(w for w in english if len(w) > 2 and re.search(rf"(?<![\w-]){w}(?![\w-])", rest, re.I))
        if found:
            left[c] = found
    assert not left, left
    problems = [p for page in pages if "事件时间线" in page.text or page.number > 1
                for p in layout_problems(page.words, page.width, page.height, images=page.images)]
    assert not problems, problems[:10]


def test_the_interruptions_table_says_each_stop_in_chinese_from_the_event_that_began_it():
    from types import SimpleNamespace

    from soak.analysis import evidence as ev
    from soak.report.rows import interruption_rows

    def rec(ts, kind, message=None, detail=None, rank=None):
        return SimpleNamespace(ts=ts, end_ts=None, kind=kind, workload="lm", rank=rank, message=message,
                               detail=detail or {}, node=None)

    crash, hang = EVENTS["crash_exit"], EVENTS["hang"]
    raw = [rec(TS + 10, "start", detail={"step": 0}, rank=0), rec(TS + 100, "crash", crash["message"], crash["detail"]),
           rec(TS + 130, "start", detail={"step": 0}, rank=0), rec(TS + 400, "hang", hang["message"], hang["detail"]),
           rec(TS + 450, "start", detail={"step": 0}, rank=0)]
    acc = ev.account(raw, ["lm"], planned_start=TS, planned_end=TS + 1000, ended=TS + 1000).to_dict()
    views = [EventView(ts=e.ts, kind=e.kind, message=e.message, detail=e.detail, workload=e.workload) for e in raw]
    zh = [r[4] for r in interruption_rows(acc, lang="zh", events=views)]
    assert zh == ["lm：工作负载启动", ZH["crash_exit"], ZH["hang"]]
    # English as recorded; without its events (an analysis alone) the Chinese row says it as recorded too
    assert [r[4] for r in interruption_rows(acc, lang="en", events=views)] == [
        "lm: workload start-up", crash["message"], hang["message"]]
    assert [r[4] for r in interruption_rows(acc, lang="zh")][1:] == [crash["message"], hang["message"]]
