"""``lm``: a small decoder-only transformer trained on synthetic tokens (nanoGPT-style).

Real training, not a kernel loop: forward, backward, DDP gradient all-reduce across ranks,
AdamW, bf16 autocast where the device supports it (fp32 on CPU). The tokens follow a
noisy affine recurrence, so the loss falls as the model learns and a diverging or NaN
loss means something is wrong.

Run: ``soak workload lm --nproc-per-node N --run-dir DIR`` (its torchrun: ``--print``).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

from soak.workloads.common import Context, run_cli


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

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "config": asdict(self.cfg), "n_params": self.n_params}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])

    def step(self, step: int) -> dict[str, Any]:
        import torch

        ctx = self.ctx
        with ctx.data(step):
            x, y = synthetic_batch(self.cfg, ctx.args.seed, step, ctx.rank)
            x, y = x.to(self.dev, non_blocking=True), y.to(self.dev, non_blocking=True)
        t0 = time.perf_counter()
        with ctx.phase("forward"), torch.autocast(ctx.device.backend, dtype=self.amp, enabled=self.amp is not None):
            loss = self.ddp(x, y)
        # DDP all-reduces gradients during backward: that is the collective to guard.
        with ctx.phase("backward"), ctx.collective("ddp_all_reduce", step):
            loss.backward()
        with ctx.phase("optimizer"):
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        value = float(loss.detach())  # .item() synchronizes the device, so the timing is real
        dt = time.perf_counter() - t0
        tokens = self.cfg.batch_size * self.cfg.seq_len
        return {"loss": value if math.isfinite(value) else None, "tokens_per_s": tokens / dt}


def main(argv: list[str] | None = None) -> int:
    from soak.workloads.common import main as common_main

    return common_main("lm", __doc__.splitlines()[0], LMWorkload, CKPT_EVERY, argv)


if __name__ == "__main__":
    run_cli("lm", __doc__.splitlines()[0], LMWorkload, CKPT_EVERY)
