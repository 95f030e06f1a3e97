"""``collective``: all_reduce, all_gather and broadcast across ranks, timed and checked.

Each step runs every op at every message size of the preset, ``iters`` times, checks the
result exactly (small integers in float32 add up exactly), and reports per op and size:
latency, algbw = S / t and busbw as nccl-tests defines it:

=============  ==============  =========================================
op             S               busbw
=============  ==============  =========================================
all_reduce     buffer bytes    algbw x 2(n-1)/n
all_gather     output bytes    algbw x (n-1)/n   (each rank sends S/n)
broadcast      buffer bytes    algbw
=============  ==============  =========================================

A wrong result is an ``sdc_mismatch`` event (``check`` ``collective``, tolerance 0: the
result is exact): the fabric or any rank's chip may have corrupted it, so it names no suspect
rank and no chip (``soak.analysis.numerics``). Every op and size checked counts in the step
lines' ``numeric_checks``.

Run: ``soak workload collective --nproc-per-node N --run-dir DIR`` (its torchrun: ``--print``).
"""

from __future__ import annotations

import time
from typing import Any

from soak.workloads.common import Context, run_cli

KiB, MiB = 2**10, 2**20
PRESETS: dict[str, tuple[tuple[int, ...], int]] = {  # message sizes in bytes, iters per size
    "tiny": ((4 * KiB, 256 * KiB, 1 * MiB), 2),
    "small": ((64 * KiB, 1 * MiB, 16 * MiB), 5),
    "medium": ((1 * MiB, 16 * MiB, 256 * MiB), 10),
    "large": ((1 * MiB, 64 * MiB, 1024 * MiB), 10),
}
CKPT_EVERY = {"tiny": 50, "small": 200, "medium": 200, "large": 200}
OPS = ("all_reduce", "all_gather", "broadcast")


def bus_factor(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op == "all_gather":
        return (n - 1) / n
    return 1.0


class CollectiveWorkload:
    def __init__(self, ctx: Context) -> None:
        import torch

        if not ctx.distributed:
            raise RuntimeError("collective needs a process group: start it under torchrun")
        self.ctx = ctx
        self.n = ctx.world_size
        self.dev = ctx.device.torch_device()
        sizes, self.iters = PRESETS[ctx.args.size]
        unit = 4 * self.n  # float32 elements, divisible among ranks for all_gather
        self.sizes = tuple(max(unit, s // unit * unit) for s in sizes)
        self.buf = {s: torch.empty(s // 4, dtype=torch.float32, device=self.dev)
                    for s in self.sizes}
        ctx.hb.numeric_checks = 0

    def state_dict(self) -> dict[str, Any]:
        return {"sdc_mismatches": self.ctx.hb.sdc_mismatches, "numeric_checks": self.ctx.hb.numeric_checks,
                "sizes": self.sizes}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ctx.hb.sdc_mismatches = int(state.get("sdc_mismatches", 0))
        self.ctx.hb.numeric_checks = int(state.get("numeric_checks") or 0)

    def _run(self, op: str, size: int, step: int) -> tuple[float, bool]:
        """Time ``iters`` runs of one op; True when the last result is exact."""
        import torch
        import torch.distributed as dist

        n, rank, k = self.n, self.ctx.rank, step % 5
        t = self.buf[size]
        part = t.numel() // n
        mine = t[:part].clone()
        root = step % n
        total = 0.0
        ok = True
        for _ in range(self.iters):
            t.fill_(rank + 1 + k)
            self.ctx.device.synchronize()
            with self.ctx.collective(op, step):
                t0 = time.perf_counter()
                if op == "all_reduce":
                    dist.all_reduce(t)
                elif op == "all_gather":
                    mine.fill_(rank + 1 + k)
                    dist.all_gather(list(t.split(part)[:n]), mine)
                else:
                    dist.broadcast(t, src=root)
                self.ctx.device.synchronize()
                total += time.perf_counter() - t0
        if op == "all_reduce":
            ok = bool((t == n * (n + 1) / 2 + n * k).all())
        elif op == "all_gather":
            want = torch.arange(1, n + 1, dtype=t.dtype, device=t.device).add_(k)
            ok = bool((t[: part * n].view(n, part) == want.view(n, 1)).all())
        else:
            ok = bool((t == root + 1 + k).all())
        return total / self.iters, ok

    def step(self, step: int) -> dict[str, Any]:
        report: dict[str, dict[str, dict[str, float]]] = {}
        with self.ctx.data(step):
            pass  # the buffers are filled in place: only an injected slow loader waits here
        for op in OPS:
            report[op] = {}
            for size in self.sizes:
                with self.ctx.phase("comm"):
                    latency, ok = self._run(op, size, step)
                algbw = size / latency / 1e9
                report[op][str(size)] = {
                    "latency_s": latency,
                    "algbw_gbps": algbw,
                    "busbw_gbps": algbw * bus_factor(op, self.n),
                }
                self.ctx.hb.numeric_checks = (self.ctx.hb.numeric_checks or 0) + 1
                if not ok:
                    self.ctx.hb.sdc_mismatches += 1
                    self.ctx.hb.event("sdc_mismatch", step,
                                      f"{op} of {size} bytes returned a wrong result",
                                      check="collective", error=None, tolerance=0.0, suspect_rank=None,
                                      classification=None)
        return {"collective": report}


def main(argv: list[str] | None = None) -> int:
    from soak.workloads.common import main as common_main

    return common_main("collective", __doc__.splitlines()[0], CollectiveWorkload, CKPT_EVERY, argv)


if __name__ == "__main__":
    run_cli("collective", __doc__.splitlines()[0], CollectiveWorkload, CKPT_EVERY)
