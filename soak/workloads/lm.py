"""``lm``: a small decoder-only transformer trained on synthetic tokens (nanoGPT-style).

Real training, not a kernel loop: forward, backward, DDP gradient all-reduce across ranks,
AdamW, bf16 autocast where the device supports it (fp32 on CPU). The tokens follow a
noisy affine recurrence, so the loss falls as the model learns and a diverging or NaN
loss means something is wrong.

Every step the loss and the gradient norm of each rank are checked, and every
``--check-every`` steps each chip proves it computed right (soak.workloads.numerics): a
cross-chip recompute of the loss and a replica checksum. The first ``--align-steps`` losses
are compared with a CPU float64 training of the same seed (precision alignment).

Run: ``soak workload lm --nproc-per-node N --run-dir DIR`` (its torchrun: ``--print``).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

from soak.workloads.common import Context, run_cli
from soak.workloads.numerics import (
    DEFAULT_CHECK_EVERY,
    DEFAULT_SPIKE_MULTIPLE,
    Numerics,
    Options,
    alignment_tolerance,
    param_bits,
    rel_diff,
)


@dataclass(frozen=True)
class LMConfig:
    vocab_size: int
    seq_len: int
    n_layer: int
    n_head: int
    d_model: int
    batch_size: int  # sequences per rank per step
    lr: float = 3e-4


# Sizes: tiny runs well under a second per step on one CPU core; large (~1.3 B parameters,
# batch 6 x 2048 in bf16 with fp32 weights, grads and AdamW state) is sized to fill most of a
# 64 GB HBM: ~26 GB of parameter state and DDP buckets + ~20 GB of activations + ~4 GB of
# logits, estimated, not yet measured on a chip.
PRESETS: dict[str, LMConfig] = {
    "tiny": LMConfig(vocab_size=256, seq_len=64, n_layer=2, n_head=2, d_model=64, batch_size=8,
                     lr=3e-3),
    "small": LMConfig(vocab_size=8192, seq_len=256, n_layer=6, n_head=8, d_model=512, batch_size=16),
    "medium": LMConfig(vocab_size=32000, seq_len=1024, n_layer=12, n_head=12, d_model=768,
                       batch_size=16),
    "large": LMConfig(vocab_size=32000, seq_len=2048, n_layer=24, n_head=16, d_model=2048,
                      batch_size=6, lr=1.5e-4),
}
CKPT_EVERY = {"tiny": 200, "small": 200, "medium": 500, "large": 500}
# Steps of precision alignment by default: the CPU float64 reference trains the whole job's
# batch, which takes seconds for tiny and small and far too long for the big presets.
ALIGN_STEPS = {"tiny": 10, "small": 10, "medium": 0, "large": 0}
# ``--inject corrupt``: the faulty chip's output logits come out this many times too large
# (every product of the head a little wrong: the loss moves by a few %, no spike, no NaN).
CORRUPT_SCALE = 1.0625


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check-every", type=int, default=DEFAULT_CHECK_EVERY,
                   help="cross-chip recompute and replica check every N steps; 0 = none "
                        f"(default: {DEFAULT_CHECK_EVERY})")
    p.add_argument("--spike-multiple", type=float, default=DEFAULT_SPIKE_MULTIPLE,
                   help="a loss this many times the median of the rank's last 100 is a spike "
                        f"(default: {DEFAULT_SPIKE_MULTIPLE:g})")
    p.add_argument("--align-steps", type=int, default=None,
                   help="compare the first N losses with a CPU float64 reference; 0 = none "
                        "(default: 10 for tiny and small, 0 for medium and large)")


def build_model(cfg: LMConfig) -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(cfg.d_model)
            self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
            self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
            self.ln2 = nn.LayerNorm(cfg.d_model)
            self.mlp = nn.Sequential(
                nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False),
                nn.GELU(),
                nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False),
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            # (b, heads, t, head_dim) for fused attention
            q, k, v = (z.view(b, t, cfg.n_head, c // cfg.n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
            self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.n_layer))
            self.ln_f = nn.LayerNorm(cfg.d_model)
            self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
            self.head.weight = self.tok.weight  # weight tying, as in GPT-2
            self.apply(self._init)

        @staticmethod
        def _init(m: nn.Module) -> None:
            if isinstance(m, nn.Linear | nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

        def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.tok(idx) + self.pos(pos)
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return GPT()


def synthetic_batch(cfg: LMConfig, seed: int, step: int, rank: int) -> tuple[Any, Any]:
    """Tokens x[t+1] = (a*x[t] + b) mod V with 10 % noise; the same for (seed, step, rank)
    whatever happened before, so a resumed run sees exactly the batches it would have."""
    import torch

    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1_009 + rank)
    v, n = cfg.vocab_size, cfg.seq_len + 1
    x = torch.empty(cfg.batch_size, n, dtype=torch.long)
    x[:, 0] = torch.randint(0, v, (cfg.batch_size,), generator=g)
    for t in range(1, n):
        x[:, t] = (5 * x[:, t - 1] + 3) % v
    noise = torch.rand(cfg.batch_size, n, generator=g) < 0.1
    x[noise] = torch.randint(0, v, (int(noise.sum()),), generator=g)
    return x[:, :-1], x[:, 1:]


class LMWorkload:
    def __init__(self, ctx: Context) -> None:
        import torch

        self.ctx = ctx
        self.cfg = PRESETS[ctx.args.size]
        self.dev = ctx.device.torch_device()
        self.model = build_model(self.cfg).to(self.dev)
        self.ddp = self.model
        if ctx.distributed:
            from torch.nn.parallel import DistributedDataParallel as DDP

            ids = None if ctx.device.backend == "cpu" else [ctx.local_rank]
            self.ddp = DDP(self.model, device_ids=ids)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=self.cfg.lr, weight_decay=0.1)
        self.amp = ctx.device.autocast_dtype()
        self.n_params = sum(p.numel() for p in self.model.parameters())
        args = ctx.args
        ctx.hb.numeric_checks = 0  # lm checks its numbers: its step lines state how many checks ran
        self.numerics = Numerics(ctx, self, Options(check_every=args.check_every, spike_multiple=args.spike_multiple))
        self.align_steps = ALIGN_STEPS[args.size] if args.align_steps is None else args.align_steps
        self.numerics.gather_until = self.align_steps  # the job's mean loss of those steps
        self._aligned: list[float] | None = None  # mean loss of steps 1.. of a run begun at step 0
        self._corrupt = False  # this rank's device computes wrong results (--inject corrupt)
        self.model.head.register_forward_hook(lambda _m, _i, out: out * CORRUPT_SCALE if self._corrupt else None)

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "config": asdict(self.cfg), "n_params": self.n_params,
                "numeric_checks": self.ctx.hb.numeric_checks, "sdc_mismatches": self.ctx.hb.sdc_mismatches}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        # rank 0's count of checks: the checkpoint's writer (every rank runs one of each per period)
        self.ctx.hb.numeric_checks = int(state.get("numeric_checks", 0))
        if self.ctx.rank == 0:  # what it found is its own
            self.ctx.hb.sdc_mismatches = int(state.get("sdc_mismatches", 0))

    # -- what the numerical checks need (soak.workloads.numerics.Trainer) --------------------

    def parameters(self) -> Any:
        return self.model.parameters()

    def _batch(self, step: int, rank: int) -> tuple[Any, Any]:
        x, y = synthetic_batch(self.cfg, self.ctx.args.seed, step, rank)
        return x.to(self.dev, non_blocking=True), y.to(self.dev, non_blocking=True)

    def _forward(self, module: Any, x: Any, y: Any) -> Any:
        import torch

        with torch.autocast(self.ctx.device.backend, dtype=self.amp, enabled=self.amp is not None):
            return module(x, y)

    def device_loss(self, step: int, rank: int) -> float:
        """Rank ``rank``'s loss of ``step`` computed on this chip with the current weights. Autograd
        stays on, as in training, so the same kernels run (the graph is dropped unused)."""
        x, y = self._batch(step, rank)
        return float(self._forward(self.model, x, y).detach())

    def reference_loss(self, step: int, rank: int) -> float:
        """The same loss computed on the CPU in float64 (a fresh copy of the weights: no device
        fault reaches it)."""
        import torch

        ref = self._cpu_model()
        ref.load_state_dict({k: v.detach().cpu() for k, v in self.model.state_dict().items()})
        x, y = synthetic_batch(self.cfg, self.ctx.args.seed, step, rank)
        with torch.no_grad():
            return float(ref(x, y))

    def _cpu_model(self) -> Any:
        import torch

        with torch.random.fork_rng(devices=[]):  # training's random state stays as it was
            torch.manual_seed(self.ctx.args.seed)
            return build_model(self.cfg).double()

    def snapshot(self) -> dict[str, Any]:
        return {"model": _to_cpu(self.model.state_dict()), "optimizer": _to_cpu(self.opt.state_dict())}

    def restore(self, snap: dict[str, Any]) -> None:
        self.model.load_state_dict(snap["model"])
        self.opt.load_state_dict(snap["optimizer"])

    def train(self, step: int, apply: bool) -> float:
        """One plain training step (a replay), its update applied or withheld as the first time;
        no checks, no injected upset; a faulty device stays faulty. This rank's loss."""
        import torch

        self._corrupt = self.ctx.injector.corrupting(step)
        x, y = self._batch(step, self.ctx.rank)
        loss = self._forward(self.ddp, x, y)
        with self.ctx.collective("ddp_all_reduce", step):
            loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        if apply:
            self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    # -- the training step --------------------------------------------------------------------

    def _inject(self, step: int) -> None:
        import torch

        inj, hb = self.ctx.injector, self.ctx.hb
        self._corrupt = inj.corrupting(step)
        for s in inj.of("corrupt"):
            if s.at_step == step:
                hb.event("inject", step, f"{s.raw}: this rank's device computes its logits {CORRUPT_SCALE:g} x too "
                         "large from now on", inject={"spec": s.raw, "action": "corrupt_device"})
        for s in inj.once_at("bitflip", step):
            name, p = next(iter(self.model.named_parameters()))
            bits = param_bits(p)
            i, bit = bits.numel() // 2, p.element_size() * 8 - 10  # the mantissa's top bit
            with torch.no_grad():
                before = float(p.reshape(-1)[i])
                bits[i] ^= 1 << bit
                after = float(p.reshape(-1)[i])
            hb.event("inject", step, f"{s.raw}: flipped bit {bit} of {name}[{i}] ({before:.6g} -> {after:.6g})",
                     inject={"spec": s.raw, "action": "bitflip", "parameter": name, "index": i, "bit": bit})

    def step(self, step: int) -> dict[str, Any]:
        import torch

        ctx = self.ctx
        with ctx.data(step):
            x, y = self._batch(step, ctx.rank)
        self._inject(step)
        self.numerics.before_forward(step)  # replica check (a check step only; it may replay steps)
        self._corrupt = ctx.injector.corrupting(step)
        t0 = time.perf_counter()
        with ctx.phase("forward"):
            loss = self._forward(self.ddp, x, y)
        for s in ctx.injector.once_at("nan", step):
            loss = loss * float("nan")
            ctx.hb.event("inject", step, f"{s.raw}: this rank's loss is NaN", inject={"spec": s.raw, "action": "nan"})
        # DDP all-reduces gradients during backward: that is the collective to guard.
        with ctx.phase("backward"), ctx.collective("ddp_all_reduce", step):
            loss.backward()
        with ctx.phase("optimizer"):
            norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0))
            value = float(loss.detach())  # .item() synchronizes the device, so the timing is real
            if self.numerics.after_backward(step, value, norm):
                self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t0
        self._align(step)
        tokens = self.cfg.batch_size * self.cfg.seq_len
        # a non-finite loss is reported by its nonfinite event: the step line carries null
        return {"loss": value if math.isfinite(value) else None,
                "grad_norm": norm if math.isfinite(norm) else None, "tokens_per_s": tokens / dt}

    def _align(self, step: int) -> None:
        """Precision alignment: the mean loss of the first ``align_steps`` steps against a CPU
        float64 training of the same seed and batches (rank 0 computes it and writes the event)."""
        if self.align_steps <= 0 or step > self.align_steps:
            return
        if step == 1:
            self._aligned = []
        if self._aligned is None:  # resumed past step 0: nothing to align
            return
        losses = self.numerics.last_losses
        self._aligned.append(sum(losses) / len(losses))
        if step < self.align_steps or self.ctx.rank != 0:
            return
        ref = self.reference_losses(self.align_steps)
        dev = self._aligned
        diff = max(rel_diff(a, b) for a, b in zip(dev, ref, strict=True))
        tol = alignment_tolerance(self.amp or "float32")
        verdict = "within" if diff <= tol else "beyond"
        self.ctx.hb.event("alignment", step,
                          f"precision alignment: first {step} losses vs CPU float64 reference, max rel diff "
                          f"{diff:.3g} {verdict} tolerance {tol:.3g}",
                          steps=step, max_rel_diff=diff, tolerance=tol, device_losses=dev, reference_losses=ref)

    def reference_losses(self, steps: int) -> list[float]:
        """The job's mean loss of steps 1..``steps`` trained on the CPU in float64 from the same
        initial weights (the seed) and the same batches of every rank."""
        import torch

        ref = self._cpu_model()
        opt = torch.optim.AdamW(ref.parameters(), lr=self.cfg.lr, weight_decay=0.1)
        out = []
        for s in range(1, steps + 1):
            # DDP averages the ranks' gradients: the gradient of the mean of their losses
            loss = sum(ref(*synthetic_batch(self.cfg, self.ctx.args.seed, s, r))
                       for r in range(self.ctx.world_size)) / self.ctx.world_size
            loss.backward()
            torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            out.append(float(loss.detach()))
        return out


def _to_cpu(obj: Any) -> Any:
    """A copy of a state dict on the host (tensors copied, containers rebuilt)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def main(argv: list[str] | None = None) -> int:
    from soak.workloads.common import main as common_main

    return common_main("lm", __doc__.splitlines()[0], LMWorkload, CKPT_EVERY, argv, add_args)


if __name__ == "__main__":
    run_cli("lm", __doc__.splitlines()[0], LMWorkload, CKPT_EVERY, add_args)
