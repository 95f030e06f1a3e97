"""Entry of the installed ``npu-smi`` script: ``python -m soak.telemetry.sim --config F ARGS``."""

from __future__ import annotations

import sys
import time

from soak.telemetry.sim.config import SimConfig
from soak.telemetry.sim.fleet import SimFleet


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "--config":
        print("usage: python -m soak.telemetry.sim --config FILE npu-smi-args...", file=sys.stderr)
        return 2
    fleet = SimFleet(SimConfig.load(argv[1]))
    args = argv[2:]
    if args[:1] == ["--hccn-tool"]:
        out, rc = fleet.render_hccn(args[1:])
        sys.stdout.write(out)
        return rc
    delay = fleet.delay_s(args)
    if delay > 0:
        time.sleep(delay)  # slow/hang fault: the caller's timeout and kill must handle it
    out, rc = fleet.render(args)
    sys.stdout.write(out)
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
