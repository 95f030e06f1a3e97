"""Workload throughput on CPU (tiny presets) and the cost of heartbeats and checkpoints.

1. steps/s of lm, gemm and collective, each with 2 gloo ranks under torchrun, read from the
   heartbeat files (steps between the ``start`` and ``exit`` events of rank 0);
2. overhead: the same single-process lm loop with heartbeats + checkpoints on and off,
   interleaved (on, off, on, off, ...) so drifting machine load hits both arms alike;
   medians of wall and CPU time are compared. Target: under 1 %.
3. unit costs: one rate-limited ``Heartbeat.step`` call, one heartbeat line, one checkpoint.

Run: ``nice python benchmarks/bench_workloads.py [--repeats 5] [--steps 300]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from soak.runfolder import HEARTBEATS
from soak.workloads.launch import build_command


def throughput(workload: str, seconds: float, tmp: Path) -> float:
    run = tmp / f"tp-{workload}"
    cmd = build_command(workload, run, 2, "tiny", duration_s=seconds,
                        extra=["--ckpt-every", "0"])
    subprocess.run(cmd, check=True, capture_output=True, timeout=seconds + 120)
    lines = [json.loads(x) for x in (run / HEARTBEATS / f"{workload}-rank0.jsonl").open()]
    start = next(r for r in lines if r["event"] == "start")
    end = next(r for r in lines if r["event"] == "exit")
    return (end["step"] - start["step"]) / (end["ts"] - start["ts"])


def one_loop(tmp: Path, steps: int, on: bool, ckpt_every: int, i: int) -> tuple[float, float]:
    from soak.workloads import lm

    argv = ["--run-dir", str(tmp / f"ovh-{int(on)}-{i}"), "--steps", str(steps)]
    argv += ["--ckpt-every", str(ckpt_every)] if on else ["--ckpt-every", "0", "--no-heartbeat"]
    w0, c0 = time.perf_counter(), time.process_time()
    assert lm.main(argv) == 0
    return time.perf_counter() - w0, time.process_time() - c0


def unit_costs(tmp: Path) -> dict[str, float]:
    import torch

    from soak.device import Device
    from soak.workloads.common import Checkpointer, Heartbeat
    from soak.workloads.lm import PRESETS, build_model

    dev = Device("cpu")
    hb = Heartbeat(tmp / "unit", "lm", 0, 1, dev, interval_s=1.0)
    hb.step(0, loss=1.0)
    n = 100_000
    t0 = time.perf_counter()
    for i in range(n):
        hb.step(i, loss=1.0)  # rate-limited: almost every call returns at once
    skip_us = (time.perf_counter() - t0) / n * 1e6
    t0 = time.perf_counter()
    for i in range(2000):
        hb.event("step", i, loss=1.0)
    line_us = (time.perf_counter() - t0) / 2000 * 1e6
    model = build_model(PRESETS["tiny"])
    opt = torch.optim.AdamW(model.parameters())
    ck = Checkpointer(tmp / "unit", "lm", keep=2)
    t0 = time.perf_counter()
    for s in range(20):
        ck.save(s + 1, {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": s})
    ckpt_ms = (time.perf_counter() - t0) / 20 * 1e3
    return {"rate_limited_call_us": skip_us, "heartbeat_line_us": line_us,
            "checkpoint_tiny_ms": ckpt_ms}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seconds", type=float, default=8.0, help="throughput run length")
    p.add_argument("--ckpt-every", type=int, default=200,
                   help="checkpoint period of the 'on' arm (default: 200, the lm tiny default)")
    a = p.parse_args()
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="soak-bench-") as t:
        tmp = Path(t)
        print("throughput, tiny presets, 2 gloo ranks (rank 0):")
        for wl in ("lm", "gemm", "collective"):
            print(f"  {wl:<11} {throughput(wl, a.seconds, tmp):10.1f} steps/s")
        one_loop(tmp, 20, True, a.ckpt_every, -1)  # warm caches and imports
        arms: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for i in range(a.repeats):
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                arms[on].append(one_loop(tmp, a.steps, on, a.ckpt_every, i))
        print(f"overhead, lm tiny, 1 process, {a.steps} steps x {a.repeats} interleaved repeats "
              f"(on = heartbeat every 1 s + checkpoint every {a.ckpt_every} steps):")
        for k, name in ((0, "wall"), (1, "cpu")):
            on = statistics.median(x[k] for x in arms[True])
            off = statistics.median(x[k] for x in arms[False])
            print(f"  {name:<4} median on {on:7.3f} s  off {off:7.3f} s  "
                  f"overhead {100 * (on - off) / off:+6.2f} %  "
                  f"(spread off {min(x[k] for x in arms[False]):.3f}-"
                  f"{max(x[k] for x in arms[False]):.3f} s)")
        costs = unit_costs(tmp)
        print("unit costs:")
        for k, v in costs.items():
            print(f"  {k:<22} {v:10.2f}")
        # the same overhead from unit costs: steadier than end-to-end timing on a busy host
        step_s = statistics.median(x[1] for x in arms[False]) / a.steps
        per_step = (costs["rate_limited_call_us"] * 1e-6 + costs["heartbeat_line_us"] * 1e-6
                    * step_s / 1.0 + costs["checkpoint_tiny_ms"] * 1e-3 / a.ckpt_every)
        print(f"  computed overhead at {step_s * 1e3:.1f} ms/step: {100 * per_step / step_s:.3f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
