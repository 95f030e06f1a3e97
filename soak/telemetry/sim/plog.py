"""HCCL plog lines for the ``comm_timeouts`` scenario.

Event ``i`` happens at a fixed scaled time (``onset + (i+1) / rate``), so what lands in the
folder depends only on the time line, not on how often the tool is called: each call appends
the events due since the last one. Files are named like the real ones,
``plog-<pid>_<yyyymmddhhmmssmmm>.log``, and a new file starts every ``rotate_every`` events, as
plog rotates by size.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from soak.telemetry.sim.config import Spec

STATE_NAME = ".soak-sim-plog.json"
_KINDS = ("socket", "p2p", "heartbeat")


def _stamp(ts: float, sep: str = "-") -> str:
    tm = time.gmtime(ts)
    us = int(round((ts - int(ts)) * 1e6)) % 1_000_000
    return time.strftime(f"%Y-%m-%d{sep}%H:%M:%S", tm) + f".{us // 1000:03d}.{us % 1000:03d}"


def timeout_line(kind: str, pid: int, ts: float, i: int) -> str:
    head = f"[ERROR] HCCL({pid},python3):{_stamp(ts)}"
    tid = pid + 1000 + i % 7
    if kind == "p2p":
        return (f"{head} [p2p_mgmt.cc:305] [{tid}][Wait][P2PConnected]connected p2p timeout, "
                f"timeout:130 s. local logicDevid:{i % 8}, remote physic id:{(i + 1) % 8}.")
    if kind == "heartbeat":
        return (f"{head} [heartbeat.cc:551][{pid}][{tid}][Heartbeat]cqe err status[12], "
                f"time:[{_stamp(ts, ' ')[:-4]}], ip:[192.168.100.{10 + i % 8}]")
    return (f"{head} [hccl_socket_manager.cc:778] [{tid}][Wait][LinkEstablish]wait socket "
            f"establish timeout, role[{i % 2}] rank[{i % 16}] timeout[130]")


def due_events(spec: Spec, elapsed_s: float) -> int:
    onset = spec.num("onset_h") * 3600.0
    rate = spec.num("rate_per_h")
    if rate <= 0 or elapsed_s <= onset:
        return 0
    return int((elapsed_s - onset) * rate / 3600.0)


def write_due(spec: Spec, plog_dir: str | Path, origin: float, elapsed_s: float, seed: int) -> int:
    """Append the events due by ``elapsed_s``; returns how many exist now. Safe across processes."""
    folder = Path(plog_dir)
    folder.mkdir(parents=True, exist_ok=True)
    want = due_events(spec, elapsed_s)
    pid = int(spec.params.get("pid") or 0) or 40000 + seed % 20000
    rotate = max(1, int(spec.num("rotate_every")))
    onset = spec.num("onset_h") * 3600.0
    step = 3600.0 / spec.num("rate_per_h") if spec.num("rate_per_h") > 0 else 0.0
    kind = str(spec.get("kind"))
    with open(folder / STATE_NAME, "a+", encoding="utf-8") as state:
        fcntl.flock(state, fcntl.LOCK_EX)
        state.seek(0)
        try:
            done = int(json.loads(state.read() or "{}").get("written", 0))
        except (ValueError, AttributeError):
            done = 0
        if want <= done:
            return done
        for i in range(done, want):
            ts = origin + onset + (i + 1) * step
            first_ts = origin + onset + (i - i % rotate + 1) * step
            name = f"plog-{pid}_{time.strftime('%Y%m%d%H%M%S', time.gmtime(first_ts))}{int(first_ts * 1000) % 1000:03d}.log"
            k = _KINDS[i % len(_KINDS)] if kind == "mix" else kind
            with open(folder / name, "a", encoding="utf-8") as f:
                if i % rotate == 0:
                    f.write(f"[INFO] HCCL({pid},python3):{_stamp(first_ts - 1)} [externalinput.cc:407] "
                            f"[{pid}]HCCL_CONNECT_TIMEOUT set by environment to [130]s\n")
                f.write(timeout_line(k, pid, ts, i) + "\n")
        state.seek(0)
        state.truncate()
        state.write(json.dumps({"written": want}))
        state.flush()
        os.fsync(state.fileno())
    return want
