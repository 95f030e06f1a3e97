"""The pairwise link test between nodes, inside the running training job.

A slow link or node hides in a job-wide all-reduce (everyone waits for it); testing the nodes
two by two names it, as nccl-tests users and GKE's health scanner do. Every rank of the job
enters :meth:`LinkTester.run` at the same step (before the first training step, then every
``--link-test-every-s``); one rank per node (its lowest global rank) takes part. The pairs are
every pair of nodes up to 16 nodes, else each node with its ring neighbours, scheduled in
rounds of disjoint pairs (a round-robin tournament) so a round runs at once and no node is in
two transfers. Each pair all-reduces ``--link-test-bytes`` ``iters`` times (the median time
counts) in its own process group (made once, by every rank, in the same order, as
``new_group`` requires); busbw is nccl-tests' all-reduce bus bandwidth, which for two ranks equals algbw = S / t. The
time of a pair is the slower end's, so a figure is never better than what both ends saw.

Rank 0 gathers the pairs and writes one ``link_test`` heartbeat event; the daemon stores it
(``detail.pairs``: node names, busbw, size) and the judge reads it (``soak.analysis.links``).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

MAX_ALL_PAIRS_NODES = 16
KiB, MiB = 2**10, 2**20
DEFAULT_BYTES = {"tiny": 1 * MiB, "small": 16 * MiB, "medium": 256 * MiB, "large": 1024 * MiB}
ITERS = 10
NODE_NAME_ENV, NODE_RANK_ENV = "SOAK_NODE_NAME", "SOAK_NODE_RANK"


def pairs_of(n: int) -> list[tuple[int, int]]:
    """Every pair of nodes for n <= 16, else each node with its ring neighbour."""
    if n < 2:
        return []
    if n <= MAX_ALL_PAIRS_NODES:
        return [(a, b) for a in range(n) for b in range(a + 1, n)]
    return sorted({(min(i, (i + 1) % n), max(i, (i + 1) % n)) for i in range(n)})


def rounds_of(n: int) -> list[list[tuple[int, int]]]:
    """The pairs in rounds of disjoint pairs.

    All pairs: the circle method (n - 1 rounds for even n, n for odd), every round as full
    as it can be. Ring neighbours: even edges, odd edges, and the closing edge of an odd ring.
    """
    if n < 2:
        return []
    if n > MAX_ALL_PAIRS_NODES:
        out: list[list[tuple[int, int]]] = [[], [], []]
        for i in range(n):  # edge i joins i and i + 1 (the last closes the ring)
            j = (i + 1) % n
            out[2 if (i == n - 1 and n % 2) else i % 2].append((min(i, j), max(i, j)))
        return [sorted(r) for r in out if r]
    m = n + (n % 2)  # a phantom node makes an odd count even; its partner sits out
    ring = list(range(m))
    rounds = []
    for _ in range(m - 1):
        pairs = [(ring[i], ring[m - 1 - i]) for i in range(m // 2)]
        rounds.append(sorted((min(a, b), max(a, b)) for a, b in pairs if a < n and b < n))
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


class LinkTester:
    """One pairwise link test per call of :meth:`run`; every rank must call it together."""

    def __init__(self, ctx: Any, size_bytes: int, every_s: float = 0.0, iters: int = ITERS,
                 delay: Callable[[float], float] | None = None) -> None:
        import torch.distributed as dist

        self.ctx = ctx
        self.iters = max(1, int(iters))
        self.every_s = float(every_s)  # 0: at the start only
        self.next_at = math.inf
        self.delay = delay  # slow-link injection: extra seconds for a transfer that took t
        me = os.environ.get(NODE_NAME_ENV) or f"node{os.environ.get('GROUP_RANK', '0')}"
        node_rank = os.environ.get(NODE_RANK_ENV, "")
        names: list[Any] = [None] * ctx.world_size
        with ctx.watchdog.guard("link_test_setup", 0):
            dist.all_gather_object(names, (me, node_rank))
        # a node is the set of ranks with its name; its lowest rank speaks for it. The nodes
        # in soak's node-rank order (torchrun numbers the processes in rendezvous order)
        self.leader: dict[str, int] = {}
        rank_of: dict[str, str] = {}
        for r, (name, nrank) in enumerate(names):
            if name not in self.leader:
                self.leader[name] = r
                rank_of[name] = nrank
        self.nodes: list[str] = sorted(self.leader, key=lambda n: (int(rank_of[n]) if rank_of[n].isdigit() else 1 << 30,
                                                                   self.leader[n]))
        # the slow-link faults of the job, by the node they slow (every rank has every spec)
        self.injected = {name: s.raw for s in getattr(ctx, "specs", ()) if s.kind == "slow-link"
                         for name, nrank in rank_of.items() if nrank == str(s.node_rank)}
        self.node = me
        self.rounds = rounds_of(len(self.nodes))
        self.groups: dict[tuple[int, int], Any] = {}
        for rnd in self.rounds:
            for a, b in rnd:
                ranks = sorted((self.leader[self.nodes[a]], self.leader[self.nodes[b]]))
                self.groups[(a, b)] = dist.new_group(ranks)  # every rank, same order
        unit = 4 * 2  # float32 elements, two ranks
        self.size = max(unit, int(size_bytes) // unit * unit)
        self._buf: Any = None

    @property
    def enabled(self) -> bool:
        return len(self.nodes) >= 2

    def due(self, now_monotonic: float) -> bool:
        """This rank's view of whether the next planned test is due (ranks then agree)."""
        return now_monotonic >= self.next_at

    def _transfer(self, group: Any) -> float:
        """Seconds of one all-reduce of the buffer in ``group``: the median of ``iters`` (after
        one warm-up), so that a rank descheduled once does not make a healthy link look slow."""
        import torch
        import torch.distributed as dist

        if self._buf is None:
            self._buf = torch.ones(self.size // 4, dtype=torch.float32, device=self.ctx.device.torch_device())
        dist.all_reduce(self._buf, group=group)
        self.ctx.device.synchronize()
        times = []
        for _ in range(self.iters):
            t0 = time.perf_counter()
            dist.all_reduce(self._buf, group=group)
            self.ctx.device.synchronize()
            took = time.perf_counter() - t0
            if self.delay is not None:
                extra = self.delay(took)
                if extra > 0:
                    time.sleep(extra)  # this node's transfers really take longer
                    took += extra
            times.append(took)
        self._buf.fill_(1.0)  # keep the values small: 2^iters would overflow in a long run
        return statistics.median(times)

    def run(self, step: int, when: str) -> list[dict[str, Any]]:
        """Run every round; rank 0 returns the pairs (and writes the event), others []."""
        import torch.distributed as dist

        if not self.enabled:
            return []
        if self.every_s > 0:
            self.next_at = time.monotonic() + self.every_s
        mine: list[tuple[int, int, float]] = []
        me = self.ctx.rank
        t_start = time.time()
        with self.ctx.watchdog.guard("link_test", step):
            for rnd in self.rounds:
                for a, b in rnd:
                    if me in (self.leader[self.nodes[a]], self.leader[self.nodes[b]]):
                        mine.append((a, b, self._transfer(self.groups[(a, b)])))
                dist.barrier()  # rounds do not overlap: one pair's traffic never meets the next's
            gathered: list[Any] = [None] * self.ctx.world_size
            dist.all_gather_object(gathered, mine)
        self._buf = None  # up to 1 GiB: the training gets it back between tests
        if me != 0:
            return []
        slowest: dict[tuple[int, int], float] = {}
        for part in gathered:
            for a, b, t in part or []:
                slowest[(a, b)] = max(t, slowest.get((a, b), 0.0))
        pairs = [{"a": self.nodes[a], "b": self.nodes[b], "size_bytes": self.size, "time_s": t,
                  "busbw_gbps": self.size / t / 1e9 if t > 0 else None}
                 for (a, b), t in sorted(slowest.items())]
        detail = {"when": when, "op": "all_reduce", "iters": self.iters, "nodes": list(self.nodes),
                  "backend": self.ctx.device.backend, "device_name": _device_name(self.ctx.device),
                  "ts_start": t_start, "pairs": pairs, "injected": dict(self.injected)}
        worst = min((p for p in pairs if p["busbw_gbps"]), key=lambda p: p["busbw_gbps"], default=None)
        msg = (f"link test ({when}): {len(pairs)} pair(s) of {len(self.nodes)} nodes, "
               f"{self.size / MiB:g} MiB all-reduce" + (f"; lowest {worst['a']}-{worst['b']} "
                                                         f"{worst['busbw_gbps']:.2f} GB/s" if worst else ""))
        # ``seconds``: the time the job did not train, which the reliability figures count apart
        self.ctx.hb.event("link_test", step, msg, link_test=detail, seconds=time.time() - t_start)
        return pairs


def _device_name(device: Any) -> str | None:
    """The accelerator's model name (``Ascend910B2``, ``NVIDIA H100 80GB HBM3``); None on CPU."""
    try:
        if device.backend == "cuda":
            import torch

            return str(torch.cuda.get_device_name())
        if device.backend == "npu":
            import torch
            import torch_npu  # noqa: F401  (registers torch.npu)

            return str(torch.npu.get_device_name())  # type: ignore[attr-defined]
    except Exception:  # a name is a nicety: never fail the test for it
        return None
    return None
