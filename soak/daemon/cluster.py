"""The agent's part in a cluster run: joining the shared run, the version lock and barrier
before training, rejoining after a resume, the once-a-second look at the other nodes
(liveness, the judging lease, whole-job restarts, the lost-node policy, the judge's end),
this node's own analysis, and its last word at the end.

``ClusterMembership`` is the cluster's ``soak.daemon.membership.Membership``: the daemon
calls it where a node of a cluster run acts otherwise than a run on one host, and hands it
what it needs of the run with each call. The membership rules themselves (join, barrier,
silence, leader) are in ``soak.cluster.member``.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from soak.analysis.model import PEER_KINDS
from soak.clock import ScaledClock
from soak.cluster.analysis import NODE_KINDS, analyze_node, write_node_buckets
from soak.cluster.member import ClusterMember
from soak.cluster.node import node_address, node_name, node_rank
from soak.config import Plan, WorkloadSpec, recorded_plan
from soak.daemon import burnin, runfolder
from soak.daemon.started import StartedRun
from soak.daemon.supervisor import Supervisor
from soak.errors import ClusterError, StoreError
from soak.runplan import online_bucket_s
from soak.store import RunRecord, Store
from soak.workloads.linktest import NODE_NAME_ENV, NODE_RANK_ENV

log = logging.getLogger("soak.daemon")

CLOCK_CHECK_S = 300.0
"""How often (wall) a node measures its clock against the store's again during the run."""


class ClusterMembership:
    """This agent as one node of a cluster run."""

    def __init__(self, member: ClusterMember, out: TextIO, step_window_s: float) -> None:
        self.member = member
        self.out = out
        self.step_window_s = step_window_s  # the step rows' window the daemon was given
        # the job generation each workload's current attempt joined: an older one is restarted
        self._attempt_generation: dict[str, int] = {}
        self._last_tick = 0.0  # monotonic
        self._last_clock = time.monotonic()  # the join measured it
        self._clock_off = False  # past cluster.max_clock_offset at the last measure
        self._moved: Callable[[StartedRun], None] | None = None  # the daemon's, given to start_training
        self._end_at: tuple[float, float] | None = None  # (planned end, monotonic) when this node reached it
        self._last_look = 0.0  # monotonic: the last look for the burn-in clock's decision
        self._said_wait = False

    @classmethod
    def of_plan(cls, plan: Plan, store: Store, run_id: str, *, out: TextIO,
                step_window_s: float) -> ClusterMembership:
        """This node of the plan's cluster run (its name and rank checked here)."""
        c = plan.cluster
        member = ClusterMember(plan, store, run_id, node_name(c.node_name), node_rank(c.node_rank, c.nodes))
        return cls(member, out, step_window_s)

    @property
    def plan(self) -> Plan:
        return self.member.plan

    @property
    def node(self) -> str:
        return self.member.node

    @property
    def address(self) -> str:
        """Where the other nodes reach this one: its row's ``host``, where the job's
        rendezvous moves when this node is the live node of lowest rank and the host is gone."""
        c = self.plan.cluster
        assert c.rendezvous is not None
        return node_address(c.advertise, c.rendezvous, self.member.rank)

    @property
    def owns_run_row(self) -> bool:
        return self.member.rank == 0

    def _say(self, line: str) -> None:
        self.out.write(f"soak: {line}\n")
        self.out.flush()

    # ------------------------------------------------------------------ joining
    def start(self, plan: Plan, run_id: str, run_dir: Path, store: Store, profile: Any) -> StartedRun:
        """Join (or create) the cluster run in the shared store; the run's time line is the
        first node's."""
        member, c = self.member, plan.cluster
        started = time.time()
        rec = member.join(dict(
            host=socket.gethostname(), plan=recorded_plan(plan), started_ts=started,
            planned_end_ts=started + plan.run.duration_s, workload=plan.workloads[0].name,
            backend=plan.devices.backend, time_scale=plan.run.time_scale, run_dir=str(run_dir),
        ), host=self.address, listen=plan.exporter.listen)
        # plan.toml marks a run that started: written only once the join is accepted, so a
        # refused join leaves nothing that refuses the corrected command (runfolder.make_run_dir)
        runfolder.write_plan(run_dir, plan)
        self._say(f"node {member.node} (rank {member.rank} of {c.nodes}) joined cluster run {run_id}")
        clock = ScaledClock.of_run(rec)
        return StartedRun(run_id, run_dir, plan, profile, store, clock, rec.started_ts,
                          rec.planned_end_ts or rec.started_ts + plan.run.duration_s, 0, False)

    def resume(self) -> None:
        """A node of a cluster run comes back: it joins again."""
        self.member.join({}, host=self.address, listen=self.plan.exporter.listen)

    def planned_end_moved(self, run: StartedRun) -> None:
        # every node's duration counts from the barrier, where rank 0 records it (start_training)
        return None

    def start_training(self, run: StartedRun, *, resumed: bool, manifest: dict[str, Any] | None,
                       preflight: str | None, chips: int | None, moved: Callable[[StartedRun], None]) -> None:
        self._moved = moved  # the burn-in clock moves the planned end later on (at_planned_end, tick)
        if resumed:
            self._rejoin(run)
        else:
            self._prepare(run, manifest, preflight, chips, moved)

    def _prepare(self, run: StartedRun, manifest: dict[str, Any] | None, preflight: str | None,
                 chips: int | None, moved: Callable[[StartedRun], None]) -> None:
        """Record this node's manifest and preflight, wait for the others, check the version
        lock; the soak's duration then counts from here."""
        member = self.member
        member.prepared(manifest=manifest, preflight=preflight, chips=chips)
        member.barrier(self._say)
        run = replace(run, planned_end_ts=run.clock.now() + self.plan.run.duration_s)
        moved(run)  # before the store has it: a run that fails from here ends on this time line
        if self.owns_run_row:
            run.store.update_run(run.run_id, planned_end_ts=run.planned_end_ts)
        self._say(f"all {member.nodes} nodes joined; training across nodes (rendezvous {self.plan.cluster.rendezvous})")

    def _rejoin(self, run: StartedRun) -> None:
        """A resumed node joins the running job: the next generation counts it again."""
        member = self.member
        member.touch(force=True, status="running")
        seen = member.stored_generation()
        if run.store.bump_generation(run.run_id, seen):
            run.store.add_event(
                run.run_id, "cluster_restart", ts=run.clock.now(), node=member.node,
                message=f"node {member.node} is back: the job restarts with it (generation {seen + 1})",
                detail={"node": member.node, "generation": seen + 1, "rejoined": True})
        self._say(f"node {member.node} rejoined cluster run {run.run_id}")

    # ------------------------------------------------------------------ the workloads
    def rendezvous(self, workloads: Sequence[WorkloadSpec]) -> Callable[[], Any] | None:
        member = self.member

        def rendezvous() -> Any:
            before = member.rendezvous_at
            rdzv = member.rendezvous(self.address)
            for w in workloads:
                self._attempt_generation[w.name] = member.generation
            at = member.rendezvous_at
            if before is not None and at is not None and at != before:
                self._say(f"the job's rendezvous moved to node {at.node} at {at.endpoint}"
                          + (" (this node hosts it)" if rdzv.is_host else ""))
            return rdzv

        return rendezvous

    def workload_env(self) -> dict[str, str]:
        # the link test names the nodes as the store does
        return {NODE_NAME_ENV: self.member.node, NODE_RANK_ENV: str(self.member.rank)}

    def metric_labels(self, run_id: str) -> dict[str, str] | None:
        return {"node": self.member.node, "run_id": run_id}

    def workload_failed(self, run: StartedRun, kind: str, message: str, workload: str | None,
                        rank: int | None, detail: dict[str, Any] | None = None) -> tuple[str, str, dict[str, Any]]:
        # torchrun's semantics: one failure restarts the whole job. The node that moves
        # the job's generation first is named; the others' failures follow from it. At
        # the planned end the first node to stop ends the job for the others. A note keeps
        # the failure's kind and which of these it was (``cluster_note``), its message's values.
        detail = dict(detail or {})
        ending = run.clock.wall_seconds(run.planned_end_ts - run.clock.now()) < 10.0
        if ending:
            return ("note", f"{message} (at the end of the run: another node stopped first)",
                    {**detail, "failure": kind, "cluster_note": "run_ending"})
        if not self.member.job_failed(workload or "", message, rank, failure={"kind": kind, **detail}):
            return ("note", f"{message} (the cluster job had failed on another node)",
                    {**detail, "failure": kind, "cluster_note": "failed_elsewhere"})
        return kind, message, detail

    # ------------------------------------------------------------------ during the run
    def tick(self, run: StartedRun, supervisors: Sequence[Supervisor], *, restarts: int, chips: int | None,
             store_back_at: float | None) -> str | None:
        """Liveness, whole-job restarts and the lost-node policy; a reason to stop, or None."""
        member = self.member
        # The loop turns 4x a second; the store is shared by every node: look once a second
        # (the liveness bound is node_silence, tens of seconds), one read of the run row.
        now_mono = time.monotonic()
        if now_mono - self._last_tick < 1.0:
            return None
        self._last_tick = now_mono
        member.touch(restarts=restarts, chips=chips)
        if now_mono - self._last_clock >= CLOCK_CHECK_S:
            self._last_clock = now_mono
            self.check_clock(run)
        stored_run = run.store.get_run(run.run_id)
        stored = member.generation if stored_run is None else stored_run.generation
        if (stored_run is not None and burnin.on(run.profile.evidence) and stored_run.planned_end_ts is not None
                and stored_run.planned_end_ts > run.planned_end_ts):
            # the judge's burn-in clock moved the run's end: this node trains on to it too
            self._adopt(run, stored_run.planned_end_ts, stored_run.leader)
        for s in supervisors:
            if self._attempt_generation.get(s.name, stored) < stored and s.state == "running":
                s.restart_now(f"the cluster job restarts (generation {stored})")
        if stored_run is not None and stored_run.status != "running":
            return f"cluster run {stored_run.status}"
        if store_back_at is not None and now_mono - store_back_at < self.plan.cluster.node_silence_s:
            # the store was away from every node alike: each gets node_silence to be seen again
            if member.leading:  # and the judge keeps its lease meanwhile
                member.leader()
            return None
        if member.leader():
            lost = member.find_lost()
            if lost and self.plan.cluster.on_node_lost == "stop":
                return f"node {', '.join(n.name for n in lost)} lost"
            member.move_rendezvous(lost)  # its host gone, the next generation meets elsewhere
            if lost and run.store.bump_generation(run.run_id, stored):
                names = ", ".join(n.name for n in lost)
                run.store.add_event(
                    run.run_id, "cluster_restart", ts=run.clock.now(), node=member.node,
                    message=f"node {names} lost: the job restarts on the other nodes (generation {stored + 1})",
                    detail={"lost": [n.name for n in lost], "generation": stored + 1})
        elif stored_run is not None:
            return self._judge_ended(stored_run)
        return None

    # ------------------------------------------------------------------ the burn-in clock
    def at_planned_end(self, run: StartedRun, decide: Callable[[StartedRun], StartedRun | None]) -> bool | None:
        """One decision for the cluster: the holder of the judging lease decides from every
        node's events (``decide``); every other node trains on while it waits for that
        decision in the run row, at most ``burnin.decision_wait_s``, then ends as planned."""
        member = self.member
        now_mono = time.monotonic()
        if self._end_at is None or self._end_at[0] != run.planned_end_ts:
            self._end_at, self._last_look, self._said_wait = (run.planned_end_ts, now_mono), 0.0, False
        if now_mono - self._last_look < 1.0:  # the store is shared by every node: a look a second
            return None
        self._last_look = now_mono
        held = member.leading
        # A lease taken only now (its holder died at the end) decides at the next look: the
        # loop's tick first marks the silent holder lost, a failure the decision must count.
        if member.leader() and held:
            # the moved duration lives in the run row only: this node's plan.toml keeps the plan
            # it joined with, whose digest a resumed agent's join is checked against
            if decide(run) is not None:
                return True
            # this node's row leaves 'running' before its workload stops (which fails the
            # others'): the other nodes read there that the run ends now
            member.touch(force=True, status="finished")
            return False
        stored = run.store.get_run(run.run_id)
        if stored is None:
            raise StoreError(f"cluster run {run.run_id}: its row is gone from the store")
        judge_status = next((n.status for n in run.store.cluster_nodes(run.run_id) if n.name == stored.leader),
                            None) if stored.leader else None
        bound = burnin.decision_wait_s(self.plan, run.profile.evidence)
        f = burnin.follow(run.planned_end_ts, stored_end=stored.planned_end_ts, run_status=stored.status,
                          judge=stored.leader, judge_status=judge_status, waited_s=now_mono - self._end_at[1],
                          bound_s=bound)
        judge = f"node {f.judge}" if f.judge else "the judging node"
        if f.code == burnin.MOVED:
            self._adopt(run, f.planned_end, f.judge)
            return True
        if f.code == burnin.ENDS:
            log.info("burn-in clock: %s decided that the run ends at its planned end", judge)
            return False
        if f.code == burnin.UNDECIDED:
            line = (f"burn-in clock: no decision from {judge} within {bound:.0f} s of this node's planned end; "
                    "this node ends at its planned end")
            log.error("%s", line)
            self._say(line)
            return False
        if not self._said_wait:
            self._said_wait = True
            log.info("at the planned end: waiting (at most %.0f s) for the burn-in clock's decision by %s", bound, judge)
        return None

    def _adopt(self, run: StartedRun, planned_end: float, judge: str | None) -> None:
        """This node's planned end moved to the run row's (the judge's burn-in clock moved it)."""
        start = run.planned_end_ts - run.plan.run.duration_s
        if self._moved is not None:
            self._moved(burnin.moved(run, planned_end))
        if run.clock.wall_seconds(planned_end - run.planned_end_ts) < 1.0:
            # rank 0 recorded the end it set at the barrier a little after this node set its own
            log.info("node %s: planned end %.2f s later, as the run row has it", self.member.node,
                     planned_end - run.planned_end_ts)
            return
        line = (f"node {self.member.node}: the run's planned end moved to {planned_end - start:.0f} s into the soak"
                + (f" (decided by node {judge})" if judge else ""))
        log.warning("%s", line)
        self._say(line)

    @property
    def clock_offset_s(self) -> float | None:
        return self.member.clock_offset_s

    def check_clock(self, run: StartedRun) -> float:
        """Measure this node's clock against the store's again: a drift past
        ``cluster.max_clock_offset`` is a ``clock_drift`` event (and one when it is back
        within), so readings stamped on a drifting clock are named; the run goes on."""
        offset = self.member.clock_offset()
        bound = self.plan.cluster.max_clock_offset_s
        off = abs(offset) > bound
        if off != self._clock_off:
            self._clock_off = off
            what = (f"node {self.member.node}: its clock drifted {offset:+.1f} s off the store's (bound {bound:g} s, "
                    "cluster.max_clock_offset): its readings' times are off by as much") if off else (
                    f"node {self.member.node}: its clock is back within {bound:g} s of the store's ({offset:+.1f} s)")
            (log.error if off else log.warning)("%s", what)
            run.store.add_event(run.run_id, "clock_drift", ts=run.clock.now(), node=self.member.node, message=what,
                                detail={"node": self.member.node, "offset_s": round(offset, 3), "bound_s": bound,
                                        "off": off})
        return offset

    def _judge_ended(self, stored_run: RunRecord) -> str | None:
        """A reason to stop once the lease holder's node has stopped or failed: it judges the
        run as it ended there, so this node's part ends now (not after the holder's wait)."""
        judge = self.member.judge_ended(stored_run)
        if judge is None:
            return None
        return f"node {judge.name} {judge.status}, which judges the run"

    # ------------------------------------------------------------------ analysis
    def node_findings(self, run: StartedRun, *, final: bool) -> list[dict[str, Any]]:
        """This node's part of a cluster run's analysis: its own chips' findings and its
        bucket summaries up to now (``final``: to the end), into the shared store. Every
        node does this for its own chips; the leader compares and judges from what they left."""
        plan, node = self.plan, self.member.node
        now = run.clock.now()
        result = analyze_node(run.store, run.run_id, node, plan=plan, profile=run.profile,
                              now=None if final else now,
                              bucket_s=None if final else online_bucket_s(plan, now - run.started_ts))
        findings = [f.to_dict() for f in result.findings]
        run.store.replace_findings(run.run_id, findings, node=node, kinds=NODE_KINDS)
        # samples reach the store every flush, step rows every step window: a bucket is
        # summarised once both have surely landed
        lag = (plan.sampling.flush_every_s + self.step_window_s + 5.0) * run.clock.scale
        write_node_buckets(run.store, run.run_id, node, plan=plan, profile=run.profile,
                           planned_start=run.planned_end_ts - run.plan.run.duration_s,
                           planned_end=run.planned_end_ts,
                           upto=min(now, run.planned_end_ts) if final else now - lag, final=final)
        return findings

    def judges(self) -> bool:
        return self.member.leader()

    def keep_findings(self, run: StartedRun, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # the leader writes the comparison's findings; each node its own (node_findings)
        peer = [f for f in findings if f["kind"] in PEER_KINDS]
        run.store.replace_findings(run.run_id, peer, kinds=PEER_KINDS)
        return peer

    # ------------------------------------------------------------------ the end
    def ended(self, run: StartedRun, *, status: str, ended_ts: float, restarts: int,
              fatal: BaseException | None) -> bool:
        """This node's last word on its own chips, then that it is done; the holder of the
        judging lease (or, where it is free or expired, this node) waits (bounded) for the
        others and judges, every other node says who does."""
        member = self.member
        if not isinstance(fatal, ClusterError):
            try:  # this node's last word on its own chips, before it says it is done
                self.node_findings(run, final=True)
            except StoreError:
                raise
            except Exception:
                log.exception("final analysis of this node's chips")
        member.touch(force=True, status=status, ended_ts=ended_ts, restarts=restarts)
        if isinstance(fatal, ClusterError):  # the cluster never started: nothing to judge
            raise StoreError(str(fatal))
        if not member.lead_at_end():
            self._say(f"node {member.node} {status}; {self._judge_words(run)} "
                      f"(soak cluster status {run.run_id} --db URL)")
            return False
        member.wait_for_others(self.plan.cluster.node_silence_s + 30.0)
        self._say(f"node {member.node} judges cluster run {run.run_id}")
        return True

    def _judge_words(self, run: StartedRun) -> str:
        """Who judges the run, when this node does not."""
        rec = run.store.get_run(run.run_id)
        if rec is None or rec.leader is None:
            return f"no node judges cluster run {run.run_id} yet"
        if rec.lease_until is None:
            return f"node {rec.leader} judged cluster run {run.run_id} ({rec.status})"
        return f"node {rec.leader} judges cluster run {run.run_id}"

    def finish(self, run: StartedRun, *, status: str, ended_ts: float, verdict: str | None) -> bool:
        """The run's end and verdict, if this node still holds the judging lease; the report
        finds the analysis in this node's run folder."""
        return self.member.finish(status=status, ended_ts=ended_ts, verdict=verdict, run_dir=str(run.run_dir))
