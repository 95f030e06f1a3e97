"""A recorded run written through the store API, for the report tests and benchmarks/bench_report.py.

The shape follows a real Ascend soak: 8 NPUs x 2 chips, 10 s samples, AI-core utilization
in the high 90s with checkpoint dips, temperatures that track power, HBM flat after warm-up.
Faults can be planted: an HBM creep on one chip and a workload crash followed by a restart.
Test and benchmark data only: nothing in ``soak`` imports it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from soak.device_names import device_key
from soak.store import Store

GIB = 1024**3


@dataclass(frozen=True)
class SynthRun:
    run_id: str
    start: float
    end: float
    devices: tuple[str, ...]
    creep_device: str | None
    crash_ts: float | None
    rows: int


def devices(n: int) -> tuple[str, ...]:
    return tuple(f"npu{i // 2}-{i % 2}" for i in range(n))


def write_run(
    store: Store,
    run_id: str = "r-synth",
    *,
    chips: int = 16,
    hours: float = 3.0,
    interval_s: float = 10.0,
    start: float = 1_790_000_000.0,
    creep: bool = True,
    crash: bool = True,
    finished: bool = True,
    findings: bool = True,
    seed: int = 7,
    leak_mib_per_h: float = 400.0,
    batch_rows: int = 20_000,
) -> SynthRun:
    """Write a run of ``chips`` x ``hours`` at ``interval_s`` into ``store``; returns its shape."""
    rng = random.Random(seed)
    devs = devices(chips)
    n = int(hours * 3600 / interval_s)
    end = start + n * interval_s
    creep_dev = devs[min(3, chips - 1)] if creep else None
    crash_ts = start + 0.55 * (end - start) if crash else None
    manifest = {
        "host": {"hostname": "node-a01", "os": "Ubuntu 22.04", "kernel": "5.15.0-105"},
        "packages": {"torch": "2.1.0", "torch_npu": "2.1.0.post6"},
        "cann": {"toolkit": "8.0.RC2"},
        "npu": {
            "npu_smi_version": "24.1.rc2",
            "driver_version": "24.1.rc2",
            "chip_count": chips,
            "cards": [
                {"npu_id": c, "name": "Ascend910B3", "chips": 2, "serial_number": f"0321{c:08d}",
                 "pcie_bus_info": f"0000:{0xC1 + c:02x}:00.0", "firmware_version": "7.3.0.1.231"}
                for c in range((chips + 1) // 2)
            ],
        },
    }
    plan = {"workload": "lm", "duration_h": hours, "interval_s": interval_s}
    store.create_run(
        run_id,
        host="node-a01",
        plan=plan,
        started_ts=start,
        planned_end_ts=end,
        manifest=manifest,
        workload="lm",
        backend="sim",
        time_scale=1.0,
    )
    rows: list[dict] = []
    total = 0
    hbm_total = 64 * GIB
    for i in range(n):
        ts = start + i * interval_s
        ckpt = (i * interval_s) % 3600 < 60  # checkpoint dip every hour
        down = crash_ts is not None and crash_ts <= ts < crash_ts + 120
        for k, d in enumerate(devs):
            util = 0.0 if down else (35.0 if ckpt else 96.0 + rng.uniform(-2.5, 2.5))
            power = 90.0 if down else 180.0 + util * 1.9 + rng.uniform(-6, 6)
            temp = 38.0 + power * 0.09 + 0.4 * k % 3 + rng.uniform(-0.5, 0.5)
            hbm = 0 if down else 48 * GIB + rng.uniform(-0.2, 0.2) * GIB
            if d == creep_dev and not down:
                hbm += (ts - start) / 3600 * leak_mib_per_h * 1024**2
            rows.append(
                {
                    "run_id": run_id,
                    "ts": ts,
                    "device": d,
                    "up": True,
                    "healthy": True,
                    "health": "OK",
                    "util_pct": round(util, 1),
                    "hbm_used_bytes": int(hbm),
                    "hbm_total_bytes": hbm_total,
                    "temp_c": round(temp, 1),
                    "power_w": round(power, 1),
                    "host_rss_bytes": None,
                    "comm_timeouts_total": None,
                    "ddr_used_bytes": None,
                    "ddr_total_bytes": None,
                    "ecc_single_bit_errors": 0,
                    "ecc_double_bit_errors": 0,
                    "link_up": True,
                    "error": None,
                }
            )
        if len(rows) >= batch_rows:
            store.add_sample_rows(rows)
            total += len(rows)
            rows = []
    if rows:
        store.add_sample_rows(rows)
        total += len(rows)
    # Step rows: one per rank per minute is enough for the timeline.
    steps = []
    step = 0
    for i in range(0, n, max(1, int(60 / interval_s))):
        ts = start + i * interval_s
        step += 110
        for r in range(min(chips, 16)):
            steps.append(
                {"ts": ts, "workload": "lm", "rank": r, "step": step, "n_steps": 110,
                 "step_time_s": 0.52 + rng.uniform(-0.01, 0.01), "loss": 3.0 * math.exp(-i / n), "attempt": 1}
            )
    store.add_steps(run_id, steps)
    store.add_event(run_id, "start", ts=start, message=f"run started: lm on {chips} chips")
    for h in range(1, int(hours) + 1):
        store.add_event(run_id, "checkpoint", ts=start + h * 3600, workload="lm", rank=0, message=f"checkpoint step_{h * 6600}")
    if crash_ts is not None:
        store.add_event(run_id, "crash", ts=crash_ts, workload="lm", rank=5, message="rank 5 exited with code 1 (injected crash)")
        store.add_event(run_id, "restart", ts=crash_ts + 120, workload="lm", message="attempt 2: resumed from checkpoint")
        store.update_run(run_id, restarts=1)
    found = []
    if findings and creep_dev is not None:
        found.append(
            {
                "kind": "memory_creep",
                "device": creep_dev,
                "metric": "hbm_used_bytes",
                "start": start + 0.25 * (end - start),
                "end": end,
                "severity": "fail",
                "summary": f"HBM grows {leak_mib_per_h:.0f} MiB/h",
                "slope_per_hour": leak_mib_per_h * 1024**2,
                "onset": start + 600,
                "details": {"ci_low": 1.45e8, "ci_high": 1.7e8, "quarters_positive": 4},
            }
        )
    if findings:
        store.replace_findings(run_id, found)
    if finished:
        store.finish_run(run_id, status="finished", ended_ts=end, verdict="fail" if found else "pass")
    return SynthRun(run_id, start, end, devs, creep_dev, crash_ts, total)


def write_cluster_run(
    store: Store,
    run_id: str = "c-synth",
    *,
    nodes: int = 64,
    chips: int = 16,
    hours: float = 1.0,
    interval_s: float = 60.0,
    start: float = 1_790_000_000.0,
    unread: tuple[str, ...] = (),
    half_read: tuple[str, ...] = (),
    other_driver: str | None = None,
    seed: int = 11,
) -> SynthRun:
    """A finished cluster run: ``nodes`` x ``chips`` chips stored with their node as the agents
    store them, one node row each (with its manifest), one rank per node with compute time.
    ``unread`` chips (named ``node/chip``) have no readings, ``half_read`` ones the first half
    only; ``other_driver`` is a node whose driver differs from the others'."""
    rng = random.Random(seed)
    names = [f"node-{i:02d}" for i in range(nodes)]
    devs = devices(chips)
    n = int(hours * 3600 / interval_s)
    end = start + n * interval_s

    def manifest(node: str) -> dict:
        driver = "24.1.rc9" if node == other_driver else "24.1.rc2"
        return {"host": {"hostname": node}, "packages": {"torch": "2.1.0", "torch_npu": "2.1.0.post6"},
                "npu": {"driver_version": driver, "firmware_version": "7.3.0.1.231",
                        "cards": [{"npu_id": c, "name": "Ascend910B3", "chips": 2, "serial_number": f"{node}-{c:02d}"}
                                  for c in range((chips + 1) // 2)]}}

    from soak.config import plan_from_dict

    plan = plan_from_dict({"run": {"duration": f"{hours * 3600:.0f}s", "preflight": False},
                           "devices": {"backend": "sim"}, "sim": {"chips": chips},
                           "sampling": {"interval": f"{interval_s:g}s"},
                           "workloads": [{"name": "lm", "size": "tiny", "nproc": 1}]}).to_dict()
    store.create_run(run_id, host=names[0], plan=plan, started_ts=start,
                     planned_end_ts=end, manifest=manifest(names[0]), workload="lm", backend="sim")
    store.update_run(run_id, nodes=nodes)
    for rank, node in enumerate(names):
        store.join_cluster(run_id, node=node, rank=rank, nodes=nodes, plan_digest=None, joined_ts=start, run={},
                           host=node, chips=chips, manifest=manifest(node))
        store.update_node(run_id, node, status="finished", ended_ts=end, last_seen=end)
    rows: list[dict] = []
    total = 0
    for i in range(n):
        ts = start + i * interval_s
        for node in names:
            # the node's host row, as the agents store it: never a chip
            rows.append({"run_id": run_id, "ts": ts, "node": node, "device": "host", "up": True, "healthy": None,
                         "health": None, "util_pct": None, "hbm_used_bytes": None, "hbm_total_bytes": None,
                         "temp_c": None, "power_w": None, "host_rss_bytes": 1 << 30})
            for k, d in enumerate(devs):
                key = device_key(node, d)
                if key in unread or (key in half_read and i >= n // 2):
                    continue
                util = 96.0 + rng.uniform(-2.0, 2.0)
                power = 180.0 + util * 1.9 + rng.uniform(-6, 6)
                rows.append({"run_id": run_id, "ts": ts, "node": node, "device": d, "up": True, "healthy": True,
                             "health": "OK", "util_pct": round(util, 1), "hbm_used_bytes": 48 * GIB, "hbm_total_bytes": 64 * GIB,
                             "temp_c": round(38.0 + power * 0.09 + 0.2 * (k % 3), 1), "power_w": round(power, 1),
                             "host_rss_bytes": None})
        if len(rows) >= 50_000:
            store.add_sample_rows(rows)
            total += len(rows)
            rows = []
    store.add_sample_rows(rows)
    total += len(rows)
    for rank, node in enumerate(names):
        store.add_steps(run_id, [{"ts": start + i * interval_s, "workload": "lm", "rank": rank, "step": 10 * i,
                                  "n_steps": 10, "step_time_s": 0.5, "compute_s": 0.4, "attempt": 1}
                                 for i in range(n)], node=node)
    store.add_event(run_id, "start", ts=start, workload="lm", rank=0, message=f"lm on {nodes} nodes")
    # the end of a cluster run is written by the holder of its judging lease, as the agents do
    assert store.take_lease(run_id, names[0], 60.0)
    assert store.finish_cluster_run(run_id, names[0], status="finished", ended_ts=end, verdict="pass")
    return SynthRun(run_id, start, end, tuple(device_key(node, d) for node in names for d in devs), None, None, total)
