"""One call of the simulated tools: what ``python -m soak.telemetry.sim --config F ARGS`` does.

It reads the config (a fault switched on with ``soak sim fault`` takes effect at the next
call), waits out a slow or hang fault, and renders npu-smi's or hccn_tool's answer. The
installed script runs it in a process of its own; a served fleet (``serve``) in its server.
Its imports are the simulator's alone: every unserved call pays for them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from soak.telemetry.sim.config import SimConfig
from soak.telemetry.sim.fleet import SimFleet

USAGE = "usage: python -m soak.telemetry.sim --config FILE npu-smi-args...\n"


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return True


def answer(argv: Sequence[str], wait: Callable[[float], bool] = _sleep) -> tuple[str, str, int]:
    """``(stdout, stderr, exit status)`` of one call ``--config FILE [--hccn-tool] ARGS``.

    ``wait(seconds)`` waits out a slow or hang fault (``time.sleep`` by default); when it returns
    False the caller has gone and the call ends at once, answering nothing."""
    if len(argv) < 2 or argv[0] != "--config":
        return "", USAGE, 2
    fleet = SimFleet(SimConfig.load(argv[1]))
    args = list(argv[2:])
    if args[:1] == ["--hccn-tool"]:
        out, rc = fleet.render_hccn(args[1:])
        return out, "", rc
    delay = fleet.delay_s(args)
    if delay > 0 and not wait(delay):  # slow/hang fault: the caller's timeout and kill must handle it
        return "", "", 1
    out, rc = fleet.render(args)
    return out, "", rc
