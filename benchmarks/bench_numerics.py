"""Cost of lm's numerical checks as a share of its step time, and the time from a fault to its event.

1. cost: lm tiny with 2 gloo ranks at the default check period trains ``--steps`` steps; in
   each rank the time spent in the checks (``Numerics.before_forward`` and
   ``Numerics.after_backward``: the per-step loss and gradient checks, and every period the
   replica checksum, the host copy of the state and the cross-chip recompute) is timed apart
   from the rest of the step. The checks' collectives also absorb the ranks' skew (a rank
   waits there for the other instead of in the next gradient all-reduce), so a step's check
   cost is taken on the rank that spent least in them: the last to arrive, which waited for
   nobody. The reference is the same run's own training time, so a busy host slows both
   alike. Target: under 1 % at the default period.
2. fault to event: ``corrupt``, ``bitflip`` and ``nan`` injected on rank 1 at step ``--at``;
   the seconds and steps from the ``inject`` event to the finding (the ``sdc_mismatch`` or
   ``nonfinite`` event).

Run: ``nice python benchmarks/bench_numerics.py [--steps 400] [--at 150]``.
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
from typing import Any

from soak.runfolder import HEARTBEATS
from soak.workloads.launch import build_command
from soak.workloads.numerics import DEFAULT_CHECK_EVERY


def worker(out: Path, argv: list[str]) -> int:
    """One rank of lm with the checks timed (started by torchrun through ``--worker``)."""
    from soak.workloads import lm
    from soak.workloads.numerics import Numerics

    # step -> [seconds of the whole step, seconds in the checks, a check step (0/1)]
    spent: dict[int, list[float]] = {}

    def timed(fn: Any, slot: int) -> Any:
        def run(self: Any, step: int, *a: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(self, step, *a)
            finally:
                row = spent.setdefault(step, [0.0, 0.0, 0.0])
                row[slot] += time.perf_counter() - t0
                if isinstance(self, Numerics):
                    row[2] = float(self.due(step))
        return run

    Numerics.before_forward = timed(Numerics.before_forward, 1)  # type: ignore[method-assign]
    Numerics.after_backward = timed(Numerics.after_backward, 1)  # type: ignore[method-assign]
    lm.LMWorkload.step = timed(lm.LMWorkload.step, 0)  # type: ignore[method-assign]
    rc = lm.main(argv)
    (out / f"rank{os.environ.get('RANK', '0')}.json").write_text(json.dumps(spent))
    sys.stdout.flush()
    os._exit(rc)  # as run_cli does: no interpreter teardown under torch's threads


def launch(run: Path, steps: int, inject: tuple[str, ...], timed: Path | None, timeout: float) -> None:
    cmd = build_command("lm", run, 2, "tiny", steps=steps, inject=inject,
                        extra=["--ckpt-every", "0", "--profile-steps", "0", "--align-steps", "0"])
    if timed is not None:  # the same ranks, through this file's worker
        i = cmd.index("soak.workloads.lm")
        cmd[i - 1:i + 1] = [str(Path(__file__).resolve()), "--worker", str(timed), "--"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, capture_output=True, timeout=timeout, env=env)


def cost(tmp: Path, steps: int) -> None:
    out = tmp / "timed"
    out.mkdir()
    launch(tmp / "cost", steps, (), out, timeout=steps * 2.0 + 120)
    ranks = [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    rows = [[r[s] for r in ranks] for s in sorted(ranks[0], key=int)[20:]]  # after a warm-up
    train = sum(sum(r[0] - r[1] for r in row) / len(row) for row in rows)  # training, mean of the ranks
    checks = [min(r[1] for r in row) for row in rows]  # the rank that waited for nobody
    waited = sum(max(r[1] for r in row) for row in rows)
    plain = [c for c, row in zip(checks, rows, strict=True) if not row[0][2]]
    period = [c for c, row in zip(checks, rows, strict=True) if row[0][2]]
    print(f"cost, lm tiny, 2 gloo ranks, {len(rows)} steps (after 20), checks every {DEFAULT_CHECK_EVERY} steps:")
    print(f"  training {1e3 * train / len(rows):.1f} ms/step; checks {sum(checks):.3f} s = "
          f"{100 * sum(checks) / train:.2f} % of it (per-step loss and gradient checks {1e3 * sum(plain) / len(plain):.2f} "
          f"ms/step, a check step's checks {1e3 * sum(period) / max(1, len(period)):.1f} ms over "
          f"{len(period)} check steps)")
    print(f"  (the slower-arriving rank's time in them, skew included: {100 * waited / train:.2f} %)")


def fault_to_event(tmp: Path, at: int) -> None:
    period = DEFAULT_CHECK_EVERY
    steps = (at // period + 1) * period + 5
    print(f"fault to event, injected on rank 1 at step {at}, checks every {period} steps:")
    for spec, event in (("corrupt", "sdc_mismatch"), ("bitflip", "sdc_mismatch"), ("nan", "nonfinite")):
        run = tmp / spec
        launch(run, steps, (f"{spec}:{at},1",), None, timeout=steps * 2.0 + 120)
        lines = [json.loads(x) for x in (run / HEARTBEATS / "lm-rank1.jsonl").open()]
        fault = next(r for r in lines if r["event"] == "inject" and r["step"] == at)
        found = next(r for r in lines if r["event"] == event)
        print(f"  {spec:<8} {event} at step {found['step']} ({found['step'] - at} steps, "
              f"{found['ts'] - fault['ts']:.2f} s after the fault): "
              f"suspect rank {found['suspect_rank']}, {found['classification']}")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        return worker(Path(sys.argv[2]), sys.argv[4:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=400, help="steps of the cost run (default: 400)")
    p.add_argument("--at", type=int, default=150, help="step the faults are injected at (default: 150)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="soak-bench-") as t:
        cost(Path(t), a.steps)
        fault_to_event(Path(t), a.at)
    return 0


if __name__ == "__main__":
    sys.exit(main())
