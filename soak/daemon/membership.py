"""How this agent takes part in its run: alone, or as one node of a cluster run.

``Membership`` names every point where a node of a cluster run acts otherwise than a run on
one host; the daemon (``soak.daemon.lifecycle``) calls it there and never asks which kind it
has. ``SingleNode`` is a run on one host: it owns the run row and judges the run itself. A
node of a cluster run is ``soak.daemon.cluster.ClusterMembership``.

A membership holds only its own state; what it needs of the run (the started run, the
supervisors, the restarts so far, the chips read) comes with each call.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from soak.clock import ScaledClock
from soak.config import Plan, WorkloadSpec, recorded_plan
from soak.daemon import runfolder
from soak.daemon.started import StartedRun
from soak.daemon.status import duration_words, workload_words
from soak.daemon.supervisor import Supervisor
from soak.store import Store


class Membership(Protocol):
    """This agent's part in its run, called by the daemon at each point where it matters."""

    @property
    def node(self) -> str | None:
        """The node name this agent's rows and events carry; None on a single node."""

    @property
    def owns_run_row(self) -> bool:
        """Whether this agent writes what the run row holds for every node (the manifest)."""

    @property
    def clock_offset_s(self) -> float | None:
        """This node's clock minus the store's, last measured; None where no store clock matters."""

    def start(self, plan: Plan, run_id: str, run_dir: Path, store: Store, profile: Any) -> StartedRun:
        """A new run: its row made (or, for a cluster, joined) and its time line set."""

    def resume(self) -> None:
        """A resumed run is taken up again, before its gap and resume events are written."""

    def planned_end_moved(self, run: StartedRun) -> None:
        """The planned end moved past the preflight (``run.planned_end_ts``): recorded,
        unless this agent's duration counts from a later point (``start_training``)."""

    def rendezvous(self, workloads: Sequence[WorkloadSpec]) -> Callable[[], Any] | None:
        """The multi-node rendezvous of each workload attempt; None: torchrun's own."""

    def workload_env(self) -> dict[str, str]:
        """Environment the workloads get beside the daemon's own."""

    def metric_labels(self, run_id: str) -> dict[str, str] | None:
        """Labels every series of this agent's /metrics carries."""

    def start_training(self, run: StartedRun, *, resumed: bool, manifest: dict[str, Any] | None,
                       preflight: str | None, chips: int | None, moved: Callable[[StartedRun], None]) -> None:
        """Telemetry runs and the workloads are about to start; ``moved`` is given the run
        when its planned end moves here (a cluster's duration counts from its barrier)."""

    def workload_failed(self, run: StartedRun, kind: str, message: str, workload: str | None,
                        rank: int | None, detail: dict[str, Any] | None = None) -> tuple[str, str, dict[str, Any]]:
        """The (kind, message, detail) a workload's crash or hang is recorded as; ``detail``:
        the supervisor's (exit code or time stalled)."""

    def tick(self, run: StartedRun, supervisors: Sequence[Supervisor], *, restarts: int, chips: int | None,
             store_back_at: float | None) -> str | None:
        """One turn of the daemon's loop while the store answers; a reason to stop, or None."""

    def at_planned_end(self, run: StartedRun, decide: Callable[[StartedRun], StartedRun | None]) -> bool | None:
        """At or past the planned end with the burn-in clock on (``soak.daemon.burnin``): True
        when the run goes on to a later end (this agent's started run moved already), False
        when it ends now, None while this agent waits for the decision. ``decide`` is the
        clock's decision, recorded: the moved run, or None."""

    def node_findings(self, run: StartedRun, *, final: bool) -> list[dict[str, Any]] | None:
        """This node's own analysis, stored; None where the run's judgement is this node's."""

    def judges(self) -> bool:
        """Whether this agent judges the run now: the online analysis, and the final one
        before its verdict is written (a cluster run: it holds the judging lease)."""

    def keep_findings(self, run: StartedRun, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Store the findings of an online judgement this agent answers for; those, to announce."""

    def ended(self, run: StartedRun, *, status: str, ended_ts: float, restarts: int,
              fatal: BaseException | None) -> bool:
        """This node's part of the run ended (recorded); whether this agent goes on to judge
        the run, or leaves it to another node."""

    def finish(self, run: StartedRun, *, status: str, ended_ts: float, verdict: str | None) -> bool:
        """Record the judged run's end and verdict; False where this agent may not (another
        holds a cluster run's judging lease, or has judged it): nothing written."""


class SingleNode:
    """A run on one host: the run row and the judgement are this agent's alone."""

    node: str | None = None
    owns_run_row: bool = True
    clock_offset_s: float | None = None

    def start(self, plan: Plan, run_id: str, run_dir: Path, store: Store, profile: Any) -> StartedRun:
        clock = ScaledClock(scale=plan.run.time_scale, origin=time.time())
        started = clock.now()
        runfolder.write_plan(run_dir, plan)
        store.create_run(
            run_id, host=socket.gethostname(), plan=recorded_plan(plan), started_ts=started,
            planned_end_ts=started + plan.run.duration_s, workload=",".join(w.name for w in plan.workloads),
            backend=plan.devices.backend, time_scale=plan.run.time_scale, run_dir=str(run_dir),
        )
        store.add_event(run_id, "start", ts=started,
                        message=f"run started: {workload_words(plan)} for {duration_words(plan.run.duration_s)}",
                        detail={"pid": os.getpid(), "time_scale": plan.run.time_scale,
                                "workloads": [{"name": w.name, "nproc": w.nproc} for w in plan.workloads],
                                "duration_s": plan.run.duration_s})
        return StartedRun(run_id, run_dir, plan, profile, store, clock, started, started + plan.run.duration_s,
                          0, False)

    def resume(self) -> None:
        return None

    def planned_end_moved(self, run: StartedRun) -> None:
        run.store.update_run(run.run_id, planned_end_ts=run.planned_end_ts)

    def rendezvous(self, workloads: Sequence[WorkloadSpec]) -> Callable[[], Any] | None:
        return None

    def workload_env(self) -> dict[str, str]:
        return {}

    def metric_labels(self, run_id: str) -> dict[str, str] | None:
        return None

    def start_training(self, run: StartedRun, *, resumed: bool, manifest: dict[str, Any] | None,
                       preflight: str | None, chips: int | None, moved: Callable[[StartedRun], None]) -> None:
        return None

    def workload_failed(self, run: StartedRun, kind: str, message: str, workload: str | None,
                        rank: int | None, detail: dict[str, Any] | None = None) -> tuple[str, str, dict[str, Any]]:
        return kind, message, dict(detail or {})

    def tick(self, run: StartedRun, supervisors: Sequence[Supervisor], *, restarts: int, chips: int | None,
             store_back_at: float | None) -> str | None:
        return None

    def at_planned_end(self, run: StartedRun, decide: Callable[[StartedRun], StartedRun | None]) -> bool | None:
        moved = decide(run)
        if moved is None:
            return False
        runfolder.write_plan(moved.run_dir, moved.plan)
        return True

    def node_findings(self, run: StartedRun, *, final: bool) -> list[dict[str, Any]] | None:
        return None

    def judges(self) -> bool:
        return True

    def keep_findings(self, run: StartedRun, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
        run.store.replace_findings(run.run_id, findings)
        return findings

    def ended(self, run: StartedRun, *, status: str, ended_ts: float, restarts: int,
              fatal: BaseException | None) -> bool:
        run.store.update_run(run.run_id, restarts=restarts)
        return True

    def finish(self, run: StartedRun, *, status: str, ended_ts: float, verdict: str | None) -> bool:
        return run.store.finish_run(run.run_id, status=status, ended_ts=ended_ts, verdict=verdict)
