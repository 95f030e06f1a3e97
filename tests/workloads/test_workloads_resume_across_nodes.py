"""The step a job formed again across nodes resumes from: the latest checkpoint any rank's
folder holds. A cluster run gives each node its own folder and only rank 0 writes checkpoints;
the rendezvous may rank the nodes the other way round the next time, putting rank 0 where no
checkpoint is (seen on a real two-node run: the job started again from step 0)."""

from __future__ import annotations

import contextlib
import socket
import types
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp

from soak.workloads.common import Checkpointer, _resume_state, _resume_step


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, port: int, folders: list[str], out: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        ctx = types.SimpleNamespace(distributed=True, rank=rank, world_size=2,
                                    watchdog=types.SimpleNamespace(guard=lambda op, step: contextlib.nullcontext()))
        ckpt = Checkpointer(Path(folders[rank]), "lm")
        step, holders = _resume_step(ctx, ckpt)
        state = _resume_state(ctx, ckpt, step, holders)
        Path(out, f"rank{rank}").write_text(f"{step} {holders} {state['payload']}")
    finally:
        dist.destroy_process_group()


def test_rank_0_without_a_checkpoint_resumes_from_the_latest_one_another_node_holds(tmp_path: Path) -> None:
    folders = [tmp_path / "node-a", tmp_path / "node-b"]
    # rank 0's node saved step 200 in an earlier attempt; rank 1's node saved 200 and 400 when
    # it held rank 0
    Checkpointer(folders[0], "lm").save(200, {"step": 200, "payload": "from a"})
    for step in (200, 400):
        Checkpointer(folders[1], "lm").save(step, {"step": step, "payload": f"{step} from b"})
    mp.spawn(_rank, args=(_free_port(), [str(f) for f in folders], str(tmp_path)), nprocs=2, join=True)
    got = [(tmp_path / f"rank{r}").read_text() for r in (0, 1)]
    assert got == ["400 [False, True] 400 from b", "400 [False, True] 400 from b"]


def test_a_single_process_resumes_from_its_own_latest_checkpoint(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, "lm")
    ctx = types.SimpleNamespace(distributed=False, rank=0, world_size=1)
    assert _resume_step(ctx, ckpt) == (0, [True])
    ckpt.save(5, {"step": 5, "payload": "five"})
    assert _resume_step(ctx, ckpt) == (5, [True])
    assert _resume_state(ctx, ckpt, 5, [True])["payload"] == "five"
