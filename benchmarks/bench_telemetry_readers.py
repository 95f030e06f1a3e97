"""Cost of the Ascend telemetry readers, each next to a reference measured in the same run.

1. ``parse_info_table`` on a 16-chip A3 table vs. starting one trivial process (the least any
   npu-smi call costs): parsing must be noise next to the tool call.
2. ``run_tool`` vs. ``subprocess.run`` on ``true``: what the process-group/timeout handling adds.
3. ``PlogFollower.poll`` on a growing log vs. re-reading the whole file each poll.

Run: ``python benchmarks/bench_telemetry_readers.py`` (prints a table; asserts nothing).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from soak.telemetry.npu_table import parse_info_table  # noqa: E402
from soak.telemetry.plog import PlogFollower, count_text  # noqa: E402
from soak.telemetry.runner import run_tool  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "npu" / "008_910_93_A3_2npu_4chip_partial_fixture.txt"


def a3_16_chips() -> str:
    """The recorded 2-NPU A3 table with its chip rows repeated to 8 NPUs x 2 chips."""
    lines = FIXTURE.read_text().splitlines()
    head, body, tail = lines[:6], lines[6:18], lines[18:]
    out = list(head)
    for n in range(4):
        for ln in body:
            if ln.startswith("| 0     Ascend") or ln.startswith("| 1     Ascend"):
                ln = f"| {int(ln[2]) + 2 * n:<5d}" + ln[7:]
            out.append(ln)
    return "\n".join(out + tail) + "\n"


def timeit(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    text = a3_16_chips()
    assert len(parse_info_table(text).chips) == 16
    parse_s = timeit(lambda: parse_info_table(text), 200)
    spawn_s = timeit(lambda: subprocess.run(["true"], check=True), 50)
    runner_s = timeit(lambda: run_tool(["true"], timeout_s=10), 50)

    line = (
        "[INFO] HCCL(114725,python3):2025-06-19-09:27:24.674.788 [externalinput.cc:407] "
        "[114725]HCCL_CONNECT_TIMEOUT set by environment to [130]s\n"
    )
    polls, grow = 20, 100_000 // len(line)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plog-1_1.log"
        path.write_text(line * 200_000)  # ~27 MB before following starts
        follower = PlogFollower(tmp)
        inc, full = [], []
        for _ in range(polls):
            with path.open("a") as fh:
                fh.write(line * grow)
            t0 = time.perf_counter()
            follower.poll()
            inc.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            count_text(path.read_text())
            full.append(time.perf_counter() - t0)
        size_mb = path.stat().st_size / 1e6

    print(f"{'measurement':55s} {'ours':>12s} {'reference':>12s}")
    print(
        f"{'parse 16-chip A3 table vs spawn `true`':55s} {parse_s * 1e3:10.3f}ms {spawn_s * 1e3:10.3f}ms"
    )
    print(
        f"{'run_tool(true) vs subprocess.run(true)':55s} {runner_s * 1e3:10.3f}ms {spawn_s * 1e3:10.3f}ms"
    )
    print(
        f"{f'plog poll, +100 kB on a {size_mb:.0f} MB file vs full re-read':55s} "
        f"{statistics.median(inc) * 1e3:10.3f}ms {statistics.median(full) * 1e3:10.3f}ms"
    )


if __name__ == "__main__":
    main()
