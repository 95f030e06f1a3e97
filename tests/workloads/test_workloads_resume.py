"""Each workload, 2 gloo ranks under torchrun: heartbeats, checkpoints, SIGKILL, resume."""

from __future__ import annotations

import pytest
from wl_helpers import read_heartbeats

from soak.workloads.common import HEARTBEAT_KEYS, Checkpointer


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["lm", "gemm", "collective"])
def test_killed_mid_run_resumes_at_last_checkpoint(launcher, workload):
    run = launcher.run_dir
    proc = launcher.start(workload, steps=100_000, extra=("--ckpt-every", "5"))

    def checkpointed() -> bool:
        return any(r["event"] == "checkpoint" and r["step"] >= 10
                   for r in read_heartbeats(run, workload))

    launcher.wait_for(checkpointed)
    launcher.kill(proc)
    saved = Checkpointer(run, workload).steps()
    # keep=3, plus the newest when the kill fell between its rename and the pruning
    assert saved and saved[-1] >= 10 and len(saved) <= 4
    last = saved[-1]

    assert launcher.run(workload, steps=last + 7, extra=("--ckpt-every", "5")) == 0, launcher.log()
    for rank in (0, 1):
        lines = read_heartbeats(run, workload, rank)
        assert all(tuple(r) == HEARTBEAT_KEYS for r in lines)
        assert all(r["world_size"] == 2 and r["device"] == "cpu" for r in lines)
        resume = [i for i, r in enumerate(lines) if r["event"] == "resume"]
        assert len(resume) == 1 and lines[resume[0]]["step"] == last
        after = [r for r in lines[resume[0]:] if r["event"] == "step"]
        assert after[0]["step"] == last + 1  # the first step after a restart is always written
        assert all(a["step"] < b["step"] for a, b in zip(after, after[1:], strict=False))
        assert lines[-1]["event"] == "exit" and lines[-1]["step"] == last + 7
    steps = Checkpointer(run, workload).steps()
    assert steps[-1] == last + 7 and len(steps) <= 3
    leftovers = [p.name for p in Checkpointer(run, workload).dir.iterdir() if p.name.startswith(".")]
    assert leftovers == []  # a temp file of the killed attempt is cleaned on start
    if workload == "lm":
        losses = [r["loss"] for r in read_heartbeats(run, "lm") if r["event"] == "step"]
        assert losses[-1] < losses[0]  # it learns the synthetic sequence


def test_checkpoint_is_atomic_and_keeps_last_k(tmp_path):
    ck = Checkpointer(tmp_path, "lm", keep=2)
    for step in (5, 10, 15):
        ck.save(step, {"step": step, "payload": list(range(step))})
    assert ck.steps() == [10, 15]
    assert ck.load(15)["payload"] == list(range(15))
    assert sorted(p.name for p in ck.dir.iterdir()) == ["step_10.pt", "step_15.pt"]


@pytest.mark.slow
def test_duration_stop_is_agreed_by_all_ranks(launcher):
    # each rank's own clock runs out at a different step; stopping alone would leave the
    # other rank waiting in a DDP all-reduce that never completes
    assert launcher.run("lm", duration_s=2.0, extra=("--ckpt-every", "0")) == 0, launcher.log()
    ends = [read_heartbeats(launcher.run_dir, "lm", r)[-1] for r in (0, 1)]
    assert [e["event"] for e in ends] == ["exit", "exit"]
    assert ends[0]["step"] == ends[1]["step"] and ends[0]["step"] % 10 == 0
