"""``gemm``: sustained matrix-multiply burn with a silent-data-corruption check.

Each step runs ``iters`` products of two n x n matrices on the device and reports TFLOP/s.
Every ``--sdc-every`` steps a fixed-seed product is recomputed and compared

* to a CPU float64 reference of the same (dtype-rounded) inputs, within a dtype tolerance, and
* to the device's own first result (self-consistency, as gpu-burn does),

and a failed check is an ``sdc_mismatch`` heartbeat event (``soak.analysis.numerics``): its
``check`` the first comparison that failed (``gemm_cpu``, else ``gemm_first``), its error and
tolerance, this rank as the suspect (the product ran on its own chip, against a reference that
did not). The product is then computed once more: a wrong result again is this chip's
(``classification`` ``chip``), a right one a transient. ``--inject corrupt:AT[,RANK]`` perturbs
the result from step AT on, on purpose (its rerun too: a faulty chip), so the check can be seen
to work.
Every check, passed or not, counts in the step lines' ``numeric_checks``.

Run: ``soak workload gemm --nproc-per-node N --run-dir DIR`` (its torchrun: ``--print``).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

from soak.workloads.common import Context, run_cli


@dataclass(frozen=True)
class GemmConfig:
    n: int  # matrix side of the burn
    iters: int  # products per step
    check_n: int  # side of the SDC check product (CPU reference cost grows as n^3)


PRESETS = {
    "tiny": GemmConfig(n=128, iters=4, check_n=64),
    "small": GemmConfig(n=1024, iters=8, check_n=512),
    "medium": GemmConfig(n=4096, iters=16, check_n=1024),
    "large": GemmConfig(n=8192, iters=32, check_n=2048),
}
CKPT_EVERY = {"tiny": 2000, "small": 500, "medium": 1000, "large": 1000}
# max |device - reference| / max |reference|. bf16/fp16 outputs carry 8/11 mantissa bits;
# fp32 allows for reduced-precision internal modes (TF32/HF32) a vendor library may pick.
REF_TOL = {"bfloat16": 2e-2, "float16": 5e-3, "float32": 1e-3, "float64": 1e-10}
# self-consistency: the same product on the same device, as gpu-burn's 1e-3 for floats
SELF_TOL = 1e-3


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sdc-every", type=int, default=10,
                   help="run the silent-data-corruption check every N steps (default: 10)")


class GemmWorkload:
    def __init__(self, ctx: Context) -> None:
        import torch

        self.ctx = ctx
        self.cfg = PRESETS[ctx.args.size]
        self.dev = ctx.device.torch_device()
        self.dtype = ctx.device.autocast_dtype() or torch.float32
        if ctx.device.backend == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False  # the check compares true fp32
        g = torch.Generator().manual_seed(ctx.args.seed + ctx.rank)
        n = self.cfg.n
        self.a = (torch.rand(n, n, generator=g) * 2 - 1).to(self.dev, self.dtype)
        self.b = (torch.rand(n, n, generator=g) * 2 - 1).to(self.dev, self.dtype)
        # the check inputs are fixed by the seed alone: the same on every rank and restart
        gc = torch.Generator().manual_seed(ctx.args.seed)
        m = self.cfg.check_n
        ca = (torch.rand(m, m, generator=gc) * 2 - 1).to(self.dtype)
        cb = (torch.rand(m, m, generator=gc) * 2 - 1).to(self.dtype)
        self.ref = ca.double() @ cb.double()  # exact-ish product of the rounded inputs
        self.ca, self.cb = ca.to(self.dev), cb.to(self.dev)
        self.first: Any = None  # the device's first check result (kept across restarts)
        self.sdc_every = max(1, int(ctx.args.sdc_every))
        ctx.hb.numeric_checks = 0

    def state_dict(self) -> dict[str, Any]:
        return {"first": self.first, "sdc_mismatches": self.ctx.hb.sdc_mismatches,
                "numeric_checks": self.ctx.hb.numeric_checks, "dtype": str(self.dtype), "n": self.cfg.n}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.first = state.get("first")
        self.ctx.hb.sdc_mismatches = int(state.get("sdc_mismatches", 0))
        self.ctx.hb.numeric_checks = int(state.get("numeric_checks") or 0)

    def _product(self, step: int, say: bool) -> Any:
        c = (self.ca @ self.cb).float().cpu().double()
        if self.ctx.injector.corrupting(step):  # a faulty chip stays faulty from step AT on
            c[0, 0] += 1000.0  # what a flipped high-order bit looks like
            if say and self.ctx.injector.corrupt_at(step):
                self.ctx.hb.event("inject", step, "corrupt: perturbed the check result at [0, 0]",
                                  inject={"spec": "corrupt", "action": "corrupt"})
        return c

    def _compare(self, c: Any) -> list[tuple[str, float, float, str]]:
        """The comparisons that failed: (check, relative error, tolerance, what it says)."""
        scale = float(self.ref.abs().max()) or 1.0
        err_ref = float((c - self.ref).abs().max()) / scale
        tol = REF_TOL.get(str(self.dtype).removeprefix("torch."), 1e-3)
        problems = []
        if err_ref > tol:
            problems.append(("gemm_cpu", err_ref, tol, f"vs CPU reference: max rel error {err_ref:.3g} > {tol:g}"))
        if self.first is not None:
            err_self = float((c - self.first).abs().max()) / scale
            if err_self > SELF_TOL:
                problems.append(("gemm_first", err_self, SELF_TOL,
                                 f"vs first device result: max rel error {err_self:.3g} > {SELF_TOL:g}"))
        return problems

    def check(self, step: int) -> None:
        c = self._product(step, say=True)
        problems = self._compare(c)
        self.ctx.hb.numeric_checks = (self.ctx.hb.numeric_checks or 0) + 1
        if self.first is None and not problems:
            self.first = c.clone()
        if problems:
            # the same product once more on the same chip: wrong again is the chip's, right a transient
            again = self._compare(self._product(step, say=False))
            self.ctx.hb.numeric_checks += 1
            self.ctx.hb.sdc_mismatches += 1
            i = int((c - self.ref).abs().argmax())
            where = f"worst element [{i // c.shape[1]}, {i % c.shape[1]}]"
            check, err, tol, _ = problems[0]
            cls = "chip" if again else "transient"
            self.ctx.hb.event("sdc_mismatch", step,
                              "; ".join(p[3] for p in problems) + f"; {where}; rerun: "
                              + ("wrong again" if again else "right"),
                              check=check, error=err, tolerance=tol, suspect_rank=self.ctx.rank, classification=cls)

    def step(self, step: int) -> dict[str, Any]:
        with self.ctx.data(step):
            pass  # the inputs stay on the device: only an injected slow loader waits here
        t0 = time.perf_counter()
        c = self.a
        with self.ctx.phase("forward"):
            for _ in range(self.cfg.iters):
                c = self.a @ self.b
            self.ctx.device.synchronize()
        dt = time.perf_counter() - t0
        del c
        if step % self.sdc_every == 0 or self.ctx.injector.corrupt_at(step):
            with self.ctx.phase("forward"):
                self.check(step)
        return {"tflops": 2.0 * self.cfg.n**3 * self.cfg.iters / dt / 1e12}


def main(argv: list[str] | None = None) -> int:
    from soak.workloads.common import main as common_main

    return common_main("gemm", __doc__.splitlines()[0], GemmWorkload, CKPT_EVERY, argv, add_args)


if __name__ == "__main__":
    run_cli("gemm", __doc__.splitlines()[0], GemmWorkload, CKPT_EVERY, add_args)
