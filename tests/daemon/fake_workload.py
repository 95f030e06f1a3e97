"""A stand-in workload for supervisor tests: no torch, starts in milliseconds.

It behaves like the real ones where the daemon can see it: heartbeat lines in
``heartbeats/<name>-rank0.jsonl`` (docs/architecture.md), a checkpoint every N steps that a
restart resumes from, and faults on demand (crash once, crash always, hang once).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--name", default="fake")
    p.add_argument("--step-s", type=float, default=0.05)
    p.add_argument("--ckpt-every", type=int, default=5)
    p.add_argument("--crash-at", type=int)
    p.add_argument("--crash-always", action="store_true")
    p.add_argument("--hang-at", type=int)
    p.add_argument("--duration-s", type=float, default=600.0)
    p.add_argument("--ckpt-bytes", type=int, default=0,
                   help="also write step_<N>.pt checkpoints of this size as the real ones are "
                        "written (temp name, then renamed; last 2 kept); a full disk crashes it "
                        "with the half-written temp file left behind")
    a = p.parse_args()
    hb_path = a.run_dir / "heartbeats" / f"{a.name}-rank0.jsonl"
    hb_path.parent.mkdir(parents=True, exist_ok=True)
    ckpt = a.run_dir / "checkpoints" / a.name / "last.json"
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    hb = open(hb_path, "a", buffering=1)

    def beat(event: str, step: int, **kw: object) -> None:
        hb.write(json.dumps({"ts": time.time(), "workload": a.name, "rank": 0, "world_size": 1,
                             "device": "cpu", "event": event, "step": step, **kw}) + "\n")

    signal.signal(signal.SIGTERM, lambda *_: (beat("exit", step, message="SIGTERM"), os._exit(143)))
    step = 0
    if ckpt.exists():
        step = json.loads(ckpt.read_text())["step"]
        beat("resume", step, message=f"resumed from step {step}")
    beat("start", step)
    deadline = time.monotonic() + a.duration_s
    while time.monotonic() < deadline:
        nxt = step + 1
        marker = a.run_dir / f"{a.name}.fault-{nxt}"
        if a.crash_at == nxt and (a.crash_always or not marker.exists()):
            marker.touch()
            os._exit(1)
        if a.hang_at == nxt and not marker.exists():
            marker.touch()
            while True:  # alive, no progress
                time.sleep(1)
        t0 = time.perf_counter()
        time.sleep(a.step_s)
        step = nxt
        beat("step", step, step_time_s=time.perf_counter() - t0, loss=1.0 / step, tokens_per_s=1000.0)
        if step % a.ckpt_every == 0:
            tmp = ckpt.with_suffix(".tmp")
            tmp.write_text(json.dumps({"step": step}))
            os.replace(tmp, ckpt)
            if a.ckpt_bytes:
                big = ckpt.parent / f"step_{step}.pt"
                part = ckpt.parent / f".{big.name}.tmp-{os.getpid()}"
                with open(part, "wb") as fh:
                    for _ in range(0, a.ckpt_bytes, 1 << 16):
                        fh.write(b"\1" * (1 << 16))
                os.replace(part, big)
                for old in sorted(ckpt.parent.glob("step_*.pt"), key=lambda q: int(q.stem[5:]))[:-2]:
                    old.unlink()
            beat("checkpoint", step, phase="checkpoint", message=f"step {step}")
    beat("exit", step, message="finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
