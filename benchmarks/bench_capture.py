"""The cost of profiler captures on the tiny lm (CPU, one thread), in one run.

1. steps/s outside a capture vs during one (``torch.profiler`` on, the ``soak.*`` ranges
   recorded), and what stopping a capture costs (Chrome trace export, summary, gzip);
2. capture size on disk: the gzipped trace of one default capture (10 steps);
3. the hooks outside a capture: ``before_step`` + three ``phase`` blocks + ``after_step`` per
   step, which every step pays;
4. whole-run overhead at the default cadence (baseline once, no planned cadence, at most
   ``capture.max_per_hour`` = 4 captures asked for by findings per hour), from 1-3 plus the
   profiler's one-off start-up (paid before the first step): target under 0.5 %.

Rounds interleave plain steps and captures, so drifting machine load hits both alike;
medians are reported.

Run: ``nice python benchmarks/bench_capture.py [--rounds 5] [--steps 200]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200, help="plain steps per round")
    ap.add_argument("--capture-steps", type=int, default=10, help="steps per capture (capture.steps)")
    args = ap.parse_args()

    import torch

    from soak.workloads.capture import Capturer
    from soak.workloads.lm import PRESETS, build_model, synthetic_batch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = PRESETS["tiny"]
    model = build_model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    tmp = Path(tempfile.mkdtemp(prefix="soak-bench-capture-"))
    got: list[dict] = []
    cap = Capturer(tmp, "lm", 0, "cpu", steps=args.capture_steps, warmup=10**9,
                   emit=lambda _s, _m, summary: got.append(summary))
    t0 = time.perf_counter()
    cap.warm_up()
    warm_up_s = time.perf_counter() - t0

    def step(i: int) -> None:
        cap.before_step(i)
        with cap.phase("data"):
            x, y = synthetic_batch(cfg, 1, i, 0)
        with cap.phase("forward"):
            loss = model(x, y)
        with cap.phase("backward"):
            loss.backward()
        with cap.phase("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        cap.after_step(i)

    for i in range(20):
        step(i)
    outside, inside, stop_ms, sizes = [], [], [], []
    i = 100
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            i += 1
            step(i)
        outside.append(args.steps / (time.perf_counter() - t0))
        # one capture: start on the next step, K profiled steps, then the stop
        cap._start("request", i + 1, None)
        t0 = time.perf_counter()
        for _ in range(args.capture_steps - 1):
            i += 1
            step(i)
        i += 1
        cap.before_step(i)
        with cap.phase("data"):
            x, y = synthetic_batch(cfg, 1, i, 0)
        with cap.phase("forward"):
            loss = model(x, y)
        with cap.phase("backward"):
            loss.backward()
        with cap.phase("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        inside.append(args.capture_steps / (t1 - t0))
        cap.after_step(i)  # stops the capture: export, summary, gzip
        stop_ms.append((time.perf_counter() - t1) * 1e3)
        sizes.append(got[-1]["trace_bytes"])

    # the hooks every step pays outside a capture
    n = 200_000
    t0 = time.perf_counter()
    for k in range(n):
        cap.before_step(k)
        with cap.phase("data"), cap.phase("forward"), cap.phase("backward"):
            pass
        cap.after_step(k)
    hook_us = (time.perf_counter() - t0) / n * 1e6

    out_sps, in_sps = statistics.median(outside), statistics.median(inside)
    stop_s = statistics.median(stop_ms) / 1e3
    extra_per_capture_s = args.capture_steps * (1 / in_sps - 1 / out_sps) + stop_s
    hook_share = hook_us * 1e-6 * out_sps
    per_hour = 4
    hour_s = 3600.0
    healthy = (warm_up_s + extra_per_capture_s) / hour_s + hook_share
    busy = (warm_up_s + (1 + per_hour) * extra_per_capture_s) / hour_s + hook_share
    print(f"tiny lm, CPU, 1 thread, {args.rounds} rounds (medians)")
    print(f"  steps/s outside a capture     {out_sps:9.1f}")
    print(f"  steps/s during a capture      {in_sps:9.1f}   ({in_sps / out_sps - 1:+.0%})")
    print(f"  stopping a capture            {stop_s * 1e3:9.1f} ms (trace export, summary, gzip)")
    print(f"  extra time per capture        {extra_per_capture_s * 1e3:9.1f} ms ({args.capture_steps} steps)")
    print(f"  trace on disk per capture     {statistics.median(sizes) / 1e3:9.1f} kB gzipped")
    print(f"  profiler start-up (once)      {warm_up_s * 1e3:9.1f} ms, before the first step")
    print(f"  hooks outside a capture       {hook_us:9.2f} us/step = {hook_share:.4%} of a step")
    print("whole-run overhead at the default cadence, 1-hour run:")
    print(f"  healthy (baseline only)       {healthy:9.4%}")
    print(f"  + {per_hour} captures asked per hour {busy:9.4%}   (target < 0.5 %)")


if __name__ == "__main__":
    main()
