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
        # every collective of the gloo ranks (separate processes on loopback, as a cluster's nodes
        # here) returned the exact result: no silent-data-corruption event
        assert not [r for r in lines if r["event"] == "sdc_mismatch"] and lines[-1]["sdc_mismatches"] == 0
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


class _Planted:
    """Unpickled, it runs a command: what anyone who can write a run folder could leave as
    its newest checkpoint."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


@pytest.mark.slow
def test_a_planted_pickle_checkpoint_does_not_run_on_resume(launcher):
    import torch

    run = launcher.run_dir
    marker = run / "pwned"
    ck = Checkpointer(run, "gemm")
    ck.dir.mkdir(parents=True)
    torch.save({"step": 5, "workload": {}, "rng": _Planted(str(marker))}, ck.path(5))

    assert launcher.run("gemm", steps=10) != 0
    assert not marker.exists()
    log = launcher.log()
    assert "step_5.pt: not a checkpoint soak wrote, not loaded (Trying to load unsupported GLOBAL posix.system" in log


def test_a_checkpoint_of_every_kind_soak_writes_loads_with_weights_only(tmp_path):
    # what the workloads save: tensors, an optimizer's state, Python's RNG state (a tuple),
    # the plan's options (str, int, float, bool, None, lists)
    import random

    import torch

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    ck = Checkpointer(tmp_path, "lm")
    state = {"step": 7, "workload": {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                     "config": {"d": 3, "lr": 0.1}, "dtype": "torch.float32"},
             "rng": {"python": random.getstate(), "torch": torch.get_rng_state(), "device": None},
             "config": {"inject": ["leak:1MB/min"], "steps": None, "no_heartbeat": False, "run_dir": "r"}}
    ck.save(7, state)
    back = ck.load(7)
    assert back["rng"]["python"] == random.getstate()
    assert torch.equal(back["workload"]["model"]["weight"], model.state_dict()["weight"])
    assert back["config"] == state["config"]
