"""One call of the simulated ``npu-smi`` as the sampler makes it every tick: the installed
script (``python -S``, the standard library and ``soak`` alone) and the script of a served
fleet (the sim backend's: a small client answered by this process) against the same module run
by the same interpreter with its site-packages' start-up (the reference), in the same run.

Run: ``python benchmarks/bench_sim_call.py [--calls 40]`` (prints one JSON object; asserts
nothing). CPU is the calls' user + system time, as ``os.times`` counts finished children; a
served call's adds the server's, this process's own CPU over the calls.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from soak.telemetry.backends import SimBackend  # noqa: E402
from soak.telemetry.sim import CONFIG_NAME, SimConfig, install  # noqa: E402


def measure(argv: list[str], calls: int, env: dict[str, str], *, served: bool = False) -> dict[str, float]:
    before, t0 = os.times(), time.monotonic()
    for _ in range(calls):
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
    after, wall = os.times(), time.monotonic() - t0
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if served:  # the server's answers, and this loop's own few calls
        cpu += (after.user - before.user) + (after.system - before.system)
    return {"cpu_ms_per_call": round(1000 * cpu / calls, 1), "wall_ms_per_call": round(1000 * wall / calls, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = SimConfig.build(chips=8)
        script = install(tmp, config)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        site = [sys.executable, "-m", "soak.telemetry.sim", "--config", str(Path(tmp) / CONFIG_NAME), "info"]
        measure([str(script), "info"], 3, env)  # warm the page cache and the bytecode
        backend = SimBackend(sim_config=config, sim_dir=Path(tmp) / "served")
        try:
            served = str(backend.sim_dir / "npu-smi")
            measure([served, "info"], 3, env, served=True)
            out = {"calls": args.calls, "installed (-S)": measure([str(script), "info"], args.calls, env),
                   "served (the sim backend's)": measure([served, "info"], args.calls, env, served=True),
                   "reference (with site)": measure(site, args.calls, env)}
        finally:
            backend.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
