"""The agent's part in a cluster run: joining the shared run, the version lock and barrier
before training, rejoining after a resume, and the once-a-second look at the other nodes
(liveness, whole-job restarts, the lost-node policy).

``ClusterAgent`` is a base class of ``soak.daemon.lifecycle.Daemon``: these methods use the
daemon's plan, output, started run, supervisors and stop request. The membership rules
themselves (join, barrier, silence, leader) are in ``soak.cluster.member``.
"""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from soak import runfolder as layout
from soak.clock import ScaledClock
from soak.cluster.member import ClusterMember
from soak.cluster.node import node_name, node_rank
from soak.config import dump_plan
from soak.daemon.started import StartedRun
from soak.store import Store


class ClusterAgent:
    """Cluster membership of a ``Daemon`` (mixed in; single-node runs never call it)."""

    def _join_cluster(self, run_id: str, run_dir: Path, store: Store, profile: Any) -> StartedRun:
        """Join (or create) the cluster run in the shared store; the run's time line is the
        first node's."""
        plan = self.plan
        c = plan.cluster
        member = ClusterMember(plan, store, run_id, node_name(c.node_name), node_rank(c.node_rank, c.nodes))
        started = time.time()
        rec = member.join(dict(
            host=socket.gethostname(), plan=plan.to_dict(), started_ts=started,
            planned_end_ts=started + plan.run.duration_s, workload=plan.workloads[0].name,
            backend=plan.devices.backend, time_scale=plan.run.time_scale, run_dir=str(run_dir),
        ), host=socket.gethostname(), listen=plan.exporter.listen)
        # plan.toml marks a run that started: written only once the join is accepted, so a
        # refused join leaves nothing that refuses the corrected command (runfolder.make_run_dir)
        layout.plan_path(run_dir).write_text(dump_plan(plan), encoding="utf-8")
        self.member = member
        self.out.write(f"soak: node {member.node} (rank {member.rank} of {c.nodes}) joined cluster run {run_id}\n")
        self.out.flush()
        clock = ScaledClock(scale=rec.time_scale, origin=rec.started_ts)
        return StartedRun(run_id, run_dir, plan, profile, store, clock, rec.started_ts,
                          rec.planned_end_ts or rec.started_ts + plan.run.duration_s, 0, False)

    def _prepare_cluster(self, manifest: dict[str, Any] | None, preflight: str | None) -> None:
        """Record this node's manifest and preflight, wait for the others, check the version
        lock; the soak's duration then counts from here."""
        member = self.member
        assert member is not None
        latest = self._latest_snapshot
        chips = None if latest is None else len(latest.devices)
        member.prepared(manifest=manifest, preflight=preflight, chips=chips)

        def say(line: str) -> None:
            self.out.write(f"soak: {line}\n")
            self.out.flush()

        member.barrier(say)
        end = self.started.clock.now() + self.plan.run.duration_s
        self.started = replace(self.started, planned_end_ts=end)
        if member.rank == 0:
            self.started.store.update_run(self.started.run_id, planned_end_ts=end)
        say(f"all {member.nodes} nodes joined; training across nodes (rendezvous {self.plan.cluster.rendezvous})")

    def _rejoin_cluster(self) -> None:
        """A resumed node joins the running job: the next generation counts it again."""
        member = self.member
        assert member is not None
        member.touch(force=True, status="running")
        seen = member.stored_generation()
        if self.started.store.bump_generation(self.started.run_id, seen):
            self.started.store.add_event(
                self.started.run_id, "cluster_restart", ts=self.started.clock.now(), node=member.node,
                message=f"node {member.node} is back: the job restarts with it (generation {seen + 1})",
                detail={"node": member.node, "generation": seen + 1, "rejoined": True})
        self.out.write(f"soak: node {member.node} rejoined cluster run {self.started.run_id}\n")
        self.out.flush()

    def _cluster_tick(self) -> None:
        """Liveness, whole-job restarts and the lost-node policy (cluster runs)."""
        member = self.member
        assert member is not None
        # The loop turns 4x a second; the store is shared by every node: look once a second
        # (the liveness bound is node_silence, tens of seconds), one read of the run row.
        now_mono = time.monotonic()
        if now_mono - self._last_cluster_tick < 1.0:
            return
        self._last_cluster_tick = now_mono
        latest = self._latest_snapshot
        member.touch(restarts=self._restarts(), chips=None if latest is None else len(latest.devices))
        run = self.started.store.get_run(self.started.run_id)
        stored = member.generation if run is None else run.generation
        for s in self.supervisors:
            if self._attempt_generation.get(s.name, stored) < stored and s.state == "running":
                s.restart_now(f"the cluster job restarts (generation {stored})")
        if run is not None and run.status != "running":
            self.request_stop(f"cluster run {run.status}")
            return
        back = self.spool.back_at
        if back is not None and now_mono - back < self.plan.cluster.node_silence_s:
            # the store was away from every node alike: each gets node_silence to be seen again
            return
        if member.leader():
            lost = member.find_lost()
            if lost and self.plan.cluster.on_node_lost == "stop":
                self.request_stop(f"node {', '.join(n.name for n in lost)} lost")
            elif lost and self.started.store.bump_generation(self.started.run_id, stored):
                names = ", ".join(n.name for n in lost)
                self.started.store.add_event(
                    self.started.run_id, "cluster_restart", ts=self.started.clock.now(), node=member.node,
                    message=f"node {names} lost: the job restarts on the other nodes (generation {stored + 1})",
                    detail={"lost": [n.name for n in lost], "generation": stored + 1})
