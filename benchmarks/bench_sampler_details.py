"""The sampler's ticks with the chips' slow views read in the tick (the reference) and on a
thread of their own (what `soak run` and `soak exporter` do), in the same run.

An 8-chip simulated fleet (its `npu-smi` and `hccn_tool` are real processes, as a real node's
are), a 0.5 s tick, each chip's slow views due every ``--detail-interval`` seconds. For each
mode: the ticks taken in ``--seconds``, the share of the ticks due, and the widest gap between
two ticks.

Run: ``python benchmarks/bench_sampler_details.py [--seconds 30] [--detail-interval 8]``
(prints one JSON object; asserts nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from soak.telemetry.backends import NpuBackend  # noqa: E402
from soak.telemetry.sampler import Sampler  # noqa: E402
from soak.telemetry.sim import SimConfig, install  # noqa: E402


def measure(folder: Path, background: bool, seconds: float, tick_s: float, detail_s: float) -> dict[str, float]:
    script = install(folder, SimConfig.build(chips=8))
    backend = NpuBackend(npu_smi=str(script), hccn_tool=str(script.parent / "hccn_tool"),
                         detail_interval_s=detail_s, details_in_background=background)
    stamps: list[float] = []
    sampler = Sampler(backend, interval_s=tick_s, sinks=(lambda _snap: stamps.append(time.monotonic()),))
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    backend.close()
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return {"ticks": len(stamps), "share_of_due": round(len(stamps) / (seconds / tick_s), 3),
            "widest_gap_s": round(max(gaps), 2) if gaps else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--tick", type=float, default=0.5)
    ap.add_argument("--detail-interval", type=float, default=8.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = {mode: measure(Path(tmp) / mode, mode == "background", a.seconds, a.tick, a.detail_interval)
               for mode in ("in_the_tick", "background")}
    print(json.dumps({"seconds": a.seconds, "tick_s": a.tick, "detail_interval_s": a.detail_interval, **out}))


if __name__ == "__main__":
    main()
