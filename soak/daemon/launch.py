"""The command of each workload attempt: torchrun with the workload's own arguments, the
plan's device, profiler and link-test settings, and (in a cluster run) the rendezvous of the
job's current generation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from soak.config import Plan, WorkloadSpec

ArgvFactory = Callable[[WorkloadSpec, Path, int, float], list[str]]


def default_argv(plan: Plan, rendezvous: Callable[[], Any] | None = None) -> ArgvFactory:
    """torchrun argv of a workload attempt; ``wall_left_s`` bounds the attempt so that an
    orphan of a killed daemon (where Linux's parent-death signal did not end it) ends by
    itself near the run's planned end. ``rendezvous``
    gives a cluster run's multi-node rendezvous of the current job generation."""
    from soak.workloads.launch import build_command

    device = {"sim": "cpu", "cpu": "cpu", "npu": "npu", "cuda": "cuda"}.get(plan.devices.backend, "auto")

    cap = plan.capture
    profile_args = ("--profile-steps", str(cap.steps), "--profile-every-s", f"{cap.every_s:g}",
                    "--profile-max-mb", f"{cap.max_trace_bytes / 1e6:g}")

    link_args: tuple[str, ...] = ()
    if plan.cluster.nodes > 1:  # the pairwise link test: wall seconds, as the workers count
        scale = plan.run.time_scale if plan.run.time_scale > 0 else 1.0
        link_args = ("--link-test-every-s", f"{plan.cluster.link_test_every_s / scale:g}",
                     "--link-test-bytes", str(plan.cluster.link_test_bytes))

    num = plan.numerics
    numerics_args = ("--check-every", str(num.check_every), "--spike-multiple", f"{num.spike_multiple:g}",
                     *(() if num.align_steps is None else ("--align-steps", str(num.align_steps))))

    def argv(w: WorkloadSpec, run_dir: Path, attempt: int, wall_left_s: float) -> list[str]:
        own = numerics_args if w.name == "lm" else ()  # the workload that trains
        return build_command(w.name, run_dir, w.nproc, w.size, duration_s=max(1.0, wall_left_s + 30.0),
                             inject=plan.faults.inject,
                             extra=("--device-backend", device, *profile_args, *link_args, *own, *w.extra),
                             rendezvous=None if rendezvous is None else rendezvous())

    return argv
